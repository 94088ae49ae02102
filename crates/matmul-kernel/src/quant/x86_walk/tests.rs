//! The walk rules per vendor, row length and thread count, the walk itself, and the
//! measurement's override.

use super::{
    Fill, LONG_ROW_INPUTS, MAX_ROWS, Walk, WalkOverride, WideAccess, WideBody, WideX, compiled, l1,
    l2, walk,
};
use crate::WeightFormat;
use crate::quant::activations::{CodeLayout, quantize_for_call};

/// A scalar body over one byte per block: a step is two blocks, `Σ (i + 1)·byte`, and
/// `finish` adds an odd last block's byte times 1000, so a row's result names its bytes,
/// their order and its tail.
struct ByteSums;

impl WideBody for ByteSums {
    type Acc = f32;
    const STEP_BLOCKS: usize = 2;
    const STEP_BYTES: usize = 2;
    const LINES: usize = 1;

    unsafe fn zero() -> f32 {
        0.0
    }

    unsafe fn step(&self, row: *const u8, _: WideX, i: usize, acc: &mut f32) {
        // SAFETY: the test's rows hold their blocks' bytes.
        let (a, b) = unsafe { (*row.add(2 * i), *row.add(2 * i + 1)) };
        *acc += (i + 1) as f32 * (f32::from(a) + f32::from(b));
    }

    unsafe fn finish(&self, acc: f32, row: *const u8, _: WideX, nb: usize) -> f32 {
        if nb.is_multiple_of(2) {
            return acc;
        }
        // SAFETY: the row's last block's byte.
        acc + 1000.0 * f32::from(unsafe { *row.add(nb - 1) })
    }
}

#[test]
fn every_walk_gives_every_row_its_own_dot_product() {
    let x = vec![0.5f32; 32];
    let acts_blocks = quantize_for_call(WeightFormat::Q8_0, CodeLayout::WideGemv, &x, 32);
    let acts = acts_blocks.activations(&x, 0);
    for nb in [1, 2, 5] {
        for n_rows in 0..15 {
            let w: Vec<u8> = (0..n_rows * nb).map(|i| (i * 7 % 23) as u8).collect();
            let expected: Vec<f32> = w
                .chunks(nb.max(1))
                .map(|row| {
                    let steps: f32 = (0..nb / 2)
                        .map(|i| (i + 1) as f32 * f32::from(row[2 * i] + row[2 * i + 1]))
                        .sum();
                    steps
                        + if nb % 2 == 1 {
                            1000.0 * f32::from(row[nb - 1])
                        } else {
                            0.0
                        }
                })
                .collect();
            for streams in 1..=MAX_ROWS {
                // No prefetch, the body's lines into L1 and into L2 (compiled for rows 1, 3
                // and 6), and lines no rule asks for (counted at run time).
                for access in [
                    l1(0, 0, streams),
                    l1(64, 1, streams),
                    l2(64, 1, streams),
                    l1(64, 3, streams),
                ] {
                    let mut y = vec![f32::NAN; n_rows];
                    let xw = WideX::of(&acts, access);
                    // SAFETY: `w` holds `n_rows` rows of `nb` bytes; `ByteSums` reads only
                    // them.
                    unsafe { walk(&ByteSums, w.as_ptr(), nb, xw, nb, &mut y) };
                    assert_eq!(y, expected, "{nb} blocks, {n_rows} rows, {access:?}");
                }
            }
        }
    }
}

