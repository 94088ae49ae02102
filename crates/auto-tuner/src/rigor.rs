//! How hard the tuner looks: [`Rigor`], after FFTW's planner flags (`FFTW_ESTIMATE`,
//! `FFTW_MEASURE`, `FFTW_PATIENT`, `FFTW_EXHAUSTIVE`).

use crate::error::TunerError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// How much the tuner measures. The levels are ordered: a cached profile of one level
/// serves a request of that level or a lower one, never a higher one.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Rigor {
    /// Measures nothing: the physical cores of the performance class within the CPUs this
    /// process may use (a fractional CPU quota rounded down), `static`. Never saved.
    Estimate,
    /// The search per phase: thread counts under `static` (every count up to 4, else probes
    /// and refinement), all seven policies at the best count, the neighbours re-checked.
    #[default]
    Measure,
    /// Every thread count up to the limit under `static`, all seven policies at the best
    /// count, the neighbours re-checked, with twice the repetitions.
    Patient,
    /// [`Rigor::Patient`], and every pinning candidate (one thread per physical core,
    /// performance cores only, one NUMA node) at every thread count it allows.
    Exhaustive,
}

impl Rigor {
    /// Every level, lowest first.
    pub const ALL: [Rigor; 4] = [
        Rigor::Estimate,
        Rigor::Measure,
        Rigor::Patient,
        Rigor::Exhaustive,
    ];

    /// `estimate`, `measure`, `patient` or `exhaustive`.
    pub fn name(self) -> &'static str {
        match self {
            Rigor::Estimate => "estimate",
            Rigor::Measure => "measure",
            Rigor::Patient => "patient",
            Rigor::Exhaustive => "exhaustive",
        }
    }

    /// How many times the configured repetitions a configuration gets at this level.
    pub(crate) fn repetition_factor(self) -> usize {
        match self {
            Rigor::Estimate | Rigor::Measure => 1,
            Rigor::Patient | Rigor::Exhaustive => 2,
        }
    }
}

impl fmt::Display for Rigor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Rigor {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Rigor::ALL
            .into_iter()
            .find(|r| r.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("unknown rigor {s:?}"))
    }
}

/// Parses a rigor setting named `name` (`estimate`, `measure`, `patient`, `exhaustive`).
pub fn parse_rigor(name: &str, value: &str) -> Result<Rigor, TunerError> {
    value.parse().map_err(|_| TunerError::InvalidSetting {
        name: name.to_string(),
        value: value.to_string(),
        expected: "one of estimate, measure, patient, exhaustive".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_ordered_and_parse_by_name() {
        assert!(Rigor::Estimate < Rigor::Measure);
        assert!(Rigor::Measure < Rigor::Patient);
        assert!(Rigor::Patient < Rigor::Exhaustive);
        for r in Rigor::ALL {
            assert_eq!(r.name().parse::<Rigor>(), Ok(r));
            assert_eq!(serde_json::to_value(r).unwrap(), r.name());
        }
        assert_eq!(" Patient ".parse::<Rigor>(), Ok(Rigor::Patient));
        let err = parse_rigor("--rigor", "thorough").unwrap_err().to_string();
        assert!(
            err.contains("--rigor") && err.contains("exhaustive"),
            "{err}"
        );
        assert_eq!(Rigor::default(), Rigor::Measure);
    }
}
