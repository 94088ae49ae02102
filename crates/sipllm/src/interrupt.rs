//! What `SIGINT`, `SIGTERM` and `SIGHUP` do to `sipllm`: kill each llama-bench run's process
//! group, remove the temporary file of an output being written, then die of the signal as
//! before; and `SIGXFSZ` ignored, so that a file-size limit fails a write instead of
//! killing the process.
//!
//! Each llama-bench run has a process group of its own, so that a hang is killed with all it
//! started; that also keeps a terminal's Ctrl-C, sent to the foreground group, from reaching
//! it. Without these handlers, an interrupted `sipllm` would leave the run going, adopted by
//! init, for as long as it hangs, and a `.sipllm-*` file in the user's folder.

use std::ffi::{CString, c_char};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicPtr, Ordering};

/// The signals that stop `sipllm` and its runs.
const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The temporary file of the output being written, as a C string, or null: what the handler
/// removes. A string once stored here is never freed (a handler on another thread may still
/// read it); one output is written per run, so that is a few bytes at most.
static TEMP_FILE: AtomicPtr<c_char> = AtomicPtr::new(std::ptr::null_mut());

/// Names `path` as the temporary file an interrupt removes, until [`forget_temp_file`].
pub(crate) fn remove_on_interrupt(path: &Path) {
    use std::os::unix::ffi::OsStrExt as _;
    // A path with a NUL byte cannot exist; there is nothing to remove then.
    if let Ok(c) = CString::new(path.as_os_str().as_bytes()) {
        TEMP_FILE.store(c.into_raw(), Ordering::SeqCst);
    }
}

/// The temporary file was renamed or removed: an interrupt removes nothing now.
pub(crate) fn forget_temp_file() {
    TEMP_FILE.store(std::ptr::null_mut(), Ordering::SeqCst);
}

/// Installs the handlers of `SIGINT`, `SIGTERM` and `SIGHUP`: each kills the process group
/// of every llama-bench run under way ([`auto_tuner::llama_bench::kill_running`]), removes
/// the temporary file of an output being written, then lets the signal's default action end
/// the process, so that `sipllm` still dies of it (a shell reports 130 for `SIGINT`, 143 for
/// `SIGTERM`). A signal this process was started with ignored (`nohup`, a background job of
/// a non-interactive shell) stays ignored. `SIGXFSZ` is ignored: past a file-size limit
/// (`ulimit -f`) a write fails with `EFBIG`, which the writer reports, and leaves no
/// temporary file behind. An ignored signal stays ignored across `exec`, so the llama-bench
/// runs inherit that: a write of theirs past the limit fails the same way (they write only
/// to the pipes `sipllm` reads).
///
/// An error when the system refuses a handler; the signals then act as before.
pub fn handle_interrupts() -> io::Result<()> {
    for signal in SIGNALS {
        // SAFETY: an all-zero `sigaction` is a valid value (the default action, no flags, an
        // empty mask); querying with a null new action changes nothing.
        let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: `current` is a valid place for the kernel to write the current action.
        if unsafe { libc::sigaction(signal, std::ptr::null(), &mut current) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if current.sa_sigaction == libc::SIG_IGN {
            continue;
        }
        // SAFETY: as above, all zeros is a valid `sigaction`; its fields are set below.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // The handler runs once: `SA_RESETHAND` restores the default action on entry, so the
        // signal it raises again ends the process (once the handler returns and unblocks it).
        action.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
        // SAFETY: `action.sa_mask` is a valid signal set to empty.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: `action` is fully initialized and its handler is async-signal-safe (see
        // `on_interrupt`); the old action is not wanted.
        if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    // SAFETY: `SIG_IGN` is a valid disposition for `SIGXFSZ`, and no handler is involved.
    if unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Kills every llama-bench run's process group, removes the output's temporary file, then
/// raises `signal` again under its default action (restored by `SA_RESETHAND`): it is
/// blocked while the handler runs, and ends the process as soon as the handler returns.
extern "C" fn on_interrupt(signal: libc::c_int) {
    // Atomic loads, `killpg` and `unlink` alone: async-signal-safe.
    auto_tuner::llama_bench::kill_running();
    let temp = TEMP_FILE.load(Ordering::SeqCst);
    if !temp.is_null() {
        // SAFETY: a non-null pointer here came from `CString::into_raw` and is never freed,
        // so it is a valid NUL-terminated string; `unlink` is async-signal-safe.
        unsafe { libc::unlink(temp) };
    }
    // SAFETY: `raise` is async-signal-safe and has no memory-safety preconditions.
    unsafe { libc::raise(signal) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt as _;
    use std::process::Command;

    /// Set in the child this test runs: the temporary file to name, and whether to forget it.
    const CHILD: &str = "SIPLLM_TEST_INTERRUPT_CHILD";
    const FORGET: &str = "SIPLLM_TEST_INTERRUPT_FORGET";

    /// This test in a child process with `CHILD` at `temp`: its status.
    fn child(temp: &Path, forget: bool) -> std::process::ExitStatus {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "interrupt::tests::an_interrupt_removes_the_named_temporary_file",
        ])
        .env(CHILD, temp);
        if forget {
            cmd.env(FORGET, "1");
        }
        // The child's own test report would mix with this one's.
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
    }

    #[test]
    fn an_interrupt_removes_the_named_temporary_file() {
        if let Some(temp) = std::env::var_os(CHILD) {
            // The default action first, whatever the test runner left (`nohup` ignores
            // SIGHUP, a background job SIGINT): the handler is what is tested.
            // SAFETY: `SIG_DFL` is a valid disposition; no handler is involved.
            unsafe { libc::signal(libc::SIGTERM, libc::SIG_DFL) };
            handle_interrupts().unwrap();
            remove_on_interrupt(Path::new(&temp));
            if std::env::var_os(FORGET).is_some() {
                forget_temp_file();
            }
            // SAFETY: `raise` has no memory-safety preconditions; the handler ends the process.
            unsafe { libc::raise(libc::SIGTERM) };
            unreachable!("SIGTERM ends the process");
        }
        let dir = tempfile::tempdir().unwrap();
        let temp = dir.path().join(".sipllm-test");
        std::fs::write(&temp, "-t 4\n").unwrap();
        // Forgotten (renamed): the file stays, and the process still dies of the signal.
        assert_eq!(child(&temp, true).signal(), Some(libc::SIGTERM));
        assert!(temp.exists());
        // Named: the handler removes it, then the process dies of the signal.
        assert_eq!(child(&temp, false).signal(), Some(libc::SIGTERM));
        assert!(!temp.exists(), "the temporary file is left");
    }
}
