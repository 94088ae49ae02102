//! `sipllm --runtime llama.cpp`, `sipllm emit` and `sipllm bench --runtime llama.cpp` against
//! the real llama.cpp: the tests' tiny llama (`llama-bench`'s `tests/real/tiny_model.rs`),
//! written in f16 and quantized to `Q4_K_M` by `llama-quantize`, measured by `llama-bench`.
//!
//! `LLAMA_CPP_BIN` names the folder with `llama-bench` and `llama-quantize` (`.ci/llama.cpp`
//! builds them and prints it). Unset, every trial shows as ignored with the reason, except
//! under CI (`CI` set to anything but `false` or `0`), where a missing llama.cpp is a failure.
//! Set to a folder that lacks them, it is a failure everywhere.
//!
//! On a harness of its own (`libtest-mimic`), since `#[ignore]` is fixed at compile time.

// The writer of llama-bench's real-binary tests, so that both run the same tiny model.
#[path = "../../llama-bench/tests/real/tiny_model.rs"]
mod tiny_model;

// Finding the binaries and making the tiny model, as llama-bench's real-binary tests do.
#[path = "../../llama-bench/tests/real/llama_cpp.rs"]
mod llama_cpp;

mod common;
#[path = "common/trial.rs"]
mod trial;

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use llama_bench::ModelIdentity;
use llama_cpp::{Binaries, Missing, Q4_K_M_FILE as MODEL_FILE};
use serde_json::{Value, json};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use trial::{check, check_tuned_figures, json_of, reported_crashed, run};

/// What every trial gets: `llama-bench`, the quantized model and what `llama-bench
/// --version` prints.
struct Fixture {
    bench: PathBuf,
    model: PathBuf,
    version: String,
}

/// What the trials share: the binaries (or why there are none) and the fixture, made on
/// first use in a directory removed when the tests end.
struct Shared {
    binaries: Result<Binaries, Missing>,
    dir: tempfile::TempDir,
    fixture: OnceLock<Result<Fixture, String>>,
}

impl Shared {
    fn fixture(&self, binaries: &Binaries) -> Result<&Fixture, Failed> {
        self.fixture
            .get_or_init(|| make_fixture(self.dir.path(), binaries))
            .as_ref()
            .map_err(|e| Failed::from(e.as_str()))
    }
}

/// A trial: runs against the fixture.
type Case = fn(&Fixture) -> Result<(), Failed>;

const CASES: [(&str, Case); 5] = [
    (
        "the_workload_is_the_file_s_own_format_mix",
        the_workload_is_the_file_s_own_format_mix,
    ),
    (
        "a_tune_records_the_build_and_the_model_and_is_cached",
        a_tune_records_the_build_and_the_model_and_is_cached,
    ),
    (
        "emit_writes_the_llama_cpp_measured_threads",
        emit_writes_the_llama_cpp_measured_threads,
    ),
    (
        "bench_compares_the_tuned_setting_with_the_rules",
        bench_compares_the_tuned_setting_with_the_rules,
    ),
    (
        "a_missing_model_or_binary_is_a_one_line_error",
        a_missing_model_or_binary_is_a_one_line_error,
    ),
];

fn main() {
    let args = Arguments::from_args();
    let shared = Arc::new(Shared {
        binaries: llama_cpp::binaries(),
        dir: tempfile::tempdir().expect("a temporary directory for the models"),
        fixture: OnceLock::new(),
    });
    let trials = CASES
        .into_iter()
        .map(|(name, case)| {
            let shared = Arc::clone(&shared);
            Trial::ignorable_test(name, move || match &shared.binaries {
                Ok(binaries) => case(shared.fixture(binaries)?).map(|()| Completion::Completed),
                Err(missing) => missing.outcome(),
            })
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    // The models' directory goes before the process exits.
    drop(shared);
    conclusion.exit();
}

/// Writes the tiny model in f16, quantizes it to `Q4_K_M` and reads `llama-bench --version`.
fn make_fixture(dir: &Path, binaries: &Binaries) -> Result<Fixture, String> {
    let model = llama_cpp::make_tiny_models(dir, binaries)?.q4_k_m;
    let out = Command::new(&binaries.bench)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot start {}: {e}", binaries.bench.display()))?;
    // llama.cpp prints its build on stderr.
    let version = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    Ok(Fixture {
        bench: binaries.bench.clone(),
        model,
        version,
    })
}

/// A home of its own for one trial.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            dir: tempfile::tempdir().expect("a temporary home"),
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// `sipllm ARGS` in this home, no `SIPLLM_*` of the caller's, no system store, a load
    /// average that lets it measure.
    fn sipllm(&self, args: &[&str]) -> Command {
        let mut cmd = common::hermetic(env!("CARGO_BIN_EXE_sipllm"));
        cmd.env("SIPLLM_HOME", self.path()).args(args);
        cmd
    }

    /// `sipllm ARGS --runtime llama.cpp --llama-bench BENCH --gguf MODEL`.
    fn on_llama_cpp(&self, args: &[&str], bench: &Path, model: &Path) -> Command {
        let mut cmd = self.sipllm(args);
        cmd.args(["--runtime", "llama.cpp", "--llama-bench"])
            .arg(bench)
            .arg("--gguf")
            .arg(model);
        cmd
    }

    /// The profiles in this home's store.
    fn profiles(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(self.path().join("runtime")) else {
            return Vec::new();
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension() == Some(OsStr::new("json")))
            .collect();
        paths.sort();
        paths
    }
}

/// `llama-bench` behind a shell script that appends each command line to a log, so that a
/// trial sees which runs `sipllm` started.
struct Logged {
    script: PathBuf,
    log: PathBuf,
}

impl Logged {
    fn new(dir: &Path, bench: &Path) -> Result<Logged, Failed> {
        use std::os::unix::fs::PermissionsExt;
        let script = dir.join("llama-bench");
        let log = dir.join("llama-bench.log");
        let quoted = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', r"'\''"));
        let text = format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> {}\nexec {} \"$@\"\n",
            quoted(&log),
            quoted(bench)
        );
        std::fs::write(&script, text).map_err(|e| e.to_string())?;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| e.to_string())?;
        Ok(Logged { script, log })
    }

    /// The command lines logged since the last call, and clears the log.
    fn take(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let _ = std::fs::remove_file(&self.log);
        text.lines().map(str::to_string).collect()
    }
}

