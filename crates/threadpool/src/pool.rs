//! The pool: shared state, the worker loop and the generation/arrive/park protocol.
//!
//! `PROTOCOL.md` beside this file states the protocol and argues that no wake-up is lost.

use crate::schedule::Plan;
use crate::sync::{
    self, Arc, AtomicBool, AtomicU64, AtomicUsize, Condvar, Mutex, MutexGuard, Ordering,
    UnsafeCell, fence, spin_loop, thread,
};
use crate::{Pinning, PinningFailure, SchedulePolicy, ThreadPoolError};
use crossbeam_utils::CachePadded;
use std::any::Any;
use std::cell::Cell;
use std::fmt;
use std::ops::Range;
use std::panic::{self, AssertUnwindSafe};
use std::time::Duration;
#[cfg(not(loom))]
use std::time::Instant;

/// Bits of the state word that hold the number of active workers of a generation.
const ACTIVE_BITS: u32 = 16;
/// Mask of the active-worker count in the state word.
const ACTIVE_MASK: u64 = (1 << ACTIVE_BITS) - 1;
/// State-word flag: the pool is shutting down; workers exit.
const SHUTDOWN: u64 = 1 << ACTIVE_BITS;
/// State-word flag: the last calls found the machine contended (see [`CONTENDED_CALLS`]);
/// waiting threads yield between polls from the start instead of spinning for
/// [`PURE_SPIN`] first.
const CONTENDED: u64 = 1 << (ACTIVE_BITS + 1);
/// The generation occupies the state word from this bit up (46 bits: no wrap in practice).
const GENERATION_SHIFT: u32 = ACTIVE_BITS + 2;
/// Calls published with [`CONTENDED`] after a call without it found a worker waiting for
/// a CPU; then pure spinning is tried again.
const CONTENDED_CALLS: u32 = 64;
/// The largest pool: the active-worker count must fit in 16 bits of the state word.
pub const MAX_THREADS: usize = ACTIVE_MASK as usize;

/// The default spin budget: how long a waiting thread polls before it parks.
///
/// Waking a parked thread costs 17–27 µs on the reference VM, so a thread that finished a
/// call keeps polling for 100 µs (about four wake-ups' worth): back-to-back calls (a loop of
/// GEMVs) never pay the wake-up, while an idle pool stops burning CPU after 0.1 ms.
pub const DEFAULT_SPIN_BUDGET: Duration = Duration::from_micros(100);

/// How long the caller waits at the barrier before it checks that every worker picked the
/// generation up (see `Shared::wait_arrivals`); a running worker does so within 1 µs.
#[cfg(not(loom))]
const PICKUP_GRACE: Duration = Duration::from_micros(5);

/// As [`PICKUP_GRACE`] when the caller had to wake a parked worker: about two wake-ups.
#[cfg(not(loom))]
const WOKEN_PICKUP_GRACE: Duration = Duration::from_micros(50);

/// How long a waiting thread polls with `spin_loop` only; for the rest of the spin budget it
/// calls `yield_now` between polls, so that when other processes load the machine a thread
/// of the pool that shares this CPU still gets to run (a syscall that returns at once on an
/// idle machine).
const PURE_SPIN: Duration = Duration::from_micros(10);

/// Polls between two clock reads while spinning on an undersubscribed machine.
#[cfg(not(loom))]
const SPINS_PER_CLOCK_READ: u32 = 64;
/// `yield_now` rounds between the spin phase and parking.
#[cfg(not(loom))]
const YIELD_ROUNDS: u32 = 8;

/// CPUs a Linux `cpu_set_t` can name; higher ids are reported as pinning failures.
const CPU_SET_SIZE: usize = 1024;

/// Builds the state word of `generation` with `n_active` workers and `flags` (`CONTENDED`,
/// or `SHUTDOWN` with 0 workers at exit).
fn state_word(generation: u64, n_active: usize, flags: u64) -> u64 {
    (generation << GENERATION_SHIFT) | (n_active as u64) | flags
}

#[cfg(not(loom))]
std::thread_local! {
    /// The pool (its `Shared` address) whose worker this thread is; 0 on other threads.
    static WORKER_OF: Cell<usize> = const { Cell::new(0) };
    /// A byte whose address identifies this thread while it lives.
    static THREAD_TAG: u8 = const { 0 };
}

#[cfg(loom)]
loom::thread_local! {
    static WORKER_OF: Cell<usize> = Cell::new(0);
    static THREAD_TAG: u8 = 0;
}

/// A nonzero number that identifies the current thread while it lives.
fn thread_tag() -> usize {
    THREAD_TAG.with(|tag| tag as *const u8 as usize)
}

/// A type-erased pointer to the dispatching caller's per-worker body.
#[derive(Clone, Copy)]
struct JobRef(*const (dyn Fn(usize) + Sync));

