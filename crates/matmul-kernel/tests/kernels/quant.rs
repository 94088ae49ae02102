//! The kernels on weight formats, per ISA: `qgemv` against an f64 reference of the dequantized
//! weights with the bound `qgemv`'s documentation derives, `qgemm` within the same bound and
//! each of its rows bitwise the `qgemm` of that row alone,
//! bitwise determinism across policies and thread counts, shape errors and non-finite
//! activations.

use super::{bits, values};
use matmul_kernel::{
    BlockQ4_0, BlockQ4K, BlockQ6K, BlockQ8_0, Exec, Isa, Kernel, MatmulError, WeightFormat,
    WeightMatrix, WeightShape,
};
use threadpool::{SchedulePolicy, ThreadPool};

/// Values per block of quantized activations.
const QX: usize = 32;

/// A `n_out × n_in` matrix of `format`, quantized from deterministic values in [-1, 1).
pub(crate) fn weight_matrix(
    format: WeightFormat,
    seed: u64,
    n_out: usize,
    n_in: usize,
) -> WeightMatrix {
    let shape = WeightShape { n_out, n_in };
    WeightMatrix::quantize(format, shape, &values(seed, n_out * n_in)).expect("quantize")
}

/// `γ(n) = n·u / (1 − n·u)`, `u = 2⁻²⁴`.
fn gamma(n: usize) -> f64 {
    let nu = n as f64 * f64::from(f32::EPSILON) / 2.0;
    nu / (1.0 - nu)
}

/// Whether `kernel` quantizes the activations for `format`: every SIMD kernel does for the
/// quantized formats; the portable reference never does.
fn quantizes_activations(kernel: Kernel, format: WeightFormat) -> bool {
    kernel.isa() != Isa::Portable && format.is_quantized()
}

/// The offset of weight `k` that a kernel may sum apart from the scaled codes: q8_0's
/// `128·d`, q4_0's `8·d`, q4_K's `dmin·m` and q6_K's `32·d·sc` of the weight's sub-block, 0
/// for every other format.
fn offset_term(format: WeightFormat, row: &[u8], k: usize) -> f64 {
    if format == WeightFormat::Q6K {
        let at = k / 256 * BlockQ6K::BYTES;
        let block = BlockQ6K::from_bytes(row[at..at + BlockQ6K::BYTES].try_into().expect("block"));
        let scale = f64::from(block.scales[k % 256 / 16]);
        return 32.0 * (f64::from(block.d.to_f32()) * scale).abs();
    }
    if format == WeightFormat::Q8_0 {
        let at = k / 32 * BlockQ8_0::BYTES;
        let block =
            BlockQ8_0::from_bytes(row[at..at + BlockQ8_0::BYTES].try_into().expect("block"));
        return 128.0 * f64::from(block.d.to_f32()).abs();
    }
    if format == WeightFormat::Q4_0 {
        let at = k / 32 * BlockQ4_0::BYTES;
        let block =
            BlockQ4_0::from_bytes(row[at..at + BlockQ4_0::BYTES].try_into().expect("block"));
        return 8.0 * f64::from(block.d.to_f32()).abs();
    }
    if format != WeightFormat::Q4K {
        return 0.0;
    }
    let at = k / 256 * BlockQ4K::BYTES;
    let block = BlockQ4K::from_bytes(row[at..at + BlockQ4K::BYTES].try_into().expect("block"));
    let (_, m) = block.scale_min(k % 256 / 32);
    f64::from(block.dmin.to_f32()) * f64::from(m)
}

/// The bound of `qgemv`'s documentation for one output: `w` the dequantized row, `raw` its
/// bytes, `x` the activations.
fn qgemv_bound(kernel: Kernel, format: WeightFormat, w: &[f32], raw: &[u8], x: &[f32]) -> f64 {
    let n_in = x.len();
    if !quantizes_activations(kernel, format) {
        let abs_sum: f64 = w.iter().zip(x).map(|(a, b)| f64::from(a * b).abs()).sum();
        return gamma(n_in.div_ceil(8) + 5) * abs_sum;
    }
    let mut activation_term = 0.0;
    let mut magnitudes = 0.0;
    for (b, (wb, xb)) in w.chunks(QX).zip(x.chunks(QX)).enumerate() {
        let d = f64::from(xb.iter().fold(0.0f32, |m, v| m.max(v.abs())) / 127.0);
        let abs_w: f64 = wb.iter().map(|v| f64::from(*v).abs()).sum();
        activation_term += d * (0.5 + 2f64.powi(-16)) * abs_w;
        for (j, (wk, xk)) in wb.iter().zip(xb).enumerate() {
            let m_k = f64::from(*wk).abs() + 2.0 * offset_term(format, raw, b * QX + j);
            magnitudes += m_k * (f64::from(*xk).abs() + d);
        }
    }
    activation_term + gamma(n_in.div_ceil(QX) + 10) * magnitudes
}

