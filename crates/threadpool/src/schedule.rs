//! The seven schedule policies: how worker `t` of `T` claims its ranges of `0..n_items`.
//!
//! The caller builds a [`Plan`] (and initializes the shared cursor and per-worker ranges)
//! before it publishes the generation; every active worker then calls [`Plan::run`].
//! The cursor and the ranges only need atomicity: each claim is one read-modify-write of
//! one location, so each row is claimed exactly once whatever the ordering. What `f` wrote
//! becomes visible to the caller through the barrier, not through these atomics, so all
//! claims use `Relaxed`.

use crate::sync::{AtomicU64, AtomicUsize, Ordering};
use crossbeam_utils::CachePadded;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::Range;
use std::str::FromStr;

/// How `parallel_for` splits `0..n_items` between workers. Ids 0–6 are stable; names are
/// lowercase in `Display`, `FromStr` (which also accepts the id) and serde.
///
/// The crate docs hold the table with each policy's formula; below, n rows, T threads,
/// worker t.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchedulePolicy {
    /// Contiguous near-equal blocks `[t·q + min(t, r), +q + (t < r))`, q = n / T,
    /// r = n % T; no shared state (OpenMP `static`, TBB `static_partitioner`).
    Static = 0,
    /// Dynamic 16-row chunks: t starts with chunk t, then claims the next with a relaxed
    /// `fetch_add` on a cursor starting at T (ggml's matmul chunking, OpenMP `dynamic,16`).
    Fixed16 = 1,
    /// As `Fixed16` with chunk = roundup16(ceil(n / 2T)): two chunks per thread (TBB's
    /// initial two pieces per thread).
    Proportional2 = 2,
    /// Speed-weighted: 3/4 of the rows split statically in proportion to each worker's
    /// moving average of rows per second from earlier `Adaptive` calls (the newest call
    /// weighs 1/4), the rest handed out in 16-row chunks; `Proportional2` until every worker
    /// of the call has history (hybrid P/E cores, noisy neighbours).
    Adaptive = 3,
    /// Decreasing chunks of max(16, roundup16(ceil(remaining / 2T))) claimed by CAS
    /// (OpenMP `guided`, LLVM's variant).
    Guided = 4,
    /// Cyclic static: 16-row chunk c belongs to thread c mod T; no atomics (OpenMP
    /// `static,16`).
    Interleaved = 5,
    /// Each thread owns its `Static` range as a packed `(lo, hi)` atomic on its own cache
    /// line, takes 16 rows at a time from the front and, when empty, steals the upper half
    /// of a victim's remainder (LLVM's `static_steal`, rayon's split-on-steal).
    WorkStealing = 6,
}

impl SchedulePolicy {
    /// Every policy in id order.
    pub const ALL: [SchedulePolicy; 7] = [
        SchedulePolicy::Static,
        SchedulePolicy::Fixed16,
        SchedulePolicy::Proportional2,
        SchedulePolicy::Adaptive,
        SchedulePolicy::Guided,
        SchedulePolicy::Interleaved,
        SchedulePolicy::WorkStealing,
    ];

    /// The stable id (0–6).
    pub fn id(self) -> u8 {
        self as u8
    }

    /// The policy with this id.
    pub fn from_id(id: u8) -> Option<Self> {
        Self::ALL.get(usize::from(id)).copied()
    }

    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            SchedulePolicy::Static => "static",
            SchedulePolicy::Fixed16 => "fixed16",
            SchedulePolicy::Proportional2 => "proportional2",
            SchedulePolicy::Adaptive => "adaptive",
            SchedulePolicy::Guided => "guided",
            SchedulePolicy::Interleaved => "interleaved",
            SchedulePolicy::WorkStealing => "workstealing",
        }
    }
}

impl fmt::Display for SchedulePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error for an unknown policy name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown schedule policy {0:?} (expected one of: static, fixed16, proportional2, adaptive, guided, interleaved, workstealing, or an id 0-6)"
)]
pub struct ParsePolicyError(pub String);

impl FromStr for SchedulePolicy {
    type Err = ParsePolicyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|p| p.name() == t || p.id().to_string() == t)
            .ok_or_else(|| ParsePolicyError(s.to_string()))
    }
}

