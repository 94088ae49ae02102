//! Criterion bench `dispatch`: empty fork-join round trip, ours vs rayon vs std scope.

use criterion::{Criterion, criterion_group, criterion_main};

fn dispatch(c: &mut Criterion) {
    let pool = threadpool::ThreadPool::new(2);
    c.bench_function("pool_roundtrip_2", |b| b.iter(|| pool.broadcast(|_| {})));
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
