//! The bounded reader of a `.gguf` file's header ([`read_gguf_header`]): reads the fields in
//! order, bounding every size before anything is allocated.
//!
//! ## Bounds
//! Every size read from the file is checked before anything is allocated: a string is at
//! most [`MAX_STRING_BYTES`], an array at most [`MAX_ARRAY_LEN`] elements nested at most
//! [`MAX_ARRAY_DEPTH`] deep, at most [`MAX_TENSORS`] tensors and [`MAX_METADATA_KVS`]
//! key/values, at most [`MAX_DIMS`] dimensions, and a count whose smallest possible encoding
//! would not fit in what is left of the file (or of [`MAX_HEADER_BYTES`]) is refused at once.
//! Nothing past [`MAX_HEADER_BYTES`] is read. Buffers grow with the bytes actually read,
//! and the memory the parsed header takes (strings, arrays, map entries, tensors) is counted
//! as it is read: above [`MAX_HEADER_MEMORY_BYTES`] is an error, whatever the counts claim.
//! Every error names the field, key or tensor at fault and its byte offset.

use crate::error::WorkloadError;
use crate::gguf::{GgufArray, GgufHeader, GgufTensor, GgufValue};
use crate::limits::{
    MAX_ARRAY_DEPTH, MAX_ARRAY_LEN, MAX_DIMS, MAX_HEADER_BYTES, MAX_HEADER_MEMORY_BYTES,
    MAX_METADATA_KVS, MAX_STRING_BYTES, MAX_TENSORS,
};
use crate::shown::quoted;
use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, BufReader, Read};
use std::path::Path;

/// Elements reserved ahead for a vector, whatever its count claims; it grows as elements
/// are read.
const PREALLOC: u64 = 4096;

/// Reads the header of the `.gguf` file at `path`: its version, metadata and tensor table,
/// within the bounds of the module docs. The weights are never read.
///
/// The file is opened without blocking and must be a regular file: a FIFO, a directory or a
/// device is an error, never a hang.
pub fn read_gguf_header(path: &Path) -> Result<GgufHeader, WorkloadError> {
    let (file, meta) = regular_file::open(path, u64::MAX).map_err(|e| match e {
        regular_file::Error::NotAFile(_) | regular_file::Error::SymbolicLink(_) => {
            WorkloadError::NotAFile(path.to_path_buf())
        }
        regular_file::Error::Io { source, .. } => WorkloadError::Io {
            path: path.to_path_buf(),
            message: source.to_string(),
        },
        regular_file::Error::NotFound(_) => WorkloadError::Io {
            path: path.to_path_buf(),
            message: "no such file".to_string(),
        },
        other => WorkloadError::Io {
            path: path.to_path_buf(),
            message: other.to_string(),
        },
    })?;
    let mut parser = Parser::new(BufReader::with_capacity(64 << 10, file), Some(meta.len()));
    parser.header().map_err(|e| WorkloadError::InFile {
        path: path.to_path_buf(),
        source: Box::new(e),
    })
}

impl GgufHeader {
    /// Parses a header from `reader`, reading no further than the end of the tensor table
    /// (and never more than [`MAX_HEADER_BYTES`]). Its length being unknown, a count is
    /// checked against [`MAX_HEADER_BYTES`] only, and the end of the data is met as a
    /// [`WorkloadError::Truncated`].
    pub fn from_reader(reader: impl Read) -> Result<GgufHeader, WorkloadError> {
        Parser::new(reader, None).header()
    }

    /// Parses a header from the start of `bytes` (which may go on with the weights).
    ///
    /// ```
    /// use model_workload::{WorkloadError, GgufHeader, GgufValue};
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
    /// assert!(matches!(err, WorkloadError::TooLarge { offset: 40, .. }));
    ///
    /// bytes.truncate(40);
    /// bytes.extend(2u64.to_le_bytes());
    /// bytes.extend(b"hi");
    /// let header = GgufHeader::from_bytes(&bytes)?;
    /// assert_eq!(header.metadata["name"], GgufValue::String("hi".into()));
    /// # Ok::<(), WorkloadError>(())
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Result<GgufHeader, WorkloadError> {
        Parser::new(bytes, Some(bytes.len() as u64)).header()
    }
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
pub(crate) struct Parser<R> {
    reader: R,
    pub(crate) offset: u64,
    file_len: Option<u64>,
    /// The bytes of memory the parsed header may still take ([`MAX_HEADER_MEMORY_BYTES`]
    /// at the start).
    memory_left: u64,
}

impl<R: Read> Parser<R> {
    pub(crate) fn new(reader: R, file_len: Option<u64>) -> Self {
        Parser {
            reader,
            offset: 0,
            file_len,
            memory_left: MAX_HEADER_MEMORY_BYTES,
        }
    }