/// Rows per chunk wherever a policy hands out chunks (and the rounding unit of chunk edges).
pub(crate) const CHUNK_ROWS: usize = 16;

/// Share of the rows that `Adaptive` splits statically by speed, as a fraction:
/// numerator over [`ADAPTIVE_SHARE_DEN`]. The rest is the dynamic 16-row tail.
pub(crate) const ADAPTIVE_SHARE_NUM: usize = 3;
/// Denominator of the `Adaptive` static share (3/4 of the rows).
pub(crate) const ADAPTIVE_SHARE_DEN: usize = 4;
/// Weight of the newest measurement in `Adaptive`'s moving average of rows per second.
pub(crate) const ADAPTIVE_EMA_WEIGHT: f64 = 0.25;

/// The largest `n_items` for which packed `(lo, hi)` ranges fit in one `AtomicU64`.
/// Above it, `WorkStealing` runs as `Guided` and `Adaptive` as `Proportional2`.
/// Also leaves room above `n_items` for `Weighted`'s cursor, which every worker bumps by
/// [`CHUNK_ROWS`] past the end once (at most `CHUNK_ROWS · MAX_THREADS` more): on a 32-bit
/// target `u32::MAX` is `usize::MAX` and the cursor would wrap and hand rows out twice.
pub(crate) const MAX_PACKED_ITEMS: usize = {
    let room = CHUNK_ROWS * (crate::protocol::MAX_THREADS + 1);
    if (u32::MAX as u64) < (usize::MAX as u64) - room as u64 {
        u32::MAX as usize
    } else {
        usize::MAX - room
    }
};
// Every worker's last claim past the end still fits in a `usize`.
const _: () = assert!(
    MAX_PACKED_ITEMS
        .checked_add(CHUNK_ROWS * (crate::protocol::MAX_THREADS + 1))
        .is_some()
);

/// Rounds `x` up to a multiple of [`CHUNK_ROWS`], saturating.
pub(crate) fn round_up_chunk(x: usize) -> usize {
    x.div_ceil(CHUNK_ROWS).saturating_mul(CHUNK_ROWS)
}

/// The `Static` block of worker `worker_idx`: `[t·q + min(t, r), +q + (t < r))`.
pub(crate) fn static_range(n_items: usize, n_threads: usize, worker_idx: usize) -> Range<usize> {
    let q = n_items / n_threads;
    let r = n_items % n_threads;
    let lo = worker_idx * q + worker_idx.min(r);
    let hi = lo + q + usize::from(worker_idx < r);
    lo..hi
}

/// Packs a range of rows below [`MAX_PACKED_ITEMS`] into one word: `lo` high, `hi` low.
fn pack(lo: usize, hi: usize) -> u64 {
    ((lo as u64) << 32) | hi as u64
}

/// Splits a word made by [`pack`].
fn unpack(word: u64) -> (usize, usize) {
    ((word >> 32) as usize, (word & 0xffff_ffff) as usize)
}

/// How the rows are handed out in one call, decided by the caller before it publishes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// Fixed blocks, no shared state.
    Static,
    /// Chunks of `chunk_rows`; worker t starts with chunk t, then `fetch_add`s the cursor
    /// (a chunk index starting at T).
    Chunked { chunk_rows: usize },
    /// Decreasing chunks claimed by compare-and-swap on the cursor (a row index from 0).
    Guided,
    /// Chunk c belongs to worker c mod T.
    Interleaved,
    /// Per-worker packed ranges with stealing of the upper half.
    Stealing,
    /// Per-worker packed static shares, then 16-row chunks from the cursor (a row index
    /// starting at the end of the static shares).
    Weighted,
}

/// One call's split of `0..n_items` over `n_threads` workers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    n_items: usize,
    n_threads: usize,
    mode: Mode,
}

