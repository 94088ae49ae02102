//! Criterion bench `gemv`: 4096×4096 f32 GEMV, ours on every available kernel vs the same-size
//! read and the peers, at 1, 2 and 8 (oversubscribed) threads, in one run.

use benches::matmul::{N, POLICY, peer_gemv, peer_names, values};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use matmul_kernel::{Isa, WeightBuffer};
use std::hint::black_box;
use threadpool::ThreadPool;

fn gemv(c: &mut Criterion) {
    let w = WeightBuffer::from_slice(&values(1, N * N)).expect("weight buffer");
    let read_buf = WeightBuffer::from_slice(&values(2, N * N)).expect("read buffer");
    let x = values(3, N);
    let mut y = vec![0.0f32; N];
    for n_threads in [1, 2, 8] {
        let pool = ThreadPool::new(n_threads);
        let rayon_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(n_threads)
            .build()
            .expect("rayon pool");
        let mut group = c.benchmark_group(format!("gemv_{N}/{n_threads}t"));
        group.throughput(Throughput::Bytes((N * N * 4) as u64));
        group.sample_size(30);
        group.bench_function("stream_read", |b| {
            b.iter(|| {
                matmul_kernel::stream_read(&pool, POLICY, &read_buf, &mut y).expect("read");
                black_box(&y);
            })
        });
        for kernel in Isa::ALL.into_iter().filter_map(|isa| isa.token().ok()) {
            group.bench_function(format!("ours_{kernel}"), |b| {
                b.iter(|| {
                    matmul_kernel::gemv_parallel_with(kernel, &pool, POLICY, &w, &x, &mut y)
                        .expect("gemv");
                    black_box(&y);
                })
            });
        }
        for peer in peer_names() {
            group.bench_function(peer, |b| {
                rayon_pool.install(|| {
                    b.iter(|| {
                        peer_gemv(peer, n_threads, &w, &x, &mut y);
                        black_box(&y);
                    })
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, gemv);
criterion_main!(benches);