/// Checks every output of `y = W·x` on `kernel` against f64 with the documented bound.
fn check_qgemv(kernel: Kernel, w: &WeightMatrix, x: &[f32], y: &[f32], ctx: &str) {
    let n_in = w.shape().n_in;
    let dequantized = w.to_f32().expect("dequantize");
    for (r, got) in y.iter().enumerate() {
        let row = &dequantized[r * n_in..(r + 1) * n_in];
        let exact: f64 = row
            .iter()
            .zip(x)
            .map(|(a, b)| f64::from(*a) * f64::from(*b))
            .sum();
        let raw = w.row(r).expect("row");
        let bound = qgemv_bound(kernel, w.format(), row, raw, x);
        let err = (f64::from(*got) - exact).abs();
        assert!(
            err <= bound,
            "{ctx} row {r}: got {got}, exact {exact}, error {err:e} > bound {bound:e}"
        );
    }
}

/// Row lengths for `format`: 0, 1, 2, 3, 5, 9, 13 and 19 blocks (for the 512-bit q4_0 body
/// an odd and an even number of groups of four, with and without a partial group; for the
/// others an odd pair and a partial group of sixteen), and for the float formats (block
/// size 1) lengths with a tail, and across the 256-weight chunks of the portable body.
fn row_lengths(format: WeightFormat) -> Vec<usize> {
    let block = format.block_size();
    let mut lengths = [0, 1, 2, 3, 5, 9, 13, 19].map(|b| b * block).to_vec();
    if block == 1 {
        lengths.extend([7, 37, 300, 515]);
    }
    lengths
}

/// `kernel`'s GEMV of `w` and `x` (into outputs that start as NaN) checked against the
/// reference by [`check_qgemv`].
fn qgemv_matches_reference(kernel: Kernel, w: &WeightMatrix, x: &[f32]) {
    let WeightShape { n_out, n_in } = w.shape();
    let mut y = vec![f32::NAN; n_out];
    Exec::new().kernel(kernel).qgemv(w, x, &mut y).unwrap();
    let ctx = format!("{kernel} {} {n_out}x{n_in}", w.format());
    check_qgemv(kernel, w, x, &y, &ctx);
}

pub(crate) fn qgemv_every_format(kernel: Kernel) {
    for format in WeightFormat::ALL {
        for n_in in row_lengths(format) {
            for n_out in [0, 1, 5, 13, 37] {
                let w = weight_matrix(format, 41 + n_in as u64, n_out, n_in);
                let mut x = values(43 + n_out as u64, n_in);
                // Blocks of very different magnitudes, and an all-zero one.
                for (b, block) in x.chunks_mut(QX).enumerate() {
                    let scale = [1.0, 1e-3, 0.0, 40.0][b % 4];
                    block.iter_mut().for_each(|v| *v *= scale);
                }
                qgemv_matches_reference(kernel, &w, &x);
            }
        }
    }
}

/// Rows of a model's length: 4096 inputs, and 14336 (an FFN's down projection), where an
/// AMD CPU's wide bodies walk three rows far apart at once (37 rows: three streams of 12 and
/// one row alone).
pub(crate) fn qgemv_model_rows(kernel: Kernel) {
    for format in WeightFormat::ALL {
        for (n_out, n_in) in [(64, 4096), (37, 14336)] {
            let w = weight_matrix(format, 47, n_out, n_in);
            qgemv_matches_reference(kernel, &w, &values(48, n_in));
        }
    }
}

