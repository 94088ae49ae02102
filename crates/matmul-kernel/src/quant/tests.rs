//! Tests of the weight formats: the table, the block layouts, the reference against gguf-py's
//! vectors bit for bit, the quantizers against derived error bounds, and `WeightMatrix`'s
//! errors, one per malformed kind.

use super::*;
use crate::buffer::{WEIGHT_ALIGN, WeightBytes};
use crate::error::MatmulError;
use half::f16;
use serde_json::Value;

/// Every format's vector file, made by `scripts/gguf_vectors.py` with gguf-py.
const VECTORS: [(WeightFormat, &str); 7] = [
    (
        WeightFormat::F32,
        include_str!("../../tests/data/gguf_f32.json"),
    ),
    (
        WeightFormat::F16,
        include_str!("../../tests/data/gguf_f16.json"),
    ),
    (
        WeightFormat::Bf16,
        include_str!("../../tests/data/gguf_bf16.json"),
    ),
    (
        WeightFormat::Q8_0,
        include_str!("../../tests/data/gguf_q8_0.json"),
    ),
    (
        WeightFormat::Q4_0,
        include_str!("../../tests/data/gguf_q4_0.json"),
    ),
    (
        WeightFormat::Q4K,
        include_str!("../../tests/data/gguf_q4_K.json"),
    ),
    (
        WeightFormat::Q6K,
        include_str!("../../tests/data/gguf_q6_K.json"),
    ),
];

fn hex_bytes(hex: &str) -> Vec<u8> {
    assert!(hex.len().is_multiple_of(2), "odd hex length");
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex digit"))
        .collect()
}

/// A string of 8-hex-digit f32 bit patterns.
fn hex_f32_bits(hex: &str) -> Vec<u32> {
    assert!(hex.len().is_multiple_of(8), "f32_bits is not whole words");
    (0..hex.len())
        .step_by(8)
        .map(|i| u32::from_str_radix(&hex[i..i + 8], 16).expect("hex digit"))
        .collect()
}

fn field<'a>(case: &'a Value, key: &str) -> &'a str {
    case[key]
        .as_str()
        .unwrap_or_else(|| panic!("case without {key}: {case}"))
}

#[test]
fn format_table_matches_ggml() {
    let table = [
        (WeightFormat::F32, "f32", 1, 4, 0),
        (WeightFormat::F16, "f16", 1, 2, 1),
        (WeightFormat::Bf16, "bf16", 1, 2, 30),
        (WeightFormat::Q8_0, "q8_0", 32, 34, 8),
        (WeightFormat::Q4_0, "q4_0", 32, 18, 2),
        (WeightFormat::Q4K, "q4_K", 256, 144, 12),
        (WeightFormat::Q6K, "q6_K", 256, 210, 14),
    ];
    assert_eq!(table.map(|t| t.0), WeightFormat::ALL);
    for (format, name, block_size, block_bytes, id) in table {
        assert_eq!(format.to_string(), name);
        assert_eq!(name.parse::<WeightFormat>(), Ok(format));
        assert_eq!(name.to_uppercase().parse::<WeightFormat>(), Ok(format));
        assert_eq!(format.block_size(), block_size, "{format}");
        assert_eq!(format.block_bytes(), block_bytes, "{format}");
        assert_eq!(format.gguf_type_id(), id, "{format}");
        assert_eq!(WeightFormat::from_gguf_type_id(id), Some(format));
        assert_eq!(format.is_quantized(), block_size > 1);
    }
    assert_eq!(WeightFormat::from_gguf_type_id(3), None); // q4_1
    assert_eq!(
        "q4_k_m".parse::<WeightFormat>(),
        Err(MatmulError::UnknownFormat("q4_k_m".to_string()))
    );
    assert_eq!(size_of::<BlockQ8_0>(), WeightFormat::Q8_0.block_bytes());
    assert_eq!(size_of::<BlockQ4_0>(), WeightFormat::Q4_0.block_bytes());
    assert_eq!(size_of::<BlockQ4K>(), WeightFormat::Q4K.block_bytes());
    assert_eq!(size_of::<BlockQ6K>(), WeightFormat::Q6K.block_bytes());
}

