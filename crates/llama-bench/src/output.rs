//! `llama-bench -o json` output read into typed tests, every field checked, and a test checked
//! against the run that asked for it.
//!
//! The form, as llama.cpp 0c1e57098 prints it (`json_printer` in
//! `tools/llama-bench/llama-bench.cpp`): a JSON array with one object per test; each object has
//! `build_commit`, `build_number`, `cpu_info`, `gpu_info`, `backends`, `model_filename`,
//! `model_type`, `model_size`, `model_n_params`, `n_batch`, `n_ubatch`, `n_threads`,
//! `cpu_mask` (as given to `-C`, `"0x0"` for none), `cpu_strict`, `poll`, `type_k`, `type_v`,
//! `n_gpu_layers`, `n_cpu_moe`, `split_mode`, `main_gpu`, `no_kv_offload`, `flash_attn`,
//! `devices`, `tensor_split`, `tensor_buft_overrides`, `load_mode`, `lazy_mode`,
//! `embeddings`, `no_op_offload`, `no_host`, `repack`, `fit_target`, `fit_min_ctx`,
//! `n_prompt`, `n_gen`, `n_depth`, `test_time`, `avg_ns`, `stddev_ns`, `avg_ts`,
//! `stddev_ts`, `samples_ns` and `samples_ts`. A rate is `(n_prompt + n_gen) / time`, per
//! repetition in `samples_ts`, their mean in `avg_ts`. Only the fields below are read; older
//! builds lack `repack`, which is then `None`.

use crate::error::Error;
use crate::run::{CpuMask, Run};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The highest rate believed, in tokens per second: a nanosecond per token. Anything above
/// is a broken measurement, not a fast machine.
pub const MAX_TOKENS_PER_SECOND: f64 = 1e9;

/// The most characters of a text field (a CPU's name, a build commit).
pub const MAX_TEXT_CHARS: usize = 1024;

/// How far `avg_ts` may be from the mean of `samples_ts`, relatively (the samples are printed
/// with six significant digits).
const MEAN_TOLERANCE: f64 = 1e-3;

/// One test of `llama-bench`'s output: its configuration as llama-bench ran it, and the rate
/// it measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    /// The llama.cpp commit the binary was built from (`"unknown"` for a build without git
    /// information).
    pub build_commit: String,
    /// llama.cpp's build number.
    pub build_number: i64,
    /// The CPU's name as llama-bench reads it.
    pub cpu_info: String,
    /// The GPUs' names; empty on a CPU-only build.
    pub gpu_info: String,
    /// The backends besides the CPU (`"CPU"` when there are none).
    pub backends: String,
    /// llama.cpp's description of the model (`"llama ?B Q4_K - Medium"`).
    pub model_type: String,
    /// The model's weights, in bytes.
    pub model_size: u64,
    /// The model's parameters.
    pub model_n_params: u64,
    /// The threads it ran with.
    pub n_threads: u32,
    /// The CPU mask it ran with; `None` for llama-bench's `"0x0"`, no mask.
    pub cpu_mask: Option<CpuMask>,
    /// Whether threads were pinned one per CPU of the mask.
    pub cpu_strict: bool,
    /// The polling level.
    pub poll: u32,
    /// Whether weights were repacked; `None` from builds that do not print it.
    pub repack: Option<bool>,
    /// Prompt tokens per repetition.
    pub n_prompt: u32,
    /// Generated tokens per repetition.
    pub n_gen: u32,
    /// The mean time of a repetition, in nanoseconds.
    pub avg_ns: u64,
    /// The standard deviation of the repetitions' times, in nanoseconds.
    pub stddev_ns: u64,
    /// The mean rate of the repetitions, in tokens per second.
    pub avg_ts: f64,
    /// The standard deviation of the rates, in tokens per second.
    pub stddev_ts: f64,
    /// Each repetition's rate, in tokens per second.
    pub samples_ts: Vec<f64>,
}

