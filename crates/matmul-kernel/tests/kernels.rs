//! The kernels' integration tests, on a harness of their own (`libtest-mimic`, `harness =
//! false`): every ISA against an f64 reference and the portable kernel, bitwise determinism
//! across policies and thread counts, and the process-level kernel selection.
//!
//! Each per-ISA test is one trial per ISA, named `<isa>::<test>`. A kernel this CPU lacks is
//! reported as **ignored**, with the reason, in the test summary; when `SIPLLM_ENSURE_ISA`
//! requires it (a comma list of names, or `auto`: the best ISA `/proc/cpuinfo` announces,
//! independent of the crate's own detection) the trial fails instead. `.ci/run` sets `auto`.
//! NEON is required in every aarch64 build (every aarch64 target has it), and shows as ignored
//! on x86-64.
//!
//! Environment: `SIPLLM_ENSURE_ISA`, the runner's own switch, is the only variable read from
//! the developer's environment. `SIPLLM_KERNEL` is never inherited: the per-ISA trials run on
//! explicit tokens, and the selection cases run this binary again as a child with the variable
//! set or removed.

// The f32 kernels (`gemv`, `gemm`, `stream_read`), in a file of their own.
#[path = "kernels/float.rs"]
mod float;
// The kernels on weight formats (`qgemv`, `qgemm`), in a file of their own.
#[path = "kernels/quant.rs"]
mod quant;

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use matmul_kernel::{Exec, Isa, KERNEL_ENV, Kernel, MatmulError, WeightFormat};
use quant::weight_matrix;
use std::process::Command;
use threadpool::{SchedulePolicy, ThreadPool};

/// The variable that makes a missing ISA a test failure instead of an ignored trial.
const ENSURE_ENV: &str = "SIPLLM_ENSURE_ISA";

/// Marks the child run of the selection cases; the parent sets it.
const CHILD_ENV: &str = "MATMUL_KERNEL_SELECTION_CHILD";

/// A per-ISA test: panics when the kernel is wrong.
type Check = fn(Kernel);

/// The per-ISA tests, run on every ISA this CPU has.
const ISA_CHECKS: [(&str, Check); 17] = [
    (
        "gemv_matches_reference_on_fixed_shapes",
        float::gemv_fixed_shapes,
    ),
    (
        "gemm_matches_reference_on_fixed_shapes",
        float::gemm_fixed_shapes,
    ),
    (
        "gemv_matches_reference_on_random_shapes",
        float::gemv_random_shapes,
    ),
    (
        "gemm_matches_reference_on_random_shapes",
        float::gemm_random_shapes,
    ),
    (
        "gemv_with_empty_input_writes_zeros",
        float::gemv_empty_input,
    ),
    (
        "a_row_does_not_depend_on_its_block",
        float::row_independent_of_block,
    ),
    (
        "parallel_results_are_bitwise_identical",
        float::parallel_bitwise,
    ),
    ("stream_read_sums_rows", float::stream_read_sums_rows),
    (
        "qgemv_matches_reference_for_every_format",
        quant::qgemv_every_format,
    ),
    (
        "qgemv_parallel_results_are_bitwise_identical",
        quant::qgemv_parallel_bitwise,
    ),
    ("qgemv_shape_errors", quant::qgemv_shape_errors),
    ("qgemv_with_no_inputs_writes_zeros", quant::qgemv_no_inputs),
    (
        "qgemm_matches_reference_and_its_rows_alone",
        quant::qgemm_rows_match_reference_alone,
    ),
    (
        "qgemm_parallel_results_are_bitwise_identical",
        quant::qgemm_parallel_bitwise,
    ),
    ("qgemm_shape_errors", quant::qgemm_shape_errors),
    (
        "qgemm_long_float_rows_are_bitwise_their_rows_alone",
        quant::qgemm_long_float_rows_bitwise,
    ),
    (
        "qgemv_non_finite_activations",
        quant::qgemv_non_finite_activations,
    ),
];

