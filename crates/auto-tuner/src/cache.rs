//! The profile cache: `<home>/runtime/<hardware_id>.json`, read with validation, written
//! all-or-nothing, and guarded by a lock file so that two processes never tune at once.

use crate::options::{DEFAULT_BATCH, DEFAULT_THREAD_CAP, Question, default_workload_key};
use crate::profile::{RuntimeProfile, TuningRequest};
use crate::rigor::Rigor;
use crate::validate::{MAX_PROFILE_BYTES, Measured, Rejection, validate_measured};
use device_profile::HardwareInfo;
use matmul_kernel::{Isa, Kernel};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often a process waiting for another one's tuning lock tries again.
const LOCK_POLL: Duration = Duration::from_millis(10);

/// The name prefix of the temporary files a save writes before renaming them.
const TEMP_PREFIX: &str = ".profile-";

/// A temporary file of ours older than this was left by a process killed between write and
/// rename, and is removed by the next save.
const STALE_TEMP_AGE: Duration = Duration::from_secs(10 * 60);

/// At most this many entries of the runtime directory named like a profile (or like a
/// temporary file of ours) are looked at; the names of the others are passed over, however
/// many there are, so that no number of other files hides a profile.
const MAX_ENTRIES_SCANNED: usize = 10_000;

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

/// Which of a machine's profile files a request reads and writes: each part of the request
/// that differs from the default one names the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// [`crate::Workload::key`], unless it is the default workload's.
    workload: Option<String>,
    /// The prefill batch, unless it is the default.
    batch: Option<usize>,
    /// The thread limit, unless it is the default one.
    thread_limit: Option<usize>,
    /// The rigor, unless it is the default (`measure`).
    rigor: Option<Rigor>,
    /// The kernel, unless it is the widest this CPU runs (a forced `SIPLLM_KERNEL`).
    kernel: Option<Isa>,
    /// The runtime measured instead of our kernels and its model (`llamacpp-<header
    /// hash>`), if any.
    runtime: Option<String>,
}

impl Slot {
    /// The slot of `request`, measured with `kernel`, on `hw`.
    pub fn for_request(request: &TuningRequest, kernel: Kernel, hw: &HardwareInfo) -> Slot {
        Slot::new(request, Some(kernel.isa()), hw)
    }

    /// The slot of `profile` on `hw` (an imported one, say).
    pub fn of_profile(profile: &RuntimeProfile, hw: &HardwareInfo) -> Slot {
        let slot = Slot::new(&profile.request, Slot::isa_of(profile), hw);
        match &profile.runtime {
            Some(record) => slot.with_runtime(Some(crate::runtime_key::slot_tag(&record.model))),
            None => slot,
        }
    }

    /// The same slot for a profile measured on a runtime (`llamacpp-<header hash>`), whose
    /// kernel is the runtime's own; `None`: our kernels.
    pub fn with_runtime(mut self, runtime: Option<String>) -> Slot {
        if runtime.is_some() {
            self.kernel = None;
        }
        self.runtime = runtime;
        self
    }

    /// The instruction set of the kernel `profile` was measured with.
    fn isa_of(profile: &RuntimeProfile) -> Option<Isa> {
        profile
            .kernel
            .split_whitespace()
            .next()
            .and_then(|name| name.parse::<Isa>().ok())
    }

    /// The rigor of this slot's profiles.
    pub(crate) fn rigor(&self) -> Rigor {
        self.rigor.unwrap_or_default()
    }

    /// The same slot at another rigor.
    pub fn with_rigor(mut self, rigor: Rigor) -> Slot {
        self.rigor = (rigor != Rigor::default()).then_some(rigor);
        self
    }

    /// The slots whose profiles serve a request of this slot at rigor `asked`: the same
    /// slot at every measured rigor from the highest down to `asked` (a profile serves
    /// requests of its rigor or a lower one; an estimate is never stored).
    pub(crate) fn serving(&self, asked: Rigor) -> Vec<Slot> {
        Rigor::ALL
            .into_iter()
            .rev()
            .filter(|&r| r >= asked && r != Rigor::Estimate)
            .map(|r| self.clone().with_rigor(r))
            .collect()
    }