// SAFETY: a `JobRef` points to a `dyn Fn(usize) + Sync`, which may be called from any thread
// through a shared reference; the dispatch protocol (see `JobRef::erase`) keeps it alive.
unsafe impl Send for JobRef {}
// SAFETY: as for `Send`: the referent is `Sync`.
unsafe impl Sync for JobRef {}

impl JobRef {
    /// Erases the lifetime of `body`.
    ///
    /// # Safety
    /// The result must not be called after `body`'s borrow ends: the dispatching caller
    /// keeps `body` alive until every worker that may read this `JobRef` has arrived.
    unsafe fn erase<'a>(body: &'a (dyn Fn(usize) + Sync + 'a)) -> JobRef {
        let ptr: *const (dyn Fn(usize) + Sync + 'a) = body;
        // SAFETY: only the lifetime bound of the trait object changes (same layout); the
        // caller promises not to use the pointer beyond `'a`.
        JobRef(unsafe {
            std::mem::transmute::<
                *const (dyn Fn(usize) + Sync + 'a),
                *const (dyn Fn(usize) + Sync + 'static),
            >(ptr)
        })
    }

    /// Calls the body for `worker_idx`.
    ///
    /// # Safety
    /// The body must still be alive: the caller is an active worker of the generation that
    /// published this `JobRef` and has not arrived at its barrier yet.
    unsafe fn call(self, worker_idx: usize) {
        // SAFETY: the referent is alive by this function's contract.
        unsafe { (*self.0)(worker_idx) }
    }
}

/// The line a waiting worker polls: the state word and the job it publishes.
struct Published {
    /// `generation << GENERATION_SHIFT | SHUTDOWN? | n_active`.
    ///
    /// ## Memory ordering
    /// The dispatcher writes `job`, the cursor and the ranges, then stores the word with
    /// `Release`; a worker that loads the new word with `Acquire` sees them. The word is also
    /// one side of the store/`fence(SeqCst)`/load handshake with `Slot::sleeping`
    /// (PROTOCOL.md).
    state: AtomicU64,
    /// The current generation's body; written only by the dispatcher while no worker can
    /// read it (between a completed barrier and the next state store).
    job: UnsafeCell<Option<JobRef>>,
}

/// Where one thread parks: worker `i` uses slot `i`; slot 0 is the dispatching caller's.
struct Slot {
    /// True while the owner is (about to be) blocked on `wake`.
    ///
    /// ## Memory ordering
    /// The owner stores `true`, issues `fence(SeqCst)` and then loads the condition it waits
    /// for; a waker makes the condition true, issues `fence(SeqCst)` and then loads
    /// `sleeping`. The two fences are ordered in the single total order of `SeqCst`
    /// operations, so at least one side sees the other's store (PROTOCOL.md). Fences rather
    /// than `SeqCst` accesses: about the same cost on x86, and loom models fences exactly.
    sleeping: AtomicBool,
    /// Held by the owner from announcing `sleeping` until `wake.wait` releases it.
    lock: Mutex<()>,
    /// Notified by a waker that saw `sleeping`.
    wake: Condvar,
}

/// One worker's last `Adaptive` call: rows processed and nanoseconds taken.
struct WorkerStats {
    /// Rows the worker processed.
    rows: AtomicU64,
    /// Wall time of the worker's share in nanoseconds.
    nanos: AtomicU64,
}

/// State shared by the dispatcher and the workers.
pub(crate) struct Shared {
    /// The state word and the job, on one line: a waking worker fetches both at once.
    published: CachePadded<Published>,
    /// Workers (not counting the caller) that finished the current generation; reset by the
    /// dispatcher before each publish. Incremented with `Release` (the worker's writes are
    /// visible to the caller's `Acquire` load) and, by the last worker, followed by the
    /// fence handshake with slot 0's `sleeping`.
    arrived: CachePadded<AtomicUsize>,
    /// The dynamic policies' cursor (a chunk index or a row index, by policy).
    cursor: CachePadded<AtomicUsize>,
    /// Per-worker packed `(lo, hi)` ranges of `WorkStealing` and `Adaptive`.
    ranges: Box<[CachePadded<AtomicU64>]>,
    /// Per-worker measurements of the last `Adaptive` call.
    stats: Box<[CachePadded<WorkerStats>]>,
    /// The state word each worker last picked up (its own line; written once per call,
    /// read by the caller only when the barrier is slow). `Relaxed`: a hint, not a protocol.
    picked: Box<[CachePadded<AtomicU64>]>,
    /// Parking slots, one per thread (slot 0: the dispatching caller).
    slots: Box<[CachePadded<Slot>]>,
    /// Set when `panic` holds a payload (checked after the barrier without locking).
    panicked: AtomicBool,
    /// The first panic payload of the current call.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// How long a waiting thread polls before it parks.
    spin_budget: Duration,
    /// CPUs the pool may use (`available_parallelism`, or the distinct pinned CPUs); a
    /// generation with more active threads is oversubscribed and its waiters yield.
    n_cpus: usize,
}

// SAFETY: the only non-`Sync` field is `published.job`, an `UnsafeCell` written by the
// dispatcher (who holds the dispatch lock) only while no worker may read it, and read by
// workers only between a publish and their arrival (PROTOCOL.md, "the job cell").
unsafe impl Sync for Shared {}
// SAFETY: every field is `Send` (`JobRef` is `Send`); the cell's discipline is as above.
unsafe impl Send for Shared {}

impl Shared {
    fn new(n_threads: usize, spin_budget: Duration, n_cpus: usize) -> Self {
        Shared {
            published: CachePadded::new(Published {
                state: AtomicU64::new(0),
                job: UnsafeCell::new(None),
            }),
            arrived: CachePadded::new(AtomicUsize::new(0)),
            cursor: CachePadded::new(AtomicUsize::new(0)),
            ranges: (0..n_threads)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            stats: (0..n_threads)
                .map(|_| {
                    CachePadded::new(WorkerStats {
                        rows: AtomicU64::new(0),
                        nanos: AtomicU64::new(0),
                    })
                })
                .collect(),
            picked: (0..n_threads)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            slots: (0..n_threads)
                .map(|_| {
                    CachePadded::new(Slot {
                        sleeping: AtomicBool::new(false),
                        lock: Mutex::new(()),
                        wake: Condvar::new(),
                    })
                })
                .collect(),
            panicked: AtomicBool::new(false),
            panic: Mutex::new(None),
            spin_budget,
            n_cpus,
        }
    }

    /// How long a thread waiting around the generation published as `word` spins before it
    /// yields: not at all when the generation is contended or has more active threads than
    /// the pool has CPUs.
    fn pure_spin(&self, word: u64) -> Duration {
        let n_active = (word & ACTIVE_MASK) as usize;
        if word & CONTENDED != 0 || n_active > self.n_cpus || cfg!(loom) {
            Duration::ZERO
        } else {
            PURE_SPIN
        }
    }

    /// Polls `ready` for the spin budget, with `spin_loop` for the first `pure_spin` and
    /// with `yield_now` after that; `None` if it never fired.
    ///
    /// `stalled(elapsed)` is asked at each clock read; `true` gives up at once (no yields).
    #[cfg(not(loom))]
    fn spin_until<T>(
        &self,
        mut ready: impl FnMut() -> Option<T>,
        mut stalled: impl FnMut(Duration) -> bool,
        pure_spin: Duration,
    ) -> Option<T> {
        if self.spin_budget.is_zero() {
            return None;
        }
        let mut start = None;
        let mut spins: u32 = 0;
        // An oversubscribed or contended generation (`pure_spin` zero) yields from the
        // start: another thread of the pool may be waiting for this CPU.
        let mut yielding = pure_spin.is_zero();
        loop {
            if let Some(value) = ready() {
                return Some(value);
            }
            if yielding {
                thread::yield_now();
            } else {
                spin_loop();
            }
            spins = spins.wrapping_add(1);
            if yielding || spins.is_multiple_of(SPINS_PER_CLOCK_READ) {
                // The clock starts at the first read, which keeps it off the fast path.
                let start = *start.get_or_insert_with(Instant::now);
                let elapsed = start.elapsed();
                if stalled(elapsed) {
                    // Park at once: a caller that yields keeps sharing its CPU with the
                    // stalled worker (both stay cache-hot, so the scheduler does not move
                    // either), while a parked one is woken onto an idle CPU if there is one.
                    return None;
                }
                if elapsed >= self.spin_budget {
                    break;
                }
                yielding |= elapsed >= pure_spin;
            }
        }
        for _ in 0..YIELD_ROUNDS {
            if let Some(value) = ready() {
                return Some(value);
            }
            thread::yield_now();
        }
        None
    }

    /// The loom model has no clock: poll twice around one scheduling point.
    #[cfg(loom)]
    fn spin_until<T>(
        &self,
        mut ready: impl FnMut() -> Option<T>,
        _stalled: impl FnMut(Duration) -> bool,
        _pure_spin: Duration,
    ) -> Option<T> {
        if self.spin_budget.is_zero() {
            return None;
        }
        if let Some(value) = ready() {
            return Some(value);
        }
        spin_loop();
        ready()
    }

    /// Blocks on slot `slot_idx` until `ready` fires. Whoever makes `ready`'s condition true
    /// must call [`Shared::wake`] afterwards.
    #[cold]
    fn park_until<T>(&self, slot_idx: usize, mut ready: impl FnMut() -> Option<T>) -> T {
        let slot = &self.slots[slot_idx];
        let mut guard = sync::lock(&slot.lock);
        slot.sleeping.store(true, Ordering::Relaxed);
        // Pairs with the fence in `wake`: either this thread's next `ready()` sees the
        // condition, or the waker sees `sleeping` and notifies under the lock.
        fence(Ordering::SeqCst);
        loop {
            if let Some(value) = ready() {
                slot.sleeping.store(false, Ordering::Relaxed);
                return value;
            }
            guard = slot
                .wake
                .wait(guard)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// Wakes the owners of `slots` that park; call after making their condition true.
    /// Returns whether any of them was asleep.
    fn wake(&self, slots: Range<usize>) -> bool {
        // Pairs with the fence in `park_until` (PROTOCOL.md).
        fence(Ordering::SeqCst);
        let mut woke_any = false;
        for slot in &self.slots[slots] {
            if slot.sleeping.load(Ordering::Relaxed) {
                self.wake_slow(slot);
                woke_any = true;
            }
        }
        woke_any
    }

    #[cold]
    fn wake_slow(&self, slot: &Slot) {
        // Taking the lock waits until the owner is inside `wait` (or has left the loop).
        let _guard = sync::lock(&slot.lock);
        slot.wake.notify_one();
    }

    /// Waits (spin, yield, park) until the state word differs from `seen`; returns it.
    /// Skips the spin phase when `spin` is false (surplus workers go straight to sleep).
    fn wait_for_state(&self, worker_idx: usize, seen: u64, spin: bool) -> u64 {
        let ready = || {
            let word = self.published.state.load(Ordering::Acquire);
            (word != seen).then_some(word)
        };
        // The next generation usually has as many threads as the last one.
        let pure_spin = self.pure_spin(seen);
        if spin && let Some(word) = self.spin_until(ready, |_| false, pure_spin) {
            return word;
        }
        self.park_until(worker_idx, ready)
    }

    /// A worker finished its share of a generation with `n_waited` workers besides the caller.
    fn arrive(&self, n_waited: usize) {
        let before = self.arrived.fetch_add(1, Ordering::Release);
        if before + 1 == n_waited {
            self.wake(0..1);
        }
    }

    /// The caller waits until the workers `1..=n_waited` arrived at the barrier of the
    /// generation published as `word`.
    ///
    /// It spins for the budget while they run, but parks early when one of them has not
    /// even picked the generation up after [`PICKUP_GRACE`] ([`WOKEN_PICKUP_GRACE`] when
    /// the caller had to wake someone, `woke_any`): that worker waits for a CPU, and a
    /// spinning caller would keep its own CPU from taking it over (the machine is loaded
    /// by others). Returns whether that happened.
    #[cfg_attr(loom, allow(unused_variables))]
    fn wait_arrivals(&self, n_waited: usize, word: u64, woke_any: bool) -> bool {
        let ready = || (self.arrived.load(Ordering::Acquire) == n_waited).then_some(());
        let mut checked = false;
        #[cfg(not(loom))]
        let grace = if woke_any {
            WOKEN_PICKUP_GRACE
        } else {
            PICKUP_GRACE
        };
        #[cfg(loom)]
        let grace = Duration::ZERO;
        let pure_spin = self.pure_spin(word);
        let mut found_stalled = false;
        let stalled = |elapsed: Duration| {
            if checked || elapsed < grace {
                return false;
            }
            checked = true;
            found_stalled = self.picked[1..=n_waited]
                .iter()
                .any(|picked| picked.load(Ordering::Relaxed) != word);
            found_stalled
        };
        if self.spin_until(ready, stalled, pure_spin).is_none() {
            self.park_until(0, ready);
        }
        found_stalled
    }

    /// Keeps the first panic payload of the current call.
    fn record_panic(&self, payload: Box<dyn Any + Send>) {
        let mut first = sync::lock(&self.panic);
        if first.is_none() {
            *first = Some(payload);
        }
        self.panicked.store(true, Ordering::Relaxed);
    }

    /// Takes the recorded panic, if any; call after the barrier.
    fn take_panic(&self) -> Option<Box<dyn Any + Send>> {
        if !self.panicked.load(Ordering::Relaxed) {
            return None;
        }
        self.panicked.store(false, Ordering::Relaxed);
        sync::lock(&self.panic).take()
    }
}

/// Runs `f`, recording a panic in `shared` instead of unwinding.
fn run_catching(shared: &Shared, f: impl FnOnce()) {
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(f)) {
        shared.record_panic(payload);
    }
}

/// The body of every spawned worker thread.
fn worker_main(shared: Arc<Shared>, worker_idx: usize) {
    WORKER_OF.with(|pool| pool.set(&*shared as *const Shared as usize));
    let mut seen = 0;
    let mut spin = true;
    loop {
        let word = shared.wait_for_state(worker_idx, seen, spin);
        seen = word;
        if word & SHUTDOWN != 0 {
            return;
        }
        let n_active = (word & ACTIVE_MASK) as usize;
        if worker_idx >= n_active {
            // Surplus in this generation: sleep instead of polling.
            spin = false;
            continue;
        }
        spin = true;
        shared.picked[worker_idx].store(word, Ordering::Relaxed);
        // SAFETY: this worker is active in the generation it just loaded (acquire), so the
        // dispatcher wrote the job before that store and will not write it again before
        // this worker arrives below.
        let job = shared.published.job.with(|job| unsafe { *job });
        if let Some(job) = job {
            // SAFETY: the dispatcher keeps the body alive until this worker arrives.
            run_catching(&shared, || unsafe { job.call(worker_idx) });
        }
        shared.arrive(n_active - 1);
    }
}

/// The caller's wait at the barrier; also waits when dropped, so the caller cannot leave
/// the dispatch (not even by unwinding) while a worker may still call the erased body.
struct Barrier<'a> {
    shared: &'a Shared,
    n_waited: usize,
    word: u64,
    woke_any: bool,
    done: bool,
}

impl Barrier<'_> {
    /// Waits for every worker; returns whether one was found waiting for a CPU.
    fn wait(mut self) -> bool {
        let stalled = self
            .shared
            .wait_arrivals(self.n_waited, self.word, self.woke_any);
        self.done = true;
        stalled
    }
}

impl Drop for Barrier<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.shared
                .wait_arrivals(self.n_waited, self.word, self.woke_any);
        }
    }
}