/// Per-ISA tests too slow for an unoptimized test binary: ignored in debug builds.
const RELEASE_CHECKS: [(&str, Check); 4] = [
    ("gemv_matches_reference_at_4096", float::gemv_4096),
    ("gemm_matches_reference_at_4096", float::gemm_4096),
    (
        "qgemv_matches_reference_at_4096_and_14336_inputs",
        quant::qgemv_model_rows,
    ),
    ("qgemm_matches_reference_at_4096", quant::qgemm_4096),
];

/// The quantized formats' checks run again on the AVX-512 token without VNNI (`true`: in
/// release builds only).
const NO_VNNI_CHECKS: [(&str, Check, bool); 8] = [
    (
        "qgemv_matches_reference_for_every_format",
        quant::qgemv_every_format,
        false,
    ),
    (
        "qgemv_parallel_results_are_bitwise_identical",
        quant::qgemv_parallel_bitwise,
        false,
    ),
    (
        "qgemm_matches_reference_and_its_rows_alone",
        quant::qgemm_rows_match_reference_alone,
        false,
    ),
    (
        "qgemv_non_finite_activations",
        quant::qgemv_non_finite_activations,
        false,
    ),
    (
        "qgemv_matches_reference_at_4096_and_14336_inputs",
        quant::qgemv_model_rows,
        true,
    ),
    (
        "qgemm_parallel_results_are_bitwise_identical",
        quant::qgemm_parallel_bitwise,
        false,
    ),
    ("qgemm_matches_reference_at_4096", quant::qgemm_4096, true),
    (
        "qgemv_with_no_inputs_writes_zeros",
        quant::qgemv_no_inputs,
        false,
    ),
];

/// Why the trials of q4_0's word permutes beside its byte permutes are ignored on a CPU
/// without VBMI.
const NO_VBMI: &str = "this CPU has no AVX512-VBMI beside VNNI: q4_0's word permutes, its \
     only ones here, run in the avx512 trials";

/// The quantized checks on NEON with `dotprod` turned off (`Kernel::without_dotprod`): the
/// integer bodies of an ARM CPU without it, run on this one. (name, check, release only)
const NO_DOTPROD_CHECKS: [(&str, Check, bool); 5] = [
    (
        "qgemv_matches_reference_for_every_format",
        quant::qgemv_every_format,
        false,
    ),
    (
        "qgemv_parallel_results_are_bitwise_identical",
        quant::qgemv_parallel_bitwise,
        false,
    ),
    (
        "qgemm_matches_reference_and_its_rows_alone",
        quant::qgemm_rows_match_reference_alone,
        false,
    ),
    (
        "qgemv_non_finite_activations",
        quant::qgemv_non_finite_activations,
        false,
    ),
    (
        "qgemv_matches_reference_at_4096_and_14336_inputs",
        quant::qgemv_model_rows,
        true,
    ),
];

/// Why a release-only trial is ignored in a debug build.
const RELEASE_ONLY: &str = "release builds only, too slow unoptimized: cargo test --release";

