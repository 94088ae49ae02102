//! The caller's side of a generation's barrier, as a guard that waits even when dropped.

use crate::protocol::Shared;
use crate::wait::Arrivals;

/// The caller's wait at the barrier; also waits when dropped, so the caller cannot leave
/// the dispatch (not even by unwinding) while a worker may still call the erased body.
pub(crate) struct Barrier<'a> {
    /// The pool's shared state.
    pub(crate) shared: &'a Shared,
    /// Workers besides the caller that must arrive (or be known dead).
    pub(crate) n_waited: usize,
    /// The state word of the generation.
    pub(crate) word: u64,
    /// Whether publishing the generation woke a parked worker.
    pub(crate) woke_any: bool,
    /// Set once [`Barrier::wait`] returned.
    pub(crate) done: bool,
}

impl Barrier<'_> {
    /// Waits for every worker; returns whether one was found waiting for a CPU and the
    /// first death seen.
    pub(crate) fn wait(mut self) -> Arrivals {
        let arrivals = self
            .shared
            .wait_arrivals(self.n_waited, self.word, self.woke_any);
        self.done = true;
        arrivals
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
