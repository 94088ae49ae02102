//! The regression run (`cargo xtask bench-regress`): ratios measured in one run, each
//! against a reference measured beside it, checked against the floors in `benches/floors.json`.
//!
//! Absolute times change with the machine, its load and its neighbours; a ratio of two
//! figures measured interleaved in the same process does not, or much less. So every check
//! is "ours ÷ a reference", oriented so that higher is better:
//!
//! | check | ratio | reference |
//! |---|---|---|
//! | `gemv_f32_vs_read` | read time ÷ GEMV time (GEMV GB/s ÷ read GB/s), W 4096² f32, 2 threads | `matmul_kernel::Exec::stream_read` of the same size |
//! | `gemv_<format>_vs_read` | the same for f16, bf16, q8_0, q4_0, q4_K and q6_K: W of 4096 inputs and the rows that make twice the L3 (64 MiB at least), 2 threads, GEMV and read strictly alternating (`regress/qgemv.rs`) | the read of as many bytes |
//! | `pool_vs_std_scope` | scope round trip ÷ pool round trip, 2 threads | `std::thread::scope` spawning the other thread |
//! | `gemm_m32_vs_faer` | faer time ÷ our time, m = 32, W 4096², 1 thread | `faer::linalg::matmul::matmul`, sequential |
//! | `gemm_<format>_m32_vs_candle` | candle time ÷ our time for f16, bf16, q8_0, q4_0, q4_K and q6_K, m = 32, W 4096², on candle's threads (1 under `bench-regress`; `regress/qgemm.rs`) | candle's `QMatMul` on the same bytes |
//! | `cached_tune_vs_detect` | detection time ÷ cached `tune_if_needed` time | `device_profile::get_hardware_info` |
//!
//! Each ratio is the median over interleaved rounds of the ratio within a round (the `perf`
//! report's `paired_ratio`), so a slow phase of the machine hits both sides alike. The GEMV
//! has one check per weight format `matmul-kernel` implements; a new format adds
//! `gemv_<format>_vs_read` to [`CHECKS`] and a floor (a test holds `CHECKS` to
//! `WeightFormat::ALL`); so does the GEMM, per format but f32 (`regress/qgemm.rs`).
//!
//! **The rule**: a check passes when its ratio ≥ `floor × (1 − margin)`. `floor` is the ratio
//! the code reaches on a quiet run, `margin` the share of it that noise may take away (see
//! `docs/benchmarking.md` for how both were set). [`check`] applies the rule; [`Floors`]
//! reads the file.

use crate::contenders::{self, CachedTune, ForkJoin, Matmul, Op, Peer, Pools};
use crate::matmul::{GEMM_M, GEMM_SHAPE, N, interleaved_rounds, paired_ratio, time, values};
use auto_tuner::median;
use matmul_kernel::WeightBuffer;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::hint::black_box;
use std::path::{Path, PathBuf};

mod qgemm;
mod qgemv;
mod run;

pub use run::{GEMM_THREADS, GEMV_ROUNDS, Measured, N_THREADS, RunLength};

/// The checks [`measure`] produces, in its order; `floors.json` has a floor for each.
pub const CHECKS: [&str; 16] = [
    "pool_vs_std_scope",
    "cached_tune_vs_detect",
    "gemv_f32_vs_read",
    "gemv_f16_vs_read",
    "gemv_bf16_vs_read",
    "gemv_q8_0_vs_read",
    "gemv_q4_0_vs_read",
    "gemv_q4_K_vs_read",
    "gemv_q6_K_vs_read",
    "gemm_m32_vs_faer",
    "gemm_f16_m32_vs_candle",
    "gemm_bf16_m32_vs_candle",
    "gemm_q8_0_m32_vs_candle",
    "gemm_q4_0_m32_vs_candle",
    "gemm_q4_K_m32_vs_candle",
    "gemm_q6_K_m32_vs_candle",
];

/// One floor of `floors.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct Floor {
    /// The ratio the code reaches on a quiet run.
    pub floor: f64,
    /// The share of `floor` noise may take away, in [0, 1).
    pub margin: f64,
    /// Why the floor has this value.
    pub reason: String,
}

