//! The import rule of `docs/architecture.md` against the tree: no two modules of a crate
//! import each other, and a crate's root (`lib.rs`, or `main.rs` where there is no
//! `lib.rs`) defines nothing its modules use, so a module names the module that defines
//! what it uses. A module "uses" another when its code (comments and inline test modules
//! left out) names it by a `crate::`, `super::` or `self::` path, or by the name of a child
//! module it declares; `crate::Name` of something that is not a module names the root.
//! Binaries (`src/main.rs` beside a `lib.rs`, `src/bin/*.rs`) are crates of their own that
//! use the library by its name, and are left out.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path inside its crate: `[]` for the root, `["quant", "x86"]` for
/// `quant/x86.rs` or `quant/x86/mod.rs`.
type ModPath = Vec<String>;

/// The module files of the crate whose sources are in `src`, by module path.
fn modules(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    let root = if src.join("lib.rs").is_file() {
        "lib.rs"
    } else {
        "main.rs"
    };
    let mut found = BTreeMap::new();
    let mut todo = vec![src.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("a readable directory entry").path();
            let relative = path.strip_prefix(src).unwrap().to_path_buf();
            let parts: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts[0] == "bin" {
                continue;
            }
            if path.is_dir() {
                todo.push(path);
                continue;
            }
            let Some(last) = parts.last().and_then(|l| l.strip_suffix(".rs")) else {
                continue;
            };
            let mut module: ModPath = parts[..parts.len() - 1].to_vec();
            if parts.len() == 1 && (last == "lib" || last == "main") {
                if parts[0] != root {
                    continue;
                }
            } else if last != "mod" {
                module.push(last.to_string());
            }
            found.insert(module, path);
        }
    }
    found
}

/// `text` without comments, string literals kept out of the way as far as this test needs
/// (a `//` inside a string cuts the rest of its line, which holds no path we look for), and
/// without the inline test modules (`#[cfg(test)] mod … {`, `#[cfg(all(test, …))]`) that end
/// a file.
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut in_block_comment = false;
    let lines: Vec<&str> = text.lines().collect();
    for (n, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let next = lines.get(n + 1).map_or("", |l| l.trim());
        let test_only = trimmed.starts_with("#[cfg(") && segments_of(trimmed).contains(&"test");
        if test_only && next.contains("mod ") && next.ends_with('{') {
            // Inline test modules come last in this workspace's files.
            break;
        }
        if in_block_comment {
            if trimmed.contains("*/") {
                in_block_comment = false;
            }
            continue;
        }
        if trimmed.starts_with("/*") {
            in_block_comment = !trimmed.contains("*/");
            continue;
        }
        let line = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// The identifiers of `text`.
fn segments_of(text: &str) -> Vec<&str> {
    text.split(|c: char| !is_ident(c))
        .filter(|w| !w.is_empty())
        .collect()
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths that start at `at` in `code` (just after `crate::`, `super::` or `self::`):
/// one path, or every item of a `{ … }` group, each as its segments.
fn paths_at(code: &str, at: usize) -> Vec<Vec<String>> {
    let rest = &code[at..];
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 1;
        let mut end = group.len();
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let inner = &group[..end];
        let mut items = Vec::new();
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&inner[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        items.push(&inner[start..]);
        return items
            .into_iter()
            .map(|item| segments(item.trim()))
            .filter(|s| !s.is_empty())
            .collect();
    }
    vec![segments(rest)]
}

/// The leading `a::b::c` segments of `text`.
fn segments(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        let len = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        if len == 0 {
            break;
        }
        out.push(rest[..len].to_string());
        rest = &rest[len..];
        match rest.strip_prefix("::") {
            Some(more) if more.starts_with(is_ident) => rest = more,
            _ => break,
        }
    }
    out
}

/// The longest module prefix of `path` among `known`, `[]` (the root) when none.
fn module_of(path: &[String], known: &BTreeMap<ModPath, PathBuf>) -> ModPath {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| known.contains_key(prefix))
        .unwrap_or_default()
}