/// State only the dispatching caller touches, under the dispatch lock.
#[derive(Debug)]
struct DispatchState {
    /// The last published generation.
    generation: u64,
    /// `Adaptive`'s moving average of rows per second per worker (0.0 = no history).
    speeds: Vec<f64>,
    /// Calls still to publish with [`CONTENDED`].
    contended_calls: u32,
}

/// Builds a [`ThreadPool`]: threads, pinning and spin budget.
///
/// ```
/// use std::time::Duration;
/// use threadpool::{Pinning, ThreadPoolBuilder};
///
/// let pool = ThreadPoolBuilder::default()
///     .n_threads(2)
///     .pinning(Pinning::None)
///     .spin_budget(Duration::from_micros(50))
///     .build()?;
/// assert_eq!(pool.n_threads(), 2);
/// # Ok::<(), threadpool::ThreadPoolError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct ThreadPoolBuilder {
    n_threads: Option<usize>,
    pinning: Pinning,
    spin_budget: Option<Duration>,
}

impl ThreadPoolBuilder {
    /// Sets the number of threads, the caller included (0 counts as 1). The default is
    /// [`std::thread::available_parallelism`].
    pub fn n_threads(mut self, n_threads: usize) -> Self {
        self.n_threads = Some(n_threads);
        self
    }