impl Floor {
    /// The lowest ratio that passes: `floor × (1 − margin)`.
    pub fn limit(&self) -> f64 {
        self.floor * (1.0 - self.margin)
    }
}

/// The floors file: a floor per check, for one CPU vendor.
#[derive(Debug, Clone, PartialEq)]
pub struct Floors {
    /// The file they were read from.
    pub path: PathBuf,
    /// Each check's floor, by name: the vendor's own where the file has one, else the
    /// check's default.
    pub by_name: BTreeMap<String, Floor>,
}

/// The CPU vendors the floors file may hold floors of their own for (a check's `vendors`).
pub const VENDORS: [&str; 2] = ["amd", "intel"];

/// The floors file's name for this CPU's vendor: `intel` or `amd` from the CPUID vendor
/// string, `None` for any other CPU (whose checks take their default floors).
pub fn this_vendor() -> Option<&'static str> {
    vendor_of(&matmul_kernel::cpuid_vendor()?)
}

/// This CPU's family and model as the machine's detection reads them
/// (`device_profile::get_hardware_info`: `/proc/cpuinfo`'s `cpu family` and `model`; `None`
/// where it has none, as on ARM), which a vendor's floors may name in `models` (`"6/106"`:
/// family 6, model 106).
pub fn this_model() -> Option<(u32, u32)> {
    let hw = device_profile::get_hardware_info();
    Some((hw.cpu_family?, hw.cpu_model_number?))
}

/// The key of a family and model in a vendor's `models`: `"6/106"`.
pub fn model_key((family, model): (u32, u32)) -> String {
    format!("{family}/{model}")
}

/// The floors file's name for a CPUID vendor string.
pub fn vendor_of(cpuid_vendor: &[u8]) -> Option<&'static str> {
    match cpuid_vendor {
        b"GenuineIntel" => Some("intel"),
        b"AuthenticAMD" => Some("amd"),
        _ => None,
    }
}

/// Why the floors file cannot be used.
#[derive(Debug)]
#[non_exhaustive]
pub enum FloorsError {
    /// The file cannot be read (missing, unreadable).
    Read {
        /// The file.
        path: PathBuf,
        /// The reason.
        source: std::io::Error,
    },
    /// The file is not a valid floors document.
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the key at fault.
        message: String,
    },
}

impl fmt::Display for FloorsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FloorsError::Read { path, source } => {
                write!(
                    f,
                    "cannot read the floors file {}: {source}",
                    path.display()
                )
            }
            FloorsError::Malformed { path, message } => {
                write!(f, "malformed floors file {}: {message}", path.display())
            }
        }
    }
}

impl std::error::Error for FloorsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FloorsError::Read { source, .. } => Some(source),
            FloorsError::Malformed { .. } => None,
        }
    }
}

/// The largest floors file read (the committed one is about 40 KiB).
pub const MAX_FLOORS_BYTES: u64 = 1 << 20;

impl Floors {
    /// Reads and validates the floors file at `path`, with `vendor`'s floors where a check
    /// has them ([`this_vendor`] for this machine's), and the floors of that vendor's CPU
    /// `model` (family, model; [`this_model`]) where the vendor's floor names it.
    /// The file is read as every file of the workspace is: a FIFO or a device is refused
    /// without blocking, and a file past [`MAX_FLOORS_BYTES`] is refused by its size.
    pub fn load(
        path: &Path,
        vendor: Option<&str>,
        model: Option<(u32, u32)>,
    ) -> Result<Floors, FloorsError> {
        let read = |source| FloorsError::Read {
            path: path.to_path_buf(),
            source,
        };
        let bytes = regular_file::read(path, MAX_FLOORS_BYTES).map_err(|e| match e {
            regular_file::Error::Io { source, .. } => read(source),
            other => read(std::io::Error::other(other.to_string())),
        })?;
        let text = String::from_utf8(bytes).map_err(|e| FloorsError::Malformed {
            path: path.to_path_buf(),
            message: format!("not UTF-8: {e}"),
        })?;
        Floors::parse(&text, path, vendor, model)
    }

