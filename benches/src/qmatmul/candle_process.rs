//! candle in a process of its own per thread count, driven line by line from the report.
//!
//! candle sizes its thread pools once per process from `CANDLE_NUM_THREADS` /
//! `RAYON_NUM_THREADS` (see [`crate::contenders::candle`]), so the report starts one `perf
//! --candle-worker` process per thread count with both variables set ([`CandleProcess`]) and
//! asks it, between its own blocks, to time a block of candle calls: the interleaving is the
//! same as in one process, only candle's block runs elsewhere. The worker rebuilds the
//! weights with [`weight_set`] from the same arguments, so it multiplies the same bytes; the
//! report compares its first product with ours to be sure.
//!
//! The protocol, one line each way per request ([`serve`] answers):
//!
//! | request | reply |
//! |---|---|
//! | `threads` | `threads N`: the threads candle's kernels run on |
//! | `load FORMAT N_OUT N_IN N_MATRICES` | `ok`: the set is built (any earlier set dropped) and each matrix called once with each count of [`WARM_M`] tokens (candle repacks some formats on first use) |
//! | `time M WARM_US TIMED` | `secs S`: the median seconds of `TIMED` calls with `M` tokens, after untimed ones for `WARM_US` microseconds (at least one; none for 0), each call on the next matrix of the set |
//! | `product M` | `product Y…`: the `M × n_out` values of one call on the first matrix |
//! | `unload` | `ok`: the set is dropped |
//!
//! Any failure is the reply `err MESSAGE`; the worker stops at the end of its input.

