//! Running a command with a timeout and bounded output: the process runs in a process group
//! of its own, and the whole group is killed when it runs too long, writes too much, or
//! leaves anything behind once it has exited. While it runs, its group is recorded where
//! [`kill_running`] finds it, so that a program interrupted by a signal can kill it too.

use crate::error::Error;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// What a finished process left: its status and both streams, each within the limit.
#[derive(Debug)]
pub struct Captured {
    /// How it ended.
    pub status: ExitStatus,
    /// Everything it wrote to stdout.
    pub stdout: Vec<u8>,
    /// Everything it wrote to stderr.
    pub stderr: Vec<u8>,
}

/// The longest wait between two looks at the process (the first looks come sooner).
const MAX_POLL: Duration = Duration::from_millis(20);

/// The longest wait for a process, whatever timeout is asked for.
const LONGEST_TIMEOUT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The process groups of the runs under way, a slot each; 0 is a free slot.
///
/// ## Memory ordering
///
/// A slot is claimed (0 to the group's id) right after the spawn and freed (back to 0)
/// before the child is reaped, each by one `SeqCst` operation, so that [`kill_running`],
/// which may run in a signal handler on any thread, never sees the id of a group whose
/// leader has been reaped (and whose id may since have gone to another process). `SeqCst`
/// rather than Acquire/Release: a signal handler's loads must not be ordered before a free
/// that the interrupted thread has already done, and these are a few operations per run.
static RUNNING: [AtomicI32; RUNNING_SLOTS] = [const { AtomicI32::new(0) }; RUNNING_SLOTS];

/// The most runs under way at once that [`kill_running`] can find; a run past them runs
/// unrecorded (a tuner runs one at a time).
const RUNNING_SLOTS: usize = 16;

/// Sends `SIGKILL` to the process group of every run under way in this process.
///
/// Async-signal-safe (atomic loads and `killpg`, no allocation, no lock), so a program's
/// `SIGINT` or `SIGTERM` handler may call it before it exits: each run's process group is
/// its own, so a terminal's `SIGINT` never reaches it, and nothing else would stop it.
/// A run whose group has not been recorded yet (the moment between its spawn and the
/// record) is missed.
pub fn kill_running() {
    for slot in &RUNNING {
        let group = slot.load(Ordering::SeqCst);
        if group > 0 {
            let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
        }
    }
}

/// A run's slot in [`RUNNING`], freed when it is dropped (or by [`Recorded::free`] before
/// the child is reaped).
struct Recorded {
    slot: Option<&'static AtomicI32>,
}