#[test]
fn row_bytes_checks_the_block_size_and_overflow() {
    assert_eq!(WeightFormat::Q4K.row_bytes(4096), Ok(16 * 144));
    assert_eq!(WeightFormat::F16.row_bytes(3), Ok(6));
    assert!(matches!(
        WeightFormat::Q8_0.row_bytes(33),
        Err(MatmulError::Shape(_))
    ));
    assert!(matches!(
        WeightFormat::F32.row_bytes(usize::MAX),
        Err(MatmulError::Shape(_))
    ));
}

/// Our `dequantize_row` is gguf-py's dequantizer, bit for bit, on every committed case
/// (edge blocks and random ones), and the headers agree with our format table.
#[test]
fn dequantize_matches_gguf_py_bit_for_bit() {
    for (format, json) in VECTORS {
        let doc: Value = serde_json::from_str(json).expect("vector file parses");
        assert_eq!(doc["format"], format.name());
        assert_eq!(doc["ggml_type"], format.gguf_type_id());
        assert_eq!(doc["block_size"], format.block_size());
        assert_eq!(doc["block_bytes"], format.block_bytes());
        assert!(doc["gguf_version"].is_string(), "{format}: no gguf version");
        let cases = doc["dequantize"].as_array().expect("dequantize cases");
        assert!(!cases.is_empty(), "{format}: no dequantize cases");
        for case in cases {
            let name = field(case, "name");
            let bytes = hex_bytes(field(case, "bytes"));
            let expected = hex_f32_bits(field(case, "f32_bits"));
            let mut out = vec![0.0f32; expected.len()];
            dequantize_row(format, &bytes, &mut out).expect("lengths match");
            for (i, (got, want)) in out.iter().zip(&expected).enumerate() {
                assert_eq!(
                    got.to_bits(),
                    *want,
                    "{format} case {name}: weight {i} is {got} ({:08x}), gguf-py has {} ({want:08x})",
                    got.to_bits(),
                    f32::from_bits(*want)
                );
            }
        }
    }
}

/// Our f16, bf16, q8_0 and q4_0 quantizers write gguf-py's bytes exactly.
#[test]
fn quantize_matches_gguf_py_bit_for_bit() {
    let mut checked = Vec::new();
    for (format, json) in VECTORS {
        let doc: Value = serde_json::from_str(json).expect("vector file parses");
        for case in doc["quantize"].as_array().expect("quantize cases") {
            let name = field(case, "name");
            let values: Vec<f32> = hex_f32_bits(field(case, "f32_bits"))
                .into_iter()
                .map(f32::from_bits)
                .collect();
            let expected = hex_bytes(field(case, "bytes"));
            let mut out = vec![0u8; expected.len()];
            quantize_row(format, &values, &mut out).expect("quantizes");
            assert_eq!(
                out, expected,
                "{format} case {name}: our bytes differ from gguf-py's"
            );
            checked.push(format);
        }
    }
    for format in [
        WeightFormat::F16,
        WeightFormat::Bf16,
        WeightFormat::Q8_0,
        WeightFormat::Q4_0,
    ] {
        assert!(
            checked.contains(&format),
            "no gguf-py quantize case for {format}"
        );
    }
}

/// A small deterministic generator (xorshift64*), so the tests need no crate and no seed file.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }

    /// Uniform in [-1, 1).
    fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// Roughly normal (a sum of four uniforms).
    fn normal(&mut self) -> f32 {
        (0..4).map(|_| self.uniform()).sum::<f32>() * 0.87
    }
}

