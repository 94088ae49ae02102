//! The checks a cached or imported profile passes before it is used: the document, the
//! machine, the kernel, the request, the scores, the pinned CPUs and the shown text.

use crate::candidates::{CoreSet, candidate_cpus};
use crate::profile::{
    PhaseProfile, RuntimeProfile, SCHEMA_VERSION, TuningRequest, kernel_signature,
};
use crate::rigor::Rigor;
use device_profile::HardwareInfo;
use matmul_kernel::Kernel;
use model_workload::{shown, shown_message};
use std::fmt;

/// A cached profile larger than this is not read (a real one is a few tens of KiB).
pub const MAX_PROFILE_BYTES: u64 = 4 << 20;

/// Why a cached profile was not used. Each is reported in one warning line.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Rejection {
    /// Something other than a regular file is at the path.
    NotAFile,
    /// The file is larger than [`MAX_PROFILE_BYTES`].
    TooLarge(u64),
    /// The file could not be read.
    Unreadable(String),
    /// The file is empty.
    Empty,
    /// The text is not a profile document (truncated, not JSON, missing or mistyped keys).
    NotAProfile(String),
    /// Another schema version.
    SchemaVersion(u64),
    /// The profile names another machine.
    HardwareId(String),
    /// The thread count is 0 or above the CPUs this process may use.
    Threads {
        /// Threads in the profile.
        threads: usize,
        /// CPUs this process may use now (`effective_cpus`).
        available: usize,
    },
    /// The pinned CPU list is not one allowed CPU per worker without duplicates.
    PinnedCpus(String),
    /// The policy name is unknown or disagrees with its id.
    Policy(String),
    /// A score is NaN, infinite or negative.
    Score(String),
    /// The machine behind the same id has changed (core count, cgroup limit, SIMD, …).
    HardwareChanged(Vec<String>),
    /// The profile was measured with another kernel path or kernel version.
    KernelSignature {
        /// The signature in the profile.
        cached: String,
        /// The signature of the kernel this run uses.
        now: String,
    },
    /// The profile answers another request (workload, thread limit, or a budget that cut
    /// its search shorter than this run allows).
    Request(String),
    /// The profile was measured on llama.cpp and its record does not hold, or is of another
    /// llama.cpp build or model file than this run's.
    Runtime(String),
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::NotAFile => write!(f, "it is not a regular file"),
            Rejection::TooLarge(n) => write!(
                f,
                "it is {n} bytes, more than the {MAX_PROFILE_BYTES} a profile may have"
            ),
            Rejection::Unreadable(e) => write!(f, "it cannot be read: {e}"),
            Rejection::Empty => write!(f, "it is empty"),
            Rejection::NotAProfile(e) => {
                write!(f, "it is not a valid profile: {}", shown_message(e))
            }
            Rejection::SchemaVersion(v) => {
                write!(f, "schema version {v}, expected {SCHEMA_VERSION}")
            }
            Rejection::HardwareId(id) => {
                write!(f, "it belongs to another machine ({})", shown(id))
            }
            Rejection::Threads { threads, available } => write!(
                f,
                "threads = {threads}, outside 1..={available} (the CPUs this process may use)"
            ),
            Rejection::PinnedCpus(e) => write!(f, "bad pinned_cpus: {}", shown_message(e)),
            Rejection::Policy(e) => write!(f, "bad schedule policy: {}", shown_message(e)),
            Rejection::Score(e) => write!(f, "bad score: {}", shown_message(e)),
            Rejection::HardwareChanged(diffs) => {
                write!(f, "the machine has changed ({})", shown_differences(diffs))
            }
            Rejection::KernelSignature { cached, now } => {
                write!(
                    f,
                    "it was measured with kernel \"{}\", now \"{}\"",
                    shown(cached),
                    shown(now)
                )
            }
            Rejection::Request(e) | Rejection::Runtime(e) => {
                f.write_str(&model_workload::shown_within(e, 1000))
            }
        }
    }
}

