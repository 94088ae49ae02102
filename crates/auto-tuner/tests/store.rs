//! The stores as a whole: the system store behind the user's cache, never-measure mode,
//! export and import of a machine's profiles, listing and clearing.

mod common;

use auto_tuner::{
    AutoTunerOptions, ProfileBundle, ProfileCache, Source, Store, TunerError, clear_profiles,
    export_profiles, import_profiles, list_profiles, matrix_workload, tune_if_needed,
};
use device_profile::HardwareInfo;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// This machine, read from `/` whatever `SIPLLM_SYSROOT` says.
fn hw() -> HardwareInfo {
    device_profile::get_hardware_info_from_root(Path::new("/"))
}

/// Options for a quick tune in `home`, with `system` as the system store.
fn options(home: &Path, system: Option<&Path>) -> AutoTunerOptions {
    let mut opt = AutoTunerOptions::default();
    opt.stores.home = auto_tuner::ProfileHome::Dir(home.to_path_buf());
    opt.stores.system_profiles = system.map(Path::to_path_buf);
    opt.question.workload = matrix_workload(48, 80);
    opt.measuring.load_average = auto_tuner::LoadAverage::Given(None);
    opt.measuring.repetition_time = Duration::from_micros(200);
    opt.measuring.max_working_set_bytes = 1 << 20;
    opt
}

fn capped(opt: &AutoTunerOptions) -> AutoTunerOptions {
    let mut opt = opt.clone();
    opt.question.thread_cap = Some(1);
    opt
}

/// A home with this machine's profiles for two requests (two files when the machine has
/// more than one CPU), and their bundle.
fn exported() -> (tempfile::TempDir, ProfileBundle) {
    let home = tempfile::tempdir().unwrap();
    let opt = options(home.path(), None);
    tune_if_needed(&hw(), &opt).unwrap();
    tune_if_needed(&hw(), &capped(&opt)).unwrap();
    let (bundle, warnings) = export_profiles(&hw(), &opt).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    (home, bundle)
}

#[test]
fn export_then_import_installs_the_same_profiles_elsewhere() {
    let (from, bundle) = exported();
    let expected = common::json_files(&from.path().join("runtime")).len();
    assert_eq!(bundle.profiles.len(), expected);
    assert_eq!(bundle.hardware_id, hw().hardware_id());
    let text = serde_json::to_vec(&bundle).unwrap();

    let to = tempfile::tempdir().unwrap();
    let opt = options(to.path(), None);
    let imported = import_profiles(&hw(), &opt, &text, false).unwrap();
    assert!(imported.replaced.is_empty(), "{imported:?}");
    let written = imported.written;
    assert_eq!(written.len(), expected);
    for path in &written {
        let name = path.file_name().unwrap();
        let original = from.path().join("runtime").join(name);
        let a: Value = serde_json::from_str(&std::fs::read_to_string(&original).unwrap()).unwrap();
        let b: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(a, b, "{}", name.to_string_lossy());
    }
    // Again, over the same files: each is said to replace what was there.
    let again = import_profiles(&hw(), &opt, &text, false).unwrap();
    assert_eq!(again.replaced, written);
    // The imported profiles serve the next runs: nothing is measured.
    assert_eq!(tune_if_needed(&hw(), &opt).unwrap().source.name(), "cache");
    assert_eq!(
        tune_if_needed(&hw(), &capped(&opt)).unwrap().source.name(),
        "cache"
    );
}

/// Imports `text` into a fresh home and checks that it fails naming `reason` and that
/// nothing was installed.
fn assert_import_refused(text: &[u8], reason: &str) {
    import_refusal(text, reason);
}

/// [`assert_import_refused`], returning the error's text.
fn import_refusal(text: &[u8], reason: &str) -> String {
    let to = tempfile::tempdir().unwrap();
    let opt = options(to.path(), None);
    let err = import_profiles(&hw(), &opt, text, false)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(reason) && err.contains("nothing was imported"),
        "expected {reason:?} in {err:?}"
    );
    assert!(common::json_files(&to.path().join("runtime")).is_empty());
    err
}

