//! A workload from a `.gguf` file's header ([`Workload::from_gguf`]): the shapes and the
//! formats its layers actually store, never its weights.
//!
//! ## The layer's tensors
//! llama.cpp names a decoder layer's weight matrices `blk.<i>.<base>.weight`. The layouts
//! read, from layer 0's tensor table:
//!
//! | attention | feed-forward | architectures (`general.architecture`) |
//! |---|---|---|
//! | `attn_q`, `attn_k`, `attn_v`, `attn_output` | `ffn_gate`, `ffn_up`, `ffn_down` | llama (Llama, Mistral), qwen2, qwen3, gemma, gemma2, gemma3, granite, … |
//! | `attn_qkv` (fused), `attn_output` | `ffn_up` (gate and up fused, twice as wide), `ffn_down` | phi3 |
//! | either | `ffn_up`, `ffn_down` (no gate) | starcoder2, gpt2, falcon, bloom, … |
//!
//! A fused tensor is one projection (one matrix a token multiplies), as the runtime runs it.
//! Projections are named by their base (`attn_q`, …, `ffn_down`), in the order above. A
//! mixture-of-experts layer (`ffn_gate_inp`, `ffn_up_exps`) in any layer (some models keep
//! dense layers first) is refused: a token runs only some of its experts. Tensors of layers
//! at or above the block count (a multi-token prediction head) are not read.
//!
//! ## Every layer is checked
//! Each projection's tensor must exist in every layer below `<arch>.block_count` (at most
//! [`MAX_LAYERS`]), as a 2-D matrix (ggml's `ne[0]` is `n_in`, `ne[1]` is `n_out`; trailing
//! dimensions of 1 are allowed) of the same shape as layer 0's, each dimension at most
//! [`MAX_DIMENSION`], in a format `matmul-kernel` has, with rows of whole blocks. Anything
//! else is an error naming the tensor. A model whose layers differ in shape by design
//! (OpenELM, Nemotron's pruned layers) is such an error.
//!
//! The projections must also chain as a layer runs them: every one that reads the hidden
//! state takes the width the first attention projection takes, `attn_output` and
//! `ffn_down` give that width back, `attn_output` takes what `attn_q` gives (unfused), and
//! `ffn_down` takes what `ffn_gate` and `ffn_up` give (half of it where `ffn_up` fuses the
//! gate, as phi3's does). A tensor stored the other way round is an error naming it.
//!
//! ## Each layer's formats
//! Quantized files mix formats across layers: llama.cpp's `Q4_K_M` stores `attn_v` and
//! `ffn_down` in `q6_K` in the layers its `use_more_bits` picks and in `q4_K` in the others.
//! Each projection keeps the format of every layer ([`Projection::formats`]), so that decode
//! measures the bytes the file's layers hold.

use crate::error::WorkloadError;
use crate::gguf::{GgufHeader, GgufTensor, tensor_format};
use crate::gguf_parser::read_gguf_header;
use crate::limits::{MAX_DIMENSION, MAX_LAYERS, MAX_NAME_CHARS};
use crate::workload::{Projection, Workload};
use std::collections::HashMap;
use std::path::Path;

/// The tensor bases of a mixture-of-experts layer (its router and its experts' up
/// projections).
const EXPERT_TENSORS: [&str; 2] = ["ffn_gate_inp", "ffn_up_exps"];

impl Workload {
    /// The workload of the `.gguf` file at `path`: its header is read (within the bounds of
    /// [`read_gguf_header`]) and its layers' tensors become the projections, as
    /// [`from_gguf_header`](Self::from_gguf_header) says. Every error names the file.
    pub fn from_gguf(path: &Path) -> Result<Workload, WorkloadError> {
        let header = read_gguf_header(path)?;
        Workload::from_gguf_header(&header).map_err(|e| WorkloadError::InFile {
            path: path.to_path_buf(),
            source: Box::new(e),
        })
    }

