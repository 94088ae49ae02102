//! The profile cache: `<home>/runtime/<hardware_id>.json`, read with validation, written
//! all-or-nothing, and guarded by a lock file so that two processes never tune at once.

use crate::options::Workload;
use crate::profile::{RuntimeProfile, SCHEMA_VERSION, kernel_signature};
use device_profile::HardwareInfo;
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often a process waiting for another one's tuning lock tries again.
const LOCK_POLL: Duration = Duration::from_millis(10);

/// A cached profile larger than this is not read (a real one is a few tens of KiB).
pub const MAX_PROFILE_BYTES: u64 = 4 << 20;

/// Why a cached profile was not used. Each is reported in one warning line.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Rejection {
    /// Something other than a regular file is at the path.
    NotAFile,
    /// The file is larger than [`MAX_PROFILE_BYTES`].
    TooLarge(u64),
    /// The file could not be read.
    Unreadable(String),
    /// The file is empty.
    Empty,
    /// The text is not a profile document (truncated, not JSON, missing or mistyped keys).
    NotAProfile(String),
    /// Another schema version.
    SchemaVersion(u64),
    /// The profile names another machine.
    HardwareId(String),
    /// The thread count is 0 or above the CPUs this process may use.
    Threads {
        /// Threads in the profile.
        threads: usize,
        /// CPUs this process may use now.
        available: usize,
    },
    /// The policy name is unknown or disagrees with its id.
    Policy(String),
    /// A score is NaN, infinite or negative.
    Score(String),
    /// The machine behind the same id has changed (core count, cgroup limit, SIMD, …).
    HardwareChanged(Vec<String>),
    /// The profile was measured with another kernel path or kernel version.
    KernelSignature(String),
    /// The profile was measured on another matrix shape.
    Workload(Workload),
    /// The search that wrote it ran out of budget, and this run has none.
    Partial,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::NotAFile => write!(f, "it is not a regular file"),
            Rejection::TooLarge(n) => write!(
                f,
                "it is {n} bytes, more than the {MAX_PROFILE_BYTES} a profile may have"
            ),
            Rejection::Unreadable(e) => write!(f, "it cannot be read: {e}"),
            Rejection::Empty => write!(f, "it is empty"),
            Rejection::NotAProfile(e) => write!(f, "it is not a valid profile: {e}"),
            Rejection::SchemaVersion(v) => {
                write!(f, "schema version {v}, expected {SCHEMA_VERSION}")
            }
            Rejection::HardwareId(id) => write!(f, "it belongs to another machine ({id})"),
            Rejection::Threads { threads, available } => write!(
                f,
                "threads = {threads}, outside 1..={available} (the CPUs this process may use)"
            ),
            Rejection::Policy(e) => write!(f, "bad schedule policy: {e}"),
            Rejection::Score(e) => write!(f, "bad score: {e}"),
            Rejection::HardwareChanged(diffs) => {
                write!(f, "the machine has changed ({})", diffs.join(", "))
            }
            Rejection::KernelSignature(k) => write!(
                f,
                "it was measured with kernel {k:?}, now {:?}",
                kernel_signature()
            ),
            Rejection::Workload(w) => {
                write!(f, "it was measured on a {}x{} matrix", w.n_out, w.n_in)
            }
            Rejection::Partial => write!(f, "its search was cut short by a time budget"),
        }
    }
}

/// What looking up the cache found.
#[derive(Debug)]
pub enum Lookup {
    /// A valid profile.
    Hit(Box<RuntimeProfile>),
    /// Nothing at the path.
    Missing,
    /// Something unusable at the path, and why.
    Rejected(Rejection),
}

/// The profile cache under one home directory.
#[derive(Debug, Clone)]
pub struct ProfileCache {
    runtime_dir: PathBuf,
}

impl ProfileCache {
    /// The cache under `home` (profiles go to `home/runtime/`).
    pub fn new(home: &Path) -> Self {
        ProfileCache {
            runtime_dir: home.join("runtime"),
        }
    }

    /// Where the profile of `hardware_id` lives.
    pub fn path_for(&self, hardware_id: &str) -> PathBuf {
        self.runtime_dir
            .join(format!("{}.json", safe_file_stem(hardware_id)))
    }

