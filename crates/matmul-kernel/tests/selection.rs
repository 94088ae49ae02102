//! Process-level tests: `SIPLLM_KERNEL` is read from the environment of a fresh process, so
//! each case runs this test binary again as a child with the variable set.

use matmul_kernel::{Isa, KERNEL_ENV};
use std::process::Command;

/// Marks the child run; the parent sets it, a normal run leaves it unset.
const CHILD_ENV: &str = "MATMUL_KERNEL_SELECTION_CHILD";

/// In a child: prints what the kernel selection says, for the parent to check.
#[test]
fn child_reports_selection() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let tried = match matmul_kernel::try_selected() {
        Ok(isa) => format!("ok {isa}"),
        Err(e) => format!("err {e}"),
    };
    let selected = matmul_kernel::selected();
    let mut y = [0.0f32; 1];
    matmul_kernel::gemv(&[2.0, 3.0], &[4.0, 5.0], &mut y).expect("gemv");
    println!("try_selected: {tried}");
    println!("selected: {selected}");
    println!("gemv: {}", y[0]);
}

/// Runs the child with `SIPLLM_KERNEL` set to `value` (unset for `None`); returns its stdout
/// and stderr.
fn run_child(value: Option<&str>) -> (String, String) {
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = Command::new(exe);
    cmd.args([
        "--exact",
        "child_reports_selection",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ENV, "1");
    match value {
        Some(v) => cmd.env(KERNEL_ENV, v),
        None => cmd.env_remove(KERNEL_ENV),
    };
    let out = cmd.output().expect("run child");
    assert!(out.status.success(), "child failed: {out:?}");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn unset_selects_the_best_kernel() {
    let (stdout, stderr) = run_child(None);
    let best = Isa::best_available();
    assert!(
        stdout.contains(&format!("try_selected: ok {best}\n")),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("selected: {best}\n")), "{stdout}");
    assert!(stdout.contains("gemv: 23\n"), "{stdout}");
    assert!(!stderr.contains("warning"), "{stderr}");
}

#[test]
fn forced_kernel_is_honoured() {
    for isa in Isa::ALL {
        let (stdout, stderr) = run_child(Some(isa.name()));
        if isa.is_available() {
            assert!(
                stdout.contains(&format!("try_selected: ok {isa}\n")),
                "{stdout}"
            );
            assert!(stdout.contains(&format!("selected: {isa}\n")), "{stdout}");
            assert!(stdout.contains("gemv: 23\n"), "{stdout}");
        } else {
            // Unavailable: a clear error from try_selected, a warning and a fallback from selected.
            let best = Isa::best_available();
            assert!(
                stdout.contains(&format!(
                    "try_selected: err kernel {isa} is not available on this cpu\n"
                )),
                "{stdout}"
            );
            assert!(stdout.contains(&format!("selected: {best}\n")), "{stdout}");
            assert!(
                stderr.contains(&format!("warning: {KERNEL_ENV}")),
                "{stderr}"
            );
        }
    }
}

#[test]
fn unknown_kernel_is_an_error_and_falls_back() {
    let (stdout, stderr) = run_child(Some("neon9"));
    assert!(
        stdout.contains("try_selected: err unknown kernel \"neon9\""),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("selected: {}\n", Isa::best_available())),
        "{stdout}"
    );
    assert!(
        stderr.contains("warning: SIPLLM_KERNEL: unknown kernel \"neon9\""),
        "{stderr}"
    );
}
