//! What one token of a model costs: a decoder layer's projections (each a weight matrix of
//! a [`WeightFormat`]) times the layer count ([`Workload`]).
//!
//! The sources build one; the tuner measures it; the cache keys profiles by its
//! [`Workload::key`]:
//!
//! - a preset ([`Workload::preset`], the [`presets::PRESETS`]) in the [`Weights`] asked for
//!   (`--weights`, [`Weights::default`] being `q4_K_M`);
//! - a Hugging Face `config.json` ([`Workload::from_hf_config`]) in the [`Weights`] asked for;
//! - a `.gguf` file's header ([`Workload::from_gguf`]): the shapes and the formats actually
//!   stored.
//!
//! Presets and configs give the seven projections q, k, v, o, gate, up, down ([`Role`]) of a
//! [`ModelDims`]; a `.gguf` workload names its projections after the file's tensors
//! (`attn_q`, …, or a fused `attn_qkv`), see [`Workload::from_gguf_header`].
//!
//! Every source bounds what it reads: a dimension is at most [`MAX_DIMENSION`], the layer
//! count at most [`MAX_LAYERS`], and a missing or absurd value is an error naming its field
//! or tensor.
//!
//! ```
//! use auto_tuner::workload::{Weights, Workload};
//! use matmul_kernel::WeightFormat;
//!
//! let w = Workload::preset("llama3-8b", Weights::default())?;
//! assert_eq!((w.name.as_str(), w.layers), ("llama3-8b q4_K_M", 32));
//! // v and down in q6_K, the rest in q4_K, as llama.cpp's Q4_K_M stores most layers.
//! let v = &w.projections[2];
//! assert_eq!((v.name.as_str(), v.n_out, v.n_in, v.format), ("v", 1024, 4096, WeightFormat::Q6K));
//! # Ok::<(), auto_tuner::TunerError>(())
//! ```

use matmul_kernel::{WeightFormat, WeightShape};
use serde::{Deserialize, Serialize};

mod dims;
mod from_gguf;
mod hf_config;
pub mod presets;
mod weights;

pub use dims::{DimsError, ModelDims, Role};
pub use hf_config::MAX_CONFIG_BYTES;
pub use weights::{Weights, storable_format};

/// The largest dimension (features, heads, head size) a source may give: 2²⁰, far above any
/// model's (Llama-3.1-405B's feed-forward is 53 248 wide) and small enough that no size of a
/// workload within it overflows.
pub const MAX_DIMENSION: usize = 1 << 20;

/// The most decoder layers a source may give (the deepest models have about 120).
pub const MAX_LAYERS: usize = 1024;

/// One weight matrix of a decoder layer: `n_out × n_in` weights of `format`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Projection {
    /// Its role in the layer: `q`, `k`, `v`, `o`, `gate`, `up`, `down` (or the tensor's name
    /// for a `.gguf` workload).
    pub name: String,
    /// Output features (rows of W).
    pub n_out: usize,
    /// Input features (columns of W); a multiple of the format's block size.
    pub n_in: usize,
    /// How the weights are stored (ggml's type name in JSON, e.g. `"q4_K"`).
    #[serde(with = "format_name")]
    pub format: WeightFormat,
}

impl Projection {
    /// The matrix's shape.
    pub fn shape(&self) -> WeightShape {
        WeightShape {
            n_out: self.n_out,
            n_in: self.n_in,
        }
    }

    /// Bytes of its weights (`None` when `n_in` is not whole blocks or the size overflows).
    pub fn weight_bytes(&self) -> Option<u64> {
        let row = self.format.row_bytes(self.n_in).ok()? as u64;
        row.checked_mul(self.n_out as u64)
    }
}

/// A model's decode cost: one decoder layer's projections, in the order a token runs them,
/// times `layers`.
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
    /// Bytes of one layer's weights (`None` on overflow or a malformed projection).
    pub fn layer_weight_bytes(&self) -> Option<u64> {
        self.projections
            .iter()
            .try_fold(0u64, |sum, p| sum.checked_add(p.weight_bytes()?))
    }

    /// A short, stable hash of the shapes, formats and layer count (not the name): 16 hex
    /// digits of FNV-1a over a canonical text, the cache's key for this workload.
    pub fn key(&self) -> String {
        use std::fmt::Write as _;
        let mut text = format!("layers={}", self.layers);
        for p in &self.projections {
            let _ = write!(text, ";{}x{}:{}", p.n_out, p.n_in, p.format);
        }
        format!("{:016x}", fnv1a64(text.as_bytes()))
    }
}

/// A [`WeightFormat`] as its ggml name in JSON.
mod format_name {
    use matmul_kernel::WeightFormat;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub(super) fn serialize<S: Serializer>(f: &WeightFormat, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(f)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<WeightFormat, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(D::Error::custom)
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

    fn layer(format: WeightFormat) -> Workload {
        let p = |name: &str, n_out, n_in| Projection {
            name: name.to_string(),
            n_out,
            n_in,
            format,
        };
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
    fn layer_bytes_sum_the_projections() {
        // q4_K: 144 bytes per 256 weights.
        let w = layer(WeightFormat::Q4K);
        assert_eq!(w.layer_weight_bytes(), Some(64 * 144 + 256 * 2 * 144));
        let mut bad = w.clone();
        bad.projections[0].n_in = 100;
        assert_eq!(bad.layer_weight_bytes(), None);
    }
}
