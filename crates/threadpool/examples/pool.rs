//! The pool alone: split the rows of a job over four threads by a schedule policy.
//!
//! `cargo run --example pool -p threadpool`

use std::sync::atomic::{AtomicU64, Ordering};
use threadpool::{SchedulePolicy, ThreadPoolBuilder};

fn main() -> Result<(), threadpool::ThreadPoolError> {
    let pool = ThreadPoolBuilder::default()
        .n_threads(4)
        .policy(SchedulePolicy::Guided)
        .build()?;
    let values: Vec<u64> = (1..=10_000).collect();
    let sum = AtomicU64::new(0);
    // `run` splits 0..len by the pool's own policy; each index is handed out exactly once.
    pool.run(values.len(), |rows| {
        let part: u64 = values[rows].iter().sum();
        sum.fetch_add(part, Ordering::Relaxed);
    })?;
    println!(
        "{} threads, policy {}: sum = {}",
        pool.n_threads(),
        pool.policy(),
        sum.load(Ordering::Relaxed)
    );
    // An explicit policy for one call (the tuner and the benches compare policies so).
    let sum_again = AtomicU64::new(0);
    pool.parallel_for(values.len(), SchedulePolicy::WorkStealing, |rows| {
        sum_again.fetch_add(values[rows].iter().sum(), Ordering::Relaxed);
    })?;
    assert_eq!(sum.into_inner(), sum_again.into_inner());
    Ok(())
}
