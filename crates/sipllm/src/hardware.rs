//! The machine the commands describe and tune: detected once, at start.

use crate::progress::say;
use device_profile::{HardwareInfo, SYSROOT_ENV};
use std::path::Path;
use std::process::ExitCode;

/// The running machine, or the test root `SIPLLM_SYSROOT` names; `program` prefixes the error.
/// A test root without a `proc/cpuinfo` file is refused (exit status 2, as every invalid
/// `SIPLLM_*` variable): detection never
/// fails, so a mistyped root would otherwise describe a machine of nothing
/// (`unknown_unknown_0c_0gb`) and a tune would save a profile under that id.
pub fn detect_hardware(program: &str) -> Result<HardwareInfo, ExitCode> {
    let root = std::env::var_os(SYSROOT_ENV).filter(|v| !v.is_empty());
    if let Some(root) = root
        && let Err(why) = check_root(Path::new(&root))
    {
        say(format_args!(
            "{program}: error: {SYSROOT_ENV}={}: {why}",
            auto_tuner::shown_path(Path::new(&root))
        ));
        return Err(ExitCode::from(crate::stop::REFUSED));
    }
    Ok(device_profile::get_hardware_info())
}

/// Why `root` is not a tree the detection can read, if it is not.
fn check_root(root: &Path) -> Result<(), String> {
    if !root.is_dir() {
        return Err("not a directory".to_string());
    }
    if !root.join("proc/cpuinfo").is_file() {
        return Err("no proc/cpuinfo file under it".to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_needs_its_cpuinfo() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            check_root(&dir.path().join("none")).unwrap_err(),
            "not a directory"
        );
        assert!(check_root(dir.path()).unwrap_err().contains("proc/cpuinfo"));
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(dir.path().join("proc/cpuinfo"), "processor\t: 0\n").unwrap();
        assert_eq!(check_root(dir.path()), Ok(()));
    }
}