#[test]
fn a_bad_bundle_imports_nothing_and_says_which_entry_and_why() {
    let (_from, bundle) = exported();
    let good = serde_json::to_value(&bundle).unwrap();
    let text = good.to_string();
    assert_import_refused(&text.as_bytes()[..text.len() / 2], "not a profile bundle");
    assert_import_refused(b"", "not a profile bundle");
    // A key given twice (the last one valid) is refused, not read as its last value.
    let twice = text.replacen('{', r#"{"format_version": 2,"#, 1);
    assert_import_refused(twice.as_bytes(), "duplicate key \"format_version\"");

    let mut v = good.clone();
    v["format_version"] = 99.into();
    assert_import_refused(
        v.to_string().as_bytes(),
        "bundle format version 99, expected 1",
    );

    let mut v = good.clone();
    v["profiles"][0]["hardware_id"] = "aarch64_other_8c_16gb".into();
    let err = import_refusal(
        v.to_string().as_bytes(),
        "entry 1: it belongs to another machine",
    );
    // Another machine's profile is no other version's doing.
    assert!(!err.contains("another sipllm version"), "{err}");

    // Another sipllm's profiles (another kernel revision, another schema) say what to do.
    let mut v = good.clone();
    v["profiles"][0]["kernel"] = "portable matmul-kernel r0".into();
    assert_import_refused(
        v.to_string().as_bytes(),
        "entry 1: it was measured with kernel",
    );
    assert_import_refused(
        v.to_string().as_bytes(),
        "exported by another sipllm version",
    );
    let mut v = good.clone();
    v["profiles"][0]["schema_version"] = 3.into();
    assert_import_refused(
        v.to_string().as_bytes(),
        "exported by another sipllm version",
    );

    let mut v = good.clone();
    v["profiles"][0]["hardware"]["logical_cores"] = 4096.into();
    assert_import_refused(v.to_string().as_bytes(), "entry 1: the machine has changed");
    // The one refusal that `force` answers is its own variant, for a caller to offer it.
    let to = tempfile::tempdir().unwrap();
    match import_profiles(
        &hw(),
        &options(to.path(), None),
        v.to_string().as_bytes(),
        false,
    ) {
        Err(TunerError::ImportFromChangedMachine { entry, differences }) => {
            assert_eq!(entry, 1);
            assert!(
                differences[0].starts_with("logical_cores"),
                "{differences:?}"
            );
        }
        other => panic!("expected ImportFromChangedMachine, got {other:?}"),
    }

    // One bad entry after a good one: nothing at all is installed.
    let mut v = good.clone();
    let mut bad = v["profiles"][0].clone();
    bad["threads"] = 0.into();
    bad["decode"]["threads"] = 0.into();
    v["profiles"].as_array_mut().unwrap().push(bad);
    let n = v["profiles"].as_array().unwrap().len();
    assert_import_refused(v.to_string().as_bytes(), &format!("entry {n}: threads = 0"));

    // Two entries for one file.
    let mut v = good.clone();
    let first = v["profiles"][0].clone();
    v["profiles"].as_array_mut().unwrap().push(first);
    assert_import_refused(v.to_string().as_bytes(), "are both for");
}

#[test]
fn a_forced_import_adopts_a_profile_of_a_changed_machine() {
    let (_from, bundle) = exported();
    let mut v = serde_json::to_value(&bundle).unwrap();
    v["profiles"][0]["hardware"]["l3_total_bytes"] = 1.into();
    let to = tempfile::tempdir().unwrap();
    let opt = options(to.path(), None);
    let written = import_profiles(&hw(), &opt, v.to_string().as_bytes(), true)
        .unwrap()
        .written;
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(&written[0]).unwrap()).unwrap();
    assert_eq!(saved["hardware"], serde_json::to_value(hw()).unwrap());
}

