//! Measuring: the orchestration of one tune (the environment, the benchmark, the search of
//! each phase, the profile it makes), and the measurement of given settings.

use crate::bench::{Bench, Plan};
use crate::candidates::{CoreSet, estimate_threads, pinning_candidates};
use crate::environment::{self, Environment};
use crate::error::TunerError;
use crate::job::Job;
use crate::measure::{Measure as _, Setting};
use crate::optimized::ensure_optimized;
use crate::options::{AutoTunerOptions, MAX_THREADS_OVERRIDE, Measuring};
use crate::phase::{Phase, Step};
use crate::profile::{Measurement, PhaseProfile, RuntimeProfile, utc_timestamp};
use crate::progress::Reporter;
use crate::rigor::Rigor;
use crate::search;
use crate::warnings::Warnings;
use device_profile::HardwareInfo;
use std::time::{Instant, SystemTime};
use threadpool::SchedulePolicy;

/// The profile of [`Rigor::Estimate`]: [`estimate_threads`] for both phases, `static`,
/// nothing measured.
pub fn estimate_profile(hw: &HardwareInfo, opt: &AutoTunerOptions) -> RuntimeProfile {
    estimate_profile_of(hw, &Job::new(hw, &opt.question))
}

/// [`estimate_profile`] of a job.
pub(crate) fn estimate_profile_of(hw: &HardwareInfo, job: &Job) -> RuntimeProfile {
    let threads = estimate_threads(hw, job.request.thread_limit);
    let mut request = job.request.clone();
    request.rigor = Rigor::Estimate;
    RuntimeProfile::unmeasured(hw, request, job.kernel, threads, SchedulePolicy::Static)
}

/// Measures this machine on `opt`'s workload, decode then prefill, at `opt.question.rigor`, and
/// returns the winning profile (not saved); warnings (a busy machine) go to the reporter.
/// [`Rigor::Estimate`] measures nothing ([`estimate_profile`]). See `docs/auto-tuner.md` for
/// the search and the score.
///
/// # Errors
/// [`TunerError::InvalidSetting`] for options outside the ranges [`crate::tune_if_needed`]
/// holds them to, before anything is measured; otherwise what the measurement meets.
pub fn run_micro_benchmarks(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
) -> Result<RuntimeProfile, TunerError> {
    crate::ranges::refuse_out_of_range(opt)?;
    let job = Job::new(hw, &opt.question);
    let mut warnings = Warnings::new(&opt.reporter);
    measure_profile(
        hw,
        &job,
        &opt.measuring,
        &opt.reporter,
        false,
        &mut warnings,
    )
}

/// [`run_micro_benchmarks`] of `job`; `retune` when it re-does a noisy profile.
pub(crate) fn measure_profile(
    hw: &HardwareInfo,
    job: &Job,
    measuring: &Measuring,
    reporter: &Reporter,
    retune: bool,
    warnings: &mut Warnings,
) -> Result<RuntimeProfile, TunerError> {
    let rigor = job.request.rigor;
    if rigor == Rigor::Estimate {
        return Ok(estimate_profile_of(hw, job));
    }
    if let Some(llama_cpp) = &job.runtime {
        return crate::runtime_llamacpp::measure_profile(
            hw, job, llama_cpp, measuring, reporter, retune, warnings,
        );
    }
    ensure_optimized()?;
    let started = Instant::now();
    // A workload that does not fit is refused before the machine's state is judged: a
    // warning that the profile will be marked noisy would announce a profile never made.
    let plan = Plan::of(hw, job, measuring)?;
    let environment = assess_environment(hw, measuring, retune, warnings);
    let mut bench = Bench::new(hw, job, measuring, plan, reporter)?;
    let limit = job.request.thread_limit;
    let decode = search::search(&mut bench, limit, rigor)?;
    bench.set_phase(Phase::Prefill)?;
    let prefill = search::search(&mut bench, limit, rigor)?;
    reporter.finished();
    let mut profile = RuntimeProfile::unmeasured(
        hw,
        job.request.clone(),
        job.kernel,
        decode.threads,
        decode.policy,
    );
    profile.rigor = rigor;
    profile.decode = phase_profile(&bench, Phase::Decode, decode);
    profile.prefill = phase_profile(&bench, Phase::Prefill, prefill);
    profile.partial = bench.partial();
    profile.layer_copies = Some(bench.layer_copies());
    profile.working_set_bytes = Some(bench.working_set_bytes());
    profile.environment = Some(environment);
    profile.tuned_at = Some(utc_timestamp(SystemTime::now()));
    profile.tuning_seconds = Some(started.elapsed().as_secs_f64());
    Ok(profile)
}

