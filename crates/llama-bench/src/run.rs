//! One `llama-bench` run as a typed value, and the command-line arguments it becomes.

use crate::error::Error;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::fmt;
use std::path::Path;

/// The most threads `llama-bench` accepts (ggml's `GGML_MAX_N_THREADS`).
pub const MAX_THREADS: u32 = 512;

/// The most CPUs a mask names (ggml's `GGML_MAX_N_THREADS` bits of `-C`).
pub const MAX_CPUS: u32 = 512;

/// The most prompt or generated tokens of one run.
pub const MAX_TOKENS: u32 = 1 << 16;

/// The most repetitions of one run.
pub const MAX_REPETITIONS: u32 = 1000;

/// The repetitions of [`Run::decode`] and [`Run::prefill`] (llama-bench's own default).
pub const DEFAULT_REPETITIONS: u32 = 5;

/// Which phase of inference a run measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Token generation, one token at a time (`-p 0 -n N`, llama-bench's `tgN`).
    Decode,
    /// Prompt processing, a batch of tokens at once (`-p N -n 0`, llama-bench's `ppN`).
    Prefill,
}

/// One configuration of `llama-bench`, measured as one test: decode (`gen_tokens`) or
/// prefill (`prompt_tokens`), never both.
///
/// A knob left `None` is not passed, so llama-bench's own default applies (no mask,
/// `--cpu-strict 0`, `--poll 50`, `--repack 1` in llama.cpp 0c1e57098).
///
/// ```
/// use llama_bench::{CpuMask, Run};
///
/// let run = Run { poll: Some(0), ..Run::decode(2, 16) };
/// let args = run.args("model.gguf".as_ref())?;
/// assert_eq!(
///     args,
///     ["-m", "model.gguf", "-o", "json", "-r", "5", "-p", "0", "-n", "16", "-t", "2", "--poll", "0"]
/// );
/// let pinned = Run { cpu_mask: Some(CpuMask::from_cpus([0, 2])?), cpu_strict: Some(true), ..run };
/// assert!(pinned.args("m.gguf".as_ref())?.ends_with(&["-C".into(), "0x5".into(), "--cpu-strict".into(), "1".into(), "--poll".into(), "0".into()]));
/// # Ok::<(), llama_bench::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Run {
    /// Worker threads (`-t`), 1 to [`MAX_THREADS`].
    pub threads: u32,
    /// Prompt tokens processed as one batch (`-p`); zero for a decode run.
    pub prompt_tokens: u32,
    /// Tokens generated one at a time (`-n`); zero for a prefill run.
    pub gen_tokens: u32,
    /// The CPUs the threads may run on (`-C`).
    pub cpu_mask: Option<CpuMask>,
    /// Whether each thread is pinned to one CPU of the mask (`--cpu-strict`).
    pub cpu_strict: Option<bool>,
    /// How hard idle workers poll for work, 0 to 100 (`--poll`).
    pub poll: Option<u8>,
    /// Whether weights are repacked into the CPU's extra buffer types (`--repack`).
    pub repack: Option<bool>,
    /// Timed repetitions (`-r`), 1 to [`MAX_REPETITIONS`].
    pub repetitions: u32,
    /// Whether llama-bench runs its untimed warm-up first (else `--no-warmup`).
    pub warmup: bool,
}

impl Run {
    /// A decode run: `gen_tokens` tokens generated at `threads` threads.
    pub fn decode(threads: u32, gen_tokens: u32) -> Run {
        Run {
            threads,
            prompt_tokens: 0,
            gen_tokens,
            ..Run::base()
        }
    }

    /// A prefill run: a prompt of `prompt_tokens` tokens processed at `threads` threads.
    pub fn prefill(threads: u32, prompt_tokens: u32) -> Run {
        Run {
            threads,
            prompt_tokens,
            gen_tokens: 0,
            ..Run::base()
        }
    }

    fn base() -> Run {
        Run {
            threads: 1,
            prompt_tokens: 0,
            gen_tokens: 0,
            cpu_mask: None,
            cpu_strict: None,
            poll: None,
            repack: None,
            repetitions: DEFAULT_REPETITIONS,
            warmup: true,
        }
    }

    /// The phase it measures: prefill when it has prompt tokens, else decode.
    pub fn phase(&self) -> Phase {
        if self.prompt_tokens > 0 {
            Phase::Prefill
        } else {
            Phase::Decode
        }
    }

    /// The tokens one repetition processes (its rate's numerator).
    pub fn tokens(&self) -> u32 {
        self.prompt_tokens.saturating_add(self.gen_tokens)
    }

