//! The weights the benchmark runs: copies of a decoder layer's projections as
//! [`WeightMatrix`]es ([`LayerWeights`]).
//!
//! The values are pseudo-random, quantized once per projection as a tile of
//! [`TILE_ROWS`] rows whose bytes are repeated down the matrix and copied for every layer
//! copy: the cost of a GEMV or GEMM does not depend on the values, and quantizing every
//! row of a 70B layer would take longer than the tune.

use crate::TunerError;
use crate::workload::{Projection, Workload};
use matmul_kernel::{MatmulError, WeightMatrix, WeightShape};
use std::time::Instant;

/// Rows quantized per projection; the rest of the matrix repeats their bytes.
pub(crate) const TILE_ROWS: usize = 64;

/// One projection as the benchmark runs it: the whole matrix, or a sample of its first rows
/// with a quarter of the sample beside it, so that the time of the whole rows can be
/// extrapolated without the per-call costs.
#[derive(Debug)]
pub(crate) struct Part {
    /// The matrix run (the whole projection, or its first rows).
    pub(crate) w: WeightMatrix,
    /// For a sample: its first quarter, run right after.
    pub(crate) quarter: Option<WeightMatrix>,
    /// Rows of the whole projection.
    n_out: usize,
}

impl Part {
    /// The seconds of the whole projection from the seconds of `w` and of `quarter`: the
    /// time per row is the difference over the rows between them (the per-call costs,
    /// quantizing the activations and waking the pool, cancel), extended to the rows `w`
    /// lacks; never below the time of `w`.
    pub(crate) fn whole_seconds(&self, seconds: f64, quarter_seconds: Option<f64>) -> f64 {
        let (Some(quarter), Some(quarter_seconds)) = (&self.quarter, quarter_seconds) else {
            return seconds;
        };
        let rows = self.w.shape().n_out;
        let per_row = (seconds - quarter_seconds).max(0.0) / (rows - quarter.shape().n_out) as f64;
        seconds + per_row * (self.n_out - rows) as f64
    }
}

/// Copies of a layer's projections.
#[derive(Debug)]
pub(crate) struct LayerWeights {
    copies: Vec<Vec<Part>>,
    /// Bytes of one whole layer (the sample's full size, for a sample).
    layer_bytes: u64,
    /// The projection with the fewest bytes (copy 0), to wake a pool cheaply.
    smallest: usize,
}

/// A deterministic pseudo-random weight in [-1, 1) for element `index` (splitmix64).
fn weight_value(index: u64) -> f32 {
    let mut z = index.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
}

fn kernel_error(p: &Projection, e: MatmulError) -> TunerError {
    TunerError::Kernel(format!("projection {}: {e}", p.name))
}

/// The bytes of `rows` rows of projection `p`: a quantized tile of pseudo-random values,
/// repeated.
fn projection_bytes(p: &Projection, rows: usize) -> Result<Vec<u8>, TunerError> {
    let tile_rows = rows.clamp(1, TILE_ROWS);
    let values: Vec<f32> = (0..tile_rows * p.n_in)
        .map(|i| weight_value(i as u64))
        .collect();
    let shape = WeightShape {
        n_out: tile_rows,
        n_in: p.n_in,
    };
    let tile = WeightMatrix::quantize(p.format, shape, &values).map_err(|e| kernel_error(p, e))?;
    let row_bytes = tile.row_bytes();
    let mut bytes = Vec::with_capacity(rows * row_bytes);
    while bytes.len() < rows * row_bytes {
        let left = rows * row_bytes - bytes.len();
        bytes.extend_from_slice(&tile.as_bytes()[..left.min(tile.as_bytes().len())]);
    }
    Ok(bytes)
}

impl LayerWeights {
    /// `copies` copies of the whole layer, the projections of a copy built on up to
    /// `n_threads` threads (so that on a NUMA machine their pages spread as the workers'
    /// do). Past `deadline` no further copy is made (at least one always is).
    pub(crate) fn decode(
        workload: &Workload,
        copies: usize,
        n_threads: usize,
        deadline: Option<Instant>,
    ) -> Result<LayerWeights, TunerError> {
        let tiles: Vec<Vec<u8>> = workload
            .projections
            .iter()
            .map(|p| projection_bytes(p, p.n_out))
            .collect::<Result<_, _>>()?;
        let mut layers = Vec::with_capacity(copies);
        for copy in 0..copies.max(1) {
            if copy > 0 && deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            layers.push(build_copy(workload, &tiles, n_threads)?);
        }
        Ok(Self::from_copies(layers, workload))
    }

    /// One copy of the first `rows` rows of every projection, with their first quarter
    /// (a projection of at most `rows` rows is whole).
    pub(crate) fn prefill_sample(
        workload: &Workload,
        rows: usize,
    ) -> Result<LayerWeights, TunerError> {
        let layer = workload
            .projections
            .iter()
            .map(|p| {
                let rows = rows.max(4).min(p.n_out);
                let bytes = projection_bytes(p, rows)?;
                let row_bytes = bytes.len() / rows;
                // The matrix of the first `n` rows of the sample.
                let first = |n: usize| {
                    let shape = WeightShape {
                        n_out: n,
                        n_in: p.n_in,
                    };
                    WeightMatrix::from_raw(p.format, shape, &bytes[..n * row_bytes])
                        .map_err(|e| kernel_error(p, e))
                };
                if rows == p.n_out {
                    return Ok(Part {
                        w: first(p.n_out)?,
                        quarter: None,
                        n_out: p.n_out,
                    });
                }
                Ok(Part {
                    w: first(rows)?,
                    quarter: Some(first(rows / 4)?),
                    n_out: p.n_out,
                })
            })
            .collect::<Result<Vec<_>, TunerError>>()?;
        Ok(Self::from_copies(vec![layer], workload))
    }

