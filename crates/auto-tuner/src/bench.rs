//! The measuring engine: a decoder layer's projections as weight matrices, one pool per
//! configuration, and interleaved timed rounds that yield each configuration's median and
//! spread, in tokens per second of the workload.
//!
//! - Decode: one repetition is at least one pass over a layer's projections at m = 1, in
//!   order, rotating through enough layer copies that the weights stream from DRAM (at least
//!   [`L3_MULTIPLE`] × the L3); tokens/s = 1 ÷ (layer time × layers).
//! - Prefill: the same at m = the batch with the quantized GEMM, on a sample of each
//!   projection's first rows and the first quarter of those (prefill is compute-bound: each
//!   weight is used m times once loaded), the time per row, without the per-call costs,
//!   extended to the whole rows; tokens/s = m ÷ (layer time × layers).
//!
//! A workload of many layers (70B) never needs their memory: the layer time of the copies
//! measured is scaled to the layer count.

use crate::affinity::pin_caller;
use crate::candidates::{CoreSet, PinnedSet, pinning_candidates};
use crate::error::TunerError;
use crate::job::Job;
use crate::layer::LayerWeights;
use crate::measure::{Measure, Setting, Stats};
use crate::options::Measuring;
use crate::phase::{Phase, Step};
use crate::profile::Measurement;
use crate::progress::Reporter;
use device_profile::HardwareInfo;
use matmul_kernel::Kernel;
use model_workload::Workload;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::time::{Duration, Instant};
use threadpool::{Pinning, SchedulePolicy, ThreadPool, ThreadPoolBuilder};

/// The last-level cache assumed when detection found none.
const ASSUMED_L3_BYTES: u64 = 32 << 20;

/// The decode working set is at least this many times the last-level cache, so that every
/// projection streams its weights from DRAM as in real decode.
pub(crate) const L3_MULTIPLE: u64 = 4;

/// The fewest rows of each projection the prefill sample holds (all of a smaller one), so
/// that the difference between the sample and its quarter is well above the timer's noise.
const PREFILL_MIN_ROWS: usize = 128;

/// What [`memory_bound`] is the least of, as a refusal names it.
const BOUND_PARTS: &str = "the least of its bound, a quarter of RAM and half of the memory \
                           available now";

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

/// The most weight matrices (layer copies × projections) the decode benchmark rotates
/// through. A tiny workload would otherwise need millions of copies to exceed the L3; with
/// this bound its working set stays in cache and the profile measures what such a layer
/// really costs (mostly the dispatch), which the profile's `working_set_bytes` shows.
pub const MAX_WEIGHT_MATRICES: usize = 1024;

/// `bytes` as B, KiB, MiB or GiB, whichever keeps the figure readable.
pub(crate) fn human_bytes(bytes: u64) -> String {
    match bytes {
        b if b < 1 << 10 => format!("{b} B"),
        b if b < 1 << 20 => format!("{} KiB", b >> 10),
        b if b < 1 << 30 => format!("{} MiB", b >> 20),
        b => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
    }
}

/// How many copies of a layer of `layer_bytes` to rotate through: enough that the working
/// set is at least [`L3_MULTIPLE`] × the detected L3 (32 MiB assumed when unknown), at most
/// [`MAX_WEIGHT_MATRICES`] matrices of `projections` per layer, within `bound` bytes; `None`
/// when not even one layer fits.
pub(crate) fn layer_copies(
    hw: &HardwareInfo,
    layer_bytes: u64,
    projections: usize,
    bound: u64,
) -> Option<usize> {
    let layer = layer_bytes.max(1);
    let l3 = if hw.l3_total_bytes > 0 {
        hw.l3_total_bytes
    } else {
        ASSUMED_L3_BYTES
    };
    let wanted = (L3_MULTIPLE * l3).div_ceil(layer);
    let fits = bound / layer;
    let most = (MAX_WEIGHT_MATRICES / projections.max(1)).max(1) as u64;
    (fits >= 1).then(|| wanted.clamp(1, fits).min(most) as usize)
}

