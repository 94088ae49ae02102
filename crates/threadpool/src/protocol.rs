//! The generation / arrive / park protocol: the state word, the shared state, parking, waking
//! and arriving, and how a dead worker is reported.
//!
//! `PROTOCOL.md` beside this file states the protocol and argues that no wake-up is lost;
//! `wait.rs` decides how long a thread spins before it parks, `worker.rs` runs the worker
//! side, `barrier.rs` and `pool.rs` the caller side.

use crate::sync::{
    self, AtomicBool, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering, UnsafeCell, fence,
};
use crossbeam_utils::CachePadded;
use std::any::Any;
use std::ops::Range;
use std::panic::{self, AssertUnwindSafe};
use std::time::Duration;

/// Bits of the state word that hold the number of active workers of a generation.
pub(crate) const ACTIVE_BITS: u32 = 16;
/// Mask of the active-worker count in the state word.
pub(crate) const ACTIVE_MASK: u64 = (1 << ACTIVE_BITS) - 1;
/// State-word flag: the pool is shutting down; workers exit.
pub(crate) const SHUTDOWN: u64 = 1 << ACTIVE_BITS;
/// State-word flag: the last calls found the machine contended (see [`CONTENDED_CALLS`]);
/// waiting threads yield between polls from the start instead of spinning first
/// (`wait.rs`).
pub(crate) const CONTENDED: u64 = 1 << (ACTIVE_BITS + 1);
/// The generation occupies the state word from this bit up (46 bits: no wrap in practice).
pub(crate) const GENERATION_SHIFT: u32 = ACTIVE_BITS + 2;
/// Calls published with [`CONTENDED`] after a call without it found a worker waiting for
/// a CPU; then pure spinning is tried again.
pub(crate) const CONTENDED_CALLS: u32 = 64;
/// The largest pool: the active-worker count must fit in 16 bits of the state word.
pub const MAX_THREADS: usize = ACTIVE_MASK as usize;

/// Builds the state word of `generation` with `n_active` workers and `flags` (`CONTENDED`,
/// or `SHUTDOWN` with 0 workers at exit).
pub(crate) fn state_word(generation: u64, n_active: usize, flags: u64) -> u64 {
    (generation << GENERATION_SHIFT) | (n_active as u64) | flags
}

/// The number of active workers (the caller included) of the generation published as `word`.
pub(crate) fn n_active(word: u64) -> usize {
    (word & ACTIVE_MASK) as usize
}

/// A type-erased pointer to the dispatching caller's per-worker body.
#[derive(Clone, Copy)]
pub(crate) struct JobRef(*const (dyn Fn(usize) + Sync));

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
    pub(crate) unsafe fn erase<'a>(body: &'a (dyn Fn(usize) + Sync + 'a)) -> JobRef {
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
    pub(crate) unsafe fn call(self, worker_idx: usize) {
        // SAFETY: the referent is alive by this function's contract.
        unsafe { (*self.0)(worker_idx) }
    }
}

/// The line a waiting worker polls: the state word and the job it publishes.
pub(crate) struct Published {
    /// `generation << GENERATION_SHIFT | CONTENDED? | SHUTDOWN? | n_active`.
    ///
    /// ## Memory ordering
    /// The dispatcher writes `job`, the cursor and the ranges, then stores the word with
    /// `Release`; a worker that loads the new word with `Acquire` sees them. The word is also
    /// one side of the store/`fence(SeqCst)`/load handshake with `Slot::sleeping`
    /// (PROTOCOL.md).
    pub(crate) state: AtomicU64,
    /// The current generation's body; written only by the dispatcher while no worker can
    /// read it (between a completed barrier and the next state store).
    pub(crate) job: UnsafeCell<Option<JobRef>>,
}

/// Where one thread parks: worker `i` uses slot `i`; slot 0 is the dispatching caller's.
pub(crate) struct Slot {
    /// True while the owner is (about to be) blocked on `wake`.
    ///
    /// ## Memory ordering
    /// The owner stores `true`, issues `fence(SeqCst)` and then loads the condition it waits
    /// for; a waker makes the condition true, issues `fence(SeqCst)` and then loads
    /// `sleeping`. The two fences are ordered in the single total order of `SeqCst`
    /// operations, so at least one side sees the other's store (PROTOCOL.md). Fences rather
    /// than `SeqCst` accesses: about the same cost on x86, and loom models fences exactly.
    pub(crate) sleeping: AtomicBool,
    /// Held by the owner from announcing `sleeping` until `wake.wait` releases it.
    lock: Mutex<()>,
    /// Notified by a waker that saw `sleeping`.
    wake: Condvar,
}

