//! Tune this machine once (or read the cached profile) and run a GEMV on the tuned pool.
//!
//! `cargo run --release --example tune_and_gemv -p auto-tuner`
//!
//! The profile is cached in `$SIPLLM_HOME/runtime/` (default `$HOME/.sipllm`); the second
//! run reads it back instead of measuring.

use auto_tuner::{AutoTunerOptions, Report, Reporter, tune_if_needed};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let hw = device_profile::get_hardware_info();
    let mut opt = AutoTunerOptions::default().with_process_env()?;
    // The library never prints: this program decides what to show.
    opt.reporter = Reporter::new(|report| match report {
        Report::Warning(line) => eprintln!("warning: {line}"),
        Report::Step(line) => eprintln!("tuning: {line}"),
        _ => {}
    });
    let tuned = tune_if_needed(&hw, &opt)?;
    let profile = &tuned.profile;
    println!(
        "{}: {} threads, policy {} (source: {})",
        profile.hardware_id,
        profile.threads(),
        profile.schedule_policy(),
        tuned.source.name()
    );

    // The pool carries the tuned policy and pins this thread when the profile is pinned.
    let pool = profile.build_pool()?;
    let (n_out, n_in) = (4096, 4096);
    let w = matmul_kernel::WeightBuffer::from_slice(&vec![0.001f32; n_out * n_in])?;
    let x = vec![1.0f32; n_in];
    let mut y = vec![0.0f32; n_out];
    let start = std::time::Instant::now();
    let calls = 50;
    for _ in 0..calls {
        matmul_kernel::Exec::new()
            .pool(&pool)
            .gemv(&w, &x, &mut y)?;
    }
    let secs = start.elapsed().as_secs_f64() / calls as f64;
    println!(
        "y[0] = {:.3}; {:.2} ms per 4096x4096 GEMV, {:.1} GB/s of weights (one matrix, \
         partly cached: see `sipllm` for the tuned figure)",
        y[0],
        secs * 1e3,
        (n_out * n_in * 4) as f64 / secs / 1e9
    );
    Ok(())
}
