//! What a measurement of llama.cpp depends on besides the machine: the model file's
//! identity and the binary's build, the parts of a cache key that make a new file or a new
//! llama.cpp build measure again.

use crate::error::Error;
use crate::output::BenchResult;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::Path;

/// How many leading bytes of a model file its identity hashes: the GGUF header (metadata,
/// vocabulary and the tensor table with every shape and type) of the models people run fits
/// well within; where a header is shorter the first weights are hashed too, which only makes
/// the identity stricter.
pub const IDENTITY_BYTES: u64 = 16 << 20;

/// A model file's identity: its size and a hash of its leading bytes (the GGUF header).
///
/// Speed depends on the shapes and types of the tensors, which the header holds, not on the
/// values of the weights; two files with the same identity run alike. Reading is bounded by
/// [`IDENTITY_BYTES`], whatever the file's size.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ModelIdentity {
    /// The file's size in bytes.
    pub size: u64,
    /// The 64-bit FNV-1a hash of its first `min(size, IDENTITY_BYTES)` bytes, as 16
    /// lowercase hexadecimal digits.
    pub header_hash: String,
}

impl ModelIdentity {
    /// The identity of the `.gguf` file at `path` (a link is followed); an error when it
    /// cannot be read or is not a regular file starting with `GGUF`. Opened without
    /// blocking (`regular_file`), so a FIFO at the path is refused at once, never waited on.
    pub fn of(path: &Path) -> Result<ModelIdentity, Error> {
        let model_error = |source| Error::Model {
            path: path.to_path_buf(),
            source,
        };
        let opened = regular_file::open_with(path, std::fs::OpenOptions::new().read(true), 0);
        let (file, meta) = match opened {
            Ok(opened) => opened,
            Err(regular_file::Error::NotAFile(_)) => {
                return Err(Error::NotGguf {
                    path: path.to_path_buf(),
                    reason: "not a regular file".into(),
                });
            }
            Err(regular_file::Error::Io { source, .. }) => return Err(model_error(source)),
            Err(regular_file::Error::NotFound(_)) => {
                let gone = std::io::Error::new(std::io::ErrorKind::NotFound, "it does not exist");
                return Err(model_error(gone));
            }
            Err(e) => return Err(model_error(std::io::Error::other(e.to_string()))),
        };
        let mut hash = Fnv1a::default();
        let mut magic = [0u8; 4];
        let mut magic_len = 0;
        let mut reader = file.take(IDENTITY_BYTES);
        let mut buffer = vec![0u8; 1 << 16];
        loop {
            let n = match reader.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(model_error(e)),
            };
            let wanted = (magic.len() - magic_len).min(n);
            magic[magic_len..magic_len + wanted].copy_from_slice(&buffer[..wanted]);
            magic_len += wanted;
            hash.update(&buffer[..n]);
        }
        if magic_len < magic.len() || &magic != b"GGUF" {
            return Err(Error::NotGguf {
                path: path.to_path_buf(),
                reason: format!(
                    "it starts {:?}, not with the GGUF magic",
                    String::from_utf8_lossy(&magic[..magic_len])
                ),
            });
        }
        Ok(ModelIdentity {
            size: meta.len(),
            header_hash: format!("{:016x}", hash.0),
        })
    }
}

/// The 64-bit FNV-1a hash: stable across Rust releases and machines (unlike the standard
/// library's hasher), which a cache key needs; not a defence against crafted collisions.
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Fnv1a {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Which llama.cpp build a binary is: what `llama-bench --version` prints
/// (`version: 0.5.0-dev (build 0, commit 0c1e57098)` in llama.cpp 0c1e57098, `version: 4520
/// (8b576b6c)` in older builds), or what a run's output says.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BuildInfo {
    /// The version text before the parenthesis (`0.5.0-dev`, or the build number in older
    /// builds); `None` when taken from a run.
    pub version: Option<String>,
    /// llama.cpp's build number, when printed.
    pub build_number: Option<i64>,
    /// The commit it was built from; `unknown` for a build without git information, which a
    /// cache key cannot tell from another such build.
    pub commit: String,
}

impl BuildInfo {
    /// Reads the output of `--version`; `None` when no line names a commit.
    pub fn parse_version(text: &str) -> Option<BuildInfo> {
        text.lines().find_map(|line| {
            let rest = line.trim().strip_prefix("version:")?.trim();
            let (version, inner) = rest.split_once('(')?;
            let inner = inner.strip_suffix(')')?;
            let version = version.trim().to_string();
            let (build_number, commit) = if let Some((build, commit)) = inner.split_once(',') {
                let build = build.trim().strip_prefix("build")?.trim().parse().ok()?;
                (Some(build), commit.trim().strip_prefix("commit")?.trim())
            } else {
                (version.parse().ok(), inner.trim())
            };
            let plain = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.';
            if commit.is_empty() || commit.len() > 64 || !commit.chars().all(plain) {
                return None;
            }
            Some(BuildInfo {
                version: Some(version),
                build_number,
                commit: commit.to_string(),
            })
        })
    }
}

/// The build a run reports (for binaries without `--version`).
impl From<&BenchResult> for BuildInfo {
    fn from(result: &BenchResult) -> BuildInfo {
        BuildInfo {
            version: None,
            build_number: Some(result.build_number),
            commit: result.build_commit.clone(),
        }
    }
}

#[cfg(test)]
mod tests;