/// Reads `llama-bench -o json` output (`stdout` of `command`): every test, each field
/// checked ([`Error::NotJson`], [`Error::BadField`]).
pub fn parse_json(command: &str, stdout: &[u8]) -> Result<Vec<BenchResult>, Error> {
    let not_json = |reason: String| Error::NotJson {
        command: command.to_string(),
        reason,
    };
    let value: Value = serde_json::from_slice(stdout).map_err(|e| {
        let start = String::from_utf8_lossy(&stdout[..stdout.len().min(80)]).into_owned();
        not_json(format!("{e} (it begins {:?})", crate::error::shown(&start)))
    })?;
    let Value::Array(tests) = value else {
        return Err(not_json(format!(
            "a JSON {} instead of an array",
            kind(&value)
        )));
    };
    tests
        .iter()
        .enumerate()
        .map(|(index, test)| {
            let Value::Object(fields) = test else {
                return Err(not_json(format!(
                    "test {index} is a JSON {}, not an object",
                    kind(test)
                )));
            };
            Fields {
                command,
                index,
                fields,
            }
            .result()
        })
        .collect()
}

/// The one test of a run's output, checked against the run: its parameters must be the
/// ones asked for and it must have one sample per repetition ([`Error::Mismatch`]).
pub fn check_against(
    command: &str,
    run: &Run,
    tests: Vec<BenchResult>,
) -> Result<BenchResult, Error> {
    let mismatch = |problem: String| Error::Mismatch {
        command: command.to_string(),
        problem,
    };
    let n = tests.len();
    let Ok([test]) = <[BenchResult; 1]>::try_from(tests) else {
        return Err(mismatch(format!("{n} tests in the output, the run is one")));
    };
    let differs = |what: &str, found: String, asked: String| {
        Err(mismatch(format!(
            "the test ran with {what} {found}, the run asked for {asked}"
        )))
    };
    if test.n_threads != run.threads {
        return differs(
            "threads",
            test.n_threads.to_string(),
            run.threads.to_string(),
        );
    }
    if test.n_prompt != run.prompt_tokens {
        return differs(
            "prompt tokens",
            test.n_prompt.to_string(),
            run.prompt_tokens.to_string(),
        );
    }
    if test.n_gen != run.gen_tokens {
        return differs(
            "generated tokens",
            test.n_gen.to_string(),
            run.gen_tokens.to_string(),
        );
    }
    if let Some(mask) = &run.cpu_mask
        && test.cpu_mask.as_ref() != Some(mask)
    {
        let found = test
            .cpu_mask
            .as_ref()
            .map_or("none".into(), CpuMask::to_string);
        return differs("cpu mask", found, mask.to_string());
    }
    if let Some(strict) = run.cpu_strict
        && test.cpu_strict != strict
    {
        return differs(
            "cpu-strict",
            test.cpu_strict.to_string(),
            strict.to_string(),
        );
    }
    if let Some(poll) = run.poll
        && test.poll != u32::from(poll)
    {
        return differs("poll", test.poll.to_string(), poll.to_string());
    }
    if let Some(repack) = run.repack
        && test.repack != Some(repack)
    {
        let found = test.repack.map_or("unknown".into(), |r| r.to_string());
        return differs("repack", found, repack.to_string());
    }
    if test.samples_ts.len() != run.repetitions as usize {
        return Err(mismatch(format!(
            "{} samples in the test, the run asked for {} repetitions",
            test.samples_ts.len(),
            run.repetitions
        )));
    }
    Ok(test)
}

/// The fields of one test, read with errors that name the field.
struct Fields<'a> {
    command: &'a str,
    index: usize,
    fields: &'a Map<String, Value>,
}

