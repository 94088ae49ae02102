//! The resolved profile in each runtime's own form: llama.cpp's flags, a `llama-server`
//! preset section, ollama's Modelfile lines (its systemd drop-in, when pinned, in a note),
//! llama-cpp-python's, candle's and vLLM's environment lines. [`render`] is a pure function of the profile and the
//! machine, so each form is checked by golden tests; `sipllm emit` only writes its text.
//!
//! Each [`Target`] names, in its doc comment and in [`Target::targets`], the runtime version
//! and the options its text uses; `docs/runtimes.md` explains each mapping at length.
//!
//! A runtime that has one thread setting for both phases (ollama, candle, vLLM) gets the
//! decode setting, which is what an interactive session spends its time in; a note says so
//! when the prefill pick differs. What a runtime cannot express (a CPU mask where it has
//! none, a launcher it needs) is a note beside the text, never a silent loss.

use auto_tuner::{CoreSet, PhaseProfile, RuntimeProfile};
use device_profile::HardwareInfo;
use std::fmt::Write as _;

/// The highest CPU id llama.cpp's masks reach: `GGML_MAX_N_THREADS` (512) bits.
const LLAMA_CPP_MAX_CPU: usize = 511;

/// The path `ollama`'s drop-in is meant for: the unit its Linux install creates.
const OLLAMA_DROP_IN: &str = "/etc/systemd/system/ollama.service.d/sipllm-cpus.conf";

/// The comment line of the ollama text that says where its lines go.
const OLLAMA_FROM: &str =
    "# lines of a Modelfile: put them after its FROM line (FROM ./model.gguf, say)\n";

/// A runtime whose settings `sipllm emit` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// llama.cpp at commit 0c1e57098 (the tree llama-cpp-python 0.3.36 vendors): the
    /// command-line flags of `common/arg.cpp` that `llama-cli`, `llama-server` and the
    /// other tools built on `common_init_from_params` read: `-t`/`--threads`,
    /// `-tb`/`--threads-batch`, `-C`/`--cpu-mask` with `--cpu-strict 1`,
    /// `-Cb`/`--cpu-mask-batch` with `--cpu-strict-batch 1`; when one phase pins, the
    /// other gets a mask of every CPU this process may use with strict 0, since llama.cpp's
    /// OpenMP build shares its threads between the two and they would keep the pinned
    /// phase's CPUs. Never `--numa numactl`, which resets every thread to the whole CPU
    /// set at each graph and so undoes the masks: a note names `numactl --membind`.
    LlamaCpp,
    /// A section of an INI file for `llama-server --models-preset` (llama.cpp 0c1e57098,
    /// `common/preset.cpp`): the same options as [`Target::LlamaCpp`] by their long names
    /// without dashes (`threads`, `threads-batch`, `cpu-mask`, `cpu-strict`,
    /// `cpu-mask-batch`, `cpu-strict-batch`), in the global section `[*]`.
    LlamaServerPreset,
    /// ollama 0.32: the Modelfile line `PARAMETER num_thread N` (`api/types.go`, which
    /// `llm/llama_server.go` passes to its `llama-server` as `-t`); when the profile pins,
    /// a note gives the systemd drop-in for `ollama.service` with `AllowedCPUs=` (and
    /// `AllowedMemoryNodes=` for a NUMA node; systemd.resource-control(5), cgroup v2), which
    /// is not Modelfile text (a `[Service]` line there stops `ollama create`).
    Ollama,
    /// llama-cpp-python 0.3.36's server (`llama_cpp/server/settings.py`, pydantic settings
    /// read from the environment by field name): `N_THREADS`, `N_THREADS_BATCH`, and
    /// `NUMA=3` (`GGML_NUMA_STRATEGY_NUMACTL`) for a NUMA node.
    LlamaCppPython,
    /// candle 0.11.0 (`candle-core/src/utils.rs`): `CANDLE_NUM_THREADS` (its barrier pool,
    /// the caller included) and `RAYON_NUM_THREADS` (its rayon pool). It has no CPU mask: a
    /// pinned profile is a note naming `taskset -c`.
    Candle,
    /// vLLM's CPU backend (0.30, `vllm/envs.py` and its CPU installation guide):
    /// `VLLM_CPU_OMP_THREADS_BIND` (a CPU list, one OpenMP thread bound to each, or `nobind`)
    /// and `OMP_NUM_THREADS`.
    Vllm,
}

