//! The ranges a caller's options must hold, checked before a tune reads, writes or
//! measures anything: those the command line and the environment enforce.

use crate::error::TunerError;
use crate::options::{
    AutoTunerOptions, MAX_BATCH, MAX_BUDGET_SECONDS, MAX_REPETITIONS, MAX_THREADS_OVERRIDE,
    ProfileHome,
};

/// Refuses options a caller of the library set out of the ranges the command line and the
/// environment enforce (`--batch`, `--budget`, `--threads`): a batch the cache would reject
/// on the next read, a budget past any deadline, a thread count no pool can have, more
/// repetitions than a count can hold times a rigor's factor, an empty home (which would be
/// the working directory).
pub(crate) fn refuse_out_of_range(opt: &AutoTunerOptions) -> Result<(), TunerError> {
    let refuse = |name: &str, value: String, expected: String| {
        Err(TunerError::InvalidSetting {
            name: name.to_string(),
            value,
            expected,
        })
    };
    let batch = opt.question.batch;
    if !(1..=MAX_BATCH).contains(&batch) {
        return refuse(
            "Question::batch",
            batch.to_string(),
            format!("a batch from 1 to {MAX_BATCH}"),
        );
    }
    if let Some(budget) = opt.question.budget {
        let seconds = budget.as_secs_f64();
        // Shorter than the command line's MIN_BUDGET_SECONDS is allowed (a spent budget,
        // which still measures each phase once); none is not, as no saved profile may say 0.
        if !(seconds > 0.0 && seconds <= MAX_BUDGET_SECONDS) {
            return refuse(
                "Question::budget",
                format!("{seconds} s"),
                format!("more than 0 and at most {MAX_BUDGET_SECONDS} seconds"),
            );
        }
    }
    if let Some(threads) = opt.overrides.threads
        && !(1..=MAX_THREADS_OVERRIDE).contains(&threads)
    {
        return refuse(
            "Overrides::threads",
            threads.to_string(),
            format!("a thread count from 1 to {MAX_THREADS_OVERRIDE}"),
        );
    }
    let repetitions = opt.measuring.repetitions;
    if repetitions > MAX_REPETITIONS {
        return refuse(
            "Measuring::repetitions",
            repetitions.to_string(),
            format!("at most {MAX_REPETITIONS} repetitions"),
        );
    }
    if opt.question.thread_cap == Some(0) {
        return refuse(
            "Question::thread_cap",
            "0".to_string(),
            "a largest thread count of 1 or more (None for no cap)".to_string(),
        );
    }
    if matches!(&opt.stores.home, ProfileHome::Dir(dir) if dir.as_os_str().is_empty()) {
        return refuse(
            "Stores::home",
            String::new(),
            "a directory (ProfileHome::None for no cache)".to_string(),
        );
    }
    Ok(())
}