/// One worker's last `Adaptive` call: rows processed and nanoseconds taken.
pub(crate) struct WorkerStats {
    /// Rows the worker processed.
    pub(crate) rows: AtomicU64,
    /// Wall time of the worker's share in nanoseconds.
    pub(crate) nanos: AtomicU64,
}

/// A worker whose thread ended outside the pool's `Drop`, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Death {
    /// The worker that died.
    pub(crate) worker_idx: usize,
    /// Its panic message.
    pub(crate) message: String,
}

/// State shared by the dispatcher and the workers.
pub(crate) struct Shared {
    /// The state word and the job, on one line: a waking worker fetches both at once.
    pub(crate) published: CachePadded<Published>,
    /// Workers (not counting the caller) that finished the current generation; reset by the
    /// dispatcher before each publish. Incremented with `Release` (the worker's writes are
    /// visible to the caller's `Acquire` load) and, by the last worker, followed by the
    /// fence handshake with slot 0's `sleeping`. The caller itself adds one for each dead
    /// worker that will never arrive (`credit_deaths`).
    pub(crate) arrived: CachePadded<AtomicUsize>,
    /// The dynamic policies' cursor (a chunk index or a row index, by policy).
    pub(crate) cursor: CachePadded<AtomicUsize>,
    /// Per-worker packed `(lo, hi)` ranges of `WorkStealing` and `Adaptive`.
    pub(crate) ranges: Box<[CachePadded<AtomicU64>]>,
    /// Per-worker measurements of the last `Adaptive` call.
    pub(crate) stats: Box<[CachePadded<WorkerStats>]>,
    /// The state word each worker last picked up (its own line; written once per call,
    /// read by the caller only when the barrier is slow). `Relaxed`: a hint, except after a
    /// death, where the dead worker's last value (published by `n_dead`) tells the caller
    /// whether it will arrive.
    pub(crate) picked: Box<[CachePadded<AtomicU64>]>,
    /// Parking slots, one per thread (slot 0: the dispatching caller).
    pub(crate) slots: Box<[CachePadded<Slot>]>,
    /// Set when `panic` holds a payload (checked after the barrier without locking).
    panicked: AtomicBool,
    /// The first panic payload of the current call.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// How many entries `deaths` has.
    ///
    /// ## Memory ordering
    /// A dying worker pushes to `deaths`, increments this with `Release`, issues
    /// `fence(SeqCst)` and wakes slot 0: the same handshake as an arrival, so a caller
    /// parked at the barrier cannot sleep through a death. Only the caller's park path
    /// loads it (`Acquire`); the spinning fast path never does.
    n_dead: CachePadded<AtomicUsize>,
    /// Every worker that died, in the order they died.
    deaths: Mutex<Vec<Death>>,
    /// How long a waiting thread polls before it parks.
    pub(crate) spin_budget: Duration,
    /// The CPUs this pool may use: std's `available_parallelism` estimate, or the distinct
    /// CPUs the pool is pinned to if fewer (the workspace calls this count `effective_cpus`,
    /// as `device-profile` does). A generation with more active threads is oversubscribed
    /// and its waiters yield.
    pub(crate) effective_cpus: usize,
}

// SAFETY: the only non-`Sync` field is `published.job`, an `UnsafeCell` written by the
// dispatcher (who holds the dispatch lock) only while no worker may read it, and read by
// workers only between a publish and their arrival (PROTOCOL.md, "the job cell").
unsafe impl Sync for Shared {}
// SAFETY: every field is `Send` (`JobRef` is `Send`); the cell's discipline is as above.
unsafe impl Send for Shared {}

