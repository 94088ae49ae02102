//! The code map of `docs/architecture.md` against the tree, as rust-analyzer's tidy test
//! holds its docs to its code: every crate directory (`crates/*`, `xtask`, `benches`) has a
//! heading in the map, and every `.rs` file under its `src/` a bullet; a file the map does
//! not name, or a name (crate or file) with nothing behind it, fails with the list.

mod common;

use common::workspace_root;
use std::collections::BTreeSet;
use std::path::Path;

/// The crate directories of the workspace, relative to `root` ([`common::crate_dirs`]).
fn crate_dirs(root: &Path) -> BTreeSet<String> {
    common::crate_dirs(root)
        .iter()
        .map(|d| relative(d, root))
        .collect()
}

/// Every `.rs` file under `dir`, relative to it ([`common::rust_files`]).
fn rust_files(dir: &Path) -> BTreeSet<String> {
    common::rust_files(dir)
        .iter()
        .map(|f| relative(f, dir))
        .collect()
}

/// `path` relative to `base`, with `/` separators.
fn relative(path: &Path, base: &Path) -> String {
    let parts: Vec<_> = path
        .strip_prefix(base)
        .unwrap()
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.join("/")
}

/// The map as written: each `### `<dir>`` heading of the `## Code map` section with the
/// files its bullets name (the backticked `.rs` names before a bullet's first `: `).
fn parse_map(doc: &str) -> Result<Vec<(String, BTreeSet<String>)>, String> {
    let section = doc
        .split("\n## Code map")
        .nth(1)
        .ok_or("no `## Code map` section")?;
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut map: Vec<(String, BTreeSet<String>)> = Vec::new();
    for line in section.lines() {
        if let Some(heading) = line.strip_prefix("### ") {
            let dir = heading.trim().trim_matches('`').to_string();
            if map.iter().any(|(d, _)| *d == dir) {
                return Err(format!("`{dir}` has two headings"));
            }
            map.push((dir, BTreeSet::new()));
        } else if let Some(bullet) = line.strip_prefix("- ") {
            let Some((_, files)) = map.last_mut() else {
                return Err(format!("a bullet before any crate heading: {line}"));
            };
            let names = bullet.split(": ").next().unwrap_or("");
            for name in names.split('`').skip(1).step_by(2) {
                if name.ends_with(".rs") && !files.insert(name.to_string()) {
                    return Err(format!("`{name}` is named twice"));
                }
            }
        }
    }
    Ok(map)
}

/// What is wrong between the map in `doc` and the tree under `root`, one line each.
fn problems(root: &Path, doc: &str) -> Vec<String> {
    let map = match parse_map(doc) {
        Ok(map) => map,
        Err(e) => return vec![e],
    };
    let mut problems = Vec::new();
    let dirs = crate_dirs(root);
    let mapped: BTreeSet<String> = map.iter().map(|(d, _)| d.clone()).collect();
    for dir in dirs.difference(&mapped) {
        problems.push(format!("crate `{dir}` has no heading in the code map"));
    }
    for (dir, named) in &map {
        if !dirs.contains(dir) {
            problems.push(format!(
                "the code map names crate `{dir}`, which does not exist"
            ));
            continue;
        }
        let files = rust_files(&root.join(dir).join("src"));
        for file in files.difference(named) {
            problems.push(format!("`{dir}/src/{file}` is not in the code map"));
        }
        for file in named.difference(&files) {
            problems.push(format!(
                "the code map names `{dir}/src/{file}`, which does not exist"
            ));
        }
    }
    problems
}

#[test]
fn the_code_map_names_every_crate_and_module_and_nothing_else() {
    let root = workspace_root();
    let doc = std::fs::read_to_string(root.join("docs/architecture.md"))
        .expect("docs/architecture.md is readable");
    let problems = problems(&root, &doc);
    assert!(
        problems.is_empty(),
        "docs/architecture.md's code map and the tree disagree:\n  {}",
        problems.join("\n  ")
    );
}

/// A small workspace: `crates/a` with `lib.rs` and `a/inner.rs`, and `xtask`.
fn tiny_tree() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    for (file, text) in [
        ("crates/a/Cargo.toml", ""),
        ("crates/a/src/lib.rs", ""),
        ("crates/a/src/a/inner.rs", ""),
        ("xtask/Cargo.toml", ""),
        ("xtask/src/main.rs", ""),
    ] {
        let path = root.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    root
}

const TINY_MAP: &str = "# Architecture\n\n## Code map\n\n### `crates/a`\n\nJob.\n\n\
    - `lib.rs`: the root.\n- `a/inner.rs`: the inner module.\n\n### `xtask`\n\n\
    - `main.rs`: the tasks.\n\n## Invariants\n\n- `ghost.rs`: not in the map's section.\n";

#[test]
fn a_map_that_matches_the_tree_has_no_problem() {
    let root = tiny_tree();
    assert_eq!(problems(root.path(), TINY_MAP), Vec::<String>::new());
}

#[test]
fn a_file_the_map_does_not_name_is_a_problem() {
    let root = tiny_tree();
    std::fs::write(root.path().join("crates/a/src/new.rs"), "").unwrap();
    assert_eq!(
        problems(root.path(), TINY_MAP),
        ["`crates/a/src/new.rs` is not in the code map"]
    );
}

#[test]
fn a_name_without_a_file_or_a_crate_without_a_heading_is_a_problem() {
    let root = tiny_tree();
    std::fs::remove_file(root.path().join("crates/a/src/a/inner.rs")).unwrap();
    std::fs::create_dir_all(root.path().join("crates/b/src")).unwrap();
    std::fs::write(root.path().join("crates/b/Cargo.toml"), "").unwrap();
    let map = TINY_MAP.replace("### `xtask`", "### `crates/gone`\n\n### `xtask`");
    assert_eq!(
        problems(root.path(), &map),
        [
            "crate `crates/b` has no heading in the code map",
            "the code map names `crates/a/src/a/inner.rs`, which does not exist",
            "the code map names crate `crates/gone`, which does not exist",
        ]
    );
}

#[test]
fn a_file_named_twice_is_a_problem() {
    let root = tiny_tree();
    let map = TINY_MAP.replace(
        "- `main.rs`: the tasks.",
        "- `main.rs`: the tasks.\n- `main.rs`: again.",
    );
    assert_eq!(problems(root.path(), &map), ["`main.rs` is named twice"]);
}
