//! Unit tests that hold on every CPU: tokens and detection, the kernel selection from a given
//! `SIPLLM_KERNEL` value, shape errors and the weight buffer. The per-ISA accuracy and
//! determinism tests are in `tests/kernels.rs`, where a kernel this CPU lacks shows as ignored.
//!
//! Hermetic: nothing here reads `SIPLLM_*`; the selection is tested through the functions that
//! take the variable's value.

use super::*;
use crate::split::Split;
use threadpool::{SchedulePolicy, ThreadPool};

#[test]
fn shape_mismatch_is_an_error() {
    let serial = Exec::new().kernel(Kernel::best());
    let pool = ThreadPool::new(2);
    let pooled = serial.pool(&pool).policy(SchedulePolicy::Static);
    let mut y = [0.0; 2];
    assert!(matches!(
        serial.gemv(&[1.0; 5], &[1.0; 3], &mut y),
        Err(MatmulError::Shape(_))
    ));
    assert!(matches!(
        pooled.gemv(&[1.0; 7], &[1.0; 3], &mut y),
        Err(MatmulError::Shape(_))
    ));
    let shape = GemmShape {
        m: 2,
        n_in: 3,
        n_out: 2,
    };
    let (w, x, mut y4) = ([1.0; 6], [1.0; 6], [0.0; 4]);
    assert!(serial.gemm(shape, &w, &x, &mut y4).is_ok());
    assert_eq!(y4, [3.0; 4]);
    assert!(
        matches!(serial.gemm(shape, &w[..5], &x, &mut y4), Err(MatmulError::Shape(m)) if m.contains("w has 5"))
    );
    assert!(
        matches!(serial.gemm(shape, &w, &x[..5], &mut y4), Err(MatmulError::Shape(m)) if m.contains("x has 5"))
    );
    assert!(
        matches!(serial.gemm(shape, &w, &x, &mut y4[..3]), Err(MatmulError::Shape(m)) if m.contains("y has 3"))
    );
    assert!(matches!(
        pooled.gemm(shape, &w, &x[..5], &mut y4),
        Err(MatmulError::Shape(m)) if m.contains("x has 5")
    ));
    let huge = GemmShape {
        m: usize::MAX,
        n_in: 2,
        n_out: 2,
    };
    assert!(matches!(
        serial.gemm(huge, &w, &x, &mut y4),
        Err(MatmulError::Shape(_))
    ));
    let mut sums = [0.0; 3];
    for exec in [serial, pooled] {
        assert!(matches!(
            exec.stream_read(&[1.0; 7], &mut sums),
            Err(MatmulError::Shape(_))
        ));
    }
}

#[test]
fn an_exec_splits_as_its_builder_says() {
    let pool = threadpool::ThreadPoolBuilder::default()
        .n_threads(2)
        .policy(SchedulePolicy::Guided)
        .build()
        .unwrap();
    assert_eq!(Exec::new().kernel, selected());
    assert_eq!(Exec::default().kernel, selected());
    let portable = Isa::Portable.token().unwrap();
    assert_eq!(Exec::new().kernel(portable).kernel, portable);
    assert!(matches!(Exec::new().split(), Split::Serial));
    // A policy without a pool changes nothing: the calling thread runs every row.
    assert!(matches!(
        Exec::new().policy(SchedulePolicy::Fixed16).split(),
        Split::Serial
    ));
    // On a pool, its own policy, unless one is named (in either order).
    assert!(matches!(
        Exec::new().pool(&pool).split(),
        Split::Pool(p, SchedulePolicy::Guided) if std::ptr::eq(p, &pool)
    ));
    for exec in [
        Exec::new().pool(&pool).policy(SchedulePolicy::Fixed16),
        Exec::new().policy(SchedulePolicy::Fixed16).pool(&pool),
    ] {
        assert!(matches!(
            exec.split(),
            Split::Pool(_, SchedulePolicy::Fixed16)
        ));
    }
}

#[test]
fn a_token_exists_only_for_an_available_isa() {
    for isa in Isa::ALL {
        match isa.token() {
            Ok(kernel) => {
                assert_eq!(kernel.isa(), isa);
                assert_eq!(kernel.to_string(), isa.name());
                assert_eq!(format!("{kernel:?}"), format!("Kernel({isa})"));
                assert!(isa.is_available());
                let mut y = [0.0; 1];
                Exec::new()
                    .kernel(kernel)
                    .gemv(&[2.0], &[3.0], &mut y)
                    .unwrap();
                assert_eq!(y, [6.0]);
            }
            Err(e) => {
                assert_eq!(e, MatmulError::UnavailableIsa(isa));
                assert_eq!(
                    e.to_string(),
                    format!("kernel {isa} is not available on this cpu")
                );
                assert!(!isa.is_available());
                assert_eq!(kernel_from_env_value(Some(isa.name())), Err(e));
            }
        }
    }
    assert_eq!(Isa::Portable.token().map(Kernel::isa), Ok(Isa::Portable));
}

