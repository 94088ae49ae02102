//! A tiny llama-architecture `.gguf` file in f16, written by the tests: the header llama.cpp
//! needs to load a model (hyper-parameters and a minimal SentencePiece vocabulary) and random
//! weights, so that `llama-quantize` and `llama-bench` run on a model that takes milliseconds.

use std::io::{self, Write};
use std::path::Path;

/// The shape of the tiny model: llama's tensors at sizes that the k-quants accept (every row
/// a multiple of 256 values).
#[derive(Clone, Copy, Debug)]
pub struct TinyLlama {
    /// Transformer blocks.
    pub n_layers: u32,
    /// The embedding width.
    pub n_embd: u32,
    /// The feed-forward width.
    pub n_ff: u32,
    /// Attention heads (as many key/value heads).
    pub n_head: u32,
    /// Tokens of the vocabulary beyond the three special ones and the 256 bytes.
    pub n_plain_tokens: u32,
    /// The context length written into the header.
    pub n_ctx: u32,
}

impl Default for TinyLlama {
    fn default() -> TinyLlama {
        TinyLlama {
            n_layers: 3,
            n_embd: 256,
            n_ff: 512,
            n_head: 4,
            n_plain_tokens: 61,
            n_ctx: 512,
        }
    }
}

/// GGUF value types (gguf's `GGUFValueType`).
const GGUF_U32: u32 = 4;
const GGUF_I32: u32 = 5;
const GGUF_F32: u32 = 6;
const GGUF_STRING: u32 = 8;
const GGUF_ARRAY: u32 = 9;

/// ggml tensor types.
const GGML_F32: u32 = 0;
const GGML_F16: u32 = 1;

/// The data section's alignment (`general.alignment`'s default).
const ALIGNMENT: u64 = 32;

/// SentencePiece token types (llama.cpp's `llama_token_type`).
const TOKEN_NORMAL: i32 = 1;
const TOKEN_UNKNOWN: i32 = 2;
const TOKEN_CONTROL: i32 = 3;
const TOKEN_BYTE: i32 = 6;

/// The little-endian bytes of a header, field by field, and the key-value pairs among them.
#[derive(Default)]
struct Bytes {
    bytes: Vec<u8>,
    n_kv: u64,
}

impl Bytes {
    fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(bytes);
        self
    }

    fn u32(&mut self, v: u32) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    fn u64(&mut self, v: u64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    fn string(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64).raw(s.as_bytes())
    }

    /// A key and its value's type; the value follows.
    fn key(&mut self, key: &str, ty: u32) -> &mut Self {
        self.n_kv += 1;
        self.string(key).u32(ty)
    }

    fn kv_u32(&mut self, key: &str, v: u32) -> &mut Self {
        self.key(key, GGUF_U32).u32(v)
    }

    fn kv_f32(&mut self, key: &str, v: f32) -> &mut Self {
        self.key(key, GGUF_F32).raw(&v.to_le_bytes())
    }

    fn kv_string(&mut self, key: &str, v: &str) -> &mut Self {
        self.key(key, GGUF_STRING).string(v)
    }

    /// An array's key, element type and length; the elements follow.
    fn kv_array(&mut self, key: &str, element: u32, n: u64) -> &mut Self {
        self.key(key, GGUF_ARRAY).u32(element).u64(n)
    }
}

/// One tensor: its name, its dimensions (innermost first) and its values.
struct Tensor {
    name: String,
    dims: Vec<u64>,
    ggml_type: u32,
    data: Vec<u8>,
}

/// A deterministic generator of small weights (xorshift64*).
struct Weights(u64);