#[test]
fn the_system_store_serves_when_the_user_has_none_and_is_never_written() {
    let (from, _) = exported();
    let system = tempfile::tempdir().unwrap();
    let opt = options(from.path(), None);
    let name =
        ProfileCache::new(from.path()).path_for(&hw().hardware_id(), &opt.question.slot(&hw()));
    let shipped = system.path().join(name.file_name().unwrap());
    std::fs::copy(&name, &shipped).unwrap();
    let before = std::fs::read(&shipped).unwrap();

    let home = tempfile::tempdir().unwrap();
    let opt = options(home.path(), Some(system.path()));
    let tuned = tune_if_needed(&hw(), &opt).unwrap();
    assert_eq!(tuned.source, Source::System(shipped.clone()));
    assert!(tuned.warnings.is_empty(), "{:?}", tuned.warnings);
    // Nothing was created in the user's home.
    assert_eq!(std::fs::read_dir(home.path()).unwrap().count(), 0);

    // A system profile is validated like a user's: a changed machine is not served it.
    let mut v: Value = serde_json::from_slice(&before).unwrap();
    v["hardware"]["logical_cores"] = 4096.into();
    std::fs::write(&shipped, v.to_string()).unwrap();
    let before = std::fs::read(&shipped).unwrap();
    let tuned = tune_if_needed(&hw(), &opt).unwrap();
    assert_eq!(tuned.source.name(), "measured");
    assert!(
        tuned.warnings[0].contains("the machine has changed"),
        "{:?}",
        tuned.warnings
    );
    assert_eq!(
        std::fs::read(&shipped).unwrap(),
        before,
        "the system store was written"
    );
    // The user's own profile comes first from now on.
    assert_eq!(tune_if_needed(&hw(), &opt).unwrap().source.name(), "cache");
}

#[test]
fn cached_only_never_measures() {
    let home = tempfile::tempdir().unwrap();
    let mut opt = options(home.path(), None);
    opt.stores.cached_only = true;
    let tuned = tune_if_needed(&hw(), &opt).unwrap();
    assert_eq!(tuned.source, Source::Defaults);
    assert!(tuned.profile.decode.measurements.is_empty());
    assert!(
        tuned.warnings[0].contains("cached-only"),
        "{:?}",
        tuned.warnings
    );
    assert_eq!(std::fs::read_dir(home.path()).unwrap().count(), 0);
    // With a profile cached, it is used; recalibrating is not measuring in this mode.
    let measured = tune_if_needed(&hw(), &options(home.path(), None)).unwrap();
    let mut forced = opt;
    forced.stores.force_recalibrate = true;
    let tuned = tune_if_needed(&hw(), &forced).unwrap();
    assert_eq!(tuned.source.name(), "cache");
    assert_eq!(tuned.profile, measured.profile);
}

#[test]
fn list_shows_both_stores_and_clear_touches_only_the_user() {
    let (home, _) = exported();
    let system = tempfile::tempdir().unwrap();
    let runtime = home.path().join("runtime");
    let ours = common::json_files(&runtime);
    // Another machine's profile in the user's cache, and one in the system store.
    let mut other: Value =
        serde_json::from_str(&std::fs::read_to_string(&ours[0]).unwrap()).unwrap();
    other["hardware_id"] = "aarch64_other_8c_16gb".into();
    // Under the name the cache gives it: `profile clear --all` removes no other name.
    let other_profile: auto_tuner::RuntimeProfile = serde_json::from_value(other.clone()).unwrap();
    let other_path = ProfileCache::new(home.path())
        .paths_of(&other_profile, &hw())
        .remove(0);
    std::fs::write(&other_path, other.to_string()).unwrap();
    let shipped = system.path().join(ours[0].file_name().unwrap());
    std::fs::copy(&ours[0], &shipped).unwrap();

    let opt = options(home.path(), Some(system.path()));
    let (listed, problems) = list_profiles(&hw(), &opt);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(listed.len(), ours.len() + 2);
    for p in &listed {
        let expect_valid = p.path != other_path;
        assert_eq!(p.valid.is_ok(), expect_valid, "{p:?}");
        assert!(p.profile.is_some());
    }
    let foreign = listed.iter().find(|p| p.path == other_path).unwrap();
    assert!(
        foreign
            .valid
            .as_ref()
            .unwrap_err()
            .contains("another machine")
    );
    assert_eq!(
        listed.iter().filter(|p| p.store == Store::System).count(),
        1
    );

    // Clear: this machine's user profiles only.
    let removed = clear_profiles(&hw(), &opt, false).unwrap();
    assert_eq!(removed, ours);
    assert_eq!(common::json_files(&runtime), vec![other_path.clone()]);
    assert!(shipped.exists());
    // Clear --all: every user profile, still never the system store.
    let removed = clear_profiles(&hw(), &opt, true).unwrap();
    assert_eq!(removed, vec![other_path]);
    assert!(common::json_files(&runtime).is_empty());
    assert!(shipped.exists());
}

