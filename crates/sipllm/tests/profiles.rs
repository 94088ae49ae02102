//! `sipllm profile` as a user runs it: profiles listed, shown, exported, imported and
//! cleared; backup copies, the read-only system store, hostile paths and hostile texts.

#[path = "common/cli.rs"]
mod cli;
mod common;

use cli::{
    WORKLOAD, assert_refused, assert_refused_missing_dir, is_fifo, json_of, run, sipllm, stderr,
    with_watchdog,
};
use serde_json::Value;
use std::path::Path;

#[test]
fn profiles_are_listed_shown_exported_imported_and_cleared() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let tune = ["--json", "--quiet", "--workload", WORKLOAD];
    let tuned = json_of(&run(h, &tune));
    let path = tuned["path"].as_str().unwrap().to_string();
    let id = Path::new(&path)
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();

    let list = run(h, &["profile", "list", "--json"]);
    let rows: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["id"], id.as_str());
    assert_eq!(rows[0]["store"], "user");
    assert_eq!(rows[0]["valid"], true);
    assert_eq!(rows[0]["workload"], "48x80 f32");
    let text = String::from_utf8(run(h, &["profile", "list"]).stdout).unwrap();
    assert!(text.contains(&id) && text.contains("valid"), "{text}");
    // The columns line up whatever the id's length (a workload's id is the longest).
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0].find("status"), lines[1].find("valid"), "{text}");
    assert_eq!(lines[0].find("workload"), lines[1].find("48x80"), "{text}");

    let show = run(h, &["profile", "show", &id]);
    assert!(show.status.success(), "{}", stderr(&show));
    let text = String::from_utf8(show.stdout).unwrap();
    assert!(text.contains("valid on this machine"), "{text}");
    assert!(text.contains("<- pick"), "the measurement table: {text}");
    // With no id, this machine's: said so when none is cached (another home, empty).
    let empty = tempfile::tempdir().unwrap();
    let none = run(empty.path(), &["profile", "show"]);
    assert!(!none.status.success());
    assert!(
        stderr(&none).contains("no profile of this machine (")
            && stderr(&none).contains(") for the default model is cached"),
        "{}",
        stderr(&none)
    );
    let missing = run(h, &["profile", "show", "nonexistent"]);
    assert!(!missing.status.success());
    assert!(
        stderr(&missing).contains("no profile nonexistent is cached, here or in the system store"),
        "{}",
        stderr(&missing)
    );

    let bundle = h.join("bundle.json");
    let export = run(
        h,
        &["profile", "export", "--output", bundle.to_str().unwrap()],
    );
    assert!(export.status.success(), "{}", stderr(&export));
    let cleared = run(h, &["profile", "clear"]);
    assert!(String::from_utf8_lossy(&cleared.stdout).contains("removed 1 profile"));
    assert!(!Path::new(&path).exists());
    let import = run(h, &["profile", "import", bundle.to_str().unwrap()]);
    assert!(import.status.success(), "{}", stderr(&import));
    assert!(Path::new(&path).exists());
    let said = String::from_utf8_lossy(&import.stdout).to_string();
    assert!(!said.contains("replaced"), "{said}");
    assert_eq!(json_of(&run(h, &tune))["source"], "cache");
    // Imported again, over itself: what it replaced is said.
    let again = run(h, &["profile", "import", bundle.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&again.stdout).to_string();
    assert!(
        said.contains("imported 1 profile (1 replaced a cached one)")
            && said.contains(&format!("{path} (replaced)")),
        "{said}"
    );

    // A bundle of this machine whose hardware has changed is refused, naming `--force`,
    // which takes it as this machine's.
    let exported: Value = serde_json::from_str(&std::fs::read_to_string(&bundle).unwrap()).unwrap();
    let mut changed = exported.clone();
    let l3 = changed["profiles"][0]["hardware"]["l3_total_bytes"]
        .as_u64()
        .unwrap();
    changed["profiles"][0]["hardware"]["l3_total_bytes"] = (l3 + (1 << 20)).into();
    std::fs::write(&bundle, changed.to_string()).unwrap();
    let cleared = run(h, &["profile", "clear"]);
    assert!(cleared.status.success(), "{}", stderr(&cleared));
    let refused = run(h, &["profile", "import", bundle.to_str().unwrap()]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("the machine has changed (l3_total_bytes")
            && stderr(&refused).contains("`sipllm profile import --force`"),
        "{}",
        stderr(&refused)
    );
    assert!(!Path::new(&path).exists(), "nothing was imported");
    let forced = run(
        h,
        &["profile", "import", "--force", bundle.to_str().unwrap()],
    );
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert_eq!(json_of(&run(h, &tune))["source"], "cache");

    // A foreign bundle imports nothing and says why.
    let mut foreign = exported;
    foreign["profiles"][0]["hardware_id"] = "aarch64_other_8c_16gb".into();
    std::fs::write(&bundle, foreign.to_string()).unwrap();
    let refused = run(h, &["profile", "import", bundle.to_str().unwrap()]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("entry 1: it belongs to another machine"),
        "{}",
        stderr(&refused)
    );
}

