//! Fork-join round trip: our pool vs rayon's external broadcast vs `std::thread::scope`.
//!
//! The round trip is one empty fork-join: the caller dispatches, every thread runs an empty
//! share, the caller returns. All contenders live in one process and are measured
//! interleaved (round-robin batches), so the VM's slow/fast phases hit them alike; each
//! figure is the median over rounds of a batch's mean per call. Between two contenders the
//! measurement pauses longer than the spin budget, so one pool's spinning workers do not
//! steal the CPUs of the next; each batch starts with untimed warm-up calls, so a batch
//! measures back-to-back calls, the case the spin window is for.
//!
//! Two more figures back the pool's defaults: `pool_wake_ns`, the round trip after the
//! workers parked (what the spin window saves), and `pool_work_ns`, a fixed amount of work
//! per call at 1, 2 and 8 threads (8 oversubscribes a 2-core machine and must stay close
//! to 2).

use crate::contenders::{ForkJoin, fixed_work};
use crate::section::Section;
use auto_tuner::median;
use serde_json::{Map, Value, json};
use std::hint::black_box;
use std::time::{Duration, Instant};
use threadpool::ThreadPool;

/// Calls per timed batch: about 50–100 µs of round trips each.
fn batch_len(contender: &ForkJoin) -> usize {
    match contender {
        ForkJoin::Pool(_) => 64,
        ForkJoin::Rayon(_) => 8,
        ForkJoin::StdScope(_) => 2,
    }
}

/// Pause between contenders: longer than the default spin budget, so spinners have parked.
const SETTLE: Duration = Duration::from_micros(300);
/// Untimed calls before each timed batch.
const WARM_UP_CALLS: usize = 4;
/// Untimed back-to-back calls before our pool's timed batch, for at least this long: after
/// the settle pause the woken worker often shares the caller's CPU until the scheduler
/// moves it (a few ms), and the pool's first 64 calls run in its contended mode. The figure
/// reported is the steady state of back-to-back calls (as criterion's loop sees it);
/// `pool_wake_ns` reports the wake-up path on its own.
const POOL_WARM_UP: Duration = Duration::from_millis(10);
/// Interleaved rounds per thread count.
const ROUNDS: usize = 60;

/// The mean of `batch_len` back-to-back calls of `f`, in nanoseconds, after a warm-up.
pub(crate) fn time_batch(warm_up_calls: usize, batch_len: usize, f: impl Fn()) -> f64 {
    for _ in 0..warm_up_calls {
        f();
    }
    let start = Instant::now();
    for _ in 0..batch_len {
        f();
    }
    start.elapsed().as_nanos() as f64 / batch_len as f64
}

/// Median round trip (ns) per contender, measured interleaved.
fn round_trips(contenders: &[ForkJoin]) -> Vec<f64> {
    round_trip_samples(contenders, ROUNDS)
        .iter()
        .map(|s| median(s))
        .collect()
}

/// The round trip (ns, a batch's mean per call) of each contender in each of `rounds`
/// interleaved rounds: `samples[contender][round]`.
pub(crate) fn round_trip_samples(contenders: &[ForkJoin], rounds: usize) -> Vec<Vec<f64>> {
    let mut samples = vec![Vec::with_capacity(rounds); contenders.len()];
    for _ in 0..rounds {
        for (contender, samples) in contenders.iter().zip(&mut samples) {
            std::thread::sleep(SETTLE);
            if let ForkJoin::Pool(_) = contender {
                let start = Instant::now();
                while start.elapsed() < POOL_WARM_UP {
                    contender.round_trip();
                }
            }
            samples.push(time_batch(WARM_UP_CALLS, batch_len(contender), || {
                contender.round_trip()
            }));
        }
    }
    samples
}

