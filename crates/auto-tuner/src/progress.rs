//! Progress on stderr while tuning: one rewritten line on a terminal, log lines otherwise.

use crate::options::Progress;
use std::io::{IsTerminal, Write};

/// Writes progress messages as the options ask.
#[derive(Debug)]
pub(crate) struct ProgressLine {
    mode: Progress,
    terminal: bool,
    shown: bool,
}

impl ProgressLine {
    pub(crate) fn new(mode: Progress) -> Self {
        ProgressLine {
            mode,
            terminal: std::io::stderr().is_terminal(),
            shown: false,
        }
    }

    /// Shows `message` as the current state of a step in progress: on a terminal only,
    /// so that logs get one line per step.
    pub(crate) fn tick(&mut self, message: &str) {
        if self.terminal {
            self.update(message);
        }
    }

    /// Shows `message` as the current state.
    pub(crate) fn update(&mut self, message: &str) {
        if self.mode == Progress::Quiet {
            return;
        }
        let mut err = std::io::stderr().lock();
        if self.terminal {
            // Carriage return and "erase line" keep the display on one line.
            let _ = write!(err, "\r\x1b[2Ksipllm: {message}");
            let _ = err.flush();
            self.shown = true;
        } else {
            let _ = writeln!(err, "sipllm: {message}");
        }
    }

    /// Clears the line on a terminal.
    pub(crate) fn finish(&mut self) {
        if self.shown {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
            self.shown = false;
        }
    }
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        self.finish();
    }
}