#[test]
fn a_home_named_by_bytes_that_are_not_utf8_is_that_directory_not_home() {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = tempfile::tempdir().unwrap();
    // `$HOME/.sipllm` holds a profile of its own, which nothing below may touch.
    let user_home = dir.path().join("user");
    let theirs = user_home.join(".sipllm/runtime");
    std::fs::create_dir_all(&theirs).unwrap();
    let tuned = json_of(
        &sipllm(
            &user_home.join(".sipllm"),
            &["--json", "--quiet", "--workload", WORKLOAD],
        )
        .output()
        .unwrap(),
    );
    let their_profile = Path::new(tuned["path"].as_str().unwrap()).to_path_buf();
    let odd = dir.path().join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
    let with_odd_home =
        |args: &[&str]| sipllm(&odd, args).env("HOME", &user_home).output().unwrap();
    let ours = json_of(&with_odd_home(&[
        "--json",
        "--quiet",
        "--workload",
        WORKLOAD,
    ]));
    assert_eq!(ours["source"], "measured");
    assert!(
        odd.join("runtime").is_dir(),
        "the profile goes under the home given"
    );
    let cleared = with_odd_home(&["profile", "clear", "--all"]);
    assert!(cleared.status.success(), "{}", stderr(&cleared));
    assert!(
        their_profile.exists(),
        "{}",
        String::from_utf8_lossy(&cleared.stdout)
    );
    assert_eq!(
        std::fs::read_dir(odd.join("runtime"))
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .count(),
        0
    );
    // A setting that is not UTF-8 is refused, not taken as unset.
    let threads = sipllm(&odd, &["--json"])
        .env("SIPLLM_THREADS", std::ffi::OsStr::from_bytes(b"2\xff"))
        .output()
        .unwrap();
    assert_refused(&threads, "SIPLLM_THREADS");
}

#[test]
fn a_backup_copy_is_listed_as_no_profile_and_never_exported() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let tuned = json_of(&run(h, &["--json", "--quiet", "--workload", WORKLOAD]));
    let path = Path::new(tuned["path"].as_str().unwrap()).to_path_buf();
    // `<hardware id>_w<key>.json`: the machine's file stem is before the workload's part.
    let stem = path.file_stem().unwrap().to_str().unwrap();
    let (machine, _) = stem.rsplit_once("_w").unwrap();
    let backup = path.with_file_name(format!("{machine}_backup.json"));
    std::fs::copy(&path, &backup).unwrap();

    let text = String::from_utf8(run(h, &["profile", "list"]).stdout).unwrap();
    let line = text.lines().find(|l| l.contains("_backup")).unwrap();
    assert!(line.contains("not used: not a profile name"), "{text}");
    let bundle = h.join("b3.json");
    let export = run(h, &["profile", "export", "-o", bundle.to_str().unwrap()]);
    assert!(export.status.success(), "{}", stderr(&export));
    assert!(
        stderr(&export).contains("exported 1 profile to"),
        "{}",
        stderr(&export)
    );
    assert!(
        stderr(&export).contains("_backup.json: not a profile name"),
        "{}",
        stderr(&export)
    );
    let other = tempfile::tempdir().unwrap();
    let import = run(
        other.path(),
        &["profile", "import", bundle.to_str().unwrap()],
    );
    assert!(import.status.success(), "{}", stderr(&import));
    assert!(String::from_utf8_lossy(&import.stdout).contains("imported 1 profile"));
    assert!(backup.exists(), "the copy is the user's, left alone");
}