impl Target {
    /// Every target, in the order `--json` lists them.
    pub const ALL: [Target; 6] = [
        Target::LlamaCpp,
        Target::LlamaServerPreset,
        Target::Ollama,
        Target::LlamaCppPython,
        Target::Candle,
        Target::Vllm,
    ];

    /// The name `--for` takes and `--json` keys by.
    pub fn name(self) -> &'static str {
        match self {
            Target::LlamaCpp => "llama.cpp",
            Target::LlamaServerPreset => "llama-server-preset",
            Target::Ollama => "ollama",
            Target::LlamaCppPython => "llama-cpp-python",
            Target::Candle => "candle",
            Target::Vllm => "vllm",
        }
    }

    /// The runtime version and the options the text targets, in one line.
    pub fn targets(self) -> &'static str {
        match self {
            Target::LlamaCpp => {
                "llama.cpp 0c1e57098: -t, -tb, -C/--cpu-strict, -Cb/--cpu-strict-batch"
            }
            Target::LlamaServerPreset => {
                "llama.cpp 0c1e57098 llama-server --models-preset: threads, threads-batch, \
                 cpu-mask, cpu-strict, cpu-mask-batch, cpu-strict-batch"
            }
            Target::Ollama => {
                "ollama 0.32: Modelfile PARAMETER num_thread; a note's systemd AllowedCPUs=, \
                 AllowedMemoryNodes="
            }
            Target::LlamaCppPython => {
                "llama-cpp-python 0.3.36 server: N_THREADS, N_THREADS_BATCH, NUMA"
            }
            Target::Candle => "candle 0.11.0: CANDLE_NUM_THREADS, RAYON_NUM_THREADS",
            Target::Vllm => "vLLM 0.30 CPU backend: VLLM_CPU_OMP_THREADS_BIND, OMP_NUM_THREADS",
        }
    }

    /// Parses a `--for` value (its [`Target::name`], any case).
    pub fn parse(s: &str) -> Result<Target, String> {
        let wanted = s.trim();
        Target::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(wanted))
            .ok_or_else(|| {
                let names: Vec<&str> = Target::ALL.iter().map(|t| t.name()).collect();
                format!("unknown target {s:?}: expected one of {}", names.join(", "))
            })
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One target's settings: the text in the runtime's form, and what it cannot say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeSettings {
    /// The runtime.
    pub target: Target,
    /// The settings as the runtime reads them, ending in a newline.
    pub text: String,
    /// What the text cannot express or needs besides it (a launcher, a setting the
    /// runtime lacks), one sentence each; empty when the text says everything.
    pub notes: Vec<String>,
}

/// A profile that a target cannot express.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmitError {
    /// The runtime.
    pub target: Target,
    /// What it cannot express, lowercase, naming the value at fault.
    pub message: String,
}

impl std::fmt::Display for EmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.target, self.message)
    }
}

impl std::error::Error for EmitError {}

/// The settings of `profile` for `target`, on the machine `hw` (its performance and
/// efficiency CPUs and its NUMA nodes name what the notes say).
pub fn render(
    target: Target,
    profile: &RuntimeProfile,
    hw: &HardwareInfo,
) -> Result<RuntimeSettings, EmitError> {
    let view = View { profile, hw };
    let (text, notes) = match target {
        Target::LlamaCpp => view.llama_cpp()?,
        Target::LlamaServerPreset => view.llama_server_preset()?,
        Target::Ollama => view.ollama(),
        Target::LlamaCppPython => view.llama_cpp_python(),
        Target::Candle => view.candle(),
        Target::Vllm => view.vllm(),
    };
    Ok(RuntimeSettings {
        target,
        text,
        notes,
    })
}

/// The settings of `profile` for every target, in [`Target::ALL`]'s order.
pub fn render_all(
    profile: &RuntimeProfile,
    hw: &HardwareInfo,
) -> Result<Vec<RuntimeSettings>, EmitError> {
    Target::ALL
        .into_iter()
        .map(|t| render(t, profile, hw))
        .collect()
}

