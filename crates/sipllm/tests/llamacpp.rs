//! `sipllm --runtime llama.cpp`, `sipllm bench --runtime llama.cpp` and `sipllm emit` against
//! the stand-in llama-bench (`llama_bench::stand_in`), with its known optimum and its
//! misbehaviours.
//!
//! This test binary is its own stand-in: run with `FAKE_LLAMA_BENCH_MODE` set, `main` is the
//! stand-in's (a binary of another package is not built for this one's tests), so the tests
//! hand `sipllm` this executable as `--llama-bench`. The tests themselves run on
//! `libtest-mimic`.

mod common;
#[path = "common/scene.rs"]
mod scene;
#[path = "common/trial.rs"]
mod trial;

use libtest_mimic::Failed;
use llama_bench::stand_in;
use scene::{Scene, Test, cpus};
use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};
use trial::{check, json_of, run};

fn main() -> ExitCode {
    let tests: &[Test] = &[
        (
            "a_tune_picks_the_optimum_and_caches_it",
            a_tune_picks_the_optimum_and_caches_it,
        ),
        (
            "a_crashed_candidate_is_recorded_and_never_picked",
            a_crashed_candidate_is_recorded_and_never_picked,
        ),
        (
            "malformed_output_is_an_error_and_nothing_is_cached",
            malformed_output_is_an_error_and_nothing_is_cached,
        ),
        (
            "a_new_build_or_a_changed_model_re_tunes",
            a_new_build_or_a_changed_model_re_tunes,
        ),
        (
            "emit_prefers_the_llama_cpp_profile",
            emit_prefers_the_llama_cpp_profile,
        ),
        (
            "a_budget_kills_a_hanging_run_and_keeps_the_best_so_far",
            a_budget_kills_a_hanging_run_and_keeps_the_best_so_far,
        ),
        (
            "a_budget_that_no_run_fits_is_an_error_naming_it",
            a_budget_that_no_run_fits_is_an_error_naming_it,
        ),
        (
            "an_interrupt_kills_the_running_llama_bench",
            an_interrupt_kills_the_running_llama_bench,
        ),
        (
            "the_runtime_flags_name_what_is_missing",
            the_runtime_flags_name_what_is_missing,
        ),
        (
            "the_stores_list_show_export_and_import_a_llama_cpp_profile",
            the_stores_list_show_export_and_import_a_llama_cpp_profile,
        ),
    ];
    scene::stand_in_or_run(tests)
}

fn a_tune_picks_the_optimum_and_caches_it() -> Result<(), Failed> {
    let scene = Scene::new();
    let out = run(&mut scene.tune("ok", &["--json"]))?;
    let doc = json_of(&out)?;
    check(doc["source"] == "measured", || format!("{doc}"))?;
    let profile = &doc["profile"];
    // The stand-in's decode peaks at 2 threads, its prefill at 4: within this machine's CPUs.
    let decode_best = 2.min(cpus());
    let prefill_best = 4.min(cpus());
    check(profile["decode"]["threads"] == decode_best, || {
        format!("{}", profile["decode"])
    })?;
    check(profile["prefill"]["threads"] == prefill_best, || {
        format!("{}", profile["prefill"])
    })?;
    let runtime = &profile["runtime"];
    check(
        runtime["name"] == "llama.cpp" && runtime["build_commit"] == "fa4e000",
        || format!("{runtime}"),
    )?;
    // llama.cpp ran its own bodies: the profile names none of ours.
    check(
        profile.get("gemv_bodies").is_none() && profile.get("gemm_bodies").is_none(),
        || format!("{profile}"),
    )?;
    // Repacking costs the stand-in's decode 22 %: decode runs without it, prefill with it.
    check(runtime["decode"]["repack"] == false, || {
        format!("{runtime}")
    })?;
    check(runtime["prefill"]["repack"] == true, || {
        format!("{runtime}")
    })?;
    check(profile["kernel"] == "llama.cpp fa4e000", || {
        format!("{}", profile["kernel"])
    })?;
    let size = std::fs::metadata(&scene.model).unwrap().len();
    check(runtime["model"]["size"] == size, || format!("{runtime}"))?;
    let paths = scene.profiles();
    check(
        paths.len() == 1 && paths[0].to_string_lossy().contains("_xllamacpp-"),
        || format!("{paths:?}"),
    )?;
    // Read back, not measured: even a stand-in that would now fail is not run.
    let again = json_of(&run(&mut scene.tune("not-json", &["--json"]))?)?;
    check(again["source"] == "cache", || format!("{again}"))?;
    check(again["profile"]["decode"] == profile["decode"], || {
        format!("{again}")
    })
}