    /// Sets the pinning (default [`Pinning::None`]).
    pub fn pinning(mut self, pinning: Pinning) -> Self {
        self.pinning = pinning;
        self
    }

    /// Sets how long a waiting thread polls before it parks (default
    /// [`DEFAULT_SPIN_BUDGET`]); `Duration::ZERO` parks at once.
    pub fn spin_budget(mut self, spin_budget: Duration) -> Self {
        self.spin_budget = Some(spin_budget);
        self
    }

    /// Spawns the workers (`n_threads - 1` of them: the caller is worker 0).
    ///
    /// Pinning failures do not fail the build; read them with
    /// [`ThreadPool::pinning_failures`].
    pub fn build(&self) -> Result<ThreadPool, ThreadPoolError> {
        let n_cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let n_threads = self.n_threads.unwrap_or(n_cpus).max(1);
        if n_threads > MAX_THREADS {
            return Err(ThreadPoolError::TooManyThreads(n_threads));
        }
        // The CPUs to pin to (`None` without pinning, empty when the allowed set could not
        // be read) and how many distinct CPUs the pool may use.
        let (targets, n_cpus): (Option<Vec<usize>>, usize) = match &self.pinning {
            Pinning::None => (None, n_cpus),
            Pinning::Sequential => {
                let allowed: Vec<usize> = core_affinity::get_core_ids()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|core| core.id)
                    .collect();
                (Some(allowed), n_cpus)
            }
            Pinning::Cpus(cpus) if cpus.is_empty() => return Err(ThreadPoolError::EmptyCpuList),
            Pinning::Cpus(cpus) => {
                let mut distinct = cpus.clone();
                distinct.sort_unstable();
                distinct.dedup();
                (Some(cpus.clone()), distinct.len().min(n_cpus))
            }
        };
        let spin_budget = self.spin_budget.unwrap_or(DEFAULT_SPIN_BUDGET);
        let shared = Arc::new(Shared::new(n_threads, spin_budget, n_cpus));
        let mut pool = ThreadPool {
            shared: Arc::clone(&shared),
            n_threads,
            handles: Vec::with_capacity(n_threads - 1),
            dispatch: Mutex::new(DispatchState {
                generation: 0,
                speeds: vec![0.0; n_threads],
                contended_calls: 0,
            }),
            owner: AtomicUsize::new(0),
            pinning_failures: Vec::new(),
        };
        // Each pinned worker reports `(worker_idx, cpu, pinned)` once, from its own thread.
        let (pinned_tx, pinned_rx) = std::sync::mpsc::channel::<(usize, Option<usize>, bool)>();
        for worker_idx in 1..n_threads {
            let shared = Arc::clone(&shared);
            // This worker's CPU: `None` without pinning, `Some(None)` when none is known.
            let target = targets
                .as_ref()
                .map(|cpus| (!cpus.is_empty()).then(|| cpus[worker_idx % cpus.len()]));
            let pinned_tx = pinned_tx.clone();
            let spawned = thread::Builder::new()
                .name(format!("threadpool-{worker_idx}"))
                .spawn(move || {
                    if let Some(cpu) = target {
                        let pinned = cpu.is_some_and(|id| {
                            // `core_affinity` indexes a `cpu_set_t` without a bounds check.
                            id < CPU_SET_SIZE
                                && core_affinity::set_for_current(core_affinity::CoreId { id })
                        });
                        // The receiver is gone only if the build failed; nothing to report.
                        let _ = pinned_tx.send((worker_idx, cpu, pinned));
                    }
                    drop(pinned_tx);
                    worker_main(shared, worker_idx);
                });
            match spawned {
                Ok(handle) => pool.handles.push(handle),
                // Dropping `pool` shuts down and joins the workers spawned so far.
                Err(source) => return Err(ThreadPoolError::Spawn { worker_idx, source }),
            }
        }
        drop(pinned_tx);
        if targets.is_some() {
            let mut failures: Vec<PinningFailure> = pinned_rx
                .iter()
                .filter(|(_, _, pinned)| !pinned)
                .map(|(worker_idx, cpu, _)| PinningFailure { worker_idx, cpu })
                .collect();
            failures.sort_by_key(|failure| failure.worker_idx);
            pool.pinning_failures = failures;
        }
        Ok(pool)
    }
}

