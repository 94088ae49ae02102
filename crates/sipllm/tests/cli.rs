//! The `sipllm` command as a user runs it: sources, JSON shape, bad flags, flags that would
//! be ignored, failed writes, a corrupt cache, two processes tuning at once.

#[path = "common/cli.rs"]
#[allow(
    dead_code,
    reason = "the shared helpers; `profiles.rs` and `emit.rs` use the rest"
)]
mod cli;
mod common;

use cli::{WORKLOAD, json_of, run, sipllm, stderr, with_watchdog};
use common::hermetic;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn bench_micro(home: &Path, args: &[&str]) -> Command {
    let mut cmd = hermetic(env!("CARGO_BIN_EXE_bench-micro"));
    cmd.args(args).env("SIPLLM_HOME", home);
    cmd
}

#[test]
fn sources_measured_then_cache_then_defaults_then_override() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let tune = ["--json", "--quiet", "--workload", WORKLOAD];

    let first = json_of(&run(h, &tune));
    assert_eq!(first["source"], "measured");
    let path = first["path"].as_str().unwrap().to_string();
    assert!(Path::new(&path).is_file());
    assert!(first["profile"]["threads"].as_u64().unwrap() >= 1);
    assert!(first["profile"]["schedule_policy"].is_string());
    // The f32 workload names the GEMV and GEMM bodies its format ran.
    let body = first["profile"]["gemv_bodies"]["f32"].as_str().unwrap();
    assert!(
        ["f32-rows", "avx2-f32", "avx512-f32"].contains(&body),
        "{body}"
    );
    let body = first["profile"]["gemm_bodies"]["f32"].as_str().unwrap();
    assert!(["gemv-rows", "f32-blocked"].contains(&body), "{body}");

    let second = json_of(&run(h, &tune));
    assert_eq!(second["source"], "cache");
    assert_eq!(second["path"], path.as_str());
    assert_eq!(second["profile"], first["profile"]);

    // A thread cap that changes what may be tried asks another question: its own profile,
    // never the uncapped one (on one CPU a cap of 1 asks the same question).
    let capped = json_of(&run(h, &[&tune[..], &["--thread-cap", "1"]].concat()));
    assert_eq!(capped["profile"]["threads"], 1);
    if first["profile"]["request"]["thread_limit"] != 1 {
        assert_eq!(capped["source"], "measured");
        assert_ne!(capped["path"], path.as_str());
    }
    assert_eq!(json_of(&run(h, &tune))["source"], "cache");

    let defaults = json_of(&run(h, &["--json", "--no-autotune"]));
    assert_eq!(defaults["source"], "defaults");
    assert_eq!(defaults["path"], Value::Null);
    assert_eq!(defaults["profile"]["schedule_policy"], "static");

    let over = json_of(&run(h, &["--json", "--threads", "1"]));
    assert_eq!(over["source"], "override");
    assert_eq!(over["profile"]["threads"], 1);

    let env_over = json_of(
        &sipllm(h, &["--json"])
            .env("SIPLLM_POLICY", "interleaved")
            .output()
            .unwrap(),
    );
    assert_eq!(env_over["source"], "override");
    assert_eq!(env_over["profile"]["schedule_policy"], "interleaved");

    let recal = json_of(&run(
        h,
        &["--json", "--quiet", "--recalibrate", "--workload", WORKLOAD],
    ));
    assert_eq!(recal["source"], "measured");
}

#[test]
fn a_corrupt_cache_gives_one_warning_line_and_is_replaced() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let first = json_of(&run(h, &["--json", "--quiet", "--workload", WORKLOAD]));
    let path = first["path"].as_str().unwrap().to_string();
    std::fs::write(&path, "{\"schema_version\": 1, \"thr").unwrap();

    let out = run(h, &["--json", "--quiet", "--workload", WORKLOAD]);
    let again = json_of(&out);
    assert_eq!(again["source"], "measured");
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("warning") && err.contains("ignoring cached profile"),
        "{err}"
    );
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(saved, again["profile"]);
}

