//! A bounded reader of a `.gguf` file's header: its metadata and tensor table, never its
//! weights.
//!
//! The layout (GGUF versions 2 and 3, little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `GGUF` |
//! | 4 | `u32` version |
//! | 8 | `u64` tensor count |
//! | 8 | `u64` metadata key/value count |
//! | … | each key/value: a string key, a `u32` value type, the value |
//! | … | each tensor: a string name, `u32` n_dims, n_dims × `u64` dims, `u32` ggml type, `u64` offset |
//!
//! A string is a `u64` byte length and that many UTF-8 bytes. The value types are 0 `u8`,
//! 1 `i8`, 2 `u16`, 3 `i16`, 4 `u32`, 5 `i32`, 6 `f32`, 7 `bool`, 8 string, 9 array (`u32`
//! element type, `u64` count, the elements), 10 `u64`, 11 `i64`, 12 `f64`. Version 1 (with
//! `u32` counts) is refused.
//!
//! ## Bounds
//! Every size read from the file is checked before anything is allocated: a string is at
//! most [`MAX_STRING_BYTES`], an array at most [`MAX_ARRAY_LEN`] elements nested at most
//! [`MAX_ARRAY_DEPTH`] deep, at most [`MAX_TENSORS`] tensors and [`MAX_METADATA_KVS`]
//! key/values, at most [`MAX_DIMS`] dimensions, and a count whose smallest possible encoding
//! would not fit in what is left of the file (or of [`MAX_HEADER_BYTES`]) is refused at once.
//! Nothing past [`MAX_HEADER_BYTES`] is read. Buffers grow with the bytes actually read, so
//! the memory held is a small multiple of the header's size, whatever the counts claim.
//! Every error names the field, key or tensor at fault and its byte offset.

use matmul_kernel::WeightFormat;
use std::collections::BTreeMap;
use std::fmt;
use std::fs::OpenOptions;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

/// The most header bytes read (metadata and tensor table); a real model's header is a few
/// MiB, mostly its tokenizer.
pub const MAX_HEADER_BYTES: u64 = 256 << 20;

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

/// Elements reserved ahead for a vector, whatever its count claims; it grows as elements
/// are read.
const PREALLOC: u64 = 4096;

/// The metadata key naming the model's architecture (`llama`, `qwen2`, …).
pub const ARCHITECTURE_KEY: &str = "general.architecture";

/// The header of a `.gguf` file: its version, metadata and tensor table.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufHeader {
    /// The format version (2 or 3).
    pub version: u32,
    /// The metadata, by key.
    pub metadata: BTreeMap<String, GgufValue>,
    /// The tensor table, in file order.
    pub tensors: Vec<GgufTensor>,
}

/// One entry of the tensor table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgufTensor {
    /// The tensor's name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// Its dimensions, innermost (contiguous) first, as ggml stores them.
    pub dims: Vec<u64>,
    /// Its ggml type id (see [`tensor_format`]).
    pub ggml_type: u32,
    /// The offset of its data from the start of the data section.
    pub offset: u64,
}

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum GgufValue {
    /// Type 0.
    U8(u8),
    /// Type 1.
    I8(i8),
    /// Type 2.
    U16(u16),
    /// Type 3.
    I16(i16),
    /// Type 4.
    U32(u32),
    /// Type 5.
    I32(i32),
    /// Type 6.
    F32(f32),
    /// Type 7 (a byte, 0 or 1).
    Bool(bool),
    /// Type 8.
    String(String),
    /// Type 9.
    Array(GgufArray),
    /// Type 10.
    U64(u64),
    /// Type 11.
    I64(i64),
    /// Type 12.
    F64(f64),
}

/// The elements of an array value, stored by type (so that a byte array costs a byte an
/// element in memory).
#[derive(Debug, Clone, PartialEq)]
pub enum GgufArray {
    /// Of type 0.
    U8(Vec<u8>),
    /// Of type 1.
    I8(Vec<i8>),
    /// Of type 2.
    U16(Vec<u16>),
    /// Of type 3.
    I16(Vec<i16>),
    /// Of type 4.
    U32(Vec<u32>),
    /// Of type 5.
    I32(Vec<i32>),
    /// Of type 6.
    F32(Vec<f32>),
    /// Of type 7.
    Bool(Vec<bool>),
    /// Of type 8.
    String(Vec<String>),
    /// Of type 9: arrays, each with its own element type.
    Array(Vec<GgufArray>),
    /// Of type 10.
    U64(Vec<u64>),
    /// Of type 11.
    I64(Vec<i64>),
    /// Of type 12.
    F64(Vec<f64>),
}

