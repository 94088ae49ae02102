//! llama.cpp's own GEMV beside ours: ggml's `MUL_MAT` timed by llama.cpp's
//! `test-backend-ops perf` (from the folder `LLAMA_CPP_BIN` names, as
//! `.ci/llama.cpp` leaves it), on our shapes and formats.
//!
//! `test-backend-ops` has its own list of perf cases, which holds only some of our shapes, so
//! each measurement writes one `MUL_MAT` line of its `--test-file` format (the generic op of
//! `make_test_cases_from_file`: op, output type, sizes, sources with their strides) and
//! reads the `us/run` of its report. Two of its habits shape the comparison:
//! - It sets `hardware_concurrency() / 2` threads. To run `n` threads the process gets a
//!   preloaded `get_nprocs` (libstdc++'s source of `hardware_concurrency`) that answers `2n`:
//!   a shared object compiled here with the system's `cc`; without one, only the machine's
//!   own half is measured.
//! - It times one weight buffer over and over, so weights smaller than the L3 are read from
//!   cache. Such a cell is paired with our GEMV on one matrix (from cache too), never with our
//!   rotation from DRAM ([`LlamaCpp::from_dram`]).
//!
//! Every run is bounded: a timeout, and a cap on the output read.

use matmul_kernel::{WeightFormat, WeightShape};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The environment variable that names the folder of `test-backend-ops`.
pub const BIN_ENV: &str = "LLAMA_CPP_BIN";

/// ggml's `GGML_OP_MUL_MAT` at the measured llama.cpp commit (0c1e57098).
const GGML_OP_MUL_MAT: u32 = 29;

/// The longest one `test-backend-ops` run may take.
const TIMEOUT: Duration = Duration::from_secs(120);

/// The most output read from one run's stream.
const MAX_OUTPUT: usize = 1 << 20;

/// The preloaded `get_nprocs` (C): the thread count's double from the environment.
const NPROCS_SOURCE: &str = "#include <stdlib.h>\n\
    int get_nprocs(void) { const char *v = getenv(\"SIPLLM_PERF_NPROCS\"); \
    int n = v ? atoi(v) : 0; return n > 0 ? n : 1; }\n\
    int get_nprocs_conf(void) { return get_nprocs(); }\n";

/// A usable `test-backend-ops`, with what it needs to run at a chosen thread count.
pub struct LlamaCpp {
    binary: PathBuf,
    /// The preloaded `get_nprocs`, when `cc` could build it.
    nprocs: Option<PathBuf>,
    /// Holds the test files and the shared object.
    dir: tempfile::TempDir,
    /// The machine's logical CPUs, as `hardware_concurrency` sees them.
    hardware_threads: usize,
    /// Why it is not run again in this report: a run that could not start or gave no answer
    /// within [`TIMEOUT`] (a broken or hanging binary would otherwise cost every cell its
    /// timeout).
    stopped: std::cell::RefCell<Option<String>>,
}

impl LlamaCpp {
    /// The binary of `$LLAMA_CPP_BIN`, `Ok(None)` when the variable is unset, `Err` when it
    /// names no usable `test-backend-ops`. Warnings (no `cc`) go to `warnings`.
    pub fn from_env(warnings: &mut Vec<String>) -> Result<Option<LlamaCpp>, String> {
        let Some(binary) = LlamaCpp::binary_from_env()? else {
            return Ok(None);
        };
        let tmp = tempfile::tempdir().map_err(|e| format!("a temporary folder: {e}"))?;
        let nprocs = build_nprocs(tmp.path())
            .map_err(|e| {
                warnings.push(format!(
                    "llama.cpp: no preloaded get_nprocs ({e}): only its own thread count is measured"
                ))
            })
            .ok();
        let hardware_threads = std::thread::available_parallelism().map_or(1, usize::from);
        Ok(Some(LlamaCpp {
            binary,
            nprocs,
            dir: tmp,
            hardware_threads,
            stopped: std::cell::RefCell::new(None),
        }))
    }

    /// `$LLAMA_CPP_BIN/test-backend-ops`, `Ok(None)` when the variable is unset, `Err` when
    /// it is not there: what a run checks before it measures anything, so that a wrong folder
    /// fails at once rather than after the other sections.
    pub fn binary_from_env() -> Result<Option<std::path::PathBuf>, String> {
        // Empty is unset, as for the workspace's other variables.
        let Some(dir) = std::env::var_os(BIN_ENV).filter(|dir| !dir.is_empty()) else {
            return Ok(None);
        };
        let binary = Path::new(&dir).join("test-backend-ops");
        if !binary.is_file() {
            return Err(format!(
                "{BIN_ENV}={}: no test-backend-ops there",
                Path::new(&dir).display()
            ));
        }
        Ok(Some(binary))
    }

    /// Whether `test-backend-ops`'s one buffer of `weight_bytes` exceeds the L3, so that it
    /// cannot stay there whole (a buffer a few times the L3 is still read in part from it:
    /// ours is paired on one matrix either way).
    pub fn from_dram(weight_bytes: u64, l3_bytes: u64) -> bool {
        weight_bytes > l3_bytes
    }