    /// Reads and validates the profile of `hw` for `workload`; a partial profile (budget run
    /// out) is accepted only if `accept_partial`.
    pub fn lookup(&self, hw: &HardwareInfo, workload: Workload, accept_partial: bool) -> Lookup {
        let path = self.path_for(&hw.hardware_id());
        let text = match read_bounded(&path) {
            Ok(Some(text)) => text,
            Ok(None) => return Lookup::Missing,
            Err(rejection) => return Lookup::Rejected(rejection),
        };
        match validate(&text, hw, workload) {
            Ok(profile) if profile.partial && !accept_partial => {
                Lookup::Rejected(Rejection::Partial)
            }
            Ok(profile) => Lookup::Hit(Box::new(profile)),
            Err(rejection) => Lookup::Rejected(rejection),
        }
    }

    /// The lock file guarding the tuning of `hardware_id`.
    pub fn lock_path(&self, hardware_id: &str) -> PathBuf {
        self.runtime_dir
            .join(format!("{}.lock", safe_file_stem(hardware_id)))
    }

    /// Takes the tuning lock of `hardware_id`, waiting while another process holds it, but
    /// not past `deadline` (`Ok(None)` then). Creates the runtime directory if needed.
    pub fn lock(&self, hardware_id: &str, deadline: Instant) -> io::Result<Option<CacheLock>> {
        fs::create_dir_all(&self.runtime_dir)?;
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.lock_path(hardware_id))?;
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => return Ok(Some(CacheLock { _lock: lock })),
                Err((back, Errno::EWOULDBLOCK)) if Instant::now() < deadline => {
                    file = back;
                    std::thread::sleep(LOCK_POLL);
                }
                Err((_, Errno::EWOULDBLOCK)) => return Ok(None),
                Err((_, errno)) => return Err(io::Error::from(errno)),
            }
        }
    }

    /// Writes `profile` all-or-nothing: a temporary file in the same directory, flushed to
    /// disk, then renamed over the old profile. Returns the path written.
    pub fn save(&self, profile: &RuntimeProfile) -> io::Result<PathBuf> {
        fs::create_dir_all(&self.runtime_dir)?;
        let path = self.path_for(&profile.hardware_id);
        let mut json = serde_json::to_vec_pretty(profile).map_err(io::Error::other)?;
        json.push(b'\n');
        let mut tmp = tempfile::Builder::new()
            .prefix(".profile-")
            .suffix(".tmp")
            .permissions(profile_permissions())
            .tempfile_in(&self.runtime_dir)?;
        tmp.write_all(&json)?;
        tmp.as_file().sync_all()?;
        // An empty directory squatting on the path (never a non-empty one) is replaced.
        if fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            fs::remove_dir(&path)?;
        }
        tmp.persist(&path).map_err(|e| e.error)?;
        if let Ok(dir) = File::open(&self.runtime_dir) {
            // Makes the rename itself durable; a failure here loses nothing already written.
            let _ = dir.sync_all();
        }
        Ok(path)
    }
}

/// A profile is an ordinary readable file (`rw-r--r--`, as the umask allows), not the
/// temporary file's private mode.
fn profile_permissions() -> fs::Permissions {
    use std::os::unix::fs::PermissionsExt;
    fs::Permissions::from_mode(0o644)
}

/// Held while a process tunes a machine; released on drop.
#[derive(Debug)]
pub struct CacheLock {
    _lock: Flock<File>,
}

/// A file stem that cannot leave the runtime directory, whatever the id holds.
fn safe_file_stem(hardware_id: &str) -> String {
    let stem: String = hardware_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(128)
        .collect();
    if stem.is_empty() {
        "unknown".to_string()
    } else {
        stem
    }
}

