//! The weights the benchmark runs: copies of a decoder layer's projections as
//! [`WeightMatrix`]es ([`LayerWeights`]).
//!
//! A copy holds each projection once in each format its layers store, each matrix with its
//! share of the layers (`Part::share`): a pass weighs each matrix's time by its share, so
//! that a pass costs the model's mean layer and decode reads the file's own byte mix (a
//! `Q4_K_M` file's `q6_K` layers as much as its `q4_K` ones). A workload whose layers all
//! store the same formats has one matrix per projection, of share 1.
//!
//! The values are pseudo-random, quantized once per projection as a tile of
//! [`TILE_ROWS`] rows whose bytes are repeated down the matrix and copied for every layer
//! copy: the cost of a GEMV or GEMM does not depend on the values, and quantizing every
//! row of a 70B layer would take longer than the tune.

use crate::error::TunerError;
use matmul_kernel::{MatmulError, WeightFormat, WeightMatrix, WeightShape};
use model_workload::{Projection, Workload};
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
    /// The share of the model's layers that store this projection in this matrix's format.
    pub(crate) share: f64,
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

/// One matrix of a layer copy: a projection in one of the formats its layers store, and
/// the share of the layers that store it so.
#[derive(Debug, Clone, Copy)]
struct Matrix<'w> {
    projection: &'w Projection,
    format: WeightFormat,
    share: f64,
}

/// The matrices of one layer copy of `workload`, in the projections' order.
fn matrices(workload: &Workload) -> Vec<Matrix<'_>> {
    let layers = workload.layers.max(1) as f64;
    workload
        .projections
        .iter()
        .flat_map(|projection| {
            projection
                .format_mix()
                .into_iter()
                .map(move |(format, count)| Matrix {
                    projection,
                    format,
                    share: count as f64 / layers,
                })
        })
        .collect()
}

/// The matrices of one layer copy of `workload`: each projection once per format its
/// layers store.
pub(crate) fn matrices_per_copy(workload: &Workload) -> usize {
    matrices(workload).len()
}

/// Copies of a layer's projections.
#[derive(Debug)]
pub(crate) struct LayerWeights {
    copies: Vec<Vec<Part>>,
    /// Bytes of one copy (each projection in each of its formats; the sample's full size,
    /// for a sample).
    copy_bytes: u64,
    /// Bytes of the model's mean layer: a token's bytes over the layers.
    mean_layer_bytes: f64,
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

fn kernel_error(m: &Matrix, e: MatmulError) -> TunerError {
    TunerError::Kernel(format!(
        "projection {} in {}: {e}",
        model_workload::shown(&m.projection.name),
        m.format
    ))
}

/// The bytes of `rows` rows of matrix `m`: a quantized tile of pseudo-random values,
/// repeated.
fn matrix_bytes(m: &Matrix, rows: usize) -> Result<Vec<u8>, TunerError> {
    let p = m.projection;
    let tile_rows = rows.clamp(1, TILE_ROWS);
    let values: Vec<f32> = (0..tile_rows * p.n_in)
        .map(|i| weight_value(i as u64))
        .collect();
    let shape = WeightShape {
        n_out: tile_rows,
        n_in: p.n_in,
    };
    let tile = WeightMatrix::quantize(m.format, shape, &values).map_err(|e| kernel_error(m, e))?;
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
        let matrices = matrices(workload);
        let tiles: Vec<Vec<u8>> = matrices
            .iter()
            .map(|m| matrix_bytes(m, m.projection.n_out))
            .collect::<Result<_, _>>()?;
        let mut layers = Vec::with_capacity(copies);
        for copy in 0..copies.max(1) {
            if copy > 0 && deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            layers.push(build_copy(&matrices, &tiles, n_threads)?);
        }
        Ok(Self::from_copies(layers, workload))
    }

