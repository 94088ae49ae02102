//! The address-space limit (`ulimit -v`) bounds the memory a process may take, as a cgroup's
//! memory limit does (`cgroups.rs`): a tune sized past it would fail its first `mmap`.

use std::process::Command;

/// Set in the child that runs under the limit.
const CHILD: &str = "DEVICE_PROFILE_ADDRESS_SPACE_CHILD";
const TEST: &str = "an_address_space_limit_bounds_the_memory_available";
const LIMIT_KIB: u64 = 1 << 20;

#[cfg(any(target_os = "linux", target_os = "android"))]
#[test]
fn an_address_space_limit_bounds_the_memory_available() {
    if std::env::var_os(CHILD).is_some() {
        println!("available={:?}", device_profile::available_memory_bytes());
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {LIMIT_KIB} && exec \"$0\" \"$@\""))
        .arg(exe)
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let available: u64 = stdout
        .lines()
        .find_map(|line| line.split_once("available=Some(").map(|(_, rest)| rest))
        .and_then(|rest| rest.strip_suffix(')'))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no figure from the child: {stdout}"));
    let limit = LIMIT_KIB << 10;
    // At most the limit, less what the test binary maps already (well under 512 MiB).
    assert!(available < limit, "{available} of a {limit}-byte limit");
    assert!(available > limit / 2, "{available} of a {limit}-byte limit");
}