/// The differences [`HardwareInfo::tuning_differences`] found, each made safe to print,
/// joined by ", ".
pub(crate) fn shown_differences(diffs: &[String]) -> String {
    diffs
        .iter()
        .map(|d| shown_message(d))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a profile must have been measured with to serve a run.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Measured<'a> {
    /// Our kernel (its [`kernel_signature`]).
    Kernel(Kernel),
    /// As the document records it: a profile with a llama.cpp record by that record (any
    /// build, any model file: listing, showing, exporting and importing run no llama-bench),
    /// any other by our kernel.
    AsRecorded(Kernel),
    /// llama.cpp on this model file, at this build commit (`None`: any build, when no binary
    /// was named to ask).
    LlamaCpp {
        /// The build commit asked for.
        commit: Option<&'a str>,
        /// The model file's identity.
        model: &'a llama_bench::ModelIdentity,
    },
}

/// [`validate_measured`] of a profile as it records how it was measured
/// ([`Measured::AsRecorded`]): what the stores' list, show, export and import check.
pub(crate) fn validate_as_recorded(
    text: &[u8],
    hw: &HardwareInfo,
    kernel: Kernel,
    request: Option<&TuningRequest>,
    check_hardware: bool,
) -> Result<RuntimeProfile, Rejection> {
    validate_measured(
        text,
        hw,
        &Measured::AsRecorded(kernel),
        request,
        check_hardware,
    )
}

