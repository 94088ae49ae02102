//! Why a command stopped, and its exit code: 2 for a command line refused as given (the
//! code clap gives its own refusals: a bad flag value, flags that cannot go together, a
//! `SIPLLM_*` variable at odds with them), 1 for a failure while running.

use crate::progress::say;
use auto_tuner::TunerError;
use std::process::ExitCode;

/// The exit code of a command line refused as given.
pub const REFUSED: u8 = 2;

/// Why a command stopped.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The command line (its flags, or them with the environment) cannot run as given.
    Refused(String),
    /// Something failed while running.
    Failed(String),
}

impl From<String> for Stop {
    fn from(message: String) -> Stop {
        Stop::Failed(message)
    }
}

impl From<&TunerError> for Stop {
    fn from(e: &TunerError) -> Stop {
        // The tuner refuses a setting (a flag or a `SIPLLM_*` variable); all else fails.
        if matches!(e, TunerError::InvalidSetting { .. }) {
            Stop::Refused(e.to_string())
        } else {
            Stop::Failed(e.to_string())
        }
    }
}

impl From<TunerError> for Stop {
    fn from(e: TunerError) -> Stop {
        Stop::from(&e)
    }
}

impl Stop {
    /// Says why on stderr, as `program: error: …`, and gives the exit code.
    pub(crate) fn report(&self, program: &str) -> ExitCode {
        let (Stop::Refused(message) | Stop::Failed(message)) = self;
        say(format_args!("{program}: error: {message}"));
        self.code()
    }

    /// 2 for a refused command line, 1 for a failure.
    pub(crate) fn code(&self) -> ExitCode {
        match self {
            Stop::Refused(_) => ExitCode::from(REFUSED),
            Stop::Failed(_) => ExitCode::FAILURE,
        }
    }
}

/// Prints `err` on stderr and returns its exit code: 2 for a refused setting, else 1.
pub fn report_error(program: &str, err: &TunerError) -> ExitCode {
    Stop::from(err).report(program)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_setting_is_refused_and_anything_else_failed() {
        let bad = TunerError::InvalidSetting {
            name: "--budget".into(),
            value: "5".into(),
            expected: "no --budget with --rigor estimate".into(),
        };
        assert!(matches!(Stop::from(bad), Stop::Refused(m) if m.contains("--budget")));
        assert!(matches!(Stop::from(TunerError::NoHome), Stop::Failed(_)));
        assert!(matches!(Stop::from("x".to_string()), Stop::Failed(_)));
        assert_eq!(Stop::Refused(String::new()).code(), ExitCode::from(REFUSED));
    }
}
