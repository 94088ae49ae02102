//! The f32 kernels, per ISA: `gemv` and `gemm` against an f64 reference with the bound of
//! the crate docs on fixed and random shapes, empty inputs, a row's independence of its
//! block, bitwise determinism across policies and thread counts, and the read.

use super::{bits, portable, values};
use matmul_kernel::{Exec, GemmShape, Isa, Kernel};
use proptest::test_runner::{Config, TestRunner};
use threadpool::{SchedulePolicy, ThreadPool};

fn lanes(isa: Isa) -> usize {
    match isa {
        Isa::Neon => 4,
        Isa::Avx512 => 16,
        Isa::Portable | Isa::Avx2 => 8,
    }
}

/// The documented bound `γ(n) · Σ|w·x|` for a dot product of length `n_in` on `isa`.
fn error_bound(isa: Isa, n_in: usize, abs_sum: f64) -> f64 {
    let l = lanes(isa);
    let n_terms = n_in.div_ceil(l) + (2 * l).ilog2() as usize + 2;
    let u = f64::from(f32::EPSILON) / 2.0;
    let nu = n_terms as f64 * u;
    nu / (1.0 - nu) * abs_sum
}

/// Checks `got` against the f64 dot product of `a` and `b`.
fn check_dots(isa: Isa, what: &str, got: f32, a: &[f32], b: &[f32]) {
    let exact: f64 = a
        .iter()
        .zip(b)
        .map(|(p, q)| f64::from(*p) * f64::from(*q))
        .sum();
    let abs_sum: f64 = a
        .iter()
        .zip(b)
        .map(|(p, q)| (f64::from(*p) * f64::from(*q)).abs())
        .sum();
    let bound = error_bound(isa, a.len(), abs_sum);
    let err = (f64::from(got) - exact).abs();
    assert!(
        err <= bound,
        "{isa} {what}: got {got}, exact {exact}, error {err:e} > bound {bound:e}"
    );
}

/// Runs GEMV on `kernel` for an `n_out × n_in` shape with slices starting `offset` floats into
/// their allocations, and checks it against f64 and against the portable kernel.
fn check_gemv_shape_on(kernel: Kernel, n_out: usize, n_in: usize, offset: usize) {
    let isa = kernel.isa();
    let w_all = values(1 + n_out as u64, n_out * n_in + offset);
    let x_all = values(7 + n_in as u64, n_in + offset);
    let (w, x) = (&w_all[offset..], &x_all[offset..]);
    let mut y = vec![f32::NAN; n_out];
    Exec::new().kernel(kernel).gemv(w, x, &mut y).unwrap();
    let mut y_portable = vec![f32::NAN; n_out];
    Exec::new()
        .kernel(portable())
        .gemv(w, x, &mut y_portable)
        .unwrap();
    for r in 0..n_out {
        let row = &w[r * n_in..(r + 1) * n_in];
        check_dots(isa, &format!("gemv {n_out}x{n_in} row {r}"), y[r], row, x);
        check_dots(Isa::Portable, "portable gemv", y_portable[r], row, x);
        // Against the portable reference: both lie within their bounds of the exact value.
        let abs_sum: f64 = row.iter().zip(x).map(|(a, b)| f64::from(a * b).abs()).sum();
        let apart = (f64::from(y[r]) - f64::from(y_portable[r])).abs();
        let bound = error_bound(isa, n_in, abs_sum) + error_bound(Isa::Portable, n_in, abs_sum);
        assert!(
            apart <= bound * 1.01,
            "{isa} vs portable, row {r}: {apart:e} > {bound:e}"
        );
    }
}

fn check_gemm_shape_on(kernel: Kernel, shape: GemmShape, offset: usize) {
    let GemmShape { m, n_in, n_out } = shape;
    let w_all = values(3 + n_out as u64, n_out * n_in + offset);
    let x_all = values(5 + m as u64, m * n_in + offset);
    let (w, x) = (&w_all[offset..], &x_all[offset..]);
    let mut y = vec![f32::NAN; m * n_out];
    Exec::new()
        .kernel(kernel)
        .gemm(shape, w, x, &mut y)
        .unwrap();
    for i in 0..m {
        for j in 0..n_out {
            let row = &w[j * n_in..(j + 1) * n_in];
            let xi = &x[i * n_in..(i + 1) * n_in];
            let what = format!("gemm {shape:?} ({i},{j})");
            check_dots(kernel.isa(), &what, y[i * n_out + j], row, xi);
        }
    }
}

const SHAPES: [(usize, usize); 6] = [(1, 1), (1, 17), (17, 1), (63, 65), (0, 5), (5, 0)];

pub(crate) fn gemv_fixed_shapes(kernel: Kernel) {
    for (n_out, n_in) in SHAPES {
        for offset in [0, 1] {
            check_gemv_shape_on(kernel, n_out, n_in, offset);
        }
    }
    check_gemv_shape_on(kernel, 4, 4096 + 3, 1);
}

pub(crate) fn gemv_4096(kernel: Kernel) {
    check_gemv_shape_on(kernel, 4096, 4096, 0);
}