/// The fewest rows of each projection the prefill sample holds for `thread_limit` threads:
/// at least [`PREFILL_MIN_ROWS`] and 8 per thread, a multiple of 16.
fn prefill_min_rows(thread_limit: usize) -> usize {
    (8 * thread_limit)
        .max(PREFILL_MIN_ROWS)
        .next_multiple_of(16)
}

/// Bytes of a row of every matrix of a layer copy (each projection in each format its
/// layers store), summed.
fn row_bytes_sum(workload: &Workload) -> u64 {
    workload
        .projections
        .iter()
        .flat_map(|p| {
            p.format_mix()
                .into_iter()
                .map(|(format, _)| format.row_bytes(p.n_in).map_or(0, |b| b as u64))
        })
        .sum()
}

/// The most memory a prefill sample of `rows` rows per projection takes while it is built:
/// the rows, their quarter, and the bytes of one projection they are copied from (at most
/// the rows again), so 2.25 times the rows.
fn sample_peak_bytes(workload: &Workload, rows: usize) -> u64 {
    (row_bytes_sum(workload).saturating_mul(rows as u64)).saturating_mul(9) / 4
}

/// The most rows per projection a prefill sample may have within `bytes`
/// ([`sample_peak_bytes`]).
fn sample_rows_within(workload: &Workload, bytes: u64) -> usize {
    let per_row = (row_bytes_sum(workload).max(1)).saturating_mul(9) / 4;
    usize::try_from(bytes / per_row.max(1)).unwrap_or(usize::MAX)
}

/// How the benchmark's memory bound is shared: the buffers beside the weights (`scratch`)
/// and what is left for the decode copies once the larger of one layer (the tiles the
/// copies are made from) and the smallest prefill sample is reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Memory {
    /// Activations and outputs at the batch, the activations quantized, and a projection's
    /// quantized tile and its values.
    pub(crate) scratch: u64,
    /// What the decode copies may take.
    pub(crate) for_copies: u64,
}

impl Memory {
    /// The shares of `bound` for `workload` (one layer of `layer_bytes`) at `batch`, the
    /// prefill sample holding at least `min_rows` rows; an error naming the buffers when
    /// they and one layer do not fit.
    pub(crate) fn of(
        workload: &Workload,
        batch: usize,
        min_rows: usize,
        layer_bytes: u64,
        bound: u64,
    ) -> Result<Memory, TunerError> {
        let widest = |side: fn(&model_workload::Projection) -> usize| {
            workload.projections.iter().map(side).max().unwrap_or(1) as u64
        };
        let (widest_in, widest_out) = (widest(|p| p.n_in), widest(|p| p.n_out));
        let m = batch.max(1) as u64;
        let f32_bytes = size_of::<f32>() as u64;
        // Every side is at most MAX_DIMENSION (2^20) and the batch at most 4096: no product
        // below can overflow 64 bits.
        let scratch = m * widest_in * f32_bytes // x
            + m * widest_in * f32_bytes // x quantized (at most as large)
            + m * widest_out * f32_bytes // y
            + 2 * crate::layer::TILE_ROWS as u64 * widest_in * f32_bytes; // a tile and its values
        let reserve = scratch + layer_bytes.max(sample_peak_bytes(workload, min_rows));
        if reserve.saturating_add(layer_bytes) > bound {
            return Err(TunerError::InvalidWorkload {
                name: workload.name.clone(),
                reason: format!(
                    "one layer takes {}, and with the prefill buffers of a batch of {batch} \
                     ({}) and the row sample it needs {}, more than the {} the benchmark may use \
                     ({BOUND_PARTS})",
                    human_bytes(layer_bytes),
                    human_bytes(scratch),
                    human_bytes(reserve.saturating_add(layer_bytes)),
                    human_bytes(bound)
                ),
            });
        }
        Ok(Memory {
            scratch,
            for_copies: bound - reserve,
        })
    }
}