/// Whether this process runs as root: it owns `made`, a directory it created.
fn is_root(made: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(made).unwrap().uid() == 0
}

/// Makes `path` impossible to remove for this process until `undo` runs: its directory
/// read-only, or for root (whom no mode stops) the file immutable (`chattr +i`).
fn unremovable(path: &Path) -> impl FnOnce() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = path.parent().unwrap().to_path_buf();
    if is_root(&dir) {
        let chattr = |flag: &str, path: &Path| {
            let status = std::process::Command::new("chattr")
                .arg(flag)
                .arg(path)
                .status();
            assert!(
                status.is_ok_and(|s| s.success()),
                "chattr {flag} {}: root needs chattr and a file system with the immutable \
                 attribute (ext4, xfs, btrfs) for this test",
                path.display()
            );
        };
        chattr("+i", path);
        let path = path.to_path_buf();
        Box::new(move || chattr("-i", &path)) as Box<dyn FnOnce()>
    } else {
        let mode = move |m| {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(m)).unwrap();
        };
        mode(0o555);
        Box::new(move || mode(0o755))
    }
}

#[test]
fn a_profile_that_cannot_be_removed_stops_no_other_and_the_error_names_both() {
    let home = tempfile::tempdir().unwrap();
    let opt = options(home.path(), None);
    let mut portable = opt.clone();
    portable.question.kernel = Some(matmul_kernel::Isa::Portable.token().unwrap());
    let kept = tune_if_needed(&hw(), &opt)
        .unwrap()
        .source
        .path()
        .unwrap()
        .clone();
    let goes = tune_if_needed(&hw(), &portable)
        .unwrap()
        .source
        .path()
        .unwrap()
        .clone();
    let undo = unremovable(&kept);
    let result = clear_profiles(&hw(), &opt, false);
    undo();
    match result {
        Err(TunerError::ClearIncomplete { removed, failed }) if is_root(home.path()) => {
            assert_eq!(removed, std::slice::from_ref(&goes));
            assert_eq!(failed.len(), 1);
            assert_eq!(failed[0].0, kept);
            let message = TunerError::ClearIncomplete { removed, failed }.to_string();
            assert!(
                message.starts_with("cannot remove 1 profile: ")
                    && message.contains("; removed 1 profile: "),
                "{message}"
            );
            assert!(!goes.exists() && kept.exists());
        }
        // A read-only directory keeps both; each is named.
        Err(TunerError::ClearIncomplete { removed, failed }) => {
            assert!(removed.is_empty());
            assert_eq!(failed.len(), 2);
            assert!(goes.exists() && kept.exists());
        }
        other => panic!("expected ClearIncomplete, got {other:?}"),
    }
}

#[test]
fn profiles_of_a_forced_kernel_travel_and_links_are_listed_and_cleared() {
    let home = tempfile::tempdir().unwrap();
    let opt = options(home.path(), None);
    let mut portable = opt.clone();
    portable.question.kernel = Some(matmul_kernel::Isa::Portable.token().unwrap());
    tune_if_needed(&hw(), &opt).unwrap();
    let forced = tune_if_needed(&hw(), &portable).unwrap();
    let (bundle, warnings) = export_profiles(&hw(), &opt).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let kernels: Vec<&str> = bundle
        .profiles
        .iter()
        .map(|p| p["kernel"].as_str().unwrap())
        .collect();
    assert!(
        kernels.iter().any(|k| k.starts_with("portable ")),
        "{kernels:?}"
    );
    let (listed, _) = list_profiles(&hw(), &opt);
    assert!(listed.iter().all(|p| p.valid.is_ok()), "{listed:?}");
    let to = tempfile::tempdir().unwrap();
    let written = import_profiles(
        &hw(),
        &options(to.path(), None),
        &serde_json::to_vec(&bundle).unwrap(),
        false,
    )
    .unwrap()
    .written;
    assert_eq!(written.len(), bundle.profiles.len());

    // A profile that is a link to a file elsewhere (an administrator's pattern) is listed,
    // and clearing removes the link, never its target.
    let target_dir = tempfile::tempdir().unwrap();
    let path = forced.source.path().unwrap().clone();
    let target = target_dir.path().join("kept.json");
    std::fs::rename(&path, &target).unwrap();
    std::os::unix::fs::symlink(&target, &path).unwrap();
    let (listed, _) = list_profiles(&hw(), &opt);
    assert!(listed.iter().any(|p| p.path == path), "{listed:?}");
    let removed = clear_profiles(&hw(), &opt, false).unwrap();
    assert!(removed.contains(&path));
    assert!(target.exists(), "the link's target was removed");
}

