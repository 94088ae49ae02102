//! The tuning environment: how busy the machine was when a tune started (the 1-minute load
//! average) and the CPU frequency governor, recorded in the profile. A tune that started on
//! a busy machine is marked `noisy`, and the next run re-tunes it once.

use serde::{Deserialize, Serialize};

/// Load per CPU above which other processes are taken to disturb the measurement.
pub const NOISY_LOAD_PER_CPU: f64 = 0.5;

/// What the machine was doing when the tune started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// The 1-minute load average (`/proc/loadavg`) read before measuring, when readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_average_1m: Option<f64>,
    /// The CPUs the load was shared by: the machine's online CPUs (`logical_cores`), as
    /// the load average counts the runnable tasks of the whole system. (A container on a
    /// large busy host is judged by the host's busyness per CPU, not by its own share,
    /// which the load average cannot tell.)
    pub cpus: usize,
    /// The CPU frequency governor of the first CPU this process may use
    /// (`performance`, `powersave`, `schedutil`, …), when readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub governor: Option<String>,
    /// The load per CPU was above [`NOISY_LOAD_PER_CPU`]: other processes were busy, and
    /// the figures may be low or spread.
    pub noisy: bool,
    /// This tune re-did a noisy one. A noisy profile is re-tuned once; a re-tune is kept
    /// even if noisy itself, so that a machine that is always busy is not re-tuned forever.
    #[serde(default)]
    pub retune: bool,
}

impl Environment {
    /// The environment of a tune that saw `load_average_1m` on `cpus` CPUs, with
    /// `governor`; `retune` when it re-does a noisy profile.
    pub fn assess(
        load_average_1m: Option<f64>,
        cpus: usize,
        governor: Option<String>,
        retune: bool,
    ) -> Environment {
        let cpus = cpus.max(1);
        let noisy = load_average_1m.is_some_and(|load| load / cpus as f64 > NOISY_LOAD_PER_CPU);
        Environment {
            load_average_1m,
            cpus,
            governor,
            noisy,
            retune,
        }
    }

    /// Whether a profile measured in this environment should be measured again: noisy, and
    /// not itself a re-tune.
    pub fn wants_retune(&self) -> bool {
        self.noisy && !self.retune
    }

    /// The warning to show for a noisy tune.
    pub fn warning(&self) -> Option<String> {
        if !self.noisy {
            return None;
        }
        let load = self.load_average_1m.unwrap_or(0.0);
        Some(format!(
            "the machine was busy when tuning started (1-minute load {load:.2} on {} CPUs, \
             above {NOISY_LOAD_PER_CPU} per CPU): the profile is marked noisy{}",
            self.cpus,
            if self.retune {
                " and kept (it already re-did a noisy one)"
            } else {
                " and the next run re-tunes it once"
            }
        ))
    }
}

/// Where the tuner takes the 1-minute load average from.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum LoadAverage {
    /// `/proc/loadavg` (unknown where unreadable).
    #[default]
    Proc,
    /// This reading (`SIPLLM_LOAD_AVERAGE`; `None`: unknown): a harness that knows the
    /// machine's load better, or a test.
    Given(Option<f64>),
}

impl LoadAverage {
    /// The reading.
    pub fn read(self) -> Option<f64> {
        match self {
            LoadAverage::Proc => read_load_average(),
            LoadAverage::Given(load) => load,
        }
    }
}

/// The variable that gives the 1-minute load average instead of `/proc/loadavg`.
pub const LOAD_AVERAGE_ENV: &str = "SIPLLM_LOAD_AVERAGE";

/// The 1-minute load average from `/proc/loadavg`, when readable.
pub fn read_load_average() -> Option<f64> {
    let bytes = regular_file::read(std::path::Path::new("/proc/loadavg"), 4096).ok()?;
    parse_load_average(&String::from_utf8_lossy(&bytes))
}

/// The first field of a `/proc/loadavg` line (or of `SIPLLM_LOAD_AVERAGE`), when it is a
/// number between 0 and [`crate::validate::MAX_LOAD_AVERAGE`].
pub(crate) fn parse_load_average(text: &str) -> Option<f64> {
    text.split_whitespace()
        .next()?
        .parse::<f64>()
        .ok()
        .filter(|l| l.is_finite() && (0.0..=crate::validate::MAX_LOAD_AVERAGE).contains(l))
}

/// The frequency governor of `cpu`, when readable (a short, printable word).
pub(crate) fn read_governor(cpu: usize) -> Option<String> {
    let path = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor");
    let bytes = regular_file::read(std::path::Path::new(&path), 4096).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let word = text.trim();
    (!word.is_empty() && word.len() <= 32 && word.chars().all(|c| c.is_ascii_graphic()))
        .then(|| word.to_string())
}

/// The tuning environment of `hw` before a tune, with `load_average` as read (one-minute
/// load), its governor read from the first allowed CPU.
pub(crate) fn before_tune(
    hw: &device_profile::HardwareInfo,
    load_average: Option<f64>,
    retune: bool,
) -> Environment {
    let first_cpu = hw.allowed_cpus.first().copied().unwrap_or(0);
    Environment::assess(
        load_average,
        hw.logical_cores.max(hw.effective_cpus),
        read_governor(first_cpu),
        retune,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_per_cpu_above_half_is_noisy() {
        assert!(!Environment::assess(Some(0.9), 2, None, false).noisy);
        assert!(!Environment::assess(Some(1.0), 2, None, false).noisy);
        let busy = Environment::assess(Some(1.2), 2, Some("performance".into()), false);
        assert!(busy.noisy && busy.wants_retune());
        assert!(busy.warning().unwrap().contains("re-tunes it once"));
        // Unknown load is not noisy; zero CPUs counts as one.
        assert!(!Environment::assess(None, 2, None, false).noisy);
        assert!(Environment::assess(Some(0.6), 0, None, false).noisy);
        // A noisy re-tune is kept: no third tune.
        let again = Environment::assess(Some(3.0), 2, None, true);
        assert!(again.noisy && !again.wants_retune());
        assert!(again.warning().unwrap().contains("kept"));
        assert_eq!(
            Environment::assess(Some(0.1), 2, None, false).warning(),
            None
        );
    }

    #[test]
    fn loadavg_lines_parse() {
        assert_eq!(
            parse_load_average("0.17 1.17 1.60 1/90 19437\n"),
            Some(0.17)
        );
        for bad in ["", "x 1 2", "-1 0 0", "nan 0 0"] {
            assert_eq!(parse_load_average(bad), None, "{bad}");
        }
    }
}