/// What a benchmark of a job will hold, decided before anything is allocated: one layer's
/// bytes, the memory bound, its shares and the layer copies. [`Plan::of`] is the check that
/// the workload fits, which a tune makes before it says anything about the machine.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    layer_bytes: u64,
    bound: u64,
    memory: Memory,
    copies: usize,
}

impl Plan {
    /// The plan of `job` on `hw` within `measuring`'s bound; an error naming what does not
    /// fit.
    pub(crate) fn of(
        hw: &HardwareInfo,
        job: &Job,
        measuring: &Measuring,
    ) -> Result<Plan, TunerError> {
        let workload = &job.request.workload;
        // The bytes of one copy: each projection once in each format its layers store.
        let layer_bytes = workload.validate()?;
        let bound = memory_bound(
            hw,
            measuring.max_working_set_bytes,
            device_profile::available_memory_bytes(),
        );
        let batch = job.request.batch.max(1);
        let min_rows = prefill_min_rows(job.request.thread_limit);
        let memory = Memory::of(workload, batch, min_rows, layer_bytes, bound)?;
        let copies = layer_copies(
            hw,
            layer_bytes,
            crate::layer::matrices_per_copy(workload),
            memory.for_copies,
        )
        .ok_or_else(|| TunerError::InvalidWorkload {
            name: workload.name.clone(),
            reason: format!(
                "one layer takes {}, more than the {} the benchmark may use ({BOUND_PARTS})",
                human_bytes(layer_bytes),
                human_bytes(memory.for_copies)
            ),
        })?;
        Ok(Plan {
            layer_bytes,
            bound,
            memory,
            copies,
        })
    }
}

/// The benchmark: the layer copies, the activations, the pools and the record of every
/// measurement.
pub(crate) struct Bench {
    workload: Workload,
    kernel: Kernel,
    batch: usize,
    phase: Phase,
    /// The decode rotation: whole matrices, `copies` layers.
    decode: LayerWeights,
    /// The prefill sample: the first rows of each projection (built per phase).
    prefill: Option<LayerWeights>,
    /// The most memory the prefill sample may take while it is built
    /// ([`sample_peak_bytes`]).
    sample_bytes: u64,
    next_copy: usize,
    /// Activations and outputs, sized for the widest projection and the batch.
    x: Vec<f32>,
    y: Vec<f32>,
    passes_per_rep: usize,
    repetitions: usize,
    repetition_time: Duration,
    thread_limit: usize,
    pools: HashMap<(usize, CoreSet), ThreadPool>,
    pinned: Vec<PinnedSet>,
    deadline: Option<Instant>,
    pub(crate) out_of_time: bool,
    /// An earlier phase ran out of time.
    earlier_out_of_time: bool,
    reporter: Reporter,
    /// Every measurement, per phase (decode, prefill).
    pub(crate) measurements: [Vec<Measurement>; 2],
}

/// The shortest repetition under a CPU quota: ten periods of the CFS bandwidth controller
/// (100 ms by default). A quota lets a process run all its threads until the period's share
/// is spent, then stops them all until the next period; a repetition shorter than a period
/// either misses the stop (too fast) or holds a whole one (too slow), and one of a few
/// periods still depends on what the setting timed before it left of the period's share
/// and on where its end falls: at 250 ms (2.5 periods) two threads in a 1-CPU quota
/// measured 10–44 tokens/s in one prefill tune, one thread 20–24, and the search's pick
/// went either way. Ten periods bound that to about a tenth.
pub(crate) const QUOTA_REPETITION_TIME: Duration = Duration::from_secs(1);

/// The repetition length to aim at on `hw`: `asked`, at least [`QUOTA_REPETITION_TIME`]
/// under a CPU quota.
pub(crate) fn repetition_time(hw: &HardwareInfo, asked: Duration) -> Duration {
    if hw.cpu_quota_millicpus.is_some() {
        asked.max(QUOTA_REPETITION_TIME)
    } else {
        asked
    }
}

