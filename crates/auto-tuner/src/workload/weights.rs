//! [`Weights`]: the storage a preset or a `config.json` workload is measured in (`--weights`),
//! and the fallback for rows a block format cannot hold ([`storable_format`]).

use super::Role;
use crate::TunerError;
use matmul_kernel::WeightFormat;
use std::fmt;
use std::str::FromStr;

/// How a preset's or a config's weights are stored: one format for every projection, or
/// llama.cpp's `Q4_K_M` mix.
///
/// Parsed from any [`WeightFormat`] name (`f32`, `f16`, `bf16`, `q8_0`, `q4_0`, `q4_K`,
/// `q6_K`) or `q4_K_M`, in any ASCII case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Weights {
    /// Every projection in this format.
    Uniform(WeightFormat),
    /// llama.cpp's `Q4_K_M`: `q4_K`, with `q6_K` for `v` and `down`.
    ///
    /// llama.cpp (`llama_tensor_get_type`) gives `attn_v` and `ffn_down` `q6_K` in the layers
    /// its `use_more_bits` picks: the first and last eighth and every third layer between,
    /// half the layers of a 28-, 32- or 80-layer model; the other half keep `q4_K`. A
    /// workload has one format per projection for all its layers, so it takes `q6_K`, the
    /// heavier: for llama3-8b it reads 6 % more bytes per token than such a file (v and down
    /// hold 29 % of a layer's weights, and `q6_K` is 46 % larger than `q4_K` on the half of
    /// the layers that have `q4_K`). [`Workload::from_gguf`](super::Workload::from_gguf)
    /// settles a real file's mix the same way.
    Q4KM,
}

impl Default for Weights {
    /// `q4_K_M`, the format most local models are run in.
    fn default() -> Self {
        Weights::Q4KM
    }
}

/// The accepted names, for error messages.
const EXPECTED: &str = "f32, f16, bf16, q8_0, q4_0, q4_K, q6_K or q4_K_M (any case)";

/// The name of the `Q4_K_M` mix.
const Q4_K_M: &str = "q4_K_M";

impl Weights {
    /// Parses `value`, given as the setting `name` (a flag or a variable, named in the error).
    pub fn parse(name: &str, value: &str) -> Result<Weights, TunerError> {
        if value.eq_ignore_ascii_case(Q4_K_M) {
            return Ok(Weights::Q4KM);
        }
        value
            .parse::<WeightFormat>()
            .map(Weights::Uniform)
            .map_err(|_| TunerError::InvalidSetting {
                name: name.to_string(),
                value: value.to_string(),
                expected: EXPECTED.to_string(),
            })
    }

    /// The format `role`'s rows of `n_in` weights are stored in: the chosen one, or, when
    /// its blocks do not divide `n_in`, [`storable_format`]'s fallback.
    pub fn format_for(self, role: Role, n_in: usize) -> WeightFormat {
        let chosen = match self {
            Weights::Uniform(format) => format,
            Weights::Q4KM => match role {
                Role::V | Role::Down => WeightFormat::Q6K,
                _ => WeightFormat::Q4K,
            },
        };
        storable_format(chosen, n_in)
    }
}

/// `format` if a row of `n_in` weights is whole blocks of it; otherwise what llama.cpp
/// stores such a row in, as near as the formats here allow: `q8_0` when `n_in` is a
/// multiple of 32, else `f16`.
///
/// llama.cpp's quantizer (`llama_tensor_get_type`) meets this in the k-quants (256-weight
/// blocks), e.g. Qwen2.5-0.5B's 896-wide rows: `q6_K` falls back to `q8_0` (as here), `q4_K`
/// to `q5_0` (which `matmul-kernel` lacks: `q8_0` is its nearest format that is not lighter,
/// 1.06 bytes a weight against 0.69), and a row that is not a multiple of 32 either to `f16`.
/// The float formats hold any row.
pub fn storable_format(format: WeightFormat, n_in: usize) -> WeightFormat {
    if n_in.is_multiple_of(format.block_size()) {
        format
    } else if n_in.is_multiple_of(WeightFormat::Q8_0.block_size()) {
        WeightFormat::Q8_0
    } else {
        WeightFormat::F16
    }
}

