//! Writes a llama-architecture `.gguf` file in f16 with random weights, at the sizes given:
//! the test's model writer (`tests/real/tiny_model.rs`) at any size. Quantized by
//! `llama-quantize --pure`, it lets `llama-bench` and `sipllm bench --gguf` measure the same
//! model's decode from DRAM (`docs/matmul-kernel.md`, "Both vendors").
//!
//! `cargo run --release -p llama-bench --example write_llama -- OUT LAYERS EMBD FF HEADS`
//!
//! For example `model.gguf 8 4096 14336 32`: eight blocks of Llama 3 8B's projections (with
//! as many key/value heads as heads), 3.9 GB. The file is built in memory (twice its size at
//! the peak) and refused above 16 GiB; an existing OUT is an error, never replaced.

#[path = "../tests/real/tiny_model.rs"]
mod tiny_model;

use std::path::PathBuf;
use std::process::ExitCode;
use tiny_model::TinyLlama;

/// The largest file written.
const MAX_BYTES: u64 = 16 << 30;

const USAGE: &str = "usage: write_llama OUT LAYERS EMBD FF HEADS (EMBD and FF multiples of 256, \
                     HEADS dividing EMBD into an even head size)";

fn parse(args: &[String]) -> Result<(PathBuf, TinyLlama), String> {
    let [out, layers, embd, ff, heads] = args else {
        return Err(format!("expected five arguments, got {}", args.len()));
    };
    let number = |name: &str, text: &str| -> Result<u32, String> {
        match text.parse::<u32>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{name} {text:?} is not a whole number above 0")),
        }
    };
    let model = TinyLlama {
        n_layers: number("LAYERS", layers)?,
        n_embd: number("EMBD", embd)?,
        n_ff: number("FF", ff)?,
        n_head: number("HEADS", heads)?,
        ..TinyLlama::default()
    };
    if !model.n_embd.is_multiple_of(256) || !model.n_ff.is_multiple_of(256) {
        return Err("EMBD and FF must be multiples of 256 (the k-quants' block)".into());
    }
    if !model.n_embd.is_multiple_of(model.n_head)
        || !(model.n_embd / model.n_head).is_multiple_of(2)
    {
        return Err("HEADS must divide EMBD into an even head size".into());
    }
    let (embd, ff) = (u64::from(model.n_embd), u64::from(model.n_ff));
    let per_layer = 4 * embd * embd + 3 * embd * ff;
    let values = u64::from(model.n_layers) * per_layer + 2 * embd * u64::from(model.n_vocab());
    if values.saturating_mul(2) > MAX_BYTES {
        return Err(format!(
            "{} GiB of f16 weights is more than this writer's {} GiB",
            values.saturating_mul(2) >> 30,
            MAX_BYTES >> 30
        ));
    }
    Ok((PathBuf::from(out), model))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let (out, model) = match parse(&args) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("write_llama: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match model.write(&out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("write_llama: writing {}: {e}", out.display());
            ExitCode::FAILURE
        }
    }
}