impl Fields<'_> {
    fn result(&self) -> Result<BenchResult, Error> {
        let avg_ts = self.rate("avg_ts")?;
        let samples_ts = self.samples()?;
        let mean = samples_ts.iter().sum::<f64>() / samples_ts.len() as f64;
        if (avg_ts - mean).abs() > MEAN_TOLERANCE * mean {
            return Err(self.bad(
                "avg_ts",
                format!("avg_ts {avg_ts} is not the mean {mean} of samples_ts"),
            ));
        }
        let stddev_ts = self.float("stddev_ts")?;
        if !(0.0..=MAX_TOKENS_PER_SECOND).contains(&stddev_ts) {
            return Err(self.bad(
                "stddev_ts",
                format!("stddev_ts {stddev_ts} is not in 0..={MAX_TOKENS_PER_SECOND:e} tokens/s"),
            ));
        }
        let avg_ns = self.unsigned("avg_ns")?;
        if avg_ns == 0 {
            return Err(self.bad("avg_ns", "avg_ns is 0".into()));
        }
        let mask_text = self.text("cpu_mask")?;
        // One `0x` at most: `0x0x0` is no mask of llama-bench's.
        let digits = mask_text.strip_prefix("0x").unwrap_or(&mask_text);
        let cpu_mask = match digits.trim_start_matches('0') {
            "" if mask_text.starts_with("0x") => None,
            _ => Some(CpuMask::parse(&mask_text).ok_or_else(|| {
                self.bad(
                    "cpu_mask",
                    format!(
                        "cpu_mask {:?} is not a hex mask",
                        crate::error::shown(&mask_text)
                    ),
                )
            })?),
        };
        let n_prompt = self.count("n_prompt")?;
        let n_gen = self.count("n_gen")?;
        if n_prompt == 0 && n_gen == 0 {
            return Err(self.bad("n_gen", "n_prompt and n_gen are both 0".into()));
        }
        // The rates and the times are one measurement. `avg_ts`, the mean of the repetitions'
        // tokens ÷ time, is at least the tokens ÷ `avg_ns` (a mean of reciprocals is at least
        // the reciprocal of the mean; it may be far above when a repetition was slow); and
        // where `samples_ns` is given, each repetition's rate is its tokens ÷ its time. A rate
        // of 1e-300 beside a time of 0.2 s is no measurement.
        let tokens = f64::from(n_prompt) + f64::from(n_gen);
        // `avg_ns` is a whole number of nanoseconds: up to one more is the same time.
        let implied = tokens * 1e9 / (avg_ns as f64 + 1.0);
        if avg_ts < implied * (1.0 - MEAN_TOLERANCE) {
            return Err(self.bad(
                "avg_ts",
                format!(
                    "avg_ts {avg_ts} tokens/s is below the tokens ÷ avg_ns, {tokens} tokens in \
                     {avg_ns} ns ({implied:.6} tokens/s)"
                ),
            ));
        }
        // Present, it is an array: one of another type would skip the check.
        let samples_ns = match self.fields.get("samples_ns") {
            None | Some(Value::Null) => None,
            Some(Value::Array(samples)) => Some(samples),
            Some(other) => return Err(self.wrong_type("samples_ns", "an array", other)),
        };
        if let Some(samples_ns) = samples_ns {
            let agrees = samples_ns.len() == samples_ts.len()
                && samples_ns.iter().zip(&samples_ts).all(|(ns, ts)| {
                    // Six digits of the rate, and a time in whole nanoseconds: a rate times
                    // a nanosecond of rounding.
                    let slack = MEAN_TOLERANCE * tokens + ts / 1e9;
                    ns.as_f64()
                        .is_some_and(|ns| (ts * ns / 1e9 - tokens).abs() <= slack)
                });
            if !agrees {
                return Err(self.bad(
                    "samples_ts",
                    format!(
                        "samples_ts is not {tokens} tokens ÷ samples_ns, repetition by repetition"
                    ),
                ));
            }
        }
        Ok(BenchResult {
            build_commit: self.text("build_commit")?,
            build_number: self.signed("build_number")?,
            cpu_info: self.text("cpu_info")?,
            gpu_info: self.text("gpu_info")?,
            backends: self.text("backends")?,
            model_type: self.text("model_type")?,
            model_size: self.unsigned("model_size")?,
            model_n_params: self.unsigned("model_n_params")?,
            n_threads: self.threads()?,
            cpu_mask,
            cpu_strict: self.boolean("cpu_strict")?,
            poll: self.poll()?,
            repack: match self.fields.get("repack") {
                None => None,
                Some(_) => Some(self.boolean("repack")?),
            },
            n_prompt,
            n_gen,
            avg_ns,
            stddev_ns: self.unsigned("stddev_ns")?,
            avg_ts,
            stddev_ts,
            samples_ts,
        })
    }

    fn bad(&self, field: &'static str, problem: String) -> Error {
        Error::BadField {
            command: self.command.to_string(),
            index: self.index,
            field,
            problem,
        }
    }

    fn get(&self, field: &'static str) -> Result<&Value, Error> {
        self.fields
            .get(field)
            .ok_or_else(|| self.bad(field, format!("field {field} is missing")))
    }

    fn wrong_type(&self, field: &'static str, expected: &str, value: &Value) -> Error {
        self.bad(
            field,
            format!("field {field} is a JSON {}, not {expected}", kind(value)),
        )
    }

    fn text(&self, field: &'static str) -> Result<String, Error> {
        match self.get(field)? {
            Value::String(s) if s.chars().count() <= MAX_TEXT_CHARS => Ok(s.clone()),
            Value::String(s) => Err(self.bad(
                field,
                format!(
                    "field {field} has {} characters, more than {MAX_TEXT_CHARS}",
                    s.chars().count()
                ),
            )),
            other => Err(self.wrong_type(field, "a string", other)),
        }
    }

    fn boolean(&self, field: &'static str) -> Result<bool, Error> {
        match self.get(field)? {
            Value::Bool(b) => Ok(*b),
            other => Err(self.wrong_type(field, "a boolean", other)),
        }
    }

    fn unsigned(&self, field: &'static str) -> Result<u64, Error> {
        let value = self.get(field)?;
        value
            .as_u64()
            .ok_or_else(|| self.wrong_type(field, "an unsigned integer", value))
    }

    fn signed(&self, field: &'static str) -> Result<i64, Error> {
        let value = self.get(field)?;
        value
            .as_i64()
            .ok_or_else(|| self.wrong_type(field, "an integer", value))
    }

    /// A token count, at most [`crate::run::MAX_TOKENS`].
    fn count(&self, field: &'static str) -> Result<u32, Error> {
        let n = self.unsigned(field)?;
        if n > u64::from(crate::run::MAX_TOKENS) {
            return Err(self.bad(
                field,
                format!("{field} {n} is more than {}", crate::run::MAX_TOKENS),
            ));
        }
        Ok(n as u32)
    }

    fn threads(&self) -> Result<u32, Error> {
        let n = self.unsigned("n_threads")?;
        if !(1..=u64::from(crate::run::MAX_THREADS)).contains(&n) {
            return Err(self.bad(
                "n_threads",
                format!("n_threads {n} is not in 1..={}", crate::run::MAX_THREADS),
            ));
        }
        Ok(n as u32)
    }

    fn poll(&self) -> Result<u32, Error> {
        let n = self.unsigned("poll")?;
        if n > 100 {
            return Err(self.bad("poll", format!("poll {n} is not in 0..=100")));
        }
        Ok(n as u32)
    }

    fn float(&self, field: &'static str) -> Result<f64, Error> {
        let value = self.get(field)?;
        value
            .as_f64()
            .ok_or_else(|| self.wrong_type(field, "a number", value))
    }

    /// A rate: finite, above zero, at most [`MAX_TOKENS_PER_SECOND`].
    fn rate(&self, field: &'static str) -> Result<f64, Error> {
        let rate = self.float(field)?;
        self.check_rate(field, rate)
    }

    fn check_rate(&self, field: &'static str, rate: f64) -> Result<f64, Error> {
        if rate > 0.0 && rate <= MAX_TOKENS_PER_SECOND {
            Ok(rate)
        } else {
            Err(self.bad(
                field,
                format!("{field} {rate} is not a rate in (0, {MAX_TOKENS_PER_SECOND:e}] tokens/s"),
            ))
        }
    }

    fn samples(&self) -> Result<Vec<f64>, Error> {
        let value = self.get("samples_ts")?;
        let Value::Array(items) = value else {
            return Err(self.wrong_type("samples_ts", "an array", value));
        };
        if items.is_empty() {
            return Err(self.bad("samples_ts", "samples_ts is empty".into()));
        }
        items
            .iter()
            .map(|item| {
                let rate = item
                    .as_f64()
                    .ok_or_else(|| self.wrong_type("samples_ts", "an array of numbers", value))?;
                self.check_rate("samples_ts", rate)
            })
            .collect()
    }
}

/// A JSON value's kind, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests;
