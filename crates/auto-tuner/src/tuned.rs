//! What resolving a profile hands back: the [`Tuned`] profile, its [`Source`], and the
//! warnings met on the way.

use crate::profile::RuntimeProfile;
use crate::warnings::Warnings;
use std::path::PathBuf;

/// Where a [`Tuned`] profile came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `disable_autotune`: the defaults, nothing read or written.
    Defaults,
    /// A valid cached profile at this path.
    Cache(PathBuf),
    /// A valid profile of the read-only system store at this path.
    System(PathBuf),
    /// Measured now; saved at this path, or `None` when it could not be saved.
    Measured(Option<PathBuf>),
    /// Explicit settings; the path of the cached profile that gave the other knob, if any.
    Override(Option<PathBuf>),
    /// [`Rigor::Estimate`](crate::Rigor::Estimate) without a cached profile, or a run that
    /// found another process still tuning this machine when its wait for the lock ended: the
    /// physical performance cores, nothing measured or saved.
    Estimated,
}

impl Source {
    /// `defaults`, `cache`, `system`, `measured`, `override` or `estimated`.
    pub fn name(&self) -> &'static str {
        match self {
            Source::Defaults => "defaults",
            Source::Cache(_) => "cache",
            Source::System(_) => "system",
            Source::Measured(_) => "measured",
            Source::Override(_) => "override",
            Source::Estimated => "estimated",
        }
    }

    /// The profile file read or written, if any.
    pub fn path(&self) -> Option<&PathBuf> {
        match self {
            Source::Defaults | Source::Estimated => None,
            Source::Cache(p) | Source::System(p) => Some(p),
            Source::Measured(p) | Source::Override(p) => p.as_ref(),
        }
    }
}

/// The resolved profile, where it came from, and the warnings met on the way (a cached
/// profile ignored and why, a profile that could not be saved). The caller shows them.
#[derive(Debug, Clone)]
pub struct Tuned {
    /// The profile to run with.
    pub profile: RuntimeProfile,
    /// Where it came from.
    pub source: Source,
    /// One line per problem met and worked around.
    pub warnings: Vec<String>,
}

impl Warnings {
    /// The resolved profile with the warnings met.
    pub(crate) fn into_tuned(self, profile: RuntimeProfile, source: Source) -> Tuned {
        Tuned {
            profile,
            source,
            warnings: self.into_lines(),
        }
    }
}
