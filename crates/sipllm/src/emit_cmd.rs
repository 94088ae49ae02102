//! `sipllm emit`: the resolved profile written in a runtime's own form (the forms are
//! [`crate::runtimes`]'s), to stdout or to a file written whole.

use crate::output::emit;
use crate::output::{Guarded, check_output, write_whole};
use crate::progress::say;
use crate::render;
use crate::runtimes::{self, RuntimeSettings, Target};
use crate::stop::Stop;
use crate::tune_args::{GivenFlags, RuntimeArgs, TuneArgs};
use auto_tuner::{AutoTunerOptions, Tuned, find_llama_cpp_profile, tune_if_needed};
use device_profile::HardwareInfo;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Write the resolved profile in a runtime's own form.
///
/// Resolves the profile as plain `sipllm` does, with the same workload and store flags
/// (tuning it once when none is cached, unless --cached-only), then writes its decode and
/// prefill settings for the runtime --for names: llama.cpp (command-line flags),
/// llama-server-preset (an INI section for llama-server --models-preset: merge its keys into
/// the file's own global section, as a second global header drops the first one's keys), ollama
/// (Modelfile lines; when the profile pins, a note gives a systemd drop-in),
/// llama-cpp-python, candle or vllm (environment lines). What a runtime cannot express is a note on stderr. Which profile was
/// used is said on stderr too.
#[derive(Debug, Clone, clap::Args)]
pub struct EmitArgs {
    /// The runtime: llama.cpp, llama-server-preset, ollama, llama-cpp-python, candle, vllm.
    #[arg(
        long = "for",
        value_name = "TARGET",
        value_parser = target_arg,
        required_unless_present = "json"
    )]
    pub target: Option<Target>,
    /// Print one JSON object instead: source, path, hardware_id, workload, and targets ->
    /// name -> runtime (the version and options targeted), text, notes (or error). Every
    /// target, or only --for's when given; with --gguf the llama.cpp targets take the
    /// llama.cpp-measured profile of the model when one is cached, and their entries name it
    /// (source, path).
    #[arg(long)]
    pub json: bool,
    /// Write to FILE instead of stdout, whole or not at all (a temporary file beside it,
    /// renamed over it; a file replaced keeps its permission bits). Its directory must
    /// exist and take a new file; a symbolic link, FIFO or device at FILE is refused, never
    /// written through, and so are the --gguf, --model-config or --llama-bench file and a
    /// path in a profile store. All are checked before anything is measured.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Never measure: use a cached profile (the user's, then the system store's) if there is
    /// one, else the defaults [env: SIPLLM_CACHED_ONLY=1].
    #[arg(long, conflicts_with_all = ["recalibrate", "budget"])]
    pub cached_only: bool,
    /// The workload and tuning flags, as plain `sipllm` takes them.
    #[command(flatten)]
    pub tune: TuneArgs,
    /// --runtime llama.cpp: resolve (or tune) the llama.cpp-measured profile.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

fn target_arg(s: &str) -> Result<Target, String> {
    Target::parse(s)
}

