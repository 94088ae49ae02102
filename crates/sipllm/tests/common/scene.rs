//! The scene of the trials against the stand-in llama-bench: a home and a copy of a model
//! header of their own, and `sipllm` run with this test binary as its llama-bench.
#![allow(dead_code, reason = "each test binary uses a part of the scene")]

use crate::common;
use libtest_mimic::{Arguments, Failed, Trial};
use llama_bench::stand_in;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

/// A GGUF header that the workload reader and the stand-in both take.
pub const MODEL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../model-workload/tests/fixtures/gguf-py-llama-2-layers.gguf"
);

/// A home and a model file of their own.
pub struct Scene {
    /// The folder of the home and the model.
    pub dir: tempfile::TempDir,
    /// The model header's copy.
    pub model: PathBuf,
}

impl Scene {
    pub fn new() -> Scene {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("tiny.gguf");
        std::fs::copy(MODEL, &model).unwrap();
        Scene { dir, model }
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// `sipllm ARGS` with the stand-in in `mode` as its llama-bench, no `SIPLLM_*` of the
    /// caller's, a quiet machine.
    pub fn sipllm(&self, mode: &str, args: &[&str]) -> Command {
        let mut cmd = common::hermetic(env!("CARGO_BIN_EXE_sipllm"));
        cmd.env("SIPLLM_HOME", self.home())
            .env(stand_in::MODE_ENV, mode)
            .args(args);
        cmd
    }

    /// `sipllm --runtime llama.cpp --llama-bench <this binary> --gguf <model> ARGS`.
    pub fn tune(&self, mode: &str, args: &[&str]) -> Command {
        let mut cmd = self.sipllm(mode, &[]);
        cmd.args(["--runtime", "llama.cpp", "--llama-bench"])
            .arg(std::env::current_exe().unwrap())
            .arg("--gguf")
            .arg(&self.model)
            .args(args);
        cmd
    }

    /// The profiles in the home's store.
    pub fn profiles(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(self.home().join("runtime")) else {
            return Vec::new();
        };
        let mut paths: Vec<PathBuf> = entries
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension() == Some(OsStr::new("json")))
            .collect();
        paths.sort();
        paths
    }
}

/// The CPUs the tune may use here (its thread limit), detected from this machine's own root
/// so that a `SIPLLM_SYSROOT` in the test's environment (the children never see one) cannot
/// move it.
pub fn cpus() -> usize {
    let hw = device_profile::get_hardware_info_from_root(std::path::Path::new("/"));
    auto_tuner::AutoTunerOptions::default()
        .question
        .thread_limit(&hw)
}

/// A trial: its name and its body.
pub type Test = (&'static str, fn() -> Result<(), Failed>);

/// The `main` of a test binary that is its own stand-in: the stand-in's when
/// `FAKE_LLAMA_BENCH_MODE` is set, else `tests` on `libtest-mimic`.
pub fn stand_in_or_run(tests: &[Test]) -> ExitCode {
    if std::env::var_os(stand_in::MODE_ENV).is_some() {
        return stand_in::main();
    }
    let trials = tests
        .iter()
        .map(|&(name, f)| Trial::test(name, f))
        .collect();
    libtest_mimic::run(&Arguments::from_args(), trials).exit_code()
}