use super::timing::{Rotor, time_block};
use super::workload::{GEMM_M, activations, weight_set};
use crate::contenders::candle::{CandleMatmul, candle_threads};
use candle_core::Tensor;
use matmul_kernel::{WeightFormat, WeightShape};
use std::hint::black_box;
use std::io::{self, BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

/// The flag of the `perf` binary that makes it a candle worker.
pub const WORKER_FLAG: &str = "--candle-worker";

/// The token counts each matrix is called with once, untimed, when a set is loaded: every
/// count the report times. candle repacks some formats on a matrix's first call of a kind
/// (candle-core 0.11 on x86: one packing for every `m` with AVX512-VNNI, and on a CPU with
/// AMX-INT8 another for q4_K at `m ≥ 32`; on aarch64 one for `m = 1` and one for larger `m`),
/// so a set warmed with fewer counts would time packings, not products.
pub const WARM_M: [usize; 3] = [1, 2, GEMM_M];

/// The weights a worker multiplies, and its inputs.
struct Loaded {
    matrices: Vec<CandleMatmul>,
    n_in: usize,
    rotor: Rotor,
}

impl Loaded {
    fn input(&self, m: usize) -> candle_core::Result<Tensor> {
        self.matrices[0].input(&activations(m, self.n_in), m)
    }
}

/// Answers the requests of `input` on `output` until the input ends (the worker's loop).
pub fn serve(input: impl BufRead, mut output: impl Write) -> io::Result<()> {
    let mut loaded: Option<Loaded> = None;
    for line in input.lines() {
        let line = line?;
        let reply = answer(&line, &mut loaded).unwrap_or_else(|err| format!("err {err}"));
        writeln!(output, "{reply}")?;
        output.flush()?;
    }
    Ok(())
}

/// The longest side of a matrix a request may load (the perf shapes' longest is 14336).
const MAX_SIDE: usize = 1 << 20;
/// The most matrices a request may load (a rotation has a few dozen).
const MAX_MATRICES: usize = 4096;
/// The most weights a request may load in all (4 Gi: 16 GiB as f32).
const MAX_WEIGHTS: usize = 1 << 32;
/// The most activation rows a timed call may take.
const MAX_TOKENS: usize = 1 << 16;
/// The most of any other count: the warm-up's microseconds, the timed calls.
const MAX_COUNT: usize = 1 << 30;

/// The reply to one request line.
fn answer(line: &str, loaded: &mut Option<Loaded>) -> Result<String, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    // Every count of a request is bounded (the worker can be driven by hand): a side or a
    // token count of 0, or any count past its limit, is refused before anything is
    // allocated.
    let number_within = |idx: usize, min: usize, max: usize| -> Result<usize, String> {
        let word = words
            .get(idx)
            .ok_or_else(|| format!("{line:?}: too few words"))?;
        word.parse()
            .ok()
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| format!("{line:?}: {word:?} is not a count of {min} to {max}"))
    };
    let set = |loaded: &mut Option<Loaded>| -> Result<(), String> {
        if loaded.is_none() {
            return Err(format!("{line:?}: no weights loaded"));
        }
        Ok(())
    };
    match words.first().copied() {
        Some("threads") => Ok(format!("threads {}", candle_threads())),
        Some("load") if words.len() == 5 => {
            *loaded = None;
            let format: WeightFormat = words[1].parse().map_err(|e| format!("{e}"))?;
            let shape = WeightShape {
                n_out: number_within(2, 1, MAX_SIDE)?,
                n_in: number_within(3, 1, MAX_SIDE)?,
            };
            let n_matrices = number_within(4, 1, MAX_MATRICES)?;
            if shape
                .n_out
                .saturating_mul(shape.n_in)
                .saturating_mul(n_matrices)
                > MAX_WEIGHTS
            {
                return Err(format!("{line:?}: more than {MAX_WEIGHTS} weights in all"));
            }
            let set = weight_set(format, shape, n_matrices).map_err(|e| e.to_string())?;
            let matrices = set
                .iter()
                .map(CandleMatmul::new)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("candle {format}: {e}"))?;
            let set = Loaded {
                matrices,
                n_in: shape.n_in,
                rotor: Rotor::new(n_matrices),
            };
            // candle's packings on a matrix's first calls ([`WARM_M`]), made now, untimed.
            for m in WARM_M {
                let x = set.input(m).map_err(|e| e.to_string())?;
                for matrix in &set.matrices {
                    black_box(matrix.forward(&x).map_err(|e| e.to_string())?);
                }
            }
            *loaded = Some(set);
            Ok("ok".into())
        }
        Some("time") if words.len() == 4 => {
            set(loaded)?;
            let m = number_within(1, 1, MAX_TOKENS)?;
            let (warm, timed) = (
                number_within(2, 0, MAX_COUNT)?,
                number_within(3, 0, MAX_COUNT)?,
            );
            let timed = timed.max(1);
            let Some(set) = loaded.as_mut() else {
                unreachable!("checked above")
            };
            let x = set.input(m).map_err(|e| e.to_string())?;
            let mut failure = None;
            let warm = std::time::Duration::from_micros(warm as u64);
            let secs = time_block(&mut set.rotor, warm, timed, |idx| {
                match set.matrices[idx].forward(&x) {
                    Ok(y) => {
                        black_box(y);
                    }
                    Err(err) => failure = Some(err.to_string()),
                }
            });
            match failure {
                Some(err) => Err(err),
                None => Ok(format!("secs {secs}")),
            }
        }
        Some("product") if words.len() == 2 => {
            set(loaded)?;
            let m = number_within(1, 1, MAX_TOKENS)?;
            let Some(set) = loaded.as_ref() else {
                unreachable!("checked above")
            };
            let x = set.input(m).map_err(|e| e.to_string())?;
            let y = set.matrices[0].product(&x).map_err(|e| e.to_string())?;
            let values: Vec<String> = y.iter().map(f32::to_string).collect();
            Ok(format!("product {}", values.join(" ")))
        }
        Some("unload") => {
            *loaded = None;
            Ok("ok".into())
        }
        _ => Err(format!("{line:?}: unknown request")),
    }
}

/// The report's side: one worker process (or, in tests, any reader and writer that
/// [`serve`] answers).
pub struct CandleProcess {
    child: Option<Child>,
    to_worker: Box<dyn Write + Send>,
    from_worker: Box<dyn BufRead + Send>,
}

impl CandleProcess {
    /// Starts this executable as a worker whose candle runs on `n_threads` threads.
    pub fn spawn(n_threads: usize) -> io::Result<CandleProcess> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg(WORKER_FLAG)
            .env("CANDLE_NUM_THREADS", n_threads.to_string())
            .env("RAYON_NUM_THREADS", n_threads.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let (stdin, stdout): (ChildStdin, ChildStdout) =
            match (child.stdin.take(), child.stdout.take()) {
                (Some(stdin), Some(stdout)) => (stdin, stdout),
                _ => return Err(io::Error::other("candle worker without pipes")),
            };
        let mut process = CandleProcess::over(stdout, stdin);
        process.child = Some(child);
        Ok(process)
    }

