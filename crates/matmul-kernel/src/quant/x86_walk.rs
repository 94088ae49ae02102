//! How the GEMV bodies of `quant/x86_wide.rs` (the 512-bit ones and q4_0's AVX2 one) walk a
//! thread's rows: where a row of activations lies for them (`WideX`), the rule per CPU vendor
//! (`WideAccess`: how far ahead to prefetch, and how many rows to read at once; on AMD by row
//! length and by how many threads share the call too), and the walk itself; beside them the
//! float GEMV's rule of the same kind (`Fill`: which cache its prefetch fills), and a
//! measurement's override of both (`WalkOverride`, read only by a build with the
//! `walk-override` feature, from `SIPLLM_WALK` or set call by call). Each body is a
//! [`WideBody`], one step (a group of blocks or a super-block) at a time, so that `walk` can
//! take several rows far apart together, one step of each in turn, asking for each step's
//! lines itself (`Prefetch`, compiled in for every rule's walk, so that the step holds no loop
//! or branch). A row's operations and their order are the same whichever rows walk beside it,
//! so the results are too.

use super::activations::Activations;
use super::format::WeightFormat;
use super::x86_int::XRow;
use std::arch::x86_64::{_MM_HINT_T0, _MM_HINT_T1, _mm_prefetch};

/// Where one row of activations lies for these bodies: the codes in `format`'s wide order,
/// q6_K's sums per 16 codes, and each block's `d` and `d·sum`.
#[derive(Clone, Copy)]
pub(super) struct WideX {
    pub(super) codes: *const i8,
    pub(super) sums16: *const f32,
    pub(super) d: *const f32,
    pub(super) d_sum: *const f32,
    pub(super) blocks: XRow,
    pub(super) walk: Walk,
}

impl WideX {
    /// The pointers of `acts`, walked by `walk`.
    pub(super) fn of(acts: &Activations<'_>, walk: Walk) -> WideX {
        WideX {
            codes: acts.wide().lines.as_ptr() as *const i8,
            sums16: acts.wide().sums16.as_ptr(),
            d: acts.d().as_ptr(),
            d_sum: acts.d_sum().as_ptr(),
            blocks: XRow::of(acts),
            walk,
        }
    }
}

/// How one body of `x86_wide.rs` walks a thread's rows: how far ahead of the bytes it reads
/// it asks for them, how many lines per step, into which cache, and how many rows it reads
/// at once. A prefetch past the matrix's end reads nothing and cannot fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Walk {
    /// Bytes ahead of the step being read.
    pub(super) ahead: usize,
    /// Lines asked for per step, 0 for none (a q8_0 step is 272 bytes, q4_0's 72, a q4_K
    /// super-block 144, a q6_K one 210).
    pub(super) lines: usize,
    /// Rows read at once, one step of each in turn (1 to [`MAX_ROWS`]): with 3, rows `r`,
    /// `r + h` and `r + 2h` of a thread's `3h`, three streams far apart in memory.
    pub(super) rows: usize,
    /// The cache the prefetch fills.
    pub(super) fill: Fill,
}

/// A [`Walk`] that fills L1.
const fn l1(ahead: usize, lines: usize, rows: usize) -> Walk {
    Walk {
        ahead,
        lines,
        rows,
        fill: Fill::L1,
    }
}

/// A [`Walk`] that fills L2.
const fn l2(ahead: usize, lines: usize, rows: usize) -> Walk {
    Walk {
        fill: Fill::L2,
        ..l1(ahead, lines, rows)
    }
}

/// How the bodies of `x86_wide.rs` walk the weights, a [`Walk`] per format, a rule per CPU
/// vendor (on AMD, per row length and thread count too) from each vendor's measurements from
/// DRAM (interleaved in one run each; `docs/matmul-kernel.md`, "Both vendors").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WideAccess {
    pub(super) q8_0: Walk,
    pub(super) q4_0: Walk,
    pub(super) q4_k: Walk,
    pub(super) q6_k: Walk,
}

