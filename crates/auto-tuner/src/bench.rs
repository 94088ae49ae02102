//! The measuring engine: the GEMV workload, one pool per configuration, and interleaved
//! timed rounds that yield each configuration's median and spread.

use crate::TunerError;
use crate::affinity::pin_caller;
use crate::options::{AutoTunerOptions, Workload};
use crate::profile::{CoreSet, Measurement, Phase, pseudo_tokens_per_sec};
use crate::progress::Reporter;
use crate::search::Measure;
use device_profile::HardwareInfo;
use matmul_kernel::{Kernel, WEIGHT_ALIGN, WeightBuffer};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::time::{Duration, Instant};
use threadpool::{Pinning, SchedulePolicy, ThreadPool, ThreadPoolBuilder};

/// The last-level cache assumed when detection found none.
const ASSUMED_L3_BYTES: u64 = 32 << 20;

/// The working set is at least this many times the last-level cache, so that every
/// projection streams its weights from DRAM as in real decode.
const L3_MULTIPLE: u64 = 4;

/// One configuration of the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Config {
    pub(crate) threads: usize,
    pub(crate) policy: SchedulePolicy,
    pub(crate) cores: CoreSet,
}

/// The timed repetitions of one configuration, as GB/s.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stats {
    gbps: Vec<f64>,
}

impl Stats {
    #[cfg(test)]
    pub(crate) fn from_samples(gbps: Vec<f64>) -> Self {
        Stats { gbps }
    }

    fn sorted(&self) -> Vec<f64> {
        let mut v = self.gbps.clone();
        v.sort_by(f64::total_cmp);
        v
    }

    pub(crate) fn len(&self) -> usize {
        self.gbps.len()
    }

    pub(crate) fn median(&self) -> f64 {
        median(&self.gbps)
    }

    /// Median absolute deviation divided by the median: the relative noise.
    pub(crate) fn relative_mad(&self) -> f64 {
        let m = self.median();
        if m <= 0.0 {
            return 0.0;
        }
        let dev: Vec<f64> = self.gbps.iter().map(|g| (g - m).abs()).collect();
        median(&dev) / m
    }

    fn min(&self) -> f64 {
        self.sorted().first().copied().unwrap_or(0.0)
    }

    fn max(&self) -> f64 {
        self.sorted().last().copied().unwrap_or(0.0)
    }
}

