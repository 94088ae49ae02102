//! The runtime profile: what the tuner chose for decode and for prefill, how it measured,
//! and on which machine. This is the JSON document stored in
//! `$SIPLLM_HOME/runtime/<hardware_id>.json`.

use crate::candidates::CoreSet;
use crate::environment::Environment;
use crate::phase::{Phase, Step};
use crate::rigor::Rigor;
use crate::runtime_record::{LlamaKnobs, RuntimeRecord};
use device_profile::HardwareInfo;
use matmul_kernel::Kernel;
use model_workload::Workload;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};
use threadpool::{Pinning, SchedulePolicy, ThreadPool, ThreadPoolBuilder};

/// The version of the profile document; a cached profile of another version is re-tuned.
/// Version 3: the model workload, separate decode and prefill settings, the rigor and the
/// tuning environment. Version 4: each projection of the workload has the format of every
/// layer (`formats`), as the model's file stores them, instead of one `format`.
pub const SCHEMA_VERSION: u32 = 4;

/// The kernel signature stored in a profile: the kernel path that runs (`avx512`, `avx2`,
/// `portable`) and [`matmul_kernel::KERNEL_REVISION`]. A profile measured with another
/// signature is re-tuned.
pub fn kernel_signature(kernel: Kernel) -> String {
    format!("{kernel} matmul-kernel r{}", matmul_kernel::KERNEL_REVISION)
}

/// One configuration the tuner measured, with the spread of its repetitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// The step of the search that measured it.
    pub step: Step,
    /// Threads, the caller included.
    pub threads: usize,
    /// The schedule policy.
    pub schedule_policy: SchedulePolicy,
    /// Where the workers ran.
    #[serde(default)]
    pub cores: CoreSet,
    /// Median tokens per second of the workload in this phase.
    pub tokens_per_sec: f64,
    /// Slowest repetition, tokens per second.
    pub tokens_per_sec_min: f64,
    /// Fastest repetition, tokens per second.
    pub tokens_per_sec_max: f64,
    /// Median weight bytes read per second, in GB/s (10⁹ bytes); for prefill, the bytes of
    /// the weights once per batch.
    pub gbps: f64,
    /// Timed repetitions behind the figures.
    pub repetitions: usize,
    /// llama.cpp's knobs of the run (repacking, polling), for a profile measured on
    /// llama.cpp; absent for our kernels, which have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knobs: Option<LlamaKnobs>,
}

/// The setting of one phase: what the runtime runs it with, and what the search measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseProfile {
    /// Threads to run with, the caller included.
    pub threads: usize,
    /// The schedule policy, by name.
    pub schedule_policy: SchedulePolicy,
    /// The schedule policy's stable id (0–6).
    pub schedule_policy_id: u8,
    /// Where the workers run.
    #[serde(default)]
    pub cores: CoreSet,
    /// The CPU ids the workers are pinned to, one per worker (worker 0, the calling thread,
    /// first); empty when unpinned.
    #[serde(default)]
    pub pinned_cpus: Vec<usize>,
    /// Median tokens per second of the chosen configuration, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_sec: Option<f64>,
    /// Median GB/s of weights of the chosen configuration, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gbps: Option<f64>,
    /// Every configuration measured for this phase, in the order measured (last figures
    /// win).
    #[serde(default)]
    pub measurements: Vec<Measurement>,
}

impl PhaseProfile {
    /// An unmeasured, unpinned setting.
    pub fn unmeasured(threads: usize, policy: SchedulePolicy) -> Self {
        PhaseProfile {
            threads,
            schedule_policy: policy,
            schedule_policy_id: policy.id(),
            cores: CoreSet::Any,
            pinned_cpus: Vec::new(),
            tokens_per_sec: None,
            gbps: None,
            measurements: Vec::new(),
        }
    }

    /// The pool builder for this setting: its thread count, its pinning and its policy (the
    /// pool's default).
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
}