/// The load and governor before a tune ([`environment::before_tune`]), its warning (a busy
/// machine) reported.
fn assess_environment(
    hw: &HardwareInfo,
    measuring: &Measuring,
    retune: bool,
    warnings: &mut Warnings,
) -> Environment {
    let environment = environment::before_tune(hw, measuring.load_average.read(), retune);
    if let Some(line) = environment.warning() {
        warnings.push(line);
    }
    environment
}

/// The setting of `phase` recording `config` as the winner of what `bench` measured.
pub(crate) fn phase_profile(bench: &Bench, phase: Phase, config: Setting) -> PhaseProfile {
    let measurements = bench.phase_measurements(phase).to_vec();
    let winner = measurements
        .iter()
        .rev()
        .find(|m| {
            m.threads == config.threads
                && m.schedule_policy == config.policy
                && m.cores == config.cores
        })
        .cloned();
    PhaseProfile {
        threads: config.threads,
        schedule_policy: config.policy,
        schedule_policy_id: config.policy.id(),
        cores: config.cores,
        pinned_cpus: bench.pinned_cpus(config),
        tokens_per_sec: winner.as_ref().map(|m| m.tokens_per_sec),
        gbps: winner.as_ref().map(|m| m.gbps),
        measurements,
    }
}

/// Measures each of `settings` on `opt`'s workload in `phase`, interleaved, with
/// `opt.measuring.repetitions` rounds (× the rigor's factor), and returns one [`Measurement`] each
/// (tokens/s median, min and max), in the order given; nothing is read or saved. A setting
/// the budget left unmeasured is missing from the result.
///
/// For comparisons of a tuned profile against baselines (`sipllm bench`): a pinned setting
/// pins to the first `threads` CPUs of the machine's [`pinning_candidates`] set of its
/// [`CoreSet`]; a thread count may exceed the CPUs this process may use (oversubscribed).
/// Options out of the ranges [`crate::tune_if_needed`] takes are refused
/// ([`TunerError::InvalidSetting`]).
pub fn measure_settings(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
    phase: Phase,
    settings: &[Setting],
) -> Result<Vec<Measurement>, TunerError> {
    crate::ranges::refuse_out_of_range(opt)?;
    let sets = pinning_candidates(hw);
    for s in settings {
        let fits = s.cores == CoreSet::Any
            || sets
                .iter()
                .any(|set| set.cores == s.cores && set.cpus.len() >= s.threads);
        if s.threads == 0 || s.threads > MAX_THREADS_OVERRIDE || !fits {
            return Err(TunerError::InvalidSetting {
                name: "setting".to_string(),
                value: format!("{} threads on {}", s.threads, s.cores.label()),
                expected:
                    "1 to 1024 threads, pinned only to a set of this machine with as many CPUs"
                        .to_string(),
            });
        }
    }
    ensure_optimized()?;
    let job = Job::new(hw, &opt.question);
    let plan = Plan::of(hw, &job, &opt.measuring)?;
    let mut bench = Bench::new(hw, &job, &opt.measuring, plan, &opt.reporter)?;
    bench.set_phase(phase)?;
    bench.measure(Step::Final, settings, None)?;
    opt.reporter.finished();
    Ok(bench.phase_measurements(phase).to_vec())
}
