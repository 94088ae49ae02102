//! Criterion bench `gemm`: `Y = X·Wᵀ` with W 4096×4096 f32 and a batch of m = 32 tokens, ours
//! on every available kernel vs the peers, at 1, 2 and 8 (oversubscribed) threads.

use benches::matmul::{GEMM_M, N, POLICY, peer_gemm, peer_names, values};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use matmul_kernel::{GemmShape, Isa, WeightBuffer};
use std::hint::black_box;
use threadpool::ThreadPool;

fn gemm(c: &mut Criterion) {
    let w = WeightBuffer::from_slice(&values(1, N * N)).expect("weight buffer");
    let x = values(3, GEMM_M * N);
    let mut y = vec![0.0f32; GEMM_M * N];
    let shape = GemmShape {
        m: GEMM_M,
        n_in: N,
        n_out: N,
    };
    for n_threads in [1, 2, 8] {
        let pool = ThreadPool::new(n_threads);
        let rayon_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(n_threads)
            .build()
            .expect("rayon pool");
        let mut group = c.benchmark_group(format!("gemm_m{GEMM_M}_{N}/{n_threads}t"));
        // Elements = floating-point operations, so criterion's "elem/s" reads as FLOP/s.
        group.throughput(Throughput::Elements((2 * GEMM_M * N * N) as u64));
        group.sample_size(10);
        for kernel in Isa::ALL.into_iter().filter_map(|isa| isa.token().ok()) {
            group.bench_function(format!("ours_{kernel}"), |b| {
                b.iter(|| {
                    matmul_kernel::gemm_parallel_with(kernel, &pool, POLICY, shape, &w, &x, &mut y)
                        .expect("gemm");
                    black_box(&y);
                })
            });
        }
        for peer in peer_names() {
            group.bench_function(peer, |b| {
                rayon_pool.install(|| {
                    b.iter(|| {
                        peer_gemm(peer, n_threads, shape, &w, &x, &mut y);
                        black_box(&y);
                    })
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, gemm);
criterion_main!(benches);