    /// Parses and validates a floors document; `path` names it in errors. The document is
    /// `{"about": "…", "floors": {"<check>": {"floor": f, "margin": m, "reason": "…"}}}`
    /// with `floor` > 0, 0 ≤ `margin` < 1 and a non-empty `reason`; a check may also hold
    /// `"vendors": {"intel": {"floor": …, "margin": …, "reason": …}}` (names from
    /// [`VENDORS`]), floors measured on that vendor's CPUs, which `vendor` takes instead of
    /// the check's default. A vendor's floor may hold `"models": {"6/106": {"floor": …,
    /// "margin": …, "reason": …}}`, floors measured on one family and model of that vendor
    /// (where it measures apart from the vendor's other CPUs), which `model` takes instead
    /// of the vendor's. No other keys. Every floor is validated, whichever is taken.
    pub fn parse(
        text: &str,
        path: &Path,
        vendor: Option<&str>,
        model: Option<(u32, u32)>,
    ) -> Result<Floors, FloorsError> {
        let malformed = |message: String| FloorsError::Malformed {
            path: path.to_path_buf(),
            message,
        };
        let doc: Value = model_workload::from_slice_unique_keys(text.as_bytes())
            .map_err(|e| malformed(format!("not JSON: {e}")))?;
        let top = doc
            .as_object()
            .ok_or_else(|| malformed("the document is not a JSON object".into()))?;
        if let Some(key) = top
            .keys()
            .find(|k| !["about", "floors"].contains(&k.as_str()))
        {
            return Err(malformed(format!("unknown top-level key {key:?}")));
        }
        let entries = top
            .get("floors")
            .and_then(Value::as_object)
            .ok_or_else(|| malformed("no \"floors\" object".into()))?;
        let mut by_name = BTreeMap::new();
        for (name, entry) in entries {
            let (floor, vendors) =
                parse_check(entry).map_err(|e| malformed(format!("floor {name:?}: {e}")))?;
            let floor = match vendor.and_then(|v| vendors.get(v)) {
                Some(of_vendor) => model
                    .and_then(|m| of_vendor.models.get(&model_key(m)))
                    .unwrap_or(&of_vendor.floor)
                    .clone(),
                None => floor,
            };
            by_name.insert(name.clone(), floor);
        }
        Ok(Floors {
            path: path.to_path_buf(),
            by_name,
        })
    }
}

/// A vendor's floor of one check, and the floors of that vendor's CPU models it names (by
/// [`model_key`]).
struct VendorFloor {
    floor: Floor,
    models: BTreeMap<String, Floor>,
}

/// One check's entry: its default floor and the floors of the vendors it names.
fn parse_check(entry: &Value) -> Result<(Floor, BTreeMap<String, VendorFloor>), String> {
    let default = parse_floor(entry, &["vendors"])?;
    let mut vendors = BTreeMap::new();
    if let Some(by_vendor) = entry.get("vendors") {
        let by_vendor = by_vendor
            .as_object()
            .ok_or("\"vendors\" is not a JSON object")?;
        for (vendor, floor) in by_vendor {
            if !VENDORS.contains(&vendor.as_str()) {
                return Err(format!(
                    "unknown vendor {vendor:?} (known: {})",
                    VENDORS.join(", ")
                ));
            }
            let floor = parse_vendor(floor).map_err(|e| format!("vendor {vendor:?}: {e}"))?;
            vendors.insert(vendor.clone(), floor);
        }
    }
    Ok((default, vendors))
}

