//! The runtime profile: what the tuner chose, how it measured, and on which machine. This is
//! the JSON document stored in `$SIPLLM_HOME/runtime/<hardware_id>.json`.

use crate::options::Workload;
use device_profile::HardwareInfo;
use matmul_kernel::Kernel;
use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};
use threadpool::{Pinning, SchedulePolicy, ThreadPool, ThreadPoolBuilder};

/// The version of the profile document; a cached profile of another version is re-tuned.
pub const SCHEMA_VERSION: u32 = 2;

/// Parameters read from memory per generated token by Llama-3-8B in decode: all
/// 8,030,261,248 parameters except the 128,256 × 4,096 embedding table, of which a token
/// reads one row (the output head is read whole).
pub const LLAMA3_8B_PARAMS_READ_PER_TOKEN: f64 = 7_504_924_672.0;

/// Pseudo tokens per second: how many Llama-3-8B decode steps per second a machine would
/// reach if every projection ran as fast as the measured one,
/// `projections/s × (n_out · n_in) ÷ LLAMA3_8B_PARAMS_READ_PER_TOKEN`.
pub fn pseudo_tokens_per_sec(projections_per_sec: f64, workload: Workload) -> f64 {
    projections_per_sec * (workload.n_out as f64) * (workload.n_in as f64)
        / LLAMA3_8B_PARAMS_READ_PER_TOKEN
}

/// The kernel signature stored in a profile: the kernel path that runs (`avx512`, `avx2`,
/// `portable`) and [`matmul_kernel::KERNEL_REVISION`]. A profile measured with another
/// signature is re-tuned.
pub fn kernel_signature(kernel: Kernel) -> String {
    format!("{kernel} matmul-kernel r{}", matmul_kernel::KERNEL_REVISION)
}

/// Which CPUs a configuration's workers run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CoreSet {
    /// Unpinned: the OS places the workers on any CPU the process may use.
    #[default]
    Any,
    /// Pinned one worker per CPU, to the performance cores only (hybrid CPUs).
    Performance,
}

/// The step of the search a measurement belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Phase {
    /// 1. Thread counts under `static` (every count up to 4, else probes).
    Threads,
    /// 1b. Neighbours of the best thread count, at a shrinking step.
    Refine,
    /// 2. Every policy at the chosen thread count.
    Policy,
    /// 3. The chosen count's neighbours again, under the chosen policy.
    #[serde(rename = "re-check")]
    Recheck,
    /// The exhaustive oracle's sweep of every thread count x policy.
    Sweep,
    /// The exhaustive oracle's back-to-back re-measurement of the two picks.
    Final,
}

impl Phase {
    /// The short name shown in tables: `threads`, `refine`, `policy`, `re-check`, `sweep`,
    /// `final`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Threads => "threads",
            Phase::Refine => "refine",
            Phase::Policy => "policy",
            Phase::Recheck => "re-check",
            Phase::Sweep => "sweep",
            Phase::Final => "final",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One configuration the tuner measured, with the spread of its repetitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// The step of the search that measured it.
    pub phase: Phase,
    /// Threads, the caller included.
    pub threads: usize,
    /// The schedule policy.
    pub schedule_policy: SchedulePolicy,
    /// Where the workers ran.
    #[serde(default)]
    pub cores: CoreSet,
    /// Median pseudo tokens per second.
    pub pseudo_tokens_per_sec: f64,
    /// Median weight bytes read per second, in GB/s (10⁹ bytes).
    pub gbps: f64,
    /// Slowest repetition, GB/s.
    pub gbps_min: f64,
    /// Median repetition, GB/s (the same as `gbps`).
    pub gbps_median: f64,
    /// Fastest repetition, GB/s.
    pub gbps_max: f64,
    /// Timed repetitions behind the figures.
    pub repetitions: usize,
}