impl Recorded {
    /// Records `group` in a free slot, if there is one.
    fn record(group: i32) -> Recorded {
        let slot = RUNNING.iter().find(|slot| {
            slot.compare_exchange(0, group, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        });
        Recorded { slot }
    }

    /// Frees the slot: called before the child is reaped.
    fn free(&mut self) {
        if let Some(slot) = self.slot.take() {
            slot.store(0, Ordering::SeqCst);
        }
    }
}

impl Drop for Recorded {
    fn drop(&mut self) {
        self.free();
    }
}

/// A reader thread's report.
enum Event {
    /// The stream ended; all it wrote.
    Done(Stream, Vec<u8>),
    /// The stream went past the limit.
    Overflow(Stream),
    /// Reading failed.
    Failed(Stream, std::io::Error),
}

/// One of the two captured streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// The file a program named `program` starts: `program` itself when its name has a slash,
/// else the first file of that name in a directory of `PATH`, as a shell finds it; `None`
/// when `PATH` holds none.
pub fn find_program(program: &std::path::Path) -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt as _;
    if program.as_os_str().as_bytes().contains(&b'/') {
        return Some(program.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// `source` for a `program` not found, said to be looked up in `PATH` when its name has no
/// slash (as a shell does) and no directory of `PATH` holds it, where a user may have meant a
/// file in the working directory. A name found in `PATH` keeps the error as it is (a script
/// whose interpreter is missing fails with the same `ENOENT`).
fn explained(program: &std::ffi::OsStr, source: std::io::Error) -> std::io::Error {
    // A name with a slash is a path, found or not: the error says all.
    if source.kind() != std::io::ErrorKind::NotFound
        || find_program(std::path::Path::new(program)).is_some()
    {
        return source;
    }
    let name = crate::error::shown(&program.to_string_lossy());
    let here = if std::path::Path::new(program).is_file() {
        format!("; to run the file in this directory, write ./{name}")
    } else {
        String::new()
    };
    std::io::Error::new(
        source.kind(),
        format!(
            "{source}: a name without a slash is looked up in PATH, and no directory of PATH \
             holds it{here}"
        ),
    )
}

/// Runs `command` (stdin closed) to its end, capturing both streams.
///
/// Errors, each naming `shown_command`: it cannot start ([`Error::Spawn`]); it is still
/// running after `timeout` ([`Error::Timeout`]); a stream goes past `limit` bytes
/// ([`Error::OutputTooLarge`]). In the last two cases its process group is killed at once.
/// Once the process has exited, what is left of its group is killed too, so nothing it
/// started outlives the run or keeps its pipes open. The exit status itself is not judged.
/// (Public for the other programs of llama.cpp this workspace runs: `test-backend-ops`.)
pub fn run_bounded(
    command: &mut Command,
    shown_command: &str,
    timeout: Duration,
    limit: usize,
) -> Result<Captured, Error> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = command.spawn().map_err(|source| Error::Spawn {
        command: shown_command.to_string(),
        source: explained(command.get_program(), source),
    })?;
    // The child leads its group (`process_group(0)`): the group's id is its own.
    let mut recorded = Recorded::record(child.id() as i32);
    // A timeout past any real run (`Duration::MAX`) waits a century rather than overflow.
    let deadline = Instant::now() + timeout.min(LONGEST_TIMEOUT);
    let io_error = |what: &'static str, source: std::io::Error| Error::Io {
        command: shown_command.to_string(),
        what,
        source,
    };
    let events = match start_readers(&mut child, limit) {
        Ok(events) => events,
        Err(source) => {
            kill_and_reap(&mut child, &mut recorded);
            return Err(io_error("cannot start its output readers", source));
        }
    };
    let mut streams = Streams::default();
    let mut poll = Duration::from_millis(1);
    loop {
        match has_exited(&mut child) {
            Ok(true) => break,
            Ok(false) => {}
            Err(source) => {
                kill_and_reap(&mut child, &mut recorded);
                return Err(io_error("cannot wait for it", source));
            }
        }
        let now = Instant::now();
        if now >= deadline {
            kill_and_reap(&mut child, &mut recorded);
            return Err(Error::Timeout {
                command: shown_command.to_string(),
                timeout,
            });
        }
        match events.recv_timeout(poll.min(deadline - now)) {
            Ok(event) => {
                if let Err(e) = streams.take(event, shown_command, limit) {
                    kill_and_reap(&mut child, &mut recorded);
                    return Err(e);
                }
            }
            Err(RecvTimeoutError::Timeout) => poll = (poll * 2).min(MAX_POLL),
            // Both readers are done (the process closed its streams but runs on): the
            // channel no longer waits, so wait here.
            Err(RecvTimeoutError::Disconnected) => {
                std::thread::sleep(poll.min(deadline - now));
                poll = (poll * 2).min(MAX_POLL);
            }
        }
    }
    // The leader has exited but is not reaped yet, so its process group still exists and
    // cannot have been reused: kill whatever it left running, then reap it.
    kill_group(&child);
    recorded.free();
    let status = child
        .wait()
        .map_err(|source| io_error("cannot wait for it", source))?;
    // Every writer of the group is gone now; the readers end as soon as they have drained
    // the pipes. A writer still there left the group (`setsid`): it is not waited for past
    // a short grace, and the run is an error that says so, not a timeout.
    let drained_by = Instant::now() + ESCAPED_WRITER_GRACE;
    while !streams.complete() {
        let left = drained_by.saturating_duration_since(Instant::now());
        match events.recv_timeout(left) {
            Ok(event) => streams.take(event, shown_command, limit)?,
            Err(RecvTimeoutError::Timeout) => {
                return Err(io_error(
                    "reading its output",
                    std::io::Error::other(format!(
                        "it exited ({status}), but a process it started outside its process \
                         group still holds its output open {} s later; that process is left \
                         running",
                        ESCAPED_WRITER_GRACE.as_secs()
                    )),
                ));
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(io_error(
                    "reading its output",
                    std::io::Error::other("an output reader stopped without a result"),
                ));
            }
        }
    }
    Ok(Captured {
        status,
        stdout: streams.stdout.unwrap_or_default(),
        stderr: streams.stderr.unwrap_or_default(),
    })
}

/// How long the output may stay open once the process and its group are gone: the pipes
/// drain in milliseconds; only a process that left the group holds them longer.
const ESCAPED_WRITER_GRACE: Duration = Duration::from_secs(2);

/// The streams read so far.
#[derive(Default)]
struct Streams {
    stdout: Option<Vec<u8>>,
    stderr: Option<Vec<u8>>,
}

impl Streams {
    /// Records a reader's report; an overflow or a read error is the run's error.
    fn take(&mut self, event: Event, shown_command: &str, limit: usize) -> Result<(), Error> {
        match event {
            Event::Done(Stream::Stdout, bytes) => self.stdout = Some(bytes),
            Event::Done(Stream::Stderr, bytes) => self.stderr = Some(bytes),
            Event::Overflow(stream) => {
                return Err(Error::OutputTooLarge {
                    command: shown_command.to_string(),
                    stream: stream.name(),
                    limit,
                });
            }
            Event::Failed(stream, source) => {
                return Err(Error::Io {
                    command: shown_command.to_string(),
                    what: match stream {
                        Stream::Stdout => "reading its stdout",
                        Stream::Stderr => "reading its stderr",
                    },
                    source,
                });
            }
        }
        Ok(())
    }

