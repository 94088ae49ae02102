//! The profile stores as a whole: list the profiles of the user's cache and the system
//! store, export this machine's profiles as one bundle, import a bundle all-or-nothing, and
//! clear the user's profiles. The system store is only ever read.

use crate::cache::{
    MAX_LOCK_WAIT, ProfileCache, Slot, check_reads_back, read_bounded, waiting_for_lock,
};
use crate::error::TunerError;
use crate::options::{AutoTunerOptions, ProfileHome, Stores};
use crate::profile::{RuntimeProfile, utc_timestamp};
use crate::rigor::Rigor;
use crate::validate::{Measured, Rejection, validate_as_recorded};
use device_profile::HardwareInfo;
use matmul_kernel::{Isa, Kernel};
use model_workload::shown_path;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

/// The version of the bundle document written by [`export_profiles`]; a bundle of another
/// version is not imported.
pub const BUNDLE_FORMAT_VERSION: u32 = 1;

/// A bundle larger than this is not imported: a profile is a few to a few tens of KiB, and
/// parsing takes about sixteen times the text's size in memory at its peak.
pub const MAX_BUNDLE_BYTES: u64 = 16 << 20;

/// The most profiles one bundle may carry.
const MAX_BUNDLE_PROFILES: usize = 1024;

/// Which store a profile lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Store {
    /// The user's cache, `$SIPLLM_HOME/runtime`.
    User,
    /// The read-only system store (`SIPLLM_SYSTEM_PROFILES`, default `/etc/sipllm/runtime`).
    System,
}

impl Store {
    /// `user` or `system`.
    pub fn name(self) -> &'static str {
        match self {
            Store::User => "user",
            Store::System => "system",
        }
    }
}

/// One profile file of a store, as [`list_profiles`] finds it.
#[derive(Debug, Clone)]
pub struct StoredProfile {
    /// The store it is in.
    pub store: Store,
    /// Its path.
    pub path: PathBuf,
    /// Its name without `.json`: what `sipllm profile show` takes.
    pub id: String,
    /// The document, when it parses as a profile (of any machine).
    pub profile: Option<RuntimeProfile>,
    /// `Ok` when this machine and kernel would use it; else why not. A file whose name is
    /// not the one the cache gives the profile it holds ([`ProfileCache::paths_of`]:
    /// `<id>_backup.json`, a copy under another name) is never read by the tuner, and is
    /// not valid whatever it holds.
    pub valid: Result<(), String>,
    /// Whether the file is a symbolic link (an administrator's pattern): the tuner reads
    /// through it, [`export_profiles`] never does.
    pub link: bool,
}

/// Every profile file of the user's cache, then of the system store, each checked against
/// `hw` and the kernel it names (any kernel this CPU runs: a forced `SIPLLM_KERNEL` uses
/// it), and one line per store that cannot be read (the other is still listed). A store
/// that does not exist has none.
pub fn list_profiles(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
) -> (Vec<StoredProfile>, Vec<String>) {
    let mut found = Vec::new();
    let mut problems = Vec::new();
    let kernel = opt.question.kernel();
    for (store, cache) in stores(&opt.stores, &mut problems) {
        match cache.profile_files() {
            Ok(files) => {
                for path in files {
                    found.push(inspect(store, &cache, path, hw, kernel));
                }
                for path in cache.non_file_entries() {
                    problems.push(format!(
                        "{} in the {} store is not a regular file: not listed as a profile",
                        model_workload::shown_path(&path),
                        store.name()
                    ));
                }
            }
            Err(e) => problems.push(format!(
                "cannot list the {} store {}: {e}",
                store.name(),
                model_workload::shown_path(cache.runtime_dir())
            )),
        }
    }
    (found, problems)
}

/// The kernel a profile document names, when this CPU runs it; else `fallback` (and the
/// validation then says which kernel it was measured with).
fn named_kernel(text: &[u8], fallback: Kernel) -> Kernel {
    serde_json::from_slice::<serde_json::Value>(text)
        .ok()
        .and_then(|v| {
            let name = v
                .get("kernel")?
                .as_str()?
                .split_whitespace()
                .next()?
                .to_string();
            name.parse::<Isa>().ok()?.token().ok()
        })
        .unwrap_or(fallback)
}