/// A persistent fork-join pool; the calling thread is worker 0.
///
/// `parallel_for` and `broadcast` publish one generation, run worker 0's share on the
/// calling thread and return when every active worker has finished (a barrier), so the
/// closures may borrow from the caller's stack. Calls from several threads are serialized;
/// a call from inside a task of the same pool runs inline on the calling thread.
pub struct ThreadPool {
    shared: Arc<Shared>,
    n_threads: usize,
    handles: Vec<thread::JoinHandle<()>>,
    /// Serializes dispatches from several outside threads.
    dispatch: Mutex<DispatchState>,
    /// [`thread_tag`] of the thread holding `dispatch`, or 0.
    ///
    /// ## Memory ordering
    /// `Relaxed`: a thread only compares it with its own tag, which only that thread stores
    /// (and clears before releasing the lock), so it reads its own tag exactly while it
    /// dispatches.
    owner: AtomicUsize,
    pinning_failures: Vec<PinningFailure>,
}

impl fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadPool")
            .field("n_threads", &self.n_threads)
            .field("spin_budget", &self.shared.spin_budget)
            .field("oversubscribed", &(self.n_threads > self.shared.n_cpus))
            .field("pinning_failures", &self.pinning_failures)
            .finish_non_exhaustive()
    }
}

impl ThreadPool {
    /// A pool of `n_threads` threads (clamped to `1..=MAX_THREADS`), unpinned, with the
    /// default spin budget.
    ///
    /// # Panics
    /// If the operating system refuses to spawn a thread (as [`std::thread::spawn`] does);
    /// use [`ThreadPoolBuilder::build`] to get the error instead.
    pub fn new(n_threads: usize) -> Self {
        let n_threads = n_threads.min(MAX_THREADS);
        match ThreadPoolBuilder::default().n_threads(n_threads).build() {
            Ok(pool) => pool,
            Err(err) => panic!("{err}"),
        }
    }

