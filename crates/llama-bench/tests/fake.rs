//! The runner against the stand-in `llama-bench` (`src/bin/fake-llama-bench.rs`): its known
//! optimum found through the runner, and each malformed output, crash, hang and flood turned
//! into its error, naming the command.

use llama_bench::{BuildInfo, CpuMask, Error, LlamaBench, Run};
use std::path::{Path, PathBuf};
use std::time::Duration;

const FAKE: &str = env!("CARGO_BIN_EXE_fake-llama-bench");

/// A stand-in model file (the stand-in only checks that it exists) in its own directory.
struct Model {
    dir: tempfile::TempDir,
    path: PathBuf,
}

fn model() -> Model {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    std::fs::write(&path, b"GGUF\x03\0\0\0").unwrap();
    Model { dir, path }
}

fn bench(mode: &str) -> LlamaBench {
    LlamaBench::new(FAKE)
        .env("FAKE_LLAMA_BENCH_MODE", mode)
        .timeout(Duration::from_secs(60))
}

fn decode(threads: u32) -> Run {
    Run {
        repetitions: 3,
        ..Run::decode(threads, 16)
    }
}

/// The error of `mode` on a decode run, after checking that its message names the command.
fn error_of(mode: &str, run: &Run) -> Error {
    let model = model();
    let bench = bench(mode);
    let err = bench.bench(&model.path, run).unwrap_err();
    let command = bench.command_line(&model.path, run).unwrap();
    assert!(
        err.to_string().contains(&format!("`{command}`")),
        "{mode}: {err} does not name {command}"
    );
    err
}

/// Whether the process `pid` dies (read from Linux's `/proc`): gone, or a zombie waiting for its new parent to reap it.
/// A `SIGKILL` is sent at once but takes effect when the process is next scheduled, so this
/// waits for it, up to a minute.
#[cfg(target_os = "linux")]
fn dies(pid: u32) -> bool {
    let dead = || match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        if dead() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

#[cfg(target_os = "linux")]
fn recorded_pids(path: &Path) -> Vec<u32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| line.parse().unwrap())
        .collect()
}

#[test]
fn decode_peaks_at_two_threads_through_the_runner() {
    let model = model();
    let bench = bench("ok");
    let rates: Vec<(u32, f64)> = (1..=6)
        .map(|t| (t, bench.bench(&model.path, &decode(t)).unwrap().avg_ts))
        .collect();
    let best = rates.iter().max_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
    assert_eq!(best.0, 2, "{rates:?}");
    // 100 tokens/s at the peak, less 22 % for the default repacking.
    assert!((best.1 - 78.0).abs() < 0.1, "{rates:?}");
}

#[test]
fn prefill_peaks_at_four_threads_and_repacking_is_a_knob() {
    let model = model();
    let bench = bench("ok");
    let rate = |t| {
        let run = Run {
            repetitions: 2,
            ..Run::prefill(t, 64)
        };
        bench.bench(&model.path, &run).unwrap().avg_ts
    };
    let rates: Vec<f64> = (1..=8).map(rate).collect();
    let best = (1..=8).max_by(|&a, &b| rates[a - 1].total_cmp(&rates[b - 1]));
    assert_eq!(best, Some(4), "{rates:?}");
    let no_repack = Run {
        repack: Some(false),
        ..decode(2)
    };
    let result = bench.bench(&model.path, &no_repack).unwrap();
    assert_eq!(result.repack, Some(false));
    assert!((result.avg_ts - 100.0).abs() < 0.1, "{result:?}");
}

#[test]
fn the_result_is_the_run_asked_for() {
    let model = model();
    let run = Run {
        cpu_mask: Some(CpuMask::from_cpus([0, 1]).unwrap()),
        cpu_strict: Some(true),
        poll: Some(0),
        repack: Some(true),
        repetitions: 4,
        warmup: false,
        ..Run::decode(2, 8)
    };
    let result = bench("ok").bench(&model.path, &run).unwrap();
    assert_eq!((result.n_threads, result.n_prompt, result.n_gen), (2, 0, 8));
    assert_eq!(result.cpu_mask, run.cpu_mask);
    assert!(result.cpu_strict);
    assert_eq!(result.poll, 0);
    assert_eq!(result.samples_ts.len(), 4);
    assert_eq!(result.build_commit, "fa4e000");
    assert_eq!(BuildInfo::from(&result).commit, "fa4e000");
}

