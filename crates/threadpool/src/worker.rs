//! The worker side: the loop every spawned worker runs, and the thread identity used to run
//! nested calls inline.

use crate::protocol::{SHUTDOWN, Shared, n_active, panic_message, run_catching};
use crate::sync::{Arc, Ordering};
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};

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
pub(crate) fn thread_tag() -> usize {
    THREAD_TAG.with(|tag| tag as *const u8 as usize)
}

/// Whether the current thread is a worker of the pool whose shared state is `shared`.
pub(crate) fn is_worker_of(shared: &Shared) -> bool {
    let shared = shared as *const Shared as usize;
    WORKER_OF.with(|pool| pool.get() == shared)
}

/// The body of every spawned worker thread: `start` (pinning), then the worker loop until
/// shutdown.
///
/// A panic that escapes (in `start`, or anywhere outside a job, which runs under
/// `catch_unwind`) kills the worker: it is recorded as a death, which wakes the caller and
/// fails the current and every later dispatch instead of leaving them waiting forever.
pub(crate) fn worker_thread(shared: Arc<Shared>, worker_idx: usize, start: impl FnOnce()) {
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
        start();
        worker_loop(&shared, worker_idx);
    }));
    if let Err(payload) = outcome {
        shared.record_death(worker_idx, panic_message(&*payload));
    }
}

/// Waits for each generation and runs this worker's share of it, until shutdown.
fn worker_loop(shared: &Shared, worker_idx: usize) {
    WORKER_OF.with(|pool| pool.set(shared as *const Shared as usize));
    let mut seen = 0;
    let mut spin = true;
    loop {
        let word = shared.wait_for_state(worker_idx, seen, spin);
        seen = word;
        if word & SHUTDOWN != 0 {
            return;
        }
        let n_active = n_active(word);
        if worker_idx >= n_active {
            // Surplus in this generation: sleep instead of polling.
            spin = false;
            continue;
        }
        spin = true;
        // From this store to `arrive` nothing can unwind (the job runs under
        // `catch_unwind`), so a worker that picked a generation up always arrives at its
        // barrier; `Shared::credit_deaths` relies on this.
        shared.picked[worker_idx].store(word, Ordering::Relaxed);
        // SAFETY: this worker is active in the generation it just loaded (acquire), so the
        // dispatcher wrote the job before that store and will not write it again before
        // this worker arrives below.
        let job = shared.published.job.with(|job| unsafe { *job });
        if let Some(job) = job {
            // SAFETY: the dispatcher keeps the body alive until this worker arrives.
            run_catching(shared, || unsafe { job.call(worker_idx) });
        }
        shared.arrive(n_active - 1);
    }
}
