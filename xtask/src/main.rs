//! `cargo xtask`: the project's tasks. Every measuring task builds and runs a release binary.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::{Command, ExitCode};

/// Project tasks (`cargo xtask <task>`).
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about)]
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (package, bin, args, features) = match cli.task {
        Task::BenchMicro { args } => ("sipllm", "bench-micro", args, Vec::new()),
        Task::Perf { openblas, args } => {
            let features = if openblas {
                vec!["openblas".to_string()]
            } else {
                Vec::new()
            };
            ("benches", "perf", args, features)
        }
    };
    run_release(package, bin, &args, &features)
}

/// Builds `bin` of `package` in release and runs it with `args`, passing its exit status on.
/// Cargo's own progress stays visible: the first release build takes a minute or more.
fn run_release(package: &str, bin: &str, args: &[String], features: &[String]) -> ExitCode {
    eprintln!(
        "xtask: building {bin} in release (the first build takes a minute or more), then running it"
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root()).args([
        "run",
        "--release",
        "--package",
        package,
        "--bin",
        bin,
    ]);
    for f in features {
        cmd.args(["--features", f]);
    }
    cmd.arg("--").args(args);
    match cmd.status() {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => ExitCode::from(status.code().unwrap_or(1).clamp(1, 255) as u8),
        Err(e) => {
            eprintln!("xtask: cannot run cargo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(PathBuf::from)
        .unwrap_or(manifest_dir)
}