    /// Threads in the pool, the caller included.
    pub fn n_threads(&self) -> usize {
        self.n_threads
    }

    /// How long a waiting thread polls before it parks.
    pub fn spin_budget(&self) -> Duration {
        self.shared.spin_budget
    }

    /// Workers whose pinning failed (empty without pinning or when all succeeded).
    pub fn pinning_failures(&self) -> &[PinningFailure] {
        &self.pinning_failures
    }

    /// Whether the current thread is inside a task of this pool (a worker of it, or the
    /// thread dispatching on it).
    fn is_nested(&self) -> bool {
        let shared = &*self.shared as *const Shared as usize;
        WORKER_OF.with(|pool| pool.get() == shared)
            || self.owner.load(Ordering::Relaxed) == thread_tag()
    }

    /// Runs `f` over ranges covering `0..n_items` exactly once, split by `policy`.
    ///
    /// ## Guarantee relied on by `unsafe` code
    ///
    /// The ranges handed to `f` in one call are disjoint and cover `0..n_items`, and every
    /// call of `f` has returned (its writes visible to the caller) before this returns.
    /// Callers may rely on this for soundness: `matmul-kernel` writes each output row through
    /// a shared raw pointer from the one range that holds it. Breaking it is a soundness bug.
    ///
    /// Returns when every range has been processed. Panics in `f` are resumed here (the
    /// first one) after every worker finished; the pool stays usable. Called from inside
    /// a task of this pool, it runs `f(0..n_items)` inline.
    pub fn parallel_for<F>(&self, n_items: usize, policy: SchedulePolicy, f: F)
    where
        F: Fn(Range<usize>) + Sync,
    {
        self.parallel_for_with_threads(self.n_threads, n_items, policy, f);
    }