impl WideAccess {
    /// AMD Zen 4 (and every CPU not named): 2 KiB gave q4_0 about 8% and q4_K 15% over the
    /// hardware's prefetch alone at one thread (1.5 and 3 KiB less); for q6_K one to three
    /// lines per super-block were 10–20% slower than none, and for q8_0 (revision 13) its
    /// five lines per step slower than none: at one thread 0.86–1.00 → 1.04–1.22 of the
    /// same-size read at 4096 × 4096, 0.94–1.13 → 0.98–1.25 at 14336 × 4096 and 0.68–0.73 →
    /// 0.85–1.14 at 4096 × 11008, at two threads level (0.88–1.15 against 0.95–1.28 at the
    /// first two), two lines no better (interleaved runs of `examples/qgemv_vs_read`, six
    /// rounds each, on a 2-vCPU EPYC VM, 2026-12-04; another VM of that kind measured the
    /// same a few hours before). One row at a time (the rule these bodies were
    /// measured with there), on rows shorter than [`LONG_ROW_INPUTS`] split over two threads
    /// or more (one thread: [`WideAccess::AMD_ONE_THREAD`]). q6_K read three rows at once
    /// here in revisions 26 to 29: alternated call by call in one process
    /// (`QGEMV_WALKS=';streams=3'`, 2026-12-05), three rows against one were level from DRAM
    /// at two threads (0.94–1.08 of the same-size read against 0.99–1.06 at 4096 × 4096 and
    /// 14336 × 4096) and ahead on one 14336 × 4096 matrix called over and over (48 MB, in part
    /// in the 32 MiB L3, as llama.cpp's `test-backend-ops` reads its buffer: 37.5–40.8 →
    /// 47.2–50.0 GB/s in two runs, 36.5–37.7 → 38.7–41.1 in two more). Later that day
    /// (revision 30, `QGEMV_WALKS=';streams=1'`, sixteen runs of 5 to 9 rounds at two
    /// threads from DRAM) three rows fell in five runs of the sixteen, to 0.47–0.70 of the
    /// read in four and 22 % below one row in the fifth, while one row, alternated call by
    /// call with them, held 0.92–0.98 in each; in the other eleven the two stayed within 0.08
    /// of each other (three rows 0.86–1.02, one 0.93–1.07), and on the one matrix level
    /// (1.05–1.08 against 1.03–1.04). A walk that can lose half the read from DRAM is the
    /// wrong default for weights that stream from DRAM, so every format reads one row here.
    pub(crate) const AMD: WideAccess = WideAccess {
        q8_0: l1(2048, 0, 1),
        q4_0: l1(2048, 1, 1),
        q4_k: l1(2048, 2, 1),
        q6_k: l1(2048, 0, 1),
    };

    /// Intel (Sapphire Rapids-class Xeon): 4 KiB against 2 KiB took q4_0 from 0.81 to 0.92
    /// of the same-size read at one thread and from 0.87 to 0.97 at two, q4_K from 0.83 to
    /// 0.92 and 0.91 (3 KiB between, 6–12 KiB the same); q6_K with four lines per
    /// super-block at 4 KiB from 0.70 to 0.88 at one and two threads (two lines 0.85, three
    /// 0.86), q8_0 from 0.80 to 0.82–0.86. Three rows far apart at once (revision 9), against
    /// one, took the four formats from 0.76–0.84 to 0.88–0.95 at one and two threads at
    /// 14336 × 4096 and 4096 × 14336 (interleaved in one run of `examples/qgemv_vs_read`);
    /// two rows gave about two thirds of that, four no more than three, and 2 KiB ahead the
    /// same as 4 KiB. Without the prefetch one row at a time fell to 0.44 (q4_K). q4_0's AVX2
    /// body on three rows (revision 10), against one: 0.81–0.92 to 0.89–0.99 at the three
    /// shapes, one and two threads.
    pub(crate) const INTEL: WideAccess = WideAccess {
        q8_0: l1(4096, 5, 3),
        q4_0: l1(4096, 1, 3),
        q4_k: l1(4096, 2, 3),
        q6_k: l1(4096, 4, 3),
    };

