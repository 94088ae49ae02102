//! What a profile measured through llama.cpp records besides its thread counts
//! ([`RuntimeRecord`], in `RuntimeProfile::runtime`): the build, the model, llama.cpp's own
//! knobs per phase and every candidate that crashed, and the checks of a record read from a
//! file.

use crate::candidates::CoreSet;
use crate::phase::{Phase, Step};
use crate::runtime_key::LLAMA_CPP;
use llama_bench::ModelIdentity;
use serde::{Deserialize, Serialize};

/// The most crashed candidates a profile read from a file may record.
const MAX_FAILURES: usize = 4096;

/// The most characters of a text field of a [`RuntimeRecord`] read from a file.
const MAX_RECORD_TEXT: usize = 4096;

/// llama.cpp's own knobs of one phase, beside its thread count and pinning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LlamaKnobs {
    /// Whether weights are repacked into the CPU's extra buffer types (llama.cpp's
    /// default); `false` is `--repack 0` in llama-bench, `--no-repack` in llama-cli and
    /// llama-server.
    pub repack: bool,
    /// The polling level (`--poll`, 0 to 100), when not llama.cpp's default of 50.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll: Option<u8>,
}

impl Default for LlamaKnobs {
    fn default() -> LlamaKnobs {
        LlamaKnobs {
            repack: true,
            poll: None,
        }
    }
}

/// A candidate that crashed: where in the search, the setting, and the signal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The phase measured.
    pub phase: Phase,
    /// The step of the search.
    pub step: Step,
    /// Threads (`-t`).
    pub threads: usize,
    /// Where they ran (a pinned set is `-C MASK --cpu-strict 1`).
    pub cores: CoreSet,
    /// Repacking and polling.
    pub knobs: LlamaKnobs,
    /// The signal it died of (11 is `SIGSEGV`).
    pub signal: i32,
    /// The command line.
    pub command: String,
}

/// What a profile measured through llama.cpp records, in [`RuntimeProfile::runtime`](crate::RuntimeProfile::runtime).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeRecord {
    /// The runtime measured: [`LLAMA_CPP`].
    pub name: String,
    /// The llama.cpp commit of the binary measured.
    pub build_commit: String,
    /// Its build number, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_number: Option<i64>,
    /// The model file's identity.
    pub model: ModelIdentity,
    /// The model file's name (without its directory), for people.
    pub model_file: String,
    /// Tokens of a decode run (`-n`).
    pub gen_tokens: u32,
    /// Tokens of a prefill run (`-p`, the request's batch).
    pub prompt_tokens: u32,
    /// Repacking and polling of decode.
    pub decode: LlamaKnobs,
    /// Repacking and polling of prefill.
    pub prefill: LlamaKnobs,
    /// Every candidate that crashed, in the order met.
    #[serde(default)]
    pub failures: Vec<Failure>,
}

impl RuntimeRecord {
    /// The knobs of `phase`.
    pub fn knobs(&self, phase: Phase) -> LlamaKnobs {
        match phase {
            Phase::Decode => self.decode,
            Phase::Prefill => self.prefill,
        }
    }

    /// Whether a run with repacking crashed in any phase.
    pub fn repack_crashed(&self) -> bool {
        self.failures.iter().any(|f| f.knobs.repack)
    }

    /// Checks a record read from a file: the runtime's name, a plain commit, bounded text
    /// and lists, polling levels within 0 to 100.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.name != LLAMA_CPP {
            return Err(format!(
                "its runtime {} is not {LLAMA_CPP}",
                model_workload::shown(&self.name)
            ));
        }
        let plain = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
        if self.build_commit.is_empty()
            || self.build_commit.len() > 64
            || !self.build_commit.chars().all(plain)
        {
            return Err(format!(
                "its llama.cpp build commit {} is not a commit",
                model_workload::shown(&self.build_commit)
            ));
        }
        let hex = |s: &str| s.len() == 16 && s.chars().all(|c| c.is_ascii_hexdigit());
        if !hex(&self.model.header_hash) {
            return Err(format!(
                "its model header hash {} is not 16 hexadecimal digits",
                model_workload::shown(&self.model.header_hash)
            ));
        }
        if self.failures.len() > MAX_FAILURES {
            return Err(format!(
                "it records {} failures, more than {MAX_FAILURES}",
                self.failures.len()
            ));
        }
        let long = std::iter::once(&self.model_file)
            .chain(self.failures.iter().map(|f| &f.command))
            .any(|s| s.chars().count() > MAX_RECORD_TEXT);
        if long {
            return Err(format!(
                "a text field of its llama.cpp record is longer than {MAX_RECORD_TEXT} characters"
            ));
        }
        let knobs = [self.decode, self.prefill]
            .into_iter()
            .chain(self.failures.iter().map(|f| f.knobs));
        if knobs.into_iter().any(|k| k.poll.is_some_and(|p| p > 100)) {
            return Err("a polling level is above 100".to_string());
        }
        Ok(())
    }
}