impl Bench {
    /// Builds the decode layer copies of `plan` ([`Plan::of`] the same `hw`, `job` and
    /// `measuring`) and calibrates the repetition length. With a budget, preparation stops
    /// adding copies at half the budget (keeping at least one) and the repetitions are
    /// shortened to fit, so that the budget, counted from [`Job::started`], bounds the whole
    /// tune.
    pub(crate) fn new(
        hw: &HardwareInfo,
        job: &Job,
        measuring: &Measuring,
        plan: Plan,
        reporter: &Reporter,
    ) -> Result<Bench, TunerError> {
        let started = job.started;
        let workload = job.request.workload.clone();
        let Plan {
            layer_bytes,
            bound,
            memory,
            copies,
        } = plan;
        let batch = job.request.batch.max(1);
        let thread_limit = job.request.thread_limit;
        // What the copies leave for the prefill sample (at least `min_rows` rows: the
        // reserve above holds them).
        let sample_bytes = bound - memory.scratch - copies as u64 * layer_bytes;
        let reporter = reporter.clone();
        // With a budget, preparation may stop short of the plan's copies.
        reporter.step(&format!(
            "preparing {}{copies} {} of a layer of {} ({}, {} projection{})",
            if job.budget.is_some() && copies > 1 {
                "up to "
            } else {
                ""
            },
            if copies == 1 { "copy" } else { "copies" },
            workload.name,
            human_bytes(copies as u64 * layer_bytes),
            workload.projections.len(),
            if workload.projections.len() == 1 {
                ""
            } else {
                "s"
            }
        ));
        // A budget past any instant the clock can hold is no deadline.
        let deadline = job.budget.and_then(|b| started.checked_add(b));
        let fill_deadline = job.budget.and_then(|b| started.checked_add(b / 2));
        let decode =
            LayerWeights::decode(&workload, copies, hw.effective_cpus.max(1), fill_deadline)?;
        let n_in = workload
            .projections
            .iter()
            .map(|p| p.n_in)
            .max()
            .unwrap_or(1);
        let n_out = workload
            .projections
            .iter()
            .map(|p| p.n_out)
            .max()
            .unwrap_or(1);
        let mut bench = Bench {
            workload,
            kernel: job.kernel,
            batch,
            sample_bytes,
            phase: Phase::Decode,
            decode,
            prefill: None,
            next_copy: 0,
            x: (0..n_in).map(|i| (i % 7) as f32 * 0.25).collect(),
            y: vec![0.0; n_out],
            passes_per_rep: 1,
            repetitions: measuring.repetitions.max(crate::options::MIN_REPETITIONS)
                * job.request.rigor.repetition_factor(),
            repetition_time: repetition_time(hw, measuring.repetition_time),
            thread_limit,
            pools: HashMap::new(),
            pinned: pinning_candidates(hw),
            deadline,
            out_of_time: false,
            earlier_out_of_time: false,
            reporter,
            measurements: [Vec::new(), Vec::new()],
        };
        bench.calibrate()?;
        Ok(bench)
    }