/// The tuned answer handed to the runtime, and the cache document that stores it.
///
/// `decode` and `prefill` hold each phase's setting. The JSON document also has top-level
/// `threads`, `schedule_policy`, `schedule_policy_id`, `cores` and `pinned_cpus`, for a
/// runtime that sizes one pool: they are written from `decode` when the profile is
/// serialised, never stored twice ([`RuntimeProfile::threads`] and the other accessors
/// read `decode`); a document whose top-level setting disagrees with its `decode` is
/// rejected by the cache's validation. The rest records how they were found and what
/// limited the search. A profile that was not measured (defaults, overrides, an estimate)
/// has no scores, no measurements and no tuning time: those fields are `None` and absent
/// from its JSON.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RuntimeProfile {
    /// [`SCHEMA_VERSION`] of the document.
    pub schema_version: u32,
    /// The machine's `hardware_id` (the cache file's name).
    pub hardware_id: String,
    /// The decode setting: one token at a time.
    pub decode: PhaseProfile,
    /// The prefill setting: the prompt, `request.batch` tokens at a time.
    pub prefill: PhaseProfile,
    /// How hard the search looked.
    pub rigor: Rigor,
    /// True when the search stopped early (time budget) with the best found so far.
    #[serde(default)]
    pub partial: bool,
    /// What the search was asked and limited by; a cached profile serves only the requests
    /// it answers (see [`TuningRequest::answers`]).
    pub request: TuningRequest,
    /// Layer copies the decode benchmark rotated through, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer_copies: Option<usize>,
    /// Bytes of weights the decode benchmark rotated through, when measured. Below four
    /// times the L3 the figures are cache bandwidth, not memory bandwidth (tiny workloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_set_bytes: Option<u64>,
    /// The load and governor when the tune started, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Environment>,
    /// The machine as detected when the profile was made.
    pub hardware: HardwareInfo,
    /// Version of the tuner that wrote the profile.
    pub crate_version: String,
    /// [`kernel_signature`] at tuning time.
    pub kernel: String,
    /// The GEMV body each weight format of the workload runs on that kernel (ggml's format
    /// name → [`matmul_kernel::GemvBody::name`], e.g. `"q6_K": "vnni-wide"`): which code the
    /// figures measured. Empty in profiles written before it was recorded.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gemv_bodies: BTreeMap<String, String>,
    /// The GEMM body each weight format of the workload runs on that kernel (the prefill's
    /// several tokens at once; [`matmul_kernel::GemmBody::name`], e.g. `"q6_K": "vnni-tile"`).
    /// Empty in profiles written before it was recorded.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gemm_bodies: BTreeMap<String, String>,
    /// When the tuning finished, RFC 3339 UTC, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuned_at: Option<String>,
    /// Wall time of the whole tune (preparation and search), in seconds, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuning_seconds: Option<f64>,
    /// The runtime measured instead of our kernels (llama.cpp through `llama-bench`), its
    /// build, model file and own knobs; absent from a profile of our kernels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeRecord>,
}