/// Runs `sipllm emit` on `hw`: the text goes to stdout or `--output`, the notes and the
/// profile used to stderr.
pub fn run(args: &EmitArgs, hw: &HardwareInfo) -> ExitCode {
    let text = match emitted(args, hw) {
        Ok(text) => text,
        Err(stop) => return stop.report("sipllm"),
    };
    let Some(path) = output_file(args) else {
        return emit("sipllm", &text);
    };
    match write_whole(path, text.as_bytes()) {
        Ok(()) => {
            if !args.tune.quiet {
                say(format_args!(
                    "sipllm: wrote {}",
                    auto_tuner::shown_path(path)
                ));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            say(format_args!(
                "sipllm: error: cannot write {}: {e}",
                auto_tuner::shown_path(path)
            ));
            ExitCode::FAILURE
        }
    }
}

/// The file `--output` names; none for stdout (no flag, or `-`).
fn output_file(args: &EmitArgs) -> Option<&Path> {
    args.output.as_deref().filter(|p| *p != Path::new("-"))
}

/// The text to write: the target's settings, or the JSON object.
fn emitted(args: &EmitArgs, hw: &HardwareInfo) -> Result<String, Stop> {
    let mut opt = AutoTunerOptions::default();
    opt.stores.cached_only = args.cached_only;
    let opt = args
        .tune
        .apply("sipllm", opt)
        .and_then(AutoTunerOptions::with_process_env)?;
    let given = GivenFlags {
        cached_only: args.cached_only,
        ..GivenFlags::default()
    };
    if let Some(message) = args.tune.env_conflict(given, &opt) {
        return Err(Stop::Refused(message));
    }
    // A destination that would be refused is refused before anything is measured.
    if let Some(path) = output_file(args) {
        check_output(
            path,
            &Guarded::of(Some(&args.tune), Some(&args.runtime), &opt),
        )
        .map_err(|e| format!("cannot write {}: {e}", auto_tuner::shown_path(path)))?;
    }
    let mut opt = opt;
    // Without --runtime, --llama-bench names the build whose cached profile is preferred
    // (`llama_cpp_profile`), not one to measure.
    if args.runtime.runtime.is_some() {
        opt.question.runtime = args
            .runtime
            .llama_cpp(&args.tune, &opt)
            .map_err(Stop::Refused)?;
    }
    // An explicit thread count (SIPLLM_THREADS) wins over every cached profile, the
    // llama.cpp-measured ones too, as it does in `tune_if_needed`. A policy alone does not:
    // llama.cpp has none, so it would only have swapped the llama.cpp-measured threads and
    // knobs for our kernels'.
    let cached = match opt.overrides.threads {
        Some(_) => None,
        None => llama_cpp_profile(args, hw, &opt)?,
    };
    if cached.is_some() && opt.overrides.policy.is_some() {
        say(format_args!(
            "sipllm: warning: SIPLLM_POLICY has no effect on the llama.cpp targets: llama.cpp \
             has no schedule policy, and their settings are the llama.cpp-measured profile's"
        ));
    }
    // A llama.cpp target named: its profile is the one. Every target (`--json` alone): the
    // llama.cpp targets take it, the others our kernels' profile.
    let (tuned, llama) = match (cached, args.target) {
        (Some(cached), Some(_)) => (cached, None),
        (cached, _) => (tune_if_needed(hw, &opt)?, cached),
    };
    if !args.tune.quiet {
        say(format_args!("sipllm: emit: {}", render::used(&tuned)));
        if let Some(llama) = &llama {
            say(format_args!(
                "sipllm: emit: the llama.cpp targets: {}",
                render::used(llama)
            ));
        }
    }
    if args.json {
        let targets: Vec<Target> = args
            .target
            .map_or_else(|| Target::ALL.to_vec(), |t| vec![t]);
        return Ok(format!(
            "{}\n",
            to_json(&tuned, llama.as_ref(), hw, &targets)
        ));
    }
    let target = args
        .target
        .ok_or_else(|| Stop::Refused("--for TARGET is required without --json".to_string()))?;
    let settings = runtimes::render(target, &tuned.profile, hw).map_err(|e| e.to_string())?;
    for note in &settings.notes {
        say(format_args!("sipllm: note: {note}"));
    }
    Ok(settings.text)
}

/// For a llama.cpp target (llama.cpp, llama-server-preset, llama-cpp-python) of a --gguf
/// model without --runtime: the cached profile measured on llama.cpp for that model (of the
/// build of --llama-bench or `SIPLLM_LLAMA_BENCH` when one is named, else of any build),
/// which is preferred to our kernels' profile.
fn llama_cpp_profile(
    args: &EmitArgs,
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
) -> Result<Option<Tuned>, Stop> {
    // `--json` without `--for` lists the llama.cpp targets too.
    let llama_target = args.target.map_or(args.json, is_llama_cpp);
    if opt.question.runtime.is_some() {
        return Ok(None);
    }
    let model = match args.tune.gguf.as_deref() {
        Some(model) if llama_target => model,
        // A build named to pick a profile that is never looked for would have no effect.
        _ if args.runtime.llama_bench.is_some() => {
            return Err(Stop::Refused(
                "--llama-bench without --runtime picks the cached llama.cpp profile of \
                        its build, so it needs --gguf and a llama.cpp target (llama.cpp, \
                        llama-server-preset, llama-cpp-python, or --json, which lists them)"
                    .to_string(),
            ));
        }
        _ => return Ok(None),
    };
    let commit = match args.runtime.binary() {
        Some(binary) => Some(
            auto_tuner::llama_bench::LlamaBench::new(binary)
                .build_info()
                .map_err(|e| e.to_string())?
                .commit,
        ),
        None => None,
    };
    let cached =
        find_llama_cpp_profile(hw, opt, model, commit.as_deref()).map_err(|e| e.to_string())?;
    // Why a llama.cpp profile of this model was passed over (another build, say) is said,
    // whether another store's then serves or our kernels' profile (or the defaults) does.
    for why in cached.ignored {
        say(format_args!("sipllm: warning: {why}"));
    }
    Ok(cached.tuned)
}

/// The llama.cpp targets, which a llama.cpp-measured profile serves.
fn is_llama_cpp(target: Target) -> bool {
    matches!(
        target,
        Target::LlamaCpp | Target::LlamaServerPreset | Target::LlamaCppPython
    )
}

/// The JSON object of `sipllm emit --json`: the profile used, and each target's settings or
/// the error that says why it has none. A target's entry names its own profile (`source`,
/// `path`) where it is not the top level's: a llama.cpp target served by `llama`, the
/// llama.cpp-measured profile.
fn to_json(
    tuned: &Tuned,
    llama: Option<&Tuned>,
    hw: &HardwareInfo,
    targets: &[Target],
) -> serde_json::Value {
    let mut by_name = serde_json::Map::new();
    for &target in targets {
        let own = llama.filter(|_| is_llama_cpp(target));
        let profile = &own.unwrap_or(tuned).profile;
        let mut entry = match runtimes::render(target, profile, hw) {
            Ok(RuntimeSettings { text, notes, .. }) => serde_json::json!({
                "runtime": target.targets(),
                "text": text,
                "notes": notes,
            }),
            Err(e) => serde_json::json!({
                "runtime": target.targets(),
                "error": e.message,
            }),
        };
        if let Some(own) = own {
            entry["source"] = own.source.name().into();
            entry["path"] = own.source.path().map(|p| p.display().to_string()).into();
        }
        by_name.insert(target.name().to_string(), entry);
    }
    serde_json::json!({
        "source": tuned.source.name(),
        "path": tuned.source.path().map(|p| p.display().to_string()),
        "hardware_id": tuned.profile.hardware_id,
        "workload": tuned.profile.request.workload.name,
        "targets": by_name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use auto_tuner::Source;

    #[test]
    fn json_of_every_target_takes_the_llama_cpp_profile_for_the_llama_cpp_targets_only() {
        let hw = HardwareInfo {
            logical_cores: 8,
            physical_cores: 8,
            effective_cpus: 8,
            allowed_cpus: (0..8).collect(),
            ..HardwareInfo::default()
        };
        let opt = AutoTunerOptions::default();
        let ours = Tuned {
            profile: auto_tuner::default_profile(&hw, &opt),
            source: Source::Defaults,
            warnings: Vec::new(),
        };
        let mut llama = ours.clone();
        llama.profile.decode.threads = 3;
        llama.profile.prefill.threads = 5;
        llama.source = Source::Cache("/store/x_xllamacpp-1.json".into());
        let json = to_json(&ours, Some(&llama), &hw, &Target::ALL);
        let targets = &json["targets"];
        assert_eq!(json["source"], "defaults");
        for name in ["llama.cpp", "llama-server-preset", "llama-cpp-python"] {
            assert_eq!(targets[name]["source"], "cache", "{name}");
            assert_eq!(targets[name]["path"], "/store/x_xllamacpp-1.json", "{name}");
        }
        assert!(
            targets["llama.cpp"]["text"]
                .as_str()
                .unwrap()
                .starts_with("-t 3 -tb 5")
        );
        for name in ["ollama", "candle", "vllm"] {
            assert!(targets[name].get("source").is_none(), "{name}");
        }
        // Without one, every target takes the top level's profile.
        let json = to_json(&ours, None, &hw, &Target::ALL);
        assert!(json["targets"]["llama.cpp"].get("source").is_none());
    }
}