fn main() {
    if std::env::var_os(CHILD_ENV).is_some() {
        child_reports_selection();
        return;
    }
    let args = Arguments::from_args();
    // The x86 flags of /proc/cpuinfo describe this process's CPU only in an x86-64 build;
    // an aarch64 build under emulation reads its x86 host's.
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .filter(|_| cfg!(target_arch = "x86_64"));
    let cpu_best = match &cpuinfo {
        Some(text) => best_isa_from_cpuinfo(text),
        None => Kernel::best().isa(),
    };
    let ensured = ensured_isas(std::env::var(ENSURE_ENV).ok().as_deref(), cpu_best);

    let mut trials = Vec::new();
    for isa in Isa::ALL {
        let required =
            ensured.as_ref().is_ok_and(|list| list.contains(&isa)) || mandatory_on_this_target(isa);
        for (name, check) in ISA_CHECKS {
            trials.push(isa_trial(isa, name, check, required, false));
        }
        for (name, check) in RELEASE_CHECKS {
            trials.push(isa_trial(isa, name, check, required, true));
        }
    }
    // The AVX-512 integer bodies of a CPU without VNNI, on this one's token.
    let required = ensured
        .as_ref()
        .is_ok_and(|list| list.contains(&Isa::Avx512));
    for (name, check, release_only) in NO_VNNI_CHECKS {
        let trial = Trial::ignorable_test(format!("avx512_without_vnni::{name}"), move || {
            if release_only && cfg!(debug_assertions) {
                return Ok(Completion::ignored_with(RELEASE_ONLY));
            }
            let token = Isa::Avx512.token().map(Kernel::without_vnni);
            run_on_token(token, required, check)
        });
        trials.push(trial);
    }
    // The NEON integer bodies of a CPU without `dotprod`, on this one's token.
    let required = ensured.as_ref().is_ok_and(|list| list.contains(&Isa::Neon))
        || mandatory_on_this_target(Isa::Neon);
    for (name, check, release_only) in NO_DOTPROD_CHECKS {
        let trial = Trial::ignorable_test(format!("neon_without_dotprod::{name}"), move || {
            if release_only && cfg!(debug_assertions) {
                return Ok(Completion::ignored_with(RELEASE_ONLY));
            }
            let token = Isa::Neon.token().map(Kernel::without_dotprod);
            run_on_token(token, required, check)
        });
        trials.push(trial);
    }
    // On the detected token (with `dotprod` where the CPU has it) against the one without.
    trials.push(Trial::ignorable_test(
        "neon::sdot_and_smull_agree_bitwise",
        move || {
            let check: Check = quant::sdot_and_smull_agree_bitwise;
            run_on_token(Isa::Neon.token(), required, check)
        },
    ));
    // q4_0's AVX-512 GEMV with the word permutes of a CPU without VBMI, on this one's token,
    // and against the byte permutes it runs with VBMI.
    let required = ensured
        .as_ref()
        .is_ok_and(|list| list.contains(&Isa::Avx512));
    let with_vbmi = || match Isa::Avx512.token() {
        Ok(kernel) if !kernel.has_vbmi() => Err(NO_VBMI),
        token => Ok(token),
    };
    for (name, check, release_only) in NO_VNNI_CHECKS {
        if !name.starts_with("qgemv") {
            continue;
        }
        let trial = Trial::ignorable_test(format!("avx512_without_vbmi::{name}"), move || {
            if release_only && cfg!(debug_assertions) {
                return Ok(Completion::ignored_with(RELEASE_ONLY));
            }
            match with_vbmi() {
                Ok(token) => run_on_token(token.map(Kernel::without_vbmi), required, check),
                Err(why) => Ok(Completion::ignored_with(why)),
            }
        });
        trials.push(trial);
    }
    trials.push(Trial::ignorable_test(
        "avx512::vbmi_and_word_permutes_agree_bitwise",
        move || match with_vbmi() {
            Ok(token) => run_on_token(token, required, quant::vbmi_and_word_permutes_agree_bitwise),
            Err(why) => Ok(Completion::ignored_with(why)),
        },
    ));
    trials.push(Trial::test("ensured_isas_are_available", move || {
        for isa in ensured? {
            isa.token()
                .map_err(|e| format!("{ENSURE_ENV} requires the {isa} kernel: {e}"))?;
        }
        Ok(())
    }));
    trials.push(Trial::ignorable_test(
        "best_kernel_matches_cpu_flags",
        move || {
            let Some(text) = cpuinfo else {
                return Ok(Completion::ignored_with(
                    "no x86 /proc/cpuinfo of this process's CPU to compare with",
                ));
            };
            let from_flags = best_isa_from_cpuinfo(&text);
            let best = Kernel::best().isa();
            if best != from_flags {
                return Err(
                    format!("detected {best}, /proc/cpuinfo announces {from_flags}").into(),
                );
            }
            let vnni = vnni_from_cpuinfo(&text) && best == Isa::Avx512;
            if Kernel::best().has_vnni() != vnni || Kernel::best().without_vnni().has_vnni() {
                return Err(format!(
                    "VNNI detected {}, /proc/cpuinfo announces {vnni}",
                    Kernel::best().has_vnni()
                )
                .into());
            }
            // q4_0's byte permutes run where VBMI is announced beside VNNI, and only there.
            let vbmi = vnni && has_flags(&text, &["avx512vbmi"]);
            let best = Kernel::best();
            if best.has_vbmi() != vbmi
                || best.without_vbmi().has_vbmi()
                || best.without_vnni().has_vbmi()
            {
                return Err(format!(
                    "VBMI with VNNI detected {}, /proc/cpuinfo announces {vbmi}",
                    best.has_vbmi()
                )
                .into());
            }
            Ok(Completion::Completed)
        },
    ));
    trials.push(Trial::test("missing_isa_is_ignored_or_fails", || {
        missing_isa_is_ignored_or_fails();
        Ok(())
    }));
    trials.push(Trial::test("ensured_isas_parse_the_variable", || {
        ensured_isas_parse_the_variable();
        Ok(())
    }));
    trials.push(Trial::test("cpuinfo_flags_name_the_best_isa", || {
        cpuinfo_flags_name_the_best_isa();
        Ok(())
    }));
    for (name, case) in SELECTION_CASES {
        trials.push(Trial::test(format!("selection::{name}"), move || {
            case();
            Ok(())
        }));
    }
    libtest_mimic::run(&args, trials).exit();
}

