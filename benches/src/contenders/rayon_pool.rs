//! The rayon pool the rayon-based peers run on.

/// A rayon pool of `n_threads`, where the rayon-based peers run.
pub fn rayon_pool(n_threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(n_threads)
        .build()
        .unwrap_or_else(|err| panic!("rayon pool of {n_threads} threads: {err}"))
}