/// A vendor's entry: its floor, and its `models`' floors, each keyed `"<family>/<model>"`
/// in decimal digits.
fn parse_vendor(entry: &Value) -> Result<VendorFloor, String> {
    let floor = parse_floor(entry, &["models"])?;
    let mut models = BTreeMap::new();
    if let Some(by_model) = entry.get("models") {
        let by_model = by_model
            .as_object()
            .ok_or("\"models\" is not a JSON object")?;
        for (key, floor) in by_model {
            let parsed = key
                .split_once('/')
                .and_then(|(f, m)| Some((digits(f)?, digits(m)?)));
            // The key as this file's reader writes it, so that a lookup finds it.
            if parsed.map(model_key).as_deref() != Some(key.as_str()) {
                return Err(format!(
                    "model {key:?} is not \"<family>/<model>\" in decimal, e.g. \"6/106\""
                ));
            }
            let floor = parse_floor(floor, &[]).map_err(|e| format!("model {key:?}: {e}"))?;
            models.insert(key.clone(), floor);
        }
    }
    Ok(VendorFloor { floor, models })
}

/// A number of decimal digits only (no sign, no leading zero but in "0"), as CPUID's family
/// and model are written.
fn digits(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// One `{"floor": f, "margin": m, "reason": "…"}` entry, which may also hold the keys `other`.
fn parse_floor(entry: &Value, other: &[&str]) -> Result<Floor, String> {
    let fields = entry.as_object().ok_or("not a JSON object")?;
    if let Some(key) = fields.keys().find(|k| {
        !["floor", "margin", "reason"].contains(&k.as_str()) && !other.contains(&k.as_str())
    }) {
        return Err(format!("unknown key {key:?}"));
    }
    let number = |key: &str| {
        fields
            .get(key)
            .ok_or_else(|| format!("no {key:?}"))?
            .as_f64()
            .ok_or_else(|| format!("{key:?} is not a number"))
    };
    let floor = number("floor")?;
    if !(floor.is_finite() && floor > 0.0) {
        return Err(format!("\"floor\" {floor} is not a positive ratio"));
    }
    let margin = number("margin")?;
    if !(0.0..1.0).contains(&margin) {
        return Err(format!(
            "\"margin\" {margin} is not a share in [0, 1) (0.25 means 25%)"
        ));
    }
    // A limit that rounds to 0 (a floor of 5e-324) would pass a ratio of 0: no check at all.
    let limit = floor * (1.0 - margin);
    if limit.is_nan() || limit <= f64::MIN_POSITIVE {
        return Err(format!(
            "\"floor\" {floor} with \"margin\" {margin} gives a limit of {limit}, which is no \
             limit at all"
        ));
    }
    let reason = fields
        .get("reason")
        .ok_or("no \"reason\"")?
        .as_str()
        .ok_or("\"reason\" is not a string")?
        .trim();
    if reason.is_empty() {
        return Err("\"reason\" is empty: say why the floor has this value".into());
    }
    Ok(Floor {
        floor,
        margin,
        reason: reason.to_string(),
    })
}

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The ratio is at or above its limit.
    Pass,
    /// The ratio is below `floor × (1 − margin)`, or not a number.
    Below,
    /// A ratio was measured that has no floor: the floors file is out of date.
    NoFloor,
    /// A floor names a check that was not measured: the floors file is out of date.
    NotMeasured,
}

impl Verdict {
    /// `ok`, `BELOW`, `NO FLOOR`, `NOT MEASURED`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "ok",
            Verdict::Below => "BELOW",
            Verdict::NoFloor => "NO FLOOR",
            Verdict::NotMeasured => "NOT MEASURED",
        }
    }
}

/// One line of the verdict table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The check.
    pub name: String,
    /// The ratio measured, if it was.
    pub ratio: Option<f64>,
    /// Its floor, if the file has one.
    pub floor: Option<Floor>,
    /// The medians behind the ratio.
    pub detail: String,
    /// The outcome.
    pub verdict: Verdict,
}

/// Applies the rule to every measured ratio, in the order measured, then lists the floors
/// nothing measured. A ratio that is not a number (NaN, infinite) is [`Verdict::Below`].
pub fn check(measured: &[Measured], floors: &Floors) -> Vec<Row> {
    let mut rows: Vec<Row> = measured
        .iter()
        .map(|m| {
            let floor = floors.by_name.get(&m.name).cloned();
            let verdict = match &floor {
                None => Verdict::NoFloor,
                Some(f) if m.ratio.is_finite() && m.ratio >= f.limit() => Verdict::Pass,
                Some(_) => Verdict::Below,
            };
            Row {
                name: m.name.clone(),
                ratio: Some(m.ratio),
                floor,
                detail: m.detail.clone(),
                verdict,
            }
        })
        .collect();
    for (name, floor) in &floors.by_name {
        if !measured.iter().any(|m| &m.name == name) {
            rows.push(Row {
                name: name.clone(),
                ratio: None,
                floor: Some(floor.clone()),
                detail: String::new(),
                verdict: Verdict::NotMeasured,
            });
        }
    }
    rows
}