/// Whether this build's target guarantees `isa`, so that its trials fail rather than show as
/// ignored when detection does not give it: NEON on aarch64 (part of every aarch64 target).
fn mandatory_on_this_target(isa: Isa) -> bool {
    isa == Isa::Neon && cfg!(target_arch = "aarch64")
}

/// One per-ISA trial: runs `check` on the ISA's token, ignored with the reason when this CPU
/// lacks the ISA (a failure when `required`), and in debug builds when `release_only`.
fn isa_trial(isa: Isa, name: &str, check: Check, required: bool, release_only: bool) -> Trial {
    Trial::ignorable_test(format!("{isa}::{name}"), move || {
        if release_only && cfg!(debug_assertions) {
            return Ok(Completion::ignored_with(RELEASE_ONLY));
        }
        run_on_token(isa.token(), required, check)
    })
}

/// Runs `check` on the token detection gave, or says why it cannot: an ignored outcome with
/// detection's reason, or a failure when the ISA is `required`.
fn run_on_token(
    token: Result<Kernel, MatmulError>,
    required: bool,
    check: Check,
) -> Result<Completion, Failed> {
    match token {
        Ok(kernel) => {
            check(kernel);
            Ok(Completion::Completed)
        }
        Err(e) if required => Err(Failed::from(format!(
            "{ENSURE_ENV} requires this kernel to be tested: {e}"
        ))),
        Err(e) => Ok(Completion::ignored_with(e)),
    }
}

/// The outcome of a trial whose ISA this CPU lacks, whatever this CPU has: ignored with the
/// reason, or failed when required; never passed, and the check never runs.
fn missing_isa_is_ignored_or_fails() {
    let missing = || Err(MatmulError::UnavailableIsa(Isa::Avx512));
    let never: Check = |kernel| panic!("ran the check on {kernel}");
    match run_on_token(missing(), false, never) {
        Ok(Completion::Ignored { reason }) => assert_eq!(
            reason.as_deref(),
            Some("kernel avx512 is not available on this cpu")
        ),
        Ok(Completion::Completed) => panic!("a missing ISA passed"),
        Err(e) => panic!("a missing ISA failed without being required: {e:?}"),
    }
    match run_on_token(missing(), true, never) {
        Err(e) => assert_eq!(
            e.message(),
            Some(
                "SIPLLM_ENSURE_ISA requires this kernel to be tested: \
                 kernel avx512 is not available on this cpu"
            )
        ),
        Ok(_) => panic!("a required missing ISA did not fail"),
    }
    let ran = run_on_token(Isa::Portable.token(), true, |kernel| {
        assert_eq!(kernel.isa(), Isa::Portable)
    });
    assert!(matches!(ran, Ok(Completion::Completed)));
}

// ---------------------------------------------------------------------------------------------
// SIPLLM_ENSURE_ISA and /proc/cpuinfo.

