//! [`Root`]: the filesystem root detection reads below (`/` for the running machine, or a
//! test root), and the bounded, non-blocking read of one of its files.

use crate::parse;
use std::path::{Path, PathBuf};

/// The largest file read: `/proc/cpuinfo` of an 8192-CPU machine fits several times.
pub(crate) const MAX_FILE_BYTES: u64 = 64 << 20;

/// The largest file read under `sys/`: the kernel caps a sysfs attribute at a page (4 KiB,
/// 64 KiB with ARM's largest pages), and a CPU list of every other one of 8192 CPUs is
/// 40 KiB. Without it, a test root of hundreds of 64 MiB attribute files took tens of
/// seconds to detect.
pub(crate) const MAX_SYS_FILE_BYTES: u64 = 1 << 20;

/// A filesystem root that detection reads below.
#[derive(Debug, Clone)]
pub(crate) struct Root {
    path: PathBuf,
}

impl Root {
    /// A root at `path` (`/` for the running machine).
    pub(crate) fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The text of `relative` under the root, or `None` when it cannot be read. Bytes that
    /// are not UTF-8 become U+FFFD, so one odd byte does not hide a whole file.
    ///
    /// Every file detection reads goes through here, and only regular files of at most
    /// [`MAX_FILE_BYTES`] are read ([`MAX_SYS_FILE_BYTES`] under `sys/`): a FIFO, a device (`/dev/zero`), a socket or a directory
    /// is `None` at once, without blocking (see [`regular_file::read`]). procfs and sysfs
    /// files are regular files that report a size of 0 or 4096 whatever they hold, so the
    /// read is bounded by the limit, not by the reported size. Symbolic links are followed
    /// and the checks apply to their target: sysfs is made of them, and a test root may
    /// well link its files.
    pub(crate) fn read(&self, relative: impl AsRef<Path>) -> Option<String> {
        let relative = relative.as_ref();
        let limit = if relative.starts_with("sys") {
            MAX_SYS_FILE_BYTES
        } else {
            MAX_FILE_BYTES
        };
        let bytes = regular_file::read(&self.path.join(relative), limit).ok()?;
        Some(match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(err) => String::from_utf8_lossy(err.as_bytes()).into_owned(),
        })
    }

    pub(crate) fn read_cpus(&self, relative: impl AsRef<Path>) -> Option<Vec<usize>> {
        self.read(relative)
            .and_then(|text| parse::parse_cpu_list(&text).ok())
    }

    pub(crate) fn read_u64(&self, relative: impl AsRef<Path>) -> Option<u64> {
        self.read(relative)?.trim().parse().ok()
    }

    pub(crate) fn list_dir(&self, relative: impl AsRef<Path>) -> Vec<String> {
        std::fs::read_dir(self.path.join(relative))
            .map(|entries| {
                entries
                    .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default()
    }
}