    fn new(request: &TuningRequest, isa: Option<Isa>, hw: &HardwareInfo) -> Slot {
        let key = request.workload.key();
        let default_limit = crate::candidates::candidate_cpus(hw).clamp(1, DEFAULT_THREAD_CAP);
        Slot {
            workload: (key != default_workload_key()).then_some(key),
            batch: (request.batch != DEFAULT_BATCH).then_some(request.batch),
            thread_limit: (request.thread_limit != default_limit).then_some(request.thread_limit),
            rigor: None,
            kernel: isa.filter(|&isa| isa != Kernel::best().isa()),
            runtime: None,
        }
        .with_rigor(request.rigor)
    }
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

    /// The profiles directly in `runtime_dir` (the system store, `/etc/sipllm/runtime`).
    pub fn in_dir(runtime_dir: &Path) -> Self {
        ProfileCache {
            runtime_dir: runtime_dir.to_path_buf(),
        }
    }

    /// The directory holding the profiles and lock files.
    pub fn runtime_dir(&self) -> &Path {
        &self.runtime_dir
    }

    /// Why this cache cannot hold a profile whatever is done, or `None`: the deepest path of
    /// [`ProfileCache::runtime_dir`] that exists (the directory itself or an ancestor; those
    /// below it would be created) is a symbolic link that leads nowhere, or is not a
    /// directory, as when `SIPLLM_HOME` names a file,
    /// or is a directory whose entries this process may not reach (no search permission).
    /// Nothing else (a read-only directory, a full disk) is judged here: those surface when
    /// a file is read or written.
    pub fn unusable(&self) -> Option<String> {
        self.unusable_path().map(|why| {
            format!(
                "the profile store {} cannot be used: {why}",
                model_workload::shown_path(&self.runtime_dir)
            )
        })
    }

    /// [`ProfileCache::unusable`]'s reason alone: the path at fault and what it is.
    pub(crate) fn unusable_path(&self) -> Option<String> {
        let existing = self
            .runtime_dir
            .ancestors()
            .find(|dir| !dir.as_os_str().is_empty() && fs::symlink_metadata(dir).is_ok())?;
        let why = if fs::metadata(existing).is_err() {
            "is a symbolic link that leads nowhere (or in a loop)"
        } else if !existing.is_dir() {
            "is not a directory"
        } else if fs::symlink_metadata(existing.join(".sipllm-probe"))
            .is_err_and(|e| e.kind() == io::ErrorKind::PermissionDenied)
        {
            "is a directory whose entries this process may not reach"
        } else {
            return None;
        };
        Some(format!("{} {why}", model_workload::shown_path(existing)))
    }

    /// Where the profile of `hardware_id` for `slot` lives: `<hardware_id>.json` for the
    /// default request (the default workload, batch, thread limit and rigor) on the widest
    /// kernel; `_w<WORKLOAD KEY>` added for another workload, `_b<BATCH>` for another
    /// batch, `_t<THREADS>` for another thread limit, `_r<RIGOR>` for another rigor and
    /// `_k<KERNEL>` for a forced kernel and `_x<RUNTIME>` for a profile of llama.cpp
    /// (`_xllamacpp-<model header hash>`), so that runs asking different questions never
    /// share a file.
    pub fn path_for(&self, hardware_id: &str, slot: &Slot) -> PathBuf {
        let mut name = safe_file_stem(hardware_id);
        if let Some(key) = &slot.workload {
            name.push_str(&format!("_w{}", safe_file_stem(key)));
        }
        if let Some(batch) = slot.batch {
            name.push_str(&format!("_b{batch}"));
        }
        if let Some(limit) = slot.thread_limit {
            name.push_str(&format!("_t{limit}"));
        }
        if let Some(rigor) = slot.rigor {
            name.push_str(&format!("_r{rigor}"));
        }
        if let Some(isa) = slot.kernel {
            name.push_str(&format!("_k{isa}"));
        }
        if let Some(runtime) = &slot.runtime {
            name.push_str(&format!("_x{}", safe_file_stem(runtime)));
        }
        self.runtime_dir.join(format!("{name}.json"))
    }