#[test]
fn each_vendor_takes_its_own_access_rule() {
    use WeightFormat::{Q4_0, Q4K, Q6K, Q8_0};
    for n_in in [
        32,
        4096,
        LONG_ROW_INPUTS - 256,
        LONG_ROW_INPUTS,
        14336,
        28672,
    ] {
        for threads in [0, 1, 2, 16] {
            assert_eq!(
                WideAccess::of_vendor(b"GenuineIntel", n_in, threads),
                WideAccess::INTEL
            );
            let amd = match (n_in < LONG_ROW_INPUTS, threads <= 1) {
                (false, true) => WideAccess::AMD_LONG_ROWS_ONE_THREAD,
                (false, false) => WideAccess::AMD_LONG_ROWS,
                (true, true) => WideAccess::AMD_ONE_THREAD,
                (true, false) => WideAccess::AMD,
            };
            let what = format!("{n_in} inputs, {threads} threads");
            assert_eq!(
                WideAccess::of_vendor(b"AuthenticAMD", n_in, threads),
                amd,
                "{what}"
            );
            // Any other CPU takes the rule measured first (AMD's).
            assert_eq!(
                WideAccess::of_vendor(b"HygonGenuine", n_in, threads),
                amd,
                "{what}"
            );
            // This CPU's is one of the two (with the override of a `walk-override` build
            // applied), and the same on every call.
            let this = WideAccess::this_cpu(n_in, threads);
            let over = WalkOverride::current();
            assert!(this == over.access(WideAccess::INTEL) || this == over.access(amd));
            assert_eq!(this, WideAccess::this_cpu(n_in, threads));
        }
    }
    // The rules differ. Three rows at once on Intel and on AMD's long rows; on AMD's
    // short rows one, but three for the 4-bit bodies and q6_K when one thread runs the call.
    assert_ne!(WideAccess::INTEL, WideAccess::AMD);
    for format in [Q8_0, Q4_0, Q4K, Q6K] {
        assert_eq!(WideAccess::INTEL.of(format).rows, 3, "{format}");
        assert_eq!(WideAccess::AMD_LONG_ROWS.of(format).rows, 3, "{format}");
        assert_eq!(WideAccess::AMD.of(format).rows, 1, "{format}");
        let one_thread = if format == Q8_0 { 1 } else { 3 };
        assert_eq!(
            WideAccess::AMD_ONE_THREAD.of(format).rows,
            one_thread,
            "{format}"
        );
        // Intel fills L1 4 KiB ahead; AMD 2 KiB ahead, but q6_K's long rows L2 4 KiB.
        assert_eq!(WideAccess::INTEL.of(format).ahead, 4096);
        assert_eq!(WideAccess::INTEL.of(format).fill, Fill::L1);
        assert_eq!(WideAccess::AMD.of(format).ahead, 2048);
        assert_eq!(WideAccess::AMD.of(format).fill, Fill::L1);
        let long = WideAccess::AMD_LONG_ROWS.of(format);
        let q6_k = format == Q6K;
        assert_eq!(long.ahead, if q6_k { 4096 } else { 2048 }, "{format}");
        assert_eq!(
            long.fill,
            if q6_k { Fill::L2 } else { Fill::L1 },
            "{format}"
        );
    }
    // AMD's one-thread rules differ from its rules of several threads in that alone:
    // on short rows the 4-bit bodies and q6_K read three rows, on long rows the 4-bit ones
    // six.
    assert_eq!(
        WideAccess::AMD_ONE_THREAD.map(|format, walk| match format {
            Q4_0 | Q4K | Q6K => Walk { rows: 1, ..walk },
            _ => walk,
        }),
        WideAccess::AMD
    );
    let long_one = WideAccess::AMD_LONG_ROWS_ONE_THREAD;
    assert_eq!(long_one.q8_0, WideAccess::AMD_LONG_ROWS.q8_0);
    assert_eq!(
        (long_one.q4_0.rows, long_one.q4_k.rows),
        (MAX_ROWS, MAX_ROWS)
    );
    assert_eq!(
        long_one.map(|format, walk| match format {
            Q4_0 | Q4K => Walk { rows: 3, ..walk },
            _ => walk,
        }),
        WideAccess::AMD_LONG_ROWS
    );
    // Lines per step: q4_0 one per 72-byte group, q4_K two per super-block everywhere;
    // q8_0 five on Intel, none on AMD; q6_K four on Intel and on AMD's long rows, none on
    // AMD's short ones.
    for rule in [
        WideAccess::INTEL,
        WideAccess::AMD,
        WideAccess::AMD_ONE_THREAD,
        WideAccess::AMD_LONG_ROWS,
    ] {
        assert_eq!((rule.q4_0.lines, rule.q4_k.lines), (1, 2));
    }
    for (rule, q8_0, q6_k) in [
        (WideAccess::INTEL, 5, 4),
        (WideAccess::AMD_LONG_ROWS, 0, 4),
        (WideAccess::AMD_LONG_ROWS_ONE_THREAD, 0, 4),
        (WideAccess::AMD, 0, 0),
        (WideAccess::AMD_ONE_THREAD, 0, 0),
    ] {
        assert_eq!((rule.q8_0.lines, rule.q6_k.lines), (q8_0, q6_k));
    }
    // A format without a body of its own takes q8_0's walk.
    assert_eq!(WideAccess::AMD.of(WeightFormat::F16), WideAccess::AMD.q8_0);
}

