//! The cache's all-or-nothing save, through `ProfileCache::save_all` and `import_profiles`:
//! what a failed save puts back (a file, a link, an empty directory), what it refuses to
//! replace, and that a save leaves no backup or temporary file behind.

mod common;

use auto_tuner::{
    ProfileBundle, ProfileCache, RuntimeProfile, export_profiles, import_profiles, matrix_workload,
    tune_if_needed,
};
use common::{hw, options};
use std::path::{Path, PathBuf};

/// The hidden files of `dir`: a save's temporary files and backups.
fn hidden_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

/// The two profiles of [`two_workloads`]' bundle.
fn profiles_of(bundle: &ProfileBundle) -> Vec<RuntimeProfile> {
    bundle
        .profiles
        .iter()
        .map(|p| serde_json::from_value(p.clone()).unwrap())
        .collect()
}

/// A home with profiles of two workloads, and their bundle (two entries on any machine).
fn two_workloads() -> (tempfile::TempDir, ProfileBundle) {
    let home = tempfile::tempdir().unwrap();
    let opt = options(home.path());
    let mut other = opt.clone();
    other.question.workload = matrix_workload(32, 64);
    tune_if_needed(&hw(), &opt).unwrap();
    tune_if_needed(&hw(), &other).unwrap();
    let (bundle, _) = export_profiles(&hw(), &opt).unwrap();
    assert_eq!(bundle.profiles.len(), 2);
    (home, bundle)
}

#[test]
fn a_failed_import_puts_a_symlinked_profile_back() {
    let (from, bundle) = two_workloads();
    let names: Vec<PathBuf> = common::json_files(&from.path().join("runtime"));
    let to = tempfile::tempdir().unwrap();
    let runtime = to.path().join("runtime");
    std::fs::create_dir(&runtime).unwrap();
    // The first entry's slot is a link to a file elsewhere; the second's a directory with
    // entries.
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("kept.json");
    std::fs::write(&target, "kept").unwrap();
    let first = runtime.join(names[0].file_name().unwrap());
    let second = runtime.join(names[1].file_name().unwrap());
    std::os::unix::fs::symlink(&target, &first).unwrap();
    std::fs::create_dir(&second).unwrap();
    std::fs::write(second.join("inside"), "x").unwrap();
    let mut ordered = bundle.clone();
    ordered.profiles.sort_by_key(|p| {
        let stem = ProfileCache::new(to.path())
            .paths_of(&serde_json::from_value(p.clone()).unwrap(), &hw())
            .remove(0);
        stem != first
    });
    let err = import_profiles(
        &hw(),
        &options(to.path()),
        &serde_json::to_vec(&ordered).unwrap(),
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("directory with entries"), "{err}");
    assert_eq!(std::fs::read_link(&first).unwrap(), target);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept");
    assert!(second.join("inside").exists());
}

#[test]
fn a_save_that_fails_midway_restores_a_link_exactly() {
    let (from, bundle) = two_workloads();
    let profiles: Vec<auto_tuner::RuntimeProfile> = bundle
        .profiles
        .iter()
        .map(|p| serde_json::from_value(p.clone()).unwrap())
        .collect();
    let cache = ProfileCache::new(from.path());
    let runtime = from.path().join("runtime");
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("kept.json");
    std::fs::write(&target, "kept").unwrap();
    let link = runtime.join("linked.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    // The second rename fails: its directory does not exist.
    let nowhere = runtime.join("missing-dir").join("x.json");
    let entries = [
        (link.clone(), profiles[0].clone()),
        (nowhere, profiles[1].clone()),
    ];
    assert!(cache.save_all(&entries).is_err());
    assert_eq!(std::fs::read_link(&link).unwrap(), target);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept");
    // No backup or temporary file is left behind.
    let left: Vec<String> = std::fs::read_dir(&runtime)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn an_import_refuses_a_fifo_at_a_profile_path() {
    let (from, bundle) = two_workloads();
    let name = common::json_files(&from.path().join("runtime"))[0]
        .file_name()
        .unwrap()
        .to_owned();
    let to = tempfile::tempdir().unwrap();
    let runtime = to.path().join("runtime");
    std::fs::create_dir(&runtime).unwrap();
    let fifo = runtime.join(&name);
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let err = import_profiles(
        &hw(),
        &options(to.path()),
        &serde_json::to_vec(&bundle).unwrap(),
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("not a regular file"), "{err}");
    use std::os::unix::fs::FileTypeExt as _;
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert_eq!(common::json_files(&runtime).len(), 1);
}

#[test]
fn a_save_that_fails_midway_puts_an_empty_directory_back() {
    let (from, bundle) = two_workloads();
    let profiles = profiles_of(&bundle);
    let cache = ProfileCache::new(from.path());
    let runtime = from.path().join("runtime");
    // An empty directory at the first entry's path is moved aside, then put back when the
    // second rename fails (its directory does not exist).
    let empty = runtime.join("empty.json");
    std::fs::create_dir(&empty).unwrap();
    let nowhere = runtime.join("missing-dir").join("x.json");
    let entries = [
        (empty.clone(), profiles[0].clone()),
        (nowhere, profiles[1].clone()),
    ];
    assert!(cache.save_all(&entries).is_err());
    assert!(std::fs::symlink_metadata(&empty).unwrap().is_dir());
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    assert!(
        hidden_files(&runtime).is_empty(),
        "{:?}",
        hidden_files(&runtime)
    );
}

#[test]
fn a_save_that_replaces_what_was_there_leaves_no_backup_behind() {
    let (from, bundle) = two_workloads();
    let profiles = profiles_of(&bundle);
    let cache = ProfileCache::new(from.path());
    let runtime = from.path().join("runtime");
    let files = common::json_files(&runtime);
    // Replaced: a profile file (kept aside as a hard link), a link, an empty directory.
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("kept.json");
    std::fs::write(&target, "kept").unwrap();
    let link = runtime.join("linked.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let empty = runtime.join("empty.json");
    std::fs::create_dir(&empty).unwrap();
    let entries = [
        (files[0].clone(), profiles[1].clone()),
        (link.clone(), profiles[0].clone()),
        (empty.clone(), profiles[1].clone()),
    ];
    cache.save_all(&entries).unwrap();
    assert!(
        hidden_files(&runtime).is_empty(),
        "{:?}",
        hidden_files(&runtime)
    );
    for (path, profile) in &entries {
        let saved: RuntimeProfile =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(saved.request, profile.request, "{}", path.display());
    }
    // The link was replaced, not followed.
    assert!(!std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept");
}
