//! `perf`: the side-by-side report (`cargo xtask perf [--json]`), always run in release.

use clap::Parser;

/// Side-by-side figures of the pool and kernels against their peers, in one run.
#[derive(Debug, Parser)]
#[command(about)]
struct Cli {
    /// Print one JSON object on stdout and nothing else.
    #[arg(long)]
    json: bool,
}

fn main() {
    let cli = Cli::parse();
    if cfg!(debug_assertions) {
        eprintln!("perf: refusing to measure a debug build; run `cargo xtask perf`");
        std::process::exit(2);
    }
    let thread_counts = [1, 2, 8];
    let sections = [
        benches::dispatch::measure(&thread_counts),
        benches::matmul::measure(&thread_counts),
    ];
    if cli.json {
        let mut all = serde_json::Map::new();
        for s in &sections {
            all.extend(s.json.clone());
        }
        println!("{}", serde_json::Value::Object(all));
    } else {
        for s in &sections {
            for line in &s.table {
                println!("{line}");
            }
        }
    }
}