#[test]
fn blocks_round_trip_their_bytes() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..50 {
        let b = rng.bytes(210);
        let q8: &[u8; 34] = b[..34].try_into().unwrap();
        assert_eq!(&BlockQ8_0::from_bytes(q8).to_bytes(), q8);
        let q4: &[u8; 18] = b[..18].try_into().unwrap();
        assert_eq!(&BlockQ4_0::from_bytes(q4).to_bytes(), q4);
        let q4k: &[u8; 144] = b[..144].try_into().unwrap();
        assert_eq!(&BlockQ4K::from_bytes(q4k).to_bytes(), q4k);
        let q6k: &[u8; 210] = b[..210].try_into().unwrap();
        assert_eq!(&BlockQ6K::from_bytes(q6k).to_bytes(), q6k);
    }
    // The fields sit where the layout tables say.
    let mut b = [0u8; 210];
    b[208..].copy_from_slice(&f16::from_f32(2.0).to_le_bytes());
    b[192] = 0xFF;
    let block = BlockQ6K::from_bytes(&b);
    assert_eq!((block.d.to_f32(), block.scales[0]), (2.0, -1));
    let mut b = [0u8; 144];
    b[2..4].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
    b[16] = 0x21;
    let block = BlockQ4K::from_bytes(&b);
    assert_eq!((block.dmin.to_f32(), block.qs[0]), (0.5, 0x21));
}

#[test]
fn q4_k_scales_and_mins_pack_and_unpack() {
    let mut rng = Rng(7);
    for _ in 0..200 {
        let sc: [u8; 8] = std::array::from_fn(|_| rng.next_u64() as u8 & 63);
        let m: [u8; 8] = std::array::from_fn(|_| rng.next_u64() as u8 & 63);
        let block = BlockQ4K {
            d: f16::ONE,
            dmin: f16::ONE,
            scales: BlockQ4K::pack_scales_mins(sc, m),
            qs: [0; 128],
        };
        for s in 0..8 {
            assert_eq!(block.scale_min(s), (sc[s], m[s]));
        }
    }
}

#[test]
fn q6_k_codes_agree_with_the_reference() {
    let mut rng = Rng(11);
    let bytes: [u8; 210] = rng.bytes(210).try_into().unwrap();
    let mut block = BlockQ6K::from_bytes(&bytes);
    block.d = f16::ONE;
    let mut out = [0.0f32; 256];
    block.dequantize(&mut out);
    for (i, y) in out.iter().enumerate() {
        let code = block.code(i);
        assert!(code < 64);
        let expected = f32::from(block.scales[i / 16]) * (f32::from(code) - 32.0);
        assert_eq!(*y, expected, "weight {i}");
    }
}

/// Rows that exercise the quantizers: several distributions, outliers, one sign, constants,
/// zeros, and magnitudes whose scales are f16 subnormals.
fn test_rows(n: usize) -> Vec<(&'static str, Vec<f32>)> {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let mut rows = vec![
        ("normal", (0..n).map(|_| rng.normal()).collect::<Vec<_>>()),
        ("uniform", (0..n).map(|_| rng.uniform()).collect()),
        (
            "positive",
            (0..n).map(|_| rng.uniform().abs() + 0.5).collect(),
        ),
        (
            "negative",
            (0..n).map(|_| -rng.uniform().abs() - 2.0).collect(),
        ),
        ("large", (0..n).map(|_| rng.normal() * 3000.0).collect()),
        ("tiny", (0..n).map(|_| rng.normal() * 1e-6).collect()),
        ("zeros", vec![0.0; n]),
        ("constant", vec![-0.75; n]),
    ];
    let mut outliers: Vec<f32> = (0..n).map(|_| rng.normal() * 0.01).collect();
    for i in (3..n).step_by(37) {
        outliers[i] = 20.0 * rng.uniform();
    }
    rows.push(("outliers", outliers));
    rows
}

