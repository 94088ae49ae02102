//! The fork-join contenders: an empty round trip on each pool, and a fixed amount of work.

use std::hint::black_box;
use threadpool::{SchedulePolicy, ThreadPool};

/// One way to run an empty fork-join on `n_threads` threads.
pub enum ForkJoin {
    /// Our pool.
    Pool(ThreadPool),
    /// A rayon pool, `broadcast` called from outside it.
    Rayon(rayon::ThreadPool),
    /// `std::thread::scope` spawning `n_threads - 1` threads, the caller being the first.
    StdScope(usize),
}

impl ForkJoin {
    /// Our pool of `n_threads`.
    pub fn pool(n_threads: usize) -> Self {
        ForkJoin::Pool(ThreadPool::new(n_threads))
    }

    /// A rayon pool of `n_threads`.
    pub fn rayon(n_threads: usize) -> Self {
        ForkJoin::Rayon(super::rayon_pool::rayon_pool(n_threads))
    }

    /// Scoped spawning of `n_threads - 1` threads.
    pub fn std_scope(n_threads: usize) -> Self {
        ForkJoin::StdScope(n_threads)
    }

    /// Every contender on `n_threads`, ours first, with the names the reports use.
    pub fn all(n_threads: usize) -> [(&'static str, ForkJoin); 3] {
        [
            ("ours", ForkJoin::pool(n_threads)),
            ("rayon_broadcast", ForkJoin::rayon(n_threads)),
            ("std_scope", ForkJoin::std_scope(n_threads)),
        ]
    }

    /// One empty fork-join round trip.
    pub fn round_trip(&self) {
        match self {
            ForkJoin::Pool(pool) => pool
                .broadcast(|worker_idx| {
                    black_box(worker_idx);
                })
                .expect("a pool worker died"),
            ForkJoin::Rayon(pool) => {
                pool.broadcast(|ctx| {
                    black_box(ctx.index());
                });
            }
            ForkJoin::StdScope(n_threads) => std::thread::scope(|scope| {
                for worker_idx in 1..*n_threads {
                    scope.spawn(move || black_box(worker_idx));
                }
                black_box(0);
            }),
        }
    }
}

/// A fixed amount of arithmetic over `rows`: the `pool_work_ns` payload.
pub fn work(rows: std::ops::Range<usize>) {
    let mut acc = 0u64;
    for row in rows {
        for k in 0..64u64 {
            acc = acc
                .wrapping_mul(6364136223846793005)
                .wrapping_add(row as u64 ^ k);
        }
    }
    black_box(acc);
}

/// Rows of the `pool_work_ns` payload: about 1 ms of work on one core.
pub const WORK_ROWS: usize = 8192;

/// One `parallel_for` of [`WORK_ROWS`] rows of [`work`] on `pool`.
pub fn fixed_work(pool: &ThreadPool) {
    pool.parallel_for(WORK_ROWS, SchedulePolicy::Fixed16, work)
        .expect("a pool worker died");
}
