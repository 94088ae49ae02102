//! What a llama.cpp tune is keyed by: the runtime's name, the `llama-bench` and model file a
//! tune measures ([`LlamaCpp`]), and the build and model identity ([`LlamaCppKey`]) that
//! name its cache slot and its profile's kernel signature.

use crate::error::TunerError;
use llama_bench::{BuildInfo, LlamaBench, ModelIdentity};
use std::path::PathBuf;

/// The name of the runtime in a profile's [`RuntimeRecord::name`](crate::RuntimeRecord::name).
pub const LLAMA_CPP: &str = "llama.cpp";

/// The llama.cpp a tune measures: its `llama-bench` and the model file.
#[derive(Debug, Clone)]
pub struct LlamaCpp {
    /// The `llama-bench` binary, its timeout and output limit.
    pub bench: LlamaBench,
    /// The `.gguf` model file every run loads.
    pub model: PathBuf,
}

impl LlamaCpp {
    /// `llama-bench` at `binary`, with the default timeout and output limit, on `model`.
    pub fn new(binary: impl Into<PathBuf>, model: impl Into<PathBuf>) -> LlamaCpp {
        LlamaCpp {
            bench: LlamaBench::new(binary),
            model: model.into(),
        }
    }
}

/// What a measurement of llama.cpp depends on besides the machine: the build and the model
/// file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlamaCppKey {
    /// The build, from `llama-bench --version`.
    pub build: BuildInfo,
    /// The model file's size and header hash.
    pub model: ModelIdentity,
}

impl LlamaCppKey {
    /// The key of `runtime`: asks the binary for its build and reads the model's header.
    pub fn of(runtime: &LlamaCpp) -> Result<LlamaCppKey, TunerError> {
        let model = ModelIdentity::of(&runtime.model)?;
        let build = runtime.bench.build_info()?;
        Ok(LlamaCppKey { build, model })
    }

    /// The kernel signature of a profile measured with this build: `llama.cpp <commit>`.
    pub fn signature(&self) -> String {
        signature(&self.build.commit)
    }
}

/// The kernel signature of a profile measured with llama.cpp at `commit`.
pub(crate) fn signature(commit: &str) -> String {
    format!("{LLAMA_CPP} {commit}")
}

/// The part of a profile file's name that the model makes: `llamacpp-<header hash>`.
pub(crate) fn slot_tag(model: &ModelIdentity) -> String {
    format!("llamacpp-{}", model.header_hash)
}