/// Whether every row passed.
pub fn passed(rows: &[Row]) -> bool {
    rows.iter().all(|row| row.verdict == Verdict::Pass)
}

/// The verdict table: benchmark, ratio, floor, margin, limit, verdict, and the medians.
pub fn table(rows: &[Row]) -> Vec<String> {
    let mut lines = vec![format!(
        "{:<24} {:>7} {:>7} {:>7} {:>7}  {:<12} {}",
        "benchmark", "ratio", "floor", "margin", "limit", "verdict", "medians (this run)"
    )];
    for row in rows {
        let ratio = row.ratio.map_or("-".into(), |r| format!("{r:.2}"));
        let (floor, margin, limit) =
            row.floor
                .as_ref()
                .map_or(("-".into(), "-".into(), "-".into()), |f| {
                    (
                        format!("{:.2}", f.floor),
                        format!("{:.0}%", f.margin * 100.0),
                        format!("{:.2}", f.limit()),
                    )
                });
        lines.push(format!(
            "{:<24} {ratio:>7} {floor:>7} {margin:>7} {limit:>7}  {:<12} {}",
            row.name,
            row.verdict.name(),
            row.detail
        ));
    }
    lines
}

/// Measures every check of [`CHECKS`], one area after the other (each area's pools are gone
/// before the next starts).
pub fn measure(length: RunLength) -> Vec<Measured> {
    CHECKS
        .iter()
        .filter_map(|name| measure_one(name, length))
        .collect()
}

/// Measures the check `name`, if it is one of [`CHECKS`].
pub fn measure_one(name: &str, length: RunLength) -> Option<Measured> {
    match name {
        "pool_vs_std_scope" => Some(pool_vs_std_scope(length)),
        "cached_tune_vs_detect" => Some(cached_tune_vs_detect(length)),
        "gemv_f32_vs_read" => Some(gemv_f32_vs_read(length)),
        "gemm_m32_vs_faer" => Some(gemm_m32_vs_faer(length)),
        other => qgemv::format_of(other)
            .map(|format| qgemv::gemv_vs_read(format, length))
            .or_else(|| {
                qgemm::format_of(other).map(|format| qgemm::gemm_vs_candle(format, length))
            }),
    }
}

/// How many more times a check below its limit is measured before it fails: a breach must
/// hold in every run, so that one noisy moment of a shared machine (another process taking
/// a core while the pool spins) does not fail CI, while a real regression, which is there
/// in every run, still does.
pub const CONFIRMATIONS: usize = 2;

/// Re-measures, with `remeasure`, each check of `measured` that is below its floor's limit,
/// up to [`CONFIRMATIONS`] times, stopping at the first run that passes; the best ratio is
/// kept and its detail says how many runs it took.
pub fn confirm(
    measured: Vec<Measured>,
    floors: &Floors,
    mut remeasure: impl FnMut(&str) -> Option<Measured>,
) -> Vec<Measured> {
    measured
        .into_iter()
        .map(|first| {
            let Some(floor) = floors.by_name.get(&first.name) else {
                return first;
            };
            let passes = |m: &Measured| m.ratio.is_finite() && m.ratio >= floor.limit();
            let mut best = first;
            let mut runs = 1;
            while !passes(&best) && runs <= CONFIRMATIONS {
                let Some(again) = remeasure(&best.name) else {
                    break;
                };
                runs += 1;
                if again.ratio > best.ratio || !best.ratio.is_finite() {
                    best = again;
                }
            }
            if runs > 1 {
                best.detail = format!("{} (best of {runs} runs)", best.detail);
            }
            best
        })
        .collect()
}