/// The bound on `|dequantize(quantize(x)) − x|` for each weight of a block of `format`,
/// derived from the quantizer's construction (see each arm). `u_h = 2⁻¹¹` is half an f16 ulp
/// (relative), `2⁻²⁴` its subnormal spacing; `slack` covers the few f32 roundings of the
/// arithmetic itself.
fn error_bounds(format: WeightFormat, block: &[f32]) -> Vec<f32> {
    let amax = block.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let slack = amax * 2f32.powi(-18);
    let f16_round = |x: f32| (x * 2f32.powi(-11)).max(2f32.powi(-25));
    let f16_up = |x: f32| x * (1.0 + 2f32.powi(-10)) + 2f32.powi(-24);
    match format {
        WeightFormat::F32 => vec![0.0; block.len()],
        // Round to nearest: half an ulp, or half the subnormal spacing.
        WeightFormat::F16 => block.iter().map(|x| f16_round(x.abs())).collect(),
        WeightFormat::Bf16 => block
            .iter()
            .map(|x| (x.abs() * 2f32.powi(-8)).max(2f32.powi(-134)))
            .collect(),
        // Codes round x/d to nearest with d = amax/127 (half a step), then d is rounded to
        // f16, which moves a code of at most 127 by 127·|d_h − d|.
        WeightFormat::Q8_0 => {
            let d = amax / 127.0;
            vec![d / 2.0 + 127.0 * f16_round(d) + slack; block.len()]
        }
        // d = m/−8: codes round half up (half a step), except x = −m, code 16 clamped to 15
        // (one step); the f16 rounding of d moves a code of at most 8 by 8·|d_h − d|.
        WeightFormat::Q4_0 => {
            let d = amax / 8.0;
            vec![d + 8.0 * f16_round(d) + slack; block.len()]
        }
        // Half a step d·sc per sub-block of 32, where (the quantizer rounds m, sc, dmin and d
        // up) dmin ≤ f16_up(M/63) for M the largest −min, d·sc ≤ (range + dmin)/15 + d and
        // d ≤ f16_up(S/63) for S the largest (range + dmin)/15.
        WeightFormat::Q4K => {
            let subs: Vec<(f32, f32)> = block
                .chunks_exact(32)
                .map(|s| {
                    let lo = s.iter().fold(0.0f32, |m, &v| m.min(v));
                    let hi = s.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
                    (hi - lo, -lo)
                })
                .collect();
            let dmin = f16_up(subs.iter().fold(0.0f32, |m, s| m.max(s.1)) / 63.0);
            let scale = |range: f32| (range + dmin) / 15.0;
            let d = f16_up(subs.iter().fold(0.0f32, |m, s| m.max(scale(s.0))) / 63.0);
            let slack = slack + dmin * 63.0 * 2f32.powi(-18);
            subs.iter()
                .flat_map(|s| [(scale(s.0) + d) / 2.0 + slack; 32])
                .collect()
        }
        // Half a step d·sc per sub-block of 16, with d·sc ≤ a/31 + d for a the sub-block's
        // largest magnitude and d ≤ f16_up(amax/(31·127)).
        WeightFormat::Q6K => {
            let d = f16_up(amax / (31.0 * 127.0));
            block
                .chunks_exact(16)
                .flat_map(|s| {
                    let a = s.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                    [(a / 31.0 + d) / 2.0 + slack; 16]
                })
                .collect()
        }
    }
}

#[test]
fn quantizers_stay_within_their_derived_bounds() {
    for format in WeightFormat::ALL {
        for (name, row) in test_rows(512) {
            let row_bytes = format.row_bytes(row.len()).unwrap();
            let mut bytes = vec![0u8; row_bytes];
            quantize_row(format, &row, &mut bytes)
                .unwrap_or_else(|e| panic!("{format} {name}: {e}"));
            validate_row(format, &bytes).unwrap();
            let mut back = vec![0.0f32; row.len()];
            dequantize_row(format, &bytes, &mut back).unwrap();
            let block = format.block_size();
            for (b, (x, y)) in row.chunks(block).zip(back.chunks(block)).enumerate() {
                let bounds = error_bounds(format, x);
                for i in 0..x.len() {
                    let err = (x[i] - y[i]).abs();
                    assert!(
                        err <= bounds[i],
                        "{format} {name} block {b} weight {i}: {} -> {}, error {err} > bound {}",
                        x[i],
                        y[i],
                        bounds[i]
                    );
                }
            }
            // Quantizing what came back and dequantizing again is stable for the
            // representable formats: the blocks are what a reader takes them for.
            if !format.is_quantized() {
                let mut again = vec![0u8; row_bytes];
                quantize_row(format, &back, &mut again).unwrap();
                assert_eq!(again, bytes, "{format} {name}");
            }
        }
    }
}