#[test]
fn bad_values_are_clear_errors_naming_the_setting() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    for (args, needle) in [
        (&["--threads", "0"][..], "1 to 1024"),
        (&["--threads", "lots"][..], "--threads"),
        (&["--threads", "-1"][..], "1 to 1024"),
        (&["--policy", "fastest"][..], "workstealing"),
        (&["--budget", "-3"][..], "--budget"),
        (&["--thread-cap", "-3"][..], "for '--thread-cap <N|none>'"),
        // A missing value is said so, not taken from the next flag.
        (
            &["--threads", "--json"][..],
            "a value is required here, not the flag --json",
        ),
        (
            &["--budget", "--json"][..],
            "a value is required here, not the flag --json",
        ),
        (
            &["--thread-cap", "-q"][..],
            "a value is required here, not the flag -q",
        ),
        (
            &["--budget", "-.5"][..],
            "a number of seconds from 0.001 to 86400",
        ),
        (&["--thread-cap", "-3"][..], "1 to 1024"),
        (&["--thread-cap", "0"][..], "1 to 1024"),
        (&["--workload", "4096"][..], "ROWSxCOLS"),
        (&["--no-such-flag"][..], "unexpected argument"),
    ] {
        let out = run(h, args);
        assert_eq!(out.status.code(), Some(2), "{args:?} is refused as given");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
        // clap names the flag and the value once; the reason follows.
        assert!(
            stderr(&out).matches("invalid").count() <= 1,
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty());
    }
    let out = sipllm(h, &["--json"])
        .env("SIPLLM_THREADS", "-2")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "an invalid variable is refused as given"
    );
    let err = stderr(&out);
    assert!(
        err.contains("SIPLLM_THREADS") && err.contains("1 to 1024"),
        "{err}"
    );
    assert!(!err.contains("panicked"));

    let out = sipllm(h, &["--json"])
        .env("SIPLLM_KERNEL", "sse9")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown kernel"), "{}", stderr(&out));
}

#[test]
fn an_unwritable_home_warns_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let out = run(&file, &["--json", "--quiet", "--workload", WORKLOAD]);
    let v = json_of(&out);
    assert_eq!(v["source"], "measured");
    assert_eq!(v["path"], Value::Null);
    // One warning names the file, where the cache's reads, lock and save each gave one.
    let err = stderr(&out);
    assert_eq!(err.matches("is not a directory").count(), 1, "{err}");
    assert!(!err.contains("ignoring cached profile"), "{err}");
    // A system store that is a file is said once too, not at each slot it would have read.
    let out = sipllm(dir.path(), &["--json", "--quiet", "--cached-only"])
        .env("SIPLLM_SYSTEM_PROFILES", &file)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("is not a directory").count(), 1, "{err}");
    assert!(err.contains("no profile is read from it"), "{err}");
    assert!(!err.contains("ignoring cached profile"), "{err}");
}