/// The directory of the user's store, or why there is none.
fn user_home(stores: &Stores) -> Result<PathBuf, TunerError> {
    match stores.home_dir()? {
        Some(dir) => Ok(dir),
        None if stores.home == ProfileHome::None => Err(TunerError::NoCache),
        None => Err(TunerError::NoHome),
    }
}

/// The stores `stores` names, user first; a user's store that cannot be located is a line
/// of `problems`.
fn stores(stores: &Stores, problems: &mut Vec<String>) -> Vec<(Store, ProfileCache)> {
    let user = match stores.home_dir() {
        Err(e) => {
            problems.push(format!("cannot locate the user store: {e}"));
            None
        }
        // No user store where one was to be found is said; none asked for is not.
        Ok(None) if stores.home == ProfileHome::FromEnv => {
            problems.push(TunerError::NoHome.to_string());
            None
        }
        Ok(home) => home,
    }
    .map(|h| (Store::User, ProfileCache::new(&h)))
    // A store that cannot be used is said once, and not listed (which would say it again).
    .filter(|(_, cache)| match cache.unusable() {
        Some(why) => {
            problems.push(why);
            false
        }
        None => true,
    });
    let system = stores
        .system_profiles
        .as_deref()
        .map(|d| (Store::System, ProfileCache::in_dir(d)));
    user.into_iter().chain(system).collect()
}

/// Reads and checks the profile file at `path` of `cache`, a profile of our kernels against
/// `kernel` unless it names another this CPU runs, and then that its name is the one the
/// cache gives the profile it holds.
fn inspect(
    store: Store,
    cache: &ProfileCache,
    path: PathBuf,
    hw: &HardwareInfo,
    kernel: Kernel,
) -> StoredProfile {
    let id = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let link = is_link(&path);
    let (profile, valid) = match read_bounded(&path) {
        Ok(Some(text)) => {
            let profile = serde_json::from_slice::<RuntimeProfile>(&text).ok();
            let valid = check_stored(cache, &path, &text, hw, kernel).map(|_| ());
            (profile, valid)
        }
        Ok(None) => (None, Err("it disappeared".to_string())),
        Err(why) => (None, Err(why.to_string())),
    };
    StoredProfile {
        store,
        path,
        id,
        profile,
        valid,
        link,
    }
}

/// Why a file that holds a profile under a name other than the cache's for it is not used.
const NOT_A_PROFILE_NAME: &str = "not a profile name: the tuner never reads this file";

/// The profile `text`, read from `path` in `cache`, checked as the tuner would read it
/// there: valid for this machine and `kernel` (or another kernel it names that this CPU
/// runs), and at the very name the cache gives it ([`ProfileCache::paths_of`]); else why
/// not. What [`list_profiles`] reports and [`export_profiles`] takes.
fn check_stored(
    cache: &ProfileCache,
    path: &Path,
    text: &[u8],
    hw: &HardwareInfo,
    kernel: Kernel,
) -> Result<RuntimeProfile, String> {
    let profile = validate_as_recorded(text, hw, named_kernel(text, kernel), None, true)
        .map_err(|why| why.to_string())?;
    if cache.paths_of(&profile, hw).iter().any(|p| p == path) {
        Ok(profile)
    } else {
        Err(NOT_A_PROFILE_NAME.to_string())
    }
}

/// Whether `path` itself is a symbolic link (not whether it leads to one).
fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// Every profile of this machine in a bundle, as `sipllm profile export` writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileBundle {
    /// [`BUNDLE_FORMAT_VERSION`].
    pub format_version: u32,
    /// The machine the profiles were tuned on.
    pub hardware_id: String,
    /// When the bundle was written, RFC 3339 UTC.
    pub exported_at: String,
    /// The profile documents, as stored.
    pub profiles: Vec<serde_json::Value>,
}

