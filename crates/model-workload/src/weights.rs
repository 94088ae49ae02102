//! [`Weights`]: the storage a preset or a `config.json` workload is measured in (`--weights`),
//! and the fallback for rows a block format cannot hold ([`storable_format`]).

use crate::error::WorkloadError;
use crate::role::Role;
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
    /// llama.cpp's `Q4_K_M`: `q4_K`, with `q6_K` for `v` and `down` in the layers its
    /// `use_more_bits` picks ([`use_more_bits`]).
    ///
    /// llama.cpp's quantizer (`llama_tensor_get_type` in `src/llama-quant.cpp`) gives
    /// `attn_v` and `ffn_down` `q6_K` in the first and last eighth of the layers and every
    /// third layer between (half the layers of a 28-, 32- or 80-layer model), and `q4_K`
    /// elsewhere. In a 70B model (llama.cpp's `LLM_TYPE_70B`: 80 layers with grouped-query
    /// attention, [`Place::type_70b`]) the other layers' `attn_v` is `q5_K`, which
    /// `matmul-kernel` lacks: `q6_K`, the nearest format that is not lighter, stands in
    /// (`v` is about 1 % of such a layer's weights). Rows that are not whole blocks fall
    /// back as [`storable_format`] says. A model that stores q, k and v as one tensor
    /// (Phi-3's `attn_qkv`, [`Place::fused_qkv`]) has it in `q5_K` in every layer, and no
    /// `attn_v` of its own: `q6_K` stands in for the three alike.
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
    pub fn parse(name: &str, value: &str) -> Result<Weights, WorkloadError> {
        if value.eq_ignore_ascii_case(Q4_K_M) {
            return Ok(Weights::Q4KM);
        }
        value
            .parse::<WeightFormat>()
            .map(Weights::Uniform)
            .map_err(|_| WorkloadError::InvalidSetting {
                name: name.to_string(),
                value: value.to_string(),
                expected: EXPECTED.to_string(),
            })
    }

    /// The format `role`'s rows of `n_in` weights are stored in at `place`: the chosen
    /// one (for `q4_K_M`, by llama.cpp's layer rule), or, when its blocks do not divide
    /// `n_in`, [`storable_format`]'s fallback.
    pub fn format_for(self, role: Role, n_in: usize, place: Place) -> WeightFormat {
        let chosen = match self {
            Weights::Uniform(format) => format,
            Weights::Q4KM => match role {
                // llama.cpp's q5_K for `attn_qkv` (see `Weights::Q4KM`).
                Role::Q | Role::K | Role::V if place.fused_qkv => WeightFormat::Q6K,
                Role::V | Role::Down if use_more_bits(place.layer, place.layers) => {
                    WeightFormat::Q6K
                }
                // llama.cpp's q5_K, which matmul-kernel lacks (see `Weights::Q4KM`).
                Role::V if place.type_70b => WeightFormat::Q6K,
                _ => WeightFormat::Q4K,
            },
        };
        storable_format(chosen, n_in)
    }
}

/// Where a weight matrix sits in its model, as llama.cpp's quantizer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// The layer, from 0.
    pub layer: usize,
    /// The model's layers.
    pub layers: usize,
    /// Whether llama.cpp takes the model for a 70B one (`LLM_TYPE_70B`, its llama rule: 80
    /// layers and fewer key/value heads than query heads).
    pub type_70b: bool,
    /// Whether q, k and v are one tensor in the file ([`ModelDims::fused_qkv`]).
    ///
    /// [`ModelDims::fused_qkv`]: crate::ModelDims::fused_qkv
    pub fused_qkv: bool,
}

