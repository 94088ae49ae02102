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
        let machine = device_profile::available_memory_bytes_from_root(std::path::Path::new("/"));
        println!(
            "available={:?} machine={machine:?}",
            device_profile::available_memory_bytes()
        );
        return;
    }
    // A hard limit already below ours: the child runs under that one.
    use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_AS).unwrap();
    #[allow(clippy::useless_conversion)]
    let hard_kib = if hard == RLIM_INFINITY {
        u64::MAX
    } else {
        u64::from(hard) >> 10
    };
    let limit_kib = LIMIT_KIB.min(hard_kib);
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {limit_kib} && exec \"$0\" \"$@\""))
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
    let figure = |name: &str| -> Option<u64> {
        let rest = stdout.split_once(&format!("{name}=Some("))?.1;
        rest.split_once(')')?.0.parse().ok()
    };
    let available = figure("available").unwrap_or_else(|| panic!("no figure: {stdout}"));
    let machine = figure("machine").unwrap_or(u64::MAX);
    let limit = limit_kib << 10;
    // Never more than the machine leaves, nor than the limit less what the test binary maps
    // already (well under half of 1 GiB) ...
    assert!(
        available <= machine,
        "{available} above the machine's {machine}"
    );
    assert!(available < limit, "{available} of a {limit}-byte limit");
    // ... and where the machine leaves more than the limit, the limit is what bounds it.
    if machine >= limit {
        assert!(available > limit / 2, "{available} of a {limit}-byte limit");
    }
}