#[test]
fn two_processes_tuning_at_once_measure_once() {
    with_watchdog("two processes tuning at once", || {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let args = ["--json", "--quiet", "--workload", WORKLOAD];
        let a = sipllm(h, &args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let b = sipllm(h, &args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        let (a, b) = (json_of(&a), json_of(&b));
        let mut sources = [a["source"].as_str().unwrap(), b["source"].as_str().unwrap()];
        sources.sort();
        assert_eq!(sources, ["cache", "measured"]);
        assert_eq!(a["profile"], b["profile"]);
        let path = a["path"].as_str().unwrap();
        let saved: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(saved, a["profile"]);
        // Nothing but the profile and its lock file is left behind.
        let mut names: Vec<String> = std::fs::read_dir(h.join("runtime"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(
            names.iter().any(|n| n.ends_with(".json"))
                && names.iter().any(|n| n.ends_with(".lock")),
            "{names:?}"
        );
    });
}

#[test]
fn profile_info_json_is_one_object_with_id_and_hardware() {
    let home = tempfile::tempdir().unwrap();
    let v = json_of(&run(home.path(), &["--profile-info", "--json"]));
    let id = v["hardware_id"].as_str().unwrap();
    assert!(!id.is_empty());
    assert!(v["hardware"]["logical_cores"].as_u64().unwrap() >= 1);
    let out = run(home.path(), &["--profile-info"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&format!("hardware_id: {id}")));
    // --profile-info never tunes nor writes.
    assert_eq!(std::fs::read_dir(home.path()).unwrap().count(), 0);
}

#[test]
fn help_explains_every_flag() {
    let home = tempfile::tempdir().unwrap();
    let out = run(home.path(), &["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--profile-info",
        "--json",
        "--no-autotune",
        "--recalibrate",
        "--threads",
        "--policy",
        "--budget",
        "--thread-cap",
        "--workload",
        "--model",
        "--weights",
        "--model-config",
        "--gguf",
        "--batch",
        "--rigor",
        "--quiet",
        "--version",
        "SIPLLM_HOME",
        "SIPLLM_THREADS",
        "SIPLLM_POLICY",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
    // How the flags interact is said where a user looks.
    for line in [
        "always win over the cache",
        "still win",
        "refused with",
        "its own cached profile",
    ] {
        assert!(help.contains(line), "--help lacks {line:?}:\n{help}");
    }
    let out = bench_micro(home.path(), &["--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--exhaustive",
        "--json",
        "--recalibrate",
        "--budget",
        "--thread-cap",
        "--workload",
        "--quiet",
    ] {
        assert!(help.contains(flag), "bench-micro --help lacks {flag}");
    }
}

#[test]
fn a_reader_that_goes_away_is_not_a_crash() {
    let home = tempfile::tempdir().unwrap();
    for args in [
        &["--profile-info", "--json"][..],
        &["--no-autotune"][..],
        &["--help"][..],
    ] {
        let mut child = sipllm(home.path(), args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    }
}

/// Each pair would otherwise run with one of its flags silently ignored.
#[test]
fn flags_that_would_be_ignored_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    for (args, flag) in [
        (&["--recalibrate", "--threads", "1"][..], "--threads"),
        (&["--recalibrate", "--policy", "static"][..], "--policy"),
        (&["--budget", "1", "--threads", "1"][..], "--threads"),
        (&["--thread-cap", "2", "--policy", "guided"][..], "--policy"),
        (&["--profile-info", "--recalibrate"][..], "--recalibrate"),
        (&["--profile-info", "--no-autotune"][..], "--no-autotune"),
        (&["--profile-info", "--threads", "2"][..], "--threads"),
        (&["--profile-info", "--policy", "static"][..], "--policy"),
        (&["--profile-info", "--budget", "1"][..], "--budget"),
        (&["--profile-info", "--thread-cap", "2"][..], "--thread-cap"),
        (&["--profile-info", "--workload", "4x4"][..], "--workload"),
        (&["--profile-info", "--cached-only"][..], "--cached-only"),
        (
            &["--profile-info", "--runtime", "llama.cpp"][..],
            "--runtime",
        ),
        (
            &["--profile-info", "--llama-bench", "lb"][..],
            "--llama-bench",
        ),
        (&["--no-autotune", "--workload", "4x4"][..], "--workload"),
        (&["--no-autotune", "--thread-cap", "2"][..], "--thread-cap"),
        (&["--no-autotune", "--recalibrate"][..], "--recalibrate"),
        (&["--no-autotune", "--budget", "1"][..], "--budget"),
    ] {
        let out = run(h, args);
        let err = stderr(&out);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?} should be refused: {err}"
        );
        assert!(
            err.contains("cannot be used with") && err.contains(flag),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // A budget where nothing is measured, and one too short to be saved as a number of
    // seconds above 0, are refused before anything runs.
    let out = run(
        h,
        &["--rigor", "estimate", "--budget", "5", "--workload", "4x4"],
    );
    // A refused command line exits 2, as clap's own refusals do.
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no --budget with --rigor estimate"),
        "{}",
        stderr(&out)
    );
    // So is a recalibration where nothing is measured or replaced.
    let out = run(
        h,
        &["--rigor", "estimate", "--recalibrate", "--workload", "4x4"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no --recalibrate with --rigor estimate"),
        "{}",
        stderr(&out)
    );
    for tiny in ["1e-12", "1e-300", "0.0001"] {
        let out = run(h, &["--workload", "4x4", "--budget", tiny]);
        assert_eq!(out.status.code(), Some(2), "{tiny}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("from 0.001 to 86400"),
            "{}",
            stderr(&out)
        );
    }
    // The oracle always measures and saves nothing: --recalibrate would be ignored.
    let out = bench_micro(h, &["--exhaustive", "--recalibrate"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot be used with"),
        "{}",
        stderr(&out)
    );
    // Nothing was tuned nor written.
    assert_eq!(std::fs::read_dir(h).unwrap().count(), 0);

    // The same through the environment: SIPLLM_THREADS or SIPLLM_POLICY means nothing is
    // measured, so a measuring flag is an error that names the variable.
    for (var, value, flag) in [
        ("SIPLLM_THREADS", "1", "--recalibrate"),
        ("SIPLLM_POLICY", "guided", "--budget"),
        ("SIPLLM_THREADS", "2", "--thread-cap"),
    ] {
        let value_arg = match flag {
            "--budget" => Some("1"),
            "--thread-cap" => Some("2"),
            _ => None,
        };
        let mut args = vec!["--json", flag];
        args.extend(value_arg);
        let out = sipllm(h, &args).env(var, value).output().unwrap();
        let err = stderr(&out);
        assert!(!out.status.success(), "{var} {args:?}: {err}");
        assert!(err.contains(var) && err.contains(flag), "{err}");
        assert!(out.stdout.is_empty());
    }
    assert_eq!(std::fs::read_dir(h).unwrap().count(), 0);

    // With both knobs explicit no profile is read, so the shape has no effect: a warning;
    // so has --cached-only (nothing would be measured or read anyway).
    for extra in [&["--workload", "4x4"][..], &["--cached-only"]] {
        let mut args = vec!["--json", "--threads", "1", "--policy", "static"];
        args.extend_from_slice(extra);
        let out = run(h, &args);
        assert_eq!(json_of(&out)["source"], "override");
        let warning = format!("warning: {} has no effect", extra[0]);
        assert!(stderr(&out).contains(&warning), "{}", stderr(&out));
    }
}

/// stdout on /dev/full: every write fails with "no space left".
fn to_dev_full(mut cmd: Command) -> Output {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full exists");
    cmd.stdout(full).stderr(Stdio::piped()).output().unwrap()
}

/// stdout closed, as `sipllm >&-` in a shell.
fn with_stdout_closed(program: &str, home: &Path, args: &[&str]) -> Output {
    hermetic("sh")
        .arg("-c")
        .arg("exec \"$0\" \"$@\" >&-")
        .arg(program)
        .args(args)
        .env("SIPLLM_HOME", home)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn a_failed_write_is_an_error() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let sipllm_exe = env!("CARGO_BIN_EXE_sipllm");
    let bench_exe = env!("CARGO_BIN_EXE_bench-micro");
    for args in [
        &["--profile-info"][..],
        &["--profile-info", "--json"][..],
        &["--no-autotune"][..],
        &["--help"][..],
        &["--version"][..],
    ] {
        for (how, out) in [
            ("/dev/full", to_dev_full(sipllm(h, args))),
            ("closed", with_stdout_closed(sipllm_exe, h, args)),
        ] {
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(1), "{args:?} {how}: {err}");
            assert!(
                err.contains("sipllm: error: cannot write"),
                "{args:?} {how}: {err}"
            );
            assert!(!err.contains("panicked"), "{err}");
        }
    }
    for args in [&["--help"][..], &["--version"][..]] {
        for (how, out) in [
            ("/dev/full", to_dev_full(bench_micro(h, args))),
            ("closed", with_stdout_closed(bench_exe, h, args)),
        ] {
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(1), "{args:?} {how}: {err}");
            assert!(err.contains("bench-micro: error: cannot write"), "{err}");
        }
    }
    // A usage error still goes to stderr with clap's exit code, whatever stdout is.
    let out = to_dev_full(sipllm(h, &["--no-such-flag"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unexpected argument"));
}

#[test]
fn bench_micro_measures_whatever_sipllm_cached_only_says() {
    let home = tempfile::tempdir().unwrap();
    // Nor do SIPLLM_THREADS and SIPLLM_POLICY, invalid values neither.
    let out = bench_micro(home.path(), &["--json", "--quiet", "--workload", WORKLOAD])
        .env("SIPLLM_CACHED_ONLY", "1")
        .env("SIPLLM_THREADS", "x")
        .env("SIPLLM_POLICY", "bogus")
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["source"], "measured");
    assert!(
        !v["profile"]["decode"]["measurements"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(
        !v["profile"]["prefill"]["measurements"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn the_model_flags_conflict_and_refuse_bad_values() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    for (args, flag) in [
        (
            &["--model", "llama3-8b", "--workload", "4x4"][..],
            "--workload",
        ),
        (
            &["--weights", "q8_0", "--workload", "4x4"][..],
            "--workload",
        ),
        (
            &["--gguf", "m.gguf", "--model-config", "c.json"][..],
            "--model-config",
        ),
        (&["--gguf", "m.gguf", "--model", "llama3-8b"][..], "--model"),
        (&["--gguf", "m.gguf", "--weights", "q8_0"][..], "--weights"),
        (&["--no-autotune", "--rigor", "patient"][..], "--rigor"),
        (&["--no-autotune", "--batch", "8"][..], "--batch"),
        (&["--profile-info", "--model", "llama3-8b"][..], "--model"),
    ] {
        let out = run(h, args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("cannot be used with") && err.contains(flag),
            "{args:?}: {err}"
        );
    }
    for (args, says) in [
        (
            &["--rigor", "thorough"][..],
            "estimate, measure, patient, exhaustive",
        ),
        (&["--batch", "0"][..], "from 1 to 4096"),
        (&["--model", "gpt-5"][..], "llama3-8b"),
        (&["--weights", "q5_x"][..], "q4_K_M"),
        (
            &["--gguf", "/nonexistent/model.gguf"][..],
            "/nonexistent/model.gguf",
        ),
        (
            &["--model-config", "/nonexistent/config.json"][..],
            "/nonexistent/config.json",
        ),
    ] {
        let out = run(h, args);
        let err = stderr(&out);
        assert!(!out.status.success(), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert_eq!(std::fs::read_dir(h).unwrap().count(), 0, "nothing written");
}

#[test]
fn batch_and_rigor_reach_the_profile_and_its_file() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    // An estimate measures and writes nothing.
    let v = json_of(&run(h, &["--json", "--quiet", "--rigor", "estimate"]));
    assert_eq!(v["source"], "estimated");
    assert_eq!(v["profile"]["rigor"], "estimate");
    assert_eq!(std::fs::read_dir(h).unwrap().count(), 0);

    let args = ["--json", "--quiet", "--workload", WORKLOAD, "--batch", "8"];
    let v = json_of(&run(h, &args));
    assert_eq!(v["source"], "measured");
    assert_eq!(v["profile"]["request"]["batch"], 8);
    assert!(v["path"].as_str().unwrap().contains("_b8"), "{v}");
    for phase in ["decode", "prefill"] {
        assert!(v["profile"][phase]["tokens_per_sec"].as_f64().unwrap() > 0.0);
    }
    // The human summary gives both settings.
    let out = run(h, &["--quiet", "--workload", WORKLOAD, "--batch", "8"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("source:      cache"), "{text}");
    for line in ["decode:      ", "prefill:     ", "workload:    48x80 f32"] {
        assert!(text.contains(line), "{line:?} in {text}");
    }
    // A busy machine is said on stderr and marked in the profile.
    let busy = sipllm(
        h,
        &["--json", "--quiet", "--workload", WORKLOAD, "--batch", "2"],
    )
    .env("SIPLLM_LOAD_AVERAGE", "64")
    .output()
    .unwrap();
    let v = json_of(&busy);
    assert_eq!(v["profile"]["environment"]["noisy"], true);
    assert!(
        stderr(&busy).contains("warning: the machine was busy"),
        "{}",
        stderr(&busy)
    );
}

/// A test root that holds no machine is refused before anything is tuned or saved.
#[test]
fn a_sysroot_without_a_machine_is_an_error() {
    let home = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    for root in [empty.path().to_path_buf(), empty.path().join("missing")] {
        for args in [
            &["--profile-info"][..],
            &["--quiet", "--workload", WORKLOAD],
        ] {
            let out = sipllm(home.path(), args)
                .env("SIPLLM_SYSROOT", &root)
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
            assert!(stderr(&out).contains("SIPLLM_SYSROOT="), "{}", stderr(&out));
            assert!(out.stdout.is_empty(), "{args:?}");
        }
    }
    assert_eq!(std::fs::read_dir(home.path()).unwrap().count(), 0);
}
