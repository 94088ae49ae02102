//! [`ModelDims`]: the sizes of a decoder-only transformer that fix its layer's projections,
//! shared by the presets and the Hugging Face configs.

use crate::limits::{MAX_DIMENSION, MAX_LAYERS};
use crate::role::Role;
use crate::weights::{Place, Weights};
use crate::workload::{Projection, Workload};

/// The sizes of a decoder-only transformer (Llama-style: grouped-query attention and a gated
/// feed-forward) that fix its layer's projections, named as in a Hugging Face `config.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ModelDims {
    /// The residual stream's width (`hidden_size`).
    pub hidden_size: usize,
    /// The feed-forward's inner width (`intermediate_size`).
    pub intermediate_size: usize,
    /// Query heads (`num_attention_heads`).
    pub num_attention_heads: usize,
    /// Key/value heads (`num_key_value_heads`); as many as the query heads without
    /// grouped-query attention.
    pub num_key_value_heads: usize,
    /// The width of one head (`head_dim`); `hidden_size / num_attention_heads` for most
    /// models, not for all (Gemma 2 9B: 256 × 16 heads = 4096 ≠ 3584).
    pub head_dim: usize,
    /// Decoder layers (`num_hidden_layers`).
    pub num_hidden_layers: usize,
    /// Whether the checkpoint stores q, k and v as one tensor (Phi-3's `qkv_proj`, in GGUF
    /// `attn_qkv`; its `config.json` says `"model_type": "phi3"`): llama.cpp's quantizer
    /// then treats them as one (see [`Weights::Q4KM`]). The shapes are the same.
    pub fused_qkv: bool,
}

/// Why a [`ModelDims`] is unusable: the field at fault (its `config.json` name) and what is
/// wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {reason}")]
pub struct DimsError {
    /// The `config.json` name of the field.
    pub field: &'static str,
    /// What is wrong, e.g. `is 0, not between 1 and 1048576`.
    pub reason: String,
}

