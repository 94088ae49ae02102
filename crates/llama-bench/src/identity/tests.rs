//! Tests of `identity.rs`: the model identity's hash, its bound and its refusals, and the
//! version lines of old and new llama.cpp builds.

use super::*;
use std::io::{Seek, SeekFrom, Write};

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn fnv1a_matches_its_published_vectors() {
    let hash = |bytes: &[u8]| {
        let mut h = Fnv1a::default();
        h.update(bytes);
        h.0
    };
    assert_eq!(hash(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(hash(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(hash(b"foobar"), 0x8594_4171_f739_67e8);
}

#[test]
fn the_identity_follows_the_header_and_the_size() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.gguf", b"GGUF\x03\0\0\0header-a");
    let same = write(dir.path(), "same.gguf", b"GGUF\x03\0\0\0header-a");
    let other = write(dir.path(), "b.gguf", b"GGUF\x03\0\0\0header-b");
    let id = ModelIdentity::of(&a).unwrap();
    assert_eq!(id.size, 16);
    assert_eq!(id.header_hash.len(), 16);
    assert!(
        id.header_hash
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    assert_eq!(ModelIdentity::of(&same).unwrap(), id);
    assert_ne!(
        ModelIdentity::of(&other).unwrap().header_hash,
        id.header_hash
    );
    let text = serde_json::to_string(&id).unwrap();
    assert_eq!(serde_json::from_str::<ModelIdentity>(&text).unwrap(), id);
}

#[test]
fn only_the_leading_bytes_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.gguf");
    let mut file = std::fs::File::create(&path).unwrap();
    file.write_all(b"GGUF").unwrap();
    // A sparse file past the bound; a byte changed beyond it changes nothing but the size.
    file.set_len(IDENTITY_BYTES + 4096).unwrap();
    let before = ModelIdentity::of(&path).unwrap();
    assert_eq!(before.size, IDENTITY_BYTES + 4096);
    file.seek(SeekFrom::Start(IDENTITY_BYTES + 10)).unwrap();
    file.write_all(b"x").unwrap();
    assert_eq!(ModelIdentity::of(&path).unwrap(), before);
    file.seek(SeekFrom::Start(IDENTITY_BYTES - 1)).unwrap();
    file.write_all(b"x").unwrap();
    assert_ne!(ModelIdentity::of(&path).unwrap(), before);
}

#[test]
fn files_that_are_not_gguf_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in [
        ("empty", &b""[..]),
        ("short", b"GGU"),
        ("other", b"PK\x03\x04zip"),
    ] {
        let path = write(dir.path(), name, bytes);
        let err = ModelIdentity::of(&path).unwrap_err();
        assert!(matches!(err, Error::NotGguf { .. }), "{err}");
        assert!(err.to_string().contains(name), "{err}");
    }
    let err = ModelIdentity::of(dir.path()).unwrap_err();
    assert!(matches!(err, Error::NotGguf { .. }), "{err}");
    // A FIFO is refused at once: opening one for reading would wait for a writer.
    let fifo = dir.path().join("fifo.gguf");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let err = watchdog::within("the identity of a FIFO", watchdog::LIMIT, move || {
        ModelIdentity::of(&fifo).unwrap_err()
    });
    assert!(matches!(err, Error::NotGguf { .. }), "{err}");
    assert!(err.to_string().contains("fifo.gguf"), "{err}");
    let missing = dir.path().join("missing.gguf");
    let err = ModelIdentity::of(&missing).unwrap_err();
    assert!(matches!(err, Error::Model { .. }), "{err}");
    assert!(err.to_string().contains("missing.gguf"), "{err}");
}

#[test]
fn version_lines_of_new_and_old_builds_name_the_commit() {
    let new =
        "version: 0.5.0-dev (build 0, commit 0c1e57098)\nbuilt with GNU 12.2.0 for Linux x86_64\n";
    assert_eq!(
        BuildInfo::parse_version(new),
        Some(BuildInfo {
            version: Some("0.5.0-dev".into()),
            build_number: Some(0),
            commit: "0c1e57098".into(),
        })
    );
    let old = "some log line\nversion: 4520 (8b576b6c)\nbuilt with cc for x86_64-linux-gnu\n";
    assert_eq!(
        BuildInfo::parse_version(old),
        Some(BuildInfo {
            version: Some("4520".into()),
            build_number: Some(4520),
            commit: "8b576b6c".into(),
        })
    );
    let unknown = "version: 1 (unknown)";
    assert_eq!(BuildInfo::parse_version(unknown).unwrap().commit, "unknown");
    for bad in [
        "",
        "usage: llama-bench [options]",
        "version: 1",
        "version: 1 ()",
        "version: 1 (build x, commit abc)",
        "version: 1 (build 1, sha abc)",
        "version: 1 (a b)",
        "version: 1 (abc\u{1b}[31m)",
    ] {
        assert_eq!(BuildInfo::parse_version(bad), None, "{bad:?}");
    }
}
