//! The runner against the real llama.cpp: a tiny llama written in f16 by the test
//! (`real/tiny_model.rs`), quantized to `Q4_K_M` by `llama-quantize`, and measured by
//! `llama-bench` at 1 and 2 threads, decode and prefill, pinned and not.
//!
//! `LLAMA_CPP_BIN` names the folder with `llama-bench` and `llama-quantize` (`.ci/llama.cpp`
//! builds them and prints it). Unset, every trial shows as ignored with the reason, except
//! under CI (`CI` set to anything but `false` or `0`), where a missing llama.cpp is a failure.
//! Set to a folder that lacks them, it is a failure everywhere.
//!
//! On a harness of its own (`libtest-mimic`), since `#[ignore]` is fixed at compile time.

#[path = "real/tiny_model.rs"]
mod tiny_model;

#[path = "real/llama_cpp.rs"]
mod llama_cpp;

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use llama_bench::{CpuMask, Error, LlamaBench, ModelIdentity, Run};
use llama_cpp::{Binaries, Missing, TinyModels as Models};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tiny_model::TinyLlama;

/// How long one real run may take: the tiny model runs in milliseconds, but CI machines are
/// shared.
const TIMEOUT: Duration = Duration::from_secs(300);

/// What the trials share: the binaries (or why there are none) and the models, made on
/// first use in a directory removed when the tests end.
struct Shared {
    binaries: Result<Binaries, Missing>,
    dir: tempfile::TempDir,
    models: OnceLock<Result<Models, String>>,
}

impl Shared {
    fn models(&self, binaries: &Binaries) -> Result<&Models, Failed> {
        self.models
            .get_or_init(|| llama_cpp::make_tiny_models(self.dir.path(), binaries))
            .as_ref()
            .map_err(|e| Failed::from(e.as_str()))
    }
}

/// A trial: runs against the binaries and the models.
type Case = fn(&LlamaBench, &Binaries, &Models) -> Result<(), Failed>;

const CASES: [(&str, Case); 8] = [
    (
        "decode_at_one_and_two_threads",
        decode_at_one_and_two_threads,
    ),
    (
        "prefill_at_one_and_two_threads_without_repacking",
        prefill_without_repacking,
    ),
    (
        "prefill_with_repacking_measures_or_crashes",
        prefill_with_repacking,
    ),
    (
        "a_pinned_strict_run_without_polling_echoes_its_knobs",
        pinned_strict_without_polling,
    ),
    (
        "the_version_is_the_build_commit_of_a_run",
        version_is_the_build_commit,
    ),
    ("the_f16_model_runs_too", f16_model_runs),
    (
        "the_quantized_file_has_its_own_identity",
        identities_of_the_two_files,
    ),
    (
        "a_missing_model_fails_naming_the_command",
        missing_model_fails,
    ),
];