fn a_crashed_candidate_is_recorded_and_never_picked() -> Result<(), Failed> {
    // The AMX crash: prefill with repacking dies; prefill runs without it.
    let scene = Scene::new();
    let doc = json_of(&run(&mut scene.tune("amx", &["--json"]))?)?;
    let rt = &doc["profile"]["runtime"];
    check(rt["prefill"]["repack"] == false, || rt.to_string())?;
    let failures = rt["failures"].as_array().cloned().unwrap_or_default();
    check(
        !failures.is_empty()
            && failures.iter().all(|f| {
                f["phase"] == "prefill" && f["knobs"]["repack"] == true && f["signal"] == 11
            }),
        || format!("{rt}"),
    )?;
    // A crash at the decode optimum (2 threads): another count is picked, the crash recorded.
    if cpus() >= 2 {
        let scene = Scene::new();
        let mut cmd = scene.tune("ok", &["--json"]);
        cmd.env(stand_in::CRASH_THREADS_ENV, "2");
        let doc = json_of(&run(&mut cmd)?)?;
        let profile = &doc["profile"];
        check(profile["decode"]["threads"] != 2, || {
            format!("{}", profile["decode"])
        })?;
        check(profile["prefill"]["threads"] != 2, || {
            format!("{}", profile["prefill"])
        })?;
        let failures = profile["runtime"]["failures"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        // Recorded once per setting: a setting that crashed is not run again at later steps.
        let twos: Vec<String> = (failures.iter())
            .filter(|f| f["threads"] == 2 && f["phase"] == "decode")
            .map(|f| format!("{} {}", f["cores"], f["knobs"]))
            .collect();
        let distinct: std::collections::BTreeSet<&String> = twos.iter().collect();
        check(!twos.is_empty() && distinct.len() == twos.len(), || {
            format!("{}", profile["runtime"])
        })?;
        check(
            profile["decode"]["measurements"]
                .as_array()
                .is_some_and(|m| m.iter().all(|m| m["threads"] != 2)),
            || format!("{}", profile["decode"]),
        )?;
    }
    // Every candidate crashing is an error naming the crash, and nothing is cached.
    let scene = Scene::new();
    let out = run(&mut scene.tune("crash", &[]))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    check(!out.status.success() && stderr.contains("crashed"), || {
        stderr.to_string()
    })?;
    check(scene.profiles().is_empty(), || {
        format!("{:?}", scene.profiles())
    })
}

fn malformed_output_is_an_error_and_nothing_is_cached() -> Result<(), Failed> {
    for mode in [
        "not-json",
        "nan",
        "missing-field",
        "wrong-threads",
        "flood",
        "fail",
    ] {
        let scene = Scene::new();
        let out = run(&mut scene.tune(mode, &[]))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let binary = std::env::current_exe().unwrap();
        let command = format!("`{} -m", binary.display());
        check(!out.status.success(), || format!("{mode}: succeeded"))?;
        check(stderr.contains(&command), || format!("{mode}: {stderr}"))?;
        check(scene.profiles().is_empty(), || {
            format!("{mode}: {:?}", scene.profiles())
        })?;
    }
    // Figures the parser takes but a cached profile may not hold: used once, not saved
    // (saved, every later run would reject it and re-tune). A model of 4 MiB at the
    // stand-in's 9e8 tokens/s is past the GB/s a profile holds.
    let scene = Scene::new();
    let model = std::fs::OpenOptions::new().append(true).open(&scene.model);
    std::io::Write::write_all(&mut model.unwrap(), &[0u8; 4 << 20]).unwrap();
    let out = run(&mut scene.tune("implausible", &["--json"]))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    check(
        out.status.success() && stderr.contains("the profile is not saved"),
        || stderr.to_string(),
    )?;
    check(scene.profiles().is_empty(), || {
        format!("{:?}", scene.profiles())
    })?;
    Ok(())
}

/// The process ids the stand-in's hanging runs wrote to `path`, one a line.
fn recorded_pids(path: &Path) -> Vec<i32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

/// Whether the process `pid` dies within a minute (read from Linux's `/proc`): gone, or a
/// zombie that its new parent has yet to reap (a killed run's parent may exit first, and
/// whether the process that adopts it reaps it at once is not ours to decide).
fn dies(pid: i32) -> bool {
    let dead = || match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if dead() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Well short of llama-bench's own timeout (ten minutes) and well past the least a run of a
/// budgeted tune is given: a tune that took longer was not bounded by its budget.
const BUDGET_BOUND: Duration = Duration::from_secs(120);

fn a_budget_kills_a_hanging_run_and_keeps_the_best_so_far() -> Result<(), Failed> {
    // Decode's first run (repacking on) measures; its second (`--repack 0`) hangs until the
    // budget's end kills it. Prefill still gets its first run, and the profile is partial.
    let scene = Scene::new();
    let pids = scene.dir.path().join("pids");
    let mut cmd = scene.tune("hang-no-repack", &["--budget", "1", "--json"]);
    cmd.env(stand_in::PIDS_ENV, &pids);
    let started = Instant::now();
    let out = run(&mut cmd)?;
    let took = started.elapsed();
    let doc = json_of(&out)?;
    check(took < BUDGET_BOUND, || format!("took {took:?}"))?;
    let profile = &doc["profile"];
    check(profile["partial"] == true, || format!("{profile}"))?;
    for phase in ["decode", "prefill"] {
        check(profile[phase]["tokens_per_sec"].is_number(), || {
            format!("{}", profile[phase])
        })?;
        check(profile["runtime"][phase]["repack"] == true, || {
            format!("{}", profile["runtime"])
        })?;
    }
    let hung = recorded_pids(&pids);
    check(!hung.is_empty(), || "no run hung".to_string())?;
    for pid in hung {
        check(dies(pid), || {
            format!("the hanging run {pid} outlived the tune")
        })?;
    }
    Ok(())
}

fn a_budget_that_no_run_fits_is_an_error_naming_it() -> Result<(), Failed> {
    let scene = Scene::new();
    let pids = scene.dir.path().join("pids");
    let mut cmd = scene.tune("hang", &["--budget", "1"]);
    cmd.env(stand_in::PIDS_ENV, &pids);
    let started = Instant::now();
    let out = run(&mut cmd)?;
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    check(!out.status.success(), || format!("succeeded: {stderr}"))?;
    check(took < BUDGET_BOUND, || format!("took {took:?}"))?;
    check(
        stderr.contains("the budget of 1 s ran out before a decode run of llama-bench finished")
            && stderr.contains(&format!(
                "ran past its timeout of {} s",
                auto_tuner::MIN_RUN_TIMEOUT.as_secs()
            )),
        || stderr.to_string(),
    )?;
    check(scene.profiles().is_empty(), || {
        format!("{:?}", scene.profiles())
    })?;
    let hung = recorded_pids(&pids);
    check(hung.len() == 1, || format!("{hung:?}"))?;
    check(dies(hung[0]), || {
        format!("the hanging run {} outlived the tune", hung[0])
    })
}

fn an_interrupt_kills_the_running_llama_bench() -> Result<(), Failed> {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let scene = Scene::new();
        let pids = scene.dir.path().join("pids");
        let mut cmd = scene.tune("hang", &[]);
        cmd.env(stand_in::PIDS_ENV, &pids)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: between fork and exec, `signal` (async-signal-safe) gives the child the
        // default actions, whatever this test was started with (a background job of a shell
        // starts with SIGINT ignored, and sipllm leaves an ignored signal ignored).
        unsafe {
            cmd.pre_exec(|| {
                for signal in [libc::SIGINT, libc::SIGTERM] {
                    libc::signal(signal, libc::SIG_DFL);
                }
                Ok(())
            });
        }
        let mut sipllm = cmd
            .spawn()
            .map_err(|e| Failed::from(format!("cannot run sipllm: {e}")))?;
        // The run is under way once the stand-in has written its pid.
        let deadline = Instant::now() + Duration::from_secs(60);
        let hung = loop {
            if let [pid] = recorded_pids(&pids)[..] {
                break pid;
            }
            if let Ok(Some(status)) = sipllm.try_wait() {
                return Err(format!("sipllm ended before its run started: {status}").into());
            }
            if Instant::now() > deadline {
                let _ = sipllm.kill();
                let _ = sipllm.wait();
                return Err("the stand-in never started".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        // SAFETY: `kill` has no memory-safety preconditions; the id is our child's, not yet
        // waited for, so it names no other process.
        let sent = unsafe { libc::kill(sipllm.id() as libc::pid_t, signal) };
        check(sent == 0, || {
            format!("kill: {}", std::io::Error::last_os_error())
        })?;
        let status = sipllm
            .wait()
            .map_err(|e| Failed::from(format!("cannot wait for sipllm: {e}")))?;
        // It dies of the signal, as without its handler: a shell reports 128 + the signal.
        check(status.signal() == Some(signal), || {
            format!("signal {signal}: sipllm ended with {status}")
        })?;
        if !dies(hung) {
            // SAFETY: as above; the stand-in was left running, so its id is still its own.
            unsafe { libc::kill(hung, libc::SIGKILL) };
            return Err(format!("signal {signal}: the run {hung} outlived sipllm").into());
        }
    }
    Ok(())
}

fn a_new_build_or_a_changed_model_re_tunes() -> Result<(), Failed> {
    let scene = Scene::new();
    json_of(&run(&mut scene.tune("ok", &["--json"]))?)?;
    let mut cmd = scene.tune("ok", &["--json"]);
    cmd.env(stand_in::COMMIT_ENV, "b0b0b0b");
    let out = run(&mut cmd)?;
    let doc = json_of(&out)?;
    check(doc["source"] == "measured", || format!("{doc}"))?;
    check(
        doc["profile"]["runtime"]["build_commit"] == "b0b0b0b",
        || format!("{doc}"),
    )?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    check(
        stderr.contains("build fa4e000") && stderr.contains("build b0b0b0b"),
        || stderr.to_string(),
    )?;
    // The same build again: cached.
    let mut cmd = scene.tune("ok", &["--json"]);
    cmd.env(stand_in::COMMIT_ENV, "b0b0b0b");
    check(json_of(&run(&mut cmd)?)?["source"] == "cache", || {
        "not cached".into()
    })?;
    // A changed model file: a new slot, measured.
    let mut bytes = std::fs::read(&scene.model).unwrap();
    bytes.extend_from_slice(&[0; 32]);
    std::fs::write(&scene.model, bytes).unwrap();
    let mut cmd = scene.tune("ok", &["--json"]);
    cmd.env(stand_in::COMMIT_ENV, "b0b0b0b");
    let doc = json_of(&run(&mut cmd)?)?;
    check(doc["source"] == "measured", || format!("{doc}"))?;
    check(scene.profiles().len() == 2, || {
        format!("{:?}", scene.profiles())
    })
}

fn emit_prefers_the_llama_cpp_profile() -> Result<(), Failed> {
    let scene = Scene::new();
    // The AMX machine: repacking crashes, so the flags carry --no-repack.
    json_of(&run(&mut scene.tune("amx", &["--json"]))?)?;
    let model = scene.model.to_string_lossy().into_owned();
    let emit = |target: &str| scene.sipllm("ok", &["emit", "--for", target, "--gguf", &model]);
    let out = run(&mut emit("llama.cpp"))?;
    let measured = String::from_utf8_lossy(&out.stdout).into_owned();
    let stdout = &measured;
    let stderr = String::from_utf8_lossy(&out.stderr);
    check(out.status.success(), || stderr.to_string())?;
    check(
        stdout.contains("--no-repack") && stdout.starts_with("-t "),
        || stdout.to_string(),
    )?;
    check(
        stderr.contains("measured on llama.cpp fa4e000") && stderr.contains("_xllamacpp-"),
        || stderr.to_string(),
    )?;
    // --llama-bench without --runtime names the build whose profile is preferred: the
    // stand-in's own, so the same profile.
    let exe = std::env::current_exe().unwrap();
    let out = run(emit("llama.cpp").arg("--llama-bench").arg(&exe))?;
    let named = String::from_utf8_lossy(&out.stdout);
    check(out.status.success() && named == measured, || {
        format!("{named} {}", String::from_utf8_lossy(&out.stderr))
    })?;
    // Another build's binary passes the profile over, and says why.
    let mut other = emit("llama.cpp");
    other.args(["--cached-only", "--llama-bench"]).arg(&exe);
    let out = run(other.env("FAKE_LLAMA_BENCH_COMMIT", "b0b0b0b"))?;
    let why = String::from_utf8_lossy(&out.stderr);
    check(why.contains("ignoring cached llama.cpp profile"), || {
        why.to_string()
    })?;
    // ... and has no effect, so is refused, without --gguf.
    let bare = [
        "emit",
        "--for",
        "llama.cpp",
        "--cached-only",
        "--llama-bench",
    ];
    let out = run(scene.sipllm("ok", &bare).arg(&exe))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    check(
        !out.status.success() && stderr.contains("--llama-bench without --runtime"),
        || stderr.to_string(),
    )?;
    // An explicit thread count wins over the llama.cpp-measured profile too.
    let out = run(emit("llama.cpp").env("SIPLLM_THREADS", "1"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    check(
        out.status.success()
            && stdout.starts_with("-t 1 -tb 1")
            && stderr.contains("source override"),
        || format!("{stdout} {stderr}"),
    )?;
    // A policy alone keeps the llama.cpp-measured profile: llama.cpp has no policies.
    let out = run(emit("llama.cpp").env("SIPLLM_POLICY", "guided"))?;
    let with_policy = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    check(
        with_policy == measured && stderr.contains("SIPLLM_POLICY has no effect"),
        || format!("{with_policy} {stderr}"),
    )?;
    let out = run(&mut emit("llama-server-preset"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    check(stdout.contains("no-repack = true"), || stdout.to_string())?;
    // Another target keeps our kernels' profile (tuned for the model's workload).
    let out = run(&mut emit("candle"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    check(
        out.status.success() && stderr.contains("measured on our kernels"),
        || stderr.to_string(),
    )?;
    // A profile found in the system store is named as the system store's.
    let system = scene.dir.path().join("system");
    std::fs::rename(scene.home().join("runtime"), &system).unwrap();
    let out = run(emit("llama.cpp").env("SIPLLM_SYSTEM_PROFILES", &system))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    check(stderr.contains("source system, "), || stderr.to_string())?;
    Ok(())
}

fn the_runtime_flags_name_what_is_missing() -> Result<(), Failed> {
    let scene = Scene::new();
    let model = scene.model.to_string_lossy().into_owned();
    let out = run(&mut scene.sipllm("ok", &["--runtime", "llama.cpp", "--gguf", &model]))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Refused as given (exit 2); a llama-bench that cannot start fails running (exit 1).
    check(
        out.status.code() == Some(2) && stderr.contains("--llama-bench"),
        || stderr.to_string(),
    )?;
    let mut cmd = scene.sipllm("ok", &["--runtime", "llama.cpp"]);
    cmd.env("SIPLLM_LLAMA_BENCH", std::env::current_exe().unwrap());
    let out = run(&mut cmd)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    check(
        out.status.code() == Some(2) && stderr.contains("--gguf"),
        || stderr.to_string(),
    )?;
    // A llama-bench that cannot start fails `bench` before our kernels are tuned for the
    // comparison: nothing is measured or cached.
    let missing = scene.dir.path().join("no-such-llama-bench");
    let mut cmd = scene.sipllm("ok", &["bench", "--repetitions", "5", "--quiet"]);
    cmd.args(["--runtime", "llama.cpp", "--llama-bench"])
        .arg(&missing)
        .args(["--gguf", &model]);
    let out = run(&mut cmd)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    check(
        out.status.code() == Some(1) && stderr.contains("no-such-llama-bench"),
        || stderr.to_string(),
    )?;
    check(scene.profiles().is_empty(), || {
        format!("{:?}", scene.profiles())
    })?;
    let out = run(&mut scene.sipllm("ok", &["--llama-bench", "x"]))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    check(
        out.status.code() == Some(2) && stderr.contains("--runtime"),
        || stderr.to_string(),
    )?;
    Ok(())
}

fn the_stores_list_show_export_and_import_a_llama_cpp_profile() -> Result<(), Failed> {
    // Listing, showing, exporting and importing run no llama-bench: a profile measured on
    // llama.cpp is checked by its own record, not rejected for naming no kernel of ours.
    let scene = Scene::new();
    json_of(&run(&mut scene.tune("ok", &["--json"]))?)?;
    let paths = scene.profiles();
    check(paths.len() == 1, || format!("{paths:?}"))?;
    let id = paths[0].file_stem().unwrap().to_string_lossy().into_owned();
    let out = run(&mut scene.sipllm("ok", &["profile", "list"]))?;
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = listed.lines().find(|l| l.contains(&id)).unwrap_or("");
    check(
        line.contains("llama.cpp fa4e000") && line.trim_end().ends_with("valid"),
        || listed.clone(),
    )?;
    let out = run(&mut scene.sipllm("ok", &["profile", "show", &id]))?;
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    check(shown.contains("valid on this machine"), || shown.clone())?;
    // Each row names its knobs (the repack step measured both), and one pick per phase.
    let picks: Vec<&str> = shown.lines().filter(|l| l.ends_with("<- pick")).collect();
    check(
        shown.contains(" no-repack ")
            && picks.len() == 2
            && picks
                .iter()
                .all(|l| l.contains(" repack ") || l.contains(" no-repack ")),
        || shown.clone(),
    )?;
    let bundle = scene.dir.path().join("bundle.json");
    let bundle_arg = bundle.to_string_lossy().into_owned();
    let out = run(&mut scene.sipllm("ok", &["profile", "export", "--output", &bundle_arg]))?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    check(
        out.status.success() && stderr.contains("exported 1 profile"),
        || stderr.clone(),
    )?;
    // Into another home (with its own copy of the same model file): the same file name,
    // and the next tune there reads it.
    let other = Scene::new();
    let out = run(&mut other.sipllm("ok", &["profile", "import", &bundle_arg]))?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    check(out.status.success(), || stderr.clone())?;
    let imported = other.profiles();
    check(
        imported.len() == 1 && imported[0].file_stem() == paths[0].file_stem(),
        || format!("{imported:?}"),
    )?;
    let again = json_of(&run(&mut other.tune("not-json", &["--json"]))?)?;
    check(again["source"] == "cache", || format!("{again}"))?;
    Ok(())
}