    /// A connection to a worker that reads requests from what `to_worker` writes and whose
    /// replies `from_worker` reads.
    pub fn over(
        from_worker: impl io::Read + Send + 'static,
        to_worker: impl Write + Send + 'static,
    ) -> CandleProcess {
        CandleProcess {
            child: None,
            to_worker: Box::new(to_worker),
            from_worker: Box::new(BufReader::new(from_worker)),
        }
    }

    /// Sends `request`; the reply's words after `expected`, or the worker's error.
    fn request(&mut self, request: &str, expected: &str) -> io::Result<String> {
        writeln!(self.to_worker, "{request}")?;
        self.to_worker.flush()?;
        let mut reply = String::new();
        if self.from_worker.read_line(&mut reply)? == 0 {
            return Err(io::Error::other(format!(
                "candle worker ended before answering {request:?}"
            )));
        }
        parse_reply(reply.trim_end(), expected).map_err(io::Error::other)
    }

    /// The threads candle runs on in the worker.
    pub fn threads(&mut self) -> io::Result<usize> {
        let reply = self.request("threads", "threads")?;
        reply
            .parse()
            .map_err(|_| io::Error::other(format!("candle worker: threads {reply:?}")))
    }

    /// Builds the worker's set: `n_matrices` of [`weight_set`]`(format, shape, n_matrices)`.
    pub fn load(
        &mut self,
        format: WeightFormat,
        shape: WeightShape,
        n_matrices: usize,
    ) -> io::Result<()> {
        let request = format!("load {format} {} {} {n_matrices}", shape.n_out, shape.n_in);
        self.request(&request, "ok").map(drop)
    }

    /// The median seconds of candle's block: `timed` calls with `m` tokens after untimed
    /// calls for `warm` (as [`time_block`]).
    pub fn time(&mut self, m: usize, warm: Duration, timed: usize) -> io::Result<f64> {
        let reply = self.request(&format!("time {m} {} {timed}", warm.as_micros()), "secs")?;
        reply
            .parse()
            .map_err(|_| io::Error::other(format!("candle worker: secs {reply:?}")))
    }

    /// candle's product of `m` tokens through the first matrix (`m × n_out` values).
    pub fn product(&mut self, m: usize) -> io::Result<Vec<f32>> {
        let reply = self.request(&format!("product {m}"), "product")?;
        reply
            .split_whitespace()
            .map(|v| {
                v.parse()
                    .map_err(|_| io::Error::other(format!("candle worker: value {v:?}")))
            })
            .collect()
    }

    /// Drops the worker's set.
    pub fn unload(&mut self) -> io::Result<()> {
        self.request("unload", "ok").map(drop)
    }
}

impl Drop for CandleProcess {
    fn drop(&mut self) {
        // Closing the worker's input ends its loop.
        self.to_worker = Box::new(io::sink());
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }
}

