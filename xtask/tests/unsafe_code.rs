//! `#![forbid(unsafe_code)]` (or `deny`, where a platform's calls are allowed one by one) at
//! the root of every library and binary of the workspace that has no `unsafe`: a library whose
//! `src/` holds no `unsafe`, a binary whose own file holds none and declares no module. A
//! target that starts using `unsafe` must then say so at its root.

mod common;

use common::rust_files;
use std::path::{Path, PathBuf};

/// Whether `text` has `unsafe` in its code: outside comments and the lint attributes
/// themselves.
fn uses_unsafe(text: &str) -> bool {
    text.lines().any(|line| {
        let code = line.split("//").next().unwrap_or("");
        code.contains("unsafe") && !code.contains("unsafe_code")
    })
}

/// Whether the root file `text` forbids (or denies) `unsafe` for its target.
fn forbids_unsafe(text: &str) -> bool {
    text.contains("#![forbid(unsafe_code)]") || text.contains("#![deny(unsafe_code)]")
}

/// The roots of the crate at `dir` that have no `unsafe` and do not forbid it, relative to
/// `dir`.
fn unguarded_roots(dir: &Path) -> Vec<String> {
    let src = dir.join("src");
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let mut missing = Vec::new();
    let lib = src.join("lib.rs");
    if lib.is_file() {
        let bins = [src.join("main.rs"), src.join("bin")];
        let lib_unsafe = rust_files(&src)
            .iter()
            .filter(|p| !bins.iter().any(|b| p.starts_with(b)))
            .any(|p| uses_unsafe(&read(p)));
        if !lib_unsafe && !forbids_unsafe(&read(&lib)) {
            missing.push("src/lib.rs".to_string());
        }
    }
    let mut bins: Vec<PathBuf> = rust_files(&src.join("bin"))
        .into_iter()
        .filter(|p| p.parent() == Some(src.join("bin").as_path()))
        .collect();
    if src.join("main.rs").is_file() {
        bins.push(src.join("main.rs"));
    }
    for bin in bins {
        let text = read(&bin);
        let declares_modules = text.lines().any(|l| l.trim_start().starts_with("mod "));
        if !uses_unsafe(&text) && !declares_modules && !forbids_unsafe(&text) {
            missing.push(bin.strip_prefix(dir).unwrap().display().to_string());
        }
    }
    missing
}

#[test]
fn every_target_without_unsafe_forbids_it() {
    let root = common::workspace_root();
    let dirs = common::crate_dirs(&root);
    let mut missing = Vec::new();
    for dir in dirs {
        for file in unguarded_roots(&dir) {
            missing.push(format!(
                "{}/{file}",
                dir.strip_prefix(&root).unwrap().display()
            ));
        }
    }
    assert!(
        missing.is_empty(),
        "no unsafe here, and no #![forbid(unsafe_code)] at the root: {missing:#?}"
    );
}

#[test]
fn the_check_finds_an_unguarded_root_and_spares_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("bin")).unwrap();
    let write = |name: &str, text: &str| std::fs::write(src.join(name), text).unwrap();
    // A library with no unsafe and no attribute; a binary that forbids it; one that uses it;
    // one without either.
    write("lib.rs", "//! Docs: unsafe in a comment.\npub mod a;\n");
    write("a.rs", "pub fn f() {}\n");
    write("bin/guarded.rs", "#![forbid(unsafe_code)]\nfn main() {}\n");
    write("bin/raw.rs", "fn main() { unsafe { g() } }\n");
    write("bin/plain.rs", "fn main() {}\n");
    assert_eq!(
        unguarded_roots(dir.path()),
        ["src/lib.rs", "src/bin/plain.rs"]
    );
    // Unsafe in a module of the library exempts its root.
    write("a.rs", "pub fn f() { unsafe { g() } }\n");
    assert_eq!(unguarded_roots(dir.path()), ["src/bin/plain.rs"]);
}
