//! Unit tests: every available ISA against the portable kernel and an f64 reference, shape
//! errors, forced kernels, and bitwise determinism across policies and thread counts.

use super::*;
use proptest::prelude::*;

/// The environment variable that makes a missing ISA a test failure instead of a skip:
/// a comma list of ISA names, or `auto` for the best ISA this machine's CPU flags announce.
const ENSURE_ENV: &str = "SIPLLM_ENSURE_ISA";

/// The best ISA this machine has according to `/proc/cpuinfo`, a source independent of the
/// crate's own detection (so a broken detection cannot silently skip the ISA).
fn best_isa_from_cpuinfo() -> Isa {
    match std::fs::read_to_string("/proc/cpuinfo") {
        Ok(cpuinfo) => {
            let flags: Vec<&str> = cpuinfo
                .lines()
                .find(|l| l.starts_with("flags"))
                .map(|l| l.split_whitespace().collect())
                .unwrap_or_default();
            if flags.contains(&"avx512f") {
                Isa::Avx512
            } else if flags.contains(&"avx2") && flags.contains(&"fma") {
                Isa::Avx2
            } else {
                Isa::Portable
            }
        }
        Err(_) => Isa::best_available(),
    }
}

/// The ISAs `SIPLLM_ENSURE_ISA` requires to be tested.
fn ensured_isas() -> Vec<Isa> {
    let value = std::env::var(ENSURE_ENV).unwrap_or_default();
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            if s.eq_ignore_ascii_case("auto") {
                best_isa_from_cpuinfo()
            } else {
                s.parse()
                    .unwrap_or_else(|e| panic!("{ENSURE_ENV}={value:?}: {e}"))
            }
        })
        .collect()
}

/// Runs `f` for every ISA this CPU has; a missing one is skipped with a printed reason, or
/// fails the test when `SIPLLM_ENSURE_ISA` requires it.
fn for_each_isa(mut f: impl FnMut(Isa)) {
    let ensured = ensured_isas();
    for isa in Isa::ALL {
        if isa.is_available() {
            f(isa);
        } else if ensured.contains(&isa) {
            panic!("{ENSURE_ENV} requires the {isa} kernel to be tested, but this cpu lacks it");
        } else {
            eprintln!("skipping the {isa} kernel: not available on this cpu");
        }
    }
}

/// Deterministic values in [-1, 1).
fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn lanes(isa: Isa) -> usize {
    match isa {
        Isa::Avx512 => 16,
        Isa::Portable | Isa::Avx2 => 8,
    }
}

/// The documented bound `γ(n) · Σ|w·x|` for a dot product of length `n_in` on `isa`.
fn error_bound(isa: Isa, n_in: usize, abs_sum: f64) -> f64 {
    let l = lanes(isa);
    let n_terms = n_in.div_ceil(l) + (2 * l).ilog2() as usize + 2;
    let u = f64::from(f32::EPSILON) / 2.0;
    let nu = n_terms as f64 * u;
    nu / (1.0 - nu) * abs_sum
}

/// Checks `got` against the f64 dot products of the rows of `a` (stride `n_in`) with `b`.
fn check_dots(isa: Isa, what: &str, got: f32, a: &[f32], b: &[f32]) {
    let exact: f64 = a
        .iter()
        .zip(b)
        .map(|(p, q)| f64::from(*p) * f64::from(*q))
        .sum();
    let abs_sum: f64 = a
        .iter()
        .zip(b)
        .map(|(p, q)| (f64::from(*p) * f64::from(*q)).abs())
        .sum();
    let bound = error_bound(isa, a.len(), abs_sum);
    let err = (f64::from(got) - exact).abs();
    assert!(
        err <= bound,
        "{isa} {what}: got {got}, exact {exact}, error {err:e} > bound {bound:e}"
    );
}