#[test]
fn a_walk_override_replaces_only_the_fields_it_sets() {
    assert_eq!(WalkOverride::parse(""), Ok(WalkOverride::default()));
    assert_eq!(
        WalkOverride::default().access(WideAccess::AMD),
        WideAccess::AMD
    );
    assert_eq!(WalkOverride::default().to_string(), "rules");
    let o = WalkOverride::parse(" ahead=4096, q8_0=0,streams=2 ,float=l1").unwrap();
    let amd = o.access(WideAccess::AMD);
    let q8_0 = amd.q8_0;
    assert_eq!((q8_0.ahead, q8_0.lines, q8_0.rows), (4096, 0, 2));
    assert_eq!((amd.q6_k.ahead, amd.q6_k.rows), (4096, 2));
    assert_eq!(amd.q6_k.lines, WideAccess::AMD.q6_k.lines);
    assert_eq!(amd.q4_k.rows, WideAccess::AMD.q4_k.rows);
    assert_eq!(amd.q4_0.fill, WideAccess::AMD.q4_0.fill);
    assert_eq!(o.float_fill, Some(Fill::L1));
    // Its text parses back to itself.
    assert_eq!(o.to_string(), "ahead=4096,q8_0=0,streams=2,float=l1");
    assert_eq!(WalkOverride::parse(&o.to_string()), Ok(o));
    let q4 = WalkOverride::parse("q4_streams=3,fill=l2").unwrap();
    let amd = q4.access(WideAccess::AMD);
    assert_eq!((amd.q4_0.rows, amd.q4_k.rows), (3, 3));
    assert_eq!(
        (amd.q8_0.rows, amd.q6_k.rows),
        (WideAccess::AMD.q8_0.rows, WideAccess::AMD.q6_k.rows)
    );
    for format in [WeightFormat::Q8_0, WeightFormat::Q4_0, WeightFormat::Q6K] {
        assert_eq!(amd.of(format).fill, Fill::L2);
    }
    assert_eq!(q4.float_fill, None);
    assert_eq!(WalkOverride::parse(&q4.to_string()), Ok(q4));
    let q6 = WalkOverride::parse("q6_K=2,float=l2").unwrap();
    assert_eq!(q6.access(WideAccess::INTEL).q6_k.lines, 2);
    assert_eq!(q6.access(WideAccess::INTEL).q8_0, WideAccess::INTEL.q8_0);
}

#[test]
fn a_walk_override_out_of_range_or_unknown_is_refused() {
    for bad in [
        "ahead",
        "ahead=",
        "ahead=x",
        "ahead=-1",
        "ahead=16385",
        "q8_0=9",
        "q6_K=99999999999999999999999",
        "streams=0",
        "streams=7",
        "q4_streams=0",
        "fill=l3",
        "fill=",
        "float=l3",
        "float=",
        "Streams=2",
        "prefetch=1",
        "ahead=1024,bogus",
    ] {
        let err = WalkOverride::parse(bad).unwrap_err();
        assert!(!err.is_empty(), "{bad}");
    }
    assert!(
        WalkOverride::parse("streams=7")
            .unwrap_err()
            .contains("1 to 6")
    );
}

#[test]
fn the_float_prefetch_fills_l1_on_intel_and_l2_elsewhere() {
    assert_eq!(Fill::float_of_vendor(b"GenuineIntel"), Fill::L1);
    assert_eq!(Fill::float_of_vendor(b"AuthenticAMD"), Fill::L2);
    assert_eq!(Fill::float_of_vendor(b"HygonGenuine"), Fill::L2);
    let this = Fill::float_this_cpu();
    assert_eq!(this, Fill::float_this_cpu());
    let intel = crate::isa::cpuid_vendor() == Some(*b"GenuineIntel");
    let rule = if intel { Fill::L1 } else { Fill::L2 };
    assert_eq!(this, WalkOverride::current().float_fill.unwrap_or(rule));
}

#[test]
fn a_walk_is_compiled_for_the_rows_and_lines_the_rules_take() {
    // `ByteSums` asks for one line a step.
    for rows in 1..=MAX_ROWS {
        let rule_rows = [1, 3, MAX_ROWS].contains(&rows);
        assert_eq!(
            compiled::<ByteSums>(l1(64, 0, rows)),
            rule_rows,
            "{rows} rows"
        );
        assert_eq!(
            compiled::<ByteSums>(l2(4096, 1, rows)),
            rule_rows,
            "{rows} rows"
        );
        assert!(
            !compiled::<ByteSums>(l1(64, 2, rows)),
            "{rows} rows, two lines"
        );
    }
}