impl Shared {
    /// The state of a pool of `n_threads` threads, no generation published yet.
    pub(crate) fn new(n_threads: usize, spin_budget: Duration, effective_cpus: usize) -> Self {
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
            n_dead: CachePadded::new(AtomicUsize::new(0)),
            deaths: Mutex::new(Vec::new()),
            spin_budget,
            effective_cpus,
        }
    }

    /// Blocks on slot `slot_idx` until `ready` fires. Whoever makes `ready`'s condition true
    /// must call [`Shared::wake`] afterwards.
    #[cold]
    pub(crate) fn park_until<T>(&self, slot_idx: usize, mut ready: impl FnMut() -> Option<T>) -> T {
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
    pub(crate) fn wake(&self, slots: Range<usize>) -> bool {
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

    /// A worker finished its share of a generation with `n_waited` workers besides the caller.
    pub(crate) fn arrive(&self, n_waited: usize) {
        let before = self.arrived.fetch_add(1, Ordering::Release);
        if before + 1 == n_waited {
            self.wake(0..1);
        }
    }

    /// Records that worker `worker_idx` died (its thread is ending) and wakes the caller.
    ///
    /// Call only from the dying worker's thread, after its last protocol step.
    #[cold]
    pub(crate) fn record_death(&self, worker_idx: usize, message: String) {
        sync::lock(&self.deaths).push(Death {
            worker_idx,
            message,
        });
        // Release: the caller that sees the count also sees the entry and this worker's
        // last `picked` store.
        self.n_dead.fetch_add(1, Ordering::Release);
        // A caller parked at a barrier this worker will never reach must wake up.
        self.wake(0..1);
    }

    /// The caller's barrier check in the park path when workers may have died: credits
    /// `arrived` for every death after the first `*credited` that happened in a worker of
    /// `1..=n_waited` which had not picked up the generation `word` (such a worker will never
    /// arrive), and returns whether the barrier is then complete. `first_death` keeps the
    /// first death seen among the workers `1..=n_waited`: a call on fewer workers than the
    /// pool has is not failed by a death it did not wait for.
    ///
    /// A worker that picked up `word` before it died has arrived: between its pickup and its
    /// arrival a worker only runs the job under `catch_unwind` (see `worker.rs`), so it cannot
    /// die there.
    #[cold]
    pub(crate) fn credit_deaths(
        &self,
        credited: &mut usize,
        n_waited: usize,
        word: u64,
        first_death: &mut Option<Death>,
    ) -> bool {
        if self.n_dead.load(Ordering::Acquire) <= *credited {
            return false;
        }
        let deaths = sync::lock(&self.deaths);
        let mut n_never_arriving = 0;
        for death in &deaths[*credited..] {
            let worker_idx = death.worker_idx;
            // A death outside this call's workers does not concern it: the call ran whole.
            if !(1..=n_waited).contains(&worker_idx) {
                continue;
            }
            if self.picked[worker_idx].load(Ordering::Relaxed) != word {
                n_never_arriving += 1;
            }
            first_death.get_or_insert_with(|| death.clone());
        }
        *credited = deaths.len();
        drop(deaths);
        if n_never_arriving == 0 {
            return false;
        }
        // AcqRel: reading the latest count synchronizes with every worker's `Release`
        // arrival, as the caller's `Acquire` load does on the fast path. Exactly one
        // increment (a worker's or this one) completes the count, so the wake-up logic of
        // `arrive` is unchanged: if a worker completes it, that worker wakes slot 0.
        let before = self.arrived.fetch_add(n_never_arriving, Ordering::AcqRel);
        before + n_never_arriving == n_waited
    }

    /// Keeps the first panic payload of the current call. A later one is dropped here,
    /// outside the lock; a payload whose own drop panics is forgotten instead, so that no
    /// unwind leaves this function (a worker would die before it arrives at the barrier,
    /// the caller would leave the dispatch without its bookkeeping).
    fn record_panic(&self, payload: Box<dyn Any + Send>) {
        let later = {
            let mut first = sync::lock(&self.panic);
            if first.is_none() {
                *first = Some(payload);
                None
            } else {
                Some(payload)
            }
        };
        self.panicked.store(true, Ordering::Relaxed);
        if let Some(later) = later
            && let Err(again) = panic::catch_unwind(AssertUnwindSafe(|| drop(later)))
        {
            std::mem::forget(again);
        }
    }

    /// Takes the recorded panic, if any; call after the barrier.
    pub(crate) fn take_panic(&self) -> Option<Box<dyn Any + Send>> {
        if !self.panicked.load(Ordering::Relaxed) {
            return None;
        }
        self.panicked.store(false, Ordering::Relaxed);
        sync::lock(&self.panic).take()
    }
}

/// Runs `f`, recording a panic in `shared` instead of unwinding.
pub(crate) fn run_catching(shared: &Shared, f: impl FnOnce()) {
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(f)) {
        shared.record_panic(payload);
    }
}

/// The message of a panic payload (`&str` or `String`), for [`Death::message`].
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with a non-string payload".to_string())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn state_words_keep_their_fields_apart() {
        let word = state_word(5, MAX_THREADS, CONTENDED);
        assert_eq!(n_active(word), MAX_THREADS);
        assert_eq!(word & SHUTDOWN, 0);
        assert_ne!(word & CONTENDED, 0);
        assert_eq!(word >> GENERATION_SHIFT, 5);
        assert_ne!(state_word(1, 0, SHUTDOWN) & SHUTDOWN, 0);
        assert_ne!(state_word(1, 3, 0), state_word(2, 3, 0));
    }

    #[test]
    fn panic_messages_are_read_from_str_and_string_payloads() {
        let caught = |f: fn()| std::panic::catch_unwind(f).unwrap_err();
        assert_eq!(panic_message(&*caught(|| panic!("plain"))), "plain");
        assert_eq!(panic_message(&*caught(|| panic!("{}", 42))), "42");
        assert_eq!(
            panic_message(&*caught(|| std::panic::panic_any(7_u8))),
            "a panic with a non-string payload"
        );
    }
}