pub(crate) fn gemm_fixed_shapes(kernel: Kernel) {
    for (n_out, n_in) in SHAPES {
        for m in [1, 2, 3, 5, 17] {
            check_gemm_shape_on(kernel, GemmShape { m, n_in, n_out }, 1);
        }
    }
    // Crosses the K block (512), the row pass (64), the weight super-block (64) and every
    // tile remainder.
    let big = GemmShape {
        m: 67,
        n_in: 1100,
        n_out: 70,
    };
    check_gemm_shape_on(kernel, big, 0);
    let empty = GemmShape {
        m: 0,
        n_in: 3,
        n_out: 3,
    };
    check_gemm_shape_on(kernel, empty, 0);
}

pub(crate) fn gemm_4096(kernel: Kernel) {
    let shape = GemmShape {
        m: 32,
        n_in: 4096,
        n_out: 256,
    };
    check_gemm_shape_on(kernel, shape, 0);
}

/// 48 cases, nothing written to disk (a failure prints its minimal shape).
fn proptest_config() -> Config {
    Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    }
}

pub(crate) fn gemv_random_shapes(kernel: Kernel) {
    let mut runner = TestRunner::new(proptest_config());
    let shapes = (0usize..40, 0usize..200, 0usize..4);
    let result = runner.run(&shapes, |(n_out, n_in, offset)| {
        check_gemv_shape_on(kernel, n_out, n_in, offset);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{kernel}: {e}");
    }
}

pub(crate) fn gemm_random_shapes(kernel: Kernel) {
    let mut runner = TestRunner::new(proptest_config());
    let shapes = (0usize..12, 0usize..20, 0usize..150, 0usize..4);
    let result = runner.run(&shapes, |(m, n_out, n_in, offset)| {
        check_gemm_shape_on(kernel, GemmShape { m, n_in, n_out }, offset);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{kernel}: {e}");
    }
}

pub(crate) fn gemv_empty_input(kernel: Kernel) {
    let mut y = [f32::NAN; 3];
    Exec::new().kernel(kernel).gemv(&[], &[], &mut y).unwrap();
    assert_eq!(y, [0.0; 3]);
}

/// Row 5 computed inside a 4-row block, as a single row, and as the first of a block.
pub(crate) fn row_independent_of_block(kernel: Kernel) {
    let exec = Exec::new().kernel(kernel);
    let n_in = 37;
    let w = values(11, 9 * n_in);
    let x = values(12, n_in);
    let mut all = [0.0; 9];
    exec.gemv(&w, &x, &mut all).unwrap();
    let mut one = [0.0; 1];
    exec.gemv(&w[5 * n_in..6 * n_in], &x, &mut one).unwrap();
    let mut from5 = [0.0; 4];
    exec.gemv(&w[5 * n_in..], &x, &mut from5).unwrap();
    assert_eq!(all[5].to_bits(), one[0].to_bits(), "{kernel}");
    assert_eq!(bits(&all[5..]), bits(&from5), "{kernel}");
}

pub(crate) fn parallel_bitwise(kernel: Kernel) {
    let exec = Exec::new().kernel(kernel);
    let pools: Vec<ThreadPool> = [1, 2, 3, 8].into_iter().map(ThreadPool::new).collect();
    for (n_out, n_in) in [(0, 9), (1, 33), (211, 517)] {
        let w = values(21, n_out * n_in);
        let x = values(22, n_in);
        let mut serial = vec![0.0; n_out];
        exec.gemv(&w, &x, &mut serial).unwrap();
        let shape = GemmShape { m: 5, n_in, n_out };
        let xm = values(23, 5 * n_in);
        let mut serial_m = vec![0.0; 5 * n_out];
        exec.gemm(shape, &w, &xm, &mut serial_m).unwrap();
        let mut serial_sums = vec![0.0; n_out];
        exec.stream_read(&w, &mut serial_sums).unwrap();
        for pool in &pools {
            for policy in SchedulePolicy::ALL {
                let ctx = format!(
                    "{kernel} {policy} {} threads {n_out}x{n_in}",
                    pool.n_threads()
                );
                let mut y = vec![f32::NAN; n_out];
                exec.pool(pool).policy(policy).gemv(&w, &x, &mut y).unwrap();
                assert_eq!(bits(&y), bits(&serial), "gemv {ctx}");
                let mut ym = vec![f32::NAN; 5 * n_out];
                exec.pool(pool)
                    .policy(policy)
                    .gemm(shape, &w, &xm, &mut ym)
                    .unwrap();
                assert_eq!(bits(&ym), bits(&serial_m), "gemm {ctx}");
                let mut sums = vec![f32::NAN; n_out];
                exec.pool(pool)
                    .policy(policy)
                    .stream_read(&w, &mut sums)
                    .unwrap();
                assert_eq!(bits(&sums), bits(&serial_sums), "stream_read {ctx}");
            }
        }
    }
}

pub(crate) fn stream_read_sums_rows(kernel: Kernel) {
    let pool = ThreadPool::new(2);
    for (n_rows, row_len) in [(0, 0), (3, 0), (1, 1), (7, 133), (33, 64)] {
        let buf = values(31, n_rows * row_len);
        let mut sums = vec![f32::NAN; n_rows];
        Exec::new()
            .kernel(kernel)
            .pool(&pool)
            .policy(SchedulePolicy::Fixed16)
            .stream_read(&buf, &mut sums)
            .unwrap();
        for r in 0..n_rows {
            let row = &buf[r * row_len..(r + 1) * row_len];
            check_dots(
                kernel.isa(),
                "stream_read",
                sums[r],
                row,
                &vec![1.0; row_len],
            );
        }
    }
}