    /// Why it is no longer run in this report, if it stopped (see [`LlamaCpp::time_gemv`]).
    pub fn stopped(&self) -> Option<String> {
        self.stopped.borrow().clone()
    }

    /// Whether it can run `n_threads` threads.
    pub fn runs(&self, n_threads: usize) -> bool {
        self.nprocs.is_some() || n_threads == (self.hardware_threads / 2).max(1)
    }

    /// Seconds per `MUL_MAT` of a `shape` matrix of `format` with one f32 column, on
    /// `n_threads` threads (test-backend-ops' own mean over its runs). Once a run could not
    /// start or gave no answer in time, every later call is refused at once, naming it.
    pub fn time_gemv(
        &self,
        format: WeightFormat,
        shape: WeightShape,
        n_threads: usize,
    ) -> Result<f64, String> {
        if let Some(why) = self.stopped() {
            return Err(format!("not run again in this report ({why})"));
        }
        let line = mul_mat_line(format, shape)
            .ok_or_else(|| format!("{format} {shape:?} is not whole blocks"))?;
        let file = self.dir.path().join(format!(
            "mul_mat_{}_{}x{}.txt",
            format.name(),
            shape.n_out,
            shape.n_in
        ));
        std::fs::write(&file, line).map_err(|e| format!("{}: {e}", file.display()))?;
        let mut cmd = Command::new(&self.binary);
        cmd.args(["perf", "-b", "CPU", "--test-file"]).arg(&file);
        if let Some(nprocs) = &self.nprocs {
            cmd.env("LD_PRELOAD", nprocs)
                .env("SIPLLM_PERF_NPROCS", (2 * n_threads).to_string());
        } else if !self.runs(n_threads) {
            return Err(format!("cannot run {n_threads} threads without get_nprocs"));
        }
        let what = format!("test-backend-ops {format} {}x{}", shape.n_out, shape.n_in);
        let output = run(cmd, &what).map_err(|(message, stops)| {
            if stops {
                *self.stopped.borrow_mut() = Some(message.clone());
            }
            message
        })?;
        parse_us_per_run(&output)
            .map(|us| us * 1e-6)
            .ok_or_else(|| format!("{what}: no `us/run` in its report"))
    }
}

/// The `--test-file` line of one `MUL_MAT`: `y[n_out] = W[n_out × n_in] · x[n_in]`, with ggml's
/// sizes (`ne0` the inner dimension) and strides; `None` when a row is not whole blocks.
pub fn mul_mat_line(format: WeightFormat, shape: WeightShape) -> Option<String> {
    let WeightShape { n_out, n_in } = shape;
    let row_bytes = format.row_bytes(n_in).ok()?;
    let (ggml_type, block_bytes) = (ggml_type(format), format.block_bytes());
    let (x_row, w_all) = (4 * n_in, row_bytes * n_out);
    Some(format!(
        "{GGML_OP_MUL_MAT} 0 {n_out} 1 1 1 0 2 \
         {ggml_type} {n_in} {n_out} 1 1 {block_bytes} {row_bytes} {w_all} {w_all} \
         0 {n_in} 1 1 1 4 {x_row} {x_row} {x_row} -\n"
    ))
}

/// ggml's `ggml_type` number of a format.
fn ggml_type(format: WeightFormat) -> u32 {
    match format {
        WeightFormat::F32 => 0,
        WeightFormat::F16 => 1,
        WeightFormat::Q4_0 => 2,
        WeightFormat::Q8_0 => 8,
        WeightFormat::Q4K => 12,
        WeightFormat::Q6K => 14,
        WeightFormat::Bf16 => 30,
    }
}

/// The mean time of the first `MUL_MAT` line of a `test-backend-ops perf` report, in µs: the
/// number before `us/run`.
pub fn parse_us_per_run(report: &str) -> Option<f64> {
    let line = report.lines().find(|l| l.contains("MUL_MAT("))?;
    let before = line.split("us/run").next()?;
    let number = before
        .rsplit(|c: char| c.is_whitespace())
        .find(|s| !s.is_empty())?;
    number
        .parse::<f64>()
        .ok()
        // A time below a nanosecond or past the run's own timeout is no measurement of one
        // GEMV: refused rather than turned into an infinite or a zero rate.
        .filter(|us| us.is_finite() && (1e-3..=TIMEOUT.as_secs_f64() * 1e6).contains(us))
}

/// Compiles the preloaded `get_nprocs` into `dir` with `cc`.
fn build_nprocs(dir: &Path) -> Result<PathBuf, String> {
    let source = dir.join("nprocs.c");
    let object = dir.join("libnprocs.so");
    std::fs::write(&source, NPROCS_SOURCE).map_err(|e| e.to_string())?;
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&object)
        .arg(&source)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cc: {e}"))?;
    if !status.success() {
        return Err(format!("cc: {status}"));
    }
    Ok(object)
}