#[test]
fn quantizers_write_blocks_whose_codes_use_the_full_range() {
    // The largest magnitude of a q8_0 block maps to ±127, of a q4_0 block to code 0, and a
    // q6_K sub-block reaches code 32 ± 31: the scales are not wasteful.
    let row: Vec<f32> = (0..256).map(|i| (i as f32 * 0.71).sin()).collect();
    let mut q8 = vec![0u8; 34];
    quantize_row(WeightFormat::Q8_0, &row[..32], &mut q8).unwrap();
    let block = BlockQ8_0::from_bytes(q8.as_slice().try_into().unwrap());
    assert_eq!(block.qs.iter().map(|q| q.unsigned_abs()).max(), Some(127));
    let mut q6 = vec![0u8; 210];
    quantize_row(WeightFormat::Q6K, &row, &mut q6).unwrap();
    let block = BlockQ6K::from_bytes(q6.as_slice().try_into().unwrap());
    let reach = (0..256).map(|i| block.code(i).abs_diff(32)).max();
    assert_eq!(reach, Some(31));
}

#[test]
fn quantize_row_rejects_what_the_format_cannot_hold() {
    for format in WeightFormat::ALL {
        let n = format.block_size();
        let mut out = vec![0u8; format.block_bytes()];
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut values = vec![1.0; n];
            values[n - 1] = bad;
            let err = quantize_row(format, &values, &mut out).unwrap_err();
            assert!(
                matches!(&err, MatmulError::InvalidWeights(m) if m.contains(&format!("values[{}]", n - 1))),
                "{format}: {err}"
            );
        }
    }
    // Finite values whose f16/bf16 or scale would be infinite.
    let too_large = [
        (WeightFormat::F16, 65520.0),
        (WeightFormat::Bf16, f32::MAX),
        (WeightFormat::Q8_0, 65504.0 * 128.0),
        (WeightFormat::Q4_0, 65504.0 * 9.0),
        (WeightFormat::Q4K, 65504.0 * 63.0 * 16.0),
        (WeightFormat::Q6K, 65504.0 * 127.0 * 32.0),
    ];
    for (format, value) in too_large {
        let values = vec![value; format.block_size()];
        let mut out = vec![0u8; format.block_bytes()];
        let err = quantize_row(format, &values, &mut out).unwrap_err();
        assert!(
            matches!(err, MatmulError::InvalidWeights(_)),
            "{format}: {err}"
        );
    }
    // Lengths.
    let mut out = vec![0u8; 34];
    assert!(matches!(
        quantize_row(WeightFormat::Q8_0, &[0.0; 31], &mut out),
        Err(MatmulError::Shape(_))
    ));
    let mut out = vec![0u8; 35];
    assert!(matches!(
        quantize_row(WeightFormat::Q8_0, &[0.0; 32], &mut out),
        Err(MatmulError::Shape(_))
    ));
}

#[test]
fn dequantize_row_checks_lengths() {
    let mut out = [0.0f32; 32];
    assert!(matches!(
        dequantize_row(WeightFormat::Q4_0, &[0u8; 17], &mut out),
        Err(MatmulError::Shape(_))
    ));
    assert!(matches!(
        dequantize_row(WeightFormat::Q4_0, &[0u8; 36], &mut out),
        Err(MatmulError::Shape(_))
    ));
    dequantize_row(WeightFormat::Q4_0, &[0u8; 18], &mut out).unwrap();
    dequantize_row(WeightFormat::Q4K, &[], &mut []).unwrap();
}

fn q8_shape() -> WeightShape {
    WeightShape { n_out: 3, n_in: 64 }
}