/// Every valid profile of this machine in the user's cache (all workloads, thread limits
/// and kernels this CPU runs), as one bundle, and one warning per profile file of this
/// machine left out (and why).
///
/// Only the cache's own files are exported: regular files (never a symbolic link, whatever
/// it leads to) whose name is the very name the cache gives the profile they hold
/// ([`ProfileCache::paths_of`], the rule [`clear_profiles`] follows). A copy under another
/// name (`<id>_backup.json`) is left out, so no two entries of a bundle are for the same
/// file (which [`import_profiles`] refuses).
pub fn export_profiles(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
) -> Result<(ProfileBundle, Vec<String>), TunerError> {
    let cache = ProfileCache::new(&user_home(&opt.stores)?);
    if let Some(why) = cache.unusable_path() {
        return Err(TunerError::Store {
            path: shown_path(cache.runtime_dir()),
            message: format!("cannot be used: {why}"),
        });
    }
    let id = hw.hardware_id();
    let files = cache
        .files_of(&id)
        .map_err(|e| store_error(cache.runtime_dir(), e))?;
    let mut profiles = Vec::new();
    let mut warnings = Vec::new();
    for path in files {
        if is_link(&path) {
            warnings.push(format!(
                "leaving out {}: a symbolic link; only the store's own files are exported",
                model_workload::shown_path(&path)
            ));
            continue;
        }
        let checked = match read_bounded(&path) {
            Ok(Some(text)) => check_stored(&cache, &path, &text, hw, opt.question.kernel()),
            Ok(None) => continue,
            Err(why) => Err(why.to_string()),
        };
        match checked.and_then(|p| serde_json::to_value(p).map_err(|e| e.to_string())) {
            Ok(value) => profiles.push(value),
            Err(why) => warnings.push(format!(
                "leaving out {}: {why}",
                model_workload::shown_path(&path)
            )),
        }
    }
    let bundle = ProfileBundle {
        format_version: BUNDLE_FORMAT_VERSION,
        hardware_id: id,
        exported_at: utc_timestamp(SystemTime::now()),
        profiles,
    };
    Ok((bundle, warnings))
}

/// What [`import_profiles`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// Every profile file written, in the bundle's order.
    pub written: Vec<PathBuf>,
    /// Those of `written` where something was before (a profile the import replaced).
    pub replaced: Vec<PathBuf>,
}

/// Installs the profiles of the bundle `text` in the user's cache, all or nothing, under the
/// machine's lock, and returns the paths written, and which of them replaced a file. Every entry is checked as a cached profile
/// is (schema, `hardware_id`, kernel signature, scores, pinned CPUs, and the stored
/// `HardwareInfo` against this machine); with `force` the stored `HardwareInfo` is not
/// compared but replaced by this machine's, so that later runs use the profile ("these
/// machines are the same"). The first bad entry stops the import, named by its position.
pub fn import_profiles(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
    text: &[u8],
    force: bool,
) -> Result<Imported, TunerError> {
    let fail = |why: String| TunerError::Import(why);
    if text.len() as u64 > MAX_BUNDLE_BYTES {
        // A caller reads one byte past the limit, not the whole file: "more than" is all
        // that is known.
        return Err(fail(format!(
            "the bundle is more than {MAX_BUNDLE_BYTES} bytes, the most a bundle may have"
        )));
    }
    let bundle: serde_json::Value = model_workload::from_slice_unique_keys(text)
        .map_err(|e| fail(format!("not a profile bundle: {e}")))?;
    match bundle.get("format_version").and_then(|v| v.as_u64()) {
        Some(v) if v == u64::from(BUNDLE_FORMAT_VERSION) => {}
        Some(v) => {
            return Err(fail(format!(
                "bundle format version {v}, expected {BUNDLE_FORMAT_VERSION}"
            )));
        }
        None => {
            return Err(fail(
                "not a profile bundle: no numeric format_version".into(),
            ));
        }
    }
    let entries = bundle
        .get("profiles")
        .and_then(|p| p.as_array())
        .ok_or_else(|| fail("not a profile bundle: no profiles array".into()))?;
    if entries.is_empty() {
        return Err(fail("the bundle holds no profile".into()));
    }
    if entries.len() > MAX_BUNDLE_PROFILES {
        return Err(fail(format!(
            "the bundle holds {} profiles, more than {MAX_BUNDLE_PROFILES}",
            entries.len()
        )));
    }
    let cache = ProfileCache::new(&user_home(&opt.stores).map_err(|e| fail(e.to_string()))?);
    if let Some(why) = cache.unusable() {
        return Err(fail(why));
    }
    let id = hw.hardware_id();
    let mut install: Vec<(PathBuf, RuntimeProfile)> = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let n = i + 1;
        let text = serde_json::to_vec(entry).map_err(|e| fail(format!("entry {n}: {e}")))?;
        let kernel = named_kernel(&text, opt.question.kernel());
        let mut profile =
            validate_as_recorded(&text, hw, kernel, None, !force).map_err(|why| match why {
                Rejection::HardwareChanged(differences) => TunerError::ImportFromChangedMachine {
                    entry: n,
                    differences,
                },
                // Exported by another sipllm version (another schema, or the same kernel at
                // another revision): only a re-tune makes a profile of this one.
                other if another_version(&other) => fail(format!(
                    "entry {n}: {other} (the bundle was exported by another sipllm version: \
                     tune on a machine of this version and export again)"
                )),
                other => fail(format!("entry {n}: {other}")),
            })?;
        if force {
            profile.hardware = hw.clone();
        }
        // The file as the cache will write it must pass every check of a read: its size
        // (a profile of tens of thousands of measurements may be within the bundle's limit
        // and above a profile's) and the validation once more.
        check_reads_back(&profile, hw, &Measured::AsRecorded(kernel), None)
            .map_err(|why| fail(format!("entry {n}: as written, {why}")))?;
        let path = cache.path_for(&id, &Slot::of_profile(&profile, hw));
        if let Some(other) = install.iter().position(|(p, _)| *p == path) {
            return Err(fail(format!(
                "entries {} and {n} are both for {}",
                other + 1,
                shown_path(&path)
            )));
        }
        install.push((path, profile));
    }
    let _lock = cache
        .lock_or_wait(&id, Instant::now() + MAX_LOCK_WAIT, || {
            opt.reporter
                .step(&waiting_for_lock(&cache.lock_path(&id), MAX_LOCK_WAIT));
        })
        .map_err(|e| {
            fail(format!(
                "cannot lock {}: {e}",
                shown_path(&cache.lock_path(&id))
            ))
        })?
        .ok_or_else(|| fail("another process has been tuning this machine for too long".into()))?;
    // Under the lock, nothing comes or goes between this look and the save.
    let replaced = install
        .iter()
        .map(|(path, _)| path)
        .filter(|path| std::fs::symlink_metadata(path).is_ok())
        .cloned()
        .collect();
    cache.save_all(&install).map_err(|e| {
        fail(format!(
            "cannot write to {}: {e}",
            shown_path(cache.runtime_dir())
        ))
    })?;
    Ok(Imported {
        written: install.into_iter().map(|(path, _)| path).collect(),
        replaced,
    })
}