impl Plan {
    /// Chooses the mode for `policy` and initializes `cursor` and `ranges` for it.
    ///
    /// `speeds` holds `Adaptive`'s rows-per-second averages per worker (0.0 = no history).
    /// Must run before the generation that publishes the plan; the publishing store orders
    /// these relaxed stores before every worker's reads.
    pub(crate) fn prepare(
        policy: SchedulePolicy,
        n_items: usize,
        n_threads: usize,
        speeds: &[f64],
        cursor: &AtomicUsize,
        ranges: &[CachePadded<AtomicU64>],
    ) -> Plan {
        let proportional2 = Mode::Chunked {
            chunk_rows: round_up_chunk(n_items.div_ceil(2 * n_threads)).max(CHUNK_ROWS),
        };
        let packable = n_items <= MAX_PACKED_ITEMS;
        let mode = match policy {
            SchedulePolicy::Static => Mode::Static,
            SchedulePolicy::Fixed16 => Mode::Chunked {
                chunk_rows: CHUNK_ROWS,
            },
            SchedulePolicy::Proportional2 => proportional2,
            SchedulePolicy::Adaptive => {
                let known = speeds
                    .get(..n_threads)
                    .is_some_and(|s| s.iter().all(|v| v.is_finite() && *v > 0.0));
                if packable && known {
                    Mode::Weighted
                } else {
                    proportional2
                }
            }
            SchedulePolicy::Guided => Mode::Guided,
            SchedulePolicy::Interleaved => Mode::Interleaved,
            SchedulePolicy::WorkStealing if packable => Mode::Stealing,
            SchedulePolicy::WorkStealing => Mode::Guided,
        };
        match mode {
            Mode::Static | Mode::Interleaved => {}
            Mode::Chunked { .. } => cursor.store(n_threads, Ordering::Relaxed),
            Mode::Guided => cursor.store(0, Ordering::Relaxed),
            Mode::Stealing => {
                for (worker_idx, range) in ranges.iter().take(n_threads).enumerate() {
                    let r = static_range(n_items, n_threads, worker_idx);
                    range.store(pack(r.start, r.end), Ordering::Relaxed);
                }
            }
            Mode::Weighted => {
                let share_end =
                    n_items / ADAPTIVE_SHARE_DEN * ADAPTIVE_SHARE_NUM / CHUNK_ROWS * CHUNK_ROWS;
                let total: f64 = speeds[..n_threads].iter().sum();
                let mut cumulative = 0.0;
                let mut lo = 0;
                for (worker_idx, range) in ranges.iter().take(n_threads).enumerate() {
                    cumulative += speeds[worker_idx];
                    let hi = if worker_idx + 1 == n_threads {
                        share_end
                    } else {
                        let edge = share_end as f64 * cumulative / total;
                        let rounded = (edge / CHUNK_ROWS as f64).round() as usize * CHUNK_ROWS;
                        rounded.clamp(lo, share_end)
                    };
                    range.store(pack(lo, hi), Ordering::Relaxed);
                    lo = hi;
                }
                cursor.store(share_end, Ordering::Relaxed);
            }
        }
        Plan {
            n_items,
            n_threads,
            mode,
        }
    }

    /// Runs worker `worker_idx`'s part of the plan; returns how many rows it processed.
    pub(crate) fn run(
        &self,
        worker_idx: usize,
        cursor: &AtomicUsize,
        ranges: &[CachePadded<AtomicU64>],
        f: &dyn Fn(Range<usize>),
    ) -> usize {
        let (n, n_threads) = (self.n_items, self.n_threads);
        let mut rows = 0;
        let mut visit = |r: Range<usize>| {
            rows += r.len();
            f(r);
        };
        match self.mode {
            Mode::Static => {
                let r = static_range(n, n_threads, worker_idx);
                if !r.is_empty() {
                    visit(r);
                }
            }
            Mode::Chunked { chunk_rows } => {
                let mut chunk = worker_idx;
                while let Some(lo) = chunk.checked_mul(chunk_rows).filter(|lo| *lo < n) {
                    visit(lo..n.min(lo.saturating_add(chunk_rows)));
                    chunk = cursor.fetch_add(1, Ordering::Relaxed);
                }
            }
            Mode::Guided => {
                let mut lo = cursor.load(Ordering::Relaxed);
                while lo < n {
                    let remaining = n - lo;
                    let chunk_rows = round_up_chunk(remaining.div_ceil(2 * n_threads));
                    let hi = n.min(lo.saturating_add(chunk_rows.max(CHUNK_ROWS)));
                    match cursor.compare_exchange_weak(lo, hi, Ordering::Relaxed, Ordering::Relaxed)
                    {
                        Ok(_) => {
                            visit(lo..hi);
                            lo = hi;
                        }
                        Err(current) => lo = current,
                    }
                }
            }
            Mode::Interleaved => {
                let mut lo = worker_idx * CHUNK_ROWS;
                while lo < n {
                    visit(lo..n.min(lo.saturating_add(CHUNK_ROWS)));
                    lo = lo.saturating_add(n_threads * CHUNK_ROWS);
                }
            }
            Mode::Stealing => steal_loop(worker_idx, n_threads, ranges, &mut visit),
            Mode::Weighted => {
                let (lo, hi) = unpack(ranges[worker_idx].load(Ordering::Relaxed));
                if lo < hi {
                    visit(lo..hi);
                }
                loop {
                    let lo = cursor.fetch_add(CHUNK_ROWS, Ordering::Relaxed);
                    if lo >= n {
                        break;
                    }
                    visit(lo..n.min(lo + CHUNK_ROWS));
                }
            }
        }
        rows
    }
}