fn q8_values() -> Vec<f32> {
    (0..192).map(|i| (i as f32 * 0.3).cos()).collect()
}

#[test]
fn weight_matrix_quantizes_and_reads_back_raw_bytes() {
    for format in WeightFormat::ALL {
        let shape = WeightShape {
            n_out: 3,
            n_in: 2 * format.block_size(),
        };
        let values: Vec<f32> = (0..shape.n_out * shape.n_in)
            .map(|i| (i as f32 * 0.3).cos())
            .collect();
        let m = WeightMatrix::quantize(format, shape, &values).unwrap();
        assert_eq!(m.format(), format);
        assert_eq!(m.shape(), shape);
        assert_eq!(m.row_bytes(), 2 * format.block_bytes());
        assert_eq!(m.as_bytes().len(), 3 * m.row_bytes());
        assert_eq!(m.as_bytes().as_ptr() as usize % WEIGHT_ALIGN, 0);
        let raw = WeightMatrix::from_raw(format, shape, m.as_bytes()).unwrap();
        assert_eq!(raw.as_bytes(), m.as_bytes());
        let all = raw.to_f32().unwrap();
        let mut row = vec![0.0; shape.n_in];
        raw.dequantize_row(2, &mut row).unwrap();
        assert_eq!(row, all[2 * shape.n_in..]);
        assert_eq!(m.row(2).unwrap(), &m.as_bytes()[2 * m.row_bytes()..]);
        assert!(matches!(m.row(3), Err(MatmulError::Shape(_))));
    }
    // Empty shapes are matrices too.
    let empty = WeightShape { n_out: 4, n_in: 0 };
    let m = WeightMatrix::from_raw(WeightFormat::Q4K, empty, &[]).unwrap();
    assert_eq!(m.to_f32().unwrap(), Vec::<f32>::new());
    assert!(WeightMatrix::quantize(WeightFormat::Q4K, empty, &[]).is_ok());
}

#[test]
fn from_raw_rejects_a_length_that_does_not_match_the_shape() {
    let good = WeightMatrix::quantize(WeightFormat::Q8_0, q8_shape(), &q8_values()).unwrap();
    let bytes = good.as_bytes();
    for len in [0, bytes.len() - 1, bytes.len() - 34] {
        let err = WeightMatrix::from_raw(WeightFormat::Q8_0, q8_shape(), &bytes[..len]);
        assert_eq!(
            err.unwrap_err(),
            MatmulError::Shape(format!(
                "q8_0 matrix of n_out 3 x n_in 64 is 204 bytes, got {len}"
            ))
        );
    }
    let mut long = bytes.to_vec();
    long.push(0);
    assert!(matches!(
        WeightMatrix::from_raw(WeightFormat::Q8_0, q8_shape(), &long),
        Err(MatmulError::Shape(_))
    ));
}

#[test]
fn from_raw_rejects_a_row_that_is_not_whole_blocks() {
    let shape = WeightShape {
        n_out: 1,
        n_in: 300,
    };
    let err = WeightMatrix::from_raw(WeightFormat::Q4K, shape, &[0; 144]).unwrap_err();
    assert_eq!(
        err,
        MatmulError::Shape(
            "row of 300 weights is not a multiple of the q4_K block size 256".into()
        )
    );
    let err = WeightMatrix::quantize(WeightFormat::Q4_0, shape, &[0.0; 300]).unwrap_err();
    assert!(matches!(err, MatmulError::Shape(_)), "{err}");
}

#[test]
fn from_raw_rejects_a_shape_whose_size_overflows() {
    let shape = WeightShape {
        n_out: usize::MAX / 2,
        n_in: 256,
    };
    let err = WeightMatrix::from_raw(WeightFormat::Q6K, shape, &[]).unwrap_err();
    assert!(
        matches!(&err, MatmulError::Shape(m) if m.contains("overflows")),
        "{err}"
    );
    let err = WeightMatrix::quantize(WeightFormat::Q6K, shape, &[]).unwrap_err();
    assert!(
        matches!(&err, MatmulError::Shape(m) if m.contains("overflows")),
        "{err}"
    );
}