impl Weights {
    fn next_unit(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let bits = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40;
        (bits as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// `n` values in [-0.05, 0.05) as f16 bytes.
    fn f16_bytes(&mut self, n: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(2 * n as usize);
        for _ in 0..n {
            out.extend_from_slice(&f32_to_f16(0.05 * self.next_unit()).to_le_bytes());
        }
        out
    }
}

/// The f16 bits of a small finite f32 (rounded to nearest, subnormals flushed to zero; the
/// weights written here are all far inside f16's range).
fn f32_to_f16(v: f32) -> u16 {
    let bits = v.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    if exp <= 0 {
        return sign;
    }
    let mantissa = bits & 0x007f_ffff;
    let mut half = ((exp as u32) << 10) | (mantissa >> 13);
    if mantissa & 0x1000 != 0 {
        half += 1;
    }
    sign | half as u16
}

impl TinyLlama {
    /// The vocabulary size: three special tokens, 256 byte tokens and the plain ones.
    pub fn n_vocab(&self) -> u32 {
        3 + 256 + self.n_plain_tokens
    }

    fn tensors(&self) -> Vec<Tensor> {
        let (embd, ff, vocab) = (
            u64::from(self.n_embd),
            u64::from(self.n_ff),
            u64::from(self.n_vocab()),
        );
        let mut weights = Weights(0x9e37_79b9_7f4a_7c15);
        let mut out = Vec::new();
        let mut matrix = |out: &mut Vec<Tensor>, name: String, cols: u64, rows: u64| {
            out.push(Tensor {
                name,
                dims: vec![cols, rows],
                ggml_type: GGML_F16,
                data: weights.f16_bytes(cols * rows),
            });
        };
        let norm = |name: String| Tensor {
            name,
            dims: vec![embd],
            ggml_type: GGML_F32,
            data: (0..embd).flat_map(|_| 1.0f32.to_le_bytes()).collect(),
        };
        matrix(&mut out, "token_embd.weight".into(), embd, vocab);
        out.push(norm("output_norm.weight".into()));
        matrix(&mut out, "output.weight".into(), embd, vocab);
        for i in 0..self.n_layers {
            out.push(norm(format!("blk.{i}.attn_norm.weight")));
            for part in ["q", "k", "v", "output"] {
                matrix(&mut out, format!("blk.{i}.attn_{part}.weight"), embd, embd);
            }
            out.push(norm(format!("blk.{i}.ffn_norm.weight")));
            matrix(&mut out, format!("blk.{i}.ffn_gate.weight"), embd, ff);
            matrix(&mut out, format!("blk.{i}.ffn_up.weight"), embd, ff);
            matrix(&mut out, format!("blk.{i}.ffn_down.weight"), ff, embd);
        }
        out
    }

    /// The metadata: architecture, hyper-parameters and the vocabulary.
    fn metadata(&self, b: &mut Bytes) {
        b.kv_string("general.architecture", "llama")
            .kv_string("general.name", "tiny-llama")
            .kv_u32("general.file_type", 1)
            .kv_u32("llama.context_length", self.n_ctx)
            .kv_u32("llama.embedding_length", self.n_embd)
            .kv_u32("llama.block_count", self.n_layers)
            .kv_u32("llama.feed_forward_length", self.n_ff)
            .kv_u32("llama.attention.head_count", self.n_head)
            .kv_u32("llama.attention.head_count_kv", self.n_head)
            .kv_u32("llama.rope.dimension_count", self.n_embd / self.n_head)
            .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5)
            .kv_u32("llama.vocab_size", self.n_vocab())
            .kv_string("tokenizer.ggml.model", "llama")
            .kv_u32("tokenizer.ggml.bos_token_id", 1)
            .kv_u32("tokenizer.ggml.eos_token_id", 2)
            .kv_u32("tokenizer.ggml.unknown_token_id", 0);
        let mut tokens = vec![
            ("<unk>".to_string(), TOKEN_UNKNOWN),
            ("<s>".to_string(), TOKEN_CONTROL),
            ("</s>".to_string(), TOKEN_CONTROL),
        ];
        tokens.extend((0..=255u8).map(|byte| (format!("<0x{byte:02X}>"), TOKEN_BYTE)));
        tokens.extend((0..self.n_plain_tokens).map(|i| (format!("\u{2581}t{i}"), TOKEN_NORMAL)));
        let n = tokens.len() as u64;
        b.kv_array("tokenizer.ggml.tokens", GGUF_STRING, n);
        for (text, _) in &tokens {
            b.string(text);
        }
        b.kv_array("tokenizer.ggml.scores", GGUF_F32, n);
        for i in 0..n {
            b.raw(&(-(i as f32)).to_le_bytes());
        }
        b.kv_array("tokenizer.ggml.token_type", GGUF_I32, n);
        for (_, ty) in &tokens {
            b.raw(&ty.to_le_bytes());
        }
    }

    /// Writes the model as a `.gguf` file (version 3) at `path`, a new file: an existing one
    /// is an error, never replaced.
    pub fn write(&self, path: &Path) -> io::Result<()> {
        let tensors = self.tensors();
        let mut kv = Bytes::default();
        self.metadata(&mut kv);
        let mut b = Bytes::default();
        b.raw(b"GGUF").u32(3).u64(tensors.len() as u64).u64(kv.n_kv);
        b.raw(&kv.bytes);
        let mut offset = 0u64;
        for t in &tensors {
            b.string(&t.name).u32(t.dims.len() as u32);
            for &d in &t.dims {
                b.u64(d);
            }
            b.u32(t.ggml_type).u64(offset);
            offset = (offset + t.data.len() as u64).next_multiple_of(ALIGNMENT);
        }
        let pad = |b: &mut Bytes| {
            let len = (b.bytes.len() as u64).next_multiple_of(ALIGNMENT) as usize;
            b.bytes.resize(len, 0);
        };
        pad(&mut b);
        for t in &tensors {
            b.raw(&t.data);
            pad(&mut b);
        }
        let mut file = std::fs::File::create_new(path)?;
        file.write_all(&b.bytes)?;
        file.sync_all()
    }
}
