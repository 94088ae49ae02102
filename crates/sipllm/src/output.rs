//! The commands' stdout: every write checked (a full disk or a closed stdout is an error, a
//! reader that went away is not), clap's own `--help` and `--version` included; and the
//! files a command writes in place of stdout, whole or not at all.

use crate::interrupt;
use crate::progress::say;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Parses the command line into `C`. `--help` and `--version` are written through [`emit`],
/// so that a failed write is an error there too; a usage error goes to stderr with clap's
/// exit code (2). `Err` holds the exit code to return from `main`.
pub fn parse_args<C: clap::Parser>(program: &str) -> Result<C, ExitCode> {
    use clap::error::ErrorKind;
    match C::try_parse() {
        Ok(cli) => Ok(cli),
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            Err(emit(program, &e.render().to_string()))
        }
        Err(e) => {
            let _ = e.print();
            // `sipllm --workload 8x8 emit …` reads as if `emit` had no `--workload`.
            if e.kind() == ErrorKind::ArgumentConflict
                && e.to_string().contains("error: the subcommand '")
            {
                say(format_args!(
                    "{program}: a subcommand's flags go after its name: `{program} SUBCOMMAND \
                     --flag …`"
                ));
            }
            Err(ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2)))
        }
    }
}

/// Writes `text` to stdout. A reader that went away (`sipllm --json | head -c0`) is not an
/// error worth a message; any other failure (a full disk, a stdout closed at start) is
/// reported on stderr and gives a failing exit code. Never panics.
pub fn emit(program: &str, text: &str) -> ExitCode {
    emit_report(program, text, None)
}

/// [`emit`] for the report of a command that changed something (`done`, e.g. "the profiles
/// were imported"): a failure to write the report says that the change was made, so that no
/// one runs the command again for a lost report.
pub(crate) fn emit_report(program: &str, text: &str, done: Option<&str>) -> ExitCode {
    let written = if stdout_was_closed() {
        Err(std::io::Error::other("stdout is closed"))
    } else {
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            match done {
                Some(done) => say(format_args!(
                    "{program}: error: {done}, but the report of it cannot be written: {e}"
                )),
                None => say(format_args!(
                    "{program}: error: cannot write the output: {e}"
                )),
            }
            ExitCode::FAILURE
        }
    }
}

/// Whether file descriptor 1 was closed when the process started (`sipllm >&-`).
///
/// The Rust runtime reopens a closed standard descriptor on `/dev/null` before `main`, so
/// writes to it succeed and the output is lost without a word. The fact is recorded before
/// that, by a function in the ELF `.init_array`, which the loader runs before the runtime's
/// start-up. Elsewhere than Linux and Android it is not detected (always false).
fn stdout_was_closed() -> bool {
    closed_at_start::STDOUT.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod closed_at_start {
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Set once, before `main`, when fd 1 was not open; only read afterwards.
    pub(super) static STDOUT: AtomicBool = AtomicBool::new(false);

    extern "C" fn record() {
        // SAFETY: `fcntl(F_GETFD)` only queries the descriptor table; on a closed descriptor
        // it returns -1 (EBADF) and changes nothing.
        let flags = unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFD) };
        STDOUT.store(flags == -1, Ordering::Relaxed);
    }

    /// The loader calls every function in `.init_array` before `main` (and so before the
    /// Rust runtime reopens closed standard descriptors). It lives in the module `emit`'s
    /// caller links, so the linker keeps it.
    #[used]
    // SAFETY: `.init_array` holds pointers to `extern "C" fn()` called once at start-up;
    // `record` is one, touches no Rust runtime state but an atomic, and cannot unwind.
    #[unsafe(link_section = ".init_array")]
    static RECORD: extern "C" fn() = record;
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod closed_at_start {
    use std::sync::atomic::AtomicBool;

    /// Not detected on this platform.
    pub(super) static STDOUT: AtomicBool = AtomicBool::new(false);
}