    fn complete(&self) -> bool {
        self.stdout.is_some() && self.stderr.is_some()
    }
}

/// Starts one thread per stream, each reading at most `limit + 1` bytes.
fn start_readers(child: &mut Child, limit: usize) -> std::io::Result<Receiver<Event>> {
    let (sender, receiver) = mpsc::channel();
    let stdout = child
        .stdout
        .take()
        .map(|s| (Stream::Stdout, Box::new(s) as Box<dyn Read + Send>));
    let stderr = child
        .stderr
        .take()
        .map(|s| (Stream::Stderr, Box::new(s) as Box<dyn Read + Send>));
    for (stream, reader) in stdout.into_iter().chain(stderr) {
        let sender = sender.clone();
        std::thread::Builder::new()
            .name(format!("llama-bench {}", stream.name()))
            .spawn(move || {
                let mut bytes = Vec::new();
                let read = reader
                    .take((limit as u64).saturating_add(1))
                    .read_to_end(&mut bytes);
                let event = match read {
                    Err(e) => Event::Failed(stream, e),
                    Ok(_) if bytes.len() > limit => Event::Overflow(stream),
                    Ok(_) => Event::Done(stream, bytes),
                };
                // The receiver is gone only when the run already ended with an error.
                let _ = sender.send(event);
            })?;
    }
    Ok(receiver)
}

/// Whether the child has exited, without reaping it (so its process id and group stay
/// reserved until [`Child::wait`]).
#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
fn has_exited(child: &mut Child) -> std::io::Result<bool> {
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    let pid = Pid::from_raw(child.id() as i32);
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    loop {
        match waitid(Id::Pid(pid), flags) {
            Ok(WaitStatus::StillAlive) => return Ok(false),
            Ok(_) => return Ok(true),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Whether the child has exited. Without `waitid` this reaps it: the group kill that follows
/// can then, in a narrow window, miss what it left running.
#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
fn has_exited(child: &mut Child) -> std::io::Result<bool> {
    Ok(child.try_wait()?.is_some())
}

/// Sends `SIGKILL` to the child's process group (its id is the child's, see
/// `process_group(0)`); a group already empty is no error.
fn kill_group(child: &Child) {
    let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
}

/// Kills the child's process group and reaps the child, freeing its record first.
fn kill_and_reap(child: &mut Child, recorded: &mut Recorded) {
    kill_group(child);
    let _ = child.kill();
    recorded.free();
    let _ = child.wait();
}

#[cfg(test)]
mod tests;