#[test]
fn best_is_the_widest_available_kernel() {
    let best = Kernel::best();
    assert_eq!(best.isa().token(), Ok(best));
    let widest = Isa::ALL.into_iter().rev().find(|isa| isa.is_available());
    assert_eq!(Some(best.isa()), widest);
    if cfg!(target_arch = "aarch64") {
        assert_eq!(
            best.isa(),
            Isa::Neon,
            "NEON is part of every aarch64 target"
        );
    } else if cfg!(not(target_arch = "x86_64")) {
        assert_eq!(best.isa(), Isa::Portable);
    }
    if cfg!(not(target_arch = "aarch64")) {
        assert_eq!(
            Isa::Neon.token(),
            Err(MatmulError::UnavailableIsa(Isa::Neon))
        );
    }
}

#[test]
fn the_cpuid_vendor_is_the_one_the_kernel_reports() {
    let vendor = cpuid_vendor();
    assert_eq!(vendor.is_some(), cfg!(target_arch = "x86_64"));
    let Some(vendor) = vendor else { return };
    assert!(vendor.iter().all(u8::is_ascii_graphic), "{vendor:?}");
    assert_eq!(cpuid_vendor(), Some(vendor), "one answer per process");
    // Linux reports the same string as `vendor_id` in /proc/cpuinfo.
    if let Ok(cpuinfo) = std::fs::read_to_string("/proc/cpuinfo") {
        let reported = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("vendor_id"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).trim());
        if let Some(reported) = reported {
            assert_eq!(reported.as_bytes(), vendor);
        }
    }
}

#[test]
fn tokens_reach_their_own_isa() {
    // The SIMD kernels fuse multiply and add, the portable one rounds the product first; with
    // `n_in = 48`, elements 0 and 32 meet in lane 0 of one accumulator on every ISA (8 or 16
    // lanes, two accumulators), so `-1 + (1+e)(1-e)` tells a fused kernel from the portable one.
    let e = f32::EPSILON;
    let (mut w, mut x) = ([0.0f32; 48], [0.0f32; 48]);
    (w[0], x[0]) = (1.0, -1.0);
    (w[32], x[32]) = (1.0 + e, 1.0 - e);
    let fused = -(e * e); // exact: -2^-46
    for isa in Isa::ALL {
        let Ok(kernel) = isa.token() else { continue };
        let mut y = [f32::NAN; 1];
        Exec::new().kernel(kernel).gemv(&w, &x, &mut y).unwrap();
        let expected = if isa == Isa::Portable { 0.0 } else { fused };
        assert_eq!(y[0].to_bits(), expected.to_bits(), "{isa}: {:e}", y[0]);
    }
}

/// `Exec::gemv` is the f32 cell of the GEMV table, the body `Exec::qgemv` runs on f32
/// weights, on every kernel (one f32 GEMV body per ISA): the two agree bit for bit, tails,
/// blocks of rows and the single rows after them included.
#[test]
fn the_f32_gemv_is_one_body_for_slices_and_matrices() {
    let (n_out, n_in) = (19, 83);
    // Full mantissas, so that another order of the same additions rounds differently.
    let w: Vec<f32> = (0..n_out * n_in)
        .map(|i| (i as f32 * 0.731).sin())
        .collect();
    let x: Vec<f32> = (0..n_in).map(|i| (i as f32 * 1.37).cos() * 3.3).collect();
    let shape = WeightShape { n_out, n_in };
    let m = WeightMatrix::quantize(WeightFormat::F32, shape, &w).unwrap();
    let mut ran = 0;
    for isa in Isa::ALL {
        let Ok(kernel) = isa.token() else { continue };
        let exec = Exec::new().kernel(kernel);
        let (mut slice, mut matrix) = (vec![f32::NAN; n_out], vec![f32::NAN; n_out]);
        exec.gemv(&w, &x, &mut slice).unwrap();
        exec.qgemv(&m, &x, &mut matrix).unwrap();
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&slice), bits(&matrix), "{isa}");
        ran += 1;
    }
    assert!(ran >= 1, "the portable kernel runs everywhere");
}