/// Checks that a command may write its file at `path`, before any work: its directory
/// exists (and is a directory), and at `path` is nothing or a regular file (replaced whole).
/// A symbolic link, a directory, a FIFO, a device or a socket is refused, never written
/// through or replaced, and `-` is refused as a file name (it means stdout elsewhere, and
/// stdout holds the command's report).
pub(crate) fn check_destination(path: &Path) -> std::io::Result<()> {
    if path == Path::new("-") {
        return Err(std::io::Error::other(
            "\"-\" is not written as a file, and stdout holds the report; give a file name",
        ));
    }
    check_directory(directory_of(path))?;
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(meta) => {
            let kind = meta.file_type();
            let what = if kind.is_symlink() {
                "a symbolic link"
            } else if kind.is_dir() {
                "a directory"
            } else {
                use std::os::unix::fs::FileTypeExt as _;
                if kind.is_fifo() {
                    "a FIFO"
                } else if kind.is_block_device() || kind.is_char_device() {
                    "a device"
                } else {
                    "a socket"
                }
            };
            Err(std::io::Error::other(format!(
                "it exists and is {what}, not a regular file, and is never replaced; choose another \
                 path"
            )))
        }
    }
}

/// What a command's output file must never replace beyond what [`check_destination`]
/// refuses: the command's own input files (a `--gguf` model, a `--model-config`, the
/// `--llama-bench` binary) and the
/// files of the profile stores (the user's `<home>/runtime/`, the system store), which are
/// the tuner's: profiles, and the lock that keeps two tunes apart.
#[derive(Debug, Default)]
pub(crate) struct Guarded {
    inputs: Vec<PathBuf>,
    stores: Vec<PathBuf>,
}

impl Guarded {
    /// The model files `tune` reads and the llama-bench binary `runtime` names (none
    /// without them), and the stores `opt` names.
    pub(crate) fn of(
        tune: Option<&crate::tune_args::TuneArgs>,
        runtime: Option<&crate::tune_args::RuntimeArgs>,
        opt: &auto_tuner::AutoTunerOptions,
    ) -> Guarded {
        let inputs = tune
            .map_or_else(Vec::new, |t| {
                [&t.gguf, &t.model_config]
                    .into_iter()
                    .flatten()
                    .cloned()
                    .collect()
            })
            .into_iter()
            .chain(
                runtime
                    .and_then(|r| r.binary())
                    .and_then(|b| auto_tuner::llama_bench::find_program(&b)),
            )
            .collect();
        let stores = user_store(opt)
            .into_iter()
            .chain(opt.stores.system_profiles.clone())
            .collect();
        Guarded { inputs, stores }
    }

    /// Checks that `path` is none of the inputs (the same file, by device and inode, under
    /// any name) and lies in none of the stores (its directory, links resolved, is not one
    /// of them or below one, nor is it or a folder above it a store's directory by device
    /// and inode: a bind mount), and that it is not where a store is or would be created (the
    /// store's path or a folder above it: a file there leaves the tuner without a store).
    fn check(&self, path: &Path) -> std::io::Result<()> {
        use std::os::unix::fs::MetadataExt as _;
        if let Ok(out) = std::fs::metadata(path) {
            for input in &self.inputs {
                if let Ok(meta) = std::fs::metadata(input)
                    && (meta.dev(), meta.ino()) == (out.dev(), out.ino())
                {
                    return Err(std::io::Error::other(format!(
                        "it is {}, an input of this command, and is never replaced; choose \
                         another path",
                        auto_tuner::shown_path(input)
                    )));
                }
            }
        }
        let Ok(dir) = std::fs::canonicalize(directory_of(path)) else {
            return Ok(());
        };
        let out = path.file_name().map(|name| dir.join(name));
        for store in &self.stores {
            let Some(store_dir) = resolved(store) else {
                continue;
            };
            if dir.starts_with(&store_dir) || within_by_identity(&dir, &store_dir) {
                return Err(std::io::Error::other(format!(
                    "it lies in the profile store {}, whose files are the tuner's; choose \
                     another path",
                    auto_tuner::shown_path(store)
                )));
            }
            if out.as_ref().is_some_and(|out| store_dir.starts_with(out)) {
                return Err(std::io::Error::other(format!(
                    "it is where the profile store {} is or will be created; choose another \
                     path",
                    auto_tuner::shown_path(store)
                )));
            }
        }
        Ok(())
    }
}

