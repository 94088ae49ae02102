//! Criterion bench `detect`: the cost of detecting this machine.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

fn detect(c: &mut Criterion) {
    c.bench_function("get_hardware_info", |b| {
        b.iter(|| black_box(device_profile::get_hardware_info()))
    });
}

criterion_group!(benches, detect);
criterion_main!(benches);