/// Scope round trip ÷ pool round trip, paired by round.
fn pool_vs_std_scope(length: RunLength) -> Measured {
    let contenders = [ForkJoin::pool(N_THREADS), ForkJoin::std_scope(N_THREADS)];
    let samples = crate::dispatch::round_trip_samples(&contenders, length.rounds(30));
    Measured {
        name: "pool_vs_std_scope".into(),
        ratio: paired_ratio(&samples[0], &samples[1]),
        detail: format!(
            "pool {:.0} ns, std scope {:.0} ns",
            median(&samples[0]),
            median(&samples[1])
        ),
    }
}

/// Detection time ÷ cached `tune_if_needed` time, paired by round.
fn cached_tune_vs_detect(length: RunLength) -> Measured {
    let cached = CachedTune::prepare();
    let (mut detect_ns, mut cached_ns) = (Vec::new(), Vec::new());
    for _ in 0..length.rounds(30) {
        detect_ns.push(crate::dispatch::time_batch(1, 8, || {
            contenders::detect();
        }));
        cached_ns.push(crate::dispatch::time_batch(1, 8, || {
            cached.call();
        }));
    }
    Measured {
        name: "cached_tune_vs_detect".into(),
        ratio: paired_ratio(&cached_ns, &detect_ns),
        detail: format!(
            "detection {:.0} µs, cached tune {:.0} µs",
            median(&detect_ns) / 1e3,
            median(&cached_ns) / 1e3
        ),
    }
}

/// Read time ÷ GEMV time for the f32 weights, paired by round.
fn gemv_f32_vs_read(length: RunLength) -> Measured {
    let pools = Pools::new(N_THREADS);
    let w = WeightBuffer::from_slice(&values(1, N * N)).expect("weight buffer");
    let read_buf = WeightBuffer::from_slice(&values(2, N * N)).expect("read buffer");
    let x = values(4, N);
    let mut sums = vec![0.0f32; N];
    let mut read = || {
        let dt = time(|| contenders::stream_read(&pools, &read_buf, &mut sums));
        black_box(&sums);
        dt
    };
    let ours = Matmul::Ours(matmul_kernel::selected());
    let times = interleaved_rounds(
        Op::Gemv,
        &pools,
        (ours, &[]),
        (&w, &x, N),
        (2, length.rounds(GEMV_ROUNDS)),
        Some(&mut read),
    );
    let gbps = |t: &[f64]| (N * N * size_of::<f32>()) as f64 / median(t) / 1e9;
    Measured {
        name: "gemv_f32_vs_read".into(),
        ratio: paired_ratio(&times.ours, &times.reference),
        detail: format!(
            "gemv {:.1} GB/s, read {:.1} GB/s",
            gbps(&times.ours),
            gbps(&times.reference)
        ),
    }
}

/// faer's time ÷ ours for the m = 32 GEMM on [`GEMM_THREADS`], paired by round.
fn gemm_m32_vs_faer(length: RunLength) -> Measured {
    let pools = Pools::new(GEMM_THREADS);
    let w = WeightBuffer::from_slice(&values(1, N * N)).expect("weight buffer");
    let xm = values(5, GEMM_M * N);
    let ours = Matmul::Ours(matmul_kernel::selected());
    let times = interleaved_rounds(
        Op::Gemm(GEMM_SHAPE),
        &pools,
        (ours, &[Matmul::Peer(Peer::Faer)]),
        (&w, &xm, GEMM_M * N),
        (1, length.rounds(6)),
        None,
    );
    let gflops = |t: &[f64]| 2.0 * (GEMM_M * N * N) as f64 / median(t) / 1e9;
    Measured {
        name: "gemm_m32_vs_faer".into(),
        ratio: paired_ratio(&times.ours, &times.peers[0]),
        detail: format!(
            "ours {:.1} GFLOP/s, faer {:.1} GFLOP/s",
            gflops(&times.ours),
            gflops(&times.peers[0])
        ),
    }
}

#[cfg(test)]
mod tests;