/// The words of `reply` after its first word `expected`, or the error it carries.
fn parse_reply(reply: &str, expected: &str) -> Result<String, String> {
    let (head, rest) = reply.split_once(' ').unwrap_or((reply, ""));
    match head {
        "err" => Err(format!("candle worker: {rest}")),
        _ if head == expected => Ok(rest.to_string()),
        _ => Err(format!(
            "candle worker: expected {expected:?}, got {reply:?}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contenders::{qgemm, qgemv};
    use threadpool::ThreadPool;

    /// A worker answering on a thread of this process, through pipes.
    fn worker() -> (CandleProcess, std::thread::JoinHandle<io::Result<()>>) {
        let (requests_rx, requests_tx) = io::pipe().unwrap();
        let (replies_rx, replies_tx) = io::pipe().unwrap();
        let handle = std::thread::spawn(move || serve(BufReader::new(requests_rx), replies_tx));
        (CandleProcess::over(replies_rx, requests_tx), handle)
    }

    #[test]
    fn a_worker_times_and_multiplies_the_weights_we_multiply() {
        let shape = WeightShape {
            n_out: 40,
            n_in: 256,
        };
        let (mut process, handle) = worker();
        assert!(process.threads().unwrap() >= 1);
        let format = WeightFormat::Q4_0;
        process.load(format, shape, 3).unwrap();
        let secs = process.time(1, Duration::from_micros(1), 3).unwrap();
        assert!(secs > 0.0 && secs.is_finite(), "{secs}");
        assert!(process.time(4, Duration::ZERO, 1).unwrap() > 0.0);

        let theirs = process.product(1).unwrap();
        let ours_w = &weight_set(format, shape, 3).unwrap()[0];
        let mut ours = vec![0.0; shape.n_out];
        let pool = ThreadPool::new(1);
        let kernel = matmul_kernel::selected();
        qgemv(
            kernel,
            &pool,
            ours_w,
            &activations(1, shape.n_in),
            &mut ours,
        );
        // candle rounds the activations to 8 bits: each product off by at most |w| · max|x|
        // / 254 (see the candle contender's tests), plus f32 sums.
        let dense = ours_w.to_f32().unwrap();
        assert_eq!(theirs.len(), ours.len());
        for (row, (t, o)) in theirs.iter().zip(&ours).enumerate() {
            let w_abs: f32 = dense[row * shape.n_in..][..shape.n_in]
                .iter()
                .map(|w| w.abs())
                .sum();
            let bound = w_abs / 254.0 + 1e-3 * (1.0 + o.abs());
            assert!(
                (t - o).abs() <= bound,
                "row {row}: {t} vs {o}, bound {bound}"
            );
        }
        // Two tokens: candle's GEMM against ours, under the same bound per output.
        let theirs = process.product(2).unwrap();
        let mut ours = vec![0.0; 2 * shape.n_out];
        qgemm(
            kernel,
            &pool,
            ours_w,
            &activations(2, shape.n_in),
            &mut ours,
        );
        assert_eq!(theirs.len(), ours.len());
        for (idx, (t, o)) in theirs.iter().zip(&ours).enumerate() {
            let row = idx % shape.n_out;
            let w_abs: f32 = dense[row * shape.n_in..][..shape.n_in]
                .iter()
                .map(|w| w.abs())
                .sum();
            let bound = w_abs / 254.0 + 1e-3 * (1.0 + o.abs());
            assert!(
                (t - o).abs() <= bound,
                "y[{idx}]: {t} vs {o}, bound {bound}"
            );
        }

        process.unload().unwrap();
        let err = process.time(1, Duration::ZERO, 1).unwrap_err().to_string();
        assert!(err.contains("no weights loaded"), "{err}");
        drop(process);
        handle.join().unwrap().unwrap();
    }

    #[test]
    fn bad_requests_are_errors_not_panics() {
        let mut loaded = None;
        for request in [
            "",
            "jump",
            "load q9_9 4 32 1",
            "load q4_0 4 33 1",
            "load q4_0 four 32 1",
            "time 1 1",
            "product 1",
            // Sizes of 0, and past what can be allocated, are refused before anything is.
            "load q4_0 0 4096 1",
            "load q4_0 4096 0 1",
            "load q4_0 99999999999 4096 1",
            "load q4_0 1048576 1048576 4096",
        ] {
            let reply = answer(request, &mut loaded);
            assert!(reply.is_err(), "{request:?}: {reply:?}");
        }
        assert!(answer("load q8_0 4 32 2", &mut loaded).is_ok());
        assert!(
            answer("time 1 0 1", &mut loaded)
                .unwrap()
                .starts_with("secs ")
        );
        for request in ["time 99999999999 0 1", "time 0 0 1", "product 0"] {
            let reply = answer(request, &mut loaded);
            assert!(reply.is_err(), "{request:?}: {reply:?}");
        }
    }

    #[test]
    fn replies_are_parsed_or_refused() {
        assert_eq!(parse_reply("secs 0.25", "secs").unwrap(), "0.25");
        assert_eq!(parse_reply("ok", "ok").unwrap(), "");
        let err = parse_reply("err no weights loaded", "secs").unwrap_err();
        assert!(err.contains("no weights loaded"), "{err}");
        assert!(parse_reply("product 1 2", "secs").is_err());
    }
}
