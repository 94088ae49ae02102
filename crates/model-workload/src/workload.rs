//! [`Workload`] and [`Projection`]: what one token of a model costs, as a decoder layer's
//! weight matrices with the format each layer stores them in, and the one check every
//! source's workload passes ([`Workload::validate`]).

use crate::error::WorkloadError;
use crate::limits::{MAX_DIMENSION, MAX_LAYERS, MAX_PROJECTIONS, MAX_WORKLOAD_SIDE};
use crate::shown::shown;
use matmul_kernel::{WeightFormat, WeightShape};
use serde::{Deserialize, Serialize};

/// One weight matrix of a decoder layer: `n_out × n_in` weights, stored in each layer in
/// the format [`formats`](Self::formats) gives for it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Projection {
    /// Its role in the layer: `q`, `k`, `v`, `o`, `gate`, `up`, `down` (or the tensor's name
    /// for a `.gguf` workload).
    pub name: String,
    /// Output features (rows of W).
    pub n_out: usize,
    /// Input features (columns of W); a multiple of each format's block size.
    pub n_in: usize,
    /// The format of each layer's matrix, layer 0 first: one per layer of the workload
    /// (ggml's type names in JSON, e.g. `"q4_K"`). A quantized file mixes formats across
    /// layers (llama.cpp's `Q4_K_M` stores `attn_v` in `q6_K` in some layers and `q4_K` in
    /// the others), and decode reads every layer's own bytes.
    #[serde(with = "format_names")]
    pub formats: Vec<WeightFormat>,
}

impl Projection {
    /// A projection stored in `format` in each of `layers` layers.
    pub fn uniform(
        name: &str,
        n_out: usize,
        n_in: usize,
        format: WeightFormat,
        layers: usize,
    ) -> Self {
        Projection {
            name: name.to_string(),
            n_out,
            n_in,
            formats: vec![format; layers],
        }
    }

    /// The matrix's shape.
    pub fn shape(&self) -> WeightShape {
        WeightShape {
            n_out: self.n_out,
            n_in: self.n_in,
        }
    }

    /// Bytes of one matrix in `format` (`None` when `n_in` is not whole blocks of it or the
    /// size overflows).
    pub fn bytes_in(&self, format: WeightFormat) -> Option<u64> {
        let row = format.row_bytes(self.n_in).ok()? as u64;
        row.checked_mul(self.n_out as u64)
    }

    /// Each format the layers store, with the number of layers storing it, in the order
    /// first met (layer 0's first).
    pub fn format_mix(&self) -> Vec<(WeightFormat, usize)> {
        let mut mix: Vec<(WeightFormat, usize)> = Vec::new();
        for &format in &self.formats {
            match mix.iter_mut().find(|(f, _)| *f == format) {
                Some((_, count)) => *count += 1,
                None => mix.push((format, 1)),
            }
        }
        mix
    }

    /// Bytes of this projection's matrices over all layers (`None` on overflow or rows
    /// that are not whole blocks).
    pub fn token_bytes(&self) -> Option<u64> {
        self.format_mix()
            .into_iter()
            .try_fold(0u64, |sum, (format, layers)| {
                sum.checked_add(self.bytes_in(format)?.checked_mul(layers as u64)?)
            })
    }