    /// Checks every field against what `llama-bench` accepts and what one test needs.
    pub fn validate(&self) -> Result<(), Error> {
        let invalid = |reason: String| Err(Error::InvalidRun { reason });
        if !(1..=MAX_THREADS).contains(&self.threads) {
            return invalid(format!(
                "threads {} is not in 1..={MAX_THREADS}",
                self.threads
            ));
        }
        match (self.prompt_tokens, self.gen_tokens) {
            (0, 0) => return invalid("no prompt and no generated tokens".into()),
            (p, g) if p > 0 && g > 0 => {
                return invalid(format!(
                    "prompt tokens {p} and generated tokens {g} together make two tests; a run is one"
                ));
            }
            (p, g) if p.max(g) > MAX_TOKENS => {
                return invalid(format!("{} tokens is more than {MAX_TOKENS}", p.max(g)));
            }
            _ => {}
        }
        if let Some(poll) = self.poll
            && poll > 100
        {
            return invalid(format!("poll {poll} is not in 0..=100"));
        }
        if !(1..=MAX_REPETITIONS).contains(&self.repetitions) {
            return invalid(format!(
                "repetitions {} is not in 1..={MAX_REPETITIONS}",
                self.repetitions
            ));
        }
        Ok(())
    }

    /// The arguments of `llama-bench` for this run on `model`, JSON on stdout; an error when
    /// the run is invalid ([`Run::validate`]).
    pub fn args(&self, model: &Path) -> Result<Vec<OsString>, Error> {
        self.validate()?;
        let mut args: Vec<OsString> = vec!["-m".into(), model.into()];
        let mut push = |flag: &str, value: String| {
            args.push(flag.into());
            args.push(value.into());
        };
        push("-o", "json".into());
        push("-r", self.repetitions.to_string());
        push("-p", self.prompt_tokens.to_string());
        push("-n", self.gen_tokens.to_string());
        push("-t", self.threads.to_string());
        if let Some(mask) = &self.cpu_mask {
            push("-C", mask.to_string());
        }
        if let Some(strict) = self.cpu_strict {
            push("--cpu-strict", u8::from(strict).to_string());
        }
        if let Some(poll) = self.poll {
            push("--poll", poll.to_string());
        }
        if let Some(repack) = self.repack {
            push("--repack", u8::from(repack).to_string());
        }
        if !self.warmup {
            args.push("--no-warmup".into());
        }
        Ok(args)
    }
}

/// A set of CPUs, as `llama-bench -C` takes it: a hexadecimal mask, CPU 0 the lowest bit.
///
/// Never empty (llama-bench reads `0x0` as "no mask"); CPUs below [`MAX_CPUS`].
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CpuMask {
    /// The mask's 64-bit words, the lowest CPUs first, with no zero words at the end.
    words: Vec<u64>,
}

impl CpuMask {
    /// The mask of `cpus`; an error when it is empty or names a CPU at or above
    /// [`MAX_CPUS`].
    pub fn from_cpus(cpus: impl IntoIterator<Item = u32>) -> Result<CpuMask, Error> {
        let mut words = Vec::new();
        for cpu in cpus {
            if cpu >= MAX_CPUS {
                return Err(Error::InvalidRun {
                    reason: format!("cpu {cpu} of the mask is not below {MAX_CPUS}"),
                });
            }
            let word = (cpu / 64) as usize;
            if words.len() <= word {
                words.resize(word + 1, 0);
            }
            words[word] |= 1 << (cpu % 64);
        }
        if words.is_empty() {
            return Err(Error::InvalidRun {
                reason: "the cpu mask is empty".into(),
            });
        }
        Ok(CpuMask { words })
    }

    /// The CPUs, lowest first.
    pub fn cpus(&self) -> Vec<u32> {
        let mut out = Vec::new();
        for (w, &word) in self.words.iter().enumerate() {
            for bit in 0..64 {
                if word & (1 << bit) != 0 {
                    out.push(w as u32 * 64 + bit);
                }
            }
        }
        out
    }

    /// Reads a mask as llama-bench prints it (`0x` and hexadecimal digits, either case,
    /// leading zeros allowed); `None` for anything else, `0x0` included.
    pub fn parse(text: &str) -> Option<CpuMask> {
        let digits = text
            .strip_prefix("0x")
            .or_else(|| text.strip_prefix("0X"))?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let digits = digits.trim_start_matches('0');
        if digits.len() > (MAX_CPUS / 4) as usize {
            return None;
        }
        let mut cpus = Vec::new();
        for (i, digit) in digits.bytes().rev().enumerate() {
            let value = (digit as char).to_digit(16)?;
            for bit in 0..4 {
                if value & (1 << bit) != 0 {
                    cpus.push(i as u32 * 4 + bit);
                }
            }
        }
        CpuMask::from_cpus(cpus).ok()
    }
}

/// Lowercase hexadecimal with `0x`, no leading zeros: `0x5` for CPUs 0 and 2.
impl fmt::Display for CpuMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut words = self.words.iter().rev();
        let top = words.next().copied().unwrap_or(0);
        write!(f, "0x{top:x}")?;
        for word in words {
            write!(f, "{word:016x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for CpuMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuMask({self} = cpus {:?})", self.cpus())
    }
}

impl From<CpuMask> for String {
    fn from(mask: CpuMask) -> String {
        mask.to_string()
    }
}

impl TryFrom<String> for CpuMask {
    type Error = String;

    fn try_from(text: String) -> Result<CpuMask, String> {
        CpuMask::parse(&text).ok_or_else(|| format!("{text:?} is not a non-empty hex cpu mask"))
    }
}

#[cfg(test)]
mod tests;