    /// As [`ThreadPool::parallel_for`] on the first `n_threads` workers only (clamped to
    /// `1..=self.n_threads()`); the others stay asleep.
    pub fn parallel_for_with_threads<F>(
        &self,
        n_threads: usize,
        n_items: usize,
        policy: SchedulePolicy,
        f: F,
    ) where
        F: Fn(Range<usize>) + Sync,
    {
        if n_items == 0 {
            return;
        }
        let n_threads = n_threads.clamp(1, self.n_threads);
        if n_threads == 1 || self.is_nested() {
            f(0..n_items);
            return;
        }
        let shared = &*self.shared;
        let mut state = self.lock_dispatch();
        let plan = Plan::prepare(
            policy,
            n_items,
            n_threads,
            &state.speeds,
            &shared.cursor,
            &shared.ranges,
        );
        let measure = policy == SchedulePolicy::Adaptive;
        let body = |worker_idx: usize| {
            if measure {
                let started = std::time::Instant::now();
                let rows = plan.run(worker_idx, &shared.cursor, &shared.ranges, &f);
                let nanos = started.elapsed().as_nanos();
                let stats = &shared.stats[worker_idx];
                stats.rows.store(rows as u64, Ordering::Relaxed);
                stats.nanos.store(nanos as u64, Ordering::Relaxed);
            } else {
                plan.run(worker_idx, &shared.cursor, &shared.ranges, &f);
            }
        };
        let panicked = self.run_locked(&mut state, n_threads, &body);
        if measure && panicked.is_none() {
            update_speeds(&mut state.speeds[..n_threads], &shared.stats[..n_threads]);
        }
        self.unlock_dispatch(state, panicked);
    }

    /// Runs `f(worker_idx)` once on every worker, the caller being worker 0.
    ///
    /// Called from inside a task of this pool, it runs `f(0)`, …, `f(n_threads - 1)` inline.
    pub fn broadcast<F>(&self, f: F)
    where
        F: Fn(usize) + Sync,
    {
        if self.is_nested() {
            (0..self.n_threads).for_each(f);
            return;
        }
        let mut state = self.lock_dispatch();
        let panicked = self.run_locked(&mut state, self.n_threads, &f);
        self.unlock_dispatch(state, panicked);
    }

    /// Takes the dispatch lock and records this thread as its owner.
    fn lock_dispatch(&self) -> MutexGuard<'_, DispatchState> {
        let state = sync::lock(&self.dispatch);
        self.owner.store(thread_tag(), Ordering::Relaxed);
        state
    }

    /// Releases the dispatch lock, then resumes `panicked` if any.
    fn unlock_dispatch(
        &self,
        state: MutexGuard<'_, DispatchState>,
        panicked: Option<Box<dyn Any + Send>>,
    ) {
        self.owner.store(0, Ordering::Relaxed);
        drop(state);
        if let Some(payload) = panicked {
            panic::resume_unwind(payload);
        }
    }

    /// Publishes `body` to workers `1..n_active`, runs `body(0)`, waits for the barrier and
    /// returns the first panic. Needs the dispatch lock (`state`).
    fn run_locked(
        &self,
        state: &mut DispatchState,
        n_active: usize,
        body: &(dyn Fn(usize) + Sync),
    ) -> Option<Box<dyn Any + Send>> {
        let shared = &*self.shared;
        if n_active > 1 {
            state.generation += 1;
            // SAFETY: the dispatch lock is held, so no other dispatcher touches the cell;
            // every worker that read the previous job arrived before the previous dispatch
            // returned, and no worker reads the cell before the state store below.
            // `JobRef::erase`: `Barrier` keeps `body` borrowed until all readers arrived.
            shared.published.job.with_mut(|job| unsafe {
                *job = Some(JobRef::erase(body));
            });
            shared.arrived.store(0, Ordering::Relaxed);
            let flags = if state.contended_calls > 0 {
                state.contended_calls -= 1;
                CONTENDED
            } else {
                0
            };
            let word = state_word(state.generation, n_active, flags);
            shared.published.state.store(word, Ordering::Release);
            let mut barrier = Barrier {
                shared,
                n_waited: n_active - 1,
                word,
                woke_any: false,
                done: false,
            };
            barrier.woke_any = shared.wake(1..n_active);
            run_catching(shared, || body(0));
            // Only a stall with pure spinning (re)starts contended mode: contended calls
            // cost a few yields each, so pure spinning is retried after a bounded run.
            if barrier.wait() && flags == 0 {
                state.contended_calls = CONTENDED_CALLS;
            }
        } else {
            run_catching(shared, || body(0));
        }
        shared.take_panic()
    }
}