#[test]
fn an_unreadable_system_store_does_not_hide_the_user_store() {
    let (home, _) = exported();
    let not_a_dir = home.path().join("a-file");
    std::fs::write(&not_a_dir, "x").unwrap();
    let opt = options(home.path(), Some(&not_a_dir));
    let (listed, problems) = list_profiles(&hw(), &opt);
    assert!(!listed.is_empty());
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("system store"), "{problems:?}");
}

#[test]
fn an_entry_named_like_a_profile_that_is_no_file_is_a_listed_problem() {
    let (home, _) = exported();
    let runtime = home.path().join("runtime");
    std::fs::create_dir_all(runtime.join("odd.json")).unwrap();
    nix::unistd::mkfifo(&runtime.join("fifo.json"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let opt = options(home.path(), None);
    let (listed, problems) = list_profiles(&hw(), &opt);
    assert!(!listed.is_empty());
    assert_eq!(problems.len(), 2, "{problems:?}");
    for (problem, name) in problems.iter().zip(["fifo.json", "odd.json"]) {
        assert!(
            problem.contains(name) && problem.contains("not a regular file"),
            "{problems:?}"
        );
    }
    // Both are left as they are.
    assert!(runtime.join("odd.json").is_dir());
}

/// The text of `bundle` with its first profile changed by `change`.
fn spoiled(bundle: &ProfileBundle, change: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut v = serde_json::to_value(bundle).unwrap();
    change(&mut v["profiles"][0]);
    v.to_string().into_bytes()
}

/// A fake success line, a cleared line and hidden text, as a hostile file would hold them.
const FAKE: &str = "x)\n\x1b[2K\x1b[32mimported 1 profile\x1b[0m\n\x1b[8m";

#[test]
fn terminal_escapes_of_a_bundle_are_escaped_in_the_import_error() {
    let (_from, bundle) = exported();
    let to = tempfile::tempdir().unwrap();
    let opt = options(to.path(), None);
    type Change = fn(&mut Value);
    let changes: [(&str, Change); 6] = [
        ("hardware_id", |p| p["hardware_id"] = FAKE.into()),
        ("rigor", |p| p["rigor"] = FAKE.into()),
        ("cores", |p| p["decode"]["cores"] = FAKE.into()),
        ("step", |p| {
            p["decode"]["measurements"][0]["step"] = FAKE.into()
        }),
        ("schedule_policy", |p| p["schedule_policy"] = FAKE.into()),
        ("a megabyte hardware_id", |p| {
            p["hardware_id"] = format!("{FAKE}{}", "x".repeat(1 << 20)).into()
        }),
    ];
    for (field, change) in changes {
        let err = import_profiles(&hw(), &opt, &spoiled(&bundle, change), false)
            .unwrap_err()
            .to_string();
        assert!(
            !err.chars().any(char::is_control),
            "{field}: a control character in {err:?}"
        );
        assert!(err.contains("\\u{1b}[32mimported"), "{field}: {err}");
        assert!(err.len() < 1000, "{field}: {} bytes", err.len());
    }
}

#[test]
fn a_cached_profile_with_escapes_is_listed_with_them_escaped() {
    let (home, _) = exported();
    let runtime = home.path().join("runtime");
    let path = common::json_files(&runtime).remove(0);
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["hardware_id"] = FAKE.into();
    std::fs::write(&path, v.to_string()).unwrap();
    let (listed, _) = list_profiles(&hw(), &options(home.path(), None));
    let why = listed
        .iter()
        .find(|p| p.path == path)
        .unwrap()
        .valid
        .clone()
        .unwrap_err();
    assert!(!why.chars().any(char::is_control), "{why:?}");
    assert!(why.contains("another machine"), "{why}");
}

#[test]
fn a_huge_finite_score_is_refused_on_import() {
    let (_from, bundle) = exported();
    for field in ["tokens_per_sec", "tokens_per_sec_max", "gbps"] {
        let text = spoiled(&bundle, |p| {
            p["decode"]["measurements"][0][field] = 1.6e308.into();
        });
        assert_import_refused(&text, &format!("{field} = 1.6e308, not between 0 and"));
    }
    let text = spoiled(&bundle, |p| p["prefill"]["tokens_per_sec"] = 1e300.into());
    assert_import_refused(
        &text,
        "prefill.tokens_per_sec = 1e300, not above 0 and at most",
    );
    let text = spoiled(&bundle, |p| p["tuning_seconds"] = 1e300.into());
    assert_import_refused(&text, "tuning_seconds = 1e300, not between 0");
}

#[test]
fn an_imported_workload_beyond_the_source_bounds_is_refused() {
    let (_from, bundle) = exported();
    let text = spoiled(&bundle, |p| {
        p["request"]["workload"]["projections"][0]["n_out"] = 2_000_000.into();
    });
    assert_import_refused(&text, "both sides must be at most 1048576");
    let text = spoiled(&bundle, |p| {
        p["request"]["workload"]["layers"] = 1025.into()
    });
    assert_import_refused(&text, "1025 layers, not between 1 and 1024");
}

#[test]
fn an_import_larger_than_a_profile_may_be_is_refused() {
    let (_from, bundle) = exported();
    // Within the bundle's 16 MiB, above a profile's 4 MiB as the cache writes it (pretty).
    let text = spoiled(&bundle, |p| {
        let m = p["decode"]["measurements"][0].clone();
        let many = vec![m; 30_000];
        p["decode"]["measurements"] = many.into();
    });
    assert!(text.len() < 16 << 20, "{} bytes", text.len());
    assert_import_refused(&text, "a profile may have");
}

#[test]
fn export_takes_only_the_caches_own_files_and_its_bundle_imports() {
    let home = tempfile::tempdir().unwrap();
    let opt = options(home.path(), None);
    let mut other = opt.clone();
    other.question.workload = matrix_workload(32, 64);
    let real = tune_if_needed(&hw(), &opt).unwrap();
    let real = real.source.path().unwrap().clone();
    let linked = tune_if_needed(&hw(), &other).unwrap();
    let linked = linked.source.path().unwrap().clone();
    let runtime = home.path().join("runtime");
    // A copy under a name the cache never gives (which the machine's name prefix matches),
    // and a profile under its own name that is a link to a file elsewhere.
    let stem = real.file_stem().unwrap().to_string_lossy().into_owned();
    let backup = runtime.join(format!("{stem}_backup.json"));
    std::fs::copy(&real, &backup).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("kept.json");
    std::fs::rename(&linked, &target).unwrap();
    std::os::unix::fs::symlink(&target, &linked).unwrap();

    let (bundle, warnings) = export_profiles(&hw(), &opt).unwrap();
    assert_eq!(bundle.profiles.len(), 1, "{warnings:?}");
    let exported: Value = bundle.profiles[0].clone();
    let original: Value = serde_json::from_str(&std::fs::read_to_string(&real).unwrap()).unwrap();
    assert_eq!(exported, original);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("_backup.json") && w.contains("not a profile name")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(&*linked.to_string_lossy()) && w.contains("symbolic link")),
        "{warnings:?}"
    );

    // The list says the same: the copy is not used, the link is one.
    let (listed, _) = list_profiles(&hw(), &opt);
    let row = |path: &Path| listed.iter().find(|p| p.path == path).unwrap();
    assert!(row(&real).valid.is_ok() && !row(&real).link);
    let copy = row(&backup);
    assert!(copy.profile.is_some());
    assert!(
        copy.valid
            .as_ref()
            .is_err_and(|why| why.starts_with("not a profile name")),
        "{copy:?}"
    );
    assert!(row(&linked).link);

    // The bundle goes into an empty store whole.
    let to = tempfile::tempdir().unwrap();
    let written = import_profiles(
        &hw(),
        &options(to.path(), None),
        &serde_json::to_vec(&bundle).unwrap(),
        false,
    )
    .unwrap()
    .written;
    assert_eq!(
        written,
        vec![to.path().join("runtime").join(real.file_name().unwrap())]
    );
    // Nothing of the source store was changed.
    assert_eq!(std::fs::read_link(&linked).unwrap(), target);
    assert!(backup.exists());
}