/// The CPUs the tune may use here (its thread limit), from this machine's own root.
fn cpus() -> u64 {
    let hw = device_profile::get_hardware_info_from_root(Path::new("/"));
    auto_tuner::AutoTunerOptions::default()
        .question
        .thread_limit(&hw) as u64
}

/// A phase's picked thread count, checked to be one this machine can run.
fn threads_of(profile: &Value, phase: &str) -> Result<u64, Failed> {
    let threads = profile[phase]["threads"].as_u64().unwrap_or(0);
    check((1..=cpus()).contains(&threads), || {
        format!("{phase} threads: {}", profile[phase])
    })?;
    Ok(threads)
}

fn a_tune_records_the_build_and_the_model_and_is_cached(f: &Fixture) -> Result<(), Failed> {
    let home = Home::new();
    let logged = Logged::new(home.dir.path(), &f.bench)?;
    let doc = json_of(&run(&mut home.on_llama_cpp(
        &["--json", "--quiet"],
        &logged.script,
        &f.model,
    ))?)?;
    check(doc["source"] == "measured", || format!("{doc}"))?;
    let profile = &doc["profile"];
    let runtime = &profile["runtime"];
    check(runtime["name"] == "llama.cpp", || format!("{runtime}"))?;
    // The build commit is the one `llama-bench --version` prints.
    let commit = runtime["build_commit"].as_str().unwrap_or("");
    check(
        !commit.is_empty() && commit != "unknown" && f.version.contains(commit),
        || format!("build_commit {commit:?}, --version printed {:?}", f.version),
    )?;
    check(profile["kernel"] == format!("llama.cpp {commit}"), || {
        format!("kernel {}", profile["kernel"])
    })?;
    // The model's identity: its size and the hash of its header, and its file name.
    let identity = ModelIdentity::of(&f.model)?;
    let size = std::fs::metadata(&f.model)
        .map_err(|e| e.to_string())?
        .len();
    check(
        runtime["model"]["size"] == size
            && runtime["model"]["header_hash"] == identity.header_hash.as_str()
            && runtime["model_file"] == MODEL_FILE,
        || format!("{runtime}, the file has {size} bytes, {identity:?}"),
    )?;
    // Both phases measured through llama-bench, within this machine's CPUs.
    for phase in ["decode", "prefill"] {
        threads_of(profile, phase)?;
        let measured = profile[phase]["measurements"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        check(
            !measured.is_empty()
                && measured
                    .iter()
                    .all(|m| m["tokens_per_sec"].as_f64().is_some_and(|t| t > 0.0)),
            || format!("{phase}: {}", profile[phase]),
        )?;
    }
    let runs = logged.take();
    check(
        runs.iter()
            .any(|r| r.contains("-o json") && r.contains(MODEL_FILE)),
        || format!("llama-bench runs: {runs:?}"),
    )?;
    let paths = home.profiles();
    check(
        paths.len() == 1 && paths[0].to_string_lossy().contains("_xllamacpp-"),
        || format!("{paths:?}"),
    )?;
    // The same run again is read back: llama-bench only says its version, measures nothing.
    let again = json_of(&run(&mut home.on_llama_cpp(
        &["--json", "--quiet"],
        &logged.script,
        &f.model,
    ))?)?;
    check(again["source"] == "cache", || format!("{again}"))?;
    check(
        again["path"].as_str().map(PathBuf::from).as_ref() == Some(&paths[0]),
        || format!("{again}, stored {paths:?}"),
    )?;
    for phase in ["decode", "prefill"] {
        check(again["profile"][phase] == profile[phase], || {
            format!(
                "{phase}: {} then {}",
                profile[phase], again["profile"][phase]
            )
        })?;
    }
    let runs = logged.take();
    check(runs.iter().all(|r| r == "--version"), || {
        format!("llama-bench runs of a cached tune: {runs:?}")
    })?;
    check(home.profiles() == paths, || {
        format!("{:?}", home.profiles())
    })
}

fn emit_writes_the_llama_cpp_measured_threads(f: &Fixture) -> Result<(), Failed> {
    let home = Home::new();
    let doc = json_of(&run(&mut home.on_llama_cpp(
        &["--json", "--quiet"],
        &f.bench,
        &f.model,
    ))?)?;
    let profile = &doc["profile"];
    let flags = format!(
        "-t {} -tb {}",
        threads_of(profile, "decode")?,
        threads_of(profile, "prefill")?
    );
    let commit = profile["runtime"]["build_commit"].as_str().unwrap_or("");
    // Decode's pick without repacking, or a crash with it (the AMX Xeons'), writes
    // --no-repack.
    let no_repack = profile["runtime"]["decode"]["repack"] == false
        || profile["runtime"]["failures"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f["knobs"]["repack"] == true));
    let said = format!("measured on llama.cpp {commit} with {MODEL_FILE}");
    let model = f.model.to_string_lossy().into_owned();
    // With the tune's own flags, and with only the model (the llama.cpp-measured profile is
    // preferred to our kernels' for a llama.cpp target).
    let emits = [
        home.on_llama_cpp(&["emit", "--for", "llama.cpp"], &f.bench, &f.model),
        home.sipllm(&[
            "emit",
            "--for",
            "llama.cpp",
            "--gguf",
            &model,
            "--cached-only",
        ]),
    ];
    for mut emit in emits {
        let out = run(&mut emit)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        check(out.status.success(), || format!("{emit:?}: {stderr}"))?;
        check(
            stdout.starts_with(&format!("{flags} ")) || stdout.trim_end() == flags,
            || format!("{emit:?} printed {stdout:?}, the profile has {flags}"),
        )?;
        check(stdout.contains("--no-repack") == no_repack, || {
            format!("{emit:?} printed {stdout:?}, {}", profile["runtime"])
        })?;
        check(
            stderr.contains("source cache") && stderr.contains(&said),
            || format!("{emit:?}: {stderr}"),
        )?;
    }
    Ok(())
}

