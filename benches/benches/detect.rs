//! Criterion bench `detect`: the cost of detecting this machine (it must stay well under
//! 5 ms), and of reading the 20-CPU Intel fixture tree for comparison.
#![forbid(unsafe_code)]

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::Path;

fn detect(c: &mut Criterion) {
    c.bench_function("get_hardware_info", |b| {
        b.iter(|| black_box(device_profile::get_hardware_info()))
    });
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../crates/device-profile/tests/fixtures/intel_i7_12700h");
    c.bench_function("get_hardware_info_from_root/intel_i7_12700h", |b| {
        b.iter(|| black_box(device_profile::get_hardware_info_from_root(&fixture)))
    });
    let hw = device_profile::get_hardware_info();
    c.bench_function("hardware_id", |b| b.iter(|| black_box(hw.hardware_id())));
}

criterion_group!(benches, detect);
criterion_main!(benches);