    /// Switches to `phase`: prefill builds its row sample and batch activations; both
    /// calibrate the repetition length.
    pub(crate) fn set_phase(&mut self, phase: Phase) -> Result<(), TunerError> {
        if self.phase == phase {
            return Ok(());
        }
        self.phase = phase;
        self.pools.clear();
        // Each phase gets at least one timed repetition, even past the budget.
        self.earlier_out_of_time |= self.out_of_time;
        self.out_of_time = false;
        let m = phase.m(self.batch);
        let widest_in = self.workload.projections.iter().map(|p| p.n_in).max();
        let widest_out = self.workload.projections.iter().map(|p| p.n_out).max();
        let (widest_in, widest_out) = (widest_in.unwrap_or(1), widest_out.unwrap_or(1));
        self.x = (0..m * widest_in).map(|i| (i % 7) as f32 * 0.25).collect();
        self.y = vec![0.0; m * widest_out];
        if phase == Phase::Prefill && self.prefill.is_none() {
            // The row sample: enough rows that the per-call costs (quantizing the batch's
            // activations, waking the pool), which scaling would multiply, stay small next
            // to the rows' arithmetic, and that every thread gets many; then sized by time.
            let min_rows = prefill_min_rows(self.thread_limit);
            self.prefill = Some(LayerWeights::prefill_sample(&self.workload, min_rows)?);
            self.time_pass(1)?;
            let one = self.time_pass(1)?;
            let target = self.target_time().as_secs_f64();
            // One pass of the sample at one thread should take about the repetition target,
            // within the memory the sample may take.
            let rows = (min_rows as f64 * target / one.max(1e-9)).min(1e6) as usize;
            let rows = rows
                .next_multiple_of(16)
                .min(sample_rows_within(&self.workload, self.sample_bytes))
                .max(min_rows);
            if rows > min_rows {
                // The first sample goes before the second is built: one at a time.
                self.prefill = None;
                self.prefill = Some(LayerWeights::prefill_sample(&self.workload, rows)?);
            }
        }
        self.calibrate()
    }

    /// The repetition length to aim at: the configured one, shortened so that ten
    /// repetitions fit in what is left of a budget.
    fn target_time(&self) -> Duration {
        match self.deadline {
            Some(d) => self
                .repetition_time
                .min(d.saturating_duration_since(Instant::now()) / 10),
            None => self.repetition_time,
        }
    }

    /// Wall seconds of one pass over the current phase's weights at `threads`, `static`.
    fn time_pass(&mut self, threads: usize) -> Result<f64, TunerError> {
        let config = Setting {
            threads,
            policy: SchedulePolicy::Static,
            cores: CoreSet::Any,
        };
        let t0 = Instant::now();
        self.pass(config)?;
        Ok(t0.elapsed().as_secs_f64())
    }

    /// Sets the layer passes per repetition so that no repetition lasts much more than the
    /// target: timed at one thread (large layers: the slowest) and at the thread limit (tiny
    /// layers, where waking the workers costs more than the arithmetic), the slower of the
    /// two sets the count. A spent budget costs one pass per thread count.
    fn calibrate(&mut self) -> Result<(), TunerError> {
        let spent = self.deadline.is_some_and(|d| Instant::now() >= d);
        let mut per_pass: f64 = 0.0;
        for threads in [1, self.thread_limit.max(1)] {
            if !spent {
                self.time_pass(threads)?;
            }
            let probes = if spent { 1 } else { 3 };
            let mut slowest: f64 = 0.0;
            for _ in 0..probes {
                slowest = slowest.max(self.time_pass(threads)?);
            }
            per_pass = per_pass.max(slowest);
        }
        self.pools.clear();
        let target = self.target_time().as_secs_f64();
        // The nearest whole number of passes (at least one): a pass of 0.6 repetitions
        // would otherwise make every repetition last 1.2 of them.
        let count = (target / per_pass.max(1e-9)).round();
        self.passes_per_rep = (count as usize).clamp(1, 100_000);
        Ok(())
    }

