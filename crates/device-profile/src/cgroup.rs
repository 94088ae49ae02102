//! Finds this process's cgroup (v1 or v2) under a root and reads its CPU limits and its
//! memory headroom.
//!
//! The cgroup comes from `proc/self/cgroup` (which path) and `proc/self/mountinfo` (where
//! that hierarchy is mounted). Where either is missing, the usual mount points under
//! `sys/fs/cgroup` and the cgroup path `/` are assumed. Limits are read at the process's own
//! cgroup and at every ancestor up to the mount point, and the tightest one wins, since the
//! kernel enforces each level; a cgroup more than [`MAX_CGROUP_DEPTH`] levels below its
//! mount (none is real) has only the mount's limits read.

use crate::parse::{self, CpuQuota};
use crate::root::Root;
use std::path::{Component, Path, PathBuf};

/// The CPU limits of the cgroup(s) this process is in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CgroupLimits {
    /// The cpuset: the CPUs the cgroup may run on, when one is set.
    pub cpuset: Option<Vec<usize>>,
    /// The tightest CPU bandwidth quota on the way to the root, when any.
    pub quota: Option<CpuQuota>,
}

/// One line of `/proc/self/cgroup`: `hierarchy-id:controllers:path`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Membership {
    hierarchy_id: String,
    controllers: Vec<String>,
    path: String,
}

/// One cgroup mount from `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    /// The cgroup path mounted there (`/` unless the mount shows a sub-tree).
    root: String,
    /// The absolute mount point.
    point: String,
    /// `true` for `cgroup2`.
    is_v2: bool,
    /// v1 super options: the controllers of the hierarchy.
    options: Vec<String>,
}

/// Reads the cgroup CPU limits visible under `root`.
pub(crate) fn limits(root: &Root) -> CgroupLimits {
    let (memberships, mounts) = where_am_i(root);

    let mut limits = CgroupLimits::default();
    // cgroup v2: one unified hierarchy.
    for (leaf, top) in hierarchy_dirs(&memberships, &mounts, None) {
        limits.quota = tighter(limits.quota, walk_quota(root, &leaf, &top, v2_quota));
        if limits.cpuset.is_none() {
            limits.cpuset =
                walk_cpuset(root, &leaf, &top, &["cpuset.cpus.effective", "cpuset.cpus"]);
        }
    }
    // cgroup v1: the `cpu` and `cpuset` controllers have their own hierarchies.
    for (leaf, top) in hierarchy_dirs(&memberships, &mounts, Some("cpu")) {
        limits.quota = tighter(limits.quota, walk_quota(root, &leaf, &top, v1_quota));
    }
    if limits.cpuset.is_none() {
        for (leaf, top) in hierarchy_dirs(&memberships, &mounts, Some("cpuset")) {
            limits.cpuset =
                walk_cpuset(root, &leaf, &top, &["cpuset.effective_cpus", "cpuset.cpus"]);
            if limits.cpuset.is_some() {
                break;
            }
        }
    }
    limits
}

/// The memory this process's cgroups leave it now, in bytes: at each level from its cgroup
/// up to the mount point, the limit less the memory in use that reclaim cannot readily take
/// back (usage less the inactive file cache: the working set, as Kubernetes counts it), the
/// least of them; `None` when no level sets a limit. The kernel kills a process past any level's
/// limit, whatever `MemAvailable` says.
pub(crate) fn memory_headroom(root: &Root) -> Option<u64> {
    let (memberships, mounts) = where_am_i(root);
    let v2 = hierarchy_dirs(&memberships, &mounts, None)
        .into_iter()
        .map(|dirs| (dirs, V2_MEMORY));
    let v1 = hierarchy_dirs(&memberships, &mounts, Some("memory"))
        .into_iter()
        .map(|dirs| (dirs, V1_MEMORY));
    v2.chain(v1)
        .flat_map(|((leaf, top), files)| {
            up_to(&leaf, &top)
                .into_iter()
                .filter_map(move |dir| headroom_at(root, &dir, files))
        })
        .min()
}

