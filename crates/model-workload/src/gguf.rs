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
//! [`read_gguf_header`](crate::read_gguf_header) reads one, every size bounded
//! (`gguf_parser.rs` says how).

use crate::error::WorkloadError;
use crate::limits::{MAX_LAYERS, MAX_TENSORS};
use crate::shown::quoted;
use matmul_kernel::WeightFormat;
use std::collections::BTreeMap;

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

impl GgufHeader {
    /// The model's architecture (`general.architecture`).
    pub fn architecture(&self) -> Result<&str, WorkloadError> {
        match self.metadata.get(ARCHITECTURE_KEY) {
            Some(value) => value.as_str().ok_or_else(|| WorkloadError::Metadata {
                key: ARCHITECTURE_KEY.to_string(),
                reason: format!("is {}, not a string", described(value)),
            }),
            None => Err(WorkloadError::Metadata {
                key: ARCHITECTURE_KEY.to_string(),
                reason: "is missing".to_string(),
            }),
        }
    }

    /// The number of decoder layers: `<arch>.block_count`, `arch` being
    /// [`architecture`](Self::architecture). Missing, not an integer, zero or above
    /// [`MAX_TENSORS`] is an error naming the key (the last said as the workload says any
    /// count above [`MAX_LAYERS`]).
    pub fn layer_count(&self) -> Result<usize, WorkloadError> {
        let key = format!("{}.block_count", self.architecture()?);
        let error = |reason: String| WorkloadError::Metadata {
            key: key.clone(),
            reason,
        };
        let value = self
            .metadata
            .get(&key)
            .ok_or_else(|| error("is missing".to_string()))?;
        match value.as_u64() {
            Some(0) => Err(error("is 0: a model has at least one layer".to_string())),
            // Up to MAX_TENSORS here; the workload holds them to MAX_LAYERS, by the same words.
            Some(n) if n <= MAX_TENSORS => {
                usize::try_from(n).map_err(|_| error(format!("{n} does not fit in usize")))
            }
            Some(n) => Err(error(format!(
                "{n} is above the limit of {MAX_LAYERS} layers"
            ))),
            None => Err(error(format!(
                "is {}, not a non-negative integer",
                described(value)
            ))),
        }
    }

    /// The tensor named `name`, if any.
    pub fn tensor(&self, name: &str) -> Option<&GgufTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

/// What a metadata value is, for messages: a number or a (shown) string as such, an array
/// by its length, never the whole of a large value.
pub(crate) fn described(value: &GgufValue) -> String {
    match value {
        GgufValue::String(s) => format!("the string {}", quoted(s)),
        GgufValue::Array(a) => format!("an array of {} elements", a.len()),
        GgufValue::Bool(b) => format!("the boolean {b}"),
        GgufValue::F32(x) => format!("the float {x}"),
        GgufValue::F64(x) => format!("the float {x}"),
        GgufValue::I8(n) => format!("the integer {n}"),
        GgufValue::I16(n) => format!("the integer {n}"),
        GgufValue::I32(n) => format!("the integer {n}"),
        GgufValue::I64(n) => format!("the integer {n}"),
        other => match other.as_u64() {
            Some(n) => format!("the integer {n}"),
            None => "a value".to_string(),
        },
    }
}

/// The weight format `tensor` is stored in; a ggml type `matmul-kernel` lacks is an error
/// naming the tensor.
pub fn tensor_format(tensor: &GgufTensor) -> Result<WeightFormat, WorkloadError> {
    WeightFormat::from_gguf_type_id(tensor.ggml_type).ok_or_else(|| {
        WorkloadError::UnsupportedFormat {
            name: tensor.name.clone(),
            ggml_type: tensor.ggml_type,
        }
    })
}
