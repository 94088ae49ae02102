//! The model presets ([`PRESETS`]): the dimensions of well-known models, as their published
//! Hugging Face `config.json` files give them, for [`Workload::preset`].
//!
//! Each preset cites the repository whose `config.json` it copies and the values it uses
//! (`hidden_size`, `intermediate_size`, `num_attention_heads`, `num_key_value_heads`,
//! `head_dim`, `num_hidden_layers`). Where the config has no `head_dim`, it is
//! `hidden_size / num_attention_heads`, as transformers computes it.
//!
//! Every preset's rows are whole blocks of every format (each `n_in` is a multiple of 256),
//! so [`Weights`] never falls back to another format for them.

use crate::dims::ModelDims;
use crate::error::WorkloadError;
use crate::weights::Weights;
use crate::workload::Workload;

/// A named model's dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// The name it is asked for by, e.g. `llama3-8b`.
    pub name: &'static str,
    /// The Hugging Face repository whose `config.json` gives [`dims`](Self::dims).
    pub source: &'static str,
    /// Its dimensions.
    pub dims: ModelDims,
}

/// The preset used when none is asked for.
pub const DEFAULT_PRESET: &str = "llama3-8b";

/// Shorthand for the table below, in the `config.json` field order of [`ModelDims`].
const fn dims(
    hidden_size: usize,
    intermediate_size: usize,
    num_attention_heads: usize,
    num_key_value_heads: usize,
    head_dim: usize,
    num_hidden_layers: usize,
) -> ModelDims {
    ModelDims {
        hidden_size,
        intermediate_size,
        num_attention_heads,
        num_key_value_heads,
        head_dim,
        num_hidden_layers,
        fused_qkv: false,
    }
}

/// `dims` of a checkpoint that stores q, k and v as one tensor ([`ModelDims::fused_qkv`]).
const fn fused_qkv(dims: ModelDims) -> ModelDims {
    ModelDims {
        fused_qkv: true,
        ..dims
    }
}

/// The presets, [`DEFAULT_PRESET`] first. The comment above each gives its `config.json`
/// values: hidden, intermediate, heads, kv heads, head_dim, layers.
pub const PRESETS: [Preset; 8] = [
    // meta-llama/Meta-Llama-3-8B: 4096, 14336, 32, 8, no head_dim (4096 / 32 = 128), 32.
    Preset {
        name: "llama3-8b",
        source: "meta-llama/Meta-Llama-3-8B",
        dims: dims(4096, 14336, 32, 8, 128, 32),
    },
    // meta-llama/Llama-3.2-1B: 2048, 8192, 32, 8, head_dim 64, 16.
    Preset {
        name: "llama3.2-1b",
        source: "meta-llama/Llama-3.2-1B",
        dims: dims(2048, 8192, 32, 8, 64, 16),
    },
    // meta-llama/Llama-3.2-3B: 3072, 8192, 24, 8, head_dim 128, 28.
    Preset {
        name: "llama3.2-3b",
        source: "meta-llama/Llama-3.2-3B",
        dims: dims(3072, 8192, 24, 8, 128, 28),
    },
    // meta-llama/Llama-3.1-70B: 8192, 28672, 64, 8, no head_dim (8192 / 64 = 128), 80.
    Preset {
        name: "llama3.1-70b",
        source: "meta-llama/Llama-3.1-70B",
        dims: dims(8192, 28672, 64, 8, 128, 80),
    },
    // mistralai/Mistral-7B-v0.1: 4096, 14336, 32, 8, no head_dim (4096 / 32 = 128), 32.
    Preset {
        name: "mistral-7b",
        source: "mistralai/Mistral-7B-v0.1",
        dims: dims(4096, 14336, 32, 8, 128, 32),
    },
    // Qwen/Qwen2.5-7B: 3584, 18944, 28, 4, no head_dim (3584 / 28 = 128), 28.
    Preset {
        name: "qwen2.5-7b",
        source: "Qwen/Qwen2.5-7B",
        dims: dims(3584, 18944, 28, 4, 128, 28),
    },
    // microsoft/Phi-3-mini-4k-instruct: 3072, 8192, 32, 32, no head_dim (3072 / 32 = 96),
    // 32. Its checkpoints fuse q, k and v into one `qkv_proj` (9216 × 3072) and gate and up
    // into one `gate_up_proj` (16384 × 3072); the preset keeps the seven separate shapes,
    // which hold the same weights and bytes, so that every preset has the same roles.
    Preset {
        name: "phi-3-mini",
        source: "microsoft/Phi-3-mini-4k-instruct",
        dims: fused_qkv(dims(3072, 8192, 32, 32, 96, 32)),
    },
    // google/gemma-2-9b: 3584, 14336, 16, 8, head_dim 256 (not 3584 / 16), 42: q is
    // 4096 × 3584 and o 3584 × 4096.
    Preset {
        name: "gemma-2-9b",
        source: "google/gemma-2-9b",
        dims: dims(3584, 14336, 16, 8, 256, 42),
    },
];