/// Reads the file at `path`: `Ok(None)` when nothing is there, a rejection when something
/// unusable is.
fn read_bounded(path: &Path) -> Result<Option<Vec<u8>>, Rejection> {
    let meta = match fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Rejection::Unreadable(e.to_string())),
    };
    if !meta.is_file() {
        return Err(Rejection::NotAFile);
    }
    if meta.len() > MAX_PROFILE_BYTES {
        return Err(Rejection::TooLarge(meta.len()));
    }
    let mut text = Vec::new();
    File::open(path)
        .and_then(|f| f.take(MAX_PROFILE_BYTES + 1).read_to_end(&mut text))
        .map_err(|e| Rejection::Unreadable(e.to_string()))?;
    if text.len() as u64 > MAX_PROFILE_BYTES {
        return Err(Rejection::TooLarge(text.len() as u64));
    }
    if text.trim_ascii().is_empty() {
        return Err(Rejection::Empty);
    }
    Ok(Some(text))
}

/// Checks a profile document against this machine and this tuner.
fn validate(
    text: &[u8],
    hw: &HardwareInfo,
    workload: Workload,
) -> Result<RuntimeProfile, Rejection> {
    let value: serde_json::Value =
        serde_json::from_slice(text).map_err(|e| Rejection::NotAProfile(e.to_string()))?;
    let version = value.get("schema_version").and_then(|v| v.as_u64());
    match version {
        Some(v) if v == u64::from(SCHEMA_VERSION) => {}
        Some(v) => return Err(Rejection::SchemaVersion(v)),
        None => {
            return Err(Rejection::NotAProfile(
                "no numeric schema_version".to_string(),
            ));
        }
    }
    if let Some(name) = value.get("schedule_policy").and_then(|v| v.as_str())
        && let Err(e) = name.parse::<threadpool::SchedulePolicy>()
    {
        return Err(Rejection::Policy(e.to_string()));
    }
    let profile: RuntimeProfile =
        serde_json::from_value(value).map_err(|e| Rejection::NotAProfile(e.to_string()))?;

    let id = hw.hardware_id();
    if profile.hardware_id != id {
        return Err(Rejection::HardwareId(profile.hardware_id));
    }
    if profile.schedule_policy.id() != profile.schedule_policy_id {
        return Err(Rejection::Policy(format!(
            "{} has id {}, not {}",
            profile.schedule_policy,
            profile.schedule_policy.id(),
            profile.schedule_policy_id
        )));
    }
    let available = crate::usable_cpus(hw);
    if profile.threads == 0 || profile.threads > available {
        return Err(Rejection::Threads {
            threads: profile.threads,
            available,
        });
    }
    let scores = [
        ("pseudo_tokens_per_sec", profile.pseudo_tokens_per_sec),
        ("gbps", profile.gbps),
        ("tuning_seconds", profile.tuning_seconds),
    ];
    for (name, score) in scores {
        if !score.is_finite() || score < 0.0 {
            return Err(Rejection::Score(format!("{name} = {score}")));
        }
    }
    if profile.pseudo_tokens_per_sec <= 0.0 || profile.gbps <= 0.0 {
        return Err(Rejection::Score(
            "the chosen configuration has no score".to_string(),
        ));
    }
    for m in &profile.measurements {
        let valid = |x: f64| x.is_finite() && x >= 0.0;
        if !valid(m.pseudo_tokens_per_sec) || !valid(m.gbps) {
            return Err(Rejection::Score(format!(
                "measurement of {} threads / {} is {}",
                m.threads, m.schedule_policy, m.pseudo_tokens_per_sec
            )));
        }
    }
    let differences = crate::hardware_differences(hw, &profile.hardware);
    if !differences.is_empty() {
        return Err(Rejection::HardwareChanged(differences));
    }
    if profile.kernel != kernel_signature() {
        return Err(Rejection::KernelSignature(profile.kernel));
    }
    if profile.workload != workload {
        return Err(Rejection::Workload(profile.workload));
    }
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_stems_never_escape_the_directory() {
        for id in ["", "..", "../x", "a/b", "/", "x\0y", "é"] {
            let stem = safe_file_stem(id);
            assert!(!stem.is_empty());
            assert!(
                stem.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            );
            assert_ne!(stem, "..");
        }
        assert_eq!(
            safe_file_stem("x86_64_amd_epyc_2c_24gb"),
            "x86_64_amd_epyc_2c_24gb"
        );
    }
}
