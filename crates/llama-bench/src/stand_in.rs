//! A stand-in for llama.cpp's `llama-bench`, for the tests of this crate and of the crates
//! that drive it: the same flags and the same `-o json` form, a known optimum, and on
//! request every way a run can go wrong. A test binary calls [`main`] from its own `main`
//! (this crate's `fake-llama-bench`, or a test harness that runs itself as the stand-in).
//!
//! Rates follow `base × 2tp / (t² + p²)` at `t` threads, at most `base` at the peak `p`:
//! decode (`-n`) 100 tokens/s at 2 threads, prefill (`-p`) 1000 tokens/s at 4 threads.
//! `--poll 0` costs 10 %, and repacking (the default) costs decode 22 % (as llama.cpp's AMX
//! repacking costs on a Xeon). The repetitions' rates spread ±1 % around the mean.
//!
//! `FAKE_LLAMA_BENCH_MODE` picks a misbehaviour:
//! - `ok` (or unset): as above;
//! - `amx`: as above, but prefill with repacking on dies of `SIGSEGV`, as llama.cpp 0c1e57098
//!   does with AMX buffers;
//! - `crash`: dies of `SIGSEGV` after the opening `[`; `abort`: of `SIGABRT`;
//! - `shell-crash`: exits with status 139, as a shell reports its child's segfault;
//! - `fail`: prints a load error on stderr and exits with status 1;
//! - `not-json`: a markdown table instead of JSON; `nan`: `avg_ts` printed as `nan`;
//! - `missing-field`: no `avg_ts`; `negative`, `zero`, `absurd`: rates of -5, 0 and 1e12;
//!   `implausible`: 9e8, which the parser takes and a cached profile may not hold;
//! - `wrong-threads`: reports one thread more than asked; `two-tests`, `no-tests`: two
//!   tests, none; `short-samples`: one sample fewer than the repetitions;
//! - `hang`: prints `[` and never ends; `hang-with-child`: starts a child that hangs too,
//!   then hangs;
//! - `hang-no-repack`: as `ok`, but a run with `--repack 0` hangs as `hang` does;
//! - `orphan`: starts a child that hangs holding stdout, prints a good result and exits;
//! - `escaped-orphan`: the same, the child in a process group of its own;
//! - `terminated`: dies of `SIGTERM`, as a run ended from outside;
//! - `huge-model`: a `model_size` larger than any file;
//! - `flood`, `flood-stderr`: 4 MiB on stdout, on stderr;
//! - `no-version`: `--version` is an unknown flag, as in older builds;
//! - `hang-version`: `--version` and `--help` hang (a binary stuck before it answers).
//!
//! `FAKE_LLAMA_BENCH_RUNS=FILE` appends each measuring run's arguments to `FILE`, a line
//! per run. `FAKE_LLAMA_BENCH_CRASH_THREADS=N,M,…` makes runs at those thread counts die of
//! `SIGSEGV` in any mode that measures, and `FAKE_LLAMA_BENCH_COMMIT=HASH` changes the
//! build commit it reports (`fa4e000` by default), as a new llama.cpp build would. `--help`
//! prints llama-bench's line for `-t` with its default, 2 threads.
//!
//! With `FAKE_LLAMA_BENCH_PIDS=FILE`, the hanging modes append the process ids they start
//! (their own and their children's) to FILE, one a line, before they hang.

use std::io::Write;
use std::process::ExitCode;

/// The misbehaviour's variable.
pub const MODE_ENV: &str = "FAKE_LLAMA_BENCH_MODE";

/// Where the hanging modes write their process ids.
pub const PIDS_ENV: &str = "FAKE_LLAMA_BENCH_PIDS";

/// The thread counts at which a run crashes, comma-separated.
pub const CRASH_THREADS_ENV: &str = "FAKE_LLAMA_BENCH_CRASH_THREADS";

/// The build commit reported, instead of [`DEFAULT_COMMIT`].
pub const COMMIT_ENV: &str = "FAKE_LLAMA_BENCH_COMMIT";

/// Where each measuring run appends its command line (the arguments after the program,
/// space-separated, one run per line).
pub const RUNS_ENV: &str = "FAKE_LLAMA_BENCH_RUNS";

/// The build commit reported by default.
pub const DEFAULT_COMMIT: &str = "fa4e000";