    /// The workload of a `.gguf` header (see the module docs: the layouts read, the checks,
    /// and each layer's formats). It is named
    /// `<general.name> (<architecture>)`, or the architecture alone.
    pub fn from_gguf_header(header: &GgufHeader) -> Result<Workload, WorkloadError> {
        let arch = header.architecture()?;
        let layers = header.layer_count()?;
        let block_count = format!("{arch}.block_count");
        if layers > MAX_LAYERS {
            return Err(WorkloadError::Metadata {
                key: block_count,
                reason: format!("{layers} is above the limit of {MAX_LAYERS} layers"),
            });
        }
        let tensors: HashMap<&str, &GgufTensor> = header
            .tensors
            .iter()
            .map(|t| (t.name.as_str(), t))
            .collect();
        let table = Table {
            tensors,
            layers,
            block_count,
        };
        let projections = table
            .layout()?
            .into_iter()
            .map(|base| table.projection(base))
            .collect::<Result<Vec<_>, _>>()?;
        check_chain(&projections)?;
        Ok(Workload {
            name: name_of(header, arch),
            layers,
            projections,
        })
    }
}

/// The tensor table, by name, and the layer count.
struct Table<'a> {
    tensors: HashMap<&'a str, &'a GgufTensor>,
    layers: usize,
    /// The metadata key of the layer count, for messages.
    block_count: String,
}

/// The name of layer `layer`'s tensor `base`.
fn layer_tensor(layer: usize, base: &str) -> String {
    format!("blk.{layer}.{base}.weight")
}

fn tensor_error(name: String, reason: String) -> WorkloadError {
    WorkloadError::Tensor { name, reason }
}

impl Table<'_> {
    fn has(&self, base: &str) -> bool {
        self.tensors.contains_key(layer_tensor(0, base).as_str())
    }

    /// The projections' tensor bases, in order, from layer 0's tensors.
    fn layout(&self) -> Result<Vec<&'static str>, WorkloadError> {
        let mut bases = Vec::with_capacity(7);
        if self.has("attn_q") {
            bases.extend(["attn_q", "attn_k", "attn_v"]);
        } else if self.has("attn_qkv") {
            bases.push("attn_qkv");
        } else {
            return Err(tensor_error(
                layer_tensor(0, "attn_q"),
                "is missing, and so is a fused blk.0.attn_qkv.weight".to_string(),
            ));
        }
        bases.push("attn_output");
        // Some mixture-of-experts models keep dense layers first (DeepSeek): look in all.
        let expert = (0..self.layers)
            .flat_map(|layer| EXPERT_TENSORS.map(|base| layer_tensor(layer, base)))
            .find(|name| self.tensors.contains_key(name.as_str()));
        if let Some(expert) = expert {
            return Err(tensor_error(
                expert,
                "belongs to a mixture-of-experts layer, which is not supported (a token runs \
                 only some of its experts)"
                    .to_string(),
            ));
        }
        if self.has("ffn_gate") {
            bases.push("ffn_gate");
        }
        bases.extend(["ffn_up", "ffn_down"]);
        Ok(bases)
    }

    /// The projection of tensor `base`: layer 0's shape, checked in every layer, and each
    /// layer's format.
    fn projection(&self, base: &str) -> Result<Projection, WorkloadError> {
        let first = self.get(0, base)?;
        let (n_in, n_out) = matrix_shape(first)?;
        let mut formats = Vec::with_capacity(self.layers);
        for layer in 0..self.layers {
            let tensor = self.get(layer, base)?;
            if tensor.dims != first.dims {
                return Err(tensor_error(
                    tensor.name.clone(),
                    format!(
                        "has dims {:?}, unlike {}'s {:?}: every layer must have layer 0's shapes",
                        tensor.dims, first.name, first.dims
                    ),
                ));
            }
            let format = tensor_format(tensor)?;
            if format.row_bytes(n_in).is_err() {
                return Err(tensor_error(
                    tensor.name.clone(),
                    format!(
                        "has rows of {n_in} weights, not whole {format} blocks of {}",
                        format.block_size()
                    ),
                ));
            }
            formats.push(format);
        }
        Ok(Projection {
            name: base.to_string(),
            n_out,
            n_in,
            formats,
        })
    }

    /// Layer `layer`'s tensor `base`.
    fn get(&self, layer: usize, base: &str) -> Result<&GgufTensor, WorkloadError> {
        let name = layer_tensor(layer, base);
        self.tensors.get(name.as_str()).copied().ok_or_else(|| {
            let reason = format!(
                "is missing: {} says {} layers, and every layer needs it",
                self.block_count, self.layers
            );
            tensor_error(name, reason)
        })
    }
}