impl Serialize for RuntimeProfile {
    /// Writes the document: the fields in order, with the top-level decode setting
    /// (`threads`, `schedule_policy`, `schedule_policy_id`, `cores`, `pinned_cpus`) taken from
    /// `decode`.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        /// The document as written: every field of the profile by reference, and the
        /// decode setting repeated at the top.
        #[derive(Serialize)]
        struct Document<'a> {
            schema_version: u32,
            hardware_id: &'a str,
            threads: usize,
            schedule_policy: SchedulePolicy,
            schedule_policy_id: u8,
            cores: CoreSet,
            pinned_cpus: &'a [usize],
            decode: &'a PhaseProfile,
            prefill: &'a PhaseProfile,
            rigor: Rigor,
            partial: bool,
            request: &'a TuningRequest,
            #[serde(skip_serializing_if = "Option::is_none")]
            layer_copies: Option<usize>,
            #[serde(skip_serializing_if = "Option::is_none")]
            working_set_bytes: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            environment: Option<&'a Environment>,
            hardware: &'a HardwareInfo,
            crate_version: &'a str,
            kernel: &'a str,
            #[serde(skip_serializing_if = "BTreeMap::is_empty")]
            gemv_bodies: &'a BTreeMap<String, String>,
            #[serde(skip_serializing_if = "BTreeMap::is_empty")]
            gemm_bodies: &'a BTreeMap<String, String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            tuned_at: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            tuning_seconds: Option<f64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            runtime: Option<&'a RuntimeRecord>,
        }
        // Destructured, so that a field added to the profile cannot be left out here.
        let RuntimeProfile {
            schema_version,
            hardware_id,
            decode,
            prefill,
            rigor,
            partial,
            request,
            layer_copies,
            working_set_bytes,
            environment,
            hardware,
            crate_version,
            kernel,
            gemv_bodies,
            gemm_bodies,
            tuned_at,
            tuning_seconds,
            runtime,
        } = self;
        Document {
            schema_version: *schema_version,
            hardware_id,
            threads: decode.threads,
            schedule_policy: decode.schedule_policy,
            schedule_policy_id: decode.schedule_policy_id,
            cores: decode.cores,
            pinned_cpus: &decode.pinned_cpus,
            decode,
            prefill,
            rigor: *rigor,
            partial: *partial,
            request,
            layer_copies: *layer_copies,
            working_set_bytes: *working_set_bytes,
            environment: environment.as_ref(),
            hardware,
            crate_version,
            kernel,
            gemv_bodies,
            gemm_bodies,
            tuned_at: tuned_at.as_deref(),
            tuning_seconds: *tuning_seconds,
            runtime: runtime.as_ref(),
        }
        .serialize(serializer)
    }
}

/// What a tuning was asked for and limited by: the workload and batch, the largest thread
/// count it could try, its time budget and its rigor. The kernel is recorded in
/// [`RuntimeProfile::kernel`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuningRequest {
    /// The model workload measured.
    pub workload: Workload,
    /// Tokens per prefill step (m of the prefill GEMM).
    pub batch: usize,
    /// The largest thread count the search could try: the CPUs this process may use,
    /// capped by `--thread-cap`.
    pub thread_limit: usize,
    /// The time budget, in seconds, if one was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_seconds: Option<f64>,
    /// The rigor asked for.
    pub rigor: Rigor,
}