fn bench_compares_the_tuned_setting_with_the_rules(f: &Fixture) -> Result<(), Failed> {
    let home = Home::new();
    let doc = json_of(&run(&mut home.on_llama_cpp(
        &["bench", "--json", "--quiet", "--repetitions", "5"],
        &f.bench,
        &f.model,
    ))?)?;
    check(doc["runtime"] == "llama.cpp", || format!("{doc}"))?;
    let commit = doc["build_commit"].as_str().unwrap_or("");
    check(!commit.is_empty() && f.version.contains(commit), || {
        format!("build_commit {commit:?}, --version printed {:?}", f.version)
    })?;
    // llama.cpp's default is the one its help shows for -t.
    let help = Command::new(&f.bench)
        .arg("--help")
        .output()
        .map_err(|e| e.to_string())?;
    let help = String::from_utf8_lossy(&help.stdout);
    let default_threads: Option<u64> = help
        .lines()
        .find(|l| l.trim_start().starts_with("-t, --threads"))
        .and_then(|l| l.rsplit("(default: ").next())
        .and_then(|d| d.trim_end().trim_end_matches(')').parse().ok());
    check(default_threads.is_some(), || {
        format!("no -t default in {help}")
    })?;
    // The tune it resolved is stored, and its picks are the ones measured.
    let paths = home.profiles();
    check(
        paths
            .iter()
            .any(|p| p.to_string_lossy().contains("_xllamacpp-")),
        || format!("{paths:?}"),
    )?;
    for phase in ["decode", "prefill"] {
        let p = &doc["phases"][phase];
        check_tuned_figures(phase, p)?;
        check(
            p["tuned"]["tokens_per_sec"]
                .as_f64()
                .is_some_and(|t| t > 0.0),
            || format!("{phase}: {p}"),
        )?;
        let picks = &doc["picks"][phase];
        for rule in [
            "llama.cpp-default",
            "llama-cpp-python",
            "ollama",
            "all-logical",
        ] {
            let baseline = &p["baselines"][rule];
            if baseline.is_null() {
                // A rule's run that crashes (llama.cpp's default weight repacking does on
                // some Xeons with AMX) is reported as crashed, and the tune avoided that
                // crash by picking no repacking; a rule missing for any other reason fails.
                let reported = reported_crashed(&doc, phase, rule);
                check(reported && picks["llama_cpp"]["repack"] == false, || {
                    format!("{phase} {rule} neither measured nor reported as crashed: {doc}")
                })?;
                continue;
            }
            let ratio = baseline["ratio"].as_f64();
            check(ratio.is_some_and(|r| r > 0.0 && r.is_finite()), || {
                format!("{phase} {rule}: {p}")
            })?;
            if rule == "llama.cpp-default" {
                check(baseline["threads"].as_u64() == default_threads, || {
                    format!("{phase}: {p}, --help's default {default_threads:?}")
                })?;
            }
        }
        check(
            picks["llama_cpp"]["threads"] == p["tuned"]["threads"]
                && picks["our_kernels"]["threads"].as_u64().is_some(),
            || format!("{picks}"),
        )?;
    }
    Ok(())
}

