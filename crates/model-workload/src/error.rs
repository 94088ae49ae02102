//! [`WorkloadError`]: why a workload cannot be built or is unusable, the one error type of
//! the crate.

use crate::limits::MAX_HEADER_BYTES;
use crate::shown::{quoted, shown, shown_path, shown_within};
use matmul_kernel::WeightFormat;
use std::fmt;
use std::path::PathBuf;

/// Why a workload cannot be built (a preset, a setting, a `config.json`, a `.gguf` header)
/// or is unusable ([`crate::Workload::validate`]). Every message names the value, field,
/// key or tensor at fault and, for what a `.gguf` file holds, its byte offset; every text
/// taken from a file passes through [`crate::shown`].
///
/// `Debug` shows the message too, so that a `main` returning it prints what its user needs.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum WorkloadError {
    /// A setting (a flag or a variable) has a bad value.
    #[error("invalid {name}=\"{}\": {}", shown(.value), shown_within(.expected, LONG))]
    InvalidSetting {
        /// The variable or flag, e.g. `--weights`.
        name: String,
        /// The value as given.
        value: String,
        /// What is accepted.
        expected: String,
    },
    /// A model preset that does not exist; the message lists those that do.
    #[error("unknown model preset {:?}; the presets are {known}", shown(.name))]
    UnknownPreset {
        /// The name asked for.
        name: String,
        /// The presets' names, comma-separated.
        known: String,
    },
    /// A Hugging Face `config.json` cannot be read or is not a JSON object.
    #[error("model config {}: {}", shown_path(.path), shown_within(.message, LONG))]
    ModelConfig {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A field of a Hugging Face `config.json` is missing or holds an unusable value.
    #[error(
        "model config {}: field `{}` {}",
        shown_path(.path),
        shown(.field),
        shown_within(.reason, LONG)
    )]
    ModelConfigField {
        /// The file.
        path: PathBuf,
        /// The field, e.g. `num_key_value_heads` (or `text_config.hidden_size`).
        field: String,
        /// What is wrong, e.g. `is missing`.
        reason: String,
    },
    /// A workload breaks a bound or its own shape ([`crate::Workload::validate`]).
    #[error("invalid workload {}: {}", shown(.name), shown_within(.reason, LONG))]
    InvalidWorkload {
        /// The workload's name.
        name: String,
        /// Why it is unusable (naming the projection at fault, if one is).
        reason: String,
    },
    /// The file cannot be opened or read.
    #[error("cannot read {}: {message}", shown_path(.path))]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's message.
        message: String,
    },
    /// A read failed in the middle of the header (not an end of file: that is
    /// [`WorkloadError::Truncated`]).
    #[error("cannot read {what} at byte {offset}: {message}")]
    Read {
        /// The field being read.
        what: String,
        /// Where it starts.
        offset: u64,
        /// The system's message.
        message: String,
    },
    /// Something other than a regular file (a directory, a FIFO, a device) is at the path.
    #[error("{} is not a regular file", shown_path(.0))]
    NotAFile(PathBuf),
    /// A file's header cannot be parsed; `source` says why.
    #[error("{}: {source}", shown_path(.path))]
    InFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with its header.
        source: Box<WorkloadError>,
    },
    /// The first four bytes are not `GGUF`.
    #[error("not a gguf file: the magic at byte 0 is \"{found}\", not \"GGUF\"")]
    BadMagic {
        /// The bytes found, non-printable ones escaped (`\x00`).
        found: String,
    },
    /// A version other than 2 or 3.
    #[error("unsupported gguf version {version} at byte 4: {why}")]
    UnsupportedVersion {
        /// The version read.
        version: u32,
        /// Why it is refused.
        why: &'static str,
    },
    /// The data ends before `what`.
    #[error("the file ends in {what} at byte {offset}")]
    Truncated {
        /// The field being read.
        what: String,
        /// Where it starts.
        offset: u64,
    },
    /// The header goes on past [`MAX_HEADER_BYTES`].
    #[error("the header exceeds {MAX_HEADER_BYTES} bytes in {what} at byte {offset}")]
    HeaderTooLarge {
        /// The field being read.
        what: String,
        /// Where it starts.
        offset: u64,
    },
    /// The parsed header would take more memory than
    /// [`MAX_HEADER_MEMORY_BYTES`](crate::MAX_HEADER_MEMORY_BYTES) (many empty strings or
    /// arrays take three times their bytes in the file).
    #[error("{what} at byte {offset} would bring the header's memory above {limit} bytes")]
    MemoryLimit {
        /// The field being read.
        what: String,
        /// Where it starts.
        offset: u64,
        /// The most memory a header may take.
        limit: u64,
    },
    /// A count or length above its limit.
    #[error("{what} at byte {offset} is {value}, above the limit of {limit}")]
    TooLarge {
        /// The field.
        what: String,
        /// Where it is.
        offset: u64,
        /// The value read.
        value: u64,
        /// The most allowed.
        limit: u64,
    },
    /// A count whose elements could not fit in the rest of the file.
    #[error(
        "{what} at byte {offset} is {value}, but at least {needed} bytes would follow and only {left} remain"
    )]
    Overrun {
        /// The field.
        what: String,
        /// Where it is.
        offset: u64,
        /// The count read.
        value: u64,
        /// The fewest bytes its elements take.
        needed: u128,
        /// The bytes left in the file (or under [`MAX_HEADER_BYTES`]).
        left: u64,
    },
    /// A string that is not UTF-8.
    #[error("{what} at byte {offset} is not valid utf-8 (\"{lossy}\")")]
    InvalidUtf8 {
        /// The string's role (a metadata key, the value of a key, a tensor name).
        what: String,
        /// Where it starts (its length prefix).
        offset: u64,
        /// Its first bytes, shown lossily through [`crate::shown_bytes`].
        lossy: String,
    },
    /// A field with a value that is not allowed: an unknown value type, a boolean that is
    /// neither 0 nor 1, a zero or overflowing dimension, arrays nested too deep.
    #[error("{what} at byte {offset}: {reason}")]
    Invalid {
        /// The field.
        what: String,
        /// Where it is.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A metadata key given twice.
    #[error("metadata key {} at byte {offset} is given twice", quoted(.key))]
    DuplicateKey {
        /// The key.
        key: String,
        /// Where its second occurrence starts.
        offset: u64,
    },
    /// A tensor name given twice.
    #[error("tensor {} at byte {offset} is given twice", quoted(.name))]
    DuplicateTensor {
        /// The name.
        name: String,
        /// Where its second entry starts.
        offset: u64,
    },
    /// A metadata key is missing or holds the wrong kind of value.
    #[error("metadata {}: {reason}", shown(.key))]
    Metadata {
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// A tensor a workload needs is missing, or its shape or table entry is unusable (a
    /// layer's tensor missing, a shape unlike layer 0's, rows that are not whole blocks).
    #[error("tensor {} {reason}", quoted(.name))]
    Tensor {
        /// The tensor.
        name: String,
        /// What is wrong, e.g. `is missing`.
        reason: String,
    },
    /// A tensor stored in a format `matmul-kernel` lacks.
    #[error(
        "tensor {} has ggml type {ggml_type}, which is none of the supported formats ({supported})",
        quoted(.name),
        supported = supported_formats()
    )]
    UnsupportedFormat {
        /// The tensor.
        name: String,
        /// Its ggml type id.
        ggml_type: u32,
    },
}

/// `Debug` shows the message (see the type's docs).
impl fmt::Debug for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl WorkloadError {
    /// The error itself, without the file's path around it.
    pub fn cause(&self) -> &WorkloadError {
        match self {
            WorkloadError::InFile { source, .. } => source.cause(),
            other => other,
        }
    }
}

fn supported_formats() -> String {
    WeightFormat::ALL
        .iter()
        .map(|f| format!("{f} = {}", f.gguf_type_id()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The most characters of a message of ours that quotes values ([`shown_within`]): its own
/// text is whole, a value it quotes was already cut.
const LONG: usize = 2000;
