//! The runtime profile: what the tuner chose, how it measured, and on which machine. This is
//! the JSON document stored in `$SIPLLM_HOME/runtime/<hardware_id>.json`.

use crate::options::Workload;
use device_profile::HardwareInfo;
use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};
use threadpool::{Pinning, SchedulePolicy, ThreadPool, ThreadPoolBuilder};

/// The version of the profile document; a cached profile of another version is re-tuned.
pub const SCHEMA_VERSION: u32 = 1;

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
pub fn kernel_signature() -> String {
    format!(
        "{} matmul-kernel r{}",
        matmul_kernel::selected(),
        matmul_kernel::KERNEL_REVISION
    )
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
/// `threads` and `schedule_policy` are what the runtime uses; the rest records how they were
/// found. For profiles that were not measured (defaults, overrides) the scores are 0 and
/// `measurements` is empty.
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
    /// Median pseudo tokens per second of the chosen configuration.
    pub pseudo_tokens_per_sec: f64,
    /// Median GB/s of the chosen configuration.
    pub gbps: f64,
    /// True when the search stopped early (time budget) with the best found so far.
    #[serde(default)]
    pub partial: bool,
    /// The benchmark's matrix shape.
    pub workload: Workload,
    /// How many distinct weight matrices the benchmark rotated through.
    #[serde(default)]
    pub weight_matrices: usize,
    /// Every configuration measured, in the order measured (last figures win).
    pub measurements: Vec<Measurement>,
    /// The machine as detected when the profile was tuned.
    pub hardware: HardwareInfo,
    /// Version of the tuner that wrote the profile.
    pub crate_version: String,
    /// [`kernel_signature`] at tuning time.
    pub kernel: String,
    /// When the tuning finished, RFC 3339 UTC.
    pub tuned_at: String,
    /// Wall time of the whole search, in seconds.
    pub tuning_seconds: f64,
}

impl RuntimeProfile {
    /// A profile that was not measured: `threads` and `policy` as given, no scores.
    pub fn unmeasured(hw: &HardwareInfo, threads: usize, policy: SchedulePolicy) -> Self {
        RuntimeProfile {
            schema_version: SCHEMA_VERSION,
            hardware_id: hw.hardware_id(),
            threads,
            schedule_policy: policy,
            schedule_policy_id: policy.id(),
            cores: CoreSet::Any,
            pinned_cpus: Vec::new(),
            pseudo_tokens_per_sec: 0.0,
            gbps: 0.0,
            partial: false,
            workload: Workload::default(),
            weight_matrices: 0,
            measurements: Vec::new(),
            hardware: hw.clone(),
            crate_version: env!("CARGO_PKG_VERSION").to_string(),
            kernel: kernel_signature(),
            tuned_at: utc_timestamp(SystemTime::now()),
            tuning_seconds: 0.0,
        }
    }

    /// The pool builder for this profile: its thread count and its pinning.
    pub fn pool_builder(&self) -> ThreadPoolBuilder {
        let pinning = if self.pinned_cpus.is_empty() {
            Pinning::None
        } else {
            Pinning::Cpus(self.pinned_cpus.clone())
        };
        ThreadPoolBuilder::default()
            .n_threads(self.threads)
            .pinning(pinning)
    }

    /// Builds the ready pool the runtime runs on, as this profile says: worker `i ≥ 1` on
    /// `pinned_cpus[i]` when the profile is pinned. Worker 0 is the thread that calls the
    /// pool; [`RuntimeProfile::pin_calling_thread`] puts it on `pinned_cpus[0]`.
    pub fn build_pool(&self) -> Result<ThreadPool, crate::TunerError> {
        self.pool_builder()
            .build()
            .map_err(|e| crate::TunerError::Pool(e.to_string()))
    }

    /// Pins the calling thread (the pool's worker 0) to `pinned_cpus[0]`, as it ran when the
    /// profile was measured; does nothing for an unpinned profile.
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

    #[test]
    fn profile_json_has_the_documented_keys() {
        let hw = HardwareInfo {
            arch: "x86_64".into(),
            cpu_model: "Test CPU".into(),
            logical_cores: 2,
            effective_cpus: 2,
            ..HardwareInfo::default()
        };
        let p = RuntimeProfile::unmeasured(&hw, 2, SchedulePolicy::Guided);
        let v = serde_json::to_value(&p).unwrap();
        for key in [
            "schema_version",
            "hardware_id",
            "threads",
            "schedule_policy",
            "schedule_policy_id",
            "pseudo_tokens_per_sec",
            "gbps",
            "measurements",
            "hardware",
            "crate_version",
            "kernel",
            "tuned_at",
            "tuning_seconds",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        assert_eq!(v["schedule_policy"], "guided");
        assert_eq!(v["schedule_policy_id"], 4);
        let back: RuntimeProfile = serde_json::from_value(v).unwrap();
        assert_eq!(back, p);
    }
}