/// The modules that `module`'s `code` uses, itself left out.
fn uses(module: &ModPath, code: &str, known: &BTreeMap<ModPath, PathBuf>) -> BTreeSet<ModPath> {
    let mut used = BTreeSet::new();
    let children: BTreeSet<String> = known
        .keys()
        .filter(|k| k.len() == module.len() + 1 && k.starts_with(module))
        .map(|k| k[module.len()].clone())
        .collect();
    let starts_word = |i: usize| i == 0 || !code[..i].ends_with(|c: char| is_ident(c) || c == ':');
    for (i, _) in code.match_indices("::") {
        let before = &code[..i];
        let word_start = before
            .rfind(|c: char| !is_ident(c))
            .map(|p| p + 1)
            .unwrap_or(0);
        let word = &before[word_start..];
        if !starts_word(word_start) {
            continue;
        }
        let base: ModPath = match word {
            "crate" => Vec::new(),
            "super" => module[..module.len().saturating_sub(1)].to_vec(),
            "self" => module.clone(),
            child if children.contains(child) => {
                let mut m = module.clone();
                m.push(child.to_string());
                let target = module_of(&m, known);
                used.insert(target);
                continue;
            }
            _ => continue,
        };
        for path in paths_at(code, i + 2) {
            let full: Vec<String> = base.iter().cloned().chain(path).collect();
            used.insert(module_of(&full, known));
        }
    }
    used.remove(module);
    used
}

fn show(module: &ModPath, known: &BTreeMap<ModPath, PathBuf>, src: &Path) -> String {
    known[module]
        .strip_prefix(src)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// Every pair of modules of the crate in `src` that use each other, as file names.
fn mutual_pairs(src: &Path) -> Vec<String> {
    let known = modules(src);
    let graph: BTreeMap<ModPath, BTreeSet<ModPath>> = known
        .iter()
        .map(|(module, path)| {
            let text = std::fs::read_to_string(path).expect("a readable source file");
            let used = uses(module, &code_of(&text), &known);
            if std::env::var_os("SHOW_USES").is_some() {
                eprintln!("{module:?} uses {used:?}");
            }
            (module.clone(), used)
        })
        .collect();
    let mut pairs = Vec::new();
    for (a, used) in &graph {
        for b in used {
            if a < b && graph.get(b).is_some_and(|back| back.contains(a)) {
                pairs.push(format!(
                    "{} <-> {}",
                    show(a, &known, src),
                    show(b, &known, src)
                ));
            }
        }
    }
    pairs
}

#[test]
fn no_two_modules_of_a_crate_import_each_other() {
    let root = common::workspace_root();
    let dirs = common::crate_dirs(&root);
    let mut found = BTreeSet::new();
    for dir in &dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        for pair in mutual_pairs(&dir.join("src")) {
            found.insert(format!("{name}: {pair}"));
        }
    }
    assert!(
        found.is_empty(),
        "modules that import each other (docs/architecture.md's invariants):\n{}",
        found.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// The rule's own reading of paths, on a made-up crate in a temporary directory.
#[test]
fn the_rule_sees_crate_super_self_and_child_paths() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |name: &str, text: &str| {
        let path = src.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "mod a;\nmod b;\nmod c;\npub use a::A;\npub struct Root;\n",
    );
    // a uses the root's `Root`: lib.rs <-> a. b and c use each other through a group and
    // through `super::`. The comment and the inline test module use nothing.
    write("a.rs", "pub struct A(crate::Root);\n// crate::b::B\n");
    write("b.rs", "use crate::{c::C, a::A};\npub struct B;\n");
    write(
        "c.rs",
        "pub struct C(super::b::B);\nmod d;\n#[cfg(test)]\nmod tests {\n    use crate::Root;\n}\n",
    );
    write("c/d.rs", "use self::super::C;\n");
    let pairs = mutual_pairs(src);
    assert_eq!(pairs, ["lib.rs <-> a.rs", "b.rs <-> c.rs"], "{pairs:?}");
    let known = modules(src);
    let used = uses(&vec!["a".into()], "x::y; crate::b::B; super::c::C", &known);
    assert_eq!(used, BTreeSet::from([vec!["b".into()], vec!["c".into()]]));
}
