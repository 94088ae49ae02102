//! The tests' watchdog: [`within`] runs a body on its own thread and fails the test with a
//! message when it has not finished in time, so a regression that hangs (a FIFO opened the
//! blocking way, a lost wake-up, a lock never released) fails instead of blocking the test
//! run forever. The hung thread is left behind; the test binary exits without it.
//!
//! ```
//! use std::time::Duration;
//!
//! let sum = watchdog::within("adding", Duration::from_secs(60), || 2 + 2);
//! assert_eq!(sum, 4);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::Duration;

/// The limit the tests use unless they have a reason for another: far above anything a
/// working body needs, even on a loaded 2-core machine.
pub const LIMIT: Duration = Duration::from_secs(60);

/// Runs `body` on its own thread and returns its value. A panic of `body` is passed on as
/// it is; a body still running after `limit` panics with a message naming `what`.
pub fn within<T: Send + 'static>(
    what: &str,
    limit: Duration,
    body: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (done, wait) = channel();
    let spawned = std::thread::Builder::new()
        .name(format!("watched: {what}"))
        .spawn(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
            // The receiver is gone only after a timeout, which already failed the test.
            let _ = done.send(outcome);
        });
    if let Err(e) = spawned {
        panic!("cannot start the thread of {what}: {e}");
    }
    match wait.recv_timeout(limit) {
        Ok(Ok(value)) => value,
        Ok(Err(payload)) => std::panic::resume_unwind(payload),
        Err(RecvTimeoutError::Timeout) => {
            panic!("{what} did not finish within {limit:?} (a hang)")
        }
        Err(RecvTimeoutError::Disconnected) => {
            panic!("{what} ended without a result")
        }
    }
}

/// [`within`] at [`LIMIT`].
pub fn guard<T: Send + 'static>(what: &str, body: impl FnOnce() -> T + Send + 'static) -> T {
    within(what, LIMIT, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_body_gives_its_value() {
        assert_eq!(guard("a sum", || 40 + 2), 42);
    }

    #[test]
    fn a_body_that_panics_passes_its_panic_on() {
        let caught = std::panic::catch_unwind(|| within("boom", LIMIT, || panic!("boom 7")));
        let payload = caught.unwrap_err();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom 7"));
    }

    #[test]
    fn a_body_that_hangs_fails_with_its_name() {
        // Blocks until the test ends: the receiver of a channel nobody sends on.
        let (_keep, never) = channel::<()>();
        let caught = std::panic::catch_unwind(move || {
            within("waiting forever", Duration::from_millis(50), move || {
                let _ = never.recv();
            })
        });
        let payload = caught.unwrap_err();
        let message = payload.downcast_ref::<String>().unwrap();
        assert!(message.contains("waiting forever"), "{message}");
        assert!(message.contains("did not finish"), "{message}");
    }
}