    /// The names this cache gives `profile`'s file: the one its request and kernel make for
    /// its machine. For another machine's profile (`profile clear --all`), the default
    /// thread limit is that machine's (from its stored hardware) or this one's, and the
    /// widest kernel of that machine is unknown here, so the names with and without the
    /// kernel's part are both its names.
    pub fn paths_of(&self, profile: &RuntimeProfile, hw: &HardwareInfo) -> Vec<PathBuf> {
        let id = &profile.hardware_id;
        if *id == hw.hardware_id() {
            return vec![self.path_for(id, &Slot::of_profile(profile, hw))];
        }
        let isa = Slot::isa_of(profile);
        let mut paths = Vec::new();
        for machine in [hw, &profile.hardware] {
            let slot = Slot::of_profile(profile, machine);
            for kernel in [slot.kernel, None, isa] {
                let path = self.path_for(
                    id,
                    &Slot {
                        kernel,
                        ..slot.clone()
                    },
                );
                if !paths.contains(&path) {
                    paths.push(path);
                }
            }
        }
        paths
    }

    /// Reads the profile at `path` and validates it against this machine, this tuner,
    /// `kernel` and `request`. With `request` `None` (explicit overrides) any valid profile
    /// of the machine is accepted, partial or not.
    pub fn lookup(
        &self,
        path: &Path,
        hw: &HardwareInfo,
        kernel: Kernel,
        request: Option<&TuningRequest>,
    ) -> Lookup {
        self.lookup_measured(path, hw, &Measured::Kernel(kernel), request)
    }