    /// AMD Zen 4 on rows of [`LONG_ROW_INPUTS`] inputs or more: Intel's walk, but 2 KiB ahead
    /// (revision 14). There one row
    /// at a time fell to 0.42–0.65 of the same-size read at one thread (0.90–1.0 at 4096
    /// inputs), likely because a row's activations (14 KiB of codes at 14336 inputs, beside
    /// their scales and sums) no longer stay in the 32 KiB L1 beside the weights' stream, so
    /// every row reads them again; three rows share each load of them. Against one row,
    /// interleaved in one run of `examples/qgemv_vs_read` (two rounds of each, 2026-12-04),
    /// at 4096 × 14336, one / two threads: q4_0 0.57–0.59 → 0.68–0.74 / 0.76 → 0.82–0.89, q4_K
    /// 0.58–0.63 → 0.69–0.72 / 0.67–0.70 → 0.76–0.83, q6_K 0.45–0.48 → 0.61–0.70 / 0.55–0.59
    /// → 0.62–0.84, q8_0 0.59–0.65 → 0.62–0.70 / 0.77 → 0.76–0.82; at 2048 × 28672 every
    /// format 0.42–0.59 → 0.67–0.77 / 0.49–0.76 → 0.67–0.84. Three rows with AMD's 2 KiB and
    /// no q6_K lines gained less (q6_K about 0.6 at 14336). At 4096, 6144 and 8192 inputs one
    /// row stayed ahead, at 11008 the two were level. q8_0 kept its five lines here until
    /// revision 43 (below): without them it fell at 4096 × 14336 from 0.84–1.01 to 0.61–0.78
    /// of the read at one thread in revision 14's build.
    /// 2 KiB ahead against Intel's 4 KiB, interleaved in two runs (six rounds of each) at
    /// 4096 × 14336: at one thread every round of every format gained (q8_0 0.89–0.93 →
    /// 0.96–1.04, q4_0 0.70–0.78 → 0.77–0.87, q4_K 0.72–0.78 → 0.80–0.84, q6_K 0.75–0.79
    /// → 0.83–0.89), at two threads level (0.82–0.95 against 0.82–1.03); at 2048 × 28672
    /// level (1 and 3 KiB no better). A third run, revision 13 against 14 (three rounds each):
    /// at one thread q8_0 0.92–1.03 → 1.00–1.04, the others 0.73–0.94 → 0.79–0.96, at two
    /// threads level; a small gain, but no round measured a loss at one thread.
    ///
    /// q6_K here asks for its lines 4 KiB ahead into L2 (`prefetcht1`; revision 21): its
    /// 210-byte super-blocks cost the most instructions per byte, and its four lines a step
    /// into L1 left it at 0.77–0.83 of the same-size read at one thread. Alternated call by
    /// call in one process (`QGEMV_WALKS`, two or three runs per shape, 2026-12-04), 4 KiB
    /// into L2 against the rule: one thread 0.75–0.89 → 0.91–1.06 at 4096 × 14336,
    /// 0.78 → 1.02 at 2048 × 28672, 0.83 → 1.04 at 4096 × 12288; two threads 0.91–0.98 →
    /// 1.00–1.03, 0.96 → 1.00, 0.86 → 1.01. Into L2 2 KiB ahead gained half as much; the
    /// 4-bit bodies lost with L2 (q4_K 0.76–0.85 → 0.56–0.69 at one thread), q8_0 gained at
    /// one thread (0.84–0.91 → 0.94–1.14) and lost at two (0.96–1.06 → 0.92–1.05), so they
    /// keep L1. Revision 20's build against 21's, three rounds each: q6_K 0.78–0.82 →
    /// 1.01–1.06 and 0.77–0.81 → 1.00–1.02 at one thread of 4096 × 14336 and 2048 × 28672,
    /// 0.84–0.96 → 0.97–1.01 and 0.72–0.97 → 0.94–0.97 at two; the other formats level.
    ///
    /// q8_0 here asks for no lines (revision 43), as on AMD's short rows: after revision 38
    /// compiled each step's prefetch into the walk, its five lines a step lost on this
    /// rule's rows. Alternated call by call in one process (`QGEMV_WALKS=';q8_0=0'` and
    /// `';streams=6,q8_0=0;streams=3,q8_0=0;streams=1,q8_0=0'`, seven rounds each, a 2-vCPU
    /// EPYC VM, Zen 4, 2026-12-07), against revision 42's rule (five lines 2 KiB ahead into
    /// L1 at two threads, 4 KiB ahead into L2 at one): at one thread 0.82–0.86 → 0.97–1.11 of
    /// the same-size read at 4096 × 14336 (five runs), 0.82 → 1.04 at 4096 × 12288, 0.84 →
    /// 1.08 and 1.02 → 1.16 at 2048 × 28672; at two threads 0.78 → 0.88 and 0.71 → 0.79 at
    /// 4096 × 14336, 1.08 → 1.16 at 2048 × 28672. Six rows without lines were level with
    /// three (0.98–1.17 against 0.97–1.11 at one thread) and one row fell to 0.55–0.73.
    pub(crate) const AMD_LONG_ROWS: WideAccess = WideAccess {
        q8_0: l1(2048, 0, 3),
        q4_0: l1(2048, 1, 3),
        q4_k: l1(2048, 2, 3),
        q6_k: l2(4096, 4, 3),
    };

    /// AMD Zen 4 on rows shorter than [`LONG_ROW_INPUTS`] when one thread runs the whole
    /// call: [`WideAccess::AMD`], but the 4-bit bodies read three rows at once
    /// (`KERNEL_REVISION` 20), and q6_K too (three rows since revision 26, kept at one thread
    /// in revision 30: 0.96–1.01 of the read against 0.91–0.99 for one row in four runs of
    /// nine rounds at 4096 × 4096). On one thread there they reached 0.73–0.80 of the same-size
    /// read from DRAM, one row at a time, while from cache the q4_0 body ran above that
    /// read; three rows took q4_0 from 0.74–0.78 to 0.93 at 4096 × 4096 and from 0.80–0.85
    /// to 0.92–0.94 at 14336 × 4096, q4_K from 0.78–0.83 to 0.96–1.00 and from 0.85–0.89 to
    /// 1.02–1.05; q6_K was level (0.88–0.99 either way), q8_0 lost (one row 1.02–1.17, three
    /// 0.83–1.07). On two threads of two cores three rows were level at 4096 × 4096 and lost
    /// at 14336 × 4096 (q4_0 0.95–1.01 → 0.84–0.98, q4_K 1.03–1.11 → 0.83–1.09), so
    /// [`WideAccess::AMD`] stays the rule there (three rounds of each, alternated call by call
    /// in runs of `examples/qgemv_vs_read` with `QGEMV_WALKS`, a 2-vCPU EPYC VM, 2026-12-04;
    /// the 512-bit bodies; the AVX2 q4_0 body of AMD CPUs without VNNI follows the same rule
    /// unmeasured).
    pub(crate) const AMD_ONE_THREAD: WideAccess = WideAccess {
        q4_0: l1(2048, 1, 3),
        q4_k: l1(2048, 2, 3),
        q6_k: l1(2048, 0, 3),
        ..WideAccess::AMD
    };