/// Runs GEMV on `isa` for an `n_out × n_in` shape with slices starting `offset` floats into
/// their allocations, and checks it against f64 and against the portable kernel.
fn check_gemv_shape_on(isa: Isa, n_out: usize, n_in: usize, offset: usize) {
    let w_all = values(1 + n_out as u64, n_out * n_in + offset);
    let x_all = values(7 + n_in as u64, n_in + offset);
    let (w, x) = (&w_all[offset..], &x_all[offset..]);
    let mut y = vec![f32::NAN; n_out];
    gemv_with(isa, w, x, &mut y).unwrap();
    let mut y_portable = vec![f32::NAN; n_out];
    gemv_with(Isa::Portable, w, x, &mut y_portable).unwrap();
    for r in 0..n_out {
        let row = &w[r * n_in..(r + 1) * n_in];
        check_dots(isa, &format!("gemv {n_out}x{n_in} row {r}"), y[r], row, x);
        check_dots(Isa::Portable, "portable gemv", y_portable[r], row, x);
        // Against the portable reference: both lie within their bounds of the exact value.
        let abs_sum: f64 = row.iter().zip(x).map(|(a, b)| f64::from(a * b).abs()).sum();
        let apart = (f64::from(y[r]) - f64::from(y_portable[r])).abs();
        let bound = error_bound(isa, n_in, abs_sum) + error_bound(Isa::Portable, n_in, abs_sum);
        assert!(
            apart <= bound * 1.01,
            "{isa} vs portable, row {r}: {apart:e} > {bound:e}"
        );
    }
}

fn check_gemm_shape_on(isa: Isa, shape: GemmShape, offset: usize) {
    let GemmShape { m, n_in, n_out } = shape;
    let w_all = values(3 + n_out as u64, n_out * n_in + offset);
    let x_all = values(5 + m as u64, m * n_in + offset);
    let (w, x) = (&w_all[offset..], &x_all[offset..]);
    let mut y = vec![f32::NAN; m * n_out];
    gemm_with(isa, shape, w, x, &mut y).unwrap();
    for i in 0..m {
        for j in 0..n_out {
            let row = &w[j * n_in..(j + 1) * n_in];
            let xi = &x[i * n_in..(i + 1) * n_in];
            check_dots(
                isa,
                &format!("gemm {shape:?} ({i},{j})"),
                y[i * n_out + j],
                row,
                xi,
            );
        }
    }
}

const SHAPES: [(usize, usize); 6] = [(1, 1), (1, 17), (17, 1), (63, 65), (0, 5), (5, 0)];

#[test]
fn gemv_matches_reference_on_fixed_shapes() {
    for_each_isa(|isa| {
        for (n_out, n_in) in SHAPES {
            for offset in [0, 1] {
                check_gemv_shape_on(isa, n_out, n_in, offset);
            }
        }
        check_gemv_shape_on(isa, 4, 4096 + 3, 1);
    });
}

#[cfg(not(debug_assertions))]
#[test]
fn gemv_matches_reference_at_4096() {
    for_each_isa(|isa| check_gemv_shape_on(isa, 4096, 4096, 0));
}

#[test]
fn gemm_matches_reference_on_fixed_shapes() {
    for_each_isa(|isa| {
        for (n_out, n_in) in SHAPES {
            for m in [1, 2, 3, 5, 17] {
                check_gemm_shape_on(isa, GemmShape { m, n_in, n_out }, 1);
            }
        }
        // Crosses the K block (512), the row pass (64), the weight super-block (64) and every
        // tile remainder.
        check_gemm_shape_on(
            isa,
            GemmShape {
                m: 67,
                n_in: 1100,
                n_out: 70,
            },
            0,
        );
        check_gemm_shape_on(
            isa,
            GemmShape {
                m: 0,
                n_in: 3,
                n_out: 3,
            },
            0,
        );
    });
}

#[cfg(not(debug_assertions))]
#[test]
fn gemm_matches_reference_at_4096() {
    for_each_isa(|isa| {
        check_gemm_shape_on(
            isa,
            GemmShape {
                m: 32,
                n_in: 4096,
                n_out: 256,
            },
            0,
        )
    });
}

