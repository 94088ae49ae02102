//! The NEON bodies of the weight formats: the two integer dot products (with and without
//! `dotprod`) give bitwise the same results, serial, split over a pool and batched; the
//! quantized rows are exact integer dot products (checked against an f64 model of the
//! quantized activations on raw blocks with extreme codes and scales); q4_K's scale unpacking
//! matches the block's. The f64 bound against unquantized activations, per format, is in
//! `tests/kernels/quant.rs`, which runs on the detected token.

use super::q4k_scale_min;
use crate::exec::Exec;
use crate::isa::Kernel;
use crate::isa_name::Isa;
use crate::quant::activations::quantize_activations;
use crate::quant::blocks::{BlockQ8x, QX};
use crate::quant::{BlockQ4K, WeightFormat, WeightMatrix, WeightShape};
use half::f16;
use threadpool::{SchedulePolicy, ThreadPool};

/// Deterministic xorshift bits.
fn bits(seed: u64, n: usize) -> Vec<u64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        })
        .collect()
}

/// Deterministic values in [-1, 1), each block of 32 scaled by one of 1, 1e-3, 0 and 40, so
/// the activation blocks have very different scales and some are all zero.
fn activations(seed: u64, n: usize) -> Vec<f32> {
    bits(seed, n)
        .into_iter()
        .enumerate()
        .map(|(k, b)| {
            let v = ((b >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
            v * [1.0, 1e-3, 0.0, 40.0][k / QX % 4]
        })
        .collect()
}

/// The scales a raw block gets: ordinary, negative, tiny, subnormal and zero f16s.
const SCALES: [f32; 5] = [0.5, -0.25, 1e-3, 6.0e-8, 0.0];

/// A matrix of `format`: for the quantized formats, random bytes (every code and sub-block
/// scale, including the extremes: q8_0's −128, nibbles 0 and 15, q6_K's scale −128) with
/// finite f16 scales written in place; for the float formats, quantized random values.
fn matrix(format: WeightFormat, seed: u64, n_out: usize, n_in: usize) -> WeightMatrix {
    let shape = WeightShape { n_out, n_in };
    if !format.is_quantized() {
        return WeightMatrix::quantize(format, shape, &activations(seed, n_out * n_in))
            .expect("quantize");
    }
    let row_bytes = format.row_bytes(n_in).expect("whole blocks");
    let mut bytes: Vec<u8> = bits(seed, n_out * row_bytes)
        .into_iter()
        .map(|b| (b >> 32) as u8)
        .collect();
    let scale_offsets: &[usize] = match format {
        WeightFormat::Q8_0 | WeightFormat::Q4_0 => &[0],
        WeightFormat::Q4K => &[0, 2],
        WeightFormat::Q6K => &[208],
        _ => unreachable!("float formats return above"),
    };
    for (i, block) in bytes.chunks_exact_mut(format.block_bytes()).enumerate() {
        for (n, &at) in scale_offsets.iter().enumerate() {
            let d = f16::from_f32(SCALES[(i + n) % SCALES.len()]);
            block[at..at + 2].copy_from_slice(&d.to_le_bytes());
        }
    }
    WeightMatrix::from_raw(format, shape, &bytes).expect("valid blocks")
}

/// Row lengths for `format`: 1, 2, 3 and 9 blocks; for the float formats lengths around the
/// steps of 8 and 16 weights too.
fn row_lengths(format: WeightFormat) -> Vec<usize> {
    let block = format.block_size();
    let mut lengths = vec![block, 2 * block, 3 * block, 9 * block];
    if block == 1 {
        lengths.extend([7, 8, 15, 16, 17, 24, 37, 515]);
    }
    lengths
}

fn neon() -> Kernel {
    Isa::Neon
        .token()
        .expect("NEON is part of every aarch64 target")
}

fn to_bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

#[test]
fn both_integer_dot_products_give_the_same_bits() {
    let (detected, plain) = (neon(), neon().without_dotprod());
    let pool = ThreadPool::new(3);
    for format in WeightFormat::ALL {
        for n_in in row_lengths(format) {
            let n_out = 13;
            let w = matrix(format, 7 + n_in as u64, n_out, n_in);
            let ctx = format!("{format} {n_out}x{n_in}");
            let x = activations(11 + n_in as u64, 3 * n_in);
            let mut y_detected = vec![f32::NAN; 3 * n_out];
            let mut y_plain = vec![f32::NAN; 3 * n_out];
            Exec::new()
                .kernel(detected)
                .qgemm(&w, &x, &mut y_detected)
                .unwrap();
            Exec::new()
                .kernel(plain)
                .qgemm(&w, &x, &mut y_plain)
                .unwrap();
            assert_eq!(to_bits(&y_detected), to_bits(&y_plain), "qgemm {ctx}");
            let mut row = vec![f32::NAN; n_out];
            Exec::new()
                .kernel(plain)
                .qgemv(&w, &x[n_in..2 * n_in], &mut row)
                .unwrap();
            assert_eq!(to_bits(&row), to_bits(&y_plain[n_out..2 * n_out]), "{ctx}");
            for policy in SchedulePolicy::ALL {
                let mut y = vec![f32::NAN; n_out];
                Exec::new()
                    .kernel(plain)
                    .pool(&pool)
                    .policy(policy)
                    .qgemv(&w, &x[n_in..2 * n_in], &mut y)
                    .unwrap();
                assert_eq!(to_bits(&y), to_bits(&row), "qgemv {ctx} {policy}");
                let mut ym = vec![f32::NAN; 3 * n_out];
                Exec::new()
                    .kernel(plain)
                    .pool(&pool)
                    .policy(policy)
                    .qgemm(&w, &x, &mut ym)
                    .unwrap();
                assert_eq!(to_bits(&ym), to_bits(&y_plain), "qgemm {ctx} {policy}");
            }
        }
    }
}

/// `γ(n) = n·u / (1 − n·u)`, `u = 2⁻²⁴`.
fn gamma(n: usize) -> f64 {
    let nu = n as f64 * f64::from(f32::EPSILON) / 2.0;
    nu / (1.0 - nu)
}

/// `dmin·m` of weight `k`'s sub-block in a q4_K row.
fn q4k_min(row: &[u8], k: usize) -> f64 {
    let at = k / 256 * BlockQ4K::BYTES;
    let block = BlockQ4K::from_bytes(row[at..at + BlockQ4K::BYTES].try_into().unwrap());
    let (_, m) = block.scale_min(k % 256 / 32);
    f64::from(block.dmin.to_f32()) * f64::from(m)
}

/// Against the dot product, in f64, of the dequantized weights with the activations as
/// quantized (`d·q`), each output is off by float rounding only: the integer part is exact.
/// (The activations' own quantization error is what `tests/kernels/quant.rs` bounds.)
#[test]
fn quantized_rows_are_exact_integer_dot_products() {
    for kernel in [neon(), neon().without_dotprod()] {
        for format in WeightFormat::ALL.into_iter().filter(|f| f.is_quantized()) {
            for n_in in row_lengths(format) {
                let n_out = 9;
                let w = matrix(format, 21 + n_in as u64, n_out, n_in);
                let x = activations(23 + n_in as u64, n_in);
                let mut blocks = vec![BlockQ8x::default(); n_in / QX];
                quantize_activations(&x, &mut blocks);
                let x_hat: Vec<f64> = blocks
                    .iter()
                    .flat_map(|b| b.qs.map(|q| f64::from(b.d) * f64::from(q)))
                    .collect();
                let mut y = vec![f32::NAN; n_out];
                Exec::new().kernel(kernel).qgemv(&w, &x, &mut y).unwrap();
                let dequantized = w.to_f32().unwrap();
                for (r, got) in y.iter().enumerate() {
                    let row = &dequantized[r * n_in..(r + 1) * n_in];
                    let raw = w.row(r).unwrap();
                    let exact: f64 = row.iter().zip(&x_hat).map(|(a, b)| f64::from(*a) * b).sum();
                    let magnitudes: f64 = (0..n_in)
                        .map(|k| {
                            let min = if format == WeightFormat::Q4K {
                                2.0 * q4k_min(raw, k)
                            } else {
                                0.0
                            };
                            (f64::from(row[k]).abs() + min) * x_hat[k].abs()
                        })
                        .sum();
                    let bound = gamma(n_in.div_ceil(QX) + 10) * magnitudes;
                    let err = (f64::from(*got) - exact).abs();
                    assert!(
                        err <= bound,
                        "{kernel:?} {format} {n_out}x{n_in} row {r}: got {got}, exact {exact}, \
                         error {err:e} > {bound:e}"
                    );
                }
            }
        }
    }
}

#[test]
fn q4k_scales_unpack_as_the_block_does() {
    for seed in 0..64 {
        let bytes: Vec<u8> = bits(seed, BlockQ4K::BYTES)
            .into_iter()
            .map(|b| (b >> 24) as u8)
            .collect();
        let block = BlockQ4K::from_bytes(bytes[..].try_into().unwrap());
        for s in 0..8 {
            assert_eq!(
                q4k_scale_min(&bytes[4..16], s),
                block.scale_min(s),
                "seed {seed}"
            );
        }
    }
}