    /// AMD Zen 4 on rows of [`LONG_ROW_INPUTS`] inputs or more when one thread runs the whole
    /// call: [`WideAccess::AMD_LONG_ROWS`], but the 4-bit bodies read six rows at once
    /// (revision 24). (From revision 22 to 42 q8_0 asked here for its five lines a step 4 KiB
    /// ahead into L2, as q6_K does: at one thread 0.84–0.91 → 0.94–1.10 of the same-size read
    /// at 4096 × 14336 against five lines into L1, 2026-12-04; revision 43 asks for none, as
    /// [`WideAccess::AMD_LONG_ROWS`] says.) Six rows against three
    /// (`QGEMV_WALKS=';q4_streams=6'`, five runs at 4096 × 14336 and four at 2048 × 28672,
    /// 2026-12-05): at one thread q4_0 0.73–0.83 → 0.78–0.87 and 0.70–0.76 → 0.70–0.83, q4_K
    /// 0.70–0.81 → 0.76–0.84 and 0.69–0.71 → 0.75–0.79; at 4096 × 12288 level; at two threads
    /// level or lower for q4_K (0.89–0.96 → 0.87–0.94), so two threads keep three. From cache
    /// the bodies run about as fast as the read from DRAM at one thread, and more rows far
    /// apart keep more of the weights' lines in flight while they compute.
    pub(crate) const AMD_LONG_ROWS_ONE_THREAD: WideAccess = WideAccess {
        q4_0: l1(2048, 1, MAX_ROWS),
        q4_k: l1(2048, 2, MAX_ROWS),
        ..WideAccess::AMD_LONG_ROWS
    };

    /// The walk of `format`'s body (q8_0's for a format without one).
    pub(super) fn of(&self, format: WeightFormat) -> Walk {
        match format {
            WeightFormat::Q4_0 => self.q4_0,
            WeightFormat::Q4K => self.q4_k,
            WeightFormat::Q6K => self.q6_k,
            _ => self.q8_0,
        }
    }

    /// Every format's walk changed by `f`.
    fn map(self, f: impl Fn(WeightFormat, Walk) -> Walk) -> WideAccess {
        WideAccess {
            q8_0: f(WeightFormat::Q8_0, self.q8_0),
            q4_0: f(WeightFormat::Q4_0, self.q4_0),
            q4_k: f(WeightFormat::Q4K, self.q4_k),
            q6_k: f(WeightFormat::Q6K, self.q6_k),
        }
    }

    /// The rule for a CPUID vendor string and rows of `n_in` inputs split over `threads`.
    pub(crate) fn of_vendor(cpuid_vendor: &[u8], n_in: usize, threads: usize) -> WideAccess {
        match cpuid_vendor {
            b"GenuineIntel" => WideAccess::INTEL,
            _ if n_in >= LONG_ROW_INPUTS && threads <= 1 => WideAccess::AMD_LONG_ROWS_ONE_THREAD,
            _ if n_in >= LONG_ROW_INPUTS => WideAccess::AMD_LONG_ROWS,
            _ if threads <= 1 => WideAccess::AMD_ONE_THREAD,
            _ => WideAccess::AMD,
        }
    }

    /// The rule for this CPU (its CPUID vendor string) and rows of `n_in` inputs split over
    /// `threads`, with a measurement's [`WalkOverride`] applied (none without the
    /// `walk-override` feature).
    pub(crate) fn this_cpu(n_in: usize, threads: usize) -> WideAccess {
        let vendor = crate::isa::cpuid_vendor().unwrap_or_default();
        WalkOverride::current().access(WideAccess::of_vendor(&vendor, n_in, threads))
    }
}

/// The most rows a [`Walk`] reads at once.
pub(crate) const MAX_ROWS: usize = 6;

/// Inputs per row from which AMD's rule walks as [`WideAccess::AMD_LONG_ROWS`]: between the
/// 11008 inputs where one row and three were level and the 14336 where three won.
pub(crate) const LONG_ROW_INPUTS: usize = 12288;