/// The median of `samples` (the mean of the two middle ones for an even count; 0 when
/// empty), NaNs ordered last. Every score of the tuner and of the benches is a median.
pub fn median(samples: &[f64]) -> f64 {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The most memory the benchmark's weights may take: `max_bytes`, a quarter of RAM and half
/// of the memory available now (`MemAvailable`), whichever is smallest among those known.
pub(crate) fn memory_bound(hw: &HardwareInfo, max_bytes: u64, available: Option<u64>) -> u64 {
    let mut cap = max_bytes;
    if hw.ram_bytes > 0 {
        cap = cap.min(hw.ram_bytes / 4);
    }
    if let Some(available) = available {
        cap = cap.min(available / 2);
    }
    cap
}

/// The most weight matrices the benchmark rotates through. A tiny workload (`1x1`) would
/// otherwise need millions of copies to exceed the L3; with this bound its working set stays
/// in cache and the profile measures what such a projection really costs (mostly the
/// dispatch), which the profile's `working_set_bytes` shows.
pub const MAX_WEIGHT_MATRICES: usize = 1024;

/// The least bytes of weights one fill of the rotation buffer covers.
const FILL_GROUP_BYTES: usize = 4 << 20;

/// `bytes` as B, KiB, MiB or GiB, whichever keeps the figure readable.
fn human_bytes(bytes: u64) -> String {
    match bytes {
        b if b < 1 << 10 => format!("{b} B"),
        b if b < 1 << 20 => format!("{} KiB", b >> 10),
        b if b < 1 << 30 => format!("{} MiB", b >> 20),
        b => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
    }
}

/// Floats between the starts of two matrices in the rotation buffer: a matrix rounded up to
/// a whole cache line, so that every matrix starts 64-byte aligned as real weights do.
fn matrix_stride(workload: Workload) -> usize {
    (workload.n_out * workload.n_in).next_multiple_of(WEIGHT_ALIGN / size_of::<f32>())
}

/// How many weight matrices to rotate through: enough that the working set is at least
/// [`L3_MULTIPLE`] × the detected L3 (32 MiB assumed when unknown), at most
/// [`MAX_WEIGHT_MATRICES`], within `bound` bytes; `None` when not even one matrix fits.
pub(crate) fn weight_matrices(hw: &HardwareInfo, workload: Workload, bound: u64) -> Option<usize> {
    let matrix = (matrix_stride(workload) * size_of::<f32>()) as u64;
    let l3 = if hw.l3_total_bytes > 0 {
        hw.l3_total_bytes
    } else {
        ASSUMED_L3_BYTES
    };
    let wanted = (L3_MULTIPLE * l3).div_ceil(matrix);
    let fits = bound / matrix;
    (fits >= 1).then(|| wanted.clamp(1, fits).min(MAX_WEIGHT_MATRICES as u64) as usize)
}

/// A deterministic pseudo-random weight in [-1, 1) for element `index` (splitmix64), so that
/// the fill can be split between threads in any way.
fn weight_value(index: u64) -> f32 {
    let mut z = index.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
}

/// Fills `w` with [`weight_value`]s on `n_threads` threads, each writing one contiguous part
/// first, so that on a NUMA machine the pages spread over the nodes as the workers that
/// read them (first touch), instead of all landing on the caller's node.
fn fill_weights(w: &mut [f32], n_threads: usize, first_index: usize) {
    let part = w.len().div_ceil(n_threads.max(1)).max(1);
    std::thread::scope(|scope| {
        for (i, chunk) in w.chunks_mut(part).enumerate() {
            scope.spawn(move || {
                let first = (first_index + i * part) as u64;
                for (j, v) in chunk.iter_mut().enumerate() {
                    *v = weight_value(first + j as u64);
                }
            });
        }
    });
}

/// The benchmark: weights, vectors, pools and the record of every measurement.
pub(crate) struct Bench {
    workload: Workload,
    kernel: Kernel,
    /// Every matrix of the rotation, back to back, `stride` floats apart.
    weights: WeightBuffer,
    stride: usize,
    n_matrices: usize,
    x: Vec<f32>,
    y: Vec<f32>,
    next_matrix: usize,
    projections_per_rep: usize,
    repetitions: usize,
    pools: HashMap<(usize, CoreSet), ThreadPool>,
    performance_cpus: Vec<usize>,
    deadline: Option<Instant>,
    pub(crate) out_of_time: bool,
    reporter: Reporter,
    pub(crate) measurements: Vec<Measurement>,
}

impl Bench {
    /// Allocates and fills the weights and calibrates the repetition length. With a budget,
    /// preparation stops filling matrices at half the budget (keeping at least one) and the
    /// repetitions are shortened to fit, so that the budget bounds the whole tune.
    pub(crate) fn new(
        hw: &HardwareInfo,
        opt: &AutoTunerOptions,
        started: Instant,
    ) -> Result<Bench, TunerError> {
        let workload = opt.workload;
        if workload.n_out == 0 || workload.n_in == 0 {
            return Err(TunerError::InvalidWorkload {
                n_out: workload.n_out,
                n_in: workload.n_in,
                reason: "both sides must be at least 1".to_string(),
            });
        }
        let bound = memory_bound(
            hw,
            opt.max_working_set_bytes,
            device_profile::available_memory_bytes(),
        );
        let n_matrices =
            weight_matrices(hw, workload, bound).ok_or_else(|| TunerError::InvalidWorkload {
                n_out: workload.n_out,
                n_in: workload.n_in,
                reason: format!(
                    "one matrix takes {} MiB, more than the {} MiB the benchmark may use",
                    workload.matrix_bytes() >> 20,
                    bound >> 20
                ),
            })?;
        let reporter = opt.reporter.clone();
        reporter.step(&format!(
            "preparing {n_matrices} weight matrices of {}x{} ({})",
            workload.n_out,
            workload.n_in,
            human_bytes(n_matrices as u64 * workload.matrix_bytes())
        ));
        let deadline = opt.budget.map(|b| started + b);
        let stride = matrix_stride(workload);
        // 64-byte aligned, on huge pages where the OS grants them, as the runtime's weights.
        let mut weights = WeightBuffer::zeroed(n_matrices * stride)
            .map_err(|e| TunerError::Kernel(e.to_string()))?;
        let fill_deadline = opt.budget.map(|b| started + b / 2);
        // Matrices are filled in groups of at least FILL_GROUP_BYTES (one thread start per
        // CPU and group, not per tiny matrix), checking the budget between groups.
        let per_group = (FILL_GROUP_BYTES / (stride * size_of::<f32>()).max(1)).max(1);
        let mut filled = 0;
        for group in weights.chunks_mut(stride * per_group) {
            if filled > 0 && fill_deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            // Every CPU this process may use writes its part (NUMA first touch).
            fill_weights(group, hw.effective_cpus.max(1), filled * stride);
            filled += group.len() / stride;
        }
        let allowed = &hw.allowed_cpus;
        let performance_cpus = hw
            .performance_cpus
            .iter()
            .copied()
            .filter(|c| allowed.is_empty() || allowed.contains(c))
            .collect();
        let mut bench = Bench {
            workload,
            kernel: opt.kernel(),
            weights,
            stride,
            n_matrices: filled,
            x: (0..workload.n_in).map(|i| (i % 7) as f32 * 0.25).collect(),
            y: vec![0.0; workload.n_out],
            next_matrix: 0,
            projections_per_rep: 1,
            repetitions: opt.repetitions.max(crate::options::MIN_REPETITIONS),
            pools: HashMap::new(),
            performance_cpus,
            deadline,
            out_of_time: false,
            reporter,
            measurements: Vec::new(),
        };
        // Ten repetitions per configuration must fit in a budget's remainder.
        let target = match deadline {
            Some(d) => opt
                .repetition_time
                .min(d.saturating_duration_since(Instant::now()) / 10),
            None => opt.repetition_time,
        };
        bench.calibrate(target, opt.thread_limit(hw))?;
        Ok(bench)
    }

    /// Sets the projections per repetition so that no repetition lasts much more than
    /// `target`: timed at one thread (large matrices: the slowest) and at `max_threads`
    /// (tiny matrices, where waking the workers costs more than the arithmetic), the slower
    /// of the two sets the count. Once a budget is spent, one untimed-warm-up-free
    /// projection per thread count is all it costs.
    fn calibrate(&mut self, target: Duration, max_threads: usize) -> Result<(), TunerError> {
        let mut per_projection: f64 = 0.0;
        let spent = self.deadline.is_some_and(|d| Instant::now() >= d);
        for threads in [1, max_threads.max(1)] {
            let config = Config {
                threads,
                policy: SchedulePolicy::Static,
                cores: CoreSet::Any,
            };
            if !spent {
                self.run(config, self.n_matrices.min(64))?;
            }
            let probe = if spent {
                1
            } else {
                self.n_matrices.clamp(3, 64)
            };
            let t0 = Instant::now();
            self.run(config, probe)?;
            per_projection = per_projection.max(t0.elapsed().as_secs_f64() / probe as f64);
        }
        self.pools.clear();
        let count = (target.as_secs_f64() / per_projection.max(1e-9)).ceil();
        self.projections_per_rep = (count as usize).clamp(1, 100_000);
        Ok(())
    }

    fn pool<'p>(
        pools: &'p mut HashMap<(usize, CoreSet), ThreadPool>,
        performance_cpus: &[usize],
        config: Config,
    ) -> Result<&'p ThreadPool, TunerError> {
        match pools.entry((config.threads, config.cores)) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(e) => {
                let pinning = match config.cores {
                    CoreSet::Any => Pinning::None,
                    CoreSet::Performance => Pinning::Cpus(performance_cpus.to_vec()),
                };
                let pool = ThreadPoolBuilder::default()
                    .n_threads(config.threads)
                    .pinning(pinning)
                    .build()
                    .map_err(|e| TunerError::Pool(e.to_string()))?;
                Ok(e.insert(pool))
            }
        }
    }

    /// Runs `count` projections under `config`, rotating through the weight matrices.
    fn run(&mut self, config: Config, count: usize) -> Result<(), TunerError> {
        // The pool pins workers 1..; worker 0 is this thread, pinned here for the run.
        let _caller_pin = match config.cores {
            CoreSet::Performance => self.performance_cpus.first().map(|&cpu| pin_caller(cpu)),
            CoreSet::Any => None,
        };
        let pool = Self::pool(&mut self.pools, &self.performance_cpus, config)?;
        let elements = self.workload.n_out * self.workload.n_in;
        for _ in 0..count {
            let start = self.next_matrix * self.stride;
            let w = &self.weights[start..start + elements];
            matmul_kernel::gemv_parallel_with(
                self.kernel,
                pool,
                config.policy,
                w,
                &self.x,
                &mut self.y,
            )
            .map_err(|e| TunerError::Kernel(e.to_string()))?;
            self.next_matrix = (self.next_matrix + 1) % self.n_matrices;
        }
        std::hint::black_box(&self.y);
        Ok(())
    }

    /// One timed repetition, as GB/s of weights read. One untimed projection first wakes
    /// the pool's workers, which may have parked while other configurations ran: a runtime
    /// decoding token after token keeps them awake, so the wake-up is not what is measured.
    fn sample(&mut self, config: Config) -> Result<f64, TunerError> {
        self.run(config, 1)?;
        let count = self.projections_per_rep;
        let t0 = Instant::now();
        self.run(config, count)?;
        let secs = t0.elapsed().as_secs_f64().max(1e-9);
        Ok(count as f64 * self.workload.matrix_bytes() as f64 / secs / 1e9)
    }

    /// True once the budget is spent; never before the first timed repetition, so that
    /// even a partial profile has a measured score.
    fn past_deadline(&mut self, samples_taken: bool) -> bool {
        if samples_taken && self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.out_of_time = true;
        }
        self.out_of_time
    }

    /// The record of `config` measured as `stats`.
    pub(crate) fn measurement(&self, phase: Phase, config: Config, stats: &Stats) -> Measurement {
        let gbps = stats.median();
        let projections_per_sec = gbps * 1e9 / self.workload.matrix_bytes() as f64;
        Measurement {
            phase,
            threads: config.threads,
            schedule_policy: config.policy,
            cores: config.cores,
            pseudo_tokens_per_sec: pseudo_tokens_per_sec(projections_per_sec, self.workload),
            gbps,
            gbps_min: stats.min(),
            gbps_median: gbps,
            gbps_max: stats.max(),
            repetitions: stats.len(),
        }
    }

    /// The number of weight matrices in the rotation.
    pub(crate) fn n_matrices(&self) -> usize {
        self.n_matrices
    }

    /// Bytes of weights in the rotation.
    pub(crate) fn working_set_bytes(&self) -> u64 {
        self.n_matrices as u64 * self.workload.matrix_bytes()
    }

    /// The pinned CPU list of `config`, one per worker (empty when unpinned).
    pub(crate) fn pinned_cpus(&self, config: Config) -> Vec<usize> {
        match config.cores {
            CoreSet::Any => Vec::new(),
            CoreSet::Performance => self
                .performance_cpus
                .iter()
                .copied()
                .take(config.threads)
                .collect(),
        }
    }
}