/// `WorkStealing`: take 16 rows at a time from the front of the own range; when it is
/// empty, steal the upper half (a multiple of 16 rows) of a victim holding at least 32.
///
/// Only the owner ever grows its range (from empty, after a successful steal); thieves only
/// shrink a victim's `hi` and owners only raise their `lo`. So a word never returns to an
/// earlier non-empty value (no ABA), and a worker may stop once a full scan finds no victim
/// with 32 rows: every row left belongs to an owner that has not emptied its range yet and
/// will process it before it stops.
fn steal_loop(
    worker_idx: usize,
    n_threads: usize,
    ranges: &[CachePadded<AtomicU64>],
    visit: &mut impl FnMut(Range<usize>),
) {
    let mine = &ranges[worker_idx];
    loop {
        // Drain the own range from the front.
        let mut word = mine.load(Ordering::Relaxed);
        loop {
            let (lo, hi) = unpack(word);
            if lo >= hi {
                break;
            }
            let end = hi.min(lo + CHUNK_ROWS);
            match mine.compare_exchange_weak(
                word,
                pack(end, hi),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    visit(lo..end);
                    word = pack(end, hi);
                }
                Err(current) => word = current,
            }
        }
        // Steal the upper half of some victim's remainder into the own (empty) range.
        let mut stolen = false;
        let mut saw_stealable = false;
        for k in 1..n_threads {
            let victim = &ranges[(worker_idx + k) % n_threads];
            let word = victim.load(Ordering::Relaxed);
            let (lo, hi) = unpack(word);
            let remaining = hi.saturating_sub(lo);
            if remaining < 2 * CHUNK_ROWS {
                continue;
            }
            saw_stealable = true;
            let mid = hi - remaining / 2 / CHUNK_ROWS * CHUNK_ROWS;
            if victim
                .compare_exchange(word, pack(lo, mid), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                mine.store(pack(mid, hi), Ordering::Relaxed);
                stolen = true;
                break;
            }
        }
        if !stolen && !saw_stealable {
            return;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn static_ranges_tile_the_rows_near_equally() {
        for n in [0, 1, 7, 16, 17, 100] {
            for t_count in 1..6 {
                let mut next = 0;
                for t in 0..t_count {
                    let r = static_range(n, t_count, t);
                    assert_eq!(r.start, next);
                    assert!(r.len() == n / t_count || r.len() == n / t_count + 1);
                    next = r.end;
                }
                assert_eq!(next, n);
            }
        }
    }

    #[test]
    fn pack_round_trips() {
        assert_eq!(unpack(pack(0, 0)), (0, 0));
        assert_eq!(unpack(pack(5, MAX_PACKED_ITEMS)), (5, MAX_PACKED_ITEMS));
    }

    #[test]
    fn round_up_chunk_rounds_to_sixteen() {
        assert_eq!(round_up_chunk(0), 0);
        assert_eq!(round_up_chunk(1), 16);
        assert_eq!(round_up_chunk(16), 16);
        assert_eq!(round_up_chunk(17), 32);
        assert_eq!(round_up_chunk(usize::MAX), usize::MAX);
    }

    fn cells(n: usize) -> Vec<CachePadded<AtomicU64>> {
        (0..n)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect()
    }

    /// Runs every worker of a plan one after the other on this thread.
    fn visits(policy: SchedulePolicy, n: usize, n_threads: usize, speeds: &[f64]) -> Vec<usize> {
        let cursor = AtomicUsize::new(0);
        let ranges = cells(n_threads);
        let plan = Plan::prepare(policy, n, n_threads, speeds, &cursor, &ranges);
        let counts: Vec<_> = (0..n).map(|_| AtomicUsize::new(0)).collect();
        for t in 0..n_threads {
            plan.run(t, &cursor, &ranges, &|r: Range<usize>| {
                for i in r {
                    counts[i].fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        counts.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }

    /// The ranges every worker of a plan gets, run one after the other on this thread.
    fn ranges_of(policy: SchedulePolicy, n: usize, n_threads: usize) -> Vec<Range<usize>> {
        let cursor = AtomicUsize::new(0);
        let ranges = cells(n_threads);
        let plan = Plan::prepare(policy, n, n_threads, &[], &cursor, &ranges);
        let seen = std::sync::Mutex::new(Vec::new());
        for t in 0..n_threads {
            plan.run(t, &cursor, &ranges, &|r: Range<usize>| {
                seen.lock().unwrap().push(r);
            });
        }
        let mut seen = seen.into_inner().unwrap();
        seen.sort_by_key(|r| r.start);
        seen
    }

    #[test]
    fn the_largest_item_counts_are_tiled_without_wrapping() {
        // The policies whose chunks grow with the count (the others take 16 rows at a
        // time, 2^60 chunks here): each range forward, together 0..n once.
        for policy in [
            SchedulePolicy::Static,
            SchedulePolicy::Proportional2,
            SchedulePolicy::Adaptive,
            SchedulePolicy::Guided,
            SchedulePolicy::WorkStealing,
        ] {
            for n in [usize::MAX, usize::MAX - 17] {
                let ranges = ranges_of(policy, n, 3);
                let mut next = 0;
                for r in &ranges {
                    assert!(r.start < r.end, "{policy} n={n}: {r:?}");
                    assert_eq!(r.start, next, "{policy} n={n}");
                    next = r.end;
                }
                assert_eq!(next, n, "{policy}");
            }
        }
    }

    #[test]
    fn sequential_runs_of_every_policy_cover_each_row_once() {
        for policy in SchedulePolicy::ALL {
            for n in [0, 1, 15, 16, 17, 33, 4096, 4099] {
                for n_threads in [1, 2, 3, 8] {
                    let counts = visits(policy, n, n_threads, &[]);
                    assert!(
                        counts.iter().all(|c| *c == 1),
                        "{policy} n={n} T={n_threads}"
                    );
                }
            }
        }
    }

    #[test]
    fn adaptive_with_history_splits_the_static_share_by_speed() {
        let cursor = AtomicUsize::new(0);
        let ranges = cells(2);
        let plan = Plan::prepare(
            SchedulePolicy::Adaptive,
            1024,
            2,
            &[3.0, 1.0],
            &cursor,
            &ranges,
        );
        assert_eq!(plan.mode, Mode::Weighted);
        // 3/4 of 1024 = 768 static rows, split 3:1 = 576 and 192.
        assert_eq!(unpack(ranges[0].load(Ordering::Relaxed)), (0, 576));
        assert_eq!(unpack(ranges[1].load(Ordering::Relaxed)), (576, 768));
        assert_eq!(cursor.load(Ordering::Relaxed), 768);
        let counts = visits(SchedulePolicy::Adaptive, 1000, 3, &[1.0, 5.0, 0.5]);
        assert!(counts.iter().all(|c| *c == 1));
    }

    #[test]
    fn adaptive_without_history_is_proportional2() {
        let cursor = AtomicUsize::new(0);
        let ranges = cells(2);
        let plan = Plan::prepare(
            SchedulePolicy::Adaptive,
            1024,
            2,
            &[1.0, 0.0],
            &cursor,
            &ranges,
        );
        assert_eq!(plan.mode, Mode::Chunked { chunk_rows: 256 });
    }

    #[test]
    fn chunk_sizes_follow_the_policy_formulas() {
        let cursor = AtomicUsize::new(0);
        let ranges = cells(4);
        let plan = Plan::prepare(
            SchedulePolicy::Proportional2,
            1000,
            4,
            &[],
            &cursor,
            &ranges,
        );
        // ceil(1000 / 8) = 125, rounded up to 128.
        assert_eq!(plan.mode, Mode::Chunked { chunk_rows: 128 });
        assert_eq!(cursor.load(Ordering::Relaxed), 4);
        let mut sizes = Vec::new();
        let guided = Plan::prepare(SchedulePolicy::Guided, 1000, 2, &[], &cursor, &ranges);
        let seen = std::sync::Mutex::new(&mut sizes);
        guided.run(0, &cursor, &ranges, &|r: Range<usize>| {
            seen.lock().unwrap().push(r.len())
        });
        // remaining/4 rounded up to 16: 250→256, 744/4=186→192, 552→144, 408→112, ...
        assert_eq!(&sizes[..4], &[256, 192, 144, 112]);
        assert_eq!(
            *sizes.last().unwrap(),
            1000 - sizes[..sizes.len() - 1].iter().sum::<usize>()
        );
    }

    #[test]
    fn interleaved_gives_chunk_c_to_worker_c_mod_t() {
        let cursor = AtomicUsize::new(0);
        let ranges = cells(3);
        let plan = Plan::prepare(SchedulePolicy::Interleaved, 100, 3, &[], &cursor, &ranges);
        let starts = std::sync::Mutex::new(Vec::new());
        plan.run(1, &cursor, &ranges, &|r: Range<usize>| {
            starts.lock().unwrap().push((r.start, r.end))
        });
        assert_eq!(*starts.lock().unwrap(), vec![(16, 32), (64, 80)]);
    }

    #[test]
    fn an_idle_stealer_takes_the_upper_half_of_a_victim() {
        let cursor = AtomicUsize::new(0);
        let ranges = cells(2);
        let plan = Plan::prepare(SchedulePolicy::WorkStealing, 128, 2, &[], &cursor, &ranges);
        // Worker 1 runs alone first: drains 64..128, then steals 32..64 from worker 0.
        let seen = std::sync::Mutex::new(Vec::new());
        plan.run(1, &cursor, &ranges, &|r: Range<usize>| {
            seen.lock().unwrap().push(r.start)
        });
        let starts = seen.into_inner().unwrap();
        assert_eq!(starts, vec![64, 80, 96, 112, 32, 48, 16]);
        assert_eq!(unpack(ranges[0].load(Ordering::Relaxed)), (0, 16));
    }

    /// Runs every worker of a plan on its own thread, all at once; returns the claimed
    /// ranges sorted by start.
    fn concurrent_claims(
        policy: SchedulePolicy,
        n: usize,
        n_threads: usize,
        speeds: &[f64],
    ) -> Vec<Range<usize>> {
        let cursor = AtomicUsize::new(0);
        let ranges = cells(n_threads);
        let plan = Plan::prepare(policy, n, n_threads, speeds, &cursor, &ranges);
        let claimed = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for t in 0..n_threads {
                let (cursor, ranges, claimed) = (&cursor, &ranges, &claimed);
                scope.spawn(move || {
                    plan.run(t, cursor, ranges, &|r: Range<usize>| {
                        claimed.lock().unwrap().push(r)
                    })
                });
            }
        });
        let mut claimed = claimed.into_inner().unwrap();
        claimed.sort_by_key(|r| r.start);
        claimed
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Any plan of any policy, size, thread count and (for `adaptive`) speeds hands
        /// out non-empty ranges that tile `0..n`: disjoint, every index exactly once.
        #[test]
        fn concurrent_claims_of_any_plan_tile_the_rows(
            policy_id in 0u8..7,
            n in 0usize..5000,
            n_threads in 1usize..=9,
            speeds in proptest::collection::vec(0.01f64..100.0, 9),
            with_history in any::<bool>(),
        ) {
            let policy = SchedulePolicy::from_id(policy_id).unwrap();
            let speeds = if with_history { &speeds[..] } else { &[][..] };
            let claimed = concurrent_claims(policy, n, n_threads, speeds);
            let mut next = 0;
            for r in &claimed {
                prop_assert!(
                    !r.is_empty() && r.start == next,
                    "{} n={} T={}: {:?} where {} was next", policy, n, n_threads, r, next
                );
                next = r.end;
            }
            prop_assert_eq!(next, n, "{} n={} T={}", policy, n, n_threads);
        }
    }
}
