//! [`Warnings`]: the warnings of one resolution, reported as they happen and kept for the
//! caller.

use crate::progress::{Report, Reporter};

/// The warnings of one resolution: reported as they happen, and kept for
/// [`Tuned::warnings`].
pub(crate) struct Warnings {
    reporter: Reporter,
    lines: Vec<String>,
}

impl Warnings {
    pub(crate) fn new(reporter: &Reporter) -> Self {
        Warnings {
            reporter: reporter.clone(),
            lines: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, line: String) {
        self.reporter.report(Report::Warning(&line));
        self.lines.push(line);
    }

    pub(crate) fn into_lines(self) -> Vec<String> {
        self.lines
    }
}