#[test]
fn gemv_with_empty_input_writes_zeros() {
    for_each_isa(|isa| {
        let mut y = [f32::NAN; 3];
        gemv_with(isa, &[], &[], &mut y).unwrap();
        assert_eq!(y, [0.0; 3]);
    });
}

#[test]
fn a_row_does_not_depend_on_its_block() {
    // Row 5 computed inside a 4-row block, as a single row, and as the first of a block.
    for_each_isa(|isa| {
        let n_in = 37;
        let w = values(11, 9 * n_in);
        let x = values(12, n_in);
        let mut all = [0.0; 9];
        gemv_with(isa, &w, &x, &mut all).unwrap();
        let mut one = [0.0; 1];
        gemv_with(isa, &w[5 * n_in..6 * n_in], &x, &mut one).unwrap();
        let mut from5 = [0.0; 4];
        gemv_with(isa, &w[5 * n_in..], &x, &mut from5).unwrap();
        assert_eq!(all[5].to_bits(), one[0].to_bits(), "{isa}");
        assert_eq!(
            all[5..].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            from5.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "{isa}"
        );
    });
}

#[test]
fn shape_mismatch_is_an_error() {
    let mut y = [0.0; 2];
    assert!(matches!(
        gemv(&[1.0; 5], &[1.0; 3], &mut y),
        Err(MatmulError::Shape(_))
    ));
    let pool = ThreadPool::new(2);
    assert!(matches!(
        gemv_parallel(&pool, SchedulePolicy::Static, &[1.0; 7], &[1.0; 3], &mut y),
        Err(MatmulError::Shape(_))
    ));
    let shape = GemmShape {
        m: 2,
        n_in: 3,
        n_out: 2,
    };
    let (w, x, mut y4) = ([1.0; 6], [1.0; 6], [0.0; 4]);
    assert!(gemm(shape, &w, &x, &mut y4).is_ok());
    assert!(
        matches!(gemm(shape, &w[..5], &x, &mut y4), Err(MatmulError::Shape(m)) if m.contains("w has 5"))
    );
    assert!(
        matches!(gemm(shape, &w, &x[..5], &mut y4), Err(MatmulError::Shape(m)) if m.contains("x has 5"))
    );
    assert!(
        matches!(gemm(shape, &w, &x, &mut y4[..3]), Err(MatmulError::Shape(m)) if m.contains("y has 3"))
    );
    let huge = GemmShape {
        m: usize::MAX,
        n_in: 2,
        n_out: 2,
    };
    assert!(matches!(
        gemm(huge, &w, &x, &mut y4),
        Err(MatmulError::Shape(_))
    ));
    let mut sums = [0.0; 3];
    assert!(matches!(
        stream_read(&pool, SchedulePolicy::Static, &[1.0; 7], &mut sums),
        Err(MatmulError::Shape(_))
    ));
}

#[test]
fn unavailable_isa_is_an_error() {
    for isa in Isa::ALL {
        let mut y = [0.0; 1];
        let result = gemv_with(isa, &[2.0], &[3.0], &mut y);
        if isa.is_available() {
            assert_eq!(result, Ok(()));
            assert_eq!(y, [6.0]);
        } else {
            assert_eq!(result, Err(MatmulError::UnavailableIsa(isa)));
            assert_eq!(
                isa_from_env_value(Some(isa.name())),
                Err(MatmulError::UnavailableIsa(isa))
            );
        }
    }
    assert!(Isa::Portable.is_available());
}

#[test]
fn env_value_selects_the_kernel() {
    assert_eq!(isa_from_env_value(None), Ok(Isa::best_available()));
    assert_eq!(isa_from_env_value(Some(" ")), Ok(Isa::best_available()));
    assert_eq!(isa_from_env_value(Some("portable")), Ok(Isa::Portable));
    assert_eq!(isa_from_env_value(Some(" Portable ")), Ok(Isa::Portable));
    let err = isa_from_env_value(Some("sse9")).unwrap_err();
    assert_eq!(err, MatmulError::UnknownIsa("sse9".to_string()));
    assert_eq!(
        err.to_string(),
        "unknown kernel \"sse9\" (expected portable, avx2 or avx512)"
    );
    for isa in Isa::ALL {
        assert_eq!(isa.name().parse::<Isa>(), Ok(isa));
        assert_eq!(isa.to_string(), isa.name());
        if isa.is_available() {
            assert_eq!(isa_from_env_value(Some(isa.name())), Ok(isa));
        }
    }
}