    fn pool<'p>(
        pools: &'p mut HashMap<(usize, CoreSet), ThreadPool>,
        pinned: &[PinnedSet],
        config: Setting,
    ) -> Result<&'p ThreadPool, TunerError> {
        match pools.entry((config.threads, config.cores)) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(e) => {
                let pinning = match pinned_cpus(pinned, config) {
                    Some(cpus) => Pinning::Cpus(cpus),
                    None => Pinning::None,
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

    /// One pass over a layer copy's matrices of the current phase under `config`: the
    /// estimated seconds of the model's mean layer (a sampled projection's time extrapolated
    /// to all its rows, see [`crate::layer::Part::whole_seconds`], each matrix weighed by
    /// its share of the layers).
    fn pass(&mut self, config: Setting) -> Result<f64, TunerError> {
        // The pool pins workers 1..; worker 0 is this thread, pinned here for the pass.
        let _caller_pin = pinned_cpus(&self.pinned, config)
            .and_then(|cpus| cpus.first().copied())
            .map(pin_caller);
        let pool = Self::pool(&mut self.pools, &self.pinned, config)?;
        let m = self.phase.m(self.batch);
        let (weights, copy) = match self.phase {
            Phase::Decode => {
                let copy = self.next_copy;
                self.next_copy = (self.next_copy + 1) % self.decode.copies();
                (&self.decode, copy)
            }
            Phase::Prefill => (self.prefill.as_ref().unwrap_or(&self.decode), 0),
        };
        let exec = matmul_kernel::Exec::new()
            .kernel(self.kernel)
            .pool(pool)
            .policy(config.policy);
        let mut run = |w: &matmul_kernel::WeightMatrix| -> Result<f64, TunerError> {
            let shape = w.shape();
            let x = &self.x[..m * shape.n_in];
            let y = &mut self.y[..m * shape.n_out];
            let t0 = Instant::now();
            let done = if m == 1 {
                exec.qgemv(w, x, y)
            } else {
                exec.qgemm(w, x, y)
            };
            done.map_err(|e| TunerError::Kernel(e.to_string()))?;
            Ok(t0.elapsed().as_secs_f64())
        };
        // Each matrix counts for the share of the layers that store it in its format.
        let layer_seconds = weights.layer_seconds(copy, &mut run)?;
        std::hint::black_box(&self.y);
        Ok(layer_seconds)
    }

    /// Wakes the pool's workers, which may have parked while other configurations ran (a
    /// runtime running token after token keeps them awake): the smallest projection once,
    /// untimed.
    fn wake(&mut self, config: Setting) -> Result<(), TunerError> {
        let pool = Self::pool(&mut self.pools, &self.pinned, config)?;
        let w = self.decode.smallest();
        let shape = w.shape();
        matmul_kernel::Exec::new()
            .kernel(self.kernel)
            .pool(pool)
            .policy(config.policy)
            .qgemv(w, &self.x[..shape.n_in], &mut self.y[..shape.n_out])
            .map_err(|e| TunerError::Kernel(e.to_string()))
    }

    /// One timed repetition: (tokens per second, GB/s of weights).
    fn sample(&mut self, config: Setting) -> Result<(f64, f64), TunerError> {
        let _caller_pin = pinned_cpus(&self.pinned, config)
            .and_then(|cpus| cpus.first().copied())
            .map(pin_caller);
        self.wake(config)?;
        let mut seconds = 0.0;
        for _ in 0..self.passes_per_rep {
            seconds += self.pass(config)?;
        }
        let layer = (seconds / self.passes_per_rep as f64).max(1e-12);
        let m = self.phase.m(self.batch) as f64;
        let tokens_per_sec = m / (layer * self.workload.layers as f64);
        let gbps = self.decode.mean_layer_bytes() / layer / 1e9;
        Ok((tokens_per_sec, gbps))
    }

    /// True once the budget is spent; never before the phase's first timed repetition, so
    /// that even a partial profile has a measured score for each phase.
    fn past_deadline(&mut self, samples_taken: bool) -> bool {
        if samples_taken && self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.out_of_time = true;
        }
        self.out_of_time
    }

    /// The record of `config` measured as `stats` in `step`.
    pub(crate) fn measurement(step: Step, config: Setting, stats: &Stats) -> Measurement {
        Measurement {
            step,
            threads: config.threads,
            schedule_policy: config.policy,
            cores: config.cores,
            tokens_per_sec: stats.median(),
            tokens_per_sec_min: stats.min(),
            tokens_per_sec_max: stats.max(),
            gbps: stats.median_gbps(),
            repetitions: stats.len(),
            knobs: None,
        }
    }

    /// True when the budget cut some phase's search short.
    pub(crate) fn partial(&self) -> bool {
        self.out_of_time || self.earlier_out_of_time
    }

    /// Layer copies in the decode rotation.
    pub(crate) fn layer_copies(&self) -> usize {
        self.decode.copies()
    }

    /// Bytes of weights in the decode rotation.
    pub(crate) fn working_set_bytes(&self) -> u64 {
        self.decode.copies() as u64 * self.decode.copy_bytes()
    }

    /// The pinned CPU list of `config`, one per worker (empty when unpinned).
    pub(crate) fn pinned_cpus(&self, config: Setting) -> Vec<usize> {
        pinned_cpus(&self.pinned, config).unwrap_or_default()
    }

    /// The measurements of the current phase.
    pub(crate) fn phase_measurements(&self, phase: Phase) -> &[Measurement] {
        &self.measurements[phase_index(phase)]
    }
}