#[test]
fn env_value_selects_the_kernel() {
    let best = Kernel::best();
    assert_eq!(kernel_from_env_value(None), Ok(best));
    assert_eq!(kernel_from_env_value(Some(" ")), Ok(best));
    let portable = Isa::Portable.token().unwrap();
    assert_eq!(kernel_from_env_value(Some("portable")), Ok(portable));
    assert_eq!(kernel_from_env_value(Some(" Portable ")), Ok(portable));
    let err = kernel_from_env_value(Some("sse9")).unwrap_err();
    assert_eq!(err, MatmulError::UnknownIsa("sse9".to_string()));
    assert_eq!(
        err.to_string(),
        "unknown kernel \"sse9\" (expected portable, neon, avx2 or avx512)"
    );
    for isa in Isa::ALL {
        assert_eq!(isa.name().parse::<Isa>(), Ok(isa));
        assert_eq!(isa.to_string(), isa.name());
        assert_eq!(kernel_from_env_value(Some(isa.name())), isa.token());
    }
}

#[test]
fn selection_falls_back_with_the_reason() {
    let best = Kernel::best();
    for value in [None, Some(""), Some(" ")] {
        let selection = Selection::from_env_value(value);
        assert_eq!(selection.kernel, best, "{value:?}");
        assert_eq!(selection.fallback, None, "{value:?}");
        assert_eq!(selection.warning(), None, "{value:?}");
    }
    let portable = Selection::from_env_value(Some("portable"));
    assert_eq!(portable.kernel.isa(), Isa::Portable);
    assert_eq!(portable.fallback, None);

    let unknown = Selection::from_env_value(Some("neon9"));
    assert_eq!(unknown.kernel, best);
    assert_eq!(
        unknown.fallback,
        Some(MatmulError::UnknownIsa("neon9".to_string()))
    );
    assert_eq!(
        unknown.warning().as_deref(),
        Some(
            format!(
                "SIPLLM_KERNEL: unknown kernel \"neon9\" (expected portable, neon, avx2 or avx512); \
                 using {best}"
            )
            .as_str()
        )
    );
    for isa in Isa::ALL {
        let selection = Selection::from_env_value(Some(isa.name()));
        match isa.token() {
            Ok(kernel) => assert_eq!((selection.kernel, selection.fallback), (kernel, None)),
            Err(e) => {
                assert_eq!(selection.kernel, best);
                assert_eq!(
                    selection.warning(),
                    Some(format!("SIPLLM_KERNEL: {e}; using {best}"))
                );
                assert_eq!(selection.fallback, Some(e));
            }
        }
    }
}

#[test]
fn rows_fit_rejects_short_and_overflowing_shapes() {
    assert!(kernel::rows_fit(12, 3, 4));
    assert!(kernel::rows_fit(13, 3, 4));
    assert!(!kernel::rows_fit(11, 3, 4));
    assert!(kernel::rows_fit(0, 0, usize::MAX));
    assert!(!kernel::rows_fit(usize::MAX, 2, usize::MAX));
}

#[test]
fn weight_buffer_is_aligned_and_zeroed() {
    for len in [0, 1, 17, 3 << 20] {
        let mut buf = WeightBuffer::zeroed(len).unwrap();
        assert_eq!(buf.len(), len);
        assert_eq!(buf.as_ptr() as usize % WEIGHT_ALIGN, 0, "len {len}");
        assert!(buf.iter().all(|v| *v == 0.0));
        if let Some(last) = buf.last_mut() {
            *last = 2.5;
        }
        assert_eq!(buf.iter().sum::<f32>(), if len == 0 { 0.0 } else { 2.5 });
    }
    let copy = WeightBuffer::from_slice(&[1.0, 2.0, 3.0]).unwrap();
    assert_eq!(&copy[..], &[1.0, 2.0, 3.0]);
    assert!(matches!(
        WeightBuffer::zeroed(usize::MAX),
        Err(MatmulError::Alloc(_))
    ));
}

#[test]
fn weight_buffer_reports_huge_pages() {
    let small = WeightBuffer::from_slice(&[1.0; 16]).unwrap();
    assert!(matches!(small.huge_pages(), HugePages::Unavailable(_)));
    assert!(!small.huge_pages().granted());
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
    if cfg!(target_os = "linux") && thp.is_ok_and(|mode| !mode.contains("[never]")) {
        // 8 MiB written: madvise was accepted, so the report is Granted or NotGranted (the
        // kernel may lack a free huge page), never Unavailable.
        let big = WeightBuffer::from_slice(&vec![1.0; 2 << 20]).unwrap();
        let report = big.huge_pages();
        assert!(!matches!(report, HugePages::Unavailable(_)), "{report:?}");
        assert_eq!(big.as_ptr() as usize % (2 << 20), 0);
    }
}