/// The best ISA a `/proc/cpuinfo` text announces (its first `flags` line); `Portable` when it
/// has none (another architecture).
fn best_isa_from_cpuinfo(cpuinfo: &str) -> Isa {
    let flags: Vec<&str> = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    if flags.contains(&"avx512f") {
        Isa::Avx512
    } else if flags.contains(&"avx2") && flags.contains(&"fma") {
        Isa::Avx2
    } else {
        Isa::Portable
    }
}

/// Whether a `/proc/cpuinfo` text announces what the AVX-512 kernel's VNNI bodies need.
fn vnni_from_cpuinfo(cpuinfo: &str) -> bool {
    has_flags(cpuinfo, &["avx512_vnni", "avx512vl", "avx512bw"])
}

/// Whether the first `flags` line of `cpuinfo` announces every one of `wanted`.
fn has_flags(cpuinfo: &str, wanted: &[&str]) -> bool {
    let flags = cpuinfo.lines().find(|l| l.starts_with("flags"));
    wanted
        .iter()
        .all(|w| flags.is_some_and(|l| l.split_whitespace().any(|f| f == *w)))
}

/// The ISAs a value of `SIPLLM_ENSURE_ISA` requires (`None`: unset); `auto` stands for
/// `cpu_best`.
fn ensured_isas(value: Option<&str>, cpu_best: Isa) -> Result<Vec<Isa>, String> {
    value
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            if s.eq_ignore_ascii_case("auto") {
                Ok(cpu_best)
            } else {
                s.parse().map_err(|e| format!("{ENSURE_ENV}={s:?}: {e}"))
            }
        })
        .collect()
}

fn ensured_isas_parse_the_variable() {
    assert_eq!(ensured_isas(None, Isa::Avx2), Ok(vec![]));
    assert_eq!(ensured_isas(Some(" "), Isa::Avx2), Ok(vec![]));
    assert_eq!(ensured_isas(Some("auto"), Isa::Avx2), Ok(vec![Isa::Avx2]));
    assert_eq!(
        ensured_isas(Some("AUTO, portable,avx512"), Isa::Avx2),
        Ok(vec![Isa::Avx2, Isa::Portable, Isa::Avx512])
    );
    let err = ensured_isas(Some("avx2,sse9"), Isa::Avx2).unwrap_err();
    assert!(err.contains("SIPLLM_ENSURE_ISA=\"sse9\""), "{err}");
}

fn cpuinfo_flags_name_the_best_isa() {
    let cpu = |flags: &str| format!("processor\t: 0\nflags\t\t: fpu sse2 {flags}\nbugs\t\t:\n");
    assert_eq!(best_isa_from_cpuinfo(&cpu("avx2 fma avx512f")), Isa::Avx512);
    assert_eq!(
        best_isa_from_cpuinfo(&cpu("avx2 fma avx512ifma")),
        Isa::Avx2
    );
    assert_eq!(best_isa_from_cpuinfo(&cpu("avx2")), Isa::Portable);
    assert_eq!(
        best_isa_from_cpuinfo("Features\t: fp asimd\n"),
        Isa::Portable
    );
}

// ---------------------------------------------------------------------------------------------
// Accuracy and determinism, per ISA.

/// Deterministic values in [-1, 1).
pub(crate) fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Each value's bit pattern, for bitwise comparisons.
pub(crate) fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

pub(crate) fn portable() -> Kernel {
    Isa::Portable
        .token()
        .expect("the portable kernel runs everywhere")
}

// ---------------------------------------------------------------------------------------------
// The process's selection from SIPLLM_KERNEL, in a child process.

const SELECTION_CASES: [(&str, fn()); 3] = [
    (
        "unset_selects_the_best_kernel",
        unset_selects_the_best_kernel,
    ),
    ("forced_kernel_is_honoured", forced_kernel_is_honoured),
    (
        "unknown_kernel_falls_back_with_a_warning",
        unknown_kernel_falls_back_with_a_warning,
    ),
];