/// Checks a profile document against this machine and this tuner, for a profile measured
/// as `measured` says.
///
/// With `check_hardware` false (an import with `--force`), the stored `HardwareInfo` is not
/// compared with this machine's; everything else is checked.
pub(crate) fn validate_measured(
    text: &[u8],
    hw: &HardwareInfo,
    measured: &Measured<'_>,
    request: Option<&TuningRequest>,
    check_hardware: bool,
) -> Result<RuntimeProfile, Rejection> {
    // The two fields that decide how to read the rest, without building the whole document
    // as a `Value` tree (that doubled the cached path's time): the typed parse follows.
    #[derive(serde::Deserialize)]
    struct Probe {
        schema_version: Option<serde_json::Value>,
        schedule_policy: Option<serde_json::Value>,
        threads: Option<serde_json::Value>,
        schedule_policy_id: Option<serde_json::Value>,
        cores: Option<serde_json::Value>,
        pinned_cpus: Option<serde_json::Value>,
    }
    impl Probe {
        /// Whether each top-level decode key present says what `decode` says.
        fn top_level_matches(&self, decode: &crate::profile::PhaseProfile) -> bool {
            fn same(value: &Option<serde_json::Value>, expected: impl serde::Serialize) -> bool {
                value
                    .as_ref()
                    .is_none_or(|v| serde_json::to_value(expected).is_ok_and(|e| *v == e))
            }
            same(&self.threads, decode.threads)
                && same(&self.schedule_policy, decode.schedule_policy)
                && same(&self.schedule_policy_id, decode.schedule_policy_id)
                && same(&self.cores, decode.cores)
                && same(&self.pinned_cpus, &decode.pinned_cpus)
        }
    }
    let probe: Probe =
        serde_json::from_slice(text).map_err(|e| Rejection::NotAProfile(e.to_string()))?;
    match probe.schema_version.as_ref().and_then(|v| v.as_u64()) {
        Some(v) if v == u64::from(SCHEMA_VERSION) => {}
        Some(v) => return Err(Rejection::SchemaVersion(v)),
        None => {
            return Err(Rejection::NotAProfile(
                "no numeric schema_version".to_string(),
            ));
        }
    }
    if let Some(name) = probe.schedule_policy.as_ref().and_then(|v| v.as_str())
        && let Err(e) = name.parse::<threadpool::SchedulePolicy>()
    {
        return Err(Rejection::Policy(e.to_string()));
    }
    let profile: RuntimeProfile =
        serde_json::from_slice(text).map_err(|e| Rejection::NotAProfile(e.to_string()))?;

    let id = hw.hardware_id();
    if profile.hardware_id != id {
        return Err(Rejection::HardwareId(profile.hardware_id));
    }
    // Under a CPU quota a tune measures up to every CPU the process may run on, and may pick
    // more threads than the quota: such a pick is this machine's, not a stale one.
    let available = candidate_cpus(hw);
    for phase in [&profile.decode, &profile.prefill] {
        if phase.threads == 0 || phase.threads > available {
            return Err(Rejection::Threads {
                threads: phase.threads,
                available,
            });
        }
        if phase.schedule_policy.id() != phase.schedule_policy_id {
            return Err(Rejection::Policy(format!(
                "{} has id {}, not {}",
                phase.schedule_policy,
                phase.schedule_policy.id(),
                phase.schedule_policy_id
            )));
        }
    }
    // The top-level setting is written from `decode`; one that disagrees was edited.
    if !probe.top_level_matches(&profile.decode) {
        return Err(Rejection::NotAProfile(
            "the top-level setting is not the decode setting".to_string(),
        ));
    }
    check_request(&profile).map_err(Rejection::Request)?;
    for (name, phase) in [("decode", &profile.decode), ("prefill", &profile.prefill)] {
        check_pinned_cpus(phase, hw).map_err(|e| Rejection::PinnedCpus(format!("{name}: {e}")))?;
    }
    check_text_fields(&profile)?;
    check_scores(&profile)?;
    let differences = hw.tuning_differences(&profile.hardware);
    if check_hardware && !differences.is_empty() {
        return Err(Rejection::HardwareChanged(differences));
    }
    // Knobs on a row are llama.cpp's: a profile of our kernels has none, and a level is
    // within llama.cpp's 0 to 100.
    let rows = || {
        profile
            .decode
            .measurements
            .iter()
            .chain(&profile.prefill.measurements)
    };
    if profile.runtime.is_none() && rows().any(|m| m.knobs.is_some()) {
        return Err(Rejection::Runtime(
            "a measurement names llama.cpp knobs, but the profile has no llama.cpp record"
                .to_string(),
        ));
    }
    if rows().any(|m| m.knobs.is_some_and(|k| k.poll.is_some_and(|p| p > 100))) {
        return Err(Rejection::Runtime(
            "a measurement's polling level is above 100".to_string(),
        ));
    }
    if let Some(record) = &profile.runtime {
        record.check().map_err(Rejection::Runtime)?;
        if profile.kernel != crate::runtime_key::signature(&record.build_commit) {
            return Err(Rejection::Runtime(format!(
                "its kernel {} is not its llama.cpp build {}",
                model_workload::shown(&profile.kernel),
                record.build_commit
            )));
        }
    }
    match (*measured, &profile.runtime) {
        // The record's own build and kernel signature were checked above.
        (Measured::AsRecorded(_), Some(_)) => {}
        (Measured::Kernel(kernel), _) | (Measured::AsRecorded(kernel), None) => {
            let now = kernel_signature(kernel);
            if profile.kernel != now {
                return Err(Rejection::KernelSignature {
                    cached: profile.kernel,
                    now,
                });
            }
        }
        (Measured::LlamaCpp { .. }, None) => {
            return Err(Rejection::Runtime(
                "it was measured on our kernels, not on llama.cpp".to_string(),
            ));
        }
        (Measured::LlamaCpp { commit, model }, Some(record)) => {
            if let Some(commit) = commit
                && record.build_commit != commit
            {
                return Err(Rejection::Runtime(format!(
                    "it was measured with llama.cpp build {}, this llama-bench is build {commit}",
                    record.build_commit
                )));
            }
            if record.model != *model {
                return Err(Rejection::Runtime(format!(
                    "it was measured on another model file ({} bytes, header hash {}), this one \
                     is {} bytes, header hash {}",
                    record.model.size, record.model.header_hash, model.size, model.header_hash
                )));
            }
        }
    }
    if let Some(request) = request {
        profile
            .request
            .answers(profile.partial, request)
            .map_err(Rejection::Request)?;
    }
    Ok(profile)
}

/// The most tokens per second a score read from a file may claim: 10¹², the largest batch
/// (4096) through a one-layer 1×1 workload in 4 ns, less than one call of the pool takes.
pub const MAX_TOKENS_PER_SEC: f64 = 1e12;