#[test]
fn best_available_matches_cpu_flags() {
    if std::path::Path::new("/proc/cpuinfo").exists() && cfg!(target_arch = "x86_64") {
        assert_eq!(Isa::best_available(), best_isa_from_cpuinfo());
    }
    assert!(Isa::best_available().is_available());
}

#[test]
fn ensured_isa_is_available() {
    for isa in ensured_isas() {
        assert!(
            isa.is_available(),
            "{ENSURE_ENV} requires the {isa} kernel, but this cpu lacks it"
        );
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

#[test]
fn parallel_results_are_bitwise_identical() {
    let pools: Vec<ThreadPool> = [1, 2, 3, 8].into_iter().map(ThreadPool::new).collect();
    for_each_isa(|isa| {
        for (n_out, n_in) in [(0, 9), (1, 33), (211, 517)] {
            let w = values(21, n_out * n_in);
            let x = values(22, n_in);
            let mut serial = vec![0.0; n_out];
            gemv_with(isa, &w, &x, &mut serial).unwrap();
            let shape = GemmShape { m: 5, n_in, n_out };
            let xm = values(23, 5 * n_in);
            let mut serial_m = vec![0.0; 5 * n_out];
            gemm_with(isa, shape, &w, &xm, &mut serial_m).unwrap();
            let mut serial_sums = vec![0.0; n_out];
            let pool1 = &pools[0];
            stream_read_with(isa, pool1, SchedulePolicy::Static, &w, &mut serial_sums).unwrap();
            for pool in &pools {
                for policy in SchedulePolicy::ALL {
                    let ctx = format!("{isa} {policy} {} threads {n_out}x{n_in}", pool.n_threads());
                    let mut y = vec![f32::NAN; n_out];
                    gemv_parallel_with(isa, pool, policy, &w, &x, &mut y).unwrap();
                    assert_eq!(bits(&y), bits(&serial), "gemv {ctx}");
                    let mut ym = vec![f32::NAN; 5 * n_out];
                    gemm_parallel_with(isa, pool, policy, shape, &w, &xm, &mut ym).unwrap();
                    assert_eq!(bits(&ym), bits(&serial_m), "gemm {ctx}");
                    let mut sums = vec![f32::NAN; n_out];
                    stream_read_with(isa, pool, policy, &w, &mut sums).unwrap();
                    assert_eq!(bits(&sums), bits(&serial_sums), "stream_read {ctx}");
                }
            }
        }
    });
}

#[test]
fn stream_read_sums_rows() {
    let pool = ThreadPool::new(2);
    for_each_isa(|isa| {
        for (n_rows, row_len) in [(0, 0), (3, 0), (1, 1), (7, 133), (33, 64)] {
            let buf = values(31, n_rows * row_len);
            let mut sums = vec![f32::NAN; n_rows];
            stream_read_with(isa, &pool, SchedulePolicy::Fixed16, &buf, &mut sums).unwrap();
            for r in 0..n_rows {
                let row = &buf[r * row_len..(r + 1) * row_len];
                check_dots(isa, "stream_read", sums[r], row, &vec![1.0; row_len]);
            }
        }
    });
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn gemv_matches_reference_on_random_shapes(
        n_out in 0usize..40, n_in in 0usize..200, offset in 0usize..4
    ) {
        for_each_isa(|isa| check_gemv_shape_on(isa, n_out, n_in, offset));
    }

    #[test]
    fn gemm_matches_reference_on_random_shapes(
        m in 0usize..12, n_out in 0usize..20, n_in in 0usize..150, offset in 0usize..4
    ) {
        for_each_isa(|isa| check_gemm_shape_on(isa, GemmShape { m, n_in, n_out }, offset));
    }
}