/// Whether llama.cpp's `use_more_bits` picks layer `layer` of `layers` for more bits: the
/// first eighth, the last eighth, and every third layer between (`(layer - layers/8) % 3 ==
/// 2`), in integer arithmetic as llama.cpp computes it (`7 * layers / 8` as `layers -
/// ceil(layers / 8)`, the same integer for every count, which cannot overflow).
pub fn use_more_bits(layer: usize, layers: usize) -> bool {
    let eighth = layers / 8;
    layer < eighth || layer >= layers - layers.div_ceil(8) || (layer - eighth) % 3 == 2
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
    type Err = WorkloadError;

    /// [`Weights::parse`] as the setting `weights`.
    fn from_str(s: &str) -> Result<Self, WorkloadError> {
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
                matches!(&err, WorkloadError::InvalidSetting { name, value, .. }
                    if name == "--weights" && value == bad),
                "{err}"
            );
            assert!(err.to_string().contains("q4_K_M (any case)"), "{err}");
        }
    }

    fn place(layer: usize, layers: usize) -> Place {
        Place {
            layer,
            layers,
            type_70b: false,
            fused_qkv: false,
        }
    }

    #[test]
    fn use_more_bits_picks_llama_cpp_s_layers() {
        let picked = |layers: usize| -> Vec<usize> {
            (0..layers).filter(|&i| use_more_bits(i, layers)).collect()
        };
        // 32 layers: the first 4, the last 4, and 6, 9, …, 27 (every third from 4 + 2).
        assert_eq!(
            picked(32),
            [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]
        );
        // 3 layers: no eighth; (i - 0) % 3 == 2 picks layer 2 only.
        assert_eq!(picked(3), [2]);
        // 42 layers (Gemma 2 9B): the first 5, from 36 on (7 · 42 / 8 = 36 in integers).
        let p42 = picked(42);
        assert_eq!(&p42[..6], [0, 1, 2, 3, 4, 7]);
        assert!(p42.ends_with(&[34, 36, 37, 38, 39, 40, 41]), "{p42:?}");
        assert_eq!(picked(28).len(), 14);
        // `layers - ceil(layers / 8)` is llama.cpp's `7 * layers / 8`, without its overflow.
        for layers in 0..2000usize {
            assert_eq!(layers - layers.div_ceil(8), 7 * layers / 8, "{layers}");
        }
        assert!(use_more_bits(usize::MAX - 1, usize::MAX));
        assert!(!use_more_bits(usize::MAX / 2, usize::MAX));
        assert_eq!(picked(80).len(), 40);
    }

    #[test]
    fn q4_k_m_stores_v_and_down_in_q6_k_in_the_layers_llama_cpp_picks() {
        use WeightFormat::{Q4K, Q6K};
        let formats = |layer| -> Vec<_> {
            Role::ALL
                .into_iter()
                .map(|role| Weights::Q4KM.format_for(role, 4096, place(layer, 32)))
                .collect()
        };
        assert_eq!(formats(0), [Q4K, Q4K, Q6K, Q4K, Q4K, Q4K, Q6K]);
        assert_eq!(formats(4), [Q4K; 7]);
        assert_eq!(formats(6), [Q4K, Q4K, Q6K, Q4K, Q4K, Q4K, Q6K]);
        // A 70B model's other layers keep v heavier (llama.cpp's q5_K, q6_K here).
        let seventy = Place {
            layer: 10,
            layers: 80,
            type_70b: true,
            fused_qkv: false,
        };
        assert!(!use_more_bits(10, 80));
        assert_eq!(Weights::Q4KM.format_for(Role::V, 8192, seventy), Q6K);
        assert_eq!(Weights::Q4KM.format_for(Role::Down, 28672, seventy), Q4K);
        // q, k and v fused into one `attn_qkv` (Phi-3): llama.cpp's q5_K in every layer, so
        // q6_K for the three in every layer; down still by use_more_bits.
        for layer in [0, 4, 6] {
            let fused = Place {
                fused_qkv: true,
                ..place(layer, 32)
            };
            let formats: Vec<_> = Role::ALL
                .into_iter()
                .map(|role| Weights::Q4KM.format_for(role, 3072, fused))
                .collect();
            let down = if use_more_bits(layer, 32) { Q6K } else { Q4K };
            assert_eq!(
                formats,
                [Q6K, Q6K, Q6K, Q4K, Q4K, Q4K, down],
                "layer {layer}"
            );
        }
        // A uniform format is the same for every role and layer.
        for role in Role::ALL {
            for layer in [0, 4, 31] {
                assert_eq!(
                    Weights::Uniform(WeightFormat::Q8_0).format_for(role, 4096, place(layer, 32)),
                    WeightFormat::Q8_0
                );
            }
        }
    }

    #[test]
    fn rows_that_are_not_whole_blocks_fall_back_as_llama_cpp_does() {
        use WeightFormat::*;
        // 896 = 3.5 blocks of 256 = 28 blocks of 32 (Qwen2.5-0.5B's hidden size).
        assert_eq!(storable_format(Q4K, 896), Q8_0);
        assert_eq!(storable_format(Q6K, 896), Q8_0);
        assert_eq!(Weights::Q4KM.format_for(Role::V, 896, place(0, 24)), Q8_0);
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