/// Folds the last `Adaptive` call's per-worker rows per second into `speeds`.
fn update_speeds(speeds: &mut [f64], stats: &[CachePadded<WorkerStats>]) {
    for (speed, stats) in speeds.iter_mut().zip(stats) {
        let rows = stats.rows.load(Ordering::Relaxed);
        let nanos = stats.nanos.load(Ordering::Relaxed);
        if rows == 0 || nanos == 0 {
            continue;
        }
        let measured = rows as f64 * 1e9 / nanos as f64;
        *speed = if *speed > 0.0 {
            crate::schedule::ADAPTIVE_EMA_WEIGHT * measured
                + (1.0 - crate::schedule::ADAPTIVE_EMA_WEIGHT) * *speed
        } else {
            measured
        };
    }
}

impl Drop for ThreadPool {
    /// Publishes a shutdown generation, wakes every worker and joins them.
    fn drop(&mut self) {
        let word = {
            let mut state = sync::lock(&self.dispatch);
            state.generation += 1;
            state_word(state.generation, 0, SHUTDOWN)
        };
        self.shared.published.state.store(word, Ordering::Release);
        self.shared.wake(1..self.n_threads);
        for handle in self.handles.drain(..) {
            // A worker catches every panic of user code; a join error cannot carry one.
            let _ = handle.join();
        }
    }
}

#[cfg(all(test, not(loom)))]
impl ThreadPool {
    /// `Adaptive`'s current rows-per-second averages, one per worker.
    pub(crate) fn adaptive_speeds(&self) -> Vec<f64> {
        sync::lock(&self.dispatch).speeds.clone()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Polls `condition` with yields; fails after far more polls than a working pool needs.
    fn eventually(what: &str, condition: impl Fn() -> bool) {
        for _ in 0..50_000_000u64 {
            if condition() {
                return;
            }
            std::thread::yield_now();
        }
        panic!("{what}: never happened");
    }

    #[test]
    fn surplus_workers_park_at_once_while_active_ones_keep_spinning() {
        let pool = ThreadPoolBuilder::default()
            .n_threads(4)
            .spin_budget(Duration::from_secs(3600))
            .build()
            .unwrap();
        pool.parallel_for_with_threads(2, 64, SchedulePolicy::Static, |_| {});
        // Workers 2 and 3 saw a generation without them: they park instead of spinning for
        // the hour-long budget.
        for worker_idx in [2, 3] {
            let slot = &pool.shared.slots[worker_idx];
            eventually(&format!("worker {worker_idx} parks"), || {
                slot.sleeping.load(Ordering::SeqCst)
            });
        }
        // Worker 1 was active: it keeps polling for the next call.
        assert!(!pool.shared.slots[1].sleeping.load(Ordering::SeqCst));
        // The sleepers are woken by the next call that includes them.
        let seen: Vec<AtomicUsize> = (0..4).map(|_| AtomicUsize::new(0)).collect();
        pool.broadcast(|worker_idx| {
            seen[worker_idx].fetch_add(1, Ordering::Relaxed);
        });
        assert!(seen.iter().all(|n| n.load(Ordering::Relaxed) == 1));
    }

    #[test]
    fn workers_park_after_the_spin_budget() {
        let pool = ThreadPoolBuilder::default()
            .n_threads(3)
            .spin_budget(Duration::from_micros(50))
            .build()
            .unwrap();
        pool.broadcast(|_| {});
        for worker_idx in 1..3 {
            let slot = &pool.shared.slots[worker_idx];
            eventually(&format!("worker {worker_idx} parks"), || {
                slot.sleeping.load(Ordering::SeqCst)
            });
        }
    }

    #[test]
    fn state_words_keep_their_fields_apart() {
        let word = state_word(5, MAX_THREADS, CONTENDED);
        assert_eq!(word & ACTIVE_MASK, MAX_THREADS as u64);
        assert_eq!(word & SHUTDOWN, 0);
        assert_ne!(word & CONTENDED, 0);
        assert_eq!(word >> GENERATION_SHIFT, 5);
        assert_ne!(state_word(1, 0, SHUTDOWN) & SHUTDOWN, 0);
        let pool = ThreadPool::new(2);
        let n_cpus = pool.shared.n_cpus;
        assert_eq!(pool.shared.pure_spin(word), Duration::ZERO);
        assert_eq!(
            pool.shared.pure_spin(state_word(5, 2.min(n_cpus), 0)),
            PURE_SPIN
        );
        assert_eq!(
            pool.shared.pure_spin(state_word(5, n_cpus + 1, 0)),
            Duration::ZERO
        );
    }
}
