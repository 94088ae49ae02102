//! `perf`: the side-by-side report (`cargo xtask perf [--json]`), always run in release.
#![forbid(unsafe_code)]

use benches::qmatmul::{self, Plan, candle_process};
use clap::{Parser, ValueEnum};

/// Side-by-side figures of the pool and kernels against their peers, in one run.
#[derive(Debug, Parser)]
#[command(about)]
struct Cli {
    /// Print one JSON object on stdout and nothing else.
    #[arg(long)]
    json: bool,
    /// Measure only these sections (comma-separated); all by default.
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<SectionName>,
    /// The quantized section only shorter: fewer rounds, at 4096 x 4096 only (the pool's and
    /// the f32 kernels' sections run as without it).
    #[arg(long)]
    quick: bool,
    /// Measure nothing: print the Markdown tables (with the goals met) of the quantized
    /// section of FILE, the output of an earlier `--json` run.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["json", "only", "quick"])]
    tables_from: Option<std::path::PathBuf>,
}

/// The report's sections, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SectionName {
    /// The empty fork-join round trip (pool, rayon, std::thread::scope).
    Dispatch,
    /// The f32 GEMV/GEMM against faer and gemm.
    Matmul,
    /// The quantized GEMV/GEMM of every weight format against the read and candle.
    Qmatmul,
}

fn main() {
    // The report starts itself as candle's worker, one per thread count (see
    // `benches::qmatmul::candle_process`).
    if std::env::args().nth(1).as_deref() == Some(candle_process::WORKER_FLAG) {
        let served = candle_process::serve(std::io::stdin().lock(), std::io::stdout().lock());
        if let Err(err) = served {
            eprintln!("perf: candle worker: {err}");
            std::process::exit(1);
        }
        return;
    }
    let cli = Cli::parse();
    if let Some(path) = &cli.tables_from {
        match qmatmul::markdown_tables_from(path) {
            Ok(lines) => benches::print_or_exit("perf", &lines_of(&lines)),
            Err(err) => {
                eprintln!("perf: {err}");
                std::process::exit(1);
            }
        }
        return;
    }
    if cfg!(debug_assertions) {
        eprintln!("perf: refusing to measure a debug build; run `cargo xtask perf`");
        std::process::exit(2);
    }
    // A refused SIPLLM_KERNEL falls back to the best kernel: say so, the figures are that one's.
    if let Some(warning) = matmul_kernel::selection().warning() {
        eprintln!("perf: warning: {warning}");
    }
    let thread_counts = [1, 2, 8];
    let wanted = |name| cli.only.is_empty() || cli.only.contains(&name);
    // A llama.cpp asked for and not found fails now, not after minutes of other sections.
    if wanted(SectionName::Qmatmul)
        && let Err(err) = qmatmul::llamacpp::LlamaCpp::binary_from_env()
    {
        eprintln!("perf: {err} (unset it to measure without llama.cpp)");
        std::process::exit(2);
    }
    let plan = if cli.quick { Plan::QUICK } else { Plan::FULL };
    let mut sections = Vec::new();
    if wanted(SectionName::Dispatch) {
        sections.push(benches::dispatch::measure(&thread_counts));
    }
    if wanted(SectionName::Matmul) {
        sections.push(benches::matmul::measure(&thread_counts));
    }
    if wanted(SectionName::Qmatmul) {
        sections.push(qmatmul::measure(&thread_counts, plan));
    }
    if cli.json {
        let mut all = serde_json::Map::new();
        for s in &sections {
            all.extend(s.json.clone());
        }
        benches::print_or_exit("perf", &format!("{}\n", serde_json::Value::Object(all)));
    } else {
        let lines: Vec<String> = sections.iter().flat_map(|s| s.table.clone()).collect();
        benches::print_or_exit("perf", &lines_of(&lines));
    }
}

/// `lines`, each ended by a newline.
fn lines_of(lines: &[String]) -> String {
    lines.iter().map(|line| format!("{line}\n")).collect()
}
