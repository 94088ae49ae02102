//! Unit tests of the measuring engine's sizing and statistics.

use super::*;
use crate::measure::median;
use matmul_kernel::WeightFormat;
use model_workload::{MAX_DIMENSION, Projection};

#[test]
fn the_working_set_is_four_times_l3_within_the_caps() {
    let layer = 64 << 20; // one 64 MiB layer of 7 projections
    let mut hw = HardwareInfo {
        l3_total_bytes: 32 << 20,
        ram_bytes: 24 << 30,
        ..HardwareInfo::default()
    };
    let copies = |hw: &HardwareInfo, max: u64, available| {
        layer_copies(hw, layer, 7, memory_bound(hw, max, available))
    };
    assert_eq!(copies(&hw, 2 << 30, None), Some(2));
    hw.l3_total_bytes = 256 << 20; // a large EPYC: 1 GiB working set
    assert_eq!(copies(&hw, 2 << 30, None), Some(16));
    assert_eq!(copies(&hw, 512 << 20, None), Some(8));
    assert_eq!(copies(&hw, 2 << 30, Some(1 << 30)), Some(8)); // half of what is free
    hw.ram_bytes = 1 << 30; // a quarter of RAM is 256 MiB
    assert_eq!(copies(&hw, 2 << 30, None), Some(4));
    hw.ram_bytes = 128 << 20; // not even one layer fits: an error, never an OOM
    assert_eq!(copies(&hw, 2 << 30, None), None);
    hw.l3_total_bytes = 0; // unknown: 32 MiB assumed
    hw.ram_bytes = 0;
    assert_eq!(copies(&hw, 2 << 30, None), Some(2));
    // A 70B layer (about 0.5 GB in q4_K_M) is one copy: the layer count scales it.
    assert_eq!(layer_copies(&hw, 500 << 20, 7, 2 << 30), Some(1));
    // A tiny layer stops at MAX_WEIGHT_MATRICES matrices.
    assert_eq!(
        layer_copies(&hw, 64, 7, 2 << 30),
        Some(MAX_WEIGHT_MATRICES / 7)
    );
}

#[test]
fn sizes_are_shown_in_a_readable_unit() {
    assert_eq!(human_bytes(4), "4 B");
    assert_eq!(human_bytes(4096), "4 KiB");
    assert_eq!(human_bytes(128 << 20), "128 MiB");
    assert_eq!(human_bytes(3 << 29), "1.5 GiB");
}

#[test]
fn median_of_odd_even_and_empty() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    assert_eq!(median(&[]), 0.0);
}

#[test]
fn stats_median_and_noise() {
    let s = Stats::from_samples(vec![10.0, 12.0, 11.0, 50.0, 11.0]);
    assert_eq!(s.median(), 11.0);
    assert_eq!(s.min(), 10.0);
    assert_eq!(s.max(), 50.0);
    assert!((s.relative_mad() - 1.0 / 11.0).abs() < 1e-12);
}

#[test]
fn a_pinned_setting_takes_the_first_cpus_of_its_set() {
    let sets = [PinnedSet {
        cores: CoreSet::PhysicalCores,
        cpus: vec![0, 2, 4],
    }];
    let config = |threads, cores| Setting {
        threads,
        policy: SchedulePolicy::Static,
        cores,
    };
    assert_eq!(
        pinned_cpus(&sets, config(2, CoreSet::PhysicalCores)),
        Some(vec![0, 2])
    );
    assert_eq!(pinned_cpus(&sets, config(4, CoreSet::PhysicalCores)), None);
    assert_eq!(pinned_cpus(&sets, config(2, CoreSet::Any)), None);
    assert_eq!(pinned_cpus(&sets, config(1, CoreSet::Node(0))), None);
}

