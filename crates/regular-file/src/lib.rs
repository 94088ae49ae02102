//! The one bounded, non-blocking open of a regular file that every reader of the workspace
//! uses (detection's `/proc` and `/sys` reads, the profile cache and its lock, `config.json`,
//! `.gguf` headers, profile bundles).
//!
//! Opening a FIFO for reading waits for a writer, so the file is opened with `O_NONBLOCK`
//! (which regular files ignore), and its type is then checked on the opened handle
//! (`fstat`), so nothing can swap the file between the check and the read. A FIFO, a
//! device, a socket or a directory is [`Error::NotAFile`] at once, never a hang; a read
//! stops one byte past its limit, whatever size the file reports (procfs reports 0).
//!
//! ```
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("notes.txt");
//! std::fs::write(&path, "hello")?;
//! assert_eq!(regular_file::read(&path, 16)?, b"hello");
//! assert!(matches!(
//!     regular_file::read(&path, 3),
//!     Err(regular_file::Error::TooLarge { bytes: 5, limit: 3, .. })
//! ));
//! assert!(matches!(regular_file::read(dir.path(), 16), Err(regular_file::Error::NotAFile(_))));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Why a regular file could not be opened or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Nothing is at the path.
    #[error("{} does not exist", .0.display())]
    NotFound(PathBuf),
    /// Something other than a regular file is at the path (a FIFO, a device, a socket, a
    /// directory).
    #[error("{} is not a regular file", .0.display())]
    NotAFile(PathBuf),
    /// The path is a symbolic link and the open was asked not to follow one
    /// ([`NO_FOLLOW`]).
    #[error("{} is a symbolic link", .0.display())]
    SymbolicLink(PathBuf),
    /// The file holds more bytes than the limit (as reported, or as read).
    #[error("{} is {bytes} bytes, above the limit of {limit}", .path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size as reported, or the bytes read (the limit plus one).
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// Opening or reading failed otherwise.
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
}

/// The extra open flag that refuses a symbolic link in the last component
/// ([`Error::SymbolicLink`]); 0 where the platform has none.
#[cfg(unix)]
pub const NO_FOLLOW: i32 = nix::libc::O_NOFOLLOW;
/// The extra open flag that refuses a symbolic link in the last component
/// ([`Error::SymbolicLink`]); 0 where the platform has none.
#[cfg(not(unix))]
pub const NO_FOLLOW: i32 = 0;

/// Opens `path` with `options` and the extra open flags `flags` (0, or [`NO_FOLLOW`]),
/// without blocking, and returns the file and its metadata when it is a regular file.
///
/// `options` says how (read, write, create, mode); its custom flags are replaced by `flags`
/// and `O_NONBLOCK`.
pub fn open_with(
    path: &Path,
    options: &mut OpenOptions,
    flags: i32,
) -> Result<(File, Metadata), Error> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(flags | nix::libc::O_NONBLOCK);
    }
    #[cfg(not(unix))]
    let _ = flags;
    let file = options.open(path).map_err(|e| open_error(path, e, flags))?;
    let metadata = file.metadata().map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if !metadata.is_file() {
        return Err(Error::NotAFile(path.to_path_buf()));
    }
    Ok((file, metadata))
}

/// Opens `path` for reading, without blocking, when it is a regular file of at most `limit`
/// bytes as reported; returns the file and its metadata.
pub fn open(path: &Path, limit: u64) -> Result<(File, Metadata), Error> {
    let (file, metadata) = open_with(path, OpenOptions::new().read(true), 0)?;
    if metadata.len() > limit {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            bytes: metadata.len(),
            limit,
        });
    }
    Ok((file, metadata))
}

/// The bytes of the regular file at `path`, refused when it reports or holds more than
/// `limit` bytes (a file that grows between the check and the read is read no further than
/// one byte past the limit).
pub fn read(path: &Path, limit: u64) -> Result<Vec<u8>, Error> {
    let (file, metadata) = open(path, limit)?;
    // procfs and sysfs report 0 or 4096 whatever they hold: one page covers most of them.
    let capacity = usize::try_from(metadata.len().clamp(4096, limit.max(4096))).unwrap_or(4096);
    let mut bytes = Vec::with_capacity(capacity.min(64 << 20));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            bytes: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}

/// The error of a failed open of `path` with the extra `flags`.
fn open_error(path: &Path, e: io::Error, flags: i32) -> Error {
    let path = path.to_path_buf();
    if e.kind() == io::ErrorKind::NotFound {
        return Error::NotFound(path);
    }
    #[cfg(unix)]
    {
        // A directory opened for writing is EISDIR (read-only, it opens on Linux).
        if e.raw_os_error() == Some(nix::libc::EISDIR) {
            return Error::NotAFile(path);
        }
        if flags & NO_FOLLOW != 0 && e.raw_os_error() == Some(nix::libc::ELOOP) {
            return Error::SymbolicLink(path);
        }
    }
    #[cfg(not(unix))]
    let _ = flags;
    Error::Io { path, source: e }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_within_the_limit_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read(&path, 10).unwrap(), b"0123456789");
        let err = read(&path, 9).unwrap_err();
        assert!(
            matches!(
                err,
                Error::TooLarge {
                    bytes: 10,
                    limit: 9,
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string().contains("10 bytes, above the limit of 9"),
            "{err}"
        );
    }

    #[test]
    fn nothing_there_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing");
        assert!(matches!(read(&path, 10), Err(Error::NotFound(p)) if p == path));
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_a_device_or_a_directory_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let err = watchdog::guard("opening a FIFO", move || read(&fifo, 10));
        assert!(matches!(err, Err(Error::NotAFile(_))), "{err:?}");
        assert!(matches!(
            read(Path::new("/dev/zero"), 10),
            Err(Error::NotAFile(_))
        ));
        assert!(matches!(read(dir.path(), 10), Err(Error::NotAFile(_))));
        // Opened for writing, a directory fails at the open: the same answer.
        let mut write = OpenOptions::new();
        write.write(true);
        assert!(matches!(
            open_with(dir.path(), &mut write, 0),
            Err(Error::NotAFile(_))
        ));
    }

    #[cfg(unix)]
    #[test]
    fn a_link_is_followed_unless_no_follow_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, b"x").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(read(&link, 1).unwrap(), b"x");
        let err = open_with(&link, OpenOptions::new().read(true), NO_FOLLOW).unwrap_err();
        assert!(
            matches!(&err, Error::SymbolicLink(p) if *p == link),
            "{err}"
        );
        assert!(err.to_string().ends_with("is a symbolic link"), "{err}");
    }
}
