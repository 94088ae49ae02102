//! llama.cpp's `llama-bench` as a measurement: a typed run, a bounded runner and its JSON
//! output read and checked.
//!
//! - [`Run`]: one configuration (threads, decode or prefill tokens, CPU mask, strict
//!   pinning, polling, weight repacking, repetitions) and the arguments it becomes
//!   ([`Run::args`]); [`CpuMask`] is `-C`'s hexadecimal mask.
//! - [`LlamaBench`]: the binary, its timeout and output limit. [`LlamaBench::bench`] runs one
//!   [`Run`] in a process group of its own (killed as a whole past the timeout or the output
//!   limit), reads `-o json` ([`parse_json`]) and checks that the one test is the one asked for
//!   ([`check_against`]); [`LlamaBench::build_info`] asks the binary which llama.cpp build it
//!   is, within [`PROBE_TIMEOUT`]; [`LlamaBench::bench_within`] bounds one run more tightly
//!   (a tuner's budget left).
//! - [`kill_running`]: kills the process group of every run under way, from a program's
//!   signal handler (async-signal-safe), so that an interrupted program leaves none behind.
//! - [`ModelIdentity`] and [`BuildInfo`]: the model file and the llama.cpp build, for a cache
//!   key that a new file or a new build invalidates; [`LlamaBench::default_threads`] is the
//!   thread count llama-bench runs without `-t`.
//! - [`stand_in`]: a stand-in llama-bench with a known optimum and every misbehaviour, for
//!   tests (this crate's `fake-llama-bench` binary runs it).
//!
//! Every failure is an [`Error`] naming the command line: output that is not JSON, a missing
//! field, a NaN, negative or absurd rate, a hang past the timeout, megabytes of output, a
//! non-zero exit. A crash is its own variant, [`Error::Crashed`], since for a tuner it is a
//! configuration that fails on this machine (llama.cpp 0c1e57098's AMX weight repacking
//! segfaults in prompt processing on some Xeons), not a broken setup.
//!
//! ```no_run
//! use llama_bench::{LlamaBench, ModelIdentity, Run};
//!
//! let bench = LlamaBench::new("llama-bench");
//! let model = std::path::Path::new("model-Q4_K_M.gguf");
//! let build = bench.build_info()?;
//! let identity = ModelIdentity::of(model)?;
//! let decode = bench.bench(model, &Run::decode(4, 16))?;
//! let prefill = bench.bench(model, &Run { repack: Some(false), ..Run::prefill(4, 64) })?;
//! println!(
//!     "{} at {} ({} bytes, {}): tg16 {:.1} tok/s, pp64 {:.1} tok/s",
//!     decode.model_type, build.commit, identity.size, identity.header_hash,
//!     decode.avg_ts, prefill.avg_ts
//! );
//! # Ok::<(), llama_bench::Error>(())
//! ```
//!
//! The library never prints, but for [`stand_in::main`]: the `main` of a test program that
//! plays llama-bench, never called by the library itself. Unix only (process groups and
//! signals).
#![deny(missing_docs)]
#![deny(unsafe_code)]

#[cfg(not(unix))]
compile_error!("llama-bench runs processes in process groups: Unix only");

mod bench;
mod error;
mod identity;
mod output;
mod process;
mod run;
// The stand-in resets SIGSEGV's disposition to die of it: its one `unsafe` block.
#[allow(unsafe_code)]
pub mod stand_in;

pub use bench::{DEFAULT_OUTPUT_LIMIT, DEFAULT_TIMEOUT, LlamaBench, PROBE_TIMEOUT};
pub use error::Error;
pub use identity::{BuildInfo, IDENTITY_BYTES, ModelIdentity};
pub use output::{BenchResult, MAX_TEXT_CHARS, MAX_TOKENS_PER_SECOND, check_against, parse_json};
pub use process::{Captured, find_program, kill_running, run_bounded};
pub use run::{
    CpuMask, DEFAULT_REPETITIONS, MAX_CPUS, MAX_REPETITIONS, MAX_THREADS, MAX_TOKENS, Phase, Run,
};