/// The most GB/s a score read from a file may claim: a petabyte per second, far above any
/// machine's memory or cache.
pub const MAX_GBPS: f64 = 1e6;

/// The longest tune a profile may record, in seconds (about 115 days).
pub const MAX_TUNING_SECONDS: f64 = 1e7;

/// The highest 1-minute load average a profile may record.
pub const MAX_LOAD_AVERAGE: f64 = 1e6;

/// Whether `x` is a figure a machine can measure: finite, at least `min`, at most `max`.
fn measurable(x: f64, min: f64, max: f64) -> bool {
    x.is_finite() && (min..=max).contains(&x)
}

/// A cached profile's scores: present, positive and at most what a machine can measure
/// ([`MAX_TOKENS_PER_SEC`], [`MAX_GBPS`]) for each phase's choice, non-negative and within
/// the same bounds for every measurement; a tuning time of at most [`MAX_TUNING_SECONDS`]
/// and a load average of at most [`MAX_LOAD_AVERAGE`]. No figure of a file reaches a sum,
/// a ratio or a chart's axis unbounded.
fn check_scores(profile: &RuntimeProfile) -> Result<(), Rejection> {
    match profile.tuning_seconds {
        None => return Err(Rejection::Score("tuning_seconds is missing".to_string())),
        Some(x) if !measurable(x, 0.0, MAX_TUNING_SECONDS) => {
            return Err(Rejection::Score(format!(
                "tuning_seconds = {x:e}, not between 0 and {MAX_TUNING_SECONDS:e}"
            )));
        }
        Some(_) => {}
    }
    if let Some(load) = profile.environment.as_ref().and_then(|e| e.load_average_1m)
        && !measurable(load, 0.0, MAX_LOAD_AVERAGE)
    {
        return Err(Rejection::Score(format!(
            "environment.load_average_1m = {load:e}, not between 0 and {MAX_LOAD_AVERAGE:e}"
        )));
    }
    for (name, phase) in [("decode", &profile.decode), ("prefill", &profile.prefill)] {
        for (field, score, max) in [
            ("tokens_per_sec", phase.tokens_per_sec, MAX_TOKENS_PER_SEC),
            ("gbps", phase.gbps, MAX_GBPS),
        ] {
            match score {
                None => return Err(Rejection::Score(format!("{name}.{field} is missing"))),
                Some(x) if !measurable(x, f64::MIN_POSITIVE, max) => {
                    let why = if x > 0.0 && x < f64::MIN_POSITIVE {
                        "too small to be a measured rate".to_string()
                    } else {
                        format!("not above 0 and at most {max:e}")
                    };
                    return Err(Rejection::Score(format!("{name}.{field} = {x:e}, {why}")));
                }
                Some(_) => {}
            }
        }
        for m in &phase.measurements {
            let figures = [
                ("tokens_per_sec", m.tokens_per_sec, MAX_TOKENS_PER_SEC),
                (
                    "tokens_per_sec_min",
                    m.tokens_per_sec_min,
                    MAX_TOKENS_PER_SEC,
                ),
                (
                    "tokens_per_sec_max",
                    m.tokens_per_sec_max,
                    MAX_TOKENS_PER_SEC,
                ),
                ("gbps", m.gbps, MAX_GBPS),
            ];
            if let Some((field, x, max)) = figures
                .into_iter()
                .find(|&(_, x, max)| !measurable(x, 0.0, max))
            {
                return Err(Rejection::Score(format!(
                    "{name} measurement of {} threads / {}: {field} = {x:e}, not between 0 and {max:e}",
                    m.threads, m.schedule_policy
                )));
            }
        }
    }
    Ok(())
}