#[test]
fn the_build_comes_from_version() {
    let info = bench("ok").build_info().unwrap();
    assert_eq!(info.commit, "fa4e000");
    assert_eq!(info.build_number, Some(7));
    assert_eq!(info.version.as_deref(), Some("0.0.1-fake"));
    // Older builds do not know --version: a failure naming the command.
    match bench("no-version").build_info() {
        Err(err @ Error::Failed { code: 1, .. }) => {
            let text = err.to_string();
            assert!(text.contains(&format!("`{FAKE} --version`")), "{text}");
            assert!(
                text.contains("invalid parameter for argument: --version"),
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_segfault_is_a_crash_with_its_signal() {
    for mode in ["crash", "shell-crash"] {
        match error_of(mode, &decode(2)) {
            Error::Crashed { signal: 11, .. } => {}
            other => panic!("{mode}: {other:?}"),
        }
    }
    let err = error_of("crash", &decode(2));
    assert!(
        err.to_string().contains("crashed with signal 11 (SIGSEGV)"),
        "{err}"
    );
    match error_of("abort", &decode(2)) {
        Error::Crashed { signal: 6, .. } => {}
        other => panic!("{other:?}"),
    }
    // A SIGTERM from outside says nothing of the configuration: a failed run, not a crash.
    match error_of("terminated", &decode(2)) {
        Error::Failed { code: 143, .. } => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn amx_repacking_crashes_prefill_only_and_no_repack_runs() {
    let model = model();
    let bench = bench("amx");
    let prefill = Run {
        repetitions: 2,
        ..Run::prefill(2, 64)
    };
    for run in [
        prefill.clone(),
        Run {
            repack: Some(true),
            ..prefill.clone()
        },
    ] {
        match bench.bench(&model.path, &run) {
            Err(Error::Crashed { signal: 11, .. }) => {}
            other => panic!("{run:?}: {other:?}"),
        }
    }
    let no_repack = Run {
        repack: Some(false),
        ..prefill
    };
    assert!(bench.bench(&model.path, &no_repack).unwrap().avg_ts > 0.0);
    assert!(bench.bench(&model.path, &decode(2)).unwrap().avg_ts > 0.0);
}

#[test]
fn a_failed_run_quotes_the_end_of_stderr() {
    match error_of("fail", &decode(1)) {
        err @ Error::Failed { code: 1, .. } => {
            assert!(
                err.to_string()
                    .contains("failed to create context with model"),
                "{err}"
            );
        }
        other => panic!("{other:?}"),
    }
    let missing = Path::new("/nonexistent/model.gguf");
    let err = bench("ok").bench(missing, &decode(1)).unwrap_err();
    assert!(matches!(err, Error::Failed { code: 1, .. }), "{err}");
    assert!(err.to_string().contains("failed to load model"), "{err}");
}

#[test]
fn malformed_output_is_an_error_naming_the_command() {
    for mode in ["not-json", "nan"] {
        let err = error_of(mode, &decode(2));
        assert!(matches!(err, Error::NotJson { .. }), "{mode}: {err}");
    }
    for (mode, field) in [
        ("missing-field", "avg_ts"),
        ("negative", "avg_ts"),
        ("zero", "avg_ts"),
        ("absurd", "avg_ts"),
    ] {
        match error_of(mode, &decode(2)) {
            Error::BadField { field: f, .. } => assert_eq!(f, field, "{mode}"),
            other => panic!("{mode}: {other:?}"),
        }
    }
    for (mode, expected) in [
        (
            "wrong-threads",
            "the test ran with threads 3, the run asked for 2",
        ),
        ("two-tests", "2 tests in the output"),
        ("no-tests", "0 tests in the output"),
        (
            "short-samples",
            "2 samples in the test, the run asked for 3",
        ),
        ("huge-model", "more than the 8 of its file"),
    ] {
        let err = error_of(mode, &decode(2));
        assert!(matches!(err, Error::Mismatch { .. }), "{mode}: {err}");
        assert!(err.to_string().contains(expected), "{mode}: {err}");
    }
}

#[test]
fn megabytes_of_output_are_an_error() {
    for (mode, stream) in [("flood", "stdout"), ("flood-stderr", "stderr")] {
        match error_of(mode, &decode(2)) {
            Error::OutputTooLarge {
                stream: s,
                limit: llama_bench::DEFAULT_OUTPUT_LIMIT,
                ..
            } => assert_eq!(s, stream),
            other => panic!("{mode}: {other:?}"),
        }
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_hang_is_killed_at_the_timeout_with_its_children() {
    let model = model();
    let pids = model.dir.path().join("pids");
    for mode in ["hang", "hang-with-child"] {
        let _ = std::fs::remove_file(&pids);
        let bench = bench(mode)
            .env("FAKE_LLAMA_BENCH_PIDS", &pids)
            .timeout(Duration::from_secs(1));
        match bench.bench(&model.path, &decode(2)) {
            Err(err @ Error::Timeout { .. }) => {
                assert!(
                    err.to_string().contains("ran past its timeout of 1 s"),
                    "{err}"
                )
            }
            other => panic!("{mode}: {other:?}"),
        }
        let started = recorded_pids(&pids);
        assert_eq!(started.len(), if mode == "hang" { 1 } else { 2 }, "{mode}");
        for pid in started {
            assert!(dies(pid), "{mode}: process {pid} outlived the timeout");
        }
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_run_within_a_limit_is_killed_at_the_limit() {
    let model = model();
    let pids = model.dir.path().join("pids");
    // The bench's own timeout is a minute; the run's limit, a second, is the one that counts.
    let hang = bench("hang").env("FAKE_LLAMA_BENCH_PIDS", &pids);
    match hang.bench_within(&model.path, &decode(2), Duration::from_secs(1)) {
        Err(Error::Timeout { timeout, .. }) => assert_eq!(timeout, Duration::from_secs(1)),
        other => panic!("{other:?}"),
    }
    let started = recorded_pids(&pids);
    assert_eq!(started.len(), 1);
    assert!(
        dies(started[0]),
        "process {} outlived the limit",
        started[0]
    );
    // A limit past the bench's timeout is the timeout.
    let ok = bench("ok").timeout(Duration::from_secs(30));
    let result = ok
        .bench_within(&model.path, &decode(2), Duration::MAX)
        .unwrap();
    assert_eq!(result.n_threads, 2);
}

#[cfg(target_os = "linux")]
#[test]
fn a_version_or_help_that_hangs_is_killed_at_the_probe_timeout() {
    let model = model();
    let pids = model.dir.path().join("pids");
    let bench = bench("hang-version")
        .env("FAKE_LLAMA_BENCH_PIDS", &pids)
        .timeout(Duration::from_secs(1));
    for (what, err) in [
        ("--version", bench.build_info().unwrap_err()),
        ("--help", bench.default_threads().unwrap_err()),
    ] {
        match &err {
            Error::Timeout { command, timeout } => {
                assert_eq!(command, &format!("{FAKE} {what}"));
                assert_eq!(*timeout, Duration::from_secs(1));
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    let started = recorded_pids(&pids);
    assert_eq!(started.len(), 2);
    for pid in started {
        assert!(dies(pid), "process {pid} outlived the probe timeout");
    }
    // The mode measures as `ok` does: only the probes hang.
    let result = bench.bench(&model.path, &decode(2)).unwrap();
    assert_eq!(result.n_threads, 2);
}

#[cfg(target_os = "linux")]
#[test]
fn what_a_run_leaves_running_is_killed_when_it_exits() {
    let model = model();
    let pids = model.dir.path().join("pids");
    let bench = bench("orphan").env("FAKE_LLAMA_BENCH_PIDS", &pids);
    // The orphan holds stdout open: without the group kill this would wait for it.
    let result = bench.bench(&model.path, &decode(2)).unwrap();
    assert_eq!(result.n_threads, 2);
    let orphans = recorded_pids(&pids);
    assert_eq!(orphans.len(), 1);
    assert!(
        dies(orphans[0]),
        "the orphan {} outlived the run",
        orphans[0]
    );
}

#[test]
fn an_orphan_outside_the_group_holding_the_output_is_an_error_after_a_grace_not_a_timeout() {
    let model = model();
    let pids = model.dir.path().join("pids");
    let bench = bench("escaped-orphan").env("FAKE_LLAMA_BENCH_PIDS", &pids);
    let err = bench.bench(&model.path, &decode(2)).unwrap_err();
    for pid in recorded_pids(&pids) {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert!(
        err.to_string().contains("outside its process group"),
        "{err}"
    );
}

#[test]
fn a_missing_binary_and_an_invalid_run_start_nothing() {
    let model = model();
    let err = LlamaBench::new("/nonexistent/llama-bench")
        .bench(&model.path, &decode(1))
        .unwrap_err();
    assert!(matches!(err, Error::Spawn { .. }), "{err}");
    assert!(
        err.to_string().contains("/nonexistent/llama-bench -m"),
        "{err}"
    );
    let err = bench("crash")
        .bench(&model.path, &Run::decode(0, 16))
        .unwrap_err();
    assert!(matches!(err, Error::InvalidRun { .. }), "{err}");
}

#[test]
fn the_default_thread_count_build_and_chosen_crashes_are_the_stand_ins() {
    let model = model();
    assert_eq!(bench("ok").default_threads().unwrap(), 2);
    let build = bench("ok")
        .env("FAKE_LLAMA_BENCH_COMMIT", "b0b0b0b")
        .build_info()
        .unwrap();
    assert_eq!(build.commit, "b0b0b0b");
    let crashing = bench("ok").env("FAKE_LLAMA_BENCH_CRASH_THREADS", "2,4");
    let err = crashing.bench(&model.path, &decode(2)).unwrap_err();
    assert!(matches!(err, Error::Crashed { signal: 11, .. }), "{err}");
    assert_eq!(
        crashing
            .bench(&model.path, &decode(3))
            .unwrap()
            .build_commit,
        "fa4e000"
    );
}
