//! Criterion bench `matmul`: with W 4096×4096 f32, the GEMV `y = W·x` (group `gemv_4096`,
//! beside the same-size read) and the GEMM `Y = X·Wᵀ` for a batch of m = 32 tokens (group
//! `gemm_m32_4096`), ours on every available kernel vs the peers, at 1, 2 and 8
//! (oversubscribed) threads. `cargo bench -p benches --bench matmul -- gemv` runs one group.
#![forbid(unsafe_code)]

use benches::contenders::{self, Matmul, Op, Pools};
use benches::matmul::{GEMM_M, GEMM_SHAPE, N, values};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use matmul_kernel::WeightBuffer;
use std::hint::black_box;

/// One group of the bench: an operation, its input and how criterion reports it.
struct Case {
    /// The group name's prefix; the thread count follows.
    name: String,
    op: Op,
    x: Vec<f32>,
    y_len: usize,
    throughput: Throughput,
    sample_size: usize,
    /// Whether the same-size read runs beside the contenders.
    with_read: bool,
}

fn cases() -> [Case; 2] {
    [
        Case {
            name: format!("gemv_{N}"),
            op: Op::Gemv,
            x: values(3, N),
            y_len: N,
            throughput: Throughput::Bytes((N * N * size_of::<f32>()) as u64),
            sample_size: 30,
            with_read: true,
        },
        Case {
            name: format!("gemm_m{GEMM_M}_{N}"),
            op: Op::Gemm(GEMM_SHAPE),
            x: values(3, GEMM_M * N),
            y_len: GEMM_M * N,
            // Elements = floating-point operations, so criterion's "elem/s" reads as FLOP/s.
            throughput: Throughput::Elements((2 * GEMM_M * N * N) as u64),
            sample_size: 10,
            with_read: false,
        },
    ]
}

fn matmul(c: &mut Criterion) {
    let w = WeightBuffer::from_slice(&values(1, N * N)).expect("weight buffer");
    let read_buf = WeightBuffer::from_slice(&values(2, N * N)).expect("read buffer");
    for case in cases() {
        let mut y = vec![0.0f32; case.y_len];
        for n_threads in [1, 2, 8] {
            let pools = Pools::new(n_threads);
            let mut group = c.benchmark_group(format!("{}/{n_threads}t", case.name));
            group.throughput(case.throughput.clone());
            group.sample_size(case.sample_size);
            if case.with_read {
                group.bench_function("stream_read", |b| {
                    b.iter(|| {
                        contenders::stream_read(&pools, &read_buf, &mut y);
                        black_box(&y);
                    })
                });
            }
            for contender in Matmul::every_available() {
                group.bench_function(contender.name(), |b| {
                    contender.enter(&pools, || {
                        b.iter(|| {
                            contender.run(case.op, &pools, &w, &case.x, &mut y);
                            black_box(&y);
                        })
                    })
                });
            }
            group.finish();
        }
    }
}

criterion_group!(benches, matmul);
criterion_main!(benches);