/// Checks that the projections (named by their tensor base) chain as a layer runs them:
/// the module docs' rule.
fn check_chain(projections: &[Projection]) -> Result<(), WorkloadError> {
    let find = |base: &str| projections.iter().find(|p| p.name == base);
    let Some(first) = projections.first() else {
        return Ok(());
    };
    let hidden = first.n_in;
    let fail = |p: &Projection, side: &str, got: usize, expected: String| {
        Err(tensor_error(
            layer_tensor(0, &p.name),
            format!(
                "has {got} {side} where {expected}: a layer's projections must chain, and \
                 this one is stored with another shape"
            ),
        ))
    };
    let gives = |p: &Projection| format!("{} gives {} outputs", layer_tensor(0, &p.name), p.n_out);
    for p in projections {
        let (side, got) = if matches!(p.name.as_str(), "attn_output" | "ffn_down") {
            ("outputs", p.n_out)
        } else {
            ("inputs", p.n_in)
        };
        if got != hidden {
            let expected = format!("{} takes {hidden} inputs", layer_tensor(0, &first.name));
            return fail(p, side, got, expected);
        }
    }
    if let (Some(q), Some(o)) = (find("attn_q"), find("attn_output"))
        && o.n_in != q.n_out
    {
        return fail(o, "inputs", o.n_in, gives(q));
    }
    if let (Some(up), Some(down)) = (find("ffn_up"), find("ffn_down")) {
        let gate = find("ffn_gate");
        if let Some(gate) = gate
            && gate.n_out != up.n_out
        {
            return fail(gate, "outputs", gate.n_out, gives(up));
        }
        // Without a gate, `ffn_up` may hold the gate fused in: twice the width.
        let fused = gate.is_none() && down.n_in.checked_mul(2) == Some(up.n_out);
        if down.n_in != up.n_out && !fused {
            return fail(down, "inputs", down.n_in, gives(up));
        }
    }
    Ok(())
}

/// `(n_in, n_out)` of a weight matrix's tensor: two dimensions (and any number of trailing
/// 1s), each at most [`MAX_DIMENSION`].
fn matrix_shape(tensor: &GgufTensor) -> Result<(usize, usize), WorkloadError> {
    let error = |reason| Err(tensor_error(tensor.name.clone(), reason));
    let &[n_in, n_out, ref rest @ ..] = tensor.dims.as_slice() else {
        return error(format!(
            "has dims {:?}, not the 2 of a weight matrix",
            tensor.dims
        ));
    };
    if rest.iter().any(|&d| d != 1) {
        return error(format!(
            "has dims {:?}, not the 2 of a weight matrix",
            tensor.dims
        ));
    }
    for (what, dim) in [("n_in (ne[0])", n_in), ("n_out (ne[1])", n_out)] {
        if dim == 0 {
            return error(format!("has {what} 0: a weight matrix has no empty side"));
        }
        if dim > MAX_DIMENSION as u64 {
            return error(format!(
                "has {what} {dim}, above the limit of {MAX_DIMENSION}"
            ));
        }
    }
    // Both are at most MAX_DIMENSION, which fits in any usize of 32 bits or more.
    Ok((n_in as usize, n_out as usize))
}

/// `<general.name> (<arch>)`, or `arch` alone; control characters dropped and the name cut
/// to [`MAX_NAME_CHARS`].
fn name_of(header: &GgufHeader, arch: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .filter(|c| !c.is_control())
            .take(MAX_NAME_CHARS)
            .collect()
    };
    let name = header
        .metadata
        .get("general.name")
        .and_then(|v| v.as_str())
        .map(clean)
        .filter(|n| !n.trim().is_empty());
    match name {
        Some(name) => format!("{} ({})", name.trim(), clean(arch)),
        None => clean(arch),
    }
}

#[cfg(test)]
mod tests;
