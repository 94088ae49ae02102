//! What `SIGINT` and `SIGTERM` do to a `sipllm` that runs llama-bench: kill each run's
//! process group, then die of the signal as before.
//!
//! Each llama-bench run has a process group of its own, so that a hang is killed with all it
//! started; that also keeps a terminal's Ctrl-C, sent to the foreground group, from reaching
//! it. Without these handlers, an interrupted `sipllm` would leave the run going, adopted by
//! init, for as long as it hangs.

use std::io;

/// The signals that stop `sipllm` and its runs.
const SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

/// Installs the handlers of `SIGINT` and `SIGTERM`: each kills the process group of every
/// llama-bench run under way ([`auto_tuner::llama_bench::kill_running`]), then lets the
/// signal's default action end the process, so that `sipllm` still dies of it (a shell
/// reports 130 for `SIGINT`, 143 for `SIGTERM`). A signal this process was started with
/// ignored (`nohup`, a background job of a non-interactive shell) stays ignored.
///
/// An error when the system refuses a handler; the signals then act as before.
pub fn kill_llama_bench_on_interrupt() -> io::Result<()> {
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
    Ok(())
}

/// Kills every llama-bench run's process group, then raises `signal` again under its default
/// action (restored by `SA_RESETHAND`): it is blocked while the handler runs, and ends the
/// process as soon as the handler returns.
extern "C" fn on_interrupt(signal: libc::c_int) {
    // Atomic loads and `killpg` alone: async-signal-safe.
    auto_tuner::llama_bench::kill_running();
    // SAFETY: `raise` is async-signal-safe and has no memory-safety preconditions.
    unsafe { libc::raise(signal) };
}