impl Measure for Bench {
    /// Measures `configs` interleaved: one warm-up repetition each, then rounds in which
    /// every configuration runs one repetition, the starting one rotating each round.
    /// Stops early when the budget runs out; a configuration without a timed repetition
    /// gets `None`. Every configuration measured is appended to `measurements`.
    fn measure(
        &mut self,
        phase: Phase,
        configs: &[Config],
        repetitions: Option<usize>,
    ) -> Result<Vec<Option<Stats>>, TunerError> {
        let mut stats = vec![Stats::default(); configs.len()];
        let reps = repetitions.unwrap_or(self.repetitions);
        self.reporter.step(&format!(
            "{phase}: measuring {} configurations x {reps} repetitions",
            configs.len()
        ));
        let anything_measured = !self.measurements.is_empty();
        'warm: for &config in configs {
            if self.past_deadline(anything_measured) {
                break 'warm;
            }
            self.run(config, self.projections_per_rep.div_ceil(2))?;
        }
        'rounds: for rep in 0..reps {
            self.reporter.tick(&format!(
                "{phase}: {} configurations, round {}/{reps}",
                configs.len(),
                rep + 1
            ));
            for k in 0..configs.len() {
                if self.past_deadline(anything_measured || rep > 0 || k > 0) {
                    break 'rounds;
                }
                let i = (k + rep) % configs.len();
                stats[i].gbps.push(self.sample(configs[i])?);
            }
        }
        let result: Vec<Option<Stats>> = stats
            .into_iter()
            .map(|s| (s.len() > 0).then_some(s))
            .collect();
        for (config, s) in configs.iter().zip(&result) {
            if let Some(s) = s {
                self.measurements.push(self.measurement(phase, *config, s));
            }
        }
        Ok(result)
    }

    /// CPUs a `CoreSet::Performance` configuration may pin to.
    fn performance_cpus(&self) -> usize {
        self.performance_cpus.len()
    }

    fn out_of_time(&self) -> bool {
        self.out_of_time
    }

    /// Drops the pools of earlier phases (their workers would only sleep).
    fn drop_pools(&mut self) {
        self.pools.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn working_set_is_four_times_l3_within_the_caps() {
        let w = Workload::default(); // 64 MiB
        let mut hw = HardwareInfo {
            l3_total_bytes: 32 << 20,
            ram_bytes: 24 << 30,
            ..HardwareInfo::default()
        };
        let matrices = |hw: &HardwareInfo, max: u64, available| {
            weight_matrices(hw, w, memory_bound(hw, max, available))
        };
        assert_eq!(matrices(&hw, 2 << 30, None), Some(2));
        hw.l3_total_bytes = 256 << 20; // a large EPYC: 1 GiB working set
        assert_eq!(matrices(&hw, 2 << 30, None), Some(16));
        assert_eq!(matrices(&hw, 512 << 20, None), Some(8));
        assert_eq!(matrices(&hw, 2 << 30, Some(1 << 30)), Some(8)); // half of what is free
        hw.ram_bytes = 1 << 30; // a quarter of RAM is 256 MiB
        assert_eq!(matrices(&hw, 2 << 30, None), Some(4));
        hw.ram_bytes = 128 << 20; // not even one matrix fits: an error, never an OOM
        assert_eq!(matrices(&hw, 2 << 30, None), None);
        hw.l3_total_bytes = 0; // unknown: 32 MiB assumed
        hw.ram_bytes = 0;
        assert_eq!(matrices(&hw, 2 << 30, None), Some(2));
        let huge = Workload {
            n_out: 65536,
            n_in: 65536,
        };
        assert_eq!(weight_matrices(&hw, huge, 2 << 30), None);
    }

    #[test]
    fn the_fill_does_not_depend_on_the_split() {
        let mut one = vec![0.0f32; 1001];
        let mut three = vec![0.0f32; 1001];
        fill_weights(&mut one, 1, 0);
        fill_weights(&mut three, 3, 0);
        assert_eq!(one, three);
        assert!(one.iter().all(|v| (-1.0..1.0).contains(v)));
        assert!(one.windows(2).any(|p| p[0] != p[1]));
    }

    #[test]
    fn sizes_are_shown_in_a_readable_unit() {
        assert_eq!(human_bytes(4), "4 B");
        assert_eq!(human_bytes(4096), "4 KiB");
        assert_eq!(human_bytes(128 << 20), "128 MiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn stats_median_and_noise() {
        let s = Stats {
            gbps: vec![10.0, 12.0, 11.0, 50.0, 11.0],
        };
        assert_eq!(s.median(), 11.0);
        assert_eq!(s.min(), 10.0);
        assert_eq!(s.max(), 50.0);
        assert!((s.relative_mad() - 1.0 / 11.0).abs() < 1e-12);
    }
}