pub(crate) fn qgemv_parallel_bitwise(kernel: Kernel) {
    let exec = Exec::new().kernel(kernel);
    let pools: Vec<ThreadPool> = (1..=4).map(ThreadPool::new).collect();
    for format in WeightFormat::ALL {
        let block = format.block_size();
        for (n_out, n_in) in [(0, block), (1, 2 * block), (67, 3 * block)] {
            let w = weight_matrix(format, 51 + n_out as u64, n_out, n_in);
            let x = values(53, n_in);
            let mut serial = vec![f32::NAN; n_out];
            exec.qgemv(&w, &x, &mut serial).unwrap();
            for pool in &pools {
                for policy in SchedulePolicy::ALL {
                    let mut y = vec![f32::NAN; n_out];
                    exec.pool(pool)
                        .policy(policy)
                        .qgemv(&w, &x, &mut y)
                        .unwrap();
                    assert_eq!(
                        bits(&y),
                        bits(&serial),
                        "{kernel} {format} {policy} {} threads {n_out}x{n_in}",
                        pool.n_threads()
                    );
                }
            }
        }
    }
}

pub(crate) fn qgemv_shape_errors(kernel: Kernel) {
    let exec = Exec::new().kernel(kernel);
    let pool = ThreadPool::new(2);
    for format in WeightFormat::ALL {
        let n_in = 2 * format.block_size();
        let w = weight_matrix(format, 61, 3, n_in);
        for (x_len, y_len) in [(n_in - 1, 3), (n_in + 1, 3), (n_in, 2), (n_in, 4), (0, 0)] {
            let x = values(62, x_len);
            let mut y = vec![0.0; y_len];
            let serial = exec.qgemv(&w, &x, &mut y);
            let pooled = exec
                .pool(&pool)
                .policy(SchedulePolicy::Static)
                .qgemv(&w, &x, &mut y);
            let expected = format!("expected n_in {n_in} and n_out 3");
            for result in [serial, pooled] {
                assert!(
                    matches!(&result, Err(MatmulError::Shape(m)) if m.contains(&expected)),
                    "{kernel} {format} x {x_len} y {y_len}: {result:?}"
                );
            }
        }
    }
}

/// Every `y[i][r]` of `qgemm` lies within `qgemv`'s documented bound of the exact product of
/// the dequantized weights with row `i` of `x`, and is bitwise the `qgemm` of row `i` alone:
/// an output does not depend on the activation rows computed with it, across weight tiles
/// (eight-row groups, 16-row tiles), chunks of blocks and their remainders.
pub(crate) fn qgemm_rows_match_reference_alone(kernel: Kernel) {
    let exec = Exec::new().kernel(kernel);
    for format in WeightFormat::ALL {
        let block = format.block_size();
        let shapes = [(1, block), (37, 2 * block), (5, 3 * block), (19, 9 * block)];
        for (n_out, n_in) in shapes {
            let w = weight_matrix(format, 81 + n_out as u64, n_out, n_in);
            for m in [0, 1, 3, 7, 67] {
                let mut x = values(83 + m as u64, m * n_in);
                // Blocks of very different magnitudes, and all-zero ones.
                for (b, block) in x.chunks_mut(QX).enumerate() {
                    let scale = [1.0, 1e-3, 0.0, 40.0, 2.0][b % 5];
                    block.iter_mut().for_each(|v| *v *= scale);
                }
                let mut y = vec![f32::NAN; m * n_out];
                exec.qgemm(&w, &x, &mut y).unwrap();
                for i in 0..m {
                    let (x_i, y_i) = (&x[i * n_in..(i + 1) * n_in], &y[i * n_out..(i + 1) * n_out]);
                    let ctx = format!("{kernel} {format} m {m} row {i} {n_out}x{n_in}");
                    check_qgemv(kernel, &w, x_i, y_i, &ctx);
                    let mut alone = vec![f32::NAN; n_out];
                    exec.qgemm(&w, x_i, &mut alone).unwrap();
                    assert_eq!(bits(y_i), bits(&alone), "{ctx}");
                }
            }
        }
    }
}

/// `qgemm` at 4096 (32 activation rows, 40 weight rows) within the documented bound.
pub(crate) fn qgemm_4096(kernel: Kernel) {
    for format in WeightFormat::ALL {
        let w = weight_matrix(format, 57, 40, 4096);
        let x = values(58, 32 * 4096);
        let mut y = vec![f32::NAN; 32 * 40];
        Exec::new().kernel(kernel).qgemm(&w, &x, &mut y).unwrap();
        for (i, (x_i, y_i)) in x.chunks(4096).zip(y.chunks(40)).enumerate() {
            check_qgemv(
                kernel,
                &w,
                x_i,
                y_i,
                &format!("{kernel} {format} row {i} 40x4096"),
            );
        }
    }
}

