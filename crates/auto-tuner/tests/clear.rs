//! `clear_profiles`: which files of the user's store it removes, where it refuses to act,
//! and that it waits for a tuner holding the machine's lock.

mod common;

use auto_tuner::{ProfileCache, clear_profiles, matrix_workload, tune_if_needed};
use common::{hw, options};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A home with this machine's profiles of two workloads.
fn tuned_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let opt = options(home.path());
    tune_if_needed(&hw(), &opt).unwrap();
    let mut other = opt.clone();
    other.question.workload = matrix_workload(32, 64);
    tune_if_needed(&hw(), &other).unwrap();
    home
}

#[test]
fn clear_removes_only_profiles_under_their_own_names() {
    let home = tuned_home();
    let runtime = home.path().join("runtime");
    let ours = common::json_files(&runtime);
    assert_eq!(ours.len(), 2, "{ours:?}");
    let id = hw().hardware_id();
    // Files that are not profiles, and copies of a profile under names the cache never
    // gives (which the name prefix matched).
    let notes = runtime.join("notes.json");
    std::fs::write(&notes, "{\"todo\": 1}").unwrap();
    let copies: Vec<PathBuf> = ["backup", "keep", "w_old", "b1", "rmeasure", "kx"]
        .iter()
        .map(|suffix| runtime.join(format!("{id}_{suffix}.json")))
        .collect();
    for copy in &copies {
        std::fs::copy(&ours[0], copy).unwrap();
    }
    // A profile of this version under its own name that does not parse (a newer field,
    // a hand edit) is not removed as an older version's.
    let broken = runtime.join(format!("{id}_b3.json"));
    std::fs::write(
        &broken,
        format!(r#"{{"schema_version":4,"hardware_id":"{id}"}}"#),
    )
    .unwrap();
    let opt = options(home.path());
    assert_eq!(clear_profiles(&hw(), &opt, false).unwrap(), ours);
    assert_eq!(
        clear_profiles(&hw(), &opt, true).unwrap(),
        Vec::<PathBuf>::new()
    );
    assert!(notes.exists());
    assert!(broken.exists());
    for copy in &copies {
        assert!(copy.exists(), "{} was removed", copy.display());
    }
}

#[test]
fn an_older_versions_profiles_go_this_machines_first_then_with_all_any_machines() {
    let home = tempfile::tempdir().unwrap();
    let runtime = home.path().join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    let id = hw().hardware_id();
    let other = "x86_64_other_machine_2c_8gb";
    let older = |id: &str| format!(r#"{{"schema_version":3,"hardware_id":"{id}","threads":2}}"#);
    // The default request's file (no slot part) and another request's.
    let mine = [
        runtime.join(format!("{id}.json")),
        runtime.join(format!("{id}_w4096x4096_t8.json")),
    ];
    let theirs = runtime.join(format!("{other}_w4ee5a1c794d4b2e5.json"));
    for path in &mine {
        std::fs::write(path, older(&id)).unwrap();
    }
    std::fs::write(&theirs, older(other)).unwrap();
    let opt = options(home.path());
    assert_eq!(clear_profiles(&hw(), &opt, false).unwrap(), mine);
    assert!(theirs.exists());
    assert_eq!(clear_profiles(&hw(), &opt, true).unwrap(), [theirs]);
}

#[test]
fn clear_never_follows_a_symlinked_runtime_out_of_the_home() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let package = project.path().join("package.json");
    std::fs::write(&package, "{}").unwrap();
    std::os::unix::fs::symlink(project.path(), home.path().join("runtime")).unwrap();
    let opt = options(home.path());
    for all in [false, true] {
        let err = clear_profiles(&hw(), &opt, all).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
    }
    assert!(package.exists());
    assert_eq!(std::fs::read_dir(project.path()).unwrap().count(), 1);
}

#[test]
fn a_store_never_made_has_nothing_to_clear_and_is_not_made() {
    let home = tempfile::tempdir().unwrap();
    let opt = options(home.path());
    for all in [false, true] {
        assert_eq!(
            clear_profiles(&hw(), &opt, all).unwrap(),
            Vec::<PathBuf>::new()
        );
    }
    assert!(!home.path().join("runtime").exists());
}

#[test]
fn a_store_that_cannot_be_looked_at_is_an_error_not_an_empty_store() {
    // A home that is a file: its `runtime` cannot be looked up (not "not found").
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::write(&home, "mine").unwrap();
    let err = clear_profiles(&hw(), &options(&home), false).unwrap_err();
    assert!(err.to_string().contains("runtime"), "{err}");
    assert_eq!(std::fs::read_to_string(&home).unwrap(), "mine");

    // A `runtime` that is a file is refused and left as it was.
    let home = tempfile::tempdir().unwrap();
    let runtime = home.path().join("runtime");
    std::fs::write(&runtime, "mine").unwrap();
    let err = clear_profiles(&hw(), &options(home.path()), true)
        .unwrap_err()
        .to_string();
    assert!(err.contains("is not a directory"), "{err}");
    assert_eq!(std::fs::read_to_string(&runtime).unwrap(), "mine");
}

#[test]
fn clear_waits_for_a_tuner_holding_the_lock_then_clears() {
    let home = tuned_home();
    let runtime = home.path().join("runtime");
    let ours = common::json_files(&runtime);
    let id = hw().hardware_id();
    let lock = ProfileCache::new(home.path())
        .lock(&id, Instant::now())
        .unwrap()
        .expect("no one else holds this home's lock");
    // Another tuner (here a thread) finishes a moment later; clear waits for it rather
    // than failing at once. The outcome is asserted, not the wait's length.
    let tuner = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        drop(lock);
    });
    let removed = clear_profiles(&hw(), &options(home.path()), false).unwrap();
    tuner.join().unwrap();
    assert_eq!(removed, ours);
}