/// The cache a prefetch fills: a field of each quantized body's [`Walk`], and for the 16-lane
/// float GEMV a rule of its own per CPU vendor ([`Fill::float_of_vendor`]). AMD Zen 4 (and every CPU not named): L2 (`prefetcht1`,
/// 4 KiB ahead from revision 15, 8 KiB from 27, `FLOAT_L2_PREFETCH_AHEAD` in
/// `quant/x86_float.rs`; L1 1 KiB).
/// On one 2-vCPU EPYC VM `prefetcht1` gained as much as `prefetcht0` over no prefetch (the
/// measurement at `FLOAT_PREFETCH_AHEAD` in `quant/x86_float.rs`); on another (2026-12-04)
/// `prefetcht0` cost a quarter of the read (f16 at 4096 × 4096, one thread: none 0.89–0.91,
/// `prefetcht0` 0.65–0.68, `prefetcht1` 0.87–0.95) and `prefetcht1` measured 0.87–1.22 of the read in every float cell of three
/// shapes at one and two threads, `prefetcht0` 0.65–0.90, none 0.83–1.05 (interleaved in one
/// run of `examples/qgemv_vs_read`; `docs/matmul-kernel.md`, "The float prefetch on this
/// VM"). Intel: L1 (`prefetcht0`), the rule its tables were measured with, until an Intel
/// machine measures `prefetcht1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fill {
    /// `prefetcht0`.
    L1,
    /// `prefetcht1`.
    L2,
}

impl Fill {
    /// The float GEMV's rule for a CPUID vendor string.
    pub(crate) fn float_of_vendor(cpuid_vendor: &[u8]) -> Fill {
        match cpuid_vendor {
            b"GenuineIntel" => Fill::L1,
            _ => Fill::L2,
        }
    }

    /// The float GEMV's rule for this CPU (its CPUID vendor string), with a measurement's
    /// [`WalkOverride`] applied (none without the `walk-override` feature).
    pub(crate) fn float_this_cpu() -> Fill {
        let rule = Fill::float_of_vendor(&crate::isa::cpuid_vendor().unwrap_or_default());
        WalkOverride::current().float_fill.unwrap_or(rule)
    }
}

/// The largest prefetch distance an override may set, in bytes.
#[cfg(any(test, feature = "walk-override"))]
const MAX_AHEAD: usize = 16 << 10;

/// The most lines per step an override may ask for (q8_0's step spans five).
#[cfg(any(test, feature = "walk-override"))]
const MAX_LINES: usize = 8;

/// A measurement's override of the rules above, so that one build can time one setting
/// against another, alternated in one run (`examples/qgemv_vs_read`): each field it sets
/// replaces the rule's. Only a build with the `walk-override` feature reads it, from
/// `SIPLLM_WALK` (`ahead=4096,q8_0=5,q6_K=4,streams=3,float=l1`, any of the keys): without
/// the feature the rules are the only walk, so no tuned profile measures an override.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct WalkOverride {
    ahead: Option<usize>,
    q8_0_lines: Option<usize>,
    q6_k_lines: Option<usize>,
    streams: Option<usize>,
    q4_streams: Option<usize>,
    fill: Option<Fill>,
    float_fill: Option<Fill>,
}

