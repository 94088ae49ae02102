//! [`GgufError`]: why a `.gguf` header cannot be read.

use super::{MAX_HEADER_BYTES, quoted};
use matmul_kernel::WeightFormat;
use std::fmt;
use std::path::PathBuf;

/// Why a `.gguf` header cannot be read. Every message names the field, key or tensor at
/// fault and, for what the file holds, its byte offset.
///
/// It is kept apart from [`crate::TunerError`], which wraps it as
/// [`crate::TunerError::Gguf`] for the callers that tune on a file's workload.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum GgufError {
    /// The file cannot be opened or read.
    #[error("cannot read {path}: {message}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's message.
        message: String,
    },
    /// A read failed in the middle of the header (not an end of file: that is
    /// [`GgufError::Truncated`]).
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
    #[error("{0} is not a regular file")]
    NotAFile(PathBuf),
    /// A file's header cannot be parsed; `source` says why.
    #[error("{path}: {source}")]
    InFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with its header.
        source: Box<GgufError>,
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
    /// [`MAX_HEADER_MEMORY_BYTES`](super::MAX_HEADER_MEMORY_BYTES) (many empty strings or
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
    #[error("metadata {}: {reason}", crate::shown(.key))]
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

/// `Debug` shows the message, as [`crate::TunerError`]'s does.
impl fmt::Debug for GgufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl GgufError {
    /// The error about the header itself, without the file's path around it.
    pub fn cause(&self) -> &GgufError {
        match self {
            GgufError::InFile { source, .. } => source.cause(),
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