/// The build commit of this run.
fn commit() -> String {
    std::env::var(COMMIT_ENV)
        .ok()
        .filter(|c| !c.is_empty() && c.chars().all(|c| c.is_ascii_alphanumeric()))
        .unwrap_or_else(|| DEFAULT_COMMIT.to_string())
}

/// Whether runs at `threads` crash ([`CRASH_THREADS_ENV`]).
fn crashes_at(threads: u32) -> bool {
    std::env::var(CRASH_THREADS_ENV).is_ok_and(|list| {
        list.split(',')
            .any(|t| t.trim().parse::<u32>() == Ok(threads))
    })
}

/// The parsed flags, with llama-bench's defaults.
struct Args {
    model: String,
    reps: u32,
    n_prompt: u32,
    n_gen: u32,
    threads: u32,
    cpu_mask: String,
    cpu_strict: bool,
    poll: u32,
    repack: bool,
    version: bool,
    help: bool,
}

/// Runs the stand-in on this process's arguments and environment, as a `main` does; the
/// exit code is the one llama-bench would give (or a crash, in the crashing modes).
pub fn main() -> ExitCode {
    let mode = std::env::var(MODE_ENV).unwrap_or_else(|_| "ok".into());
    if mode == "hang-child" {
        hang();
    }
    let args = match parse_args(&mode) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(1);
        }
    };
    if mode == "hang-version" && (args.version || args.help) {
        record_pid(std::process::id());
        hang();
    }
    if args.version {
        eprintln!("version: 0.0.1-fake (build 7, commit {})", commit());
        eprintln!("built with rustc for the tests");
        return ExitCode::SUCCESS;
    }
    if args.help {
        println!("usage: llama-bench [options]");
        println!();
        println!("  -t, --threads <n>                                 (default: 2)");
        return ExitCode::SUCCESS;
    }
    if !std::path::Path::new(&args.model).is_file() {
        println!("[");
        eprintln!("main: error: failed to load model '{}'", args.model);
        return ExitCode::from(1);
    }
    match mode.as_str() {
        "ok" | "amx" | "missing-field" | "nan" | "negative" | "zero" | "absurd" | "implausible"
        | "wrong-threads" | "two-tests" | "no-tests" | "short-samples" | "hang-version"
        | "huge-model" => {}
        "hang-no-repack" if args.repack => {}
        "hang-no-repack" => {
            print_flush("[\n");
            record_pid(std::process::id());
            hang();
        }
        "crash" => {
            print_flush("[\n");
            segfault();
        }
        "abort" => {
            print_flush("[\n");
            std::process::abort();
        }
        "terminated" => {
            // As a SIGTERM from outside ends it: the default action, no handler of ours.
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM);
            hang();
        }
        "shell-crash" => {
            eprintln!("Segmentation fault (core dumped)");
            return ExitCode::from(139);
        }
        "fail" => {
            println!("[");
            eprintln!(
                "main: error: failed to create context with model '{}'",
                args.model
            );
            return ExitCode::from(1);
        }
        "not-json" => {
            println!("| model | size | params | backend | threads | test | t/s |");
            println!("| --- | ---: | ---: | --- | ---: | ---: | ---: |");
            return ExitCode::SUCCESS;
        }
        "hang" => {
            print_flush("[\n");
            record_pid(std::process::id());
            hang();
        }
        "hang-with-child" => {
            print_flush("[\n");
            record_pid(std::process::id());
            start_hanging_child(false);
            hang();
        }
        "orphan" => start_hanging_child(false),
        "escaped-orphan" => start_hanging_child(true),
        "flood" => {
            let line = [b'x'; 1024];
            let mut out = std::io::stdout().lock();
            for _ in 0..4096 {
                if out.write_all(&line).is_err() {
                    return ExitCode::from(1);
                }
            }
            return ExitCode::SUCCESS;
        }
        "flood-stderr" => {
            let line = [b'y'; 1024];
            let mut err = std::io::stderr().lock();
            for _ in 0..4096 {
                if err.write_all(&line).is_err() {
                    return ExitCode::from(1);
                }
            }
            return ExitCode::SUCCESS;
        }
        other => {
            eprintln!("error: unknown {MODE_ENV} {other:?}");
            return ExitCode::from(2);
        }
    }
    if (mode == "amx" && args.n_prompt > 0 && args.repack) || crashes_at(args.threads) {
        print_flush("[\n");
        segfault();
    }
    record_run();
    let tests = match mode.as_str() {
        "two-tests" => 2,
        "no-tests" => 0,
        _ => 1,
    };
    let objects: Vec<String> = (0..tests).map(|_| test_json(&args, &mode)).collect();
    print_flush(&format!("[\n{}\n]\n", objects.join(",\n")));
    ExitCode::SUCCESS
}