/// The files of one hierarchy's memory controller: the limit, the usage, the statistic of
/// inactive file pages in `memory.stat`.
type MemoryFiles = (&'static str, &'static str, &'static str);
const V2_MEMORY: MemoryFiles = ("memory.max", "memory.current", "inactive_file");
const V1_MEMORY: MemoryFiles = (
    "memory.limit_in_bytes",
    "memory.usage_in_bytes",
    "total_inactive_file",
);

/// A v1 limit at or above this is "no limit" (the kernel writes `PAGE_COUNTER_MAX` pages,
/// about 2^63 bytes, rounded down to the page size).
const NO_MEMORY_LIMIT: u64 = 1 << 60;

/// The headroom at one cgroup directory: `None` without a limit there.
fn headroom_at(root: &Root, dir: &Path, (limit, usage, inactive): MemoryFiles) -> Option<u64> {
    let limit: u64 = root.read(dir.join(limit))?.trim().parse().ok()?;
    if limit >= NO_MEMORY_LIMIT {
        return None;
    }
    // A limit without its usage: the whole limit may be in use, so none is left.
    let used: u64 = root
        .read(dir.join(usage))
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(limit);
    let reclaimable = root
        .read(dir.join("memory.stat"))
        .and_then(|text| {
            text.lines().find_map(|line| {
                let (key, value) = line.split_once(' ')?;
                (key == inactive).then(|| value.trim().parse::<u64>().ok())?
            })
        })
        .unwrap_or(0);
    Some(limit.saturating_sub(used.saturating_sub(reclaimable)))
}

/// This process's cgroup memberships (`proc/self/cgroup`) and the cgroup mounts
/// (`proc/self/mountinfo`); empty where a file is missing.
fn where_am_i(root: &Root) -> (Vec<Membership>, Vec<Mount>) {
    let memberships = root
        .read("proc/self/cgroup")
        .map(|text| parse_memberships(&text))
        .unwrap_or_default();
    let mounts = root
        .read("proc/self/mountinfo")
        .map(|text| parse_mountinfo(&text))
        .unwrap_or_default();
    (memberships, mounts)
}

/// The `(leaf, mount point)` directory pairs (relative to the root) of one hierarchy:
/// v2 when `controller` is `None`, else the v1 hierarchy holding that controller.
fn hierarchy_dirs(
    memberships: &[Membership],
    mounts: &[Mount],
    controller: Option<&str>,
) -> Vec<(PathBuf, PathBuf)> {
    let membership = memberships.iter().find(|m| match controller {
        None => m.hierarchy_id == "0" && m.controllers.iter().all(String::is_empty),
        Some(name) => m.controllers.iter().any(|c| c == name),
    });
    // Without `proc/self/cgroup`, the process is taken to sit at the top of the mount
    // (what a container with its own cgroup namespace sees).
    let cgroup_path = membership.map_or("/", |m| m.path.as_str());
    let matching: Vec<&Mount> = mounts
        .iter()
        .filter(|mount| match controller {
            None => mount.is_v2,
            Some(name) => !mount.is_v2 && mount.options.iter().any(|o| o == name),
        })
        .collect();
    let mut dirs = Vec::new();
    if matching.is_empty() {
        let defaults: &[&str] = match controller {
            None => &["sys/fs/cgroup", "sys/fs/cgroup/unified"],
            Some("cpu") => &[
                "sys/fs/cgroup/cpu,cpuacct",
                "sys/fs/cgroup/cpuacct,cpu",
                "sys/fs/cgroup/cpu",
            ],
            Some("memory") => &["sys/fs/cgroup/memory"],
            Some(_) => &["sys/fs/cgroup/cpuset"],
        };
        for top in defaults {
            let top = PathBuf::from(top);
            dirs.push((top.join(relative(cgroup_path)), top));
        }
    } else {
        // A mount of a sub-tree (`root` other than `/`) shows the cgroup under its own path.
        let mount = matching
            .iter()
            .find(|m| m.root == "/" || path_below(cgroup_path, &m.root).is_some())
            .unwrap_or(&matching[0]);
        let top = relative(&mount.point);
        let inside = if mount.root == "/" {
            cgroup_path
        } else {
            path_below(cgroup_path, &mount.root).unwrap_or("/")
        };
        dirs.push((top.join(relative(inside)), top));
    }
    dirs
}

/// The part of `path` below the directory `prefix` (`""` when they are the same), or `None`
/// when `path` is not under it. Trailing slashes of `prefix` do not matter.
fn path_below<'a>(path: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = path.strip_prefix(prefix.trim_end_matches('/'))?;
    (rest.is_empty() || rest.starts_with('/')).then_some(rest)
}