impl WalkOverride {
    /// Parses `key=value` pairs separated by commas: `ahead` (bytes, 0 to 16384, every
    /// quantized body's), `q8_0` and `q6_K` (those bodies' lines per step, 0 to 8), `streams`
    /// (rows at once of the q8_0 and q6_K bodies, 1 to 6), `q4_streams` (of q4_0's and q4_K's),
    /// `fill` (the cache every quantized body's prefetch fills, `l1` or `l2`) and `float` (the
    /// float GEMV's, `l1` or `l2`); an empty text overrides nothing. (Only a `walk-override`
    /// build and the tests parse one.)
    #[cfg(any(test, feature = "walk-override"))]
    pub(crate) fn parse(text: &str) -> Result<WalkOverride, String> {
        let mut o = WalkOverride::default();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| format!("{item:?} is not key=value"))?;
            let number = |min: usize, max: usize| {
                value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (min..=max).contains(n))
                    .ok_or_else(|| format!("{key}={value:?}: expected {min} to {max}"))
            };
            match key {
                "ahead" => o.ahead = Some(number(0, MAX_AHEAD)?),
                "q8_0" => o.q8_0_lines = Some(number(0, MAX_LINES)?),
                "q6_K" => o.q6_k_lines = Some(number(0, MAX_LINES)?),
                "streams" => o.streams = Some(number(1, MAX_ROWS)?),
                "q4_streams" => o.q4_streams = Some(number(1, MAX_ROWS)?),
                "fill" | "float" => {
                    let fill = match value {
                        "l1" => Fill::L1,
                        "l2" => Fill::L2,
                        _ => return Err(format!("{key}={value:?}: expected l1 or l2")),
                    };
                    if key == "fill" {
                        o.fill = Some(fill);
                    } else {
                        o.float_fill = Some(fill);
                    }
                }
                _ => {
                    return Err(format!(
                        "unknown key {key:?} (expected ahead, q8_0, q6_K, streams, q4_streams, \
                         fill or float)"
                    ));
                }
            }
        }
        Ok(o)
    }

    /// `rule` with the fields this override sets replaced.
    pub(crate) fn access(self, rule: WideAccess) -> WideAccess {
        rule.map(|format, walk| {
            let four_bit = matches!(format, WeightFormat::Q4_0 | WeightFormat::Q4K);
            let lines = match format {
                WeightFormat::Q8_0 => self.q8_0_lines,
                WeightFormat::Q6K => self.q6_k_lines,
                _ => None,
            };
            let rows = if four_bit {
                self.q4_streams
            } else {
                self.streams
            };
            Walk {
                ahead: self.ahead.unwrap_or(walk.ahead),
                lines: lines.unwrap_or(walk.lines),
                rows: rows.unwrap_or(walk.rows),
                fill: self.fill.unwrap_or(walk.fill),
            }
        })
    }

    /// The override [`WalkOverride::set`] last set, else `SIPLLM_WALK`'s, read once, when
    /// it parses (else none; `walk_override` in the crate root says why).
    #[cfg(feature = "walk-override")]
    fn current() -> WalkOverride {
        static ENV: std::sync::OnceLock<WalkOverride> = std::sync::OnceLock::new();
        let set = *SET
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        set.unwrap_or_else(|| *ENV.get_or_init(|| WalkOverride::env().ok().unwrap_or_default()))
    }

    /// Replaces the override of every later call in this process (`SIPLLM_WALK`'s
    /// included) by `text`'s, so that a measurement can alternate two settings call by
    /// call; a text that does not parse changes nothing.
    #[cfg(feature = "walk-override")]
    pub(crate) fn set(text: &str) -> Result<WalkOverride, String> {
        let o = WalkOverride::parse(text)?;
        *SET.write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(o);
        Ok(o)
    }

    /// None: only a build with the `walk-override` feature reads one.
    #[cfg(not(feature = "walk-override"))]
    fn current() -> WalkOverride {
        WalkOverride::default()
    }

    /// `SIPLLM_WALK` parsed (none when it is unset), or why it does not parse.
    #[cfg(feature = "walk-override")]
    pub(crate) fn env() -> Result<WalkOverride, String> {
        match std::env::var(crate::WALK_ENV) {
            Ok(text) => WalkOverride::parse(&text),
            Err(std::env::VarError::NotPresent) => Ok(WalkOverride::default()),
            Err(e) => Err(e.to_string()),
        }
    }
}

#[cfg(any(test, feature = "walk-override"))]
impl std::fmt::Display for WalkOverride {
    /// The set fields as `key=value` pairs, in [`WalkOverride::parse`]'s form; `rules` when
    /// none is set.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = |fill: Option<Fill>| {
            fill.map(|fill| match fill {
                Fill::L1 => "l1".to_string(),
                Fill::L2 => "l2".to_string(),
            })
        };
        let pairs: Vec<String> = [
            ("ahead", self.ahead.map(|v| v.to_string())),
            ("q8_0", self.q8_0_lines.map(|v| v.to_string())),
            ("q6_K", self.q6_k_lines.map(|v| v.to_string())),
            ("streams", self.streams.map(|v| v.to_string())),
            ("q4_streams", self.q4_streams.map(|v| v.to_string())),
            ("fill", name(self.fill)),
            ("float", name(self.float_fill)),
        ]
        .into_iter()
        .filter_map(|(key, value)| Some(format!("{key}={}", value?)))
        .collect();
        if pairs.is_empty() {
            f.write_str("rules")
        } else {
            f.write_str(&pairs.join(","))
        }
    }
}

/// The override [`WalkOverride::set`] set, if any.
#[cfg(feature = "walk-override")]
static SET: std::sync::RwLock<Option<WalkOverride>> = std::sync::RwLock::new(None);

/// A body of `x86_wide.rs`, split into steps (a group of blocks or a super-block) so that one thread
/// can walk several rows in turn ([`dot_rows`]): a row's operations are the same, in the same
/// order, however many rows are walked with it.
pub(super) trait WideBody {
    /// One row's accumulators.
    type Acc: Copy;
    /// Blocks of 32 weights per step.
    const STEP_BLOCKS: usize;
    /// Bytes of a row per step: the walk's prefetch asks for lines `Walk::ahead` bytes past
    /// a step's first byte.
    const STEP_BYTES: usize;
    /// The lines per step that this body's rules ask for when they ask for any (every rule's
    /// [`Walk::lines`] is 0 or this): compiled into the walk as a constant.
    const LINES: usize;

    /// Fresh accumulators.
    ///
    /// # Safety
    /// The CPU has the body's ISA (`x86_wide::rows`).
    unsafe fn zero() -> Self::Acc;

