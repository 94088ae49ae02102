//! Tests of `process.rs` on `sh`: both streams captured, the timeout, the output limit, and
//! what a process leaves running killed with its group.

use super::*;

fn sh(script: &str) -> Command {
    let mut command = Command::new("sh");
    command.args(["-c", script]);
    command
}

fn run(script: &str, timeout: Duration, limit: usize) -> Result<Captured, Error> {
    run_bounded(&mut sh(script), "sh -c SCRIPT", timeout, limit)
}

const LONG: Duration = Duration::from_secs(120);

#[test]
fn both_streams_and_the_status_are_captured() {
    let out = run("echo out; echo err >&2; exit 3", LONG, 1024).unwrap();
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn stdin_is_closed() {
    let out = run("cat; echo end", LONG, 1024).unwrap();
    assert_eq!(out.stdout, b"end\n");
}

#[test]
fn output_up_to_the_limit_is_kept_and_beyond_it_is_an_error() {
    let out = run("head -c 4096 /dev/zero", LONG, 4096).unwrap();
    assert_eq!(out.stdout.len(), 4096);
    for (script, stream) in [
        ("head -c 4097 /dev/zero", "stdout"),
        ("head -c 4097 /dev/zero >&2", "stderr"),
        // Endless output: the process is killed, not waited for.
        ("yes", "stdout"),
    ] {
        match run(script, LONG, 4096) {
            Err(Error::OutputTooLarge {
                stream: s,
                limit: 4096,
                command,
            }) => {
                assert_eq!(s, stream, "{script}");
                assert_eq!(command, "sh -c SCRIPT");
            }
            other => panic!("{script}: {other:?}"),
        }
    }
}

#[test]
fn a_process_past_its_timeout_is_killed_with_its_group() {
    // The background sleep holds both pipes: without the group kill, the readers would wait
    // for it.
    let err = run("sleep 1000 & sleep 1000", Duration::from_millis(300), 1024).unwrap_err();
    match &err {
        Error::Timeout { command, timeout } => {
            assert_eq!(command, "sh -c SCRIPT");
            assert_eq!(*timeout, Duration::from_millis(300));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "`sh -c SCRIPT` ran past its timeout of 0.3 s and was killed"
    );
}

#[test]
fn what_an_exited_process_left_running_is_killed() {
    // The background sleep keeps stdout open after the shell has exited.
    let out = run("sleep 1000 & echo done", LONG, 1024).unwrap();
    assert_eq!(out.stdout, b"done\n");
    assert!(out.status.success());
}

#[test]
fn a_missing_binary_is_a_spawn_error() {
    let mut command = Command::new("/nonexistent/llama-bench");
    let err = run_bounded(&mut command, "/nonexistent/llama-bench", LONG, 1024).unwrap_err();
    assert!(matches!(err, Error::Spawn { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("cannot start `/nonexistent/llama-bench`: "),
        "{err}"
    );
    assert!(!err.to_string().contains("PATH"), "{err}");
}

#[test]
fn a_bare_name_not_on_path_says_it_was_looked_up_there() {
    let name = "sipllm-no-such-llama-bench";
    let err = run_bounded(&mut Command::new(name), name, LONG, 1024).unwrap_err();
    assert!(matches!(err, Error::Spawn { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("looked up in PATH, and no directory of PATH holds it"),
        "{text}"
    );
    // No file of that name here: no `./NAME` is suggested.
    assert!(!text.contains("./"), "{text}");
}

#[test]
fn the_largest_timeout_and_limit_are_accepted() {
    let out = run("echo ok", Duration::MAX, usize::MAX).unwrap();
    assert_eq!(out.stdout, b"ok\n");
}

/// Whether a slot of [`RUNNING`] holds `group`.
fn is_recorded(group: i32) -> bool {
    RUNNING
        .iter()
        .any(|slot| slot.load(Ordering::SeqCst) == group)
}

#[test]
fn a_run_is_recorded_while_it_runs_and_freed_when_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!(
        "echo $$ > '{}.tmp' && mv '{0}.tmp' '{0}' && exec sleep 1000",
        pid_file.display()
    );
    let runner = std::thread::spawn(move || run(&script, LONG, 1024));
    let deadline = Instant::now() + LONG;
    let group = loop {
        if let Ok(text) = std::fs::read_to_string(&pid_file) {
            break text.trim().parse::<i32>().unwrap();
        }
        assert!(Instant::now() < deadline, "the script never wrote its pid");
        std::thread::sleep(Duration::from_millis(10));
    };
    // The shell leads its group and is recorded until it is reaped.
    assert!(is_recorded(group));
    killpg(Pid::from_raw(group), Signal::SIGKILL).unwrap();
    let out = runner.join().unwrap().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(Signal::SIGKILL as i32)
    );
    assert!(!is_recorded(group));
}