/// An absolute path made relative, keeping only plain components so that nothing read from
/// a file (`..`, a second root) can lead outside the root.
fn relative(path: &str) -> PathBuf {
    Path::new(path)
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => Some(part),
            _ => None,
        })
        .collect()
}

/// The deepest cgroup whose levels are read: far below any real hierarchy, and the bound
/// that keeps a hostile `proc/self/cgroup` (`/a/a/a/…` 10^5 deep) from costing the square of
/// its depth in copies of its path.
const MAX_CGROUP_DEPTH: usize = 64;

/// Directories from `leaf` up to `top`, leaf first; just `top` when `leaf` is not under it,
/// or lies more than [`MAX_CGROUP_DEPTH`] levels below it.
fn up_to(leaf: &Path, top: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let depth = leaf
        .strip_prefix(top)
        .map_or(usize::MAX, |below| below.components().count());
    if depth <= MAX_CGROUP_DEPTH {
        let mut dir = leaf.to_path_buf();
        while dir.starts_with(top) {
            dirs.push(dir.clone());
            if !dir.pop() {
                break;
            }
        }
    } else {
        dirs.push(top.to_path_buf());
    }
    dirs
}

fn v2_quota(root: &Root, dir: &Path) -> Option<CpuQuota> {
    let text = root.read(dir.join("cpu.max"))?;
    parse::parse_cgroup_v2_cpu_max(&text).ok().flatten()
}

fn v1_quota(root: &Root, dir: &Path) -> Option<CpuQuota> {
    let quota = root.read(dir.join("cpu.cfs_quota_us"))?;
    let period = root.read(dir.join("cpu.cfs_period_us"))?;
    parse::parse_cgroup_v1_cpu_quota(&quota, &period)
        .ok()
        .flatten()
}

fn walk_quota(
    root: &Root,
    leaf: &Path,
    top: &Path,
    read: fn(&Root, &Path) -> Option<CpuQuota>,
) -> Option<CpuQuota> {
    up_to(leaf, top)
        .iter()
        .map(|dir| read(root, dir))
        .fold(None, tighter)
}

/// The first non-empty cpuset on the way up: an empty `cpuset.cpus` in v2 means "inherit".
fn walk_cpuset(root: &Root, leaf: &Path, top: &Path, files: &[&str]) -> Option<Vec<usize>> {
    for dir in up_to(leaf, top) {
        for file in files {
            if let Some(cpus) = root
                .read(dir.join(file))
                .and_then(|text| parse::parse_cpu_list(&text).ok())
                .filter(|cpus| !cpus.is_empty())
            {
                return Some(cpus);
            }
        }
    }
    None
}

/// The quota granting fewer CPUs per unit time.
fn tighter(a: Option<CpuQuota>, b: Option<CpuQuota>) -> Option<CpuQuota> {
    match (a, b) {
        (Some(a), Some(b)) => {
            let a_share = u128::from(a.quota_us) * u128::from(b.period_us);
            let b_share = u128::from(b.quota_us) * u128::from(a.period_us);
            Some(if a_share <= b_share { a } else { b })
        }
        (a, b) => a.or(b),
    }
}

fn parse_memberships(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, ':');
            let hierarchy_id = fields.next()?.trim().to_string();
            let controllers = fields.next()?.split(',').map(str::to_string).collect();
            let path = fields.next()?.trim().to_string();
            Some(Membership {
                hierarchy_id,
                controllers,
                path,
            })
        })
        .collect()
}

fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let separator = fields.iter().position(|f| *f == "-")?;
            let fstype = *fields.get(separator + 1)?;
            let is_v2 = match fstype {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            let options = fields
                .get(separator + 3)
                .map(|o| o.split(',').map(str::to_string).collect())
                .unwrap_or_default();
            Some(Mount {
                root: unescape(fields.get(3)?),
                point: unescape(fields.get(4)?),
                is_v2,
                options,
            })
        })
        .collect()
}

/// Undoes mountinfo's octal escapes (`\040` is a space).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut idx = 0;
    while idx < bytes.len() {
        if bytes[idx] == b'\\'
            && idx + 3 < bytes.len()
            && bytes[idx + 1..idx + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let value = bytes[idx + 1..idx + 4]
                .iter()
                .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            out.push(u8::try_from(value).unwrap_or(b'?'));
            idx += 4;
        } else {
            out.push(bytes[idx]);
            idx += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_memberships() {
        let text = "12:cpu,cpuacct:/docker/abc\n3:cpuset:/docker/abc\n0::/user.slice\n";
        let found = parse_memberships(text);
        assert_eq!(found.len(), 3);
        assert_eq!(found[0].controllers, ["cpu", "cpuacct"]);
        assert_eq!(found[0].path, "/docker/abc");
        assert_eq!(found[2].hierarchy_id, "0");
        assert_eq!(found[2].controllers, [""]);
    }

    #[test]
    fn parses_mountinfo() {
        let text = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
            32 31 0:29 /docker/abc /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:5 - cgroup cgroup rw,cpu,cpuacct\n\
            41 31 0:38 / /sys/fs/cgroup/my\\040dir rw - cgroup2 cgroup2 rw\n";
        let mounts = parse_mountinfo(text);
        assert_eq!(mounts.len(), 2);
        assert_eq!(mounts[0].root, "/docker/abc");
        assert_eq!(mounts[0].point, "/sys/fs/cgroup/cpu,cpuacct");
        assert!(!mounts[0].is_v2);
        assert_eq!(mounts[0].options, ["rw", "cpu", "cpuacct"]);
        assert_eq!(mounts[1].point, "/sys/fs/cgroup/my dir");
        assert!(mounts[1].is_v2);
    }

    #[test]
    fn mount_roots_with_trailing_slashes_never_panic() {
        assert_eq!(path_below("/a", "/a/"), Some(""));
        assert_eq!(path_below("/a/b", "/a/"), Some("/b"));
        assert_eq!(path_below("/ab", "/a"), None);
        assert_eq!(path_below("/", "//"), Some("/"));
        let v2 = |root: &str| Mount {
            root: root.to_string(),
            point: "/sys/fs/cgroup".to_string(),
            is_v2: true,
            options: Vec::new(),
        };
        let member = parse_memberships("0::/a\n");
        for root in ["/a/", "//", "/a//", "/b/"] {
            let dirs = hierarchy_dirs(&member, &[v2(root)], None);
            assert_eq!(dirs.len(), 1, "{root}");
            let dirs = hierarchy_dirs(&[], &[v2(root)], None);
            assert_eq!(dirs.len(), 1, "{root}");
        }
    }

    #[test]
    fn relative_paths_cannot_escape() {
        assert_eq!(relative("/a/../../b"), PathBuf::from("a/b"));
        assert_eq!(relative("/"), PathBuf::new());
    }

    #[test]
    fn walks_up_to_the_mount_point() {
        let dirs = up_to(Path::new("sys/fs/cgroup/a/b"), Path::new("sys/fs/cgroup"));
        assert_eq!(
            dirs,
            ["sys/fs/cgroup/a/b", "sys/fs/cgroup/a", "sys/fs/cgroup"].map(PathBuf::from)
        );
    }

    #[test]
    fn tighter_takes_the_smaller_share() {
        let q = |quota_us, period_us| {
            Some(CpuQuota {
                quota_us,
                period_us,
            })
        };
        assert_eq!(
            tighter(q(200_000, 100_000), q(50_000, 10_000)),
            q(200_000, 100_000)
        );
        assert_eq!(tighter(None, q(1, 2)), q(1, 2));
        assert_eq!(tighter(None, None), None);
    }
}
