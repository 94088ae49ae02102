//! Process-level behaviour of the pool: its threads come and go with it.
//!
//! This binary holds a single test, because it counts the threads of the whole process.

use threadpool::{SchedulePolicy, ThreadPool};

/// Threads of this process, from `/proc/self/task`.
#[cfg(target_os = "linux")]
fn process_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("read /proc/self/task")
        .count()
}

#[cfg(target_os = "linux")]
#[test]
fn dropped_pools_leave_no_threads_behind() {
    let before = process_threads();
    // The caller is worker 0: a pool of one thread spawns nothing.
    let single = ThreadPool::new(1);
    assert_eq!(process_threads(), before);
    single
        .broadcast(|worker_idx| assert_eq!(worker_idx, 0))
        .unwrap();
    drop(single);
    for round in 0..50 {
        let pool = ThreadPool::new(4);
        assert_eq!(process_threads(), before + 3, "round {round}");
        pool.parallel_for(100, SchedulePolicy::Fixed16, |_| {})
            .unwrap();
        drop(pool);
        // `join` returned, so every worker has exited; the kernel drops a thread's
        // `/proc` entry a moment after the join can return, hence the bounded polling.
        let mut polls = 0;
        while process_threads() != before {
            polls += 1;
            assert!(polls < 100_000, "round {round}: workers left behind");
            std::thread::yield_now();
        }
    }
}
