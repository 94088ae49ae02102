//! Criterion bench `tune`: the cost of the cached path of `tune_if_needed` (detection,
//! reading and validating the profile) and of a first-run tune on a small matrix.
//! The full 4096² first-run tune is timed by `cargo xtask bench-micro --recalibrate`.
#![forbid(unsafe_code)]

use auto_tuner::tune_if_needed;
use benches::contenders::{self, CachedTune};
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

fn tune(c: &mut Criterion) {
    let cached = CachedTune::prepare();

    c.bench_function("cached_detect_and_load", |b| {
        b.iter(|| {
            black_box(contenders::detect());
            cached.call()
        })
    });

    let mut group = c.benchmark_group("first_run");
    group.sample_size(10);
    let hw = device_profile::get_hardware_info();
    let mut forced = contenders::small_tune_options(cached.home());
    forced.stores.force_recalibrate = true;
    group.bench_function("tune_256x256", |b| {
        b.iter(|| black_box(tune_if_needed(&hw, &forced).expect("tune")))
    });
    group.finish();
}

criterion_group!(benches, tune);
criterion_main!(benches);
