//! [`Root`]: the filesystem root detection reads below (`/` for the running machine, or a
//! test root), and the bounded, non-blocking read of one of its files.

use crate::parse;
use std::path::{Path, PathBuf};

/// The largest file read: `/proc/cpuinfo` of an 8192-CPU machine fits several times.
pub(crate) const MAX_FILE_BYTES: usize = 64 << 20;

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
    /// [`MAX_FILE_BYTES`] are read: a FIFO, a device (`/dev/zero`), a socket or a directory
    /// is `None` at once, without blocking (see [`open_regular`]). procfs and sysfs files are
    /// regular files that report a size of 0 or 4096 whatever they hold, so the read is
    /// bounded by the limit, not by the reported size.
    pub(crate) fn read(&self, relative: impl AsRef<Path>) -> Option<String> {
        use std::io::Read;
        let file = open_regular(&self.path.join(relative))?;
        // `fs::read` would size its buffer from the reported size (0 here) and start with a
        // 32-byte probe: one page covers almost every kernel file in one read.
        let mut bytes = Vec::with_capacity(4096);
        let limit = u64::try_from(MAX_FILE_BYTES).unwrap_or(u64::MAX);
        file.take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .ok()?;
        if bytes.len() > MAX_FILE_BYTES {
            return None; // Not a kernel text file.
        }
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

/// Opens `path` for reading if it is a regular file of at most [`MAX_FILE_BYTES`] bytes.
///
/// The open never blocks: opening a FIFO for reading waits for a writer, so on unix the
/// file is opened with `O_NONBLOCK` (which regular files ignore), and the type is then
/// checked on the opened handle (`fstat`), so nothing can swap the file between the check
/// and the read. Symbolic links are followed and the checks apply to their target:
/// `O_NOFOLLOW` would refuse only a link in the last component, which sysfs itself does
/// not need refused, while a test root may well link its files.
fn open_regular(path: &Path) -> Option<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits());
    }
    let file = options.open(path).ok()?;
    let metadata = file.metadata().ok()?;
    let too_big = usize::try_from(metadata.len()).map_or(true, |len| len > MAX_FILE_BYTES);
    (metadata.is_file() && !too_big).then_some(file)
}
