//! The README's example ("Use it from your program"), kept compiling: `xtask/tests/readme.rs`
//! checks that the README shows exactly the code below this header.
//!
//! `cargo run --release --example readme -p auto-tuner`

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let hw = device_profile::get_hardware_info();
    let opt = auto_tuner::AutoTunerOptions::default().with_process_env()?;
    let tuned = auto_tuner::tune_if_needed(&hw, &opt)?; // measures once, then reads the cache
    for warning in &tuned.warnings {
        eprintln!("warning: {warning}"); // the library never prints: you decide
    }
    // The pool carries the tuned policy, and this thread (its worker 0) is pinned when the
    // profile says so (threads spawned from it later inherit the pin): nothing to pass
    // separately, nothing to forget. A profile of another kernel than the one this
    // process runs is refused here.
    let pool = tuned.profile.build_pool()?;
    // Prefill (the prompt) has its own setting, often more threads: a second pool.
    let _prefill = tuned.profile.build_prefill_pool()?;
    let (n_out, n_in) = (4096, 4096);
    let weights = matmul_kernel::WeightBuffer::from_slice(&vec![0.5f32; n_out * n_in])?;
    let (x, mut y) = (vec![1.0f32; n_in], vec![0.0f32; n_out]);
    matmul_kernel::Exec::new()
        .pool(&pool)
        .gemv(&weights, &x, &mut y)?;
    Ok(())
}
