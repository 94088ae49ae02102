//! The commands' display of the tuner's reports on stderr: warnings always, progress unless
//! quiet; one rewritten line on a terminal, plain log lines otherwise.

use auto_tuner::{Report, Reporter};
use std::io::{IsTerminal, Write};
use std::sync::Mutex;

/// A reporter that shows the tuner's reports on stderr, each line prefixed by `program`.
/// Warnings are always shown; steps and ticks only when `quiet` is false.
pub fn stderr_reporter(program: &'static str, quiet: bool) -> Reporter {
    let terminal = std::io::stderr().is_terminal();
    // Whether a live line is on screen and must be cleared before the next line.
    let shown = Mutex::new(false);
    Reporter::new(move |report| {
        let mut shown = shown.lock().unwrap_or_else(|e| e.into_inner());
        let mut err = std::io::stderr().lock();
        let clear = |err: &mut std::io::StderrLock<'_>, shown: &mut bool| {
            if *shown {
                // Carriage return and "erase line" remove the live display.
                let _ = write!(err, "\r\x1b[2K");
                *shown = false;
            }
        };
        match report {
            Report::Warning(line) => {
                clear(&mut err, &mut shown);
                let _ = writeln!(err, "{program}: warning: {line}");
            }
            Report::Step(line) | Report::Tick(line) if !quiet && terminal => {
                clear(&mut err, &mut shown);
                let _ = write!(err, "{program}: {line}");
                *shown = true;
            }
            Report::Step(line) if !quiet => {
                let _ = writeln!(err, "{program}: {line}");
            }
            Report::Finished => clear(&mut err, &mut shown),
            _ => {}
        }
        let _ = err.flush();
    })
}

/// Writes one line on stderr. A stderr that is full, closed or a broken pipe loses the line
/// and nothing else: `eprintln!` would panic there, after (or before) the command's work.
pub fn say(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