/// Whether `dir` or a folder above it is `store`'s directory itself, by device and inode: the
/// store seen through another name that resolving links does not reveal (a bind mount).
fn within_by_identity(dir: &Path, store: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(store) = std::fs::metadata(store) else {
        return false;
    };
    dir.ancestors().any(|folder| {
        std::fs::metadata(folder)
            .is_ok_and(|meta| (meta.dev(), meta.ino()) == (store.dev(), store.ino()))
    })
}

/// `path` made absolute with every link resolved, as far as it exists: the part that does
/// not exist yet is added as it is written (a store not yet created, compared by where it
/// will be).
fn resolved(path: &Path) -> Option<PathBuf> {
    let path = std::path::absolute(path).ok()?;
    let mut rest = Vec::new();
    let mut existing = path.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            return Some(rest.iter().rev().fold(real, |p, part| p.join(part)));
        }
        rest.push(existing.file_name()?.to_os_string());
        existing = existing.parent()?;
    }
}

/// The directory of the user's profiles and lock (`<home>/runtime/`) under `opt`, if it has
/// a home.
pub(crate) fn user_store(opt: &auto_tuner::AutoTunerOptions) -> Option<PathBuf> {
    let home = opt.stores.home_dir().ok().flatten()?;
    Some(
        auto_tuner::ProfileCache::new(&home)
            .runtime_dir()
            .to_path_buf(),
    )
}

/// Checks, before any work, that a command may write its output file at `path`: what
/// [`check_destination`] checks, that `path` is nothing `guarded` keeps, and that a file can
/// be created in its directory (a temporary file made and removed there at once), so that
/// a read-only directory fails the command before it measures, not after.
pub(crate) fn check_output(path: &Path, guarded: &Guarded) -> std::io::Result<()> {
    check_destination(path)?;
    guarded.check(path)?;
    let dir = directory_of(path);
    temp_file_in(dir, 0o600).map(drop)
}

/// A temporary file `.sipllm-*` in `dir`, created with `mode` (less the umask); an error
/// names `dir` and the system's own words ("Too many open files"), never the temporary
/// file, which the user never named. Opened by this function rather than by tempfile,
/// whose errors wrap the system's and keep only its kind ("uncategorized error").
fn temp_file_in(dir: &Path, mode: u32) -> std::io::Result<tempfile::NamedTempFile> {
    use std::os::unix::fs::OpenOptionsExt as _;
    tempfile::Builder::new()
        .prefix(".sipllm-")
        .make_in(dir, |path| {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(path)
        })
        .map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "cannot create a file in {}: {e}",
                    auto_tuner::shown_path(dir)
                ),
            )
        })
}

