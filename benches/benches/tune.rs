//! Criterion bench `tune`: the cost of the cached path of `tune_if_needed` (detection,
//! reading and validating the profile) and of a first-run tune on a small matrix.
//! The full 4096² first-run tune is timed by `cargo xtask bench-micro --recalibrate`.

use auto_tuner::{AutoTunerOptions, Workload, tune_if_needed};
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;

fn options(home: &std::path::Path) -> AutoTunerOptions {
    AutoTunerOptions {
        home: Some(home.to_path_buf()),
        workload: Workload {
            n_out: 256,
            n_in: 256,
        },
        repetition_time: Duration::from_micros(500),
        max_working_set_bytes: 8 << 20,
        ..AutoTunerOptions::default()
    }
}

fn tune(c: &mut Criterion) {
    let home = tempfile::tempdir().expect("temporary home");
    let hw = device_profile::get_hardware_info();
    let opt = options(home.path());
    tune_if_needed(&hw, &opt).expect("first tune");

    c.bench_function("cached_detect_and_load", |b| {
        b.iter(|| {
            let hw = device_profile::get_hardware_info();
            black_box(tune_if_needed(&hw, &opt).expect("cached"))
        })
    });

    let mut group = c.benchmark_group("first_run");
    group.sample_size(10);
    let forced = AutoTunerOptions {
        force_recalibrate: true,
        ..opt.clone()
    };
    group.bench_function("tune_256x256", |b| {
        b.iter(|| black_box(tune_if_needed(&hw, &forced).expect("tune")))
    });
    group.finish();
}

criterion_group!(benches, tune);
criterion_main!(benches);