fn parse_args(mode: &str) -> Result<Args, String> {
    let mut args = Args {
        model: "models/7B/ggml-model-q4_0.gguf".into(),
        reps: 5,
        n_prompt: 512,
        n_gen: 128,
        threads: 2,
        cpu_mask: "0x0".into(),
        cpu_strict: false,
        poll: 50,
        repack: true,
        version: false,
        help: false,
    };
    let mut iter = std::env::args().skip(1);
    while let Some(flag) = iter.next() {
        if flag == "--version" && mode != "no-version" {
            args.version = true;
            continue;
        }
        if flag == "-h" || flag == "--help" {
            args.help = true;
            continue;
        }
        if flag == "--no-warmup" {
            continue;
        }
        let known = [
            "-m",
            "--model",
            "-o",
            "--output",
            "-r",
            "--repetitions",
            "-p",
            "--n-prompt",
            "-n",
            "--n-gen",
            "-t",
            "--threads",
            "-C",
            "--cpu-mask",
            "--cpu-strict",
            "--poll",
            "--repack",
        ];
        if !known.contains(&flag.as_str()) {
            return Err(format!("invalid parameter for argument: {flag}"));
        }
        let value = iter
            .next()
            .ok_or_else(|| format!("invalid parameter for argument: {flag}"))?;
        let number = || {
            value
                .parse::<u32>()
                .map_err(|_| format!("invalid parameter for argument: {flag}"))
        };
        match flag.as_str() {
            "-m" | "--model" => args.model = value.clone(),
            "-o" | "--output" if value == "json" => {}
            "-o" | "--output" => {
                return Err(format!("this stand-in prints json only, not {value}"));
            }
            "-r" | "--repetitions" => args.reps = number()?,
            "-p" | "--n-prompt" => args.n_prompt = number()?,
            "-n" | "--n-gen" => args.n_gen = number()?,
            "-t" | "--threads" => args.threads = number()?,
            "-C" | "--cpu-mask" => args.cpu_mask = value.clone(),
            "--cpu-strict" => args.cpu_strict = number()? != 0,
            "--poll" => args.poll = number()?,
            _ => args.repack = number()? != 0,
        }
    }
    if !args.version && !args.help && args.n_prompt > 0 && args.n_gen > 0 {
        return Err("this stand-in runs one test: -p 0 or -n 0".into());
    }
    Ok(args)
}

/// The rate at `args` in tokens per second.
fn rate(args: &Args) -> f64 {
    let (base, peak) = if args.n_prompt > 0 {
        (1000.0, 4.0)
    } else {
        (100.0, 2.0)
    };
    let t = f64::from(args.threads.max(1));
    let mut rate = base * 2.0 * t * peak / (t * t + peak * peak);
    if args.poll == 0 {
        rate *= 0.9;
    }
    if args.repack && args.n_gen > 0 {
        rate *= 0.78;
    }
    rate
}