/// In the child: prints what the kernel selection says, for the parent to check.
fn child_reports_selection() {
    let tried = match matmul_kernel::try_selected() {
        Ok(kernel) => format!("ok {kernel}"),
        Err(e) => format!("err {e}"),
    };
    let selection = matmul_kernel::selection();
    let mut y = [0.0f32; 1];
    Exec::new()
        .gemv(&[2.0, 3.0], &[4.0, 5.0], &mut y)
        .expect("gemv");
    println!("try_selected: {tried}");
    println!("selected: {}", matmul_kernel::selected());
    println!("kernel: {}", selection.kernel);
    match selection.warning() {
        Some(warning) => println!("warning: {warning}"),
        None => println!("warning: none"),
    }
    println!("gemv: {}", y[0]);
    // An `Exec` that names no kernel runs the selected one, with or without a pool:
    // bitwise the same result.
    let w = weight_matrix(WeightFormat::Q4K, 71, 5, 512);
    let x = values(72, 512);
    let mut expected = [f32::NAN; 5];
    Exec::new()
        .kernel(matmul_kernel::selected())
        .qgemv(&w, &x, &mut expected)
        .expect("qgemv on the selected kernel");
    let pool = ThreadPool::new(2);
    let mut serial = [f32::NAN; 5];
    let mut on_pool = [f32::NAN; 5];
    let mut by_policy = [f32::NAN; 5];
    Exec::new()
        .qgemv(&w, &x, &mut serial)
        .expect("qgemv on this thread");
    Exec::new()
        .pool(&pool)
        .qgemv(&w, &x, &mut on_pool)
        .expect("qgemv on the pool's policy");
    Exec::new()
        .pool(&pool)
        .policy(SchedulePolicy::Guided)
        .qgemv(&w, &x, &mut by_policy)
        .expect("qgemv on a given policy");
    for got in [serial, on_pool, by_policy] {
        assert_eq!(
            bits(&got),
            bits(&expected),
            "qgemv of an Exec without a kernel"
        );
    }
}

/// Runs the child with `SIPLLM_KERNEL` set to `value` (removed for `None`); returns its
/// stdout, after checking that it succeeded and printed nothing on stderr (the library never
/// prints, even for a refused kernel).
fn run_child(value: Option<&str>) -> String {
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = Command::new(exe);
    cmd.env(CHILD_ENV, "1");
    match value {
        Some(v) => cmd.env(KERNEL_ENV, v),
        None => cmd.env_remove(KERNEL_ENV),
    };
    let out = cmd.output().expect("run child");
    assert!(out.status.success(), "child failed: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.is_empty(), "the library printed: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn unset_selects_the_best_kernel() {
    let stdout = run_child(None);
    let best = Kernel::best();
    let expected = format!(
        "try_selected: ok {best}\nselected: {best}\nkernel: {best}\nwarning: none\ngemv: 23\n"
    );
    assert_eq!(stdout, expected);
}

fn forced_kernel_is_honoured() {
    let best = Kernel::best();
    for isa in Isa::ALL {
        let stdout = run_child(Some(isa.name()));
        let expected = match isa.token() {
            Ok(kernel) => format!(
                "try_selected: ok {kernel}\nselected: {kernel}\nkernel: {kernel}\n\
                 warning: none\ngemv: 23\n"
            ),
            // Unavailable: an error from try_selected, the best kernel and the reason from
            // the selection.
            Err(e) => format!(
                "try_selected: err {e}\nselected: {best}\nkernel: {best}\n\
                 warning: {KERNEL_ENV}: {e}; using {best}\ngemv: 23\n"
            ),
        };
        assert_eq!(stdout, expected, "{KERNEL_ENV}={isa}");
    }
}

fn unknown_kernel_falls_back_with_a_warning() {
    let stdout = run_child(Some("neon9"));
    let best = Kernel::best();
    let e = "unknown kernel \"neon9\" (expected portable, neon, avx2 or avx512)";
    let expected = format!(
        "try_selected: err {e}\nselected: {best}\nkernel: {best}\n\
         warning: {KERNEL_ENV}: {e}; using {best}\ngemv: 23\n"
    );
    assert_eq!(stdout, expected);
}