/// Removes this machine's profiles from the user's cache (every machine's with `all`),
/// under the machine's lock, and returns the paths removed. The system store is never
/// touched. A profile that cannot be removed does not stop the others:
/// [`TunerError::ClearIncomplete`] then names what was removed and what was not.
///
/// A file is removed only when it parses as a profile (of this machine, unless `all`) and
/// its name is the very name the cache gives that profile ([`ProfileCache::paths_of`]), or
/// it is a profile of an older schema under a name of the cache's grammar
/// (`older_profile_named_ours`): `notes.json`, `<id>_backup.json` or a copy of a profile
/// under another name stay. A
/// `runtime` that is a symbolic link is refused, never followed: nothing outside the home
/// is removed.
pub fn clear_profiles(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
    all: bool,
) -> Result<Vec<PathBuf>, TunerError> {
    let cache = ProfileCache::new(&user_home(&opt.stores)?);
    let dir = cache.runtime_dir();
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(store_error(dir, e)),
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(TunerError::Store {
                path: shown_path(dir),
                message: "is a symbolic link; profiles are never removed through one (nothing \
                          was removed)"
                    .to_string(),
            });
        }
        Ok(meta) if !meta.is_dir() => {
            return Err(TunerError::Store {
                path: shown_path(dir),
                message: "is not a directory (nothing was removed)".to_string(),
            });
        }
        Ok(_) => {}
    }
    let id = hw.hardware_id();
    let _lock = cache
        .lock_or_wait(&id, Instant::now() + MAX_LOCK_WAIT, || {
            opt.reporter
                .step(&waiting_for_lock(&cache.lock_path(&id), MAX_LOCK_WAIT));
        })
        .map_err(|e| store_error(&cache.lock_path(&id), e))?
        .ok_or_else(|| TunerError::Store {
            path: shown_path(&cache.lock_path(&id)),
            message: "another process has been tuning this machine for too long".to_string(),
        })?;
    let files = if all {
        cache.profile_files()
    } else {
        cache.files_of(&id)
    }
    .map_err(|e| store_error(dir, e))?;
    let mut removed = Vec::new();
    let mut failed = Vec::new();
    for path in files {
        let text = match read_bounded(&path) {
            Ok(Some(text)) => text,
            // A file that cannot be read cannot be told to be a profile: it stays, and is
            // named, where it was passed over without a word.
            Err(Rejection::Unreadable(why)) => {
                failed.push((path, format!("cannot be read to check it: {why}")));
                continue;
            }
            Ok(None) | Err(_) => continue,
        };
        match serde_json::from_slice::<RuntimeProfile>(&text) {
            Ok(profile) => {
                let named_ours = cache.paths_of(&profile, hw).contains(&path);
                if (!all && profile.hardware_id != id) || !named_ours {
                    continue;
                }
            }
            // A profile an older sipllm wrote, which this one never reads nor replaces (its
            // name, from an older workload key, may be one no run asks for again).
            Err(_) if older_profile_named_ours(&text, &path, (!all).then_some(id.as_str())) => {}
            Err(_) => continue,
        }
        // One that cannot be removed stops nothing: the others go, and the error names both.
        match std::fs::remove_file(&path) {
            Ok(()) => removed.push(path),
            Err(e) => failed.push((path, e.to_string())),
        }
    }
    if failed.is_empty() {
        Ok(removed)
    } else {
        Err(TunerError::ClearIncomplete { removed, failed })
    }
}