fn main() {
    let args = Arguments::from_args();
    let shared = Arc::new(Shared {
        binaries: llama_cpp::binaries(),
        dir: tempfile::tempdir().expect("a temporary directory for the models"),
        models: OnceLock::new(),
    });
    let trials = CASES
        .into_iter()
        .map(|(name, case)| {
            let shared = Arc::clone(&shared);
            Trial::ignorable_test(name, move || match &shared.binaries {
                Ok(binaries) => {
                    let models = shared.models(binaries)?;
                    let bench = LlamaBench::new(&binaries.bench).timeout(TIMEOUT);
                    case(&bench, binaries, models).map(|()| Completion::Completed)
                }
                Err(missing) => missing.outcome(),
            })
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    // The models' directory goes before the process exits.
    drop(shared);
    conclusion.exit();
}

/// Fails with `message` unless `condition` holds.
fn check(condition: bool, message: impl FnOnce() -> String) -> Result<(), Failed> {
    if condition {
        Ok(())
    } else {
        Err(message().into())
    }
}

fn decode_at_one_and_two_threads(
    bench: &LlamaBench,
    _: &Binaries,
    models: &Models,
) -> Result<(), Failed> {
    for threads in [1, 2] {
        let run = Run {
            repetitions: 2,
            ..Run::decode(threads, 8)
        };
        let result = bench.bench(&models.q4_k_m, &run)?;
        check(
            (result.n_threads, result.n_prompt, result.n_gen) == (threads, 0, 8),
            || format!("{result:?}"),
        )?;
        check(result.model_type.contains("Q4_K"), || {
            format!("model type {:?}", result.model_type)
        })?;
        check(!result.build_commit.is_empty(), || format!("{result:?}"))?;
        check(result.samples_ts.len() == 2 && result.avg_ts > 0.0, || {
            format!("{result:?}")
        })?;
    }
    Ok(())
}

fn prefill_without_repacking(
    bench: &LlamaBench,
    _: &Binaries,
    models: &Models,
) -> Result<(), Failed> {
    for threads in [1, 2] {
        let run = Run {
            repack: Some(false),
            repetitions: 2,
            ..Run::prefill(threads, 32)
        };
        let result = bench.bench(&models.q4_k_m, &run)?;
        check(
            (result.n_threads, result.n_prompt, result.n_gen) == (threads, 32, 0),
            || format!("{result:?}"),
        )?;
        check(result.repack == Some(false), || format!("{result:?}"))?;
    }
    Ok(())
}

/// Repacking into the CPU's extra buffer types runs on most CPUs, and segfaults on some
/// (llama.cpp 0c1e57098's AMX buffers on Xeons): either is an answer, any other error is not.
fn prefill_with_repacking(bench: &LlamaBench, _: &Binaries, models: &Models) -> Result<(), Failed> {
    let run = Run {
        repack: Some(true),
        repetitions: 2,
        ..Run::prefill(2, 32)
    };
    match bench.bench(&models.q4_k_m, &run) {
        Ok(result) => check(result.repack == Some(true), || format!("{result:?}")),
        Err(Error::Crashed { .. }) => Ok(()),
        Err(other) => Err(other.into()),
    }
}

fn pinned_strict_without_polling(
    bench: &LlamaBench,
    _: &Binaries,
    models: &Models,
) -> Result<(), Failed> {
    let mask = CpuMask::from_cpus([0]).map_err(Failed::from)?;
    let run = Run {
        cpu_mask: Some(mask.clone()),
        cpu_strict: Some(true),
        poll: Some(0),
        repetitions: 2,
        warmup: false,
        ..Run::decode(1, 4)
    };
    let result = bench.bench(&models.q4_k_m, &run)?;
    check(
        result.cpu_mask == Some(mask) && result.cpu_strict && result.poll == 0,
        || format!("{result:?}"),
    )
}

fn version_is_the_build_commit(
    bench: &LlamaBench,
    _: &Binaries,
    models: &Models,
) -> Result<(), Failed> {
    let info = bench.build_info()?;
    let run = Run {
        repetitions: 1,
        ..Run::decode(1, 2)
    };
    let result = bench.bench(&models.q4_k_m, &run)?;
    check(info.commit == result.build_commit, || {
        format!(
            "--version says {info:?}, a run says {}",
            result.build_commit
        )
    })?;
    check(info.build_number == Some(result.build_number), || {
        format!(
            "--version says {info:?}, a run says {}",
            result.build_number
        )
    })
}

fn f16_model_runs(bench: &LlamaBench, _: &Binaries, models: &Models) -> Result<(), Failed> {
    let run = Run {
        repetitions: 1,
        ..Run::decode(2, 4)
    };
    let result = bench.bench(&models.f16, &run)?;
    check(result.model_type.contains("F16"), || {
        format!("model type {:?}", result.model_type)
    })?;
    let model = TinyLlama::default();
    let expected_params = u64::from(model.n_vocab()) * u64::from(model.n_embd) * 2
        + u64::from(model.n_layers)
            * (4 * u64::from(model.n_embd).pow(2)
                + 3 * u64::from(model.n_embd) * u64::from(model.n_ff)
                + 2 * u64::from(model.n_embd))
        + u64::from(model.n_embd);
    check(result.model_n_params == expected_params, || {
        format!(
            "{} parameters, the writer wrote {expected_params}",
            result.model_n_params
        )
    })
}

fn identities_of_the_two_files(
    _: &LlamaBench,
    _: &Binaries,
    models: &Models,
) -> Result<(), Failed> {
    let f16 = ModelIdentity::of(&models.f16)?;
    let q4 = ModelIdentity::of(&models.q4_k_m)?;
    check(f16 != q4 && f16.header_hash != q4.header_hash, || {
        format!("{f16:?} and {q4:?}")
    })?;
    check(ModelIdentity::of(&models.q4_k_m)? == q4, || {
        "unstable".into()
    })?;
    let size = std::fs::metadata(&models.q4_k_m)
        .map_err(|e| e.to_string())?
        .len();
    check(q4.size == size, || format!("{q4:?} for {size} bytes"))
}

fn missing_model_fails(
    bench: &LlamaBench,
    binaries: &Binaries,
    models: &Models,
) -> Result<(), Failed> {
    let missing = models.f16.with_file_name("missing.gguf");
    match bench.bench(&missing, &Run::decode(1, 2)) {
        Err(err @ Error::Failed { code: 1, .. }) => {
            let text = err.to_string();
            check(
                text.contains(&binaries.bench.display().to_string())
                    && text.contains("missing.gguf")
                    && text.contains("failed to load model"),
                || text.clone(),
            )
        }
        other => Err(format!("{other:?}").into()),
    }
}