/// The hex mask of `cpus` as llama.cpp's `-C` reads it: bit `i` for CPU `i`, most
/// significant digit first, with a `0x` prefix (`[0, 1, 2, 3]` → `0xf`, `[4]` → `0x10`).
pub fn cpu_mask_hex(cpus: &[usize]) -> String {
    let digits = cpus.iter().max().map_or(1, |&top| top / 4 + 1);
    let mut nibbles = vec![0u8; digits];
    for &cpu in cpus {
        nibbles[cpu / 4] |= 1 << (cpu % 4);
    }
    let mut s = String::from("0x");
    for nibble in nibbles.iter().rev() {
        let _ = write!(s, "{nibble:x}");
    }
    s
}

/// `cpus` as a Linux CPU list, sorted with runs as ranges (`[3, 0, 1, 2, 8]` → `0-3,8`), as
/// systemd's `AllowedCPUs=`, `taskset -c`, libnuma and candle read it.
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// The CPUs a phase is pinned to, when it is.
fn pinned(phase: &PhaseProfile) -> Option<&[usize]> {
    (!phase.pinned_cpus.is_empty()).then_some(phase.pinned_cpus.as_slice())
}

/// The NUMA node a pinned phase runs on, when its core set is one.
fn node(phase: &PhaseProfile) -> Option<usize> {
    match phase.cores {
        CoreSet::Node(n) if pinned(phase).is_some() => Some(n),
        _ => None,
    }
}

/// `N thread(s)`.
fn threads(n: usize) -> String {
    format!("{n} {}", if n == 1 { "thread" } else { "threads" })
}

/// A phase's setting in words: `4 threads` or `4 threads pinned to CPUs 0-3 (performance)`.
fn setting(phase: &PhaseProfile) -> String {
    match pinned(phase) {
        Some(cpus) => format!(
            "{} pinned to CPUs {} ({})",
            threads(phase.threads),
            cpu_list(cpus),
            phase.cores.label()
        ),
        None => threads(phase.threads),
    }
}

/// One llama.cpp option: its long name (a preset's key), the flag the command line spells it
/// with, and its value.
struct LlamaOption {
    name: &'static str,
    flag: &'static str,
    value: String,
}

impl LlamaOption {
    fn new(name: &'static str, flag: &'static str, value: impl ToString) -> Self {
        LlamaOption {
            name,
            flag,
            value: value.to_string(),
        }
    }
}

/// The profile and the machine, with the pieces every target shares.
struct View<'a> {
    profile: &'a RuntimeProfile,
    hw: &'a HardwareInfo,
}