/// The tuned answer handed to the runtime, and the cache document that stores it.
///
/// `threads`, `schedule_policy` and `pinned_cpus` are what the runtime uses; the rest records
/// how they were found and what limited the search. A profile that was not measured
/// (defaults, overrides) has no scores, no measurements and no tuning time: those fields are
/// `None` and absent from its JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeProfile {
    /// [`SCHEMA_VERSION`] of the document.
    pub schema_version: u32,
    /// The machine's `hardware_id` (the cache file's name).
    pub hardware_id: String,
    /// Threads to run with, the caller included.
    pub threads: usize,
    /// The schedule policy, by name.
    pub schedule_policy: SchedulePolicy,
    /// The schedule policy's stable id (0–6).
    pub schedule_policy_id: u8,
    /// Where the workers run (pinned to performance cores on hybrid CPUs when that won).
    #[serde(default)]
    pub cores: CoreSet,
    /// The CPU ids the workers are pinned to, one per worker (worker 0, the calling thread,
    /// first); empty when unpinned.
    #[serde(default)]
    pub pinned_cpus: Vec<usize>,
    /// Median pseudo tokens per second of the chosen configuration, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pseudo_tokens_per_sec: Option<f64>,
    /// Median GB/s of the chosen configuration, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gbps: Option<f64>,
    /// True when the search stopped early (time budget) with the best found so far.
    #[serde(default)]
    pub partial: bool,
    /// What the search was asked and limited by; a cached profile serves only the requests
    /// it answers (see [`TuningRequest::answers`]).
    pub request: TuningRequest,
    /// How many distinct weight matrices the benchmark rotated through, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_matrices: Option<usize>,
    /// Bytes of weights the benchmark rotated through, when measured. Below four times the
    /// L3 the figures are cache bandwidth, not memory bandwidth (tiny workloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_set_bytes: Option<u64>,
    /// Every configuration measured, in the order measured (last figures win).
    #[serde(default)]
    pub measurements: Vec<Measurement>,
    /// The machine as detected when the profile was made.
    pub hardware: HardwareInfo,
    /// Version of the tuner that wrote the profile.
    pub crate_version: String,
    /// [`kernel_signature`] at tuning time.
    pub kernel: String,
    /// When the tuning finished, RFC 3339 UTC, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuned_at: Option<String>,
    /// Wall time of the whole tune (preparation and search), in seconds, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuning_seconds: Option<f64>,
}

/// What a tuning was asked for and limited by: the workload, the largest thread count it
/// could try, and its time budget. The kernel is recorded in [`RuntimeProfile::kernel`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TuningRequest {
    /// The benchmark's matrix shape.
    pub workload: Workload,
    /// The largest thread count the search could try: the CPUs this process may use,
    /// capped by `--thread-cap`.
    pub thread_limit: usize,
    /// The time budget, in seconds, if one was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_seconds: Option<f64>,
}