/// llama.cpp's `use_more_bits` (`src/llama-quant.cpp`), written out here so that the
/// trial checks our reading of the file against llama.cpp's rule, not against itself.
fn llama_cpp_uses_more_bits(layer: usize, layers: usize) -> bool {
    layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2
}

fn the_workload_is_the_file_s_own_format_mix(f: &Fixture) -> Result<(), Failed> {
    // The workload of a `Q4_K_M` file made by llama-quantize is the file's: `attn_v` and
    // `ffn_down` in q6_K in the layers llama.cpp gives more bits, q4_K elsewhere.
    let home = Home::new();
    let model = f.model.to_string_lossy().into_owned();
    let args = ["--gguf", &model, "--rigor", "estimate", "--json", "--quiet"];
    let doc = json_of(&run(&mut home.sipllm(&args))?)?;
    let workload = &doc["profile"]["request"]["workload"];
    let layers = workload["layers"].as_u64().unwrap_or(0) as usize;
    check(layers == 3, || format!("layers: {workload}"))?;
    let projections = workload["projections"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    check(projections.len() == 7, || {
        format!("projections: {workload}")
    })?;
    for p in &projections {
        let name = p["name"].as_str().unwrap_or("");
        let heavier = name == "attn_v" || name == "ffn_down";
        let expected: Vec<&str> = (0..layers)
            .map(|layer| {
                if heavier && llama_cpp_uses_more_bits(layer, layers) {
                    "q6_K"
                } else {
                    "q4_K"
                }
            })
            .collect();
        check(p["formats"] == json!(expected), || {
            format!(
                "{name}: {} where llama.cpp's rule gives {expected:?}",
                p["formats"]
            )
        })?;
    }
    // The profile names a body for every format the file holds.
    let bodies = &doc["profile"]["gemv_bodies"];
    check(
        bodies["q4_K"].is_string() && bodies["q6_K"].is_string(),
        || format!("gemv_bodies: {bodies}"),
    )?;
    Ok(())
}

fn a_missing_model_or_binary_is_a_one_line_error(f: &Fixture) -> Result<(), Failed> {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::new();
    let missing_model = home.dir.path().join("missing.gguf");
    let not_executable = home.dir.path().join("not-executable-llama-bench");
    std::fs::write(&not_executable, "#!/bin/sh\n").map_err(|e| e.to_string())?;
    std::fs::set_permissions(&not_executable, std::fs::Permissions::from_mode(0o644))
        .map_err(|e| e.to_string())?;
    let missing_bench = home.dir.path().join("no-such-llama-bench");
    let cases = [
        (&f.bench, &missing_model, "missing.gguf"),
        (&not_executable, &f.model, "not-executable-llama-bench"),
        (&missing_bench, &f.model, "no-such-llama-bench"),
    ];
    for (bench, model, named) in cases {
        for args in [
            &["--quiet"][..],
            &["emit", "--for", "llama.cpp", "--quiet"],
            &["bench", "--repetitions", "5", "--quiet"],
        ] {
            let out = run(&mut home.on_llama_cpp(args, bench, model))?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
            check(!out.status.success() && out.status.code().is_some(), || {
                format!("{args:?} with {named}: {}, {stderr}", out.status)
            })?;
            check(
                lines.len() == 1
                    && lines[0].starts_with("sipllm")
                    && lines[0].contains(named)
                    && !stderr.contains("panicked"),
                || format!("{args:?} with {named}: {stderr}"),
            )?;
            check(out.stdout.is_empty(), || {
                format!("{args:?} with {named} printed {:?}", out.stdout)
            })?;
            check(home.profiles().is_empty(), || {
                format!("{args:?} with {named} cached {:?}", home.profiles())
            })?;
        }
    }
    Ok(())
}