impl View<'_> {
    fn decode(&self) -> &PhaseProfile {
        &self.profile.decode
    }

    fn prefill(&self) -> &PhaseProfile {
        &self.profile.prefill
    }

    /// The comment line that opens a file-shaped text: whose profile it is. The names come
    /// from files (a GGUF's `general.name`, a profile's `hardware_id`): escaped as on a
    /// terminal, so that no direction mark or line break of theirs reaches the file.
    fn provenance(&self, comment: &str) -> String {
        format!(
            "{comment} sipllm profile of {} on {}\n",
            model_workload::shown(&self.profile.request.workload.name),
            model_workload::shown(&self.profile.hardware_id)
        )
    }

    /// For a runtime with one setting for both phases: a note when the prefill pick is not
    /// the decode pick that it gets.
    fn one_setting_note(&self, runtime: &str) -> Option<String> {
        let (d, p) = (self.decode(), self.prefill());
        let same = d.threads == p.threads && d.pinned_cpus == p.pinned_cpus;
        (!same).then(|| {
            format!(
                "{runtime} has one thread setting for both phases, so this is the decode pick \
                 ({}); the prefill pick ({}) is not expressible",
                setting(d),
                setting(p)
            )
        })
    }

    /// A note for a runtime with no CPU mask when a phase pins: the launcher that pins
    /// decode, or that prefill's pin is lost.
    fn taskset_note(&self, runtime: &str) -> Option<String> {
        if let Some(cpus) = pinned(self.decode()) {
            return Some(format!(
                "{runtime} sets no CPU affinity of its own: start it under `taskset -c {}` to \
                 keep decode on the CPUs it was tuned on (prompt processing then runs there \
                 too)",
                cpu_list(cpus)
            ));
        }
        pinned(self.prefill()).map(|_| {
            format!(
                "{runtime} sets no CPU affinity of its own, so the prefill pick ({}) runs \
                 unpinned",
                setting(self.prefill())
            )
        })
    }

    /// A note on what a hybrid CPU's pinned pick leaves out, for a text that pins the
    /// phases `pins` names.
    fn hybrid_note(&self, pins: &[&PhaseProfile]) -> Option<String> {
        let performance = pins
            .iter()
            .any(|p| p.cores == CoreSet::Performance && pinned(p).is_some());
        (performance && !self.hw.efficiency_cpus.is_empty()).then(|| {
            format!(
                "the performance-core pick leaves the efficiency cores (CPUs {}) to other work",
                cpu_list(&self.hw.efficiency_cpus)
            )
        })
    }

    /// The NUMA nodes that hold `cpus`, in order (none when the machine shows no nodes).
    fn nodes_of(&self, cpus: &[usize]) -> Vec<usize> {
        self.hw
            .nodes()
            .filter(|(_, node)| cpus.iter().any(|c| node.contains(c)))
            .map(|(n, _)| n)
            .collect()
    }

    /// llama.cpp's CPU mask of a phase, or the error for a CPU beyond its masks.
    fn llama_mask(&self, target: Target, cpus: &[usize]) -> Result<String, EmitError> {
        match cpus.iter().find(|&&c| c > LLAMA_CPP_MAX_CPU) {
            Some(cpu) => Err(EmitError {
                target,
                message: format!(
                    "the profile pins CPU {cpu}, beyond the CPUs llama.cpp's masks reach \
                     (0-{LLAMA_CPP_MAX_CPU}, GGML_MAX_N_THREADS)"
                ),
            }),
            None => Ok(cpu_mask_hex(cpus)),
        }
    }

    /// The llama.cpp options of the profile and the notes; both llama.cpp targets write
    /// them.
    fn llama_options(&self, target: Target) -> Result<(Vec<LlamaOption>, Vec<String>), EmitError> {
        let (d, p) = (self.decode(), self.prefill());
        let mut options = vec![
            LlamaOption::new("threads", "-t", d.threads),
            LlamaOption::new("threads-batch", "-tb", p.threads),
        ];
        let mut notes = Vec::new();
        // With one phase pinned, the other gets every CPU this process may use, not strict:
        // llama.cpp's OpenMP build runs both phases on the same threads, and a pool without
        // a mask leaves them where the pinned phase put them.
        let every_cpu = match (pinned(d), pinned(p)) {
            (Some(_), None) | (None, Some(_)) => self.every_cpu_mask(&mut notes),
            _ => None,
        };
        for (phase, name, flag, strict_name, strict_flag) in [
            (d, "cpu-mask", "-C", "cpu-strict", "--cpu-strict"),
            (
                p,
                "cpu-mask-batch",
                "-Cb",
                "cpu-strict-batch",
                "--cpu-strict-batch",
            ),
        ] {
            let (mask, strict) = match pinned(phase) {
                Some(cpus) => (self.llama_mask(target, cpus)?, 1),
                None => match &every_cpu {
                    Some(mask) => (mask.clone(), 0),
                    None => continue,
                },
            };
            options.push(LlamaOption::new(name, flag, mask));
            options.push(LlamaOption::new(strict_name, strict_flag, strict));
        }
        if every_cpu.is_some() {
            notes.push(format!(
                "the unpinned {} gets a mask of every CPU this process may use, not strict: \
                 llama.cpp's OpenMP build runs both phases on the same threads, which would \
                 otherwise keep the pinned phase's CPUs",
                if pinned(d).is_some() {
                    "prefill"
                } else {
                    "decode"
                }
            ));
        }
        // A one-thread phase runs on the calling thread, which llama.cpp's masks leave alone.
        let lone = |phase: &PhaseProfile| phase.threads == 1 && pinned(phase).is_some();
        let held = match (lone(d), lone(p)) {
            (true, true) => Some("the CPU of each phase holds only under `taskset -c`"),
            (true, false) => {
                Some("decode's CPU holds only under `taskset -c`, which confines prefill too")
            }
            (false, true) => {
                Some("prefill's CPU holds only under `taskset -c`, which confines decode too")
            }
            (false, false) => None,
        };
        notes.extend(held.map(|held| {
            format!(
                "llama.cpp runs a one-thread graph on the calling thread, which its masks do \
                 not pin: {held}"
            )
        }));
        if let Some(n) = node(d).or_else(|| node(p)) {
            notes.push(format!(
                "for the weights in node {n}'s memory, start llama.cpp under `numactl \
                 --membind={n}`; --numa numactl is not written: at each graph it moves every \
                 thread to the process's whole CPU set, undoing the masks"
            ));
        }
        notes.extend(self.hybrid_note(&[d, p]));
        notes.extend(self.llama_knobs(&mut options));
        Ok((options, notes))
    }

    /// The mask of every CPU this process may use, for the unpinned phase beside a pinned
    /// one; `None`, with a note, when a CPU lies beyond llama.cpp's masks.
    fn every_cpu_mask(&self, notes: &mut Vec<String>) -> Option<String> {
        let cpus: Vec<usize> = if self.hw.allowed_cpus.is_empty() {
            (0..self.hw.logical_cores.max(1)).collect()
        } else {
            self.hw.allowed_cpus.clone()
        };
        if cpus.iter().any(|&c| c > LLAMA_CPP_MAX_CPU) {
            notes.push(format!(
                "the unpinned phase gets no mask (this process may use CPUs beyond \
                 {LLAMA_CPP_MAX_CPU}, which llama.cpp's masks do not reach): llama.cpp's \
                 OpenMP build may then run it on the pinned phase's CPUs"
            ));
            return None;
        }
        Some(cpu_mask_hex(&cpus))
    }

    /// llama.cpp's own knobs of a profile measured on llama.cpp: `--no-repack` (llama.cpp
    /// 0c1e57098's `-nr, --no-repack` of `common/arg.cpp`) when decode's pick runs without
    /// repacking or repacking crashed, `--poll` and `--poll-batch` when a phase's pick polls
    /// at another level than the default (`--poll-batch`'s help says `<0|1>`, but its
    /// handler in `common/arg.cpp` stores the integer as the batch polling level, as
    /// `--poll` does); a note when prefill's repacking pick differs.
    fn llama_knobs(&self, options: &mut Vec<LlamaOption>) -> Option<String> {
        let record = self.profile.runtime.as_ref()?;
        let no_repack = !record.decode.repack || record.repack_crashed();
        if no_repack {
            options.push(LlamaOption::new("no-repack", "--no-repack", ""));
        }
        if let Some(poll) = record.decode.poll {
            options.push(LlamaOption::new("poll", "--poll", poll));
        }
        if let Some(poll) = record.prefill.poll {
            options.push(LlamaOption::new("poll-batch", "--poll-batch", poll));
        }
        (record.prefill.repack == no_repack).then(|| {
            format!(
                "repacking is one setting for both phases: decode's pick ({}) is written; \
                 prefill measured faster {}",
                if no_repack {
                    "--no-repack"
                } else {
                    "repacking"
                },
                if no_repack {
                    "with repacking"
                } else {
                    "without repacking"
                }
            )
        })
    }

    fn llama_cpp(&self) -> Result<(String, Vec<String>), EmitError> {
        let (options, notes) = self.llama_options(Target::LlamaCpp)?;
        let flags: Vec<String> = options
            .iter()
            .map(|o| match o.value.as_str() {
                "" => o.flag.to_string(),
                value => format!("{} {value}", o.flag),
            })
            .collect();
        Ok((format!("{}\n", flags.join(" ")), notes))
    }

    fn llama_server_preset(&self) -> Result<(String, Vec<String>), EmitError> {
        let (options, notes) = self.llama_options(Target::LlamaServerPreset)?;
        let mut s = self.provenance(";");
        s.push_str("[*]\n");
        for o in &options {
            let value = if o.value.is_empty() { "true" } else { &o.value };
            let _ = writeln!(s, "{} = {value}", o.name);
        }
        Ok((s, notes))
    }

    fn ollama(&self) -> (String, Vec<String>) {
        let d = self.decode();
        let mut s = self.provenance("#");
        // `ollama create` refuses a Modelfile without `FROM`, which only the user can name.
        s.push_str(OLLAMA_FROM);
        let _ = writeln!(s, "PARAMETER num_thread {}", d.threads);
        let mut notes: Vec<String> = self.one_setting_note("ollama").into_iter().collect();
        if let Some(cpus) = pinned(d) {
            // Not Modelfile text: ollama's parser stops at a `[Service]` line.
            let mut lines = vec![
                "[Service]".to_string(),
                format!("AllowedCPUs={}", cpu_list(cpus)),
            ];
            lines.extend(node(d).map(|n| format!("AllowedMemoryNodes={n}")));
            let lines: Vec<String> = lines.iter().map(|l| format!("`{l}`")).collect();
            notes.push(format!(
                "ollama sets no CPU affinity of its own: a systemd drop-in {OLLAMA_DROP_IN} \
                 of the lines {} keeps decode on the CPUs it was tuned on; it confines the \
                 whole ollama service (every model), needs cgroup v2, and applies with \
                 `systemctl daemon-reload && systemctl restart ollama`",
                lines.join(", ")
            ));
            notes.extend(self.hybrid_note(&[d]));
        }
        (s, notes)
    }

    fn llama_cpp_python(&self) -> (String, Vec<String>) {
        let (d, p) = (self.decode(), self.prefill());
        let numa = match (node(d), node(p)) {
            (Some(a), Some(b)) => (a == b).then_some(a),
            _ => None,
        };
        // Under the `taskset` of decode's CPUs that the note names, every thread shares
        // those CPUs: more batch threads than CPUs would take turns at ggml's barriers.
        let taskset_cpus = pinned(d).filter(|_| numa.is_none()).map(<[usize]>::len);
        let batch = taskset_cpus.map_or(p.threads, |cpus| p.threads.min(cpus));
        let mut s = self.provenance("#");
        let _ = writeln!(s, "N_THREADS={}", d.threads);
        let _ = writeln!(s, "N_THREADS_BATCH={batch}");
        let mut notes = Vec::new();
        match numa {
            Some(a) => {
                s.push_str("NUMA=3\n");
                notes.push(format!(
                    "NUMA=3 is ggml's numactl strategy: start the server under \
                     `numactl --cpunodebind={a} --membind={a}`; its threads then share node \
                     {a}'s CPUs, not one CPU each as tuned"
                ));
            }
            None => {
                notes.extend(self.taskset_note("llama-cpp-python"));
                // Only a taskset of decode's CPUs leaves the other cores free.
                notes.extend(self.hybrid_note(&[d]));
            }
        }
        if batch < p.threads {
            notes.push(format!(
                "N_THREADS_BATCH is {batch}, not the prefill pick's {}: under that taskset \
                 the server has decode's {batch} CPUs, and more threads than CPUs would \
                 share them",
                p.threads
            ));
        }
        if let Some(record) = &self.profile.runtime
            && (!record.decode.repack || record.repack_crashed())
        {
            notes.push(
                "the llama.cpp-measured pick runs without weight repacking, which \
                 llama-cpp-python 0.3.36's server has no setting for (llama.cpp's --no-repack)"
                    .to_string(),
            );
        }
        (s, notes)
    }

    fn candle(&self) -> (String, Vec<String>) {
        let d = self.decode();
        let mut s = self.provenance("#");
        let _ = writeln!(s, "CANDLE_NUM_THREADS={}", d.threads);
        let _ = writeln!(s, "RAYON_NUM_THREADS={}", d.threads);
        let mut notes: Vec<String> = self.one_setting_note("candle").into_iter().collect();
        if pinned(d).is_some() {
            notes.extend(self.taskset_note("candle"));
            notes.extend(self.hybrid_note(&[d]));
        }
        (s, notes)
    }

    fn vllm(&self) -> (String, Vec<String>) {
        let d = self.decode();
        let mut s = self.provenance("#");
        let bind = pinned(d).map_or_else(|| "nobind".to_string(), cpu_list);
        let _ = writeln!(s, "VLLM_CPU_OMP_THREADS_BIND={bind}");
        let _ = writeln!(s, "OMP_NUM_THREADS={}", d.threads);
        let mut notes: Vec<String> = self.one_setting_note("vLLM").into_iter().collect();
        if let Some(cpus) = pinned(d) {
            notes.push(
                "vLLM binds one OpenMP thread to each listed CPU (the list sets the count, \
                 OMP_NUM_THREADS repeats it)"
                    .to_string(),
            );
            let nodes = self.nodes_of(cpus);
            if nodes.len() > 1 {
                let named: Vec<String> = nodes.iter().map(usize::to_string).collect();
                notes.push(format!(
                    "the list spans NUMA nodes {}, where vLLM's CPU guide asks for each list \
                     within one node",
                    named.join(" and ")
                ));
            }
            notes.extend(self.hybrid_note(&[d]));
        }
        (s, notes)
    }
}

#[cfg(test)]
mod tests;
