//! [`WeightFormat`]: the weight formats, with their block sizes and GGUF type ids.

use crate::error::MatmulError;
use std::fmt;
use std::str::FromStr;

/// A weight format of GGUF files. A row of `n_in` weights is `n_in / block_size()` blocks of
/// `block_bytes()` bytes each; `n_in` must be a multiple of the block size.
///
/// | format | weights per block | bytes per block | ggml type id | block type |
/// |---|---|---|---|---|
/// | `f32` | 1 | 4 | 0 | `f32`, little-endian |
/// | `f16` | 1 | 2 | 1 | IEEE half, little-endian |
/// | `bf16` | 1 | 2 | 30 | the upper 16 bits of an f32, little-endian |
/// | `q8_0` | 32 | 34 | 8 | [`BlockQ8_0`](crate::BlockQ8_0) |
/// | `q4_0` | 32 | 18 | 2 | [`BlockQ4_0`](crate::BlockQ4_0) |
/// | `q4_K` | 256 | 144 | 12 | [`BlockQ4K`](crate::BlockQ4K) |
/// | `q6_K` | 256 | 210 | 14 | [`BlockQ6K`](crate::BlockQ6K) |
///
/// The ids are ggml's `enum ggml_type` (gguf-py's `GGMLQuantizationType`), the value a GGUF
/// file stores for each tensor. `Display` and `FromStr` use the names of the first column,
/// which are ggml's type names (`FromStr` accepts them in any ASCII case).
///
/// ```
/// use matmul_kernel::WeightFormat;
///
/// let q4k: WeightFormat = "q4_K".parse()?;
/// assert_eq!(q4k, WeightFormat::Q4K);
/// assert_eq!((q4k.block_size(), q4k.block_bytes(), q4k.gguf_type_id()), (256, 144, 12));
/// assert_eq!(q4k.to_string(), "q4_K");
/// assert_eq!(WeightFormat::from_gguf_type_id(8), Some(WeightFormat::Q8_0));
/// # Ok::<(), matmul_kernel::MatmulError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    /// 32-bit IEEE floats.
    F32,
    /// 16-bit IEEE floats.
    F16,
    /// bfloat16: an f32 without its lower 16 bits.
    Bf16,
    /// 32 weights as `d · q`, `q` an i8.
    Q8_0,
    /// 32 weights as `d · (q − 8)`, `q` a nibble.
    Q4_0,
    /// 256 weights in 8 sub-blocks of 32, each `d·sc · q − dmin·m`, `q` a nibble, `sc` and `m`
    /// 6-bit.
    Q4K,
    /// 256 weights in 16 sub-blocks of 16, each `d·sc · (q − 32)`, `q` 6-bit, `sc` an i8.
    Q6K,
}

impl WeightFormat {
    /// Every format, in the order of the table above.
    pub const ALL: [WeightFormat; 7] = [
        WeightFormat::F32,
        WeightFormat::F16,
        WeightFormat::Bf16,
        WeightFormat::Q8_0,
        WeightFormat::Q4_0,
        WeightFormat::Q4K,
        WeightFormat::Q6K,
    ];

    /// Weights per block (1 for the float formats).
    pub const fn block_size(self) -> usize {
        match self {
            WeightFormat::F32 | WeightFormat::F16 | WeightFormat::Bf16 => 1,
            WeightFormat::Q8_0 | WeightFormat::Q4_0 => 32,
            WeightFormat::Q4K | WeightFormat::Q6K => 256,
        }
    }

    /// Bytes per block.
    pub const fn block_bytes(self) -> usize {
        match self {
            WeightFormat::F32 => 4,
            WeightFormat::F16 | WeightFormat::Bf16 => 2,
            WeightFormat::Q8_0 => 34,
            WeightFormat::Q4_0 => 18,
            WeightFormat::Q4K => 144,
            WeightFormat::Q6K => 210,
        }
    }

    /// The ggml type id a GGUF file stores for a tensor of this format.
    pub const fn gguf_type_id(self) -> u32 {
        match self {
            WeightFormat::F32 => 0,
            WeightFormat::F16 => 1,
            WeightFormat::Q4_0 => 2,
            WeightFormat::Q8_0 => 8,
            WeightFormat::Q4K => 12,
            WeightFormat::Q6K => 14,
            WeightFormat::Bf16 => 30,
        }
    }

    /// The format of a ggml type id, if it is one of these.
    pub fn from_gguf_type_id(id: u32) -> Option<WeightFormat> {
        WeightFormat::ALL
            .into_iter()
            .find(|f| f.gguf_type_id() == id)
    }

    /// ggml's name of the format (`q4_K`, not `q4_k`).
    pub const fn name(self) -> &'static str {
        match self {
            WeightFormat::F32 => "f32",
            WeightFormat::F16 => "f16",
            WeightFormat::Bf16 => "bf16",
            WeightFormat::Q8_0 => "q8_0",
            WeightFormat::Q4_0 => "q4_0",
            WeightFormat::Q4K => "q4_K",
            WeightFormat::Q6K => "q6_K",
        }
    }

    /// Whether the format stores blocks with scales (not one float per weight).
    pub const fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// Bytes of a row of `n_in` weights: `Err(Shape)` when `n_in` is not a multiple of the
    /// block size or the size overflows.
    pub fn row_bytes(self, n_in: usize) -> Result<usize, MatmulError> {
        if !n_in.is_multiple_of(self.block_size()) {
            return Err(MatmulError::Shape(format!(
                "row of {n_in} weights is not a multiple of the {self} block size {}",
                self.block_size()
            )));
        }
        (n_in / self.block_size())
            .checked_mul(self.block_bytes())
            .ok_or_else(|| {
                MatmulError::Shape(format!(
                    "{self} row of {n_in} weights overflows usize bytes"
                ))
            })
    }
}

impl fmt::Display for WeightFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for WeightFormat {
    type Err = MatmulError;

    /// ggml's names in any ASCII case (`q4_K`, `Q4_K` and `q4_k` are one format: no two names
    /// differ only in case).
    fn from_str(s: &str) -> Result<Self, MatmulError> {
        WeightFormat::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| MatmulError::UnknownFormat(s.to_string()))
    }
}