#[test]
fn cached_only_and_the_system_store_never_measure() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let out = run(h, &["--json", "--cached-only", "--workload", WORKLOAD]);
    let v = json_of(&out);
    assert_eq!(v["source"], "defaults");
    assert!(stderr(&out).contains("cached-only"), "{}", stderr(&out));
    assert!(!h.join("runtime").exists(), "nothing is written");
    let env = sipllm(h, &["--json", "--workload", WORKLOAD])
        .env("SIPLLM_CACHED_ONLY", "1")
        .output()
        .unwrap();
    assert_eq!(json_of(&env)["source"], "defaults");

    // A profile shipped to the system store serves a machine whose user cache is empty.
    let donor = tempfile::tempdir().unwrap();
    let measured = json_of(&run(
        donor.path(),
        &["--json", "--quiet", "--workload", WORKLOAD],
    ));
    let path = Path::new(measured["path"].as_str().unwrap());
    let system = tempfile::tempdir().unwrap();
    let shipped = system.path().join(path.file_name().unwrap());
    std::fs::copy(path, &shipped).unwrap();
    let out = sipllm(h, &["--json", "--cached-only", "--workload", WORKLOAD])
        .env("SIPLLM_SYSTEM_PROFILES", system.path())
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["source"], "system");
    assert_eq!(v["path"], shipped.to_str().unwrap());
    assert_eq!(v["profile"], measured["profile"]);
}

#[test]
fn hostile_paths_for_export_and_import_are_refused_without_hanging() {
    with_watchdog("export and import with FIFOs", || {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().to_path_buf();
        json_of(&run(&h, &["--json", "--quiet", "--workload", WORKLOAD]));
        let fifo = h.join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // Import from a FIFO: refused at once, not a hang.
        let out = run(&h, &["profile", "import", fifo.to_str().unwrap()]);
        assert_refused(&out, "not a regular file");
        // A sparse file of a terabyte: refused by what was read, one byte past the limit,
        // and said as "more than", not as a size that was never read.
        let huge = h.join("huge.json");
        std::fs::File::create(&huge)
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        let out = run(&h, &["profile", "import", huge.to_str().unwrap()]);
        assert_refused(&out, "the bundle is more than 16777216 bytes");
        // Export onto a FIFO: refused, the FIFO left in place.
        let out = run(&h, &["profile", "export", "-o", fifo.to_str().unwrap()]);
        assert_refused(&out, "not a regular file");
        assert!(is_fifo(&fifo));
        // Export into a missing directory: refused by the directory's name.
        let missing = h.join("nodir");
        let dest = missing.join("b.json");
        let out = run(&h, &["profile", "export", "-o", dest.to_str().unwrap()]);
        assert_refused_missing_dir(&out, &dest);
        assert!(!stderr(&out).contains(".sipllm-"), "{}", stderr(&out));
        // `-o -` is stdout, as `import -` is stdin.
        let out = run(&h, &["profile", "export", "-o", "-"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let bundle: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(bundle["format_version"], 1);
        assert!(!h.join("-").exists());
        // Nothing to export is an error, not an unimportable bundle.
        let empty = tempfile::tempdir().unwrap();
        let out = run(empty.path(), &["profile", "export"]);
        assert_refused(&out, "no valid profile");
        // It names the store it read, not a made-up path.
        assert!(
            stderr(&out).contains(&format!(
                "profile store {}",
                empty.path().join("runtime").display()
            )) && !stderr(&out).contains("profile store export"),
            "{}",
            stderr(&out)
        );
    });
}

#[test]
fn profile_list_and_show_escape_terminal_codes_from_a_cached_file() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path().to_path_buf();
    json_of(&run(&h, &["--json", "--quiet", "--workload", WORKLOAD]));
    let runtime = h.join("runtime");
    let path = std::fs::read_dir(&runtime)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    // Another machine's profile whose every shown text is hostile.
    let fake = "x)\n\x1b[2K\x1b[32mimported 1 profile\x1b[0m\n\x1b[8m";
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["hardware_id"] = fake.into();
    v["request"]["workload"]["name"] = fake.into();
    v["crate_version"] = fake.into();
    v["kernel"] = fake.into();
    v["tuned_at"] = fake.into();
    let hostile = runtime.join("hostile.json");
    std::fs::write(&hostile, v.to_string()).unwrap();
    for args in [&["profile", "list"][..], &["profile", "show", "hostile"]] {
        let out = run(&h, args);
        for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            assert!(
                !bytes.contains(&0x1b),
                "{args:?}: an escape on {name}: {}",
                String::from_utf8_lossy(bytes)
            );
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("\\u{1b}[32mimported"), "{args:?}: {stdout}");
    }
}