    /// [`Self::lookup`] of a profile measured as `measured` says (our kernel, or a llama.cpp
    /// build and model).
    pub(crate) fn lookup_measured(
        &self,
        path: &Path,
        hw: &HardwareInfo,
        measured: &Measured<'_>,
        request: Option<&TuningRequest>,
    ) -> Lookup {
        let text = match read_bounded(path) {
            Ok(Some(text)) => text,
            Ok(None) => return Lookup::Missing,
            Err(rejection) => return Lookup::Rejected(rejection),
        };
        match validate_measured(&text, hw, measured, request, true) {
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
    ///
    /// The lock file is opened without following a symbolic link and without blocking, and
    /// must be a regular file: a link (dangling or not), a FIFO or a device at its path is
    /// an error (the caller tunes without the lock), never a hang or a file created elsewhere.
    pub fn lock(&self, hardware_id: &str, deadline: Instant) -> io::Result<Option<CacheLock>> {
        self.lock_or_wait(hardware_id, deadline, || {})
    }

    /// [`ProfileCache::lock`], calling `waiting` once, before the first wait, when another
    /// process holds the lock (so that a caller can say why nothing happens for a while).
    pub fn lock_or_wait(
        &self,
        hardware_id: &str,
        deadline: Instant,
        waiting: impl FnOnce(),
    ) -> io::Result<Option<CacheLock>> {
        let mut waiting = Some(waiting);
        use std::os::unix::fs::OpenOptionsExt;
        fs::create_dir_all(&self.runtime_dir).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot create the directory {}: {e}",
                    model_workload::shown_path(&self.runtime_dir)
                ),
            )
        })?;
        let path = self.lock_path(hardware_id);
        let mut options = OpenOptions::new();
        options
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o644);
        let shown = model_workload::shown_path(&path);
        let (mut file, _) = regular_file::open_with(&path, &mut options, regular_file::NO_FOLLOW)
            .map_err(|e| match e {
            regular_file::Error::SymbolicLink(_) => {
                io::Error::other(format!("{shown} is a symbolic link"))
            }
            regular_file::Error::NotAFile(_) => io::Error::other(format!(
                "{shown} is not a regular file (the tuning lock is a file of ours, which \
                 nothing of ours replaces: remove what is there)"
            )),
            regular_file::Error::Io { source, .. } => source,
            other => io::Error::other(other.to_string()),
        })?;
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => return Ok(Some(CacheLock { _lock: lock })),
                Err((back, Errno::EWOULDBLOCK)) if Instant::now() < deadline => {
                    file = back;
                    if let Some(waiting) = waiting.take() {
                        waiting();
                    }
                    std::thread::sleep(LOCK_POLL);
                }
                Err((_, Errno::EWOULDBLOCK)) => return Ok(None),
                Err((_, errno)) => return Err(io::Error::from(errno)),
            }
        }
    }

    /// Writes `profile` to `path` (in this cache's runtime directory) all-or-nothing: a
    /// temporary file in the same directory, flushed to disk, then renamed over the old
    /// profile. Temporary files of ours left by a killed process are removed first.
    pub fn save(&self, profile: &RuntimeProfile, path: &Path) -> io::Result<()> {
        self.save_all(&[(path.to_path_buf(), profile.clone())])
    }

    /// Writes every `(path, profile)` all-or-nothing: each is written and flushed to a
    /// temporary file first; only when all are written are they renamed into place, and if a
    /// rename fails, what was at each path replaced so far is put back exactly (a file from a
    /// hard link kept for the purpose, a symbolic link as the same link, an empty directory
    /// as it was) and the new files removed.
    ///
    /// Every path must be absent, a regular file, a symbolic link (replaced, never written
    /// through) or an empty directory; anything else (a FIFO, a device, a socket, a
    /// directory with entries) is an error before anything is written.
    pub fn save_all(&self, entries: &[(PathBuf, RuntimeProfile)]) -> io::Result<()> {
        for (path, _) in entries {
            check_destination(path)?;
        }
        fs::create_dir_all(&self.runtime_dir)?;
        self.remove_stale_temp_files(STALE_TEMP_AGE);
        let mut staged = Vec::with_capacity(entries.len());
        for (path, profile) in entries {
            staged.push((path, self.write_temp(profile)?));
        }
        // (path, what was there before) for every file installed so far.
        let mut installed: Vec<(&PathBuf, Backup)> = Vec::new();
        let mut outcome = Ok(());
        for (i, (path, tmp)) in staged.into_iter().enumerate() {
            let step = || -> io::Result<Backup> {
                let backup = self.back_up(path, i)?;
                if let Err(e) = tmp.persist(path) {
                    backup.restore(path);
                    return Err(e.error);
                }
                Ok(backup)
            };
            match step() {
                Ok(backup) => installed.push((path, backup)),
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        for (path, backup) in installed.into_iter().rev() {
            match &outcome {
                Ok(()) => backup.discard(),
                // Roll back: what was there returns, or the new file goes.
                Err(_) => backup.restore(path),
            }
        }
        if let Ok(dir) = File::open(&self.runtime_dir) {
            // Makes the renames durable; a failure here loses nothing already written.
            let _ = dir.sync_all();
        }
        outcome
    }

    /// Keeps what is at `path` (the `i`-th entry of a save) aside, so that a failed save
    /// can put it back: a regular file as a hard link, a symbolic link as a copy of the
    /// link, an empty directory moved away.
    fn back_up(&self, path: &Path, i: usize) -> io::Result<Backup> {
        let backup = self.runtime_dir.join(format!(
            "{TEMP_PREFIX}backup-{}-{i}.tmp",
            std::process::id()
        ));
        let meta = match fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Backup::Nothing),
            Err(e) => return Err(e),
        };
        let _ = fs::remove_file(&backup);
        if meta.file_type().is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(path)?, &backup)?;
            Ok(Backup::Link(backup))
        } else if meta.is_dir() {
            // Empty (checked before the save): moved aside whole.
            fs::rename(path, &backup)?;
            Ok(Backup::Dir(backup))
        } else {
            fs::hard_link(path, &backup)?;
            Ok(Backup::File(backup))
        }
    }

    /// `profile` as pretty JSON in a flushed temporary file of the runtime directory.
    fn write_temp(&self, profile: &RuntimeProfile) -> io::Result<tempfile::NamedTempFile> {
        let json = profile_text(profile)?;
        // Opened here rather than by tempfile, whose errors wrap the system's and keep only
        // its kind ("uncategorized error" for "Too many open files"), and name the
        // temporary file, which no one asked for.
        let mut tmp = tempfile::Builder::new()
            .prefix(TEMP_PREFIX)
            .suffix(".tmp")
            .make_in(&self.runtime_dir, |path| {
                use std::os::unix::fs::OpenOptionsExt as _;
                fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .mode(PROFILE_MODE)
                    .open(path)
            })
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "cannot create a file in {}: {e}",
                        model_workload::shown_path(&self.runtime_dir)
                    ),
                )
            })?;
        // Through the `File`, whose errors name no path: the caller names the profile's.
        tmp.as_file_mut().write_all(&json)?;
        tmp.as_file().sync_all()?;
        Ok(tmp)
    }

    /// The profile files (`*.json`) of this store, sorted; at most 10,000
    /// directory entries are looked at. A missing directory has none. Regular files, or
    /// links to one (an administrator's pattern); never a directory or a FIFO.
    pub fn profile_files(&self) -> io::Result<Vec<PathBuf>> {
        Ok(self.named_like_profiles()?.0)
    }

    /// The entries named like a profile (`*.json`, not hidden) that are not files: a
    /// directory, a FIFO, a device or a dangling link, which [`ProfileCache::profile_files`]
    /// passes over and nothing of ours removes. Nothing when the directory cannot be read.
    pub fn non_file_entries(&self) -> Vec<PathBuf> {
        self.named_like_profiles()
            .map(|(_, others)| others)
            .unwrap_or_default()
    }

    /// The entries named like a profile (`*.json`, not hidden; at most 10,000 of them
    /// looked at, whatever else the directory holds), sorted: the files (or links to one),
    /// then the rest.
    fn named_like_profiles(&self) -> io::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
        let entries = match fs::read_dir(&self.runtime_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Default::default()),
            Err(e) => return Err(e),
        };
        let (mut files, mut others): (Vec<PathBuf>, Vec<PathBuf>) = entries
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.ends_with(".json") && !name.starts_with('.')
            })
            .take(MAX_ENTRIES_SCANNED)
            .map(|e| e.path())
            .partition(|path| fs::metadata(path).is_ok_and(|m| m.is_file()));
        files.sort();
        others.sort();
        Ok((files, others))
    }

    /// The profile files of the machine `hardware_id`: its default slot and every other
    /// request's (`<id>.json`, `<id>_w…_r….json`).
    pub fn files_of(&self, hardware_id: &str) -> io::Result<Vec<PathBuf>> {
        let stem = safe_file_stem(hardware_id);
        Ok(self
            .profile_files()?
            .into_iter()
            .filter(|p| {
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                name.is_some_and(|n| {
                    n == format!("{stem}.json")
                        || ["w", "b", "t", "r", "k", "x"]
                            .iter()
                            .any(|part| n.starts_with(&format!("{stem}_{part}")))
                })
            })
            .collect())
    }

    /// Removes the regular files named `.profile-*.tmp` in the runtime directory whose last
    /// change is older than `age`: the temporary files of saves killed between write and
    /// rename. Anything else, and any failure, is left alone.
    pub fn remove_stale_temp_files(&self, age: Duration) {
        let Ok(entries) = fs::read_dir(&self.runtime_dir) else {
            return;
        };
        let now = std::time::SystemTime::now();
        let ours = entries.flatten().filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|name| name.starts_with(TEMP_PREFIX) && name.ends_with(".tmp"))
        });
        for entry in ours.take(MAX_ENTRIES_SCANNED) {
            // `DirEntry::metadata` does not follow a symbolic link.
            let Ok(meta) = entry.metadata() else { continue };
            let old = meta
                .modified()
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|elapsed| elapsed > age);
            if meta.is_file() && old {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
}