/// The preset named `name` (in any ASCII case), if there is one.
pub fn find_preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name.eq_ignore_ascii_case(name))
}

/// The presets' names, comma-separated, for messages.
pub fn preset_names() -> String {
    PRESETS.map(|p| p.name).join(", ")
}

/// The default workload: the [`DEFAULT_PRESET`] (Llama-3-8B) in the default [`Weights`]
/// (llama.cpp's `Q4_K_M` mix, [`Weights::Q4KM`]).
pub fn default_workload() -> Workload {
    let preset = &PRESETS[0];
    let weights = Weights::default();
    preset
        .dims
        .workload(format!("{} {weights}", preset.name), weights)
}

impl Workload {
    /// The workload of the preset `name` (in any ASCII case; see [`PRESETS`]) in `weights`,
    /// named `<preset> <weights>`, e.g. `llama3-8b q4_K_M`. An unknown name is
    /// [`WorkloadError::UnknownPreset`], which lists the presets.
    pub fn preset(name: &str, weights: Weights) -> Result<Workload, WorkloadError> {
        let preset = find_preset(name).ok_or_else(|| WorkloadError::UnknownPreset {
            name: name.to_string(),
            known: preset_names(),
        })?;
        Ok(preset
            .dims
            .workload(format!("{} {weights}", preset.name), weights))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use matmul_kernel::WeightFormat;

    /// `(name, n_out, n_in)` of each projection.
    fn shapes(w: &Workload) -> Vec<(&str, usize, usize)> {
        w.projections
            .iter()
            .map(|p| (p.name.as_str(), p.n_out, p.n_in))
            .collect()
    }

    #[test]
    fn llama3_8b_is_the_default_and_has_its_published_shapes() {
        assert_eq!(PRESETS[0].name, DEFAULT_PRESET);
        let w = Workload::preset(DEFAULT_PRESET, Weights::Uniform(WeightFormat::F32)).unwrap();
        assert_eq!(w.name, "llama3-8b f32");
        assert_eq!(w.layers, 32);
        assert_eq!(
            shapes(&w),
            [
                ("q", 4096, 4096),
                ("k", 1024, 4096),
                ("v", 1024, 4096),
                ("o", 4096, 4096),
                ("gate", 14336, 4096),
                ("up", 14336, 4096),
                ("down", 4096, 14336),
            ]
        );
        // 218 103 808 weights a layer, four bytes each.
        assert_eq!(w.distinct_matrix_bytes(), Some(218_103_808 * 4));
        assert_eq!(w.token_weight_bytes(), Some(218_103_808 * 4 * 32));
    }

    #[test]
    fn gemma_2_9b_has_wider_attention_than_its_hidden_size() {
        let w = Workload::preset("gemma-2-9b", Weights::default()).unwrap();
        assert_eq!(w.layers, 42);
        assert_eq!(
            shapes(&w),
            [
                ("q", 4096, 3584),
                ("k", 2048, 3584),
                ("v", 2048, 3584),
                ("o", 3584, 4096),
                ("gate", 14336, 3584),
                ("up", 14336, 3584),
                ("down", 3584, 14336),
            ]
        );
    }

    #[test]
    fn phi_3_mini_is_modelled_as_separate_projections_of_the_fused_bytes() {
        let w = Workload::preset("Phi-3-Mini", Weights::Uniform(WeightFormat::F16)).unwrap();
        assert_eq!(w.layers, 32);
        let s = shapes(&w);
        // qkv_proj is 9216 × 3072, gate_up_proj 16384 × 3072.
        let qkv: usize = s[..3].iter().map(|(_, n_out, _)| n_out).sum();
        assert_eq!((qkv, s[0].2), (9216, 3072));
        assert_eq!((s[4].1 + s[5].1, s[4].2), (16384, 3072));
        assert_eq!(s[3], ("o", 3072, 3072));
        assert_eq!(s[6], ("down", 3072, 8192));
    }

    #[test]
    fn every_preset_is_valid_in_every_weights_without_a_fallback() {
        let all_weights = WeightFormat::ALL
            .map(Weights::Uniform)
            .into_iter()
            .chain([Weights::Q4KM]);
        for weights in all_weights {
            for preset in &PRESETS {
                preset.dims.check().unwrap();
                let w = Workload::preset(preset.name, weights).unwrap();
                assert_eq!(w.name, format!("{} {weights}", preset.name));
                assert_eq!(w.layers, preset.dims.num_hidden_layers);
                let names: Vec<_> = w.projections.iter().map(|p| p.name.as_str()).collect();
                assert_eq!(names, ["q", "k", "v", "o", "gate", "up", "down"]);
                let d = &preset.dims;
                let q_width = d.num_attention_heads * d.head_dim;
                let layers = preset.dims.num_hidden_layers;
                for p in &w.projections {
                    // Every row is whole blocks of the format asked for: no fallback.
                    assert_eq!(p.n_in % 256, 0, "{} {}", preset.name, p.name);
                    assert_eq!(p.formats.len(), layers);
                    for (layer, &format) in p.formats.iter().enumerate() {
                        let more_bits = crate::weights::use_more_bits(layer, layers);
                        let asked = match weights {
                            Weights::Uniform(f) => f,
                            Weights::Q4KM => match p.name.as_str() {
                                // Phi-3's fused attn_qkv: q5_K in every layer, q6_K here.
                                "q" | "k" | "v" if preset.name == "phi-3-mini" => WeightFormat::Q6K,
                                "v" | "down" if more_bits => WeightFormat::Q6K,
                                "v" if preset.name == "llama3.1-70b" => WeightFormat::Q6K,
                                _ => WeightFormat::Q4K,
                            },
                        };
                        assert_eq!(format, asked, "{} {} layer {layer}", preset.name, p.name);
                    }
                }
                assert!(w.validate().is_ok());
                // The layer's invariants: q and o are transposes, k and v alike, gate and up
                // alike, down the transpose of up, and everything reads or writes the hidden
                // state.
                let [q, k, v, o, gate, up, down] = &w.projections[..] else {
                    unreachable!()
                };
                assert_eq!((q.n_out, q.n_in), (o.n_in, o.n_out));
                assert_eq!((q.n_out, q.n_in), (q_width, d.hidden_size));
                assert_eq!((k.n_out, k.n_in), (v.n_out, v.n_in));
                assert_eq!(
                    q.n_out / k.n_out,
                    d.num_attention_heads / d.num_key_value_heads
                );
                assert_eq!((gate.n_out, gate.n_in), (up.n_out, up.n_in));
                assert_eq!((up.n_out, up.n_in), (down.n_in, down.n_out));
                assert_eq!(up.n_out, d.intermediate_size);
                assert!(w.token_weight_bytes().is_some());
            }
        }
    }

    #[test]
    fn presets_have_distinct_names_and_keys() {
        let mut names: Vec<_> = PRESETS.iter().map(|p| p.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), PRESETS.len());
        // llama3-8b and mistral-7b share their shapes (and so their key); the others differ.
        let mut keys: Vec<_> = PRESETS
            .iter()
            .map(|p| Workload::preset(p.name, Weights::default()).unwrap().key())
            .collect();
        assert_eq!(keys[0], keys[4]);
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), PRESETS.len() - 1);
    }

    #[test]
    fn the_default_is_llama3_8b_in_llama_cpp_s_q4_k_m_mix() {
        let w = default_workload();
        assert_eq!(w, Workload::preset(DEFAULT_PRESET, Weights::Q4KM).unwrap());
        assert_eq!((w.name.as_str(), w.layers), ("llama3-8b q4_K_M", 32));
        let mix: Vec<(&str, String)> = w
            .projections
            .iter()
            .map(|p| (p.name.as_str(), p.mix_label()))
            .collect();
        let q4 = "q4_K".to_string();
        let half = "q6_K x16, q4_K x16".to_string();
        assert_eq!(
            mix,
            [
                ("q", q4.clone()),
                ("k", q4.clone()),
                ("v", half.clone()),
                ("o", q4.clone()),
                ("gate", q4.clone()),
                ("up", q4),
                ("down", half)
            ]
        );
        // The bytes a token reads: q4_K is 144 bytes per 256 weights, q6_K 210. v and down
        // are q6_K in 16 of the 32 layers.
        let q4_bytes = |n: u64| n / 256 * 144;
        let q6_bytes = |n: u64| n / 256 * 210;
        let (v, down) = (1024 * 4096u64, 4096 * 14336u64);
        let others = 4096 * 4096 * 2 + 1024 * 4096 + 14336 * 4096 * 2u64;
        let expected = 32 * q4_bytes(others) + 16 * (q4_bytes(v + down) + q6_bytes(v + down));
        assert_eq!(w.token_weight_bytes(), Some(expected));
    }

    #[test]
    fn an_unknown_preset_lists_the_known_ones() {
        let err = Workload::preset("llama-9000", Weights::default()).unwrap_err();
        assert!(
            matches!(&err, WorkloadError::UnknownPreset { name, .. } if name == "llama-9000"),
            "{err}"
        );
        let message = err.to_string();
        for preset in &PRESETS {
            assert!(message.contains(preset.name), "{message}");
        }
    }
}