/// The index of `phase` in [`Bench::measurements`].
fn phase_index(phase: Phase) -> usize {
    match phase {
        Phase::Decode => 0,
        Phase::Prefill => 1,
    }
}

/// The CPUs `config` pins to: the first `threads` of its pinned set; `None` when unpinned
/// (or when the machine has no such set, or too few CPUs in it).
fn pinned_cpus(pinned: &[PinnedSet], config: Setting) -> Option<Vec<usize>> {
    if config.cores == CoreSet::Any {
        return None;
    }
    let set = pinned.iter().find(|s| s.cores == config.cores)?;
    (set.cpus.len() >= config.threads).then(|| set.cpus[..config.threads].to_vec())
}

impl Measure for Bench {
    /// Measures `configs` interleaved: one warm-up pass each, then rounds in which every
    /// configuration runs one repetition, the starting one rotating each round. Stops early
    /// when the budget runs out; a configuration without a timed repetition gets `None`.
    /// Every configuration measured is appended to the phase's measurements.
    fn measure(
        &mut self,
        step: Step,
        configs: &[Setting],
        repetitions: Option<usize>,
    ) -> Result<Vec<Option<Stats>>, TunerError> {
        let mut stats = vec![Stats::default(); configs.len()];
        let reps = repetitions.unwrap_or(self.repetitions);
        let phase = self.phase;
        // With a budget, the rounds may stop short of `reps`.
        self.reporter.step(&format!(
            "{phase} {step}: measuring {} configuration{} x {}{reps} repetition{}",
            configs.len(),
            if configs.len() == 1 { "" } else { "s" },
            if self.deadline.is_some() {
                "up to "
            } else {
                ""
            },
            if reps == 1 { "" } else { "s" }
        ));
        let anything_measured = !self.measurements[phase_index(phase)].is_empty();
        'warm: for &config in configs {
            if self.past_deadline(anything_measured) {
                break 'warm;
            }
            // Builds the pool and runs it once (a whole pass would cost a layer per
            // configuration on a slow kernel).
            self.wake(config)?;
        }
        'rounds: for rep in 0..reps {
            self.reporter.tick(&format!(
                "{phase} {step}: {} configurations, round {}/{reps}",
                configs.len(),
                rep + 1
            ));
            for k in 0..configs.len() {
                if self.past_deadline(anything_measured || rep > 0 || k > 0) {
                    break 'rounds;
                }
                let i = (k + rep) % configs.len();
                let (tokens, gbps) = self.sample(configs[i])?;
                stats[i].push(tokens, gbps);
            }
        }
        let result: Vec<Option<Stats>> = stats
            .into_iter()
            .map(|s| (!s.is_empty()).then_some(s))
            .collect();
        for (config, s) in configs.iter().zip(&result) {
            if let Some(s) = s {
                self.measurements[phase_index(phase)].push(Self::measurement(step, *config, s));
            }
        }
        Ok(result)
    }

    fn pinned_sets(&self) -> &[PinnedSet] {
        &self.pinned
    }

    fn out_of_time(&self) -> bool {
        self.out_of_time
    }

    /// Drops the pools of earlier steps (their workers would only sleep).
    fn drop_pools(&mut self) {
        self.pools.clear();
    }
}

#[cfg(test)]
mod tests;