impl TuningRequest {
    /// Whether a profile tuned for `self`, `partial` or not, answers `asked`: the same
    /// workload (shapes, formats, layers), batch and thread limit, a rigor at least the one
    /// asked, and, for a partial profile, a budget no larger than the one that cut it short
    /// (a run with more time, or none, would search further).
    pub fn answers(&self, partial: bool, asked: &TuningRequest) -> Result<(), String> {
        if self.workload.key() != asked.workload.key() {
            return Err(format!(
                "it was measured on workload {} ({}), this run asks for {} ({})",
                self.workload.name,
                self.workload.key(),
                asked.workload.name,
                asked.workload.key()
            ));
        }
        if self.batch != asked.batch {
            return Err(format!(
                "it measured prefill at a batch of {}, this run asks for {}",
                self.batch, asked.batch
            ));
        }
        if self.thread_limit != asked.thread_limit {
            return Err(format!(
                "it tried at most {} threads, this run may try {}",
                self.thread_limit, asked.thread_limit
            ));
        }
        if self.rigor < asked.rigor {
            return Err(format!(
                "it was tuned at rigor {}, this run asks for {}",
                self.rigor, asked.rigor
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

/// `body(format)` for each format of `workload`, by ggml's format name: the GEMV or the GEMM
/// body each one runs.
fn bodies(
    workload: &Workload,
    body: impl Fn(matmul_kernel::WeightFormat) -> &'static str,
) -> BTreeMap<String, String> {
    workload
        .formats()
        .into_iter()
        .map(|f| (f.name().to_string(), body(f).to_string()))
        .collect()
}

impl RuntimeProfile {
    /// A profile that was not measured: `threads` and `policy` as given for both phases,
    /// for `request` and `kernel`, no scores, rigor [`Rigor::Estimate`].
    pub fn unmeasured(
        hw: &HardwareInfo,
        request: TuningRequest,
        kernel: Kernel,
        threads: usize,
        policy: SchedulePolicy,
    ) -> Self {
        let gemv = bodies(&request.workload, |f| kernel.gemv_body(f).name());
        let gemm = bodies(&request.workload, |f| kernel.gemm_body(f).name());
        RuntimeProfile {
            schema_version: SCHEMA_VERSION,
            hardware_id: hw.hardware_id(),
            decode: PhaseProfile::unmeasured(threads, policy),
            prefill: PhaseProfile::unmeasured(threads, policy),
            rigor: Rigor::Estimate,
            partial: false,
            request,
            layer_copies: None,
            working_set_bytes: None,
            environment: None,
            hardware: hw.clone(),
            crate_version: env!("CARGO_PKG_VERSION").to_string(),
            kernel: kernel_signature(kernel),
            gemv_bodies: gemv,
            gemm_bodies: gemm,
            tuned_at: None,
            tuning_seconds: None,
            runtime: None,
        }
    }

    /// The setting of `phase`.
    pub fn phase(&self, phase: Phase) -> &PhaseProfile {
        match phase {
            Phase::Decode => &self.decode,
            Phase::Prefill => &self.prefill,
        }
    }

    /// Decode threads, the caller included (`decode.threads`, the document's top-level
    /// `threads`).
    pub fn threads(&self) -> usize {
        self.decode.threads
    }

    /// The decode schedule policy (`decode.schedule_policy`).
    pub fn schedule_policy(&self) -> SchedulePolicy {
        self.decode.schedule_policy
    }

    /// Where the decode workers run (`decode.cores`).
    pub fn cores(&self) -> CoreSet {
        self.decode.cores
    }

    /// The CPU ids the decode workers are pinned to (`decode.pinned_cpus`).
    pub fn pinned_cpus(&self) -> &[usize] {
        &self.decode.pinned_cpus
    }

    /// The decode pool's builder: its thread count, its pinning and its policy (the pool's
    /// default, which [`ThreadPool::run`] and `matmul_kernel::Exec::pool` use).
    pub fn pool_builder(&self) -> ThreadPoolBuilder {
        self.decode.pool_builder()
    }

    /// The prefill pool's builder (llama.cpp's `-tb` to decode's `-t`).
    ///
    /// A runtime builds two pools, one per phase, and calls each from the thread that
    /// drives the model; the phases never run at once, so the idle pool's workers sleep.
    /// One pool sized for the larger of the two thread counts, driving the smaller phase
    /// through `ThreadPool::parallel_for_with_threads`, also works when neither phase is
    /// pinned (a pinned phase needs its own CPUs, so its own pool).
    pub fn prefill_pool_builder(&self) -> ThreadPoolBuilder {
        self.prefill.pool_builder()
    }

    /// Builds the ready decode pool the runtime runs on, as this profile says: its thread
    /// count, its policy as the pool's default, worker `i ≥ 1` on `pinned_cpus[i]` when the
    /// profile is pinned, and the calling thread, which is worker 0 when it calls the pool,
    /// pinned to `pinned_cpus[0]`. Call it on the thread that will call the pool (or call
    /// [`RuntimeProfile::pin_calling_thread`] on that thread). The pin is the thread's
    /// affinity for good: threads it spawns afterwards inherit it, so spawn other thread
    /// pools (an async runtime, say) before, or from another thread.
    ///
    /// The kernels that run on the pool (`matmul_kernel::Exec::new().pool(&pool)`) are the
    /// process's selected ones; a profile measured with another kernel is an error here, not a
    /// silent mismatch.
    pub fn build_pool(&self) -> Result<ThreadPool, crate::error::TunerError> {
        let pool = self.build_phase_pool(Phase::Decode)?;
        self.pin_calling_thread()?;
        Ok(pool)
    }

    /// Builds the ready prefill pool (see [`Self::prefill_pool_builder`]). It does not pin
    /// the calling thread: the caller that drives a pinned prefill pins itself with
    /// [`Self::pin_calling_thread_for`]`(Phase::Prefill)`.
    pub fn build_prefill_pool(&self) -> Result<ThreadPool, crate::error::TunerError> {
        self.build_phase_pool(Phase::Prefill)
    }

    fn build_phase_pool(&self, phase: Phase) -> Result<ThreadPool, crate::error::TunerError> {
        let running = kernel_signature(matmul_kernel::selected());
        if self.kernel != running {
            return Err(crate::error::TunerError::Kernel(format!(
                "the profile was measured with kernel {:?} but this process runs {running:?} \
                 (SIPLLM_KERNEL decides it): tune with the options' kernel left to the \
                 environment (AutoTunerOptions::with_env)",
                self.kernel
            )));
        }
        self.phase(phase)
            .pool_builder()
            .build()
            .map_err(|e| crate::error::TunerError::Pool(e.to_string()))
    }

    /// Pins the calling thread (the decode pool's worker 0) to `pinned_cpus[0]`, as it ran
    /// when the profile was measured; does nothing for an unpinned profile.
    /// [`Self::build_pool`] does it for the thread that builds the pool.
    pub fn pin_calling_thread(&self) -> Result<(), crate::error::TunerError> {
        self.pin_calling_thread_for(Phase::Decode)
    }

    /// Pins the calling thread to the first CPU of `phase`'s setting; does nothing when
    /// that setting is unpinned.
    pub fn pin_calling_thread_for(&self, phase: Phase) -> Result<(), crate::error::TunerError> {
        match self.phase(phase).pinned_cpus.first() {
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
        let mut request = crate::AutoTunerOptions::default().question.request(&hw);
        request.budget_seconds = Some(1.0);
        let mut p =
            RuntimeProfile::unmeasured(&hw, request, Kernel::best(), 2, SchedulePolicy::Guided);
        // Every optional field set, as in a measured profile.
        let mut decode = p.decode.clone();
        decode.tokens_per_sec = Some(1.0);
        decode.gbps = Some(2.0);
        p.decode = decode;
        p.prefill.tokens_per_sec = Some(30.0);
        p.prefill.gbps = Some(1.0);
        p.rigor = Rigor::Measure;
        p.layer_copies = Some(2);
        p.working_set_bytes = Some(1 << 20);
        p.environment = Some(Environment::assess(
            Some(0.5),
            2,
            Some("performance".into()),
            false,
        ));
        p.tuned_at = Some(utc_timestamp(SystemTime::now()));
        p.tuning_seconds = Some(1.5);
        let v = serde_json::to_value(&p).unwrap();
        let keys: std::collections::BTreeSet<String> =
            v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, documented_keys(), "docs/auto-tuner.md's cache table");
        assert_eq!(v["schedule_policy"], "guided");
        assert_eq!(v["schedule_policy_id"], 4);
        // Decode and prefill each carry their setting and scores; the top level is decode.
        for phase in ["decode", "prefill"] {
            for key in [
                "threads",
                "schedule_policy",
                "tokens_per_sec",
                "measurements",
            ] {
                assert!(v[phase].get(key).is_some(), "{phase}.{key} missing in {v}");
            }
        }
        assert_eq!(v["threads"], v["decode"]["threads"]);
        // The default workload (llama3-8b in q4_K_M) names the body of each of its formats.
        let bodies = v["gemv_bodies"].as_object().unwrap();
        let mut formats: Vec<&str> = p
            .request
            .workload
            .formats()
            .iter()
            .map(|f| f.name())
            .collect();
        formats.sort_unstable();
        assert!(formats.contains(&"q6_K"), "{formats:?}");
        assert_eq!(
            bodies.keys().map(String::as_str).collect::<Vec<_>>(),
            formats
        );
        for (format, body) in bodies {
            let format: matmul_kernel::WeightFormat = format.parse().unwrap();
            assert_eq!(body, Kernel::best().gemv_body(format).name(), "{format}");
        }
        let gemm = v["gemm_bodies"].as_object().unwrap();
        assert_eq!(
            gemm.keys().collect::<Vec<_>>(),
            bodies.keys().collect::<Vec<_>>()
        );
        for (format, body) in gemm {
            let format: matmul_kernel::WeightFormat = format.parse().unwrap();
            assert_eq!(body, Kernel::best().gemm_body(format).name(), "{format}");
        }
        assert_eq!(v["rigor"], "measure");
        assert_eq!(v["schema_version"], 4);
        let back: RuntimeProfile = serde_json::from_value(v).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn the_top_level_setting_is_written_from_decode_and_read_back_once() {
        let hw = HardwareInfo {
            logical_cores: 4,
            effective_cpus: 4,
            ..HardwareInfo::default()
        };
        let request = crate::AutoTunerOptions::default().question.request(&hw);
        let mut p =
            RuntimeProfile::unmeasured(&hw, request, Kernel::best(), 2, SchedulePolicy::Static);
        // Only decode changes: the document's top level follows it.
        p.decode.threads = 3;
        p.decode.schedule_policy = SchedulePolicy::WorkStealing;
        p.decode.schedule_policy_id = SchedulePolicy::WorkStealing.id();
        p.decode.cores = CoreSet::Performance;
        p.decode.pinned_cpus = vec![0, 1, 2];
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["threads"], 3);
        assert_eq!(v["schedule_policy"], "workstealing");
        assert_eq!(v["schedule_policy_id"], SchedulePolicy::WorkStealing.id());
        assert_eq!(v["cores"], "performance");
        assert_eq!(v["pinned_cpus"], serde_json::json!([0, 1, 2]));
        assert_eq!(v["prefill"]["threads"], 2);
        // The keys come where the documents written before had them, after the hardware id,
        // and a document that has them reads back as the same profile.
        let text = serde_json::to_string(&p).unwrap();
        let top = format!(
            "\"hardware_id\":{:?},\"threads\":3,\"schedule_policy\":\"workstealing\",",
            p.hardware_id
        );
        assert!(text.contains(&top), "{text}");
        let back: RuntimeProfile = serde_json::from_value(v).unwrap();
        assert_eq!(back, p);
        assert_eq!(
            (back.threads(), back.schedule_policy(), back.cores()),
            (3, SchedulePolicy::WorkStealing, CoreSet::Performance)
        );
        assert_eq!(back.pinned_cpus(), [0, 1, 2]);
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
        let request = crate::AutoTunerOptions::default().question.request(&hw);
        let mut p = RuntimeProfile::unmeasured(
            &hw,
            request,
            matmul_kernel::selected(),
            1,
            SchedulePolicy::WorkStealing,
        );
        let mut decode = p.decode.clone();
        decode.cores = CoreSet::Performance;
        decode.pinned_cpus = vec![cpu];
        p.decode = decode;
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
        let request = crate::AutoTunerOptions::default().question.request(&hw);
        let running = matmul_kernel::selected();
        let p =
            RuntimeProfile::unmeasured(&hw, request.clone(), running, 1, SchedulePolicy::Static);
        assert!(p.build_pool().is_ok());
        assert!(p.build_prefill_pool().is_ok());
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