/// Whether `why` says a profile was written by another sipllm version: another schema, or
/// the same kernel at another revision (`avx512 matmul-kernel r41` against `… r42`), not a
/// kernel this CPU lacks.
fn another_version(why: &Rejection) -> bool {
    let body = |signature: &str| {
        signature
            .rsplit_once(" r")
            .map_or(signature.to_string(), |(body, _)| body.to_string())
    };
    match why {
        Rejection::SchemaVersion(_) => true,
        Rejection::KernelSignature { cached, now } => cached != now && body(cached) == body(now),
        _ => false,
    }
}

/// Whether `text` at `path` is a profile an older sipllm wrote (a `schema_version` below
/// [`crate::profile::SCHEMA_VERSION`], of `hardware_id` where one is given), under a name
/// the cache gives profiles: `<hardware_id>.json`, or that with parts of the slot grammar
/// (`_w` and a workload: a 16-digit hex key since schema 3, `<n_out>x<n_in>` before;
/// `_b`/`_t` and a number, `_r` and a rigor, `_k` and a kernel, `_x` and a runtime). A copy
/// under another name (`<id>_backup.json`) is not.
fn older_profile_named_ours(text: &[u8], path: &Path, hardware_id: Option<&str>) -> bool {
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(text) else {
        return false;
    };
    let older = doc
        .get("schema_version")
        .and_then(serde_json::Value::as_u64)
        .is_some_and(|v| v < u64::from(crate::profile::SCHEMA_VERSION));
    let Some(id) = doc.get("hardware_id").and_then(serde_json::Value::as_str) else {
        return false;
    };
    if !older || hardware_id.is_some_and(|wanted| wanted != id) {
        return false;
    }
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    let Some(parts) = name
        .strip_suffix(".json")
        .and_then(|stem| stem.strip_prefix(&crate::cache::safe_file_stem(id)))
    else {
        return false;
    };
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    parts.is_empty()
        || parts.strip_prefix('_').is_some_and(|parts| {
            parts.split('_').all(|part| match part.split_at_checked(1) {
                Some(("w", key)) => {
                    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
                    (key.len() == 16 && key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
                        || key
                            .split_once('x')
                            .is_some_and(|(o, i)| digits(o) && digits(i))
                }
                Some(("b" | "t", n)) => !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()),
                Some(("r", rigor)) => Rigor::ALL.iter().any(|r| r.name() == rigor),
                Some(("k" | "x", name)) => token(name),
                _ => false,
            })
        })
}

fn store_error(path: &Path, e: std::io::Error) -> TunerError {
    TunerError::Store {
        path: shown_path(path),
        message: e.to_string(),
    }
}

#[cfg(test)]
mod tests;
