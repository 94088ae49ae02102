//! The seed's call, `tune_if_needed(hw, &Default::default())`, caches: the default options
//! save under `$SIPLLM_HOME`, else `$HOME/.sipllm`, and the second call reads the cache.
//! Each case runs in a child process with its own environment, so that this process's
//! environment (and a developer's `SIPLLM_*`) stays untouched.

mod common;

use auto_tuner::{AutoTunerOptions, ProfileHome, Source, matrix_workload, tune_if_needed};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Where the child expects its profile: under this directory, or nowhere when unset.
const EXPECT_ENV: &str = "AUTO_TUNER_TEST_EXPECT_RUNTIME_DIR";

/// The child half of the tests below: the default home, a small workload, called twice.
#[test]
#[ignore = "the child process of the default_home tests, which run it"]
fn default_home_child() {
    let mut opt = AutoTunerOptions::default();
    opt.question.workload = matrix_workload(48, 80);
    opt.measuring.repetition_time = Duration::from_micros(200);
    opt.measuring.load_average = auto_tuner::LoadAverage::Given(None);
    opt.measuring.max_working_set_bytes = 1 << 20;
    assert_eq!(opt.stores.home, ProfileHome::FromEnv);
    let hw = common::hw();
    let first = tune_if_needed(&hw, &opt).unwrap();
    let second = tune_if_needed(&hw, &opt).unwrap();
    match std::env::var_os(EXPECT_ENV) {
        Some(dir) => {
            let Source::Measured(Some(path)) = &first.source else {
                panic!("first call: {:?}", first.source);
            };
            assert_eq!(path.parent(), Some(Path::new(&dir)), "{}", path.display());
            assert!(first.warnings.is_empty(), "{:?}", first.warnings);
            assert_eq!(second.source, Source::Cache(path.clone()));
            assert_eq!(second.profile, first.profile);
        }
        None => {
            for tuned in [&first, &second] {
                assert_eq!(tuned.source, Source::Measured(None));
                assert!(
                    tuned.warnings.iter().any(|w| w.contains("SIPLLM_HOME")),
                    "{:?}",
                    tuned.warnings
                );
            }
        }
    }
}

/// Runs [`default_home_child`] with `vars` set and every other `SIPLLM_*` and `HOME`
/// removed.
fn run_child(vars: &[(&str, &OsStr)], expect: Option<&Path>) {
    let mut child = Command::new(std::env::current_exe().unwrap());
    child.args([
        "--exact",
        "default_home_child",
        "--ignored",
        "--test-threads=1",
    ]);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("SIPLLM_") {
            child.env_remove(&name);
        }
    }
    child.env_remove("HOME").env_remove(EXPECT_ENV);
    for (name, value) in vars {
        child.env(name, value);
    }
    if let Some(dir) = expect {
        child.env(EXPECT_ENV, dir);
    }
    let out = child.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "{out:?}"
    );
}

/// The files under `dir`, recursively, relative to it.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else {
                found.push(path.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    found
}

#[test]
fn the_default_options_cache_under_sipllm_home() {
    let sipllm_home = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    run_child(
        &[
            ("SIPLLM_HOME", sipllm_home.path().as_os_str()),
            ("HOME", home.path().as_os_str()),
        ],
        Some(&sipllm_home.path().join("runtime")),
    );
    assert!(files_under(home.path()).is_empty());
}

#[test]
fn the_default_options_cache_under_dot_sipllm_without_sipllm_home() {
    let home = tempfile::tempdir().unwrap();
    run_child(
        &[("HOME", home.path().as_os_str())],
        Some(&home.path().join(".sipllm").join("runtime")),
    );
    let files = files_under(home.path());
    assert!(
        files
            .iter()
            .any(|f| f.starts_with(".sipllm/runtime") && f.extension() == Some("json".as_ref())),
        "{files:?}"
    );
}

#[test]
fn the_default_options_without_any_home_measure_and_warn() {
    run_child(&[], None);
}