/// The float formats' `qgemm` on long rows, which it takes piece by piece across a block of
/// rows: each row of the product bitwise the `qgemm` of that row alone (which takes the
/// whole row at once) and `qgemv`'s. 4149 inputs: four pieces of 1024 and a rest that is
/// neither whole steps of 32 nor of 16; 67 rows: more than one block, and an odd last row;
/// 9 tokens: two groups of four and one alone.
pub(crate) fn qgemm_long_float_rows_bitwise(kernel: Kernel) {
    let exec = Exec::new().kernel(kernel);
    let (n_out, n_in, m) = (67, 4149, 9);
    for format in [WeightFormat::F16, WeightFormat::Bf16] {
        let w = weight_matrix(format, 93, n_out, n_in);
        let x = values(94, m * n_in);
        let mut y = vec![f32::NAN; m * n_out];
        exec.qgemm(&w, &x, &mut y).unwrap();
        for (i, (x_i, y_i)) in x.chunks(n_in).zip(y.chunks(n_out)).enumerate() {
            let ctx = format!("{kernel} {format} token {i} {n_out}x{n_in}");
            let mut alone = vec![f32::NAN; n_out];
            exec.qgemm(&w, x_i, &mut alone).unwrap();
            assert_eq!(bits(y_i), bits(&alone), "{ctx}: qgemm of the row alone");
            let mut gemv = vec![f32::NAN; n_out];
            exec.qgemv(&w, x_i, &mut gemv).unwrap();
            assert_eq!(bits(y_i), bits(&gemv), "{ctx}: qgemv");
        }
    }
}

pub(crate) fn qgemm_parallel_bitwise(kernel: Kernel) {
    let exec = Exec::new().kernel(kernel);
    let pools: Vec<ThreadPool> = (1..=4).map(ThreadPool::new).collect();
    for format in WeightFormat::ALL {
        let (n_out, n_in, m) = (45, 9 * format.block_size(), 9);
        let w = weight_matrix(format, 91, n_out, n_in);
        let x = values(92, m * n_in);
        let mut serial = vec![f32::NAN; m * n_out];
        exec.qgemm(&w, &x, &mut serial).unwrap();
        for pool in &pools {
            for policy in SchedulePolicy::ALL {
                let mut y = vec![f32::NAN; m * n_out];
                exec.pool(pool)
                    .policy(policy)
                    .qgemm(&w, &x, &mut y)
                    .unwrap();
                assert_eq!(
                    bits(&y),
                    bits(&serial),
                    "{kernel} {format} {policy} {} threads",
                    pool.n_threads()
                );
            }
        }
    }
}

pub(crate) fn qgemm_shape_errors(kernel: Kernel) {
    let exec = Exec::new().kernel(kernel);
    let pool = ThreadPool::new(2);
    for format in WeightFormat::ALL {
        let n_in = 2 * format.block_size();
        let w = weight_matrix(format, 95, 3, n_in);
        // (x length, y length, what the message names)
        let cases = [
            (n_in + 1, 3, "not whole rows"),
            (2 * n_in - 1, 6, "not whole rows"),
            (2 * n_in, 5, "expected m 2 x n_out 3"),
            (2 * n_in, 7, "expected m 2 x n_out 3"),
            (0, 3, "expected m 0 x n_out 3"),
        ];
        for (x_len, y_len, expected) in cases {
            let x = values(96, x_len);
            let mut y = vec![0.0; y_len];
            let serial = exec.qgemm(&w, &x, &mut y);
            let pooled = exec
                .pool(&pool)
                .policy(SchedulePolicy::Static)
                .qgemm(&w, &x, &mut y);
            for result in [serial, pooled] {
                assert!(
                    matches!(&result, Err(MatmulError::Shape(m)) if m.contains(expected)),
                    "{kernel} {format} x {x_len} y {y_len}: {result:?}"
                );
            }
        }
        // An empty batch is fine; a matrix with no inputs cannot tell the batch size.
        exec.qgemm(&w, &[], &mut []).unwrap();
        let empty = weight_matrix(format, 97, 3, 0);
        let result = exec.qgemm(&empty, &[], &mut []);
        assert!(
            matches!(&result, Err(MatmulError::Shape(m)) if m.contains("n_in 0")),
            "{kernel} {format}: {result:?}"
        );
    }
}