impl GgufArray {
    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            GgufArray::U8(v) => v.len(),
            GgufArray::I8(v) => v.len(),
            GgufArray::U16(v) => v.len(),
            GgufArray::I16(v) => v.len(),
            GgufArray::U32(v) => v.len(),
            GgufArray::I32(v) => v.len(),
            GgufArray::F32(v) => v.len(),
            GgufArray::Bool(v) => v.len(),
            GgufArray::String(v) => v.len(),
            GgufArray::Array(v) => v.len(),
            GgufArray::U64(v) => v.len(),
            GgufArray::I64(v) => v.len(),
            GgufArray::F64(v) => v.len(),
        }
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl GgufValue {
    /// The value as a `u64`, if it is an integer type holding a non-negative value.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            GgufValue::U8(v) => Some(v.into()),
            GgufValue::U16(v) => Some(v.into()),
            GgufValue::U32(v) => Some(v.into()),
            GgufValue::U64(v) => Some(v),
            GgufValue::I8(v) => u64::try_from(v).ok(),
            GgufValue::I16(v) => u64::try_from(v).ok(),
            GgufValue::I32(v) => u64::try_from(v).ok(),
            GgufValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::String(s) => Some(s),
            _ => None,
        }
    }
}

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
    #[error("not a gguf file: the magic at byte 0 is {found:?}, not \"GGUF\"")]
    BadMagic {
        /// The bytes found, shown lossily.
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
    #[error("{what} at byte {offset} is not valid utf-8 ({lossy:?})")]
    InvalidUtf8 {
        /// The string's role (a metadata key, the value of a key, a tensor name).
        what: String,
        /// Where it starts (its length prefix).
        offset: u64,
        /// Its bytes, shown lossily.
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
    #[error("metadata key {key:?} at byte {offset} is given twice")]
    DuplicateKey {
        /// The key.
        key: String,
        /// Where its second occurrence starts.
        offset: u64,
    },
    /// A tensor name given twice.
    #[error("tensor {name:?} at byte {offset} is given twice")]
    DuplicateTensor {
        /// The name.
        name: String,
        /// Where its second entry starts.
        offset: u64,
    },
    /// A metadata key is missing or holds the wrong kind of value.
    #[error("metadata {key}: {reason}")]
    Metadata {
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// A tensor stored in a format `matmul-kernel` lacks.
    #[error(
        "tensor {name:?} has ggml type {ggml_type}, which is none of the supported formats ({supported})",
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

/// Reads the header of the `.gguf` file at `path`: its version, metadata and tensor table,
/// within the bounds of the module docs. The weights are never read.
///
/// The file is opened without blocking and must be a regular file: a FIFO, a directory or a
/// device is an error, never a hang.
pub fn read_gguf_header(path: &Path) -> Result<GgufHeader, GgufError> {
    use std::os::unix::fs::OpenOptionsExt;
    let io_error = |e: io::Error| GgufError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(nix::libc::EISDIR) => {
            return Err(GgufError::NotAFile(path.to_path_buf()));
        }
        Err(e) => return Err(io_error(e)),
    };
    let meta = file.metadata().map_err(io_error)?;
    if !meta.is_file() {
        return Err(GgufError::NotAFile(path.to_path_buf()));
    }
    let mut parser = Parser::new(BufReader::with_capacity(64 << 10, file), Some(meta.len()));
    parser.header().map_err(|e| GgufError::InFile {
        path: path.to_path_buf(),
        source: Box::new(e),
    })
}

impl GgufHeader {
    /// Parses a header from `reader`, reading no further than the end of the tensor table
    /// (and never more than [`MAX_HEADER_BYTES`]). Its length being unknown, a count is
    /// checked against [`MAX_HEADER_BYTES`] only, and the end of the data is met as a
    /// [`GgufError::Truncated`].
    pub fn from_reader(reader: impl Read) -> Result<GgufHeader, GgufError> {
        Parser::new(reader, None).header()
    }

    /// Parses a header from the start of `bytes` (which may go on with the weights).
    ///
    /// ```
    /// use auto_tuner::{GgufError, GgufHeader, GgufValue};
    ///
    /// let mut bytes = b"GGUF".to_vec();
    /// bytes.extend(3u32.to_le_bytes()); // version
    /// bytes.extend(0u64.to_le_bytes()); // tensors
    /// bytes.extend(1u64.to_le_bytes()); // metadata key/values
    /// bytes.extend(4u64.to_le_bytes()); // key length
    /// bytes.extend(b"name");
    /// bytes.extend(8u32.to_le_bytes()); // a string value
    /// bytes.extend(u64::MAX.to_le_bytes()); // of absurd length
    /// let err = GgufHeader::from_bytes(&bytes).unwrap_err();
    /// assert!(matches!(err, GgufError::TooLarge { offset: 40, .. }));
    ///
    /// bytes.truncate(40);
    /// bytes.extend(2u64.to_le_bytes());
    /// bytes.extend(b"hi");
    /// let header = GgufHeader::from_bytes(&bytes)?;
    /// assert_eq!(header.metadata["name"], GgufValue::String("hi".into()));
    /// # Ok::<(), GgufError>(())
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Result<GgufHeader, GgufError> {
        Parser::new(bytes, Some(bytes.len() as u64)).header()
    }

    /// The model's architecture (`general.architecture`).
    pub fn architecture(&self) -> Result<&str, GgufError> {
        match self.metadata.get(ARCHITECTURE_KEY) {
            Some(value) => value.as_str().ok_or_else(|| GgufError::Metadata {
                key: ARCHITECTURE_KEY.to_string(),
                reason: format!("is {value:?}, not a string"),
            }),
            None => Err(GgufError::Metadata {
                key: ARCHITECTURE_KEY.to_string(),
                reason: "is missing".to_string(),
            }),
        }
    }

    /// The number of decoder layers: `<arch>.block_count`, `arch` being
    /// [`architecture`](Self::architecture). Missing, not an integer, zero or above
    /// [`MAX_TENSORS`] is an error naming the key.
    pub fn layer_count(&self) -> Result<usize, GgufError> {
        let key = format!("{}.block_count", self.architecture()?);
        let error = |reason: String| GgufError::Metadata {
            key: key.clone(),
            reason,
        };
        let value = self
            .metadata
            .get(&key)
            .ok_or_else(|| error("is missing".to_string()))?;
        match value.as_u64() {
            Some(n) if (1..=MAX_TENSORS).contains(&n) => {
                usize::try_from(n).map_err(|_| error(format!("{n} does not fit in usize")))
            }
            Some(n) => Err(error(format!("{n} is not between 1 and {MAX_TENSORS}"))),
            None => Err(error(format!("is {value:?}, not a non-negative integer"))),
        }
    }

    /// The tensor named `name`, if any.
    pub fn tensor(&self, name: &str) -> Option<&GgufTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

/// The weight format `tensor` is stored in; a ggml type `matmul-kernel` lacks is an error
/// naming the tensor.
pub fn tensor_format(tensor: &GgufTensor) -> Result<WeightFormat, GgufError> {
    WeightFormat::from_gguf_type_id(tensor.ggml_type).ok_or_else(|| GgufError::UnsupportedFormat {
        name: tensor.name.clone(),
        ggml_type: tensor.ggml_type,
    })
}

/// The value type ids.
mod value_type {
    pub const U8: u32 = 0;
    pub const I8: u32 = 1;
    pub const U16: u32 = 2;
    pub const I16: u32 = 3;
    pub const U32: u32 = 4;
    pub const I32: u32 = 5;
    pub const F32: u32 = 6;
    pub const BOOL: u32 = 7;
    pub const STRING: u32 = 8;
    pub const ARRAY: u32 = 9;
    pub const U64: u32 = 10;
    pub const I64: u32 = 11;
    pub const F64: u32 = 12;
}

/// The fewest bytes a value of type `ty` takes in the file (`None` for an unknown type).
fn min_value_bytes(ty: u32) -> Option<u64> {
    use value_type::*;
    Some(match ty {
        U8 | I8 | BOOL => 1,
        U16 | I16 => 2,
        U32 | I32 | F32 => 4,
        U64 | I64 | F64 => 8,
        // A length prefix.
        STRING => 8,
        // An element type and a count.
        ARRAY => 12,
        _ => return None,
    })
}

/// Reads the header's fields in order, keeping the byte offset and refusing to go past the
/// file's end (when known) or [`MAX_HEADER_BYTES`].
struct Parser<R> {
    reader: R,
    offset: u64,
    file_len: Option<u64>,
}

impl<R: Read> Parser<R> {
    fn new(reader: R, file_len: Option<u64>) -> Self {
        Parser {
            reader,
            offset: 0,
            file_len,
        }
    }

    /// The bytes that may still be read.
    fn left(&self) -> u64 {
        self.file_len
            .unwrap_or(u64::MAX)
            .min(MAX_HEADER_BYTES)
            .saturating_sub(self.offset)
    }

    /// Checks that `n` more bytes may be read for `what`.
    fn ensure(&self, n: u64, what: &dyn fmt::Display) -> Result<(), GgufError> {
        let end = self.offset.saturating_add(n);
        if self.file_len.is_some_and(|len| end > len) {
            return Err(self.truncated(what));
        }
        if end > MAX_HEADER_BYTES {
            return Err(GgufError::HeaderTooLarge {
                what: what.to_string(),
                offset: self.offset,
            });
        }
        Ok(())
    }

    #[cold]
    fn truncated(&self, what: &dyn fmt::Display) -> GgufError {
        GgufError::Truncated {
            what: what.to_string(),
            offset: self.offset,
        }
    }

    /// Fills `buf` for `what`.
    fn fill(&mut self, buf: &mut [u8], what: &dyn fmt::Display) -> Result<(), GgufError> {
        self.ensure(buf.len() as u64, what)?;
        self.reader.read_exact(buf).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                self.truncated(what)
            } else {
                GgufError::Read {
                    what: what.to_string(),
                    offset: self.offset,
                    message: e.to_string(),
                }
            }
        })?;
        self.offset += buf.len() as u64;
        Ok(())
    }

    fn array<const N: usize>(&mut self, what: &dyn fmt::Display) -> Result<[u8; N], GgufError> {
        let mut buf = [0; N];
        self.fill(&mut buf, what)?;
        Ok(buf)
    }

    fn u32(&mut self, what: &dyn fmt::Display) -> Result<u32, GgufError> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &dyn fmt::Display) -> Result<u64, GgufError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// Reads a count for `what`, at most `limit`, whose elements (each at least `min_bytes`)
    /// fit in what is left.
    fn count(
        &mut self,
        what: &dyn fmt::Display,
        limit: u64,
        min_bytes: u64,
    ) -> Result<u64, GgufError> {
        let offset = self.offset;
        let value = self.u64(what)?;
        if value > limit {
            return Err(GgufError::TooLarge {
                what: what.to_string(),
                offset,
                value,
                limit,
            });
        }
        let needed = u128::from(value) * u128::from(min_bytes);
        if needed > u128::from(self.left()) {
            return Err(GgufError::Overrun {
                what: what.to_string(),
                offset,
                value,
                needed,
                left: self.left(),
            });
        }
        Ok(value)
    }

    /// Reads a string; `what` names its role.
    fn string(&mut self, what: &dyn fmt::Display) -> Result<String, GgufError> {
        let offset = self.offset;
        let len = self.count(&format_args!("length of {what}"), MAX_STRING_BYTES, 1)?;
        // Bounded by `MAX_STRING_BYTES` and by what is left of the file.
        let mut bytes = vec![0; len as usize];
        self.fill(&mut bytes, what)?;
        String::from_utf8(bytes).map_err(|e| GgufError::InvalidUtf8 {
            what: what.to_string(),
            offset,
            lossy: String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    fn header(&mut self) -> Result<GgufHeader, GgufError> {
        let magic: [u8; 4] = self.array(&"the magic")?;
        if &magic != b"GGUF" {
            return Err(GgufError::BadMagic {
                found: String::from_utf8_lossy(&magic).into_owned(),
            });
        }
        let version = self.u32(&"the version")?;
        match version {
            2 | 3 => {}
            1 => {
                return Err(GgufError::UnsupportedVersion {
                    version,
                    why: "version 1 (32-bit counts) is not read; only versions 2 and 3 are",
                });
            }
            v if v.swap_bytes() == 2 || v.swap_bytes() == 3 => {
                return Err(GgufError::UnsupportedVersion {
                    version,
                    why: "a big-endian file; only little-endian versions 2 and 3 are read",
                });
            }
            _ => {
                return Err(GgufError::UnsupportedVersion {
                    version,
                    why: "only versions 2 and 3 are read",
                });
            }
        }
        // A tensor entry is at least a name's length, n_dims, a type and an offset.
        let n_tensors = self.count(&"the tensor count", MAX_TENSORS, 8 + 4 + 4 + 8)?;
        // A key/value is at least a key's length, a value type and a one-byte value.
        let n_kvs = self.count(&"the metadata count", MAX_METADATA_KVS, 8 + 4 + 1)?;
        let mut metadata = BTreeMap::new();
        for idx in 0..n_kvs {
            let offset = self.offset;
            let key = self.string(&format_args!("metadata key #{idx}"))?;
            let value = self.value_of(&key)?;
            if metadata.contains_key(&key) {
                return Err(GgufError::DuplicateKey { key, offset });
            }
            metadata.insert(key, value);
        }
        let mut tensors: Vec<GgufTensor> = Vec::with_capacity(n_tensors.min(PREALLOC) as usize);
        let mut names = std::collections::HashSet::new();
        for idx in 0..n_tensors {
            let offset = self.offset;
            let tensor = self.tensor(idx)?;
            if !names.insert(tensor.name.clone()) {
                return Err(GgufError::DuplicateTensor {
                    name: tensor.name,
                    offset,
                });
            }
            tensors.push(tensor);
        }
        Ok(GgufHeader {
            version,
            metadata,
            tensors,
        })
    }

    /// Reads the value type and value of metadata `key`.
    fn value_of(&mut self, key: &str) -> Result<GgufValue, GgufError> {
        let offset = self.offset;
        let ty = self.u32(&format_args!("the value type of {key:?}"))?;
        let what = format!("the value of {key:?}");
        self.value(ty, offset, &what, 1)
    }

    /// Reads one value of type `ty` (read at `ty_offset`) for `what`; `depth` is 1 outside
    /// arrays.
    fn value(
        &mut self,
        ty: u32,
        ty_offset: u64,
        what: &str,
        depth: u32,
    ) -> Result<GgufValue, GgufError> {
        use value_type::*;
        Ok(match ty {
            U8 => GgufValue::U8(u8::from_le_bytes(self.array(&what)?)),
            I8 => GgufValue::I8(i8::from_le_bytes(self.array(&what)?)),
            U16 => GgufValue::U16(u16::from_le_bytes(self.array(&what)?)),
            I16 => GgufValue::I16(i16::from_le_bytes(self.array(&what)?)),
            U32 => GgufValue::U32(u32::from_le_bytes(self.array(&what)?)),
            I32 => GgufValue::I32(i32::from_le_bytes(self.array(&what)?)),
            F32 => GgufValue::F32(f32::from_le_bytes(self.array(&what)?)),
            BOOL => GgufValue::Bool(self.bool(&what)?),
            STRING => GgufValue::String(self.string(&what)?),
            ARRAY => GgufValue::Array(self.array_value(what, depth)?),
            U64 => GgufValue::U64(u64::from_le_bytes(self.array(&what)?)),
            I64 => GgufValue::I64(i64::from_le_bytes(self.array(&what)?)),
            F64 => GgufValue::F64(f64::from_le_bytes(self.array(&what)?)),
            other => return Err(unknown_type(what, ty_offset, other)),
        })
    }

    fn bool(&mut self, what: &dyn fmt::Display) -> Result<bool, GgufError> {
        let offset = self.offset;
        match self.array::<1>(what)? {
            [0] => Ok(false),
            [1] => Ok(true),
            [b] => Err(GgufError::Invalid {
                what: what.to_string(),
                offset,
                reason: format!("a boolean is 0 or 1, not {b}"),
            }),
        }
    }

    /// Reads an array (its element type, count and elements) for `what` at nesting `depth`.
    fn array_value(&mut self, what: &str, depth: u32) -> Result<GgufArray, GgufError> {
        use value_type::*;
        let ty_offset = self.offset;
        if depth > MAX_ARRAY_DEPTH {
            return Err(GgufError::Invalid {
                what: what.to_string(),
                offset: ty_offset,
                reason: format!("arrays nest more than {MAX_ARRAY_DEPTH} deep"),
            });
        }
        let ty = self.u32(&format_args!("the element type of {what}"))?;
        let min_bytes = min_value_bytes(ty).ok_or_else(|| unknown_type(what, ty_offset, ty))?;
        let count = self.count(
            &format_args!("the element count of {what}"),
            MAX_ARRAY_LEN,
            min_bytes,
        )?;
        let cap = count.min(PREALLOC) as usize;
        macro_rules! numbers {
            ($variant:ident, $t:ty) => {{
                let mut values: Vec<$t> = Vec::with_capacity(cap);
                for _ in 0..count {
                    values.push(<$t>::from_le_bytes(self.array(&what)?));
                }
                GgufArray::$variant(values)
            }};
        }
        Ok(match ty {
            U8 => numbers!(U8, u8),
            I8 => numbers!(I8, i8),
            U16 => numbers!(U16, u16),
            I16 => numbers!(I16, i16),
            U32 => numbers!(U32, u32),
            I32 => numbers!(I32, i32),
            F32 => numbers!(F32, f32),
            U64 => numbers!(U64, u64),
            I64 => numbers!(I64, i64),
            F64 => numbers!(F64, f64),
            BOOL => {
                let mut values = Vec::with_capacity(cap);
                for _ in 0..count {
                    values.push(self.bool(&what)?);
                }
                GgufArray::Bool(values)
            }
            STRING => {
                let mut values = Vec::with_capacity(cap);
                for _ in 0..count {
                    values.push(self.string(&what)?);
                }
                GgufArray::String(values)
            }
            ARRAY => {
                let mut values = Vec::with_capacity(cap);
                for _ in 0..count {
                    values.push(self.array_value(what, depth + 1)?);
                }
                GgufArray::Array(values)
            }
            // `min_value_bytes` knows no other type.
            other => return Err(unknown_type(what, ty_offset, other)),
        })
    }

    /// Reads entry `idx` of the tensor table.
    fn tensor(&mut self, idx: u64) -> Result<GgufTensor, GgufError> {
        let name = self.string(&format_args!("the name of tensor #{idx}"))?;
        let dims_offset = self.offset;
        let n_dims = self.u32(&format_args!("n_dims of tensor {name:?}"))?;
        if n_dims > MAX_DIMS {
            return Err(GgufError::TooLarge {
                what: format!("n_dims of tensor {name:?}"),
                offset: dims_offset,
                value: n_dims.into(),
                limit: MAX_DIMS.into(),
            });
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        let mut n_elements: u64 = 1;
        for d in 0..n_dims {
            let offset = self.offset;
            let what = format!("dimension {d} of tensor {name:?}");
            let dim = self.u64(&what)?;
            n_elements = match n_elements.checked_mul(dim) {
                Some(n) if dim > 0 => n,
                _ => {
                    return Err(GgufError::Invalid {
                        what,
                        offset,
                        reason: format!(
                            "{dim} is zero or makes the element count overflow 64 bits"
                        ),
                    });
                }
            };
            dims.push(dim);
        }
        let ggml_type = self.u32(&format_args!("the type of tensor {name:?}"))?;
        let offset = self.u64(&format_args!("the data offset of tensor {name:?}"))?;
        Ok(GgufTensor {
            name,
            dims,
            ggml_type,
            offset,
        })
    }
}

#[cold]
fn unknown_type(what: &str, offset: u64, ty: u32) -> GgufError {
    GgufError::Invalid {
        what: format!("the type of {what}"),
        offset,
        reason: format!("{ty} is no gguf value type (0 to 12)"),
    }
}

#[cfg(test)]
mod tests;