/// What was at a path before a save replaced it, kept aside until the save is over.
#[derive(Debug)]
enum Backup {
    /// Nothing was there.
    Nothing,
    /// A regular file, kept as a hard link at this path.
    File(PathBuf),
    /// A symbolic link, copied (same target) to this path.
    Link(PathBuf),
    /// An empty directory, moved to this path.
    Dir(PathBuf),
}

impl Backup {
    /// Puts back what was at `path`; a new file there is removed or replaced.
    fn restore(self, path: &Path) {
        match self {
            Backup::Nothing => {
                let _ = fs::remove_file(path);
            }
            Backup::File(backup) | Backup::Link(backup) => {
                let _ = fs::rename(backup, path);
            }
            Backup::Dir(backup) => {
                if fs::symlink_metadata(path).is_ok_and(|m| !m.is_dir()) {
                    let _ = fs::remove_file(path);
                }
                let _ = fs::rename(backup, path);
            }
        }
    }

    /// Forgets what was there: the save succeeded.
    fn discard(self) {
        match self {
            Backup::Nothing => {}
            Backup::File(backup) | Backup::Link(backup) => {
                let _ = fs::remove_file(backup);
            }
            Backup::Dir(backup) => {
                let _ = fs::remove_dir(backup);
            }
        }
    }
}