    /// The mix as text, e.g. `q4_K` or `q6_K x16, q4_K x16`.
    pub fn mix_label(&self) -> String {
        let mix = self.format_mix();
        if let [(format, _)] = mix[..] {
            return format.to_string();
        }
        mix.iter()
            .map(|(format, layers)| format!("{format} x{layers}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A model's decode cost: one decoder layer's projections, in the order a token runs them,
/// each with the format of every one of the `layers` layers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Workload {
    /// What it is, e.g. `llama3-8b q4_K_M` or the `.gguf` file's architecture and name.
    pub name: String,
    /// Decoder layers per token.
    pub layers: usize,
    /// One layer's projections, in order (q, k, v, o, gate, up, down).
    pub projections: Vec<Projection>,
}

impl Workload {
    /// A workload of one `n_out × n_in` f32 matrix and one layer (`--workload ROWSxCOLS`): a
    /// synthetic projection, for comparisons with earlier versions and quick runs.
    pub fn matrix(n_out: usize, n_in: usize) -> Workload {
        Workload {
            name: format!("{n_out}x{n_in} f32"),
            layers: 1,
            projections: vec![Projection::uniform("w", n_out, n_in, WeightFormat::F32, 1)],
        }
    }

    /// Parses `ROWSxCOLS` (e.g. `4096x14336`), each between 1 and [`MAX_WORKLOAD_SIDE`],
    /// given as the setting `name`, into [`Workload::matrix`].
    pub fn parse_matrix(name: &str, value: &str) -> Result<Workload, WorkloadError> {
        let bad = || WorkloadError::InvalidSetting {
            name: name.to_string(),
            value: value.to_string(),
            expected: format!(
                "ROWSxCOLS with each between 1 and {MAX_WORKLOAD_SIDE}, e.g. 4096x4096"
            ),
        };
        let (rows, cols) = value.trim().split_once(['x', 'X']).ok_or_else(bad)?;
        let parse = |s: &str| {
            s.trim()
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=MAX_WORKLOAD_SIDE).contains(n))
        };
        match (parse(rows), parse(cols)) {
            (Some(n_out), Some(n_in)) => Ok(Workload::matrix(n_out, n_in)),
            _ => Err(bad()),
        }
    }

    /// Bytes of every projection's weights over all layers: what one decoded token reads
    /// (`None` on overflow or rows that are not whole blocks of their format). It checks
    /// nothing else: the other bounds of a workload are [`Workload::validate`]'s.
    pub fn token_weight_bytes(&self) -> Option<u64> {
        self.projections
            .iter()
            .try_fold(0u64, |sum, p| sum.checked_add(p.token_bytes()?))
    }

    /// Bytes of one matrix of each projection in each format its layers store: what one
    /// copy of the layer's distinct matrices holds (a layer's bytes when the formats are
    /// the same in every layer).
    pub fn distinct_matrix_bytes(&self) -> Option<u64> {
        self.projections.iter().try_fold(0u64, |sum, p| {
            p.format_mix()
                .into_iter()
                .try_fold(sum, |sum, (format, _)| sum.checked_add(p.bytes_in(format)?))
        })
    }

    /// Every format the workload holds, each once, in the order first met.
    pub fn formats(&self) -> Vec<WeightFormat> {
        let mut all = Vec::new();
        for p in &self.projections {
            for (format, _) in p.format_mix() {
                if !all.contains(&format) {
                    all.push(format);
                }
            }
        }
        all
    }

    /// Checks the workload before anything is allocated for it, whatever its source (a
    /// preset, a config, a `.gguf` file, `--workload`, an imported or cached profile):
    /// between 1 and [`MAX_LAYERS`] layers, between 1 and [`MAX_PROJECTIONS`] projections,
    /// every side of a projection between 1 and [`MAX_DIMENSION`], one format per layer,
    /// each holding the rows in whole blocks; returns [`Self::distinct_matrix_bytes`].
    pub fn validate(&self) -> Result<u64, WorkloadError> {
        let bad = |reason: String| WorkloadError::InvalidWorkload {
            name: self.name.clone(),
            reason,
        };
        if !(1..=MAX_LAYERS).contains(&self.layers) {
            return Err(bad(format!(
                "it has {} layers, not between 1 and {MAX_LAYERS}",
                self.layers
            )));
        }
        if !(1..=MAX_PROJECTIONS).contains(&self.projections.len()) {
            return Err(bad(format!(
                "a layer has {} projections, not between 1 and {MAX_PROJECTIONS}",
                self.projections.len()
            )));
        }
        for p in &self.projections {
            if p.n_out == 0 || p.n_in == 0 {
                return Err(bad(format!(
                    "projection {} is {}x{}: both sides must be at least 1",
                    shown(&p.name),
                    p.n_out,
                    p.n_in
                )));
            }
            if p.n_out > MAX_DIMENSION || p.n_in > MAX_DIMENSION {
                return Err(bad(format!(
                    "projection {} is {}x{}: both sides must be at most {MAX_DIMENSION}",
                    shown(&p.name),
                    p.n_out,
                    p.n_in
                )));
            }
            if p.formats.len() != self.layers {
                return Err(bad(format!(
                    "projection {} has {} layer formats for {} layers",
                    shown(&p.name),
                    p.formats.len(),
                    self.layers
                )));
            }
            for (format, _) in p.format_mix() {
                if p.bytes_in(format).is_none() {
                    return Err(bad(format!(
                        "projection {}: {} weights per row are not whole {} blocks of {}",
                        shown(&p.name),
                        p.n_in,
                        format,
                        format.block_size()
                    )));
                }
            }
        }
        self.token_weight_bytes()
            .and_then(|_| self.distinct_matrix_bytes())
            .ok_or_else(|| bad("its size overflows".to_string()))
    }

    /// A short, stable hash of the shapes, each layer's formats and the layer count (not
    /// the name): 16 hex digits of FNV-1a over a canonical text, the cache's key for this
    /// workload. A projection of one format in every layer hashes as it did before layers
    /// could differ, so that such a workload keeps its key.
    pub fn key(&self) -> String {
        use std::fmt::Write as _;
        let mut text = format!("layers={}", self.layers);
        for p in &self.projections {
            let _ = write!(text, ";{}x{}:", p.n_out, p.n_in);
            match p.format_mix()[..] {
                [(format, _)] => {
                    let _ = write!(text, "{format}");
                }
                _ => {
                    let names: Vec<&str> = p.formats.iter().map(|f| f.name()).collect();
                    text.push_str(&names.join(","));
                }
            }
        }
        format!("{:016x}", fnv1a64(text.as_bytes()))
    }
}

/// Each layer's [`WeightFormat`] as its ggml name in JSON.
mod format_names {
    use matmul_kernel::WeightFormat;
    use serde::ser::SerializeSeq;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub(super) fn serialize<S: Serializer>(
        formats: &[WeightFormat],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(formats.len()))?;
        for format in formats {
            seq.serialize_element(format.name())?;
        }
        seq.end()
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<WeightFormat>, D::Error> {
        let names = Vec::<String>::deserialize(d)?;
        names
            .iter()
            .map(|name| name.parse().map_err(D::Error::custom))
            .collect()
    }
}

/// FNV-1a, 64 bits: stable across builds and platforms (unlike `std`'s `DefaultHasher`).
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{MAX_DIMENSION, MAX_LAYERS, MAX_PROJECTIONS};