#[test]
fn a_change_whose_report_is_lost_says_that_it_was_made() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let tuned = json_of(&run(h, &["--json", "--quiet", "--workload", WORKLOAD]));
    let path = tuned["path"].as_str().unwrap().to_string();
    let bundle = h.join("bundle.json");
    let export = run(h, &["profile", "export", "-o", bundle.to_str().unwrap()]);
    assert!(export.status.success(), "{}", stderr(&export));
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    for (args, done) in [
        (
            vec!["profile", "clear"],
            "the profiles were removed, but the report of it cannot be written",
        ),
        (
            vec!["profile", "import", bundle.to_str().unwrap()],
            "the profiles were imported, but the report of it cannot be written",
        ),
    ] {
        let out = sipllm(h, &args).stdout(full()).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(stderr(&out).contains(done), "{}", stderr(&out));
        // The change was made: the clear removed the profile, the import put it back.
        assert_eq!(Path::new(&path).exists(), args[1] == "import");
    }
}

#[test]
fn list_and_show_say_when_there_is_no_user_store() {
    let home = tempfile::tempdir().unwrap();
    // No home at all: neither variable is set.
    let out = common::hermetic(env!("CARGO_BIN_EXE_sipllm"))
        .args(["profile", "list"])
        .env_remove("HOME")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "warning: cannot locate the profile cache: neither SIPLLM_HOME nor HOME is set"
        ),
        "{}",
        stderr(&out)
    );
    // A home whose store is a file: named, and `show` does not promise a saved tune.
    std::fs::write(home.path().join("runtime"), "x").unwrap();
    let out = run(home.path(), &["profile", "list"]);
    assert!(
        stderr(&out).contains("runtime is not a directory"),
        "{}",
        stderr(&out)
    );
    let out = run(home.path(), &["profile", "show"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("cannot save it without a usable store"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn list_and_show_say_what_a_partial_or_noisy_profile_serves() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    // A budget too short for the search: partial.
    let partial = ["--quiet", "--workload", WORKLOAD, "--budget", "0.001"];
    assert!(run(h, &partial).status.success());
    let text = String::from_utf8(run(h, &["profile", "list"]).stdout).unwrap();
    assert!(
        text.contains("valid (partial: for runs with --budget 0.001 s or less"),
        "{text}"
    );
    // Measured under load: the next run that may measure re-tunes it.
    let noisy = tempfile::tempdir().unwrap();
    let tune = sipllm(noisy.path(), &["--json", "--quiet", "--workload", WORKLOAD])
        .env("SIPLLM_LOAD_AVERAGE", "99")
        .output()
        .unwrap();
    let id = Path::new(json_of(&tune)["path"].as_str().unwrap())
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let show = run(noisy.path(), &["profile", "show", &id]);
    let text = String::from_utf8(show.stdout).unwrap();
    assert!(
        text.contains("status:      valid on this machine (measured under load: the next run"),
        "{text}"
    );
}

#[test]
fn a_bad_setting_of_a_run_does_not_stop_the_profile_commands() {
    let home = tempfile::tempdir().unwrap();
    assert!(
        run(home.path(), &["--quiet", "--workload", WORKLOAD])
            .status
            .success()
    );
    let bad = [
        ("SIPLLM_THREADS", "abc"),
        ("SIPLLM_POLICY", "fastest"),
        ("SIPLLM_CACHED_ONLY", "maybe"),
        ("SIPLLM_LOAD_AVERAGE", "busy"),
    ];
    for (name, value) in bad {
        // A run that would use it is stopped by it ...
        let out = sipllm(home.path(), &["--json", "--workload", WORKLOAD])
            .env(name, value)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{name}");
        assert!(stderr(&out).contains(name), "{name}: {}", stderr(&out));
        // ... and the commands that only read the stores never look at it.
        for args in [&["profile", "list"][..], &["profile", "export"]] {
            let out = sipllm(home.path(), args).env(name, value).output().unwrap();
            assert!(out.status.success(), "{name} {args:?}: {}", stderr(&out));
            assert!(!stderr(&out).contains(name), "{}", stderr(&out));
        }
    }
}

#[test]
fn clear_removes_the_profiles_an_older_sipllm_wrote_and_nothing_else() {
    let home = tempfile::tempdir().unwrap();
    let info = json_of(&run(home.path(), &["--profile-info", "--json"]));
    let id = info["hardware_id"].as_str().unwrap().to_string();
    let store = home.path().join("runtime");
    std::fs::create_dir_all(&store).unwrap();
    // Schema 3 kept one format per projection (`format`), under a workload key no run
    // asks for any more: this version reads neither, nor ever replaces them.
    let older = |id: &str| {
        format!(
            r#"{{"schema_version":3,"hardware_id":"{id}","threads":2,"schedule_policy":"static"}}"#
        )
    };
    let theirs = [
        format!("{id}_w4ee5a1c794d4b2e5.json"),
        // Schema 2 named a one-matrix workload by its shape.
        format!("{id}_w4096x4096_t8.json"),
        // A llama.cpp profile of the default workload has no `_w` part.
        format!("{id}_xllamacpp-88433aadb54d3dfd.json"),
        format!("{id}_w4ee5a1c794d4b2e5_b8_rpatient.json"),
        format!("{id}.json"),
    ];
    // Not ours to remove: a copy under another name, another machine's (without --all),
    // and a file that only looks like one.
    let kept = [
        (format!("{id}_backup.json"), older(&id)),
        (format!("{id}_wcopy.json"), older(&id)),
        (
            "x86_64_other_machine_w4ee5a1c794d4b2e5.json".to_string(),
            older("x86_64_other_machine"),
        ),
        (
            format!("{id}_w0123456789abcdef.json"),
            r#"{"note":"mine"}"#.to_string(),
        ),
    ];
    for name in &theirs {
        std::fs::write(store.join(name), older(&id)).unwrap();
    }
    for (name, text) in &kept {
        std::fs::write(store.join(name), text).unwrap();
    }
    let list = String::from_utf8(run(home.path(), &["profile", "list"]).stdout).unwrap();
    assert!(list.contains("schema version 3"), "{list}");
    let out = run(home.path(), &["profile", "clear"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("removed 5 profiles"), "{said}");
    for name in &theirs {
        assert!(!store.join(name).exists(), "{name}");
    }
    for (name, text) in &kept {
        assert_eq!(
            &std::fs::read_to_string(store.join(name)).unwrap(),
            text,
            "{name}"
        );
    }
    // --all takes another machine's too, never a copy or a file of another kind.
    let out = run(home.path(), &["profile", "clear", "--all"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!store.join(&kept[2].0).exists());
    for (name, _) in [&kept[0], &kept[1], &kept[3]] {
        assert!(store.join(name).exists(), "{name}");
    }
}