/// Median round trip (ns) of `pool` after its workers parked: each call follows a pause.
fn wake_round_trip(pool: &ThreadPool) -> f64 {
    let mut samples = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        std::thread::sleep(pool.spin_budget() * 3 + Duration::from_micros(200));
        let start = Instant::now();
        pool.broadcast(|worker_idx| {
            black_box(worker_idx);
        })
        .expect("a pool worker died");
        samples.push(start.elapsed().as_nanos() as f64);
    }
    median(&samples)
}

/// Median time (ns) of one `parallel_for` over [`WORK_ROWS`](crate::contenders::WORK_ROWS) rows of [`work`](crate::contenders::work), per pool,
/// measured interleaved.
fn work_times(pools: &[ThreadPool]) -> Vec<f64> {
    let rounds = ROUNDS / 3;
    let mut samples = vec![Vec::with_capacity(rounds); pools.len()];
    for _ in 0..rounds {
        for (pool, samples) in pools.iter().zip(&mut samples) {
            std::thread::sleep(SETTLE);
            samples.push(time_batch(WARM_UP_CALLS, 4, || fixed_work(pool)));
        }
    }
    samples.iter_mut().map(|s| median(s)).collect()
}

/// Measures the empty fork-join round trip at each thread count.
pub fn measure(thread_counts: &[usize]) -> Section {
    let mut pool_ns = Map::new();
    let mut rayon_ns = Map::new();
    let mut scope_ns = Map::new();
    let mut wake_ns = Map::new();
    let mut table = vec![format!(
        "{:<28} {:>8} {:>12} {:>12} {:>12} {:>14}",
        "dispatch round trip (ns)", "threads", "ours", "rayon bcast", "std scope", "rayon/ours"
    )];
    for &n_threads in thread_counts {
        let contenders = ForkJoin::all(n_threads).map(|(_, contender)| contender);
        let medians = round_trips(&contenders);
        let key = n_threads.to_string();
        pool_ns.insert(key.clone(), json!(medians[0].round()));
        rayon_ns.insert(key.clone(), json!(medians[1].round()));
        scope_ns.insert(key.clone(), json!(medians[2].round()));
        table.push(format!(
            "{:<28} {:>8} {:>12.0} {:>12.0} {:>12.0} {:>13.1}x",
            "",
            n_threads,
            medians[0],
            medians[1],
            medians[2],
            medians[1] / medians[0]
        ));
        if n_threads > 1
            && let ForkJoin::Pool(pool) = &contenders[0]
        {
            wake_ns.insert(key, json!(wake_round_trip(pool).round()));
        }
    }
    table.push(format!(
        "{:<28} {}",
        "wake-up round trip (ns)",
        serde_json::to_string(&wake_ns).unwrap_or_default()
    ));

    let pools: Vec<ThreadPool> = thread_counts.iter().map(|t| ThreadPool::new(*t)).collect();
    let times = work_times(&pools);
    let mut work_ns = Map::new();
    for (n_threads, ns) in thread_counts.iter().zip(&times) {
        work_ns.insert(n_threads.to_string(), json!(ns.round()));
    }
    let at = |t: usize| thread_counts.iter().position(|n| *n == t).map(|i| times[i]);
    let ratio = match (at(8), at(2)) {
        (Some(eight), Some(two)) => format!(", 8 vs 2 threads: {:.2}x the time", eight / two),
        _ => String::new(),
    };
    table.push(format!(
        "{:<28} {}{ratio}",
        "fixed work per call (ns)",
        serde_json::to_string(&work_ns).unwrap_or_default()
    ));

    let mut json = Map::new();
    json.insert("pool_roundtrip_ns".into(), Value::Object(pool_ns));
    json.insert("rayon_broadcast_ns".into(), Value::Object(rayon_ns));
    json.insert("std_scope_ns".into(), Value::Object(scope_ns));
    json.insert("pool_wake_ns".into(), Value::Object(wake_ns));
    json.insert("pool_work_ns".into(), Value::Object(work_ns));
    Section { json, table }
}