    /// Step `i` of the row at `row` dotted with `x` into `acc`.
    ///
    /// # Safety
    /// The row's step `i` and `x`'s blocks of it are readable; the CPU has the body's ISA
    /// (`x86_wide::rows`).
    unsafe fn step(&self, row: *const u8, x: WideX, i: usize, acc: &mut Self::Acc);

    /// The row's dot product: `acc` summed, plus the blocks of its `nb` after the last whole
    /// step.
    ///
    /// # Safety
    /// The row's `nb` blocks and `x`'s are readable; ISA as for [`WideBody::step`].
    unsafe fn finish(&self, acc: Self::Acc, row: *const u8, x: WideX, nb: usize) -> f32;
}

/// A step's prefetch as the walk compiles it in. With the lines' count a constant the step has
/// neither a loop nor a branch of its own, and the compiler unrolls [`dot_rows`]' loop over
/// the rows, so that each row's accumulators stay in registers (revision 38: a loop over
/// `Walk::lines` kept that loop rolled, every row's accumulators loaded and stored at every
/// step).
trait Prefetch: Copy {
    /// Asks for the lines of the step whose first byte is `step`.
    ///
    /// # Safety
    /// The CPU has SSE (a prefetch never faults; the address need not be readable).
    unsafe fn lines<B: WideBody>(self, step: *const u8);
}

/// No prefetch.
#[derive(Clone, Copy)]
struct NoLines;

impl Prefetch for NoLines {
    #[inline(always)]
    unsafe fn lines<B: WideBody>(self, _: *const u8) {}
}

/// The body's [`WideBody::LINES`] lines from `ahead` bytes past the step on, into L2 when
/// `L2`, else into L1.
#[derive(Clone, Copy)]
struct BodyLines<const L2: bool> {
    ahead: usize,
}

impl<const L2: bool> Prefetch for BodyLines<L2> {
    #[inline(always)]
    unsafe fn lines<B: WideBody>(self, step: *const u8) {
        // SAFETY: SSE by the contract.
        unsafe { ask::<L2>(step, self.ahead, B::LINES) }
    }
}

/// Any [`Walk`]'s lines, counted at run time: the walks no rule takes (a measurement's
/// override), which run slower for it.
#[derive(Clone, Copy)]
struct AnyLines(Walk);

impl Prefetch for AnyLines {
    #[inline(always)]
    unsafe fn lines<B: WideBody>(self, step: *const u8) {
        let Walk {
            ahead, lines, fill, ..
        } = self.0;
        // SAFETY: SSE by the contract.
        unsafe {
            match fill {
                Fill::L1 => ask::<false>(step, ahead, lines),
                Fill::L2 => ask::<true>(step, ahead, lines),
            }
        }
    }
}

/// `_mm_prefetch` of the `lines` lines from `ahead` bytes past `step` on, into L2 when `L2`,
/// else into L1 (a loop the compiler unrolls away when `lines` is a constant).
///
/// # Safety
/// The CPU has SSE.
#[inline(always)]
unsafe fn ask<const L2: bool>(step: *const u8, ahead: usize, lines: usize) {
    for l in 0..lines {
        let at = step.wrapping_add(ahead + 64 * l) as *const i8;
        // SAFETY: a hint (it never faults); SSE by the contract.
        unsafe {
            if L2 {
                _mm_prefetch::<_MM_HINT_T1>(at);
            } else {
                _mm_prefetch::<_MM_HINT_T0>(at);
            }
        }
    }
}

/// The rows at once that the walk compiles with a constant prefetch: every rule's (a test
/// checks); other counts take [`AnyLines`].
const COMPILED_ROWS: [usize; 3] = [1, 3, MAX_ROWS];

/// Whether `walk` runs compiled for body `B` (its rows in [`COMPILED_ROWS`], its lines 0 or
/// `B::LINES`), not with [`AnyLines`].
pub(super) fn compiled<B: WideBody>(walk: Walk) -> bool {
    COMPILED_ROWS.contains(&walk.rows) && (walk.lines == 0 || walk.lines == B::LINES)
}

/// The `N` rows at `rows`, `nb` blocks each, dotted with `x`: every row's step `i` in turn,
/// then step `i + 1`, each step's lines asked for by `fetch` before it.
///
/// # Safety
/// As [`WideBody::finish`] for every row; the CPU has SSE.
#[inline(always)]
unsafe fn dot_rows<B: WideBody, const N: usize, F: Prefetch>(
    body: &B,
    rows: [*const u8; N],
    x: WideX,
    nb: usize,
    fetch: F,
) -> [f32; N] {
    // SAFETY: steps `i < nb / STEP_BLOCKS` lie inside each row's `nb` blocks; by the contract.
    unsafe {
        let mut acc = [B::zero(); N];
        for i in 0..nb / B::STEP_BLOCKS {
            for (row, acc) in rows.iter().zip(acc.iter_mut()) {
                fetch.lines::<B>(row.wrapping_add(i * B::STEP_BYTES));
                body.step(*row, x, i, acc);
            }
        }
        let mut out = [0.0; N];
        for n in 0..N {
            out[n] = body.finish(acc[n], rows[n], x, nb);
        }
        out
    }
}