/// Runs `cmd` to its end with llama-bench's runner (`llama_bench::run_bounded`): within
/// [`TIMEOUT`], at most [`MAX_OUTPUT`] bytes a stream, in a process group of its own that is
/// killed past either, or once it has exited (nothing it started outlives it or holds its
/// output open). Returns its stdout; a failed run is an error naming `what`, and whether it
/// is one that any later run would repeat (it cannot start, or it hangs).
fn run(mut cmd: Command, what: &str) -> Result<String, (String, bool)> {
    use auto_tuner::llama_bench::Error;
    let captured = auto_tuner::llama_bench::run_bounded(&mut cmd, what, TIMEOUT, MAX_OUTPUT)
        .map_err(|e| {
            let stops = matches!(e, Error::Spawn { .. } | Error::Timeout { .. });
            (e.to_string(), stops)
        })?;
    if !captured.status.success() {
        return Err((format!("{what}: {}", captured.status), false));
    }
    Ok(String::from_utf8_lossy(&captured.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `LlamaCpp` of `binary`, two logical CPUs, no preloaded `get_nprocs`.
    fn of(binary: PathBuf, dir: tempfile::TempDir) -> LlamaCpp {
        LlamaCpp {
            binary,
            nprocs: None,
            dir,
            hardware_threads: 2,
            stopped: std::cell::RefCell::new(None),
        }
    }

    #[test]
    fn a_binary_that_cannot_start_is_not_run_again_but_a_failed_run_is() {
        let shape = WeightShape {
            n_out: 32,
            n_in: 32,
        };
        let dir = tempfile::tempdir().unwrap();
        let missing = of(dir.path().join("test-backend-ops"), dir);
        let first = missing.time_gemv(WeightFormat::F32, shape, 1).unwrap_err();
        assert!(missing.stopped().is_some(), "{first}");
        let second = missing.time_gemv(WeightFormat::Q8_0, shape, 1).unwrap_err();
        assert!(
            second.starts_with("not run again in this report"),
            "{second}"
        );

        // A run that fails (a format it refuses, say) stops only its own cell.
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("test-backend-ops");
        // Written by a child process: a file this process held open for writing while
        // another test thread forked would fail to start (ETXTBSY).
        let written = Command::new("sh")
            .arg("-c")
            .arg(r##"printf '%s\n' '#!/bin/sh' 'echo "MUL_MAT(x): 3 runs - 1e-300 us/run"' 'exit 3' > "$0" && chmod 755 "$0""##)
            .arg(&script)
            .status()
            .unwrap();
        assert!(written.success());
        let failing = of(script, dir);
        for _ in 0..2 {
            let err = failing.time_gemv(WeightFormat::F32, shape, 1).unwrap_err();
            assert!(err.contains("exit status: 3"), "{err}");
        }
        assert_eq!(failing.stopped(), None);
    }

    #[test]
    fn a_mul_mat_line_gives_ggml_sizes_and_strides() {
        let shape = WeightShape {
            n_out: 4096,
            n_in: 14336,
        };
        let line = mul_mat_line(WeightFormat::Q8_0, shape).unwrap();
        let row = 14336 / 32 * 34;
        let expected = format!(
            "29 0 4096 1 1 1 0 2 8 14336 4096 1 1 34 {row} {} {} 0 14336 1 1 1 4 57344 57344 \
             57344 -\n",
            row * 4096,
            row * 4096
        );
        assert_eq!(line, expected);
        let f32_line = mul_mat_line(WeightFormat::F32, WeightShape { n_out: 2, n_in: 3 });
        assert_eq!(
            f32_line.unwrap(),
            "29 0 2 1 1 1 0 2 0 3 2 1 1 4 12 24 24 0 3 1 1 1 4 12 12 12 -\n"
        );
        assert!(mul_mat_line(WeightFormat::Q4K, WeightShape { n_out: 1, n_in: 32 }).is_none());
    }

    #[test]
    fn the_time_is_read_from_the_report_line() {
        let report = "Backend 1/1: CPU\n  MUL_MAT(type=f32,ne=[4096,1,1,1],op_params=[],\
            sources=q8_0[4096,4096,1,1],f32[4096,1,1,1]):   1924 runs -   681.16 us/run -    \
            17440 kB/run - \x1b[1;34m  24.42 GB/s\x1b[0m\n  Backend CPU: OK\n";
        assert_eq!(parse_us_per_run(report), Some(681.16));
        for bad in [
            "",
            "MUL_MAT(x): 3 runs - fast us/run",
            "MUL_MAT(x): 3 runs - -2 us/run",
            "MUL_MAT(x): 3 runs - NaN us/run",
            "MUL_MAT(x): 3 runs - 1e-300 us/run",
            "MUL_MAT(x): 3 runs - 1e300 us/run",
            "ADD(x): 3 runs - 5 us/run",
        ] {
            assert_eq!(parse_us_per_run(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn every_format_has_its_ggml_type() {
        let types: Vec<u32> = WeightFormat::ALL.into_iter().map(ggml_type).collect();
        let mut unique = types.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), types.len(), "{types:?}");
    }

    #[test]
    fn only_weights_larger_than_the_l3_count_as_from_dram() {
        assert!(LlamaCpp::from_dram(64 << 20, 32 << 20));
        assert!(!LlamaCpp::from_dram(17 << 20, 32 << 20));
    }
}
