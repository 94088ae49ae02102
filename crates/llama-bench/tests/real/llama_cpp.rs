//! What the real-binary tests of every crate share: finding llama.cpp's binaries in
//! `LLAMA_CPP_BIN`, what a trial does without them (ignored with the reason, a failure under
//! CI), and the tiny llama written in f16 and quantized to `Q4_K_M` by `llama-quantize`.
//! Included by `#[path]` beside `tiny_model.rs`, which the including test declares as
//! `mod tiny_model`.

use super::tiny_model::TinyLlama;
use libtest_mimic::{Completion, Failed};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The variable naming the folder of llama.cpp's binaries.
pub const BIN_ENV: &str = "LLAMA_CPP_BIN";

/// The quantized model's file name.
pub const Q4_K_M_FILE: &str = "tiny-llama-Q4_K_M.gguf";

/// The llama.cpp binaries.
pub struct Binaries {
    pub bench: PathBuf,
    pub quantize: PathBuf,
}

/// Why there are no binaries.
pub enum Missing {
    /// The variable is not set: ignored, except under CI.
    Unset(String),
    /// It names a folder without them: a failure.
    Wrong(String),
}

impl Missing {
    /// What a trial without binaries gives: ignored with the reason, except under CI (`CI`
    /// set to anything but `false` or `0`) or for a folder that lacks them, a failure.
    pub fn outcome(&self) -> Result<Completion, Failed> {
        let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        match self {
            Missing::Unset(reason) if in_ci => Err(format!("under CI: {reason}").into()),
            Missing::Unset(reason) => Ok(Completion::ignored_with(reason)),
            Missing::Wrong(reason) => Err(reason.as_str().into()),
        }
    }
}

/// The binaries in the folder `LLAMA_CPP_BIN` names, or why they cannot be used.
pub fn binaries() -> Result<Binaries, Missing> {
    let Some(folder) = std::env::var_os(BIN_ENV).map(PathBuf::from) else {
        return Err(Missing::Unset(format!(
            "{BIN_ENV} is not set: set it to a folder with llama.cpp's llama-bench and \
             llama-quantize (`.ci/llama.cpp` builds them and prints the folder)"
        )));
    };
    let find = |name: &str| {
        let path = folder.join(name);
        if path.is_file() {
            Ok(path)
        } else {
            Err(Missing::Wrong(format!(
                "{BIN_ENV}={} has no {name}",
                folder.display()
            )))
        }
    };
    Ok(Binaries {
        bench: find("llama-bench")?,
        quantize: find("llama-quantize")?,
    })
}

/// The tiny model in f16 and in `Q4_K_M`.
pub struct TinyModels {
    #[allow(dead_code, reason = "sipllm's trials run only the quantized file")]
    pub f16: PathBuf,
    pub q4_k_m: PathBuf,
}

/// Writes the tiny model in f16 in `dir` and quantizes it to `Q4_K_M` with `binaries`.
pub fn make_tiny_models(dir: &Path, binaries: &Binaries) -> Result<TinyModels, String> {
    let f16 = dir.join("tiny-llama-f16.gguf");
    let q4_k_m = dir.join(Q4_K_M_FILE);
    TinyLlama::default()
        .write(&f16)
        .map_err(|e| format!("cannot write {}: {e}", f16.display()))?;
    let out = Command::new(&binaries.quantize)
        .arg(&f16)
        .arg(&q4_k_m)
        .arg("Q4_K_M")
        .output()
        .map_err(|e| format!("cannot start {}: {e}", binaries.quantize.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            binaries.quantize.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(TinyModels { f16, q4_k_m })
}