/// `y[r]` = row `r` of the rows at `w` (`row_bytes` apart, `nb` blocks each) dotted with `x`,
/// `x.walk.rows` rows at once (1 to [`MAX_ROWS`]), each step's `x.walk.lines` lines asked for
/// `x.walk.ahead` bytes ahead into `x.walk.fill`.
///
/// # Safety
/// `w` holds `y.len()` such rows; as [`WideBody::finish`] for each.
#[inline(always)]
pub(super) unsafe fn walk<B: WideBody>(
    body: &B,
    w: *const u8,
    row_bytes: usize,
    x: WideX,
    nb: usize,
    y: &mut [f32],
) {
    let Walk {
        ahead,
        lines,
        rows,
        fill,
    } = x.walk;
    // SAFETY: forwarded contract.
    unsafe {
        if !compiled::<B>(x.walk) {
            let fetch = AnyLines(x.walk);
            // Only a measurement's override walks so (a test checks every rule's walk), so a
            // build without one compiles a single row for it: a row's results are the same
            // whichever rows walk beside it.
            #[cfg(not(any(test, feature = "walk-override")))]
            return walk_streams::<B, 1, _>(body, w, row_bytes, x, nb, y, fetch);
            #[cfg(any(test, feature = "walk-override"))]
            return match rows {
                6 => walk_streams::<B, 6, _>(body, w, row_bytes, x, nb, y, fetch),
                5 => walk_streams::<B, 5, _>(body, w, row_bytes, x, nb, y, fetch),
                4 => walk_streams::<B, 4, _>(body, w, row_bytes, x, nb, y, fetch),
                3 => walk_streams::<B, 3, _>(body, w, row_bytes, x, nb, y, fetch),
                2 => walk_streams::<B, 2, _>(body, w, row_bytes, x, nb, y, fetch),
                _ => walk_streams::<B, 1, _>(body, w, row_bytes, x, nb, y, fetch),
            };
        }
        match (lines, fill) {
            (0, _) => walk_compiled(rows, body, w, row_bytes, x, nb, y, NoLines),
            (_, Fill::L1) => {
                let fetch = BodyLines::<false> { ahead };
                walk_compiled(rows, body, w, row_bytes, x, nb, y, fetch)
            }
            (_, Fill::L2) => {
                let fetch = BodyLines::<true> { ahead };
                walk_compiled(rows, body, w, row_bytes, x, nb, y, fetch)
            }
        }
    }
}

/// [`walk`] with `rows` (one of [`COMPILED_ROWS`]) rows at once and a compiled prefetch.
///
/// # Safety
/// As [`walk`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn walk_compiled<B: WideBody, F: Prefetch>(
    rows: usize,
    body: &B,
    w: *const u8,
    row_bytes: usize,
    x: WideX,
    nb: usize,
    y: &mut [f32],
    fetch: F,
) {
    // SAFETY: forwarded contract.
    unsafe {
        match rows {
            1 => walk_streams::<B, 1, F>(body, w, row_bytes, x, nb, y, fetch),
            3 => walk_streams::<B, 3, F>(body, w, row_bytes, x, nb, y, fetch),
            _ => walk_streams::<B, MAX_ROWS, F>(body, w, row_bytes, x, nb, y, fetch),
        }
    }
}

/// [`walk`] with `N` streams: of `y.len() = N·h + rest` rows, rows `r, r + h, …, r + (N − 1)·h`
/// together for every `r < h` (streams far apart in memory), then the last `rest` one at a
/// time.
///
/// # Safety
/// As [`walk`].
#[inline(always)]
unsafe fn walk_streams<B: WideBody, const N: usize, F: Prefetch>(
    body: &B,
    w: *const u8,
    row_bytes: usize,
    x: WideX,
    nb: usize,
    y: &mut [f32],
    fetch: F,
) {
    let h = y.len() / N;
    // SAFETY: every row index is below `y.len()`; by the contract.
    unsafe {
        let row = |r: usize| w.add(r * row_bytes);
        for r in 0..h {
            let rows = std::array::from_fn(|k| row(r + k * h));
            let out = dot_rows::<B, N, F>(body, rows, x, nb, fetch);
            for (k, v) in out.into_iter().enumerate() {
                y[r + k * h] = v;
            }
        }
        for (r, out) in y.iter_mut().enumerate().skip(N * h) {
            [*out] = dot_rows::<B, 1, F>(body, [row(r)], x, nb, fetch);
        }
    }
}

#[cfg(test)]
mod tests;