impl FromStr for Weights {
    type Err = TunerError;

    /// [`Weights::parse`] as the setting `weights`.
    fn from_str(s: &str) -> Result<Self, TunerError> {
        Weights::parse("weights", s)
    }
}

impl fmt::Display for Weights {
    /// The format's ggml name, or `q4_K_M`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Weights::Uniform(format) => fmt::Display::fmt(format, f),
            Weights::Q4KM => f.write_str(Q4_K_M),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_name_and_q4_k_m_parse_in_any_case() {
        for format in WeightFormat::ALL {
            let name = format.name();
            for spelling in [
                name.to_string(),
                name.to_ascii_uppercase(),
                name.to_ascii_lowercase(),
            ] {
                assert_eq!(
                    spelling.parse::<Weights>().unwrap(),
                    Weights::Uniform(format)
                );
            }
            assert_eq!(Weights::Uniform(format).to_string(), name);
        }
        for spelling in ["q4_K_M", "Q4_K_M", "q4_k_m"] {
            assert_eq!(spelling.parse::<Weights>().unwrap(), Weights::Q4KM);
        }
        assert_eq!(Weights::default(), Weights::Q4KM);
        assert_eq!(Weights::Q4KM.to_string(), "q4_K_M");
    }

    #[test]
    fn an_unknown_name_is_an_error_naming_the_setting_and_the_choices() {
        for bad in ["", "q5_K", "q4_K_S", "fp32", "q4_K_M "] {
            let err = Weights::parse("--weights", bad).unwrap_err();
            assert!(
                matches!(&err, TunerError::InvalidSetting { name, value, .. }
                    if name == "--weights" && value == bad),
                "{err}"
            );
            assert!(err.to_string().contains("q4_K_M (any case)"), "{err}");
        }
    }

    #[test]
    fn q4_k_m_stores_v_and_down_in_q6_k() {
        let formats: Vec<_> = Role::ALL
            .into_iter()
            .map(|role| Weights::Q4KM.format_for(role, 4096))
            .collect();
        use WeightFormat::{Q4K, Q6K};
        assert_eq!(formats, [Q4K, Q4K, Q6K, Q4K, Q4K, Q4K, Q6K]);
        // A uniform format is the same for every role.
        for role in Role::ALL {
            assert_eq!(
                Weights::Uniform(WeightFormat::Q8_0).format_for(role, 4096),
                WeightFormat::Q8_0
            );
        }
    }

    #[test]
    fn rows_that_are_not_whole_blocks_fall_back_as_llama_cpp_does() {
        use WeightFormat::*;
        // 896 = 3.5 blocks of 256 = 28 blocks of 32 (Qwen2.5-0.5B's hidden size).
        assert_eq!(storable_format(Q4K, 896), Q8_0);
        assert_eq!(storable_format(Q6K, 896), Q8_0);
        assert_eq!(Weights::Q4KM.format_for(Role::V, 896), Q8_0);
        // Not a multiple of 32 either.
        assert_eq!(storable_format(Q4K, 1000), F16);
        assert_eq!(storable_format(Q8_0, 1000), F16);
        assert_eq!(storable_format(Q4_0, 48), F16);
        // Whole blocks keep their format; floats hold any row.
        assert_eq!(storable_format(Q4K, 14336), Q4K);
        assert_eq!(storable_format(Q4_0, 96), Q4_0);
        for float in [F32, F16, Bf16] {
            assert_eq!(storable_format(float, 7), float);
        }
        // Whatever is asked, the result holds the row.
        for format in WeightFormat::ALL {
            for n_in in [1, 31, 32, 96, 255, 256, 896, 1000, 4096] {
                assert!(storable_format(format, n_in).row_bytes(n_in).is_ok());
            }
        }
    }
}