impl ModelDims {
    /// Checks that every size is within bounds (a dimension between 1 and [`MAX_DIMENSION`],
    /// the layers between 1 and [`MAX_LAYERS`], the attention's width `heads · head_dim` at
    /// most [`MAX_DIMENSION`]) and that the query heads are a whole multiple of the key/value
    /// heads (grouped-query attention shares each key/value head among as many query heads).
    pub fn check(&self) -> Result<(), DimsError> {
        let within = |field: &'static str, value: usize, max: usize| {
            if (1..=max).contains(&value) {
                Ok(())
            } else {
                Err(DimsError {
                    field,
                    reason: format!("is {value}, not between 1 and {max}"),
                })
            }
        };
        within("hidden_size", self.hidden_size, MAX_DIMENSION)?;
        within("intermediate_size", self.intermediate_size, MAX_DIMENSION)?;
        within(
            "num_attention_heads",
            self.num_attention_heads,
            MAX_DIMENSION,
        )?;
        within(
            "num_key_value_heads",
            self.num_key_value_heads,
            MAX_DIMENSION,
        )?;
        within("head_dim", self.head_dim, MAX_DIMENSION)?;
        within("num_hidden_layers", self.num_hidden_layers, MAX_LAYERS)?;
        // Both factors are at most 2^20: the product cannot overflow a 64-bit usize.
        let q_width = self.num_attention_heads as u64 * self.head_dim as u64;
        if q_width > MAX_DIMENSION as u64 {
            return Err(DimsError {
                field: "head_dim",
                reason: format!(
                    "is {}, and times the {} attention heads gives {q_width} features, above {MAX_DIMENSION}",
                    self.head_dim, self.num_attention_heads
                ),
            });
        }
        if !self
            .num_attention_heads
            .is_multiple_of(self.num_key_value_heads)
        {
            return Err(DimsError {
                field: "num_key_value_heads",
                reason: format!(
                    "is {}, which does not divide the {} attention heads",
                    self.num_key_value_heads, self.num_attention_heads
                ),
            });
        }
        Ok(())
    }

    /// The `n_out × n_in` of each role's weight matrix. Meant for dimensions that passed
    /// [`ModelDims::check`]; products past `usize` saturate rather than wrap or panic.
    pub fn shape(&self, role: Role) -> (usize, usize) {
        let hidden = self.hidden_size;
        let q_width = self.num_attention_heads.saturating_mul(self.head_dim);
        let kv_width = self.num_key_value_heads.saturating_mul(self.head_dim);
        match role {
            Role::Q => (q_width, hidden),
            Role::K | Role::V => (kv_width, hidden),
            Role::O => (hidden, q_width),
            Role::Gate | Role::Up => (self.intermediate_size, hidden),
            Role::Down => (hidden, self.intermediate_size),
        }
    }

    /// Whether llama.cpp's quantizer takes these dimensions for a 70B model
    /// (`LLM_TYPE_70B`, by its llama rule: 80 layers, fewer key/value heads than query
    /// heads), which stores more of `attn_v` in more bits.
    pub fn is_type_70b(&self) -> bool {
        self.num_hidden_layers == 80 && self.num_key_value_heads != self.num_attention_heads
    }

    /// One layer's seven projections in `weights`, each with the format
    /// [`Weights::format_for`] gives its role, row length and layer in every layer.
    ///
    /// It allocates a format per layer and projection and computes the shapes as
    /// [`ModelDims::shape`] does: meant for dimensions that passed [`ModelDims::check`]
    /// (which bounds the layers by [`MAX_LAYERS`]), as every reader of this crate checks
    /// them first. Unchecked counts from a file can ask for more memory than there is.
    pub fn projections(&self, weights: Weights) -> Vec<Projection> {
        let layers = self.num_hidden_layers;
        Role::ALL
            .into_iter()
            .map(|role| {
                let (n_out, n_in) = self.shape(role);
                let formats = (0..layers)
                    .map(|layer| {
                        let place = Place {
                            layer,
                            layers,
                            type_70b: self.is_type_70b(),
                            fused_qkv: self.fused_qkv,
                        };
                        weights.format_for(role, n_in, place)
                    })
                    .collect();
                Projection {
                    name: role.name().to_string(),
                    n_out,
                    n_in,
                    formats,
                }
            })
            .collect()
    }

    /// The workload of these dimensions in `weights`, named `name` (the caller has
    /// [`check`](Self::check)ed them).
    pub(crate) fn workload(&self, name: String, weights: Weights) -> Workload {
        Workload {
            name,
            layers: self.num_hidden_layers,
            projections: self.projections(weights),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use matmul_kernel::WeightFormat;

    fn llama3_8b() -> ModelDims {
        ModelDims {
            hidden_size: 4096,
            intermediate_size: 14336,
            num_attention_heads: 32,
            num_key_value_heads: 8,
            head_dim: 128,
            num_hidden_layers: 32,
            fused_qkv: false,
        }
    }

    #[test]
    fn shapes_follow_the_roles() {
        let d = llama3_8b();
        let shapes: Vec<_> = Role::ALL.into_iter().map(|r| d.shape(r)).collect();
        assert_eq!(
            shapes,
            [
                (4096, 4096),
                (1024, 4096),
                (1024, 4096),
                (4096, 4096),
                (14336, 4096),
                (14336, 4096),
                (4096, 14336)
            ]
        );
        let names: Vec<_> = d
            .projections(Weights::Uniform(WeightFormat::F16))
            .into_iter()
            .map(|p| (p.name, p.formats[0]))
            .collect();
        assert_eq!(names[0], ("q".to_string(), WeightFormat::F16));
        assert_eq!(names[6], ("down".to_string(), WeightFormat::F16));
    }

    #[test]
    fn absurd_dimensions_name_their_field() {
        assert_eq!(llama3_8b().check(), Ok(()));
        /// A change that spoils the dimensions, the field named and part of the reason.
        type Case = (fn(&mut ModelDims), &'static str, &'static str);
        let cases: [Case; 8] = [
            (|d| d.hidden_size = 0, "hidden_size", "is 0"),
            (
                |d| d.intermediate_size = MAX_DIMENSION + 1,
                "intermediate_size",
                "is 1048577",
            ),
            (|d| d.num_attention_heads = 0, "num_attention_heads", "is 0"),
            (|d| d.num_key_value_heads = 0, "num_key_value_heads", "is 0"),
            (|d| d.head_dim = usize::MAX, "head_dim", "not between"),
            (
                |d| d.num_hidden_layers = MAX_LAYERS + 1,
                "num_hidden_layers",
                "not between 1 and 1024",
            ),
            (|d| d.head_dim = 1 << 16, "head_dim", "above 1048576"),
            (
                |d| d.num_key_value_heads = 5,
                "num_key_value_heads",
                "does not divide the 32",
            ),
        ];
        for (spoil, field, reason) in cases {
            let mut d = llama3_8b();
            spoil(&mut d);
            let err = d.check().unwrap_err();
            assert_eq!(err.field, field, "{err:?}");
            assert!(err.reason.contains(reason), "{err:?}");
            // An error a caller can box and show, naming the field.
            let boxed: Box<dyn std::error::Error> = Box::new(err);
            assert!(boxed.to_string().starts_with(field), "{boxed}");
            // The shapes of unchecked dimensions saturate, never panic.
            let _ = Role::ALL.map(|r| d.shape(r));
        }
    }
}