    /// The same parser with at most `bytes` of memory for the parsed header.
    #[cfg(test)]
    pub(crate) fn with_memory_limit(mut self, bytes: u64) -> Self {
        self.memory_left = bytes;
        self
    }

    /// Counts `bytes` of memory the parsed header takes for `what`: an error once the whole
    /// exceeds the limit, before the memory is taken. Empty strings and arrays take their
    /// `Vec` or `String` of 24 bytes each in memory for 8 or 12 bytes in the file, so the
    /// file's size alone would not bound the memory.
    fn hold(&mut self, bytes: u64, what: &dyn fmt::Display) -> Result<(), WorkloadError> {
        match self.memory_left.checked_sub(bytes) {
            Some(left) => {
                self.memory_left = left;
                Ok(())
            }
            None => Err(WorkloadError::MemoryLimit {
                what: what.to_string(),
                offset: self.offset,
                limit: MAX_HEADER_MEMORY_BYTES,
            }),
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
    fn ensure(&self, n: u64, what: &dyn fmt::Display) -> Result<(), WorkloadError> {
        let end = self.offset.saturating_add(n);
        if self.file_len.is_some_and(|len| end > len) {
            return Err(self.truncated(what));
        }
        if end > MAX_HEADER_BYTES {
            return Err(WorkloadError::HeaderTooLarge {
                what: what.to_string(),
                offset: self.offset,
            });
        }
        Ok(())
    }

    #[cold]
    fn truncated(&self, what: &dyn fmt::Display) -> WorkloadError {
        WorkloadError::Truncated {
            what: what.to_string(),
            offset: self.offset,
        }
    }

    /// Fills `buf` for `what`.
    fn fill(&mut self, buf: &mut [u8], what: &dyn fmt::Display) -> Result<(), WorkloadError> {
        self.ensure(buf.len() as u64, what)?;
        self.reader.read_exact(buf).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                self.truncated(what)
            } else {
                WorkloadError::Read {
                    what: what.to_string(),
                    offset: self.offset,
                    message: e.to_string(),
                }
            }
        })?;
        self.offset += buf.len() as u64;
        Ok(())
    }

    fn array<const N: usize>(&mut self, what: &dyn fmt::Display) -> Result<[u8; N], WorkloadError> {
        let mut buf = [0; N];
        self.fill(&mut buf, what)?;
        Ok(buf)
    }