/// A NaN in `x` makes every output NaN, an infinity every output non-finite, on every kernel
/// and format (the quantized activations turn both into NaN).
pub(crate) fn qgemv_non_finite_activations(kernel: Kernel) {
    for format in WeightFormat::ALL {
        let n_in = 2 * format.block_size().max(QX);
        let w = weight_matrix(format, 99, 5, n_in);
        for (bad, at) in [
            (f32::NAN, 3),
            (f32::INFINITY, n_in - 1),
            (f32::NEG_INFINITY, 40),
        ] {
            let mut x = values(100, n_in);
            x[at] = bad;
            let mut y = vec![0.0; 5];
            Exec::new().kernel(kernel).qgemv(&w, &x, &mut y).unwrap();
            let expected_nan = bad.is_nan() || quantizes_activations(kernel, format);
            for (r, v) in y.iter().enumerate() {
                let ok = if expected_nan {
                    v.is_nan()
                } else {
                    !v.is_finite()
                };
                assert!(ok, "{kernel} {format} x[{at}] = {bad}: y[{r}] = {v}");
            }
        }
    }
}

/// `SDOT` and `SMULL` with pairwise additions group the exact products into the same lanes,
/// so the NEON kernel gives the same bits with and without `dotprod` (on a CPU without it
/// both run the same code).
pub(crate) fn sdot_and_smull_agree_bitwise(kernel: Kernel) {
    let plain = kernel.without_dotprod();
    assert!(!plain.has_dotprod());
    for format in WeightFormat::ALL {
        let n_in = 3 * format.block_size().max(256);
        let w = weight_matrix(format, 103, 9, n_in);
        let x = values(104, 2 * n_in);
        let (mut a, mut b) = (vec![f32::NAN; 18], vec![f32::NAN; 18]);
        Exec::new().kernel(kernel).qgemm(&w, &x, &mut a).unwrap();
        Exec::new().kernel(plain).qgemm(&w, &x, &mut b).unwrap();
        assert_eq!(bits(&a), bits(&b), "{kernel} {format}");
    }
}

/// Rows of no inputs: every format's GEMV writes the empty sum, 0, to every output (the
/// wide bodies get no activation codes then).
pub(crate) fn qgemv_no_inputs(kernel: Kernel) {
    for format in WeightFormat::ALL {
        let shape = WeightShape { n_out: 5, n_in: 0 };
        let w = WeightMatrix::quantize(format, shape, &[]).expect("an empty matrix");
        let mut y = [f32::NAN; 5];
        Exec::new()
            .kernel(kernel)
            .qgemv(&w, &[], &mut y)
            .expect("an empty GEMV");
        assert_eq!(y, [0.0; 5], "{kernel} {format}");
    }
}

/// q4_0's 512-bit GEMV with AVX512-VBMI's byte permutes against the word permutes of a CPU
/// without it (`Kernel::without_vbmi`): bitwise the same, with and without a last partial
/// group of four blocks, on short and long rows, on one thread and on two.
pub(crate) fn vbmi_and_word_permutes_agree_bitwise(kernel: Kernel) {
    let words = kernel.without_vbmi();
    assert!(kernel.has_vbmi(), "{kernel} has no VBMI");
    assert!(!words.has_vbmi(), "without_vbmi kept VBMI");
    let pool = ThreadPool::new(2);
    for (n_out, n_in) in [(7, 4 * QX), (9, 7 * QX), (67, 4096), (5, 14336 + 3 * QX)] {
        let w = weight_matrix(WeightFormat::Q4_0, 71 + n_in as u64, n_out, n_in);
        let x = values(72, n_in);
        for exec in [Exec::new(), Exec::new().pool(&pool)] {
            let (mut a, mut b) = (vec![f32::NAN; n_out], vec![f32::NAN; n_out]);
            exec.kernel(kernel).qgemv(&w, &x, &mut a).unwrap();
            exec.kernel(words).qgemv(&w, &x, &mut b).unwrap();
            assert!(a.iter().all(|v| v.is_finite()), "{kernel} {n_out}x{n_in}");
            assert_eq!(bits(&a), bits(&b), "{kernel} {n_out}x{n_in}");
        }
    }
}
