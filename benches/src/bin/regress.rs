//! `regress`: the regression run (`cargo xtask bench-regress`), always run in release.
//!
//! Measures the ratios of [`benches::regress`] and checks them against the floors file;
//! exits 1 with the table when a ratio is below its limit, 2 when it cannot check at all.
#![forbid(unsafe_code)]

use benches::regress::{self, Floors, RunLength};
use clap::Parser;
use std::path::PathBuf;
use std::time::Instant;

/// Ratios of ours to a reference measured in one run, checked against committed floors.
#[derive(Debug, Parser)]
#[command(about)]
struct Cli {
    /// Half the rounds (CI).
    #[arg(long)]
    quick: bool,
    /// The floors file.
    #[arg(long, value_name = "PATH", default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/floors.json"))]
    floors: PathBuf,
}

fn main() {
    let cli = Cli::parse();
    if cfg!(debug_assertions) {
        eprintln!("regress: refusing to measure a debug build; run `cargo xtask bench-regress`");
        std::process::exit(2);
    }
    let vendor = regress::this_vendor();
    let model = regress::this_model();
    let floors = match Floors::load(&cli.floors, vendor, model) {
        Ok(floors) => floors,
        Err(err) => {
            eprintln!("regress: {err}");
            std::process::exit(2);
        }
    };
    let length = if cli.quick {
        RunLength::Quick
    } else {
        RunLength::Full
    };
    let start = Instant::now();
    let measured = regress::measure(length);
    let measured = regress::confirm(measured, &floors, |name| regress::measure_one(name, length));
    let rows = regress::check(&measured, &floors);
    let mut report = format!(
        "bench-regress: {} threads (GEMM {}), kernel {}, floors of {}, {} run of {:.1} s; a \
         check passes when ratio >= floor x (1 - margin)\n",
        regress::N_THREADS,
        regress::GEMM_THREADS,
        matmul_kernel::selected(),
        vendor.map_or("any CPU (no vendor floors)".to_string(), |v| {
            let model = model.map_or(String::new(), |m| {
                format!(" and of model {} (family/model)", regress::model_key(m))
            });
            format!("vendor {v}{model} where a check has them")
        }),
        if cli.quick { "quick" } else { "full" },
        start.elapsed().as_secs_f64()
    );
    for line in regress::table(&rows) {
        report.push_str(&line);
        report.push('\n');
    }
    benches::print_or_exit("regress", &report);
    if !regress::passed(&rows) {
        let failed = rows
            .iter()
            .filter(|row| row.verdict != regress::Verdict::Pass)
            .count();
        eprintln!(
            "bench-regress: {failed} of {} checks failed (floors: {}; see docs/benchmarking.md)",
            rows.len(),
            cli.floors.display()
        );
        std::process::exit(1);
    }
}