    pub(crate) fn u32(&mut self, what: &dyn fmt::Display) -> Result<u32, WorkloadError> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &dyn fmt::Display) -> Result<u64, WorkloadError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// Reads a count for `what`, at most `limit`, whose elements (each at least `min_bytes`)
    /// fit in what is left.
    pub(crate) fn count(
        &mut self,
        what: &dyn fmt::Display,
        limit: u64,
        min_bytes: u64,
    ) -> Result<u64, WorkloadError> {
        let offset = self.offset;
        let value = self.u64(what)?;
        if value > limit {
            return Err(WorkloadError::TooLarge {
                what: what.to_string(),
                offset,
                value,
                limit,
            });
        }
        let needed = u128::from(value) * u128::from(min_bytes);
        if needed > u128::from(self.left()) {
            return Err(WorkloadError::Overrun {
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
    fn string(&mut self, what: &dyn fmt::Display) -> Result<String, WorkloadError> {
        let offset = self.offset;
        let len = self.count(&format_args!("length of {what}"), MAX_STRING_BYTES, 1)?;
        self.hold(len, what)?;
        // Bounded by `MAX_STRING_BYTES` and by what is left of the file.
        let mut bytes = vec![0; len as usize];
        self.fill(&mut bytes, what)?;
        String::from_utf8(bytes).map_err(|e| WorkloadError::InvalidUtf8 {
            what: what.to_string(),
            offset,
            lossy: crate::shown::shown_bytes(e.as_bytes()),
        })
    }

    pub(crate) fn header(&mut self) -> Result<GgufHeader, WorkloadError> {
        let magic: [u8; 4] = self.array(&"the magic")?;
        if &magic != b"GGUF" {
            return Err(WorkloadError::BadMagic {
                found: magic.escape_ascii().to_string(),
            });
        }
        let version = self.u32(&"the version")?;
        match version {
            2 | 3 => {}
            1 => {
                return Err(WorkloadError::UnsupportedVersion {
                    version,
                    why: "version 1 (32-bit counts) is not read; only versions 2 and 3 are",
                });
            }
            v if v.swap_bytes() == 2 || v.swap_bytes() == 3 => {
                return Err(WorkloadError::UnsupportedVersion {
                    version,
                    why: "a big-endian file; only little-endian versions 2 and 3 are read",
                });
            }
            _ => {
                return Err(WorkloadError::UnsupportedVersion {
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
            // A map entry: its key, its value and the tree's links.
            self.hold(
                (size_of::<String>() + size_of::<GgufValue>() + 16) as u64,
                &format_args!("metadata key #{idx}"),
            )?;
            let key = self.string(&format_args!("metadata key #{idx}"))?;
            let value = self.value_of(&key)?;
            if metadata.contains_key(&key) {
                return Err(WorkloadError::DuplicateKey { key, offset });
            }
            metadata.insert(key, value);
        }
        let mut tensors: Vec<GgufTensor> = Vec::with_capacity(n_tensors.min(PREALLOC) as usize);
        let mut names = std::collections::HashSet::new();
        for idx in 0..n_tensors {
            let offset = self.offset;
            let tensor = self.tensor(idx)?;
            if !names.insert(tensor.name.clone()) {
                return Err(WorkloadError::DuplicateTensor {
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
    fn value_of(&mut self, key: &str) -> Result<GgufValue, WorkloadError> {
        let offset = self.offset;
        let key = quoted(key);
        let ty = self.u32(&format_args!("the value type of {key}"))?;
        let what = format!("the value of {key}");
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
    ) -> Result<GgufValue, WorkloadError> {
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

    fn bool(&mut self, what: &dyn fmt::Display) -> Result<bool, WorkloadError> {
        let offset = self.offset;
        match self.array::<1>(what)? {
            [0] => Ok(false),
            [1] => Ok(true),
            [b] => Err(WorkloadError::Invalid {
                what: what.to_string(),
                offset,
                reason: format!("a boolean is 0 or 1, not {b}"),
            }),
        }
    }

    /// Reads an array (its element type, count and elements) for `what` at nesting `depth`.
    fn array_value(&mut self, what: &str, depth: u32) -> Result<GgufArray, WorkloadError> {
        use value_type::*;
        let ty_offset = self.offset;
        if depth > MAX_ARRAY_DEPTH {
            return Err(WorkloadError::Invalid {
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
        let element_bytes = match ty {
            STRING => size_of::<String>(),
            ARRAY => size_of::<GgufArray>(),
            BOOL => size_of::<bool>(),
            // A number takes in memory what it takes in the file.
            _ => min_value_bytes(ty).unwrap_or(8) as usize,
        };
        self.hold(count.saturating_mul(element_bytes as u64), &what)?;
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
    fn tensor(&mut self, idx: u64) -> Result<GgufTensor, WorkloadError> {
        let name = self.string(&format_args!("the name of tensor #{idx}"))?;
        let shown_name = quoted(&name);
        let dims_offset = self.offset;
        let n_dims = self.u32(&format_args!("n_dims of tensor {shown_name}"))?;
        if n_dims > MAX_DIMS {
            return Err(WorkloadError::TooLarge {
                what: format!("n_dims of tensor {shown_name}"),
                offset: dims_offset,
                value: n_dims.into(),
                limit: MAX_DIMS.into(),
            });
        }
        self.hold(
            (size_of::<GgufTensor>() + 2 * name.len() + 8 * n_dims as usize) as u64,
            &format_args!("tensor {shown_name}"),
        )?;
        let mut dims = Vec::with_capacity(n_dims as usize);
        let mut n_elements: u64 = 1;
        for d in 0..n_dims {
            let offset = self.offset;
            let what = format!("dimension {d} of tensor {shown_name}");
            let dim = self.u64(&what)?;
            n_elements = match n_elements.checked_mul(dim) {
                Some(n) if dim > 0 => n,
                _ => {
                    return Err(WorkloadError::Invalid {
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
        let ggml_type = self.u32(&format_args!("the type of tensor {shown_name}"))?;
        let offset = self.u64(&format_args!("the data offset of tensor {shown_name}"))?;
        Ok(GgufTensor {
            name,
            dims,
            ggml_type,
            offset,
        })
    }
}

#[cold]
fn unknown_type(what: &str, offset: u64, ty: u32) -> WorkloadError {
    WorkloadError::Invalid {
        what: format!("the type of {what}"),
        offset,
        reason: format!("{ty} is no gguf value type (0 to 12)"),
    }
}

#[cfg(test)]
mod tests;