#[test]
fn repetitions_span_several_quota_periods_under_a_cpu_quota() {
    let mut hw = HardwareInfo::default();
    let asked = Duration::from_millis(20);
    assert_eq!(repetition_time(&hw, asked), asked);
    hw.cpu_quota_millicpus = Some(1500);
    assert_eq!(repetition_time(&hw, asked), QUOTA_REPETITION_TIME);
    // A longer repetition asked for is kept.
    assert_eq!(
        repetition_time(&hw, Duration::from_secs(2)),
        Duration::from_secs(2)
    );
}

#[test]
fn the_prefill_buffers_count_in_the_memory_bound() {
    // One layer of 4 MiB fits a bound of 64 MiB, but the batch of 4096 rows of 65536
    // activations (1 GiB for x, as much for its quantized copy) does not.
    let w = Workload {
        name: "wide".into(),
        layers: 1,
        projections: vec![Projection::uniform("w", 16, 65536, WeightFormat::F32, 1)],
    };
    let layer = w.validate().unwrap();
    let err = Memory::of(&w, 4096, 128, layer, 64 << 20)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("prefill buffers of a batch of 4096") && err.contains("64 MiB"),
        "{err}"
    );
    // At a batch of 1 and within 256 MiB they fit (the row sample of 128 rows of 256 KiB
    // takes 72 MiB while it is built), and the copies get what the buffers and that
    // reserve leave.
    let memory = Memory::of(&w, 1, 128, layer, 256 << 20).unwrap();
    assert!(memory.scratch >= 65536 * 4, "{memory:?}");
    assert!(
        memory.for_copies + memory.scratch + sample_peak_bytes(&w, 128) <= 256 << 20,
        "{memory:?}"
    );
    // The reproduction: hidden_size 2^20 at a batch of 4096 (16 GiB of activations) is an
    // error before anything is allocated, whatever the bound.
    let hidden = Workload {
        projections: vec![Projection {
            n_in: MAX_DIMENSION,
            ..w.projections[0].clone()
        }],
        ..w
    };
    let layer = hidden.validate().unwrap();
    assert!(Memory::of(&hidden, 4096, 128, layer, 2 << 30).is_err());
}

#[test]
fn the_prefill_sample_stays_within_what_the_copies_leave() {
    let w = Workload {
        name: "w".into(),
        layers: 1,
        projections: vec![Projection::uniform("w", 100_000, 256, WeightFormat::F32, 1)],
    };
    // 1 KiB a row, 2.25 KiB a row while it is built.
    assert_eq!(sample_peak_bytes(&w, 4), 9 * 1024);
    assert_eq!(sample_rows_within(&w, 9 * 1024), 4);
    assert_eq!(sample_rows_within(&w, 9 * 1024 - 1), 3);
}

#[test]
fn the_default_bound_holds_a_70b_layer_in_f16_where_the_ram_allows() {
    // One layer of llama3.1-70b in f16 is 1.6 GiB, 3.2 GiB with its buffers: more than the
    // 2 GiB the default bound was, which refused it on every machine.
    let w = Workload::preset(
        "llama3.1-70b",
        model_workload::Weights::Uniform(WeightFormat::F16),
    )
    .unwrap();
    let layer = w.validate().unwrap();
    let hw = |ram_gib: u64| HardwareInfo {
        ram_bytes: ram_gib << 30,
        ..HardwareInfo::default()
    };
    let bound = |ram_gib: u64| {
        memory_bound(
            &hw(ram_gib),
            crate::options::DEFAULT_MAX_WORKING_SET_BYTES,
            Some((ram_gib << 30) * 3 / 4),
        )
    };
    let memory = Memory::of(&w, 64, 128, layer, bound(24)).unwrap();
    assert!(memory.for_copies >= layer, "{memory:?}");
    assert_eq!(layer_copies(&hw(24), layer, 7, memory.for_copies), Some(1));
    // A quarter of 8 GiB of RAM still refuses it, naming the bounds.
    let err = Memory::of(&w, 64, 128, layer, bound(8))
        .unwrap_err()
        .to_string();
    assert!(err.contains("a quarter of RAM"), "{err}");
}