    fn layer(format: WeightFormat) -> Workload {
        let p = |name: &str, n_out, n_in| Projection::uniform(name, n_out, n_in, format, 2);
        Workload {
            name: "test".into(),
            layers: 2,
            projections: vec![p("q", 64, 256), p("down", 256, 512)],
        }
    }

    #[test]
    fn the_key_follows_shapes_formats_and_layers_but_not_the_name() {
        let a = layer(WeightFormat::Q4K);
        let mut renamed = a.clone();
        renamed.name = "other".into();
        assert_eq!(a.key(), renamed.key());
        assert_eq!(a.key().len(), 16);
        assert_ne!(a.key(), layer(WeightFormat::Q8_0).key());
        let mut deeper = a.clone();
        deeper.layers = 3;
        assert_ne!(a.key(), deeper.key());
        let mut wider = a.clone();
        wider.projections[0].n_out = 128;
        assert_ne!(a.key(), wider.key());
    }

    #[test]
    fn token_bytes_sum_every_layer_in_its_own_format() {
        // q4_K: 144 bytes per 256 weights; q6_K: 210.
        let w = layer(WeightFormat::Q4K);
        let layer_bytes = 64 * 144 + 256 * 2 * 144;
        assert_eq!(w.token_weight_bytes(), Some(2 * layer_bytes));
        assert_eq!(w.distinct_matrix_bytes(), Some(layer_bytes));
        assert_eq!(w.validate().unwrap(), layer_bytes);
        let mut mixed = w.clone();
        mixed.projections[1].formats[1] = WeightFormat::Q6K;
        assert_eq!(
            mixed.token_weight_bytes(),
            Some(2 * 64 * 144 + 256 * 2 * 144 + 256 * 2 * 210)
        );
        assert_eq!(
            mixed.distinct_matrix_bytes(),
            Some(layer_bytes + 256 * 2 * 210)
        );
        assert_eq!(mixed.projections[1].mix_label(), "q4_K x1, q6_K x1");
        assert_eq!(mixed.formats(), [WeightFormat::Q4K, WeightFormat::Q6K]);
        assert_ne!(mixed.key(), w.key());
        let mut bad = w.clone();
        bad.projections[0].n_in = 100;
        assert_eq!(bad.token_weight_bytes(), None);
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .contains("not whole q4_K blocks")
        );
        let mut short = w.clone();
        short.projections[0].formats.pop();
        let err = short.validate().unwrap_err().to_string();
        assert!(err.contains("1 layer formats for 2 layers"), "{err}");
    }

    #[test]
    fn a_uniform_workload_keeps_the_key_of_one_format_a_projection() {
        // The key text of a one-matrix f32 workload, as it was hashed before layers could
        // differ: profiles cached under it stay found.
        assert_eq!(
            Workload::matrix(64, 128).key(),
            format!("{:016x}", fnv1a64(b"layers=1;64x128:f32"))
        );
    }

    #[test]
    fn formats_travel_as_ggml_names_one_per_layer() {
        let mut w = layer(WeightFormat::Q4K);
        w.projections[1].formats[0] = WeightFormat::Q6K;
        let json = serde_json::to_value(&w).unwrap();
        assert_eq!(
            json["projections"][1]["formats"],
            serde_json::json!(["q6_K", "q4_K"])
        );
        let back: Workload = serde_json::from_value(json).unwrap();
        assert_eq!(back, w);
        let bad = serde_json::json!({"name": "x", "layers": 1, "projections": [
            {"name": "w", "n_out": 1, "n_in": 32, "formats": ["q5_K"]}]});
        assert!(serde_json::from_value::<Workload>(bad).is_err());
    }

    #[test]
    fn a_matrix_parses_and_rejects() {
        let w = Workload::parse_matrix("--workload", "64x128").unwrap();
        assert_eq!((w.layers, w.projections.len()), (1, 1));
        assert_eq!(w.projections[0].shape().n_out, 64);
        assert_eq!(w.projections[0].n_in, 128);
        assert_eq!(w.projections[0].formats, [WeightFormat::F32]);
        for bad in ["64", "0x4", "4x0", "axb", "4x99999999"] {
            let err = Workload::parse_matrix("--workload", bad)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("--workload") && err.contains("ROWSxCOLS"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_malformed_workload_is_a_clear_error_before_any_allocation() {
        let p = |n_out, n_in, format| Projection::uniform("gate", n_out, n_in, format, 1);
        let workload = |layers, projections| Workload {
            name: "bad".into(),
            layers,
            projections,
        };
        let cases = [
            (
                workload(0, vec![p(4, 4, WeightFormat::F32)]),
                "0 layers, not between 1 and 1024",
            ),
            (
                workload(MAX_LAYERS + 1, vec![p(4, 4, WeightFormat::F32)]),
                "1025 layers, not between 1 and 1024",
            ),
            (workload(1, vec![]), "0 projections"),
            (
                workload(1, vec![p(4, 4, WeightFormat::F32); MAX_PROJECTIONS + 1]),
                "65 projections",
            ),
            (
                workload(1, vec![p(MAX_DIMENSION + 1, 4, WeightFormat::F32)]),
                "gate is 1048577x4: both sides must be at most 1048576",
            ),
            (workload(1, vec![p(0, 4, WeightFormat::F32)]), "gate is 0x4"),
            (
                workload(1, vec![p(4, 100, WeightFormat::Q4K)]),
                "whole q4_K blocks of 256",
            ),
        ];
        for (w, reason) in cases {
            let err = w.validate().unwrap_err().to_string();
            assert!(err.contains(reason) && err.contains("bad"), "{err}");
        }
        assert_eq!(
            workload(
                2,
                vec![Projection::uniform("gate", 4, 256, WeightFormat::Q4K, 2)]
            )
            .validate()
            .unwrap(),
            4 * 144
        );
    }
}