    /// One copy of the first `rows` rows of every projection, with their first quarter
    /// (a projection of at most `rows` rows is whole).
    pub(crate) fn prefill_sample(
        workload: &Workload,
        rows: usize,
    ) -> Result<LayerWeights, TunerError> {
        let layer = matrices(workload)
            .iter()
            .map(|m| {
                let p = m.projection;
                let rows = rows.max(4).min(p.n_out);
                let bytes = matrix_bytes(m, rows)?;
                let row_bytes = bytes.len() / rows;
                // The matrix of the first `n` rows of the sample.
                let first = |n: usize| {
                    let shape = WeightShape {
                        n_out: n,
                        n_in: p.n_in,
                    };
                    WeightMatrix::from_raw(m.format, shape, &bytes[..n * row_bytes])
                        .map_err(|e| kernel_error(m, e))
                };
                if rows == p.n_out {
                    return Ok(Part {
                        w: first(p.n_out)?,
                        quarter: None,
                        n_out: p.n_out,
                        share: m.share,
                    });
                }
                Ok(Part {
                    w: first(rows)?,
                    quarter: Some(first(rows / 4)?),
                    n_out: p.n_out,
                    share: m.share,
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
        let token_bytes = workload.token_weight_bytes().unwrap_or(0);
        LayerWeights {
            copies,
            copy_bytes: workload.distinct_matrix_bytes().unwrap_or(0),
            mean_layer_bytes: token_bytes as f64 / workload.layers.max(1) as f64,
            smallest,
        }
    }

    /// Layer copies held.
    pub(crate) fn copies(&self) -> usize {
        self.copies.len()
    }

    /// Bytes of one whole copy (each projection in each of its formats).
    pub(crate) fn copy_bytes(&self) -> u64 {
        self.copy_bytes
    }

    /// Bytes of the model's mean layer (a token's bytes over the layers).
    pub(crate) fn mean_layer_bytes(&self) -> f64 {
        self.mean_layer_bytes
    }

    /// One token's layer of copy `copy` measured by `time` (the seconds of one call on a
    /// matrix): each projection's whole time ([`Part::whole_seconds`]) counted for the share
    /// of the layers that store it in that matrix's format, summed. What decode and prefill
    /// time.
    pub(crate) fn layer_seconds(
        &self,
        copy: usize,
        mut time: impl FnMut(&WeightMatrix) -> Result<f64, TunerError>,
    ) -> Result<f64, TunerError> {
        let mut seconds = 0.0;
        for part in self.layer(copy) {
            let whole = time(&part.w)?;
            let quarter = part.quarter.as_ref().map(&mut time).transpose()?;
            seconds += part.share * part.whole_seconds(whole, quarter);
        }
        Ok(seconds)
    }

    /// The bytes a pass reads for one token's layer, from the matrices built: the
    /// [`Self::layer_seconds`] of a "time" that is each matrix's bytes, so that the weighing
    /// the timing uses is the one tested.
    #[cfg(test)]
    pub(crate) fn weighed_layer_bytes(&self, copy: usize) -> f64 {
        self.layer_seconds(copy, |w| Ok(w.as_bytes().len() as f64))
            .expect("counting bytes cannot fail")
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

/// One copy of a layer from each matrix's bytes, matrices built in parallel.
fn build_copy(
    matrices: &[Matrix],
    tiles: &[Vec<u8>],
    n_threads: usize,
) -> Result<Vec<Part>, TunerError> {
    let build = |i: usize| -> Result<Part, TunerError> {
        let m = &matrices[i];
        let p = m.projection;
        let w = WeightMatrix::from_raw(m.format, p.shape(), &tiles[i])
            .map_err(|e| kernel_error(m, e))?;
        Ok(Part {
            w,
            quarter: None,
            n_out: p.n_out,
            share: m.share,
        })
    };
    let n = matrices.len();
    let per_thread = n.div_ceil(n_threads.max(1)).max(1);
    let chunk = |first: usize| -> Result<Vec<Part>, TunerError> {
        (first..(first + per_thread).min(n)).map(build).collect()
    };
    let parts: Vec<Result<Vec<Part>, TunerError>> = std::thread::scope(|scope| {
        // A chunk whose thread the OS refuses (a pids cgroup, RLIMIT_NPROC) is built here,
        // after the others have started: slower, never a panic.
        let started: Vec<_> = (0..n)
            .step_by(per_thread)
            .map(|first| {
                let chunk = &chunk;
                std::thread::Builder::new()
                    .spawn_scoped(scope, move || chunk(first))
                    .map_err(|_| first)
            })
            .collect();
        started
            .into_iter()
            .map(|handle| match handle {
                Ok(h) => h.join().unwrap_or_else(|_| {
                    Err(TunerError::Kernel("a preparation thread panicked".into()))
                }),
                Err(first) => chunk(first),
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
        let p = |name: &str, n_out, n_in, format| Projection::uniform(name, n_out, n_in, format, 3);
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
        assert_eq!(layers.copy_bytes(), w.distinct_matrix_bytes().unwrap());
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
        let w = workload();
        let m = &matrices(&w)[0];
        let bytes = matrix_bytes(m, 100).unwrap();
        let w = WeightMatrix::from_raw(m.format, m.projection.shape(), &bytes).unwrap();
        assert_eq!(w.row(64).unwrap(), w.row(0).unwrap());
        assert_eq!(w.row(99).unwrap(), w.row(35).unwrap());
        assert_ne!(w.row(1).unwrap(), w.row(0).unwrap());
    }

    /// The bytes of a `.gguf` header with `tensors` (name, `[n_in, n_out]`, ggml type) for
    /// a llama of `layers` layers.
    fn gguf(layers: u32, tensors: &[(String, [u64; 2], u32)]) -> Vec<u8> {
        let string = |out: &mut Vec<u8>, s: &str| {
            out.extend((s.len() as u64).to_le_bytes());
            out.extend(s.as_bytes());
        };
        let mut out = b"GGUF".to_vec();
        out.extend(3u32.to_le_bytes());
        out.extend((tensors.len() as u64).to_le_bytes());
        out.extend(2u64.to_le_bytes());
        string(&mut out, "general.architecture");
        out.extend(8u32.to_le_bytes());
        string(&mut out, "llama");
        string(&mut out, "llama.block_count");
        out.extend(4u32.to_le_bytes());
        out.extend(layers.to_le_bytes());
        for (i, (name, dims, ggml_type)) in tensors.iter().enumerate() {
            string(&mut out, name);
            out.extend(2u32.to_le_bytes());
            out.extend(dims[0].to_le_bytes());
            out.extend(dims[1].to_le_bytes());
            out.extend(ggml_type.to_le_bytes());
            out.extend(((i as u64) << 20).to_le_bytes());
        }
        out
    }

    #[test]
    fn decode_reads_a_q4_k_m_file_s_own_byte_mix() {
        // A llama of 8 layers quantized as llama.cpp's Q4_K_M: attn_v and ffn_down in q6_K
        // (ggml type 14) in the layers use_more_bits picks (0, 3, 6, 7), q4_K (12) elsewhere.
        let layers = 8;
        let mut tensors = Vec::new();
        let mut file_bytes = 0u64;
        for layer in 0..layers {
            let more_bits = model_workload::use_more_bits(layer, layers);
            assert_eq!(more_bits, [0, 3, 6, 7].contains(&layer));
            for (base, n_in, n_out) in [
                ("attn_q", 256, 256),
                ("attn_k", 256, 64),
                ("attn_v", 256, 64),
                ("attn_output", 256, 256),
                ("ffn_gate", 256, 512),
                ("ffn_up", 256, 512),
                ("ffn_down", 512, 256),
            ] {
                let q6 = more_bits && matches!(base, "attn_v" | "ffn_down");
                let format = if q6 {
                    WeightFormat::Q6K
                } else {
                    WeightFormat::Q4K
                };
                file_bytes += (format.row_bytes(n_in).unwrap() * n_out) as u64;
                tensors.push((
                    format!("blk.{layer}.{base}.weight"),
                    [n_in as u64, n_out as u64],
                    format.gguf_type_id(),
                ));
            }
        }
        let header =
            model_workload::GgufHeader::from_bytes(&gguf(layers as u32, &tensors)).unwrap();
        let w = Workload::from_gguf_header(&header).unwrap();
        assert!(w.formats().contains(&WeightFormat::Q6K));
        let weights = LayerWeights::decode(&w, 2, 1, None).unwrap();
        // Both formats of v and down are built, and a pass weighs them by their layers.
        assert_eq!(weights.layer(0).len(), 9);
        for copy in 0..2 {
            let per_token = weights.weighed_layer_bytes(copy) * layers as f64;
            let off = (per_token - file_bytes as f64).abs() / file_bytes as f64;
            assert!(off < 0.01, "{per_token} against the file's {file_bytes}");
        }
        assert_eq!(
            weights.mean_layer_bytes() * layers as f64,
            file_bytes as f64
        );
        // Taking the format most layers store (q4_K for v and down) would have missed it.
        let q4_only: u64 = tensors
            .iter()
            .map(|(_, [n_in, n_out], _)| {
                WeightFormat::Q4K.row_bytes(*n_in as usize).unwrap() as u64 * n_out
            })
            .sum();
        assert!((file_bytes as f64 - q4_only as f64) / (file_bytes as f64) > 0.05);
    }
}
