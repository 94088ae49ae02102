//! `sipllm bench --runtime llama.cpp` against the stand-in llama-bench
//! (`llama_bench::stand_in`): the tuned setting against the rules other runtimes use, the
//! repetitions asked for, the rules that crash.
//!
//! This test binary is its own stand-in, as `llamacpp.rs` is: run with
//! `FAKE_LLAMA_BENCH_MODE` set, `main` is the stand-in's. The tests run on `libtest-mimic`.

mod common;
#[path = "common/scene.rs"]
mod scene;
#[path = "common/trial.rs"]
mod trial;

use libtest_mimic::Failed;
use llama_bench::stand_in;
use scene::{Scene, Test, cpus};
use std::process::ExitCode;
use trial::{check, check_tuned_figures, json_of, reported_crashed, run};

fn main() -> ExitCode {
    let tests: &[Test] = &[
        (
            "bench_compares_llama_cpp_against_the_rules",
            bench_compares_llama_cpp_against_the_rules,
        ),
        (
            "bench_reports_the_rules_that_crash_llama_cpp",
            bench_reports_the_rules_that_crash_llama_cpp,
        ),
        (
            "bench_repeats_as_asked_and_refuses_an_estimate",
            bench_repeats_as_asked_and_refuses_an_estimate,
        ),
    ];
    scene::stand_in_or_run(tests)
}

fn bench_compares_llama_cpp_against_the_rules() -> Result<(), Failed> {
    let scene = Scene::new();
    let model = scene.model.to_string_lossy().into_owned();
    let svg = scene.dir.path().join("chart.svg");
    let svg_arg = svg.to_string_lossy().into_owned();
    let mut cmd = scene.sipllm(
        "ok",
        &["bench", "--json", "--repetitions", "5", "--svg", &svg_arg],
    );
    cmd.args(["--runtime", "llama.cpp", "--llama-bench"])
        .arg(std::env::current_exe().unwrap())
        .args(["--gguf", &model]);
    let doc = json_of(&run(&mut cmd)?)?;
    check(doc["runtime"] == "llama.cpp", || format!("{doc}"))?;
    let mut same_as_tuned = 0;
    for phase in ["decode", "prefill"] {
        let p = &doc["phases"][phase];
        check_tuned_figures(phase, p)?;
        for rule in [
            "llama.cpp-default",
            "llama-cpp-python",
            "ollama",
            "all-logical",
        ] {
            let ratio = p["baselines"][rule]["ratio"].as_f64();
            check(ratio.is_some_and(|r| r > 0.0), || {
                format!("{phase} {rule}: {p}")
            })?;
        }
        // The stand-in's llama.cpp default is its help's 2 threads.
        check(p["baselines"]["llama.cpp-default"]["threads"] == 2, || {
            format!("{p}")
        })?;
        let picks = &doc["picks"][phase];
        // A rule at the tuned threads with llama.cpp's default knobs is the tuned
        // configuration: measured once, its ratio exactly 1 (the stand-in's repetitions
        // spread ±1 %, so two runs would differ).
        if picks["llama_cpp"]["repack"] == true {
            for (rule, b) in p["baselines"].as_object().into_iter().flatten() {
                if b["threads"] == p["tuned"]["threads"] {
                    same_as_tuned += 1;
                    check(b["ratio"].as_f64() == Some(1.0), || {
                        format!("{phase} {rule} is the tuned configuration: {p}")
                    })?;
                }
            }
        }
        check(
            picks["llama_cpp"]["threads"] == p["tuned"]["threads"]
                && picks["our_kernels"]["threads"].as_u64().is_some(),
            || format!("{picks}"),
        )?;
    }
    // Prefill peaks at 4 threads with repacking on: on up to 4 CPUs the tuned prefill is
    // every CPU, as llama-cpp-python's batch rule, so the check above ran at least once.
    if cpus() <= 4 {
        check(same_as_tuned > 0, || {
            format!("no rule gave the tuned configuration: {doc}")
        })?;
    }
    let chart = std::fs::read_to_string(&svg).map_err(|e| Failed::from(e.to_string()))?;
    // A line per knob setting (the repack step measured both), not one "static" line.
    check(
        chart.contains("<svg") && chart.contains("no-repack"),
        || "no svg, or no knob line".into(),
    )?;
    // The table names every rule and both picks. Both tunes are cached now, so every run
    // of llama-bench is the comparison's: each configuration as often as every other, a
    // rule's that is the tuned one's not twice.
    let runs = scene.dir.path().join("runs.log");
    let mut cmd = scene.sipllm("ok", &["bench", "--repetitions", "5"]);
    cmd.args(["--runtime", "llama.cpp", "--llama-bench"])
        .arg(std::env::current_exe().unwrap())
        .args(["--gguf", &model])
        .env(stand_in::RUNS_ENV, &runs);
    let out = run(&mut cmd)?;
    let log = std::fs::read_to_string(&runs).map_err(|e| Failed::from(e.to_string()))?;
    // Repetitions per configuration: each line is one llama-bench process, `-r N` its share.
    let mut counts = std::collections::BTreeMap::new();
    for line in log.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        let at = words.iter().position(|&w| w == "-r");
        let r: usize = at
            .and_then(|at| words.get(at + 1)?.parse().ok())
            .unwrap_or(0);
        let rest: Vec<&str> = words
            .iter()
            .enumerate()
            .filter(|&(k, _)| at.is_none_or(|at| k != at && k != at + 1))
            .map(|(_, w)| *w)
            .collect();
        *counts.entry(rest.join(" ")).or_insert(0) += r;
    }
    check(
        !counts.is_empty() && counts.values().all(|&n| n == 5),
        || format!("repetitions per configuration: {counts:#?}"),
    )?;
    let table = String::from_utf8_lossy(&out.stdout);
    for word in [
        "llama.cpp-default",
        "llama-cpp-python",
        "ollama",
        "all-logical",
        "llama.cpp-measured",
        "our kernels",
        // The repetitions that ran: the five asked for, spread over three llama-bench
        // processes per setting (two, two and one).
        "of 5 interleaved repetitions",
    ] {
        check(table.contains(word), || format!("{word}: {table}"))?;
    }
    Ok(())
}

