//! An output path that reaches the profile store through a bind mount is the store: `emit -o`
//! over a profile seen through one replaced it (the path's text, links resolved, is not the
//! store's). A harness of its own (`libtest-mimic`): making a bind mount takes root (or
//! `CAP_SYS_ADMIN`), and without it the trial shows as ignored with that reason.

mod common;

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::path::Path;
use std::process::Command;

fn main() {
    let args = Arguments::from_args();
    let trials = vec![Trial::ignorable_test(
        "emit_and_export_refuse_the_store_seen_through_a_bind_mount",
        the_store_through_a_bind_mount_is_refused,
    )];
    libtest_mimic::run(&args, trials).exit();
}

/// Unmounts its folder when dropped, whatever the trial's outcome.
struct Mounted<'a>(&'a Path);

impl Drop for Mounted<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).status();
    }
}

fn sipllm(home: &Path, args: &[&str]) -> Command {
    let mut cmd = common::hermetic(env!("CARGO_BIN_EXE_sipllm"));
    cmd.args(args).env("SIPLLM_HOME", home);
    cmd
}

fn the_store_through_a_bind_mount_is_refused() -> Result<Completion, Failed> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let home = dir.path().join("home");
    let view = dir.path().join("view");
    std::fs::create_dir_all(&view).map_err(|e| e.to_string())?;
    let tuned = sipllm(&home, &["--json", "--quiet", "--workload", "48x80"])
        .output()
        .map_err(|e| e.to_string())?;
    if !tuned.status.success() {
        return Err(String::from_utf8_lossy(&tuned.stderr).into_owned().into());
    }
    let json: serde_json::Value =
        serde_json::from_slice(&tuned.stdout).map_err(|e| e.to_string())?;
    let profile = Path::new(json["path"].as_str().ok_or("no path")?).to_path_buf();
    let before = std::fs::read(&profile).map_err(|e| e.to_string())?;
    let mount = Command::new("mount")
        .arg("--bind")
        .arg(&home)
        .arg(&view)
        .output();
    match mount {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            return Ok(Completion::Ignored {
                reason: Some(format!(
                    "cannot make a bind mount here (root or CAP_SYS_ADMIN): {}",
                    String::from_utf8_lossy(&out.stderr)
                        .lines()
                        .next()
                        .unwrap_or_default()
                )),
            });
        }
        Err(e) => {
            return Ok(Completion::Ignored {
                reason: Some(format!("cannot run mount: {e}")),
            });
        }
    }
    let _mounted = Mounted(&view);
    let name = profile.file_name().ok_or("no file name")?;
    let alias = view.join("runtime").join(name);
    let alias_dir = view.join("runtime").join("flags.txt");
    let emit: &[&str] = &[
        "emit",
        "--for",
        "llama.cpp",
        "--workload",
        "48x80",
        "--cached-only",
        "-o",
    ];
    for (args, dest) in [
        (emit, &alias),
        (emit, &alias_dir),
        (&["profile", "export", "-o"][..], &alias),
    ] {
        let out = sipllm(&home, args)
            .arg(dest)
            .output()
            .map_err(|e| e.to_string())?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() || !stderr.contains("lies in the profile store") {
            return Err(format!("{args:?} {}: {} {stderr}", dest.display(), out.status).into());
        }
    }
    if std::fs::read(&profile).map_err(|e| e.to_string())? != before {
        return Err("the profile was replaced".into());
    }
    if home.join("runtime").join("flags.txt").exists() {
        return Err("a file was written into the store".into());
    }
    Ok(Completion::Completed)
}
