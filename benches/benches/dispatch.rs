//! Criterion bench `dispatch`: empty fork-join round trip, ours vs rayon vs std scope.
//!
//! One group per thread count (1, 2, 8: 8 oversubscribes a 2-core machine), with our pool's
//! `broadcast`, rayon's `ThreadPool::broadcast` called from outside the pool and
//! `std::thread::scope` spawning side by side. The group `dispatch_work` runs a fixed amount
//! of work per `parallel_for` at 2 and 8 threads: oversubscription must degrade gracefully.
#![forbid(unsafe_code)]

use benches::contenders::{ForkJoin, fixed_work};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use std::time::Duration;
use threadpool::ThreadPool;

fn dispatch(c: &mut Criterion) {
    for n_threads in [1, 2, 8] {
        let mut group = c.benchmark_group(format!("dispatch/{n_threads}"));
        group
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2));
        for (name, contender) in &ForkJoin::all(n_threads) {
            group.bench_function(*name, |b| b.iter(|| contender.round_trip()));
        }
        group.finish();
    }
}

fn dispatch_work(c: &mut Criterion) {
    let mut group = c.benchmark_group("dispatch_work");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for n_threads in [2, 8] {
        let pool = ThreadPool::new(n_threads);
        group.bench_with_input(BenchmarkId::from_parameter(n_threads), &pool, |b, pool| {
            b.iter(|| fixed_work(pool))
        });
    }
    group.finish();
}

criterion_group!(benches, dispatch, dispatch_work);
criterion_main!(benches);
