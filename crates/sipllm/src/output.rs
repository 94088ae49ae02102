//! The commands' stdout: every write checked (a full disk or a closed stdout is an error, a
//! reader that went away is not), clap's own `--help` and `--version` included; and the
//! files a command writes in place of stdout, whole or not at all.

use std::io::Write as _;
use std::path::Path;
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
            Err(ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2)))
        }
    }
}

/// Writes `text` to stdout. A reader that went away (`sipllm --json | head -c0`) is not an
/// error worth a message; any other failure (a full disk, a stdout closed at start) is
/// reported on stderr and gives a failing exit code. Never panics.
pub fn emit(program: &str, text: &str) -> ExitCode {
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
            eprintln!("{program}: error: cannot write the output: {e}");
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

/// Checks that a command may write its file at `path`: nothing there, or a regular file
/// (replaced whole). A symbolic link, a directory, a FIFO, a device or a socket is refused,
/// never written through or replaced, and `-` is refused as a file name (it means stdout
/// elsewhere, and stdout holds the command's report).
pub(crate) fn check_destination(path: &Path) -> std::io::Result<()> {
    if path == Path::new("-") {
        return Err(std::io::Error::other(
            "\"-\" is not written as a file, and stdout holds the report; give a file name",
        ));
    }
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

/// Writes `bytes` to `path` whole or not at all: a temporary file beside it, flushed, then
/// renamed over it (never written through it), readable as an ordinary file (`rw-r--r--`
/// as the umask allows). What [`check_destination`] refuses is refused.
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    check_destination(path)?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".sipllm-")
        .permissions(std::fs::Permissions::from_mode(0o644))
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    // Checked again just before the rename: something else may have appeared meanwhile.
    check_destination(path)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