impl TuningRequest {
    /// Whether a profile tuned for `self`, `partial` or not, answers `asked`: the same
    /// workload and thread limit, and, for a partial profile, a budget no larger than the
    /// one that cut it short (a run with more time, or none, would search further).
    pub fn answers(&self, partial: bool, asked: &TuningRequest) -> Result<(), String> {
        if self.workload != asked.workload {
            return Err(format!(
                "it was measured on a {}x{} matrix, this run asks for {}x{}",
                self.workload.n_out, self.workload.n_in, asked.workload.n_out, asked.workload.n_in
            ));
        }
        if self.thread_limit != asked.thread_limit {
            return Err(format!(
                "it tried at most {} threads, this run may try {}",
                self.thread_limit, asked.thread_limit
            ));
        }
        if partial {
            let cut = self.budget_seconds.unwrap_or(0.0);
            match asked.budget_seconds {
                None => {
                    return Err(format!(
                        "its search was cut short by a {cut} s budget and this run has none"
                    ));
                }
                Some(budget) if budget > cut * (1.0 + 1e-9) => {
                    return Err(format!(
                        "its search was cut short by a {cut} s budget and this run has {budget} s"
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

impl RuntimeProfile {
    /// A profile that was not measured: `threads` and `policy` as given for `request` and
    /// `kernel`, no scores.
    pub fn unmeasured(
        hw: &HardwareInfo,
        request: TuningRequest,
        kernel: Kernel,
        threads: usize,
        policy: SchedulePolicy,
    ) -> Self {
        RuntimeProfile {
            schema_version: SCHEMA_VERSION,
            hardware_id: hw.hardware_id(),
            threads,
            schedule_policy: policy,
            schedule_policy_id: policy.id(),
            cores: CoreSet::Any,
            pinned_cpus: Vec::new(),
            pseudo_tokens_per_sec: None,
            gbps: None,
            partial: false,
            request,
            weight_matrices: None,
            working_set_bytes: None,
            measurements: Vec::new(),
            hardware: hw.clone(),
            crate_version: env!("CARGO_PKG_VERSION").to_string(),
            kernel: kernel_signature(kernel),
            tuned_at: None,
            tuning_seconds: None,
        }
    }

    /// The pool builder for this profile: its thread count, its pinning and its policy (the
    /// pool's default, which [`ThreadPool::run`] and `matmul_kernel::gemv_on` use).
    pub fn pool_builder(&self) -> ThreadPoolBuilder {
        let pinning = if self.pinned_cpus.is_empty() {
            Pinning::None
        } else {
            Pinning::Cpus(self.pinned_cpus.clone())
        };
        ThreadPoolBuilder::default()
            .n_threads(self.threads)
            .pinning(pinning)
            .policy(self.schedule_policy)
    }

    /// Builds the ready pool the runtime runs on, as this profile says: its thread count,
    /// its policy as the pool's default, worker `i ≥ 1` on `pinned_cpus[i]` when the profile
    /// is pinned, and the calling thread, which is worker 0 when it calls the pool, pinned
    /// to `pinned_cpus[0]`. Call it on the thread that will call the pool (or call
    /// [`RuntimeProfile::pin_calling_thread`] on that thread). The pin is the thread's
    /// affinity for good: threads it spawns afterwards inherit it, so spawn other thread
    /// pools (an async runtime, say) before, or from another thread.
    ///
    /// The kernels that run on the pool (`matmul_kernel::gemv_on`, …) are the process's
    /// selected ones; a profile measured with another kernel is an error here, not a silent
    /// mismatch.
    pub fn build_pool(&self) -> Result<ThreadPool, crate::TunerError> {
        let running = kernel_signature(matmul_kernel::selected());
        if self.kernel != running {
            return Err(crate::TunerError::Kernel(format!(
                "the profile was measured with kernel {:?} but this process runs {running:?} \
                 (SIPLLM_KERNEL decides it): tune with the options' kernel left to the \
                 environment (AutoTunerOptions::with_env)",
                self.kernel
            )));
        }
        let pool = self
            .pool_builder()
            .build()
            .map_err(|e| crate::TunerError::Pool(e.to_string()))?;
        self.pin_calling_thread()?;
        Ok(pool)
    }

    /// Pins the calling thread (the pool's worker 0) to `pinned_cpus[0]`, as it ran when the
    /// profile was measured; does nothing for an unpinned profile. [`Self::build_pool`]
    /// does it for the thread that builds the pool.
    pub fn pin_calling_thread(&self) -> Result<(), crate::TunerError> {
        match self.pinned_cpus.first() {
            Some(&cpu) => crate::affinity::pin_caller_permanently(cpu),
            None => Ok(()),
        }
    }
}

/// Formats `t` as RFC 3339 UTC with whole seconds, e.g. `2026-11-29T16:33:31Z`.
pub fn utc_timestamp(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day) (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(utc_timestamp(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_970_011);
        assert_eq!(utc_timestamp(t), "2026-11-29T16:33:31Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(utc_timestamp(leap), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn pseudo_tokens_follow_the_formula() {
        let w = Workload::default();
        let per_token = LLAMA3_8B_PARAMS_READ_PER_TOKEN / (4096.0 * 4096.0);
        let tps = pseudo_tokens_per_sec(per_token, w);
        assert!((tps - 1.0).abs() < 1e-12, "{tps}");
    }

    /// The top-level keys the cache table of `docs/auto-tuner.md` documents: every
    /// backticked name in the first column of its rows.
    fn documented_keys() -> std::collections::BTreeSet<String> {
        let doc = include_str!("../../../docs/auto-tuner.md");
        let table = doc
            .split("| key | meaning |")
            .nth(1)
            .expect("docs/auto-tuner.md has the cache table");
        table
            .lines()
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .flat_map(|row| {
                let first = row.split('|').nth(1).unwrap_or("");
                first
                    .split('`')
                    .skip(1)
                    .step_by(2)
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn the_documented_keys_are_exactly_those_of_a_measured_profile() {
        let hw = HardwareInfo {
            arch: "x86_64".into(),
            cpu_model: "Test CPU".into(),
            logical_cores: 2,
            effective_cpus: 2,
            ..HardwareInfo::default()
        };
        let mut request = crate::AutoTunerOptions::default().request(&hw);
        request.budget_seconds = Some(1.0);
        let mut p =
            RuntimeProfile::unmeasured(&hw, request, Kernel::best(), 2, SchedulePolicy::Guided);
        // Every optional field set, as in a measured profile.
        p.pseudo_tokens_per_sec = Some(1.0);
        p.gbps = Some(2.0);
        p.weight_matrices = Some(2);
        p.working_set_bytes = Some(1 << 20);
        p.tuned_at = Some(utc_timestamp(SystemTime::now()));
        p.tuning_seconds = Some(1.5);
        let v = serde_json::to_value(&p).unwrap();
        let keys: std::collections::BTreeSet<String> =
            v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, documented_keys(), "docs/auto-tuner.md's cache table");
        assert_eq!(v["schedule_policy"], "guided");
        assert_eq!(v["schedule_policy_id"], 4);
        let back: RuntimeProfile = serde_json::from_value(v).unwrap();
        assert_eq!(back, p);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_built_pool_carries_the_policy_and_pins_its_caller() {
        use nix::sched::{CpuSet, sched_getaffinity};
        use nix::unistd::Pid;
        let allowed = sched_getaffinity(Pid::from_raw(0)).unwrap();
        let cpu = (0..CpuSet::count())
            .find(|&c| allowed.is_set(c).unwrap_or(false))
            .unwrap();
        let hw = HardwareInfo {
            logical_cores: cpu + 1,
            effective_cpus: 1,
            ..HardwareInfo::default()
        };
        let request = crate::AutoTunerOptions::default().request(&hw);
        let mut p = RuntimeProfile::unmeasured(
            &hw,
            request,
            matmul_kernel::selected(),
            1,
            SchedulePolicy::WorkStealing,
        );
        p.cores = CoreSet::Performance;
        p.pinned_cpus = vec![cpu];
        // A thread of its own, whose pinning dies with it.
        std::thread::spawn(move || {
            let pool = p.build_pool().unwrap();
            assert_eq!(pool.policy(), SchedulePolicy::WorkStealing);
            let now = sched_getaffinity(Pid::from_raw(0)).unwrap();
            let pinned: Vec<usize> = (0..CpuSet::count())
                .filter(|&c| now.is_set(c).unwrap_or(false))
                .collect();
            assert_eq!(pinned, [cpu], "the caller is pinned as the profile says");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_pool_is_never_built_for_a_kernel_that_does_not_run() {
        let hw = HardwareInfo {
            logical_cores: 2,
            effective_cpus: 2,
            ..HardwareInfo::default()
        };
        let request = crate::AutoTunerOptions::default().request(&hw);
        let running = matmul_kernel::selected();
        let p = RuntimeProfile::unmeasured(&hw, request, running, 1, SchedulePolicy::Static);
        assert!(p.build_pool().is_ok());
        let other = matmul_kernel::Isa::ALL
            .into_iter()
            .filter_map(|isa| isa.token().ok())
            .find(|k| k.isa() != running.isa());
        if let Some(other) = other {
            let p = RuntimeProfile::unmeasured(&hw, request, other, 1, SchedulePolicy::Static);
            let err = p.build_pool().unwrap_err().to_string();
            assert!(err.contains("measured with kernel"), "{err}");
        }
    }
}