/// Checks that a save may replace what is at `path`: nothing, a regular file, a symbolic
/// link (replaced, not followed) or an empty directory.
fn check_destination(path: &Path) -> io::Result<()> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let kind = meta.file_type();
    if kind.is_file() || kind.is_symlink() {
        return Ok(());
    }
    if kind.is_dir() {
        return match fs::read_dir(path)?.next() {
            None => Ok(()),
            Some(_) => Err(io::Error::other(format!(
                "{} is a directory with entries, not a profile; nothing was written",
                model_workload::shown_path(path)
            ))),
        };
    }
    Err(io::Error::other(format!(
        "{} is not a regular file (a FIFO, a device or a socket), never replaced; nothing \
         was written",
        model_workload::shown_path(path)
    )))
}

/// A profile is an ordinary readable file (`rw-r--r--`, as the umask allows), not a
/// temporary file's private mode.
const PROFILE_MODE: u32 = 0o644;

/// The text of `profile` as the cache writes it: pretty JSON and a newline.
pub(crate) fn profile_text(profile: &RuntimeProfile) -> io::Result<Vec<u8>> {
    let mut json = serde_json::to_vec_pretty(profile).map_err(io::Error::other)?;
    json.push(b'\n');
    Ok(json)
}

/// Checks that `profile`, as the cache writes it, passes every check of a read: its size
/// ([`MAX_PROFILE_BYTES`]) and [`validate_measured`] of `measured` and `request`. What is
/// saved is checked so, by a tune and by an import: a file every later read rejects would
/// make every later run re-tune. The error says why, in a read's words.
pub(crate) fn check_reads_back(
    profile: &RuntimeProfile,
    hw: &HardwareInfo,
    measured: &Measured<'_>,
    request: Option<&TuningRequest>,
) -> Result<(), String> {
    let text = profile_text(profile).map_err(|e| e.to_string())?;
    if text.len() as u64 > MAX_PROFILE_BYTES {
        return Err(Rejection::TooLarge(text.len() as u64).to_string());
    }
    validate_measured(&text, hw, measured, request, true)
        .map(drop)
        .map_err(|why| why.to_string())
}

/// Held while a process tunes a machine; released on drop.
#[derive(Debug)]
pub struct CacheLock {
    _lock: Flock<File>,
}

/// A file stem that cannot leave the runtime directory, whatever the id holds.
pub(crate) fn safe_file_stem(hardware_id: &str) -> String {
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

/// The longest a process waits for another one tuning the same machine (with a budget, the
/// budget and a little more) before it serves what it can without measuring.
pub const MAX_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// The step a process reports when another holds the machine's lock at `path` and it waits
/// up to `wait`.
pub(crate) fn waiting_for_lock(path: &std::path::Path, wait: std::time::Duration) -> String {
    format!(
        "waiting for another process that is tuning this machine (lock {}; at most {} s)",
        model_workload::shown_path(path),
        wait.as_secs_f64().ceil()
    )
}

/// Reads the file at `path`: `Ok(None)` when nothing is there, a rejection when something
/// unusable is. The file is opened without blocking (a FIFO swapped in cannot hang the
/// reader) and its type checked on the open handle ([`regular_file::read`]), so nothing can
/// change between the check and the read.
pub(crate) fn read_bounded(path: &Path) -> Result<Option<Vec<u8>>, Rejection> {
    let text = match regular_file::read(path, MAX_PROFILE_BYTES) {
        Ok(text) => text,
        Err(regular_file::Error::NotFound(_)) => return Ok(None),
        Err(regular_file::Error::NotAFile(_) | regular_file::Error::SymbolicLink(_)) => {
            return Err(Rejection::NotAFile);
        }
        Err(regular_file::Error::TooLarge { bytes, .. }) => return Err(Rejection::TooLarge(bytes)),
        Err(regular_file::Error::Io { source, .. }) => {
            return Err(Rejection::Unreadable(source.to_string()));
        }
        Err(e) => return Err(Rejection::Unreadable(e.to_string())),
    };
    if text.trim_ascii().is_empty() {
        return Err(Rejection::Empty);
    }
    Ok(Some(text))
}

impl Question {
    /// The profile file this question reads and writes on `hw`.
    pub fn slot(&self, hw: &HardwareInfo) -> Slot {
        Slot::for_request(&self.request(hw), self.kernel(), hw)
    }
}

#[cfg(test)]
mod tests;
