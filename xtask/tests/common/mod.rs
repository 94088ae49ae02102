//! What the workspace's tidy tests share: where the workspace is, its crates, their files.
#![allow(dead_code, reason = "each tidy test uses some of these")]

use std::path::{Path, PathBuf};

/// The workspace root: the parent of this package.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives inside the workspace")
        .to_path_buf()
}

/// The crate directories of the workspace at `root`: every directory of `crates/` with a
/// `Cargo.toml`, sorted, then `xtask`, `benches` and `fuzz` (outside the workspace's members,
/// built with cargo-fuzz) when they have one.
pub fn crate_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("crates/ is readable")
        .map(|e| e.expect("a readable entry of crates/").path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    dirs.extend(
        ["xtask", "benches", "fuzz"]
            .map(|d| root.join(d))
            .into_iter()
            .filter(|d| d.join("Cargo.toml").is_file()),
    );
    dirs
}

/// Every `.rs` file under `dir`, sorted; none when `dir` does not exist.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("a readable directory entry").path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}
