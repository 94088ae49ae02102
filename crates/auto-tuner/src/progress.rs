//! How the tuner tells its caller what it is doing: [`Report`] events sent to a [`Reporter`]
//! callback. The library never prints; the binary decides what to show and where.

use std::fmt;
use std::sync::Arc;

/// One thing the tuner reports while it works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Report<'a> {
    /// A problem met and worked around (a cached profile ignored and why, a profile that
    /// cannot be saved, a lock that cannot be taken). Sent when it happens, before the work
    /// it explains; the same line is kept in `Tuned::warnings`.
    Warning(&'a str),
    /// A step of the measurement started (worth one log line).
    Step(&'a str),
    /// Progress inside a step, such as "round 3/7" (worth showing on a live display, not in
    /// a log).
    Tick(&'a str),
    /// Measuring is over: a live display may be cleared.
    Finished,
}

/// The callback type a [`Reporter`] wraps.
pub type ReportFn = dyn Fn(Report<'_>) + Send + Sync;

/// Where the tuner sends its [`Report`]s. The default discards them.
#[derive(Clone, Default)]
pub struct Reporter(Option<Arc<ReportFn>>);

impl Reporter {
    /// A reporter that discards every report.
    pub fn silent() -> Self {
        Reporter(None)
    }

    /// A reporter that calls `f` with every report.
    pub fn new(f: impl Fn(Report<'_>) + Send + Sync + 'static) -> Self {
        Reporter(Some(Arc::new(f)))
    }

    /// Sends `report` to the callback, if any.
    pub fn report(&self, report: Report<'_>) {
        if let Some(f) = &self.0 {
            f(report);
        }
    }

    pub(crate) fn step(&self, message: &str) {
        self.report(Report::Step(message));
    }

    pub(crate) fn tick(&self, message: &str) {
        self.report(Report::Tick(message));
    }

    pub(crate) fn finished(&self) {
        self.report(Report::Finished);
    }
}

impl fmt::Debug for Reporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Reporter(callback)"
        } else {
            "Reporter(silent)"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn a_reporter_forwards_every_report_and_the_default_drops_them() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let reporter = Reporter::new(move |r| sink.lock().unwrap().push(format!("{r:?}")));
        reporter.step("a");
        reporter.report(Report::Warning("w"));
        reporter.tick("t");
        reporter.finished();
        assert_eq!(
            *seen.lock().unwrap(),
            ["Step(\"a\")", "Warning(\"w\")", "Tick(\"t\")", "Finished"]
        );
        // Nothing to observe but that it does not panic and holds no callback.
        let silent = Reporter::default();
        silent.step("ignored");
        assert_eq!(format!("{silent:?}"), "Reporter(silent)");
    }
}
