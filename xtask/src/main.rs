//! `cargo xtask`: the project's tasks. Every measuring task builds and runs an optimized
//! binary: in release, or, for `bench-regress`, in the bench profile (which inherits
//! release) as `cargo bench --workspace --no-run` builds it.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::SystemTime;

/// Project tasks (`cargo xtask <task>`).
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask", about)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Run the auto-tuner's micro-benchmark (release build) and show every configuration.
    BenchMicro {
        /// Arguments passed to the `bench-micro` binary (see `cargo xtask bench-micro -- --help`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The side-by-side report of the pool and kernels against their peers (release build).
    Perf {
        /// Also compare against OpenBLAS (links Debian's libopenblas: `apt-get install
        /// libopenblas-dev`).
        #[arg(long)]
        openblas: bool,
        /// Arguments passed to the `perf` binary, e.g. `--json`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Check the benchmarks that matter for regressions (see docs/benchmarking.md).
    ///
    /// Without a baseline flag: ratios of ours to a reference measured in the same run,
    /// checked against benches/floors.json (exit 1 with a table when one is below its floor);
    /// this is what CI runs. With --save-baseline or --baseline: the criterion benchmarks of
    /// the pool, f32 GEMV and GEMM and cached-tune checks, with their references, saved or
    /// compared as criterion's named baselines (absolute times, for one quiet machine), then
    /// a table of criterion's change estimates.
    BenchRegress {
        /// Fewer rounds (the ratio check) or criterion's `--quick` (the baselines).
        #[arg(long)]
        quick: bool,
        /// Run the criterion benches and save their results as baseline NAME (letters,
        /// digits, `_`, `-` and `.`; not `new`, `change` or `report`, criterion's own).
        #[arg(long, value_name = "NAME", conflicts_with = "baseline", value_parser = baseline_name)]
        save_baseline: Option<String>,
        /// Run the criterion benches and compare them with baseline NAME (saved earlier).
        #[arg(long, value_name = "NAME", value_parser = baseline_name)]
        baseline: Option<String>,
    },
}

/// The criterion benchmarks `bench-regress` runs with a baseline: the same ones the ratio
/// check measures (2 threads), with their references, so that a change of the machine shows
/// as a change of the reference too.
const CRITERION_FILTER: &str = "^(dispatch/2/(ours|std_scope)$|gemv_4096/2t/|gemm_m32_4096/2t/(ours_|faer)|get_hardware_info$|cached_detect_and_load$)";

/// A baseline name criterion can take as a folder of its own: criterion writes
/// `<target>/criterion/<benchmark>/<NAME>/`, so a name with a `/` or `..` would write
/// outside it, and `new`, `change` and `report` are criterion's own folders.
fn baseline_name(name: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_-.".contains(c);
    if name.is_empty() || !name.chars().all(allowed) || name.chars().all(|c| c == '.') {
        return Err("a baseline name is letters, digits, `_`, `-` and `.` (not only dots)".into());
    }
    if ["new", "change", "report"].contains(&name) {
        return Err(format!(
            "`{name}` is a folder criterion writes itself; choose another name"
        ));
    }
    Ok(name.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let run = match cli.task {
        Task::BenchMicro { args } => ReleaseRun {
            package: "sipllm",
            bin: "bench-micro",
            args,
            features: Vec::new(),
        },
        Task::Perf { openblas, args } => perf_run(openblas, args),
        Task::BenchRegress {
            quick,
            save_baseline,
            baseline,
        } => return bench_regress(quick, save_baseline, baseline),
    };
    run.run()
}

/// `perf` with its arguments; `--openblas` is this command's wherever it stands: after
/// perf's first argument clap takes everything as perf's (`perf --json --openblas`), and
/// perf has no such flag.
fn perf_run(openblas: bool, mut args: Vec<String>) -> ReleaseRun {
    let before = args.len();
    args.retain(|a| a != "--openblas");
    let openblas = openblas || args.len() < before;
    ReleaseRun {
        package: "benches",
        bin: "perf",
        args,
        features: if openblas {
            vec!["openblas".to_string()]
        } else {
            Vec::new()
        },
    }
}

/// `bench-regress`: criterion with a baseline flag, else the ratio check against
/// `benches/floors.json`.
fn bench_regress(quick: bool, save_baseline: Option<String>, baseline: Option<String>) -> ExitCode {
    match (save_baseline, baseline) {
        (Some(name), _) => return run_criterion_baseline("--save-baseline", &name, quick),
        (None, Some(name)) => return run_criterion_baseline("--baseline", &name, quick),
        (None, None) => {}
    }
    let regress = match bench_executable("regress") {
        Ok(regress) => regress,
        Err(code) => return code,
    };
    let mut cmd = Command::new(regress);
    // candle sizes its quantized kernels' pool once per process from this variable; the
    // quantized GEMM checks run ours on as many threads, and their floors were measured on
    // one (the regress crate's GEMM_THREADS): a value of the user's would measure another
    // check against the same floors.
    if let Some(theirs) = std::env::var_os("CANDLE_NUM_THREADS")
        && theirs != "1"
    {
        eprintln!(
            "xtask: CANDLE_NUM_THREADS={} is set to 1 for the check: its floors were measured \
             on one thread",
            theirs.to_string_lossy()
        );
    }
    cmd.env("CANDLE_NUM_THREADS", "1");
    cmd.arg("--floors")
        .arg(workspace_root().join("benches").join("floors.json"));
    if quick {
        cmd.arg("--quick");
    }
    exit_code(cmd.status())
}

/// Builds what `cargo bench --workspace --no-run` builds (CI's step before `bench-regress`,
/// so nothing is left to build there) and returns the path of the plain executable of the
/// binary target `bin`. `cargo run --release --bin` would build another variant: a bench
/// build unifies the dev-dependencies' features, which changes half the dependency tree (faer
/// and gemm included, minutes on two cores).
fn bench_executable(bin: &str) -> Result<PathBuf, ExitCode> {
    eprintln!(
        "xtask: building the benches as `cargo bench --workspace --no-run` does (the first \
         build takes minutes), then running {bin}"
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(workspace_root())
        .args([
            "bench",
            "--workspace",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stderr(std::process::Stdio::inherit())
        .output();
    let output = match output {
        Ok(output) if output.status.success() => output,
        other => return Err(exit_code(other.map(|o| o.status))),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    executable_in(&stdout, bin).ok_or_else(|| {
        eprintln!("xtask: cargo bench --workspace --no-run built no binary {bin}");
        ExitCode::FAILURE
    })
}

/// The plain (not test-harness) executable of binary target `bin` among cargo's JSON
/// messages (one per line).
fn executable_in(messages: &str, bin: &str) -> Option<PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|m| {
            m["reason"] == "compiler-artifact"
                && m["target"]["name"] == bin
                && m["target"]["kind"]
                    .as_array()
                    .is_some_and(|kinds| kinds.iter().any(|k| k == "bin"))
                && m["profile"]["test"] == false
        })
        .and_then(|m| m["executable"].as_str().map(PathBuf::from))
}

/// Runs the criterion benches of [`CRITERION_FILTER`] with `flag name` (`--save-baseline`
/// or `--baseline`), then prints the change estimates criterion wrote in this run.
fn run_criterion_baseline(flag: &str, name: &str, quick: bool) -> ExitCode {
    eprintln!("xtask: building the criterion benches (bench profile), then running them");
    let started = SystemTime::now();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    // --workspace, as CI's `cargo bench --workspace --no-run`: the same dependency features,
    // so the same build (see `bench_executable`).
    cmd.current_dir(workspace_root())
        .args(["bench", "--workspace"]);
    for bench in ["dispatch", "detect", "tune", "matmul"] {
        cmd.args(["--bench", bench]);
    }
    cmd.args(["--", CRITERION_FILTER, flag, name]);
    if quick {
        cmd.arg("--quick");
    }
    // Criterion's folder named to it, so that the estimates are read where it wrote them
    // (its own guess of the target folder can differ from ours).
    let criterion_dir = match std::env::var_os("CRITERION_HOME") {
        Some(home) if !home.is_empty() => workspace_root().join(home),
        _ => target_dir().join("criterion"),
    };
    cmd.env("CRITERION_HOME", &criterion_dir);
    let code = exit_code(cmd.status());
    if code != ExitCode::SUCCESS {
        return code;
    }
    let changes = changes_since(&criterion_dir, started);
    if changes.is_empty() {
        println!(
            "\nbench-regress: no change estimates: nothing was compared{}",
            if flag == "--save-baseline" {
                format!(" (a first --save-baseline {name} has nothing earlier to compare with)")
            } else {
                String::new()
            }
        );
    } else {
        println!("\nbench-regress: criterion's change estimates against baseline {name}");
        println!(
            "{:<40} {:>10} {:>22}",
            "benchmark", "mean", "95% confidence"
        );
        for change in &changes {
            println!(
                "{:<40} {:>+9.1}% [{:>+8.1}%, {:>+8.1}%]",
                change.id,
                change.mean * 100.0,
                change.lower * 100.0,
                change.upper * 100.0
            );
        }
        println!(
            "(time change; criterion's verdict for each is printed above; HTML reports: {})",
            criterion_dir.join("report").join("index.html").display()
        );
    }
    ExitCode::SUCCESS
}

/// One change estimate criterion wrote: the relative change of the mean time.
#[derive(Debug, PartialEq)]
struct Change {
    id: String,
    mean: f64,
    lower: f64,
    upper: f64,
}

/// The change estimates under `criterion_dir` written since `since`, sorted by benchmark id:
/// every `<id>/change/estimates.json` with its `<id>/new/benchmark.json`.
fn changes_since(criterion_dir: &Path, since: SystemTime) -> Vec<Change> {
    let mut changes = Vec::new();
    let mut dirs = vec![criterion_dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            }
        }
        let estimates = dir.join("change").join("estimates.json");
        let fresh = std::fs::metadata(&estimates)
            .and_then(|m| m.modified())
            .is_ok_and(|modified| modified >= since);
        if fresh && let Some(change) = read_change(&dir) {
            changes.push(change);
        }
    }
    changes.sort_by(|a, b| a.id.cmp(&b.id));
    changes
}

/// The change estimate of the benchmark whose criterion directory is `dir`.
fn read_change(dir: &Path) -> Option<Change> {
    let read = |path: PathBuf| -> Option<serde_json::Value> {
        serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
    };
    let estimates = read(dir.join("change").join("estimates.json"))?;
    let benchmark = read(dir.join("new").join("benchmark.json"))?;
    let mean = &estimates["mean"];
    Some(Change {
        id: benchmark["full_id"].as_str()?.to_string(),
        mean: mean["point_estimate"].as_f64()?,
        lower: mean["confidence_interval"]["lower_bound"].as_f64()?,
        upper: mean["confidence_interval"]["upper_bound"].as_f64()?,
    })
}

/// A binary built in release and run.
struct ReleaseRun {
    package: &'static str,
    bin: &'static str,
    args: Vec<String>,
    features: Vec<String>,
}

impl ReleaseRun {
    /// Builds the binary and runs it with its arguments, passing its exit status on. Cargo's
    /// own progress stays visible: the first release build takes a minute or more.
    fn run(&self) -> ExitCode {
        let ReleaseRun { package, bin, .. } = self;
        eprintln!(
            "xtask: building {bin} in release (the first build takes a minute or more), then \
             running it"
        );
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        // The workspace by its manifest, not by a change of folder: the binary runs in the
        // user's folder, where the relative paths it is given (`--gguf`, `--tables-from`,
        // `LLAMA_CPP_BIN`) are.
        cmd.arg("run")
            .arg("--manifest-path")
            .arg(workspace_root().join("Cargo.toml"))
            .args(["--release", "--package", package, "--bin", bin]);
        for f in &self.features {
            cmd.args(["--features", f]);
        }
        cmd.arg("--").args(&self.args);
        exit_code(cmd.status())
    }
}

/// The exit status of a child, passed on; a child killed by a signal is said and exits as a
/// shell reports it (128 + the signal), not as a failed check.
fn exit_code(status: std::io::Result<std::process::ExitStatus>) -> ExitCode {
    use std::os::unix::process::ExitStatusExt as _;
    match status {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => ExitCode::from(code.clamp(1, 255) as u8),
            (None, Some(signal)) => {
                eprintln!(
                    "xtask: the run was killed by signal {signal}{}",
                    if signal == 9 {
                        " (SIGKILL: out of memory?)"
                    } else {
                        ""
                    }
                );
                ExitCode::from((128 + signal).clamp(1, 255) as u8)
            }
            (None, None) => ExitCode::FAILURE,
        },
        Err(e) => {
            eprintln!("xtask: cannot run cargo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Cargo's target directory: `$CARGO_TARGET_DIR` (relative to the workspace root) or
/// `target/` in the workspace root.
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => workspace_root().join(dir),
        _ => workspace_root().join("target"),
    }
}

fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(PathBuf::from)
        .unwrap_or(manifest_dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// A criterion directory as criterion 0.5 writes it: `<id>/new/benchmark.json` and, once
    /// compared, `<id>/change/estimates.json` (relative changes).
    fn bench_dir(root: &Path, dir: &str, full_id: &str, mean: Option<(f64, f64, f64)>) {
        let dir = root.join(dir);
        write(
            &dir.join("new").join("benchmark.json"),
            &format!(r#"{{"group_id": "g", "full_id": "{full_id}"}}"#),
        );
        if let Some((lower, point, upper)) = mean {
            let estimate = format!(
                r#"{{"confidence_interval": {{"confidence_level": 0.95, "lower_bound": {lower}, "upper_bound": {upper}}}, "point_estimate": {point}, "standard_error": 0.01}}"#
            );
            write(
                &dir.join("change").join("estimates.json"),
                &format!(r#"{{"mean": {estimate}, "median": {estimate}}}"#),
            );
        }
    }

    #[test]
    fn change_estimates_are_read_per_benchmark_and_sorted_by_id() {
        let root = tempfile::tempdir().unwrap();
        let since = SystemTime::now() - Duration::from_secs(60);
        bench_dir(
            root.path(),
            "gemv_4096_2t/stream_read",
            "gemv_4096/2t/stream_read",
            Some((-0.01, 0.0, 0.01)),
        );
        bench_dir(
            root.path(),
            "dispatch_2/ours",
            "dispatch/2/ours",
            Some((0.9, 1.0, 1.1)),
        );
        bench_dir(root.path(), "hardware_id", "hardware_id", None);
        let changes = changes_since(root.path(), since);
        assert_eq!(
            changes,
            [
                Change {
                    id: "dispatch/2/ours".into(),
                    mean: 1.0,
                    lower: 0.9,
                    upper: 1.1
                },
                Change {
                    id: "gemv_4096/2t/stream_read".into(),
                    mean: 0.0,
                    lower: -0.01,
                    upper: 0.01
                },
            ]
        );
    }

    #[test]
    fn openblas_is_this_commands_flag_wherever_it_stands() {
        let Cli {
            task: Task::Perf { openblas, args },
        } = Cli::parse_from([
            "cargo xtask",
            "perf",
            "--json",
            "--openblas",
            "--only",
            "qmatmul",
        ])
        else {
            panic!("not perf");
        };
        let run = perf_run(openblas, args);
        assert_eq!(run.features, ["openblas"]);
        assert_eq!(run.args, ["--json", "--only", "qmatmul"]);
        let run = perf_run(false, vec!["--json".into()]);
        assert!(run.features.is_empty());
    }

    #[test]
    fn a_baseline_name_stays_a_folder_of_its_own() {
        for good in ["main", "before-fix", "v1.2_x"] {
            assert_eq!(baseline_name(good).as_deref(), Ok(good));
        }
        for bad in [
            "",
            ".",
            "..",
            "../../victim",
            "a/b",
            "new",
            "change",
            "report",
            "a b",
        ] {
            assert!(baseline_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_child_killed_by_a_signal_exits_as_a_shell_says_not_as_a_failed_check() {
        let killed = Command::new("sh").args(["-c", "kill -9 $$"]).status();
        assert!(exit_code(killed) == ExitCode::from(137));
        let failed = Command::new("sh").args(["-c", "exit 3"]).status();
        assert!(exit_code(failed) == ExitCode::from(3));
    }

    #[test]
    fn the_plain_executable_is_found_among_cargos_messages() {
        let messages = [
            r#"{"reason":"compiler-artifact","target":{"kind":["bin"],"name":"regress"},"profile":{"test":true},"executable":"/t/release/deps/regress-0123"}"#,
            r#"{"reason":"compiler-artifact","target":{"kind":["lib"],"name":"regress"},"profile":{"test":false},"executable":null}"#,
            r#"{"reason":"compiler-artifact","target":{"kind":["bin"],"name":"perf"},"profile":{"test":false},"executable":"/t/release/perf"}"#,
            "not json",
            r#"{"reason":"compiler-artifact","target":{"kind":["bin"],"name":"regress"},"profile":{"test":false},"executable":"/t/release/regress"}"#,
            r#"{"reason":"build-finished","success":true}"#,
        ]
        .join("\n");
        assert_eq!(
            executable_in(&messages, "regress"),
            Some(PathBuf::from("/t/release/regress"))
        );
        assert_eq!(executable_in(&messages, "absent"), None);
    }

    #[test]
    fn change_estimates_from_an_earlier_run_are_left_out() {
        let root = tempfile::tempdir().unwrap();
        bench_dir(
            root.path(),
            "dispatch_2/ours",
            "dispatch/2/ours",
            Some((0.9, 1.0, 1.1)),
        );
        let later = SystemTime::now() + Duration::from_secs(60);
        assert_eq!(changes_since(root.path(), later), []);
        assert_eq!(changes_since(&root.path().join("missing"), later), []);
    }
}