/// The directory a file at `path` is written in: its parent, or `.` for a bare name.
fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Checks that `dir` exists and is a directory (a link to one is one); the error names it.
/// Created never: a mistyped directory is the user's to fix.
fn check_directory(dir: &Path) -> std::io::Result<()> {
    let shown = auto_tuner::shown_path(dir);
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            format!("{shown} is not a directory"),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(std::io::Error::new(
            e.kind(),
            format!("the directory {shown} does not exist"),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Err(std::io::Error::new(
            e.kind(),
            format!("the directory {shown} does not exist (a part of it is not a directory)"),
        )),
        Err(e) => Err(std::io::Error::new(
            e.kind(),
            format!("cannot reach the directory {shown}: {e}"),
        )),
    }
}

/// Writes `bytes` to `path` whole or not at all: a temporary file beside it, flushed, then
/// renamed over it (never written through it). A new file is readable as an ordinary file
/// (`rw-r--r--` as the umask allows); a regular file replaced keeps its permission bits
/// (`chmod 600` stays 600). Its owner and group cannot be kept without privileges: the file
/// is the writer's afterwards. What [`check_destination`] refuses is refused, and an error
/// names `path` or its directory, never the temporary file.
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    check_destination(path)?;
    let dir = directory_of(path);
    // The mode of the file replaced, read before the write; none for a new file.
    let kept_mode = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => Some(meta.permissions().mode() & 0o777),
        _ => None,
    };
    let mut tmp = temp_file_in(dir, 0o644)?;
    // An interrupt from here to the rename removes the temporary file.
    interrupt::remove_on_interrupt(tmp.path());
    let written = (|| {
        // Written through the `File`, whose errors carry no path.
        tmp.as_file_mut().write_all(bytes)?;
        if let Some(mode) = kept_mode {
            tmp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        tmp.as_file().sync_all()?;
        // Checked again just before the rename: something else may have appeared meanwhile.
        check_destination(path)?;
        tmp.persist(path).map_err(|e| e.error)
    })();
    // Renamed, or removed by the `NamedTempFile`'s drop on an error: nothing to remove now.
    interrupt::forget_temp_file();
    written.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    /// Set in the child these tests run of themselves: the file to write.
    const CHILD: &str = "SIPLLM_TEST_OUTPUT_CHILD";

    /// The test `name` of this module run in a child process with [`CHILD`] at `dest`,
    /// where it does the child's part; fails unless the child ran it and it passed.
    fn in_child(name: &str, dest: &Path) {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &format!("output::tests::{name}")])
            .env(CHILD, dest)
            .output()
            .unwrap();
        let report = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && report.contains("test result: ok. 1 passed"),
            "{:?}\n{report}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Lowers a soft limit of this process, its hard limit kept.
    fn limit(resource: libc::__rlimit_resource_t, soft: libc::rlim_t) {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `limit` is a valid `rlimit` for the call to write.
        assert_eq!(unsafe { libc::getrlimit(resource, &mut limit) }, 0);
        limit.rlim_cur = soft;
        // SAFETY: `limit` is a valid `rlimit` for the call to read.
        assert_eq!(unsafe { libc::setrlimit(resource, &limit) }, 0);
    }

    #[test]
    fn past_a_file_size_limit_a_write_fails_and_leaves_nothing() {
        if let Some(dest) = std::env::var_os(CHILD) {
            // The default action first, whatever the test runner left: the handlers' own
            // setting is what is tested.
            // SAFETY: `SIG_DFL` is a valid disposition; no handler is involved.
            unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_DFL) };
            crate::interrupt::handle_interrupts().unwrap();
            limit(libc::RLIMIT_FSIZE, 4096);
            let e = write_whole(Path::new(&dest), &[b'x'; 1 << 16]).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EFBIG), "{e}");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("flags.txt");
        std::fs::write(&dest, "-t 4\n").unwrap();
        // Without SIGXFSZ ignored, the child dies of it with a cut-off temporary file.
        in_child(
            "past_a_file_size_limit_a_write_fails_and_leaves_nothing",
            &dest,
        );
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["flags.txt"]);
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "-t 4\n");
    }

    #[test]
    fn a_temporary_file_that_cannot_be_made_is_said_in_the_system_s_words() {
        if let Some(dest) = std::env::var_os(CHILD) {
            // Descriptors 0 to 2 are open: no file can be opened now.
            limit(libc::RLIMIT_NOFILE, 3);
            let e = write_whole(Path::new(&dest), b"-t 4\n").unwrap_err();
            let text = e.to_string();
            assert!(
                text.contains("cannot create a file in ") && text.contains("Too many open files"),
                "{text}"
            );
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        in_child(
            "a_temporary_file_that_cannot_be_made_is_said_in_the_system_s_words",
            &dir.path().join("flags.txt"),
        );
    }

    #[test]
    fn a_replaced_file_keeps_its_mode_and_a_new_one_gets_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let mine = dir.path().join("mine.txt");
        std::fs::write(&mine, "x\n").unwrap();
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_whole(&mine, b"-t 4 -tb 4\n").unwrap();
        assert_eq!(std::fs::read_to_string(&mine).unwrap(), "-t 4 -tb 4\n");
        assert_eq!(mode(&mine), 0o600, "{:o}", mode(&mine));
        // A mode without write permission for the owner is kept too: the text is written
        // before the mode is set.
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o440)).unwrap();
        write_whole(&mine, b"second\n").unwrap();
        assert_eq!(std::fs::read_to_string(&mine).unwrap(), "second\n");
        assert_eq!(mode(&mine), 0o440, "{:o}", mode(&mine));

        // A new file: rw-r--r-- less what the umask takes, as any new file of the process.
        let new = dir.path().join("new.txt");
        write_whole(&new, b"new\n").unwrap();
        let probe = dir.path().join("probe");
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(&probe)
                .unwrap();
        }
        assert_eq!(mode(&new), mode(&probe));
        // Nothing but the two files and the probe: no temporary file left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
    }

    #[test]
    fn an_output_that_cannot_be_created_is_refused_before_any_work() {
        // No process creates files in /proc, root included (a mode-555 directory would not
        // stop root, who runs CI).
        let err = check_output(Path::new("/proc/sipllm-out.txt"), &Guarded::default()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot create a file in /proc: "),
            "{err}"
        );
        // A writable directory passes, and the probe leaves nothing behind.
        let dir = tempfile::tempdir().unwrap();
        check_output(&dir.path().join("x.txt"), &Guarded::default()).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_missing_or_false_directory_is_refused_by_name_before_any_write() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nodir");
        let err = check_destination(&missing.join("x.svg")).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
        assert_eq!(
            err.to_string(),
            format!("the directory {} does not exist", missing.display())
        );
        let file = dir.path().join("file");
        std::fs::write(&file, "kept").unwrap();
        let err = check_destination(&file.join("x.svg")).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{} is not a directory", file.display())
        );
        let err = check_destination(&file.join("sub").join("x.svg")).unwrap_err();
        assert!(
            err.to_string().starts_with(&format!(
                "the directory {} does not exist",
                file.join("sub").display()
            )),
            "{err}"
        );
        // The write refuses the same, by the same words, and writes nothing.
        let err = write_whole(&missing.join("x.svg"), b"x").unwrap_err();
        assert!(err.to_string().contains("nodir does not exist"), "{err}");
        assert!(!err.to_string().contains(".sipllm-"), "{err}");
        assert!(!missing.exists());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "kept");
        // A bare name is written in the current directory, which exists.
        assert_eq!(directory_of(Path::new("x.svg")), Path::new("."));
        assert!(check_directory(directory_of(Path::new("x.svg"))).is_ok());
    }

    #[test]
    fn each_kind_of_file_that_is_never_replaced_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let socket = dir.path().join("socket");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path().join("absent"), &link).unwrap();
        for (path, what) in [
            (Path::new("/dev/null"), "is a device"),
            (fifo.as_path(), "is a FIFO"),
            (socket.as_path(), "is a socket"),
            (link.as_path(), "is a symbolic link"),
            (dir.path(), "is a directory"),
        ] {
            let err = check_destination(path).unwrap_err().to_string();
            assert!(err.contains(what), "{}: {err}", path.display());
        }
    }

    #[test]
    fn a_path_that_cannot_be_looked_up_is_refused_with_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        // A name longer than a file system allows: neither "not found" nor "not a
        // directory", and not a path to write to.
        let long = "n".repeat(300);
        let err = check_destination(&dir.path().join(&long)).unwrap_err();
        assert!(!matches!(err.kind(), std::io::ErrorKind::NotFound), "{err}");
        let err = check_directory(&dir.path().join(&long))
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot reach the directory"), "{err}");
        let err = check_directory(&dir.path().join("absent"))
            .unwrap_err()
            .to_string();
        assert!(err.ends_with("does not exist"), "{err}");
        let file = dir.path().join("file");
        std::fs::write(&file, "mine").unwrap();
        let err = check_directory(&file.join("below"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("a part of it is not a directory"), "{err}");
    }
}
