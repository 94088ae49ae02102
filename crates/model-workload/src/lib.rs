//! What one token of a model costs: a decoder layer's projections (each a weight matrix
//! stored, layer by layer, in a [`WeightFormat`]) times the layer count ([`Workload`]),
//! built from a preset, a Hugging Face `config.json` or a `.gguf` file's header.
//!
//! The sources build one; the tuner measures it; its cache keys profiles by
//! [`Workload::key`]:
//!
//! - a preset ([`Workload::preset`], the [`PRESETS`]) in the [`Weights`] asked for
//!   (`--weights`, [`Weights::default`] being llama.cpp's `q4_K_M` layer rule);
//! - a Hugging Face `config.json` ([`Workload::from_hf_config`]) in the [`Weights`] asked for;
//! - a `.gguf` file's header ([`Workload::from_gguf`]): the shapes and each layer's formats
//!   as the file stores them, never its weights;
//! - one f32 matrix ([`Workload::matrix`], `--workload ROWSxCOLS`).
//!
//! Presets and configs give the seven projections q, k, v, o, gate, up, down ([`Role`]) of a
//! [`ModelDims`]; a `.gguf` workload names its projections after the file's tensors
//! (`attn_q`, …, or a fused `attn_qkv`), see [`Workload::from_gguf_header`].
//!
//! Every source bounds what it reads (the [`limits`]: a dimension is at most
//! [`MAX_DIMENSION`], the layer count at most [`MAX_LAYERS`], a `.gguf` header at most
//! [`MAX_HEADER_BYTES`]), a missing or absurd value is a [`WorkloadError`] naming its field or
//! tensor, and [`Workload::validate`] checks any workload, whatever its source. Every text
//! from a file quoted in a message goes through [`shown`].
//!
//! ```
//! use model_workload::{Weights, Workload};
//! use matmul_kernel::WeightFormat;
//!
//! let w = Workload::preset("llama3-8b", Weights::default())?;
//! assert_eq!((w.name.as_str(), w.layers), ("llama3-8b q4_K_M", 32));
//! // v in q6_K in the layers llama.cpp's Q4_K_M picks (half of them), q4_K in the others.
//! let v = &w.projections[2];
//! assert_eq!((v.name.as_str(), v.n_out, v.n_in), ("v", 1024, 4096));
//! assert_eq!(v.format_mix(), [(WeightFormat::Q6K, 16), (WeightFormat::Q4K, 16)]);
//! w.validate()?;
//! # Ok::<(), model_workload::WorkloadError>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod dims;
mod error;
mod from_gguf;
mod gguf;
mod gguf_parser;
mod hf_config;
pub mod limits;
mod presets;
mod role;
mod shown;
#[cfg(test)]
mod test_writer;
mod unique_json;
mod weights;
mod workload;

pub use dims::{DimsError, ModelDims};
pub use error::WorkloadError;
pub use gguf::{ARCHITECTURE_KEY, GgufArray, GgufHeader, GgufTensor, GgufValue, tensor_format};
pub use gguf_parser::read_gguf_header;
pub use limits::{
    MAX_ARRAY_DEPTH, MAX_ARRAY_LEN, MAX_CONFIG_BYTES, MAX_DIMENSION, MAX_DIMS, MAX_HEADER_BYTES,
    MAX_HEADER_MEMORY_BYTES, MAX_LAYERS, MAX_METADATA_KVS, MAX_PROJECTIONS, MAX_STRING_BYTES,
    MAX_TENSORS, MAX_WORKLOAD_SIDE,
};
pub use matmul_kernel::WeightFormat;
pub use presets::{DEFAULT_PRESET, PRESETS, Preset, default_workload, find_preset, preset_names};
pub use role::Role;
pub use shown::{
    MAX_SHOWN_CHARS, MAX_SHOWN_MESSAGE_CHARS, MAX_SHOWN_PATH_CHARS, shown, shown_bytes,
    shown_message, shown_path, shown_within,
};
pub use unique_json::from_slice_unique_keys;
pub use weights::{Place, Weights, storable_format, use_more_bits};
pub use workload::{Projection, Workload};