/// A profile's request is one a run could make, and its answer lies within it.
fn check_request(profile: &RuntimeProfile) -> Result<(), String> {
    let r = &profile.request;
    if let Err(e) = r.workload.validate() {
        return Err(format!("its workload is not one the tuner measures ({e})"));
    }
    if !(1..=crate::options::MAX_BATCH).contains(&r.batch) {
        return Err(format!("its batch {} is out of range", r.batch));
    }
    if !(1..=crate::options::MAX_THREADS_OVERRIDE).contains(&r.thread_limit) {
        return Err(format!(
            "its thread limit {} is out of range",
            r.thread_limit
        ));
    }
    for (name, phase) in [("decode", &profile.decode), ("prefill", &profile.prefill)] {
        if phase.threads > r.thread_limit {
            return Err(format!(
                "{name} threads = {} exceeds its own thread limit {}",
                phase.threads, r.thread_limit
            ));
        }
    }
    if r.budget_seconds
        .is_some_and(|b| !measurable(b, f64::MIN_POSITIVE, crate::options::MAX_BUDGET_SECONDS))
    {
        return Err(format!(
            "its budget is not a number of seconds above 0 and at most {}",
            crate::options::MAX_BUDGET_SECONDS
        ));
    }
    if profile.rigor != r.rigor || profile.rigor == Rigor::Estimate {
        return Err(format!(
            "its rigor {} is not one a saved profile has (asked {})",
            profile.rigor, r.rigor
        ));
    }
    Ok(())
}

/// The free-text fields that are shown to users hold no control characters, and the
/// timestamp is RFC 3339 as the tuner writes it.
fn check_text_fields(profile: &RuntimeProfile) -> Result<(), Rejection> {
    let printable = |s: &str| !s.chars().any(char::is_control) && s.len() <= 128;
    let governor = profile
        .environment
        .as_ref()
        .and_then(|e| e.governor.as_deref());
    let fields = [
        ("crate_version", profile.crate_version.as_str()),
        ("kernel", profile.kernel.as_str()),
        ("workload name", profile.request.workload.name.as_str()),
        ("governor", governor.unwrap_or("")),
    ];
    let projections = profile
        .request
        .workload
        .projections
        .iter()
        .map(|p| ("projection name", p.name.as_str()));
    for (name, value) in fields.into_iter().chain(projections) {
        if !printable(value) {
            // The reason first: the message is cut to a line when shown, the value in it too.
            let why = if value.chars().any(char::is_control) {
                "holds control characters".to_string()
            } else {
                format!("is {} bytes long, over 128", value.len())
            };
            return Err(Rejection::NotAProfile(format!(
                "{name} is not plain text ({why}): \"{}\"",
                shown(value)
            )));
        }
    }
    if let Some(at) = &profile.tuned_at {
        let shape = at.len() == 20
            && at.char_indices().all(|(i, c)| match i {
                4 | 7 => c == '-',
                10 => c == 'T',
                13 | 16 => c == ':',
                19 => c == 'Z',
                _ => c.is_ascii_digit(),
            });
        if !shape {
            return Err(Rejection::NotAProfile(format!(
                "tuned_at {at:?} is not an RFC 3339 UTC time"
            )));
        }
    }
    Ok(())
}

/// A pinned setting pins one worker per thread to distinct CPUs this process may use; an
/// unpinned one lists none.
fn check_pinned_cpus(setting: &PhaseProfile, hw: &HardwareInfo) -> Result<(), String> {
    let cpus = &setting.pinned_cpus;
    match setting.cores {
        CoreSet::Any if cpus.is_empty() => return Ok(()),
        CoreSet::Any => return Err(format!("{cpus:?} for an unpinned (cores = any) profile")),
        _ if cpus.len() != setting.threads => {
            return Err(format!(
                "{cpus:?} for {} threads (one CPU per thread expected)",
                setting.threads
            ));
        }
        _ => {}
    }
    let mut seen = std::collections::BTreeSet::new();
    for &cpu in cpus {
        if !seen.insert(cpu) {
            return Err(format!("CPU {cpu} is listed twice in {cpus:?}"));
        }
        let allowed = if hw.allowed_cpus.is_empty() {
            cpu < hw.logical_cores.max(1)
        } else {
            hw.allowed_cpus.contains(&cpu)
        };
        if !allowed {
            return Err(format!("CPU {cpu} is not one this process may use"));
        }
    }
    Ok(())
}