fn bench_reports_the_rules_that_crash_llama_cpp() -> Result<(), Failed> {
    // The AMX crash: llama.cpp's default repacking dies in prefill, so every rule (all with
    // the default knobs) crashes there, while the tuned setting runs without repacking.
    let scene = Scene::new();
    let model = scene.model.to_string_lossy().into_owned();
    let bench = |json: bool| {
        let mut args = vec!["bench", "--repetitions", "5", "--quiet"];
        if json {
            args.push("--json");
        }
        let mut cmd = scene.sipllm("amx", &args);
        cmd.args(["--runtime", "llama.cpp", "--llama-bench"])
            .arg(std::env::current_exe().unwrap())
            .args(["--gguf", &model]);
        run(&mut cmd)
    };
    let doc = json_of(&bench(true)?)?;
    let rules = [
        "llama.cpp-default",
        "llama-cpp-python",
        "ollama",
        "all-logical",
    ];
    for rule in rules {
        check(reported_crashed(&doc, "prefill", rule), || {
            format!("prefill {rule} not reported as crashed: {doc}")
        })?;
        check(
            doc["phases"]["prefill"]["baselines"][rule].is_null(),
            || format!("prefill {rule} has figures: {doc}"),
        )?;
        check(
            doc["phases"]["decode"]["baselines"][rule]["ratio"]
                .as_f64()
                .is_some_and(|r| r > 0.0),
            || format!("decode {rule}: {doc}"),
        )?;
    }
    let crashed = doc["crashed"].as_array().cloned().unwrap_or_default();
    check(
        crashed
            .iter()
            .all(|c| c.as_str().is_some_and(|c| c.starts_with("prefill ")))
            && doc["picks"]["prefill"]["llama_cpp"]["repack"] == false
            && doc["phases"]["prefill"]["tuned"]["tokens_per_sec"]
                .as_f64()
                .is_some_and(|t| t > 0.0),
        || format!("{doc}"),
    )?;
    // The table says which rule crashed, at which thread count.
    let out = bench(false)?;
    let table = String::from_utf8_lossy(&out.stdout);
    check(
        out.status.success() && table.contains("crashed: prefill llama.cpp-default (-t "),
        || format!("{table}"),
    )
}

fn bench_repeats_as_asked_and_refuses_an_estimate() -> Result<(), Failed> {
    let scene = Scene::new();
    let model = scene.model.to_string_lossy().into_owned();
    let bench = |args: &[&str]| {
        let mut cmd = scene.sipllm("ok", &["bench", "--quiet"]);
        cmd.args(args)
            .args(["--runtime", "llama.cpp", "--llama-bench"])
            .arg(std::env::current_exe().unwrap())
            .args(["--gguf", &model]);
        run(&mut cmd)
    };
    // `patient` runs twice the repetitions asked for, as the kernels' bench does.
    let out = bench(&["--repetitions", "7", "--rigor", "patient"])?;
    let table = String::from_utf8_lossy(&out.stdout);
    check(
        out.status.success() && table.contains("of 14 interleaved repetitions"),
        || format!("{table}{}", String::from_utf8_lossy(&out.stderr)),
    )?;
    // A llama-bench whose output is unusable fails the bench before our kernels are tuned:
    // nothing is saved for them either.
    let fresh = Scene::new();
    let mut cmd = fresh.sipllm("nan", &["bench", "--quiet", "--runtime", "llama.cpp"]);
    cmd.arg("--llama-bench")
        .arg(std::env::current_exe().unwrap())
        .arg("--gguf")
        .arg(&fresh.model);
    let out = run(&mut cmd)?;
    check(!out.status.success() && fresh.profiles().is_empty(), || {
        format!("{:?} {:?}", out.status, fresh.profiles())
    })?;
    // An estimate measures nothing on llama.cpp: refused before anything runs.
    let out = bench(&["--rigor", "estimate"])?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    check(
        out.status.code() == Some(2) && stderr.contains("--rigor estimate never measures"),
        || format!("{:?} {stderr}", out.status),
    )
}