    fn from_copies(copies: Vec<Vec<Part>>, workload: &Workload) -> Self {
        let smallest = copies[0]
            .iter()
            .enumerate()
            .min_by_key(|(_, part)| part.w.as_bytes().len())
            .map_or(0, |(i, _)| i);
        LayerWeights {
            copies,
            layer_bytes: workload.layer_weight_bytes().unwrap_or(0),
            smallest,
        }
    }

    /// Layer copies held.
    pub(crate) fn copies(&self) -> usize {
        self.copies.len()
    }

    /// Bytes of one whole layer.
    pub(crate) fn layer_bytes(&self) -> u64 {
        self.layer_bytes
    }

    /// The projections of copy `copy`, in order.
    pub(crate) fn layer(&self, copy: usize) -> &[Part] {
        &self.copies[copy % self.copies.len()]
    }

    /// The projection with the fewest bytes.
    pub(crate) fn smallest(&self) -> &WeightMatrix {
        &self.copies[0][self.smallest].w
    }
}

/// One copy of a layer from each projection's bytes, projections built in parallel.
fn build_copy(
    workload: &Workload,
    tiles: &[Vec<u8>],
    n_threads: usize,
) -> Result<Vec<Part>, TunerError> {
    let build = |i: usize| -> Result<Part, TunerError> {
        let p = &workload.projections[i];
        let w = WeightMatrix::from_raw(p.format, p.shape(), &tiles[i])
            .map_err(|e| kernel_error(p, e))?;
        Ok(Part {
            w,
            quarter: None,
            n_out: p.n_out,
        })
    };
    let n = workload.projections.len();
    let per_thread = n.div_ceil(n_threads.max(1)).max(1);
    let parts: Vec<Result<Vec<Part>, TunerError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .step_by(per_thread)
            .map(|first| {
                let build = &build;
                scope.spawn(move || (first..(first + per_thread).min(n)).map(build).collect())
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(TunerError::Kernel("a preparation thread panicked".into()))
                })
            })
            .collect()
    });
    let mut layer = Vec::with_capacity(n);
    for part in parts {
        layer.extend(part?);
    }
    Ok(layer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use matmul_kernel::WeightFormat;

    fn workload() -> Workload {
        let p = |name: &str, n_out, n_in, format| Projection {
            name: name.into(),
            n_out,
            n_in,
            format,
        };
        Workload {
            name: "tiny".into(),
            layers: 3,
            projections: vec![
                p("q", 100, 256, WeightFormat::Q4K),
                p("down", 40, 512, WeightFormat::Q6K),
                p("w", 7, 32, WeightFormat::F32),
            ],
        }
    }

    #[test]
    fn copies_hold_every_projection_whole() {
        let w = workload();
        let layers = LayerWeights::decode(&w, 2, 2, None).unwrap();
        assert_eq!(layers.copies(), 2);
        assert_eq!(layers.layer_bytes(), w.layer_weight_bytes().unwrap());
        for copy in 0..2 {
            let shapes: Vec<_> = layers
                .layer(copy)
                .iter()
                .map(|part| (part.w.shape(), part.quarter.is_none()))
                .collect();
            let expected: Vec<_> = w.projections.iter().map(|p| (p.shape(), true)).collect();
            assert_eq!(shapes, expected);
            // A whole matrix's time is its own.
            assert_eq!(layers.layer(copy)[0].whole_seconds(0.25, None), 0.25);
        }
        assert_eq!(layers.smallest().shape().n_out, 7);
        // A spent deadline keeps one copy.
        let past = Some(Instant::now());
        assert_eq!(LayerWeights::decode(&w, 5, 1, past).unwrap().copies(), 1);
    }

    #[test]
    fn a_row_sample_extrapolates_the_rows_without_the_per_call_costs() {
        let layers = LayerWeights::prefill_sample(&workload(), 64).unwrap();
        let sample: Vec<_> = layers
            .layer(0)
            .iter()
            .map(|part| {
                (
                    part.w.shape().n_out,
                    part.quarter.as_ref().map(|q| q.shape().n_out),
                )
            })
            .collect();
        assert_eq!(sample, [(64, Some(16)), (40, None), (7, None)]);
        // 1 ms of per-call costs and 0.1 ms per row: 64 rows take 7.4 ms, 16 take 2.6 ms;
        // the whole 100 rows take 11 ms, not 7.4 × 100 / 64.
        let q = &layers.layer(0)[0];
        let whole = q.whole_seconds(7.4e-3, Some(2.6e-3));
        assert!((whole - 11e-3).abs() < 1e-12, "{whole}");
        // Noise that makes the quarter slower never makes the whole faster than the sample.
        assert_eq!(q.whole_seconds(7.4e-3, Some(8e-3)), 7.4e-3);
    }

    #[test]
    fn the_matrix_repeats_its_tile() {
        let p = &workload().projections[0];
        let bytes = projection_bytes(p, 100).unwrap();
        let w = WeightMatrix::from_raw(p.format, p.shape(), &bytes).unwrap();
        assert_eq!(w.row(64).unwrap(), w.row(0).unwrap());
        assert_eq!(w.row(99).unwrap(), w.row(35).unwrap());
        assert_ne!(w.row(1).unwrap(), w.row(0).unwrap());
    }
}
