//! A quick measurement of every weight format's GEMV against a read of the same bytes, both
//! from DRAM: each rotates through enough matrices (buffers) to exceed 4× the L3 cache, and
//! the two alternate call by call, so a ratio compares neighbours in time on a shared machine.
//!
//! `cargo run --release -p matmul-kernel --example qgemv_vs_read -- [n_out] [n_in] [rounds]`
//! (default 4096 4096 5); `SIPLLM_KERNEL` picks the GEMV's kernel (the read is always the
//! best kernel's, one reference for every kernel), `QGEMV_NO_VNNI=1` turns VNNI off and
//! `QGEMV_NO_VBMI=1` VBMI (q4_0's byte permutes), `QGEMV_IN_CACHE=1` uses one matrix and one
//! buffer (give a small `n_out`: the kernels' ceiling from cache, not DRAM),
//! `QGEMV_IN_CACHE=gemv` puts the GEMV's ceiling beside the read from DRAM (the GEMV on one
//! matrix, each timed call after an untimed one that brings it back into the cache; the read
//! rotating from DRAM as usual), `QGEMV_FORMATS=q4_0,q4_K` measures only those, and
//! `QGEMM_M=32` runs `qgemm` on 32 rows of `x` instead of `qgemv` (GB/s then counts each
//! weight byte once; the GFLOP/s column is `2·m·n_out·n_in` per second).
//! Prints, per thread count and format: GB/s of the GEMV and of the read (medians), and the
//! median of the per-pair ratios GEMV ÷ read. The read sums rows of 16 KiB, as the perf
//! section's does, whatever the weights' row length.
//!
//! Built with `--features walk-override` on x86, `SIPLLM_WALK` overrides the walk rules of
//! the GEMV bodies (e.g. `SIPLLM_WALK=ahead=4096,q8_0=0,streams=3,float=l1`; the keys are
//! `matmul_kernel::walk_override`'s): alternate runs with and without it to compare two
//! settings in one build. `QGEMV_WALKS='streams=1;streams=3'` (such a build only)
//! alternates those settings call by call instead (each on the next matrix of the rotation,
//! followed by its own read) and prints a line per setting: neighbours in time, in one
//! process.

use matmul_kernel::{
    Exec, Kernel, WeightBuffer, WeightFormat, WeightMatrix, WeightShape, selected,
};
use std::time::Instant;
use threadpool::{SchedulePolicy, ThreadPool};

/// The length of the read's rows: the f32 GEMV's at 4096 inputs, as in `cargo xtask perf`.
const READ_ROW_BYTES: usize = 16 << 10;