#[test]
fn from_raw_rejects_non_finite_scales_and_values() {
    let inf = f16::INFINITY.to_le_bytes();
    let nan = f16::NAN.to_le_bytes();
    // (format, offset in the second row's first block, bits, what the message names)
    let cases = [
        (
            WeightFormat::Q8_0,
            0,
            inf,
            "q8_0 block 0: the scale d is inf",
        ),
        (
            WeightFormat::Q4_0,
            0,
            nan,
            "q4_0 block 0: the scale d is NaN",
        ),
        (
            WeightFormat::Q4K,
            0,
            inf,
            "q4_K block 0: the scale d is inf",
        ),
        (
            WeightFormat::Q4K,
            2,
            nan,
            "q4_K block 0: the scale dmin is NaN",
        ),
        (
            WeightFormat::Q6K,
            208,
            inf,
            "q6_K block 0: the scale d is inf",
        ),
        (WeightFormat::F16, 0, inf, "f16 block 0: the value is inf"),
        (
            WeightFormat::Bf16,
            0,
            [0xC0, 0x7F],
            "bf16 block 0: the value is NaN",
        ),
    ];
    for (format, at, bits, message) in cases {
        let shape = WeightShape {
            n_out: 2,
            n_in: format.block_size(),
        };
        let mut bytes = vec![0u8; 2 * format.block_bytes()];
        let row = format.block_bytes();
        bytes[row + at..row + at + 2].copy_from_slice(&bits);
        let err = WeightMatrix::from_raw(format, shape, &bytes).unwrap_err();
        assert_eq!(
            err,
            MatmulError::InvalidWeights(format!("row 1: {message}"))
        );
    }
    let mut bytes = 1.0f32.to_le_bytes().to_vec();
    bytes.extend(f32::NEG_INFINITY.to_le_bytes());
    let shape = WeightShape { n_out: 1, n_in: 2 };
    let err = WeightMatrix::from_raw(WeightFormat::F32, shape, &bytes).unwrap_err();
    assert_eq!(
        err,
        MatmulError::InvalidWeights("row 0: f32 block 1: the value is -inf".into())
    );
    // Negative and subnormal scales are valid.
    let mut block = vec![0u8; 34];
    block[..2].copy_from_slice(&f16::from_bits(0x8001).to_le_bytes());
    assert!(
        WeightMatrix::from_raw(
            WeightFormat::Q8_0,
            WeightShape { n_out: 1, n_in: 32 },
            &block
        )
        .is_ok()
    );
}

#[test]
fn weight_matrix_quantize_rejects_a_value_count_that_does_not_match() {
    let err =
        WeightMatrix::quantize(WeightFormat::Q8_0, q8_shape(), &q8_values()[1..]).unwrap_err();
    assert_eq!(
        err,
        MatmulError::Shape("values has 191 elements, expected n_out 3 x n_in 64".into())
    );
    let mut values = q8_values();
    values[100] = f32::NAN;
    let err = WeightMatrix::quantize(WeightFormat::Q8_0, q8_shape(), &values).unwrap_err();
    assert_eq!(
        err,
        MatmulError::InvalidWeights("row 1: values[36] is NaN, which q8_0 cannot hold".into())
    );
}

#[test]
fn weight_bytes_are_aligned_and_zeroed() {
    for len in [0, 1, 34, 4096, 3 << 20] {
        let buf = WeightBytes::zeroed(len).unwrap();
        assert_eq!(buf.len(), len);
        assert_eq!(buf.as_ptr() as usize % WEIGHT_ALIGN, 0);
        assert!(buf.iter().all(|&b| b == 0));
    }
    assert_eq!(&*WeightBytes::from_slice(&[1, 2, 3]).unwrap(), &[1, 2, 3]);
    assert!(matches!(
        WeightBytes::zeroed(usize::MAX),
        Err(MatmulError::Alloc(_))
    ));
}