/// One test object, field by field as llama-bench's `json_printer` writes it.
fn test_json(args: &Args, mode: &str) -> String {
    let mean = match mode {
        "negative" => -5.0,
        "zero" => 0.0,
        "absurd" => 1e12,
        // Within the parser's bound, past what a cached profile may hold (GB/s).
        "implausible" => 9e8,
        _ => rate(args),
    };
    let n_samples = if mode == "short-samples" {
        args.reps.saturating_sub(1)
    } else {
        args.reps
    };
    // Pairs at +1 % and -1 %, and the mean itself last when the count is odd.
    let paired = n_samples - n_samples % 2;
    let samples: Vec<f64> = (0..n_samples)
        .map(|i| match (i < paired, i % 2) {
            (false, _) => mean,
            (true, 0) => mean * 1.01,
            (true, _) => mean * 0.99,
        })
        .map(|s| (s * 100.0).round() / 100.0)
        .collect();
    let avg = if samples.is_empty() {
        mean
    } else {
        samples.iter().sum::<f64>() / samples.len() as f64
    };
    let tokens = f64::from(args.n_prompt + args.n_gen);
    let samples_ns: Vec<f64> = samples
        .iter()
        .map(|s| (1e9 * tokens / s.abs().max(1e-3)).round())
        .collect();
    let avg_ns = samples_ns.iter().sum::<f64>() / samples_ns.len().max(1) as f64;
    let threads = if mode == "wrong-threads" {
        args.threads + 1
    } else {
        args.threads
    };
    let avg_ts = if mode == "nan" {
        "nan".to_string()
    } else {
        format!("{avg:.6}")
    };
    let mut fields = vec![
        ("build_commit", format!("{:?}", commit())),
        ("build_number", "7".into()),
        ("cpu_info", "\"Fake CPU @ 1.00GHz\"".into()),
        ("gpu_info", "\"\"".into()),
        ("backends", "\"CPU\"".into()),
        ("model_filename", format!("{:?}", args.model)),
        ("model_type", "\"llama ?B Q4_K - Medium\"".into()),
        // The model's tensors, as llama-bench counts them: less than the file holds.
        (
            "model_size",
            if mode == "huge-model" {
                u64::MAX
            } else {
                model_size(&args.model)
            }
            .to_string(),
        ),
        ("model_n_params", "2131712".into()),
        ("n_batch", "2048".into()),
        ("n_ubatch", "512".into()),
        ("n_threads", threads.to_string()),
        ("cpu_mask", format!("{:?}", args.cpu_mask)),
        ("cpu_strict", args.cpu_strict.to_string()),
        ("poll", args.poll.to_string()),
        ("repack", args.repack.to_string()),
        ("n_prompt", args.n_prompt.to_string()),
        ("n_gen", args.n_gen.to_string()),
        ("n_depth", "0".into()),
        ("test_time", "\"2026-01-01T00:00:00Z\"".into()),
        ("avg_ns", format!("{avg_ns:.0}")),
        ("stddev_ns", "1000".into()),
        ("avg_ts", avg_ts),
        ("stddev_ts", format!("{:.6}", 0.01 * mean.abs())),
    ];
    if mode == "missing-field" {
        fields.retain(|(name, _)| *name != "avg_ts");
    }
    let join = |values: Vec<String>| values.join(", ");
    let mut out = String::from("  {\n");
    for (name, value) in fields {
        out.push_str(&format!("    \"{name}\": {value},\n"));
    }
    out.push_str(&format!(
        "    \"samples_ns\": [ {} ],\n",
        join(samples_ns.iter().map(|ns| format!("{ns:.0}")).collect())
    ));
    out.push_str(&format!(
        "    \"samples_ts\": [ {} ]\n  }}",
        join(samples.iter().map(f64::to_string).collect())
    ));
    out
}

fn print_flush(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Appends `pid` to the file named by [`PIDS_ENV`], if any.
fn record_pid(pid: u32) {
    if let Some(path) = std::env::var_os(PIDS_ENV)
        && let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    {
        let _ = writeln!(file, "{pid}");
    }
}

/// Appends this run's arguments to the file named by [`RUNS_ENV`], if any.
fn record_run() {
    if let Some(path) = std::env::var_os(RUNS_ENV)
        && let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let _ = writeln!(file, "{}", args.join(" "));
    }
}

/// Starts this program again in `hang` mode, sharing stdout and the process group.
/// What the stand-in reports as the model's size: nine tenths of the file's.
fn model_size(model: &str) -> u64 {
    std::fs::metadata(model).map_or(0, |m| m.len() / 10 * 9)
}

fn start_hanging_child(own_group: bool) {
    use std::os::unix::process::CommandExt as _;
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut command = std::process::Command::new(exe);
    command.env(MODE_ENV, "hang-child");
    if own_group {
        // A process group of its own, out of reach of the run's group kill.
        command.process_group(0);
    }
    let child = command.spawn();
    if let Ok(child) = child {
        record_pid(child.id());
    }
}

fn hang() -> ! {
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

/// Dies of `SIGSEGV` with the default action (the standard library's handler for stack
/// overflows would otherwise catch a raised signal and return).
fn segfault() -> ! {
    use nix::sys::signal::{SigHandler, Signal, raise, signal};
    // SAFETY: installing the default disposition runs no code of ours in a signal context;
    // nothing here relies on the handler being replaced.
    let _ = unsafe { signal(Signal::SIGSEGV, SigHandler::SigDfl) };
    let _ = raise(Signal::SIGSEGV);
    std::process::abort()
}
