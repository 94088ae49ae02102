//! Every bound a workload source applies to what it reads: the `.gguf` header's sizes, a
//! `config.json`'s length, a model's dimensions and layers.

/// The most header bytes read (metadata and tensor table); a real model's header is a few
/// MiB, mostly its tokenizer.
pub const MAX_HEADER_BYTES: u64 = 256 << 20;

/// The most memory the parsed header may take, in bytes: as much as the header itself may
/// have ([`MAX_HEADER_BYTES`]). A real header takes about twice its tokenizer's bytes.
pub const MAX_HEADER_MEMORY_BYTES: u64 = MAX_HEADER_BYTES;

/// The longest string (key, value, tensor name), in bytes.
pub const MAX_STRING_BYTES: u64 = 1 << 20;

/// The most elements of one array (a 128k-token vocabulary has 128k).
pub const MAX_ARRAY_LEN: u64 = 16 << 20;

/// How deep arrays may nest (an array of arrays is depth 2).
pub const MAX_ARRAY_DEPTH: u32 = 4;

/// The most tensors in the table.
pub const MAX_TENSORS: u64 = 1 << 20;

/// The most metadata key/values.
pub const MAX_METADATA_KVS: u64 = 1 << 20;

/// The most dimensions of one tensor (ggml's `GGML_MAX_DIMS`).
pub const MAX_DIMS: u32 = 4;

/// The largest dimension (features, heads, head size) a source may give: 2²⁰, far above any
/// model's (Llama-3.1-405B's feed-forward is 53 248 wide) and small enough that no size of a
/// workload within it overflows.
pub const MAX_DIMENSION: usize = 1 << 20;

/// The largest side of a one-matrix workload (`--workload`): the bound of every workload
/// source, [`MAX_DIMENSION`].
pub const MAX_WORKLOAD_SIDE: usize = MAX_DIMENSION;

/// The most decoder layers a source may give (the deepest models have about 120).
pub const MAX_LAYERS: usize = 1024;

/// The most projections a layer may have (a model's layer has seven, a fused one four).
pub const MAX_PROJECTIONS: usize = 64;

/// The largest `config.json` read, in bytes (a real one is a few KiB).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The longest workload name taken from a file (`general.name`, `_name_or_path`), in
/// characters.
pub const MAX_NAME_CHARS: usize = 100;
