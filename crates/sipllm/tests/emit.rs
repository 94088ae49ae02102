//! `sipllm emit` as a user runs it: its help, refused targets and outputs (a link, a FIFO),
//! the defaults from an empty home, and every target's text in JSON and in files.

#[path = "common/cli.rs"]
mod cli;
mod common;

use cli::{
    WORKLOAD, assert_refused, assert_refused_missing_dir, is_fifo, json_of, run, sipllm, stderr,
    with_watchdog,
};
use std::path::Path;
use std::process::{Command, Output};

/// `sipllm emit --for llama.cpp --workload WORKLOAD -o dest`, its home at `h`.
fn emit_workload_to(h: &Path, dest: &Path) -> Output {
    run(
        h,
        &[
            "emit",
            "--for",
            "llama.cpp",
            "--workload",
            WORKLOAD,
            "-o",
            dest.to_str().unwrap(),
        ],
    )
}

#[test]
fn emit_help_names_every_target_and_flag() {
    let home = tempfile::tempdir().unwrap();
    let out = run(home.path(), &["emit", "--help"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let help = String::from_utf8_lossy(&out.stdout);
    for word in [
        "--for",
        "--json",
        "--output",
        "--cached-only",
        "--workload",
        "--model",
        "--gguf",
        "llama.cpp",
        "llama-server-preset",
        "ollama",
        "llama-cpp-python",
        "candle",
        "vllm",
        "never written through",
    ] {
        assert!(help.contains(word), "emit --help lacks {word:?}:\n{help}");
    }
    let top = run(home.path(), &["--help"]);
    assert!(String::from_utf8_lossy(&top.stdout).contains("emit"));
}

#[test]
fn a_flag_before_the_subcommand_is_said_to_go_after_it() {
    let home = tempfile::tempdir().unwrap();
    let out = run(
        home.path(),
        &["--workload", WORKLOAD, "emit", "--for", "candle"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a subcommand's flags go after its name"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn emit_refuses_an_unknown_target_and_a_missing_one() {
    let home = tempfile::tempdir().unwrap();
    let out = run(home.path(), &["emit", "--for", "lmstudio"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "unknown target \"lmstudio\": expected one of llama.cpp, llama-server-preset, \
             ollama, llama-cpp-python, candle, vllm"
        ),
        "{}",
        stderr(&out)
    );
    let out = run(home.path(), &["emit"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--for"), "{}", stderr(&out));
    assert!(std::fs::read_dir(home.path()).unwrap().next().is_none());
}

#[test]
fn emit_refuses_an_output_through_a_link_or_fifo_before_any_tune() {
    with_watchdog("emit onto a link and a FIFO", || {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().to_path_buf();
        let target = h.join("target.txt");
        std::fs::write(&target, "kept\n").unwrap();
        let link = h.join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let out = emit_workload_to(&h, &link);
        assert_refused(&out, "is a symbolic link, not a regular file");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept\n");
        assert!(!h.join("runtime").exists(), "refused before any tune");
        let fifo = h.join("fifo");
        let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let out = run(
            &h,
            &[
                "emit",
                "--for",
                "vllm",
                "--cached-only",
                "-o",
                fifo.to_str().unwrap(),
            ],
        );
        assert_refused(&out, "is a FIFO, not a regular file");
        assert!(is_fifo(&fifo));
    });
}

#[test]
fn emit_refuses_an_output_in_a_missing_directory_before_any_tune() {
    with_watchdog("emit into a missing directory", || {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().to_path_buf();
        let missing = h.join("nodir");
        let dest = missing.join("x");
        let out = emit_workload_to(&h, &dest);
        assert_refused_missing_dir(&out, &dest);
        assert!(!h.join("runtime").exists(), "refused before any tune");
    });
}

#[test]
fn emit_never_writes_over_the_llama_bench_binary_it_names() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let bin = h.join("llama-bench");
    std::fs::write(&bin, "#!/bin/sh\n").unwrap();
    let emit_over = |named: &str, path_var: Option<&Path>| {
        let mut cmd = sipllm(
            h,
            &[
                "emit",
                "--for",
                "llama.cpp",
                "--cached-only",
                "--llama-bench",
                named,
                "-o",
                bin.to_str().unwrap(),
            ],
        );
        if let Some(dir) = path_var {
            cmd.env("PATH", dir);
        }
        cmd.output().unwrap()
    };
    // By its path, and by a bare name found in PATH, as it would be started.
    for out in [
        emit_over(bin.to_str().unwrap(), None),
        emit_over("llama-bench", Some(h)),
    ] {
        assert_refused(&out, "an input of this command, and is never replaced");
        assert_eq!(std::fs::read_to_string(&bin).unwrap(), "#!/bin/sh\n");
    }
}

#[test]
fn emit_output_over_a_private_file_keeps_its_mode() {
    use std::os::unix::fs::PermissionsExt as _;
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let mine = h.join("mine.txt");
    std::fs::write(&mine, "x\n").unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = run(
        h,
        &[
            "emit",
            "--for",
            "llama.cpp",
            "--cached-only",
            "-o",
            mine.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&mine).unwrap();
    assert!(text.starts_with("-t "), "{text}");
    let mode = std::fs::metadata(&mine).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
}

#[test]
fn emit_cached_only_with_an_empty_home_writes_the_defaults_and_nothing_else() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let defaults = json_of(&run(h, &["--json", "--cached-only"]));
    assert_eq!(defaults["source"], "defaults");
    let threads = defaults["profile"]["threads"].as_u64().unwrap();
    let out = run(h, &["emit", "--for", "llama.cpp", "--cached-only"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8(out.stdout.clone()).unwrap(),
        format!("-t {threads} -tb {threads}\n")
    );
    assert!(
        stderr(&out).contains("sipllm: emit: source defaults")
            && stderr(&out).contains("nothing measured")
            && !stderr(&out).contains("measured on"),
        "{}",
        stderr(&out)
    );
    let set = sipllm(h, &["emit", "--for", "llama.cpp", "--cached-only"])
        .env("SIPLLM_THREADS", "3")
        .output()
        .unwrap();
    assert!(
        stderr(&set).contains("source override")
            && stderr(&set).contains("set by hand, nothing measured"),
        "{}",
        stderr(&set)
    );
    let env = sipllm(h, &["emit", "--for", "candle"])
        .env("SIPLLM_CACHED_ONLY", "1")
        .output()
        .unwrap();
    assert!(env.status.success(), "{}", stderr(&env));
    assert!(
        String::from_utf8_lossy(&env.stdout).contains(&format!("CANDLE_NUM_THREADS={threads}\n")),
        "{}",
        String::from_utf8_lossy(&env.stdout)
    );
    assert!(!h.join("runtime").exists(), "nothing is written");
    let out = run(
        h,
        &["emit", "--for", "ollama", "--cached-only", "--recalibrate"],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "--cached-only refuses --recalibrate"
    );
}

#[test]
fn emit_json_holds_every_target_and_output_writes_the_same_text() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let tune = ["--quiet", "--workload", WORKLOAD];
    let v = json_of(&run(h, &[&["emit", "--json"][..], &tune].concat()));
    assert_eq!(v["source"], "measured");
    assert_eq!(v["workload"], "48x80 f32");
    let targets = v["targets"].as_object().unwrap();
    let names: Vec<&str> = targets.keys().map(String::as_str).collect();
    let mut expected = vec![
        "llama.cpp",
        "llama-server-preset",
        "ollama",
        "llama-cpp-python",
        "candle",
        "vllm",
    ];
    expected.sort_unstable();
    assert_eq!(names, expected);
    for (name, entry) in targets {
        assert!(entry["runtime"].is_string(), "{name}: {entry}");
        assert!(entry["notes"].is_array(), "{name}: {entry}");
        // The cached profile serves the text form: the same text as in the object.
        let out = run(h, &[&["emit", "--for", name.as_str()][..], &tune].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            entry["text"].as_str().unwrap(),
            "{name}"
        );
    }
    let file = h.join("llama.flags");
    let out = run(
        h,
        &[
            &["emit", "--for", "llama.cpp", "-o", file.to_str().unwrap()][..],
            &tune,
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        targets["llama.cpp"]["text"].as_str().unwrap()
    );
    let flags = targets["llama.cpp"]["text"].as_str().unwrap();
    assert!(
        flags.starts_with("-t ") && flags.contains(" -tb "),
        "{flags}"
    );
}

#[test]
fn emit_never_writes_over_its_own_input_or_into_the_profile_store() {
    with_watchdog("emit onto its input and into the store", || {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().to_path_buf();
        let config = h.join("config.json");
        let text = r#"{"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4,
            "intermediate_size": 128, "num_hidden_layers": 1, "vocab_size": 256}"#;
        std::fs::write(&config, text).unwrap();
        // The input under its own name and under a second one (a hard link).
        let link = h.join("linked.json");
        std::fs::hard_link(&config, &link).unwrap();
        for dest in [&config, &link] {
            let out = run(
                &h,
                &[
                    "emit",
                    "--for",
                    "llama.cpp",
                    "--cached-only",
                    "--model-config",
                    config.to_str().unwrap(),
                    "-o",
                    dest.to_str().unwrap(),
                ],
            );
            assert_refused(
                &out,
                &format!(
                    "cannot write {}: it is {}, an input of this command",
                    dest.display(),
                    config.display()
                ),
            );
            assert_eq!(std::fs::read_to_string(&config).unwrap(), text);
        }
        // The store's files (a profile, the tune's lock) are the tuner's, under any path.
        let runtime = h.join("runtime");
        std::fs::create_dir(&runtime).unwrap();
        let through = h.join("through");
        std::os::unix::fs::symlink(&runtime, &through).unwrap();
        for dest in [runtime.join("x.lock"), through.join("x.json")] {
            let out = emit_workload_to(&h, &dest);
            assert_refused(
                &out,
                &format!(
                    "cannot write {}: it lies in the profile store {}",
                    dest.display(),
                    runtime.display()
                ),
            );
            assert!(!dest.exists());
        }
        assert!(
            std::fs::read_dir(&runtime).unwrap().next().is_none(),
            "refused before any tune"
        );
        // Nor where a store is or will be created: a file there would leave every later
        // run without a store. A home that exists without its store, and one not yet made.
        let fresh = h.join("fresh");
        std::fs::create_dir(&fresh).unwrap();
        let unmade = h.join("unmade");
        for (home, dest) in [(&fresh, fresh.join("runtime")), (&unmade, unmade.clone())] {
            let flags = ["emit", "--for", "llama.cpp", "--cached-only", "-o"];
            let out = run(home, &[&flags[..], &[dest.to_str().unwrap()]].concat());
            assert_refused(
                &out,
                &format!(
                    "cannot write {}: it is where the profile store {} is or will be created",
                    dest.display(),
                    home.join("runtime").display()
                ),
            );
            assert!(!dest.exists());
        }
    });
}

#[test]
fn emit_refuses_a_measuring_flag_that_the_environment_makes_useless() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    for (var, value, flag, why) in [
        (
            "SIPLLM_THREADS",
            "1",
            "--recalibrate",
            "--recalibrate cannot be used while SIPLLM_THREADS is set",
        ),
        (
            "SIPLLM_POLICY",
            "guided",
            "--thread-cap",
            "--thread-cap cannot be used while SIPLLM_POLICY is set",
        ),
        (
            "SIPLLM_CACHED_ONLY",
            "1",
            "--recalibrate",
            "--recalibrate cannot be used while SIPLLM_CACHED_ONLY is set",
        ),
    ] {
        let mut args = vec!["emit", "--for", "llama.cpp", "--workload", WORKLOAD, flag];
        if flag == "--thread-cap" {
            args.push("1");
        }
        let out = sipllm(h, &args).env(var, value).output().unwrap();
        assert_refused(&out, why);
        assert_eq!(out.status.code(), Some(2), "{var} {flag}: refused as given");
    }
    // --runtime llama.cpp measures llama.cpp: an explicit setting is refused with it, as
    // plain sipllm refuses it.
    let out = sipllm(
        h,
        &[
            "emit",
            "--for",
            "llama.cpp",
            "--runtime",
            "llama.cpp",
            "--llama-bench",
            "/nonexistent/llama-bench",
            "--gguf",
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../model-workload/tests/fixtures/gguf-py-llama-2-layers.gguf"
            ),
        ],
    )
    .env("SIPLLM_THREADS", "3")
    .output()
    .unwrap();
    assert_refused(
        &out,
        "SIPLLM_THREADS and SIPLLM_POLICY cannot be used with it",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        std::fs::read_dir(h).unwrap().next().is_none(),
        "nothing created"
    );
}

#[test]
fn a_full_stderr_loses_its_lines_and_nothing_else() {
    // Every write to Linux's /dev/full fails with ENOSPC.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let home = tempfile::tempdir().unwrap();
    let dest = home.path().join("flags.txt");
    // A note and the "wrote" line go to stderr, which takes nothing: the text is still
    // written, and the exit says the command's own outcome.
    let out = sipllm(
        home.path(),
        &[
            "emit",
            "--for",
            "ollama",
            "--workload",
            WORKLOAD,
            "--cached-only",
        ],
    )
    .stderr(full.try_clone().unwrap())
    .output()
    .unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert!(String::from_utf8_lossy(&out.stdout).contains("PARAMETER num_thread"));
    let out = sipllm(
        home.path(),
        &[
            "emit",
            "--for",
            "llama.cpp",
            "--workload",
            WORKLOAD,
            "--cached-only",
            "-o",
        ],
    )
    .arg(&dest)
    .stderr(full.try_clone().unwrap())
    .output()
    .unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert!(std::fs::read_to_string(&dest).unwrap().starts_with("-t "));
    // A refused variable is still exit 2, not a panic's 101.
    let out = sipllm(home.path(), &["--workload", WORKLOAD])
        .env("SIPLLM_THREADS", "x")
        .stderr(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn an_output_path_with_control_characters_is_shown_escaped() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let dest = h.join("o\nut\x1b[31m.txt");
    let out = emit_workload_to(h, &dest);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(dest.is_file());
    // The file is written where asked, and the line that says so holds no raw control code.
    let text = stderr(&out);
    let wrote = text
        .lines()
        .find(|l| l.contains("wrote"))
        .unwrap_or_default();
    assert!(wrote.contains("31m.txt"), "{text:?}");
    assert!(!text.contains('\x1b'), "{text:?}");
    // Refused (the output may not be the store itself): the error line is escaped as well.
    let store = h.join("runtime");
    let inside = store.join("x\x1by");
    let out = emit_workload_to(h, &inside);
    assert!(!out.status.success());
    assert!(!stderr(&out).contains('\x1b'), "{:?}", stderr(&out));
}