/// The L3 size `/sys` gives for cpu0 (32 MiB when it cannot be read).
fn l3_bytes() -> usize {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index3/size")
        .unwrap_or_default();
    let text = text.trim();
    let (digits, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: usize = digits.parse().unwrap_or(32 * 1024);
    match unit {
        "K" => n << 10,
        "M" => n << 20,
        "" if !digits.is_empty() => n,
        _ => 32 << 20,
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let n_out = args.first().copied().unwrap_or(4096);
    let n_in = args.get(1).copied().unwrap_or(4096);
    let rounds = args.get(2).copied().unwrap_or(5);
    let walks = walks()?;
    let mut kernel = selected();
    if std::env::var_os("QGEMV_NO_VNNI").is_some() {
        kernel = kernel.without_vnni();
    }
    if std::env::var_os("QGEMV_NO_VBMI").is_some() {
        kernel = kernel.without_vbmi();
    }
    #[cfg(all(feature = "walk-override", target_arch = "x86_64"))]
    println!(
        "walk {}",
        matmul_kernel::walk_override().map_err(|e| e.to_string())?
    );
    let (in_cache, gemv_in_cache) = match std::env::var("QGEMV_IN_CACHE").ok().as_deref() {
        None => (false, false),
        Some("1") => (true, false),
        Some("gemv") => (false, true),
        Some(other) => {
            return Err(format!("QGEMV_IN_CACHE={other:?}: expected 1 or gemv").into());
        }
    };
    let target = if in_cache {
        0
    } else {
        4 * l3_bytes() + (16 << 20)
    };
    // The read is always the machine's best kernel's, so that ratios of different kernels
    // share one reference (a 256-bit read from DRAM can be slower than a 512-bit one).
    let read_kernel = Kernel::best();
    println!(
        "kernel {kernel} (vnni {}, vbmi {}), read {read_kernel}, {n_out}x{n_in}, > {} MiB per \
         rotation{}",
        kernel.has_vnni(),
        kernel.has_vbmi(),
        target >> 20,
        if gemv_in_cache {
            ", the GEMV from cache"
        } else {
            ""
        }
    );
    let values: Vec<f32> = (0..n_out * n_in)
        .map(|i| ((i * 7919 % 1000) as f32 / 500.0) - 1.0)
        .collect();
    let m: usize = std::env::var("QGEMM_M")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let x: Vec<f32> = (0..n_in * m.max(1))
        .map(|i| ((i * 31 % 97) as f32 / 48.0) - 1.0)
        .collect();
    let shape = WeightShape { n_out, n_in };
    for threads in [1, 2] {
        let pool = ThreadPool::new(threads);
        let policy = SchedulePolicy::Static;
        println!("threads {threads}: format  gemv GB/s  read GB/s  gemv/read  GFLOP/s");
        let only = std::env::var("QGEMV_FORMATS").unwrap_or_default();
        for format in WeightFormat::ALL {
            if !only.is_empty() && !only.split(',').any(|f| f == format.name()) {
                continue;
            }
            let one = WeightMatrix::quantize(format, shape, &values)?;
            let bytes = one.as_bytes().len();
            let count = target.div_ceil(bytes).max(if in_cache { 1 } else { 2 });
            // With the GEMV from cache, its one matrix; else one per read buffer.
            let mats = (0..if gemv_in_cache { 1 } else { count })
                .map(|_| WeightMatrix::from_raw(format, shape, one.as_bytes()))
                .collect::<Result<Vec<_>, _>>()?;
            // The read sums rows of 16 KiB (the perf section's reference, whatever the
            // weights' row length), over the weights' bytes rounded up to whole rows; its
            // time is scaled to the weights' bytes.
            let read_rows = bytes.div_ceil(READ_ROW_BYTES);
            let read_bytes = read_rows * READ_ROW_BYTES;
            let floats = vec![1.0f32; read_bytes / 4];
            let bufs = (0..count)
                .map(|_| WeightBuffer::from_slice(&floats))
                .collect::<Result<Vec<_>, _>>()?;
            let mut y = vec![0.0f32; n_out * m.max(1)];
            let mut sums = vec![0.0f32; read_rows];
            // Per walk setting: GEMV GB/s, read GB/s, their ratio, GFLOP/s.
            let mut runs = vec![[const { Vec::new() }; 4]; walks.len()];
            let flops = 2.0 * (m.max(1) * n_out * n_in) as f64;
            let rounds = if in_cache { rounds * 200 } else { rounds };
            for round in 0..=rounds {
                // The settings take the matrices in turn, so that every call reads its own.
                for (i, b) in bufs.iter().enumerate() {
                    let k = (i + round) % walks.len();
                    let (walk, run) = (&walks[k], &mut runs[k]);
                    set_walk(walk)?;
                    let mat = &mats[i % mats.len()];
                    let exec = Exec::new().kernel(kernel).pool(&pool).policy(policy);
                    let mut call = || {
                        if m > 0 {
                            exec.qgemm(mat, &x, &mut y)
                        } else {
                            exec.qgemv(mat, &x, &mut y)
                        }
                    };
                    if gemv_in_cache {
                        call()?;
                    }
                    let t = Instant::now();
                    call()?;
                    let tq = t.elapsed().as_secs_f64();
                    let t = Instant::now();
                    Exec::new()
                        .kernel(read_kernel)
                        .pool(&pool)
                        .policy(policy)
                        .stream_read(b, &mut sums)?;
                    let ts = t.elapsed().as_secs_f64() * bytes as f64 / read_bytes as f64;
                    if round > 0 {
                        let [gemv, read, ratio, gflops] = run;
                        gemv.push(bytes as f64 / tq / 1e9);
                        read.push(bytes as f64 / ts / 1e9);
                        ratio.push(ts / tq);
                        gflops.push(flops / tq / 1e9);
                    }
                }
            }
            for (walk, [gemv, read, ratio, gflops]) in walks.iter().zip(runs.iter_mut()) {
                println!(
                    "           {format:6} {:9.2}  {:9.2}  {:9.3}  {:7.1}{}",
                    median(gemv),
                    median(read),
                    median(ratio),
                    median(gflops),
                    match walk {
                        Some(walk) if walk.is_empty() => "  rules".to_string(),
                        Some(walk) => format!("  {walk}"),
                        None => String::new(),
                    }
                );
            }
        }
    }
    Ok(())
}

/// The walk settings `QGEMV_WALKS` lists (`;` between them; an empty one is the rules), or
/// `None` when it is unset: the rules, or `SIPLLM_WALK`'s override.
fn walks() -> Result<Vec<Option<String>>, Box<dyn std::error::Error>> {
    let Ok(text) = std::env::var("QGEMV_WALKS") else {
        return Ok(vec![None]);
    };
    #[cfg(all(feature = "walk-override", target_arch = "x86_64"))]
    {
        let walks: Vec<String> = text.split(';').map(|w| w.trim().to_string()).collect();
        for walk in &walks {
            // Refuse a setting that does not parse before measuring anything.
            matmul_kernel::set_walk_override(walk)?;
        }
        Ok(walks.into_iter().map(Some).collect())
    }
    #[cfg(not(all(feature = "walk-override", target_arch = "x86_64")))]
    {
        Err(format!("QGEMV_WALKS={text:?} needs an x86 build with --features walk-override").into())
    }
}

/// Makes `walk` the override of the calls that follow (`None`: leaves it as it is).
fn set_walk(walk: &Option<String>) -> Result<(), Box<dyn std::error::Error>> {
    #[cfg(all(feature = "walk-override", target_arch = "x86_64"))]
    if let Some(walk) = walk {
        matmul_kernel::set_walk_override(walk)?;
    }
    let _ = walk;
    Ok(())
}
