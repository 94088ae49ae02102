//! Tests of the `.gguf` header reader, on small files written here.

use super::*;
use crate::error::WorkloadError;
use crate::gguf::*;
use crate::test_writer::Writer;
use matmul_kernel::WeightFormat;
use std::io::Cursor;

/// The tensors of the sample file: a layer of a tiny llama, in q4_K, q6_K and f32.
fn sample_tensors() -> Vec<GgufTensor> {
    let t = |name: &str, dims: &[u64], ggml_type: u32, offset: u64| GgufTensor {
        name: name.to_string(),
        dims: dims.to_vec(),
        ggml_type,
        offset,
    };
    vec![
        t("blk.0.attn_q.weight", &[256, 256], 12, 0),
        t("blk.0.ffn_down.weight", &[512, 256], 14, 36864),
        t("output_norm.weight", &[256], 0, 147456),
    ]
}

/// A valid header of `version` with a value of every type, an array of every element type
/// (nested arrays too) and [`sample_tensors`].
fn sample(version: u32) -> Vec<u8> {
    let tensors = sample_tensors();
    let mut w = Writer::header(version, tensors.len() as u64, 15);
    w.key("general.architecture", 8).string("llama");
    w.key("llama.block_count", 4).u32(2);
    w.key("t.u8", 0).raw(&[200]);
    w.key("t.i8", 1).raw(&(-5i8).to_le_bytes());
    w.key("t.u16", 2).raw(&60000u16.to_le_bytes());
    w.key("t.i16", 3).raw(&(-300i16).to_le_bytes());
    w.key("t.i32", 5).raw(&(-70000i32).to_le_bytes());
    w.key("t.f32", 6).raw(&1.5f32.to_le_bytes());
    w.key("t.bool", 7).raw(&[1]);
    w.key("t.u64", 10).u64(1 << 40);
    w.key("t.i64", 11).raw(&(-(1i64 << 40)).to_le_bytes());
    w.key("t.f64", 12).raw(&(-2.25f64).to_le_bytes());
    w.key("t.strings", 9).u32(8).u64(3);
    w.string("a").string("").string("ünïcode");
    // One array of each numeric and boolean element type, as an array of arrays.
    w.key("t.arrays", 9).u32(9).u64(11);
    w.u32(0).u64(2).raw(&[1, 2]);
    w.u32(1).u64(1).raw(&(-1i8).to_le_bytes());
    w.u32(2).u64(1).raw(&7u16.to_le_bytes());
    w.u32(3).u64(1).raw(&(-7i16).to_le_bytes());
    w.u32(4).u64(2).u32(3).u32(4);
    w.u32(5).u64(1).raw(&(-9i32).to_le_bytes());
    w.u32(6).u64(1).raw(&0.5f32.to_le_bytes());
    w.u32(7).u64(2).raw(&[0, 1]);
    w.u32(10).u64(1).u64(u64::MAX);
    w.u32(11).u64(1).raw(&i64::MIN.to_le_bytes());
    w.u32(12).u64(0);
    w.key("t.nested", 9).u32(9).u64(1);
    w.u32(9).u64(1).u32(8).u64(1).string("deep");
    for t in &tensors {
        w.tensor(&t.name, &t.dims, t.ggml_type, t.offset);
    }
    w.bytes
}

fn expected_metadata() -> BTreeMap<String, GgufValue> {
    use GgufValue as V;
    [
        ("general.architecture", V::String("llama".into())),
        ("llama.block_count", V::U32(2)),
        ("t.u8", V::U8(200)),
        ("t.i8", V::I8(-5)),
        ("t.u16", V::U16(60000)),
        ("t.i16", V::I16(-300)),
        ("t.i32", V::I32(-70000)),
        ("t.f32", V::F32(1.5)),
        ("t.bool", V::Bool(true)),
        ("t.u64", V::U64(1 << 40)),
        ("t.i64", V::I64(-(1 << 40))),
        ("t.f64", V::F64(-2.25)),
        (
            "t.strings",
            V::Array(GgufArray::String(vec![
                "a".into(),
                "".into(),
                "ünïcode".into(),
            ])),
        ),
        (
            "t.arrays",
            V::Array(GgufArray::Array(vec![
                GgufArray::U8(vec![1, 2]),
                GgufArray::I8(vec![-1]),
                GgufArray::U16(vec![7]),
                GgufArray::I16(vec![-7]),
                GgufArray::U32(vec![3, 4]),
                GgufArray::I32(vec![-9]),
                GgufArray::F32(vec![0.5]),
                GgufArray::Bool(vec![false, true]),
                GgufArray::U64(vec![u64::MAX]),
                GgufArray::I64(vec![i64::MIN]),
                GgufArray::F64(vec![]),
            ])),
        ),
        (
            "t.nested",
            V::Array(GgufArray::Array(vec![GgufArray::Array(vec![
                GgufArray::String(vec!["deep".into()]),
            ])])),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// A reader that fails the test if anything past the header is read.
struct Weights;

impl Read for Weights {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        panic!("the reader went past the tensor table into the weights")
    }
}

/// The header error of parsing `bytes`.
fn error_of(bytes: &[u8]) -> WorkloadError {
    GgufHeader::from_bytes(bytes).unwrap_err()
}

#[test]
fn versions_2_and_3_with_every_value_type_parse() {
    for version in [2, 3] {
        let bytes = sample(version);
        let header = GgufHeader::from_bytes(&bytes).unwrap();
        assert_eq!(header.version, version);
        assert_eq!(header.metadata, expected_metadata());
        assert_eq!(header.tensors, sample_tensors());
        assert_eq!(header.architecture().unwrap(), "llama");
        assert_eq!(header.layer_count().unwrap(), 2);
        let formats: Vec<_> = header
            .tensors
            .iter()
            .map(|t| tensor_format(t).unwrap())
            .collect();
        assert_eq!(
            formats,
            [WeightFormat::Q4K, WeightFormat::Q6K, WeightFormat::F32]
        );
        assert_eq!(
            header.tensor("blk.0.ffn_down.weight").unwrap().dims,
            [512, 256]
        );
        // A reader stops at the end of the tensor table: the weights are never read.
        let reader = Cursor::new(bytes.clone()).chain(Weights);
        assert_eq!(GgufHeader::from_reader(reader).unwrap(), header);
    }
}

#[test]
fn a_file_is_read_up_to_its_tensor_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.gguf");
    let mut bytes = sample(3);
    // Weights after the header: read by nobody.
    bytes.extend(std::iter::repeat_n(0xAB, 1 << 20));
    std::fs::write(&path, &bytes).unwrap();
    let header = read_gguf_header(&path).unwrap();
    assert_eq!(header.tensors, sample_tensors());

    // A bad file's error names it, and `cause` gives the header's fault.
    std::fs::write(&path, b"GGML\x03\0\0\0").unwrap();
    let err = read_gguf_header(&path).unwrap_err();
    assert!(err.to_string().contains("model.gguf"), "{err}");
    assert!(
        matches!(err.cause(), WorkloadError::BadMagic { found } if found == "GGML"),
        "{err}"
    );
    assert!(err.to_string().contains("not a gguf file"), "{err}");

    let missing = read_gguf_header(&dir.path().join("absent.gguf")).unwrap_err();
    assert!(
        matches!(&missing, WorkloadError::Io { path, .. } if path.ends_with("absent.gguf")),
        "{missing}"
    );
}

#[test]
fn every_truncation_is_an_error_naming_its_offset() {
    let bytes = sample(3);
    for len in 0..bytes.len() {
        let prefix = &bytes[..len];
        let err = error_of(prefix);
        assert!(
            matches!(
                err,
                WorkloadError::Truncated { offset, .. } | WorkloadError::Overrun { offset, .. }
                    if offset <= len as u64
            ),
            "prefix of {len} bytes: {err}"
        );
        // Without the length known ahead, the end is met while reading.
        let err = GgufHeader::from_reader(prefix).unwrap_err();
        assert!(
            matches!(err, WorkloadError::Truncated { offset, .. } if offset <= len as u64),
            "prefix of {len} bytes: {err}"
        );
    }
    let err = error_of(&bytes[..bytes.len() - 3]);
    assert!(
        err.to_string()
            .contains("the data offset of tensor \"output_norm.weight\""),
        "{err}"
    );
}

#[test]
fn a_huge_string_length_is_refused_before_allocating() {
    let mut w = Writer::header(3, 0, 1);
    w.u64(u64::MAX).raw(b"general.architecture");
    let err = error_of(&w.bytes);
    assert!(
        matches!(
            &err,
            WorkloadError::TooLarge { offset: 24, value: u64::MAX, limit, .. }
                if *limit == MAX_STRING_BYTES
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "length of metadata key #0 at byte 24 is {}, above the limit of {MAX_STRING_BYTES}",
            u64::MAX
        )
    );
    // Within the limit but longer than the file.
    let mut w = Writer::header(3, 0, 1);
    w.key("k", 8).u64(1000).raw(b"short");
    let err = error_of(&w.bytes);
    assert!(
        matches!(&err, WorkloadError::Overrun { value: 1000, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("the value of \"k\""), "{err}");
}

#[test]
fn a_huge_array_count_is_refused_before_allocating() {
    for ty in [0, 8, 9, 10] {
        let mut w = Writer::header(3, 0, 1);
        w.key("tokenizer.ggml.tokens", 9).u32(ty).u64(u64::MAX);
        let err = error_of(&w.bytes);
        let offset = 8 + 8 + 8 + 8 + "tokenizer.ggml.tokens".len() as u64 + 4 + 4;
        assert!(
            matches!(&err, WorkloadError::TooLarge { offset: o, limit, .. }
                if *o == offset && *limit == MAX_ARRAY_LEN),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("the element count of the value of \"tokenizer.ggml.tokens\""),
            "{err}"
        );
        // A count within the limit whose elements cannot fit in the file.
        let mut w = Writer::header(3, 0, 1);
        w.key("k", 9).u32(ty).u64(MAX_ARRAY_LEN).raw(&[0; 64]);
        assert!(
            matches!(error_of(&w.bytes), WorkloadError::Overrun { .. }),
            "type {ty}"
        );
        // The same from a reader of unknown length: the elements run out, or (16M strings
        // or arrays, 384 MiB and 512 MiB in memory) they would take too much memory.
        let err = GgufHeader::from_reader(&w.bytes[..]).unwrap_err();
        match ty {
            8 | 9 => assert!(matches!(err, WorkloadError::MemoryLimit { .. }), "{err}"),
            _ => assert!(matches!(err, WorkloadError::Truncated { .. }), "{err}"),
        }
    }
}

#[test]
fn huge_counts_in_the_header_are_refused() {
    let err = error_of(&Writer::header(3, u64::MAX, 0).bytes);
    assert!(
        matches!(&err, WorkloadError::TooLarge { offset: 8, limit, .. } if *limit == MAX_TENSORS),
        "{err}"
    );
    assert!(
        err.to_string().starts_with("the tensor count at byte 8"),
        "{err}"
    );
    let err = error_of(&Writer::header(3, 0, 1 << 40).bytes);
    assert!(
        matches!(&err, WorkloadError::TooLarge { offset: 16, limit, .. } if *limit == MAX_METADATA_KVS),
        "{err}"
    );
    // Within the limits but not in the file.
    let err = error_of(&Writer::header(3, MAX_TENSORS, 0).bytes);
    assert!(
        matches!(&err, WorkloadError::Overrun { offset: 8, .. }),
        "{err}"
    );
}

#[test]
fn too_many_or_bad_dimensions_name_the_tensor() {
    let mut w = Writer::header(3, 1, 0);
    w.string("blk.0.attn_k.weight").u32(1000);
    let err = error_of(&w.bytes);
    assert!(
        matches!(
            &err,
            WorkloadError::TooLarge {
                value: 1000,
                offset: 51,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("n_dims of tensor \"blk.0.attn_k.weight\" at byte 51"),
        "{err}"
    );
    for dims in [[0, 4], [u64::MAX, 2]] {
        let mut w = Writer::header(3, 1, 0);
        w.tensor("t", &dims, 0, 0);
        let err = error_of(&w.bytes);
        assert!(
            matches!(&err, WorkloadError::Invalid { what, .. } if what.contains("of tensor \"t\"")),
            "{err}"
        );
    }
}

#[test]
fn bad_magic_and_versions_are_refused() {
    let err = error_of(b"GGJT\x03\0\0\0");
    assert!(matches!(&err, WorkloadError::BadMagic { .. }), "{err}");
    // Bytes that are not text are shown escaped, never as replacement characters.
    let err = error_of(b"\x7fEL\xff\x03\0\0\0");
    assert!(err.to_string().contains(r#""\x7fEL\xff""#), "{err}");
    for (version, why) in [
        (1, "version 1"),
        (99, "only versions 2 and 3"),
        (0x0300_0000, "big-endian"),
    ] {
        let err = error_of(&Writer::header(version, 0, 0).bytes);
        assert!(
            matches!(&err, WorkloadError::UnsupportedVersion { version: v, .. } if *v == version),
            "{err}"
        );
        assert!(err.to_string().contains(why), "{err}");
    }
    // An empty file is short of its magic.
    assert!(matches!(
        error_of(b""),
        WorkloadError::Truncated { offset: 0, .. }
    ));
}

#[test]
fn strings_that_are_not_utf8_name_their_key() {
    let mut w = Writer::header(3, 0, 1);
    w.u64(4).raw(b"k\xff\xfez").u32(4).u32(1);
    let err = error_of(&w.bytes);
    assert!(
        matches!(&err, WorkloadError::InvalidUtf8 { offset: 24, lossy, .. } if lossy.starts_with('k')),
        "{err}"
    );
    assert!(
        err.to_string().contains("metadata key #0 at byte 24"),
        "{err}"
    );

    let mut w = Writer::header(3, 0, 1);
    w.key("general.name", 8).u64(2).raw(b"\xc3\x28");
    let err = error_of(&w.bytes);
    assert!(
        err.to_string().contains("the value of \"general.name\""),
        "{err}"
    );

    let mut w = Writer::header(3, 1, 0);
    w.u64(2).raw(b"\x80x").u32(1).u64(1).u32(0).u64(0);
    let err = error_of(&w.bytes);
    assert!(err.to_string().contains("the name of tensor #0"), "{err}");
}

#[test]
fn invalid_values_duplicates_and_deep_nesting_are_refused() {
    let mut w = Writer::header(3, 0, 1);
    w.key("k", 13).u32(0);
    let err = error_of(&w.bytes);
    assert!(
        err.to_string().contains("13 is no gguf value type"),
        "{err}"
    );

    let mut w = Writer::header(3, 0, 1);
    w.key("k", 9).u32(42).u64(0);
    assert!(matches!(error_of(&w.bytes), WorkloadError::Invalid { .. }));

    let mut w = Writer::header(3, 0, 1);
    w.key("flag", 7).raw(&[2]);
    let err = error_of(&w.bytes);
    assert!(
        err.to_string().contains("a boolean is 0 or 1, not 2"),
        "{err}"
    );

    let mut w = Writer::header(3, 0, 2);
    w.key("k", 4).u32(1).key("k", 4).u32(2);
    assert!(matches!(
        error_of(&w.bytes),
        WorkloadError::DuplicateKey { key, offset: 41 } if key == "k"
    ));

    let mut w = Writer::header(3, 2, 0);
    w.tensor("w", &[32], 0, 0).tensor("w", &[32], 0, 128);
    assert!(matches!(
        error_of(&w.bytes),
        WorkloadError::DuplicateTensor { name, .. } if name == "w"
    ));

    // Arrays nested one deeper than allowed.
    let mut w = Writer::header(3, 0, 1);
    w.key("k", 9);
    for _ in 0..MAX_ARRAY_DEPTH {
        w.u32(9).u64(1);
    }
    w.u32(0).u64(0);
    let err = error_of(&w.bytes);
    assert!(err.to_string().contains("nest more than"), "{err}");
    // As deep as allowed is fine.
    let mut w = Writer::header(3, 0, 1);
    w.key("k", 9);
    for _ in 1..MAX_ARRAY_DEPTH {
        w.u32(9).u64(1);
    }
    w.u32(0).u64(0);
    GgufHeader::from_bytes(&w.bytes).unwrap();
}

#[test]
fn nothing_is_read_past_the_header_limit() {
    let mut parser = Parser::new(&[0u8; 16][..], None);
    parser.offset = MAX_HEADER_BYTES - 2;
    let err = parser.u32(&"a field").unwrap_err();
    assert!(
        matches!(&err, WorkloadError::HeaderTooLarge { offset, .. } if *offset == MAX_HEADER_BYTES - 2),
        "{err}"
    );
    // A count is judged against what is left under the limit too.
    let mut parser = Parser::new(&[0xFF, 0xFF, 0, 0, 0, 0, 0, 0][..], None);
    parser.offset = MAX_HEADER_BYTES - 1000;
    let err = parser.count(&"a count", MAX_ARRAY_LEN, 1).unwrap_err();
    assert!(
        matches!(err, WorkloadError::Overrun { value: 0xFFFF, .. }),
        "{err}"
    );
}

#[test]
fn metadata_for_the_layer_count_is_checked() {
    let header = |metadata: &[(&str, GgufValue)]| GgufHeader {
        version: 3,
        metadata: metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        tensors: Vec::new(),
    };
    let arch = (ARCHITECTURE_KEY, GgufValue::String("qwen2".into()));
    let err = header(&[]).layer_count().unwrap_err();
    assert_eq!(err.to_string(), "metadata general.architecture: is missing");
    let err = header(&[(ARCHITECTURE_KEY, GgufValue::U8(1))])
        .layer_count()
        .unwrap_err();
    assert!(err.to_string().contains("not a string"), "{err}");
    let err = header(std::slice::from_ref(&arch))
        .layer_count()
        .unwrap_err();
    assert_eq!(err.to_string(), "metadata qwen2.block_count: is missing");
    for bad in [
        GgufValue::U32(0),
        GgufValue::I32(-1),
        GgufValue::F32(28.0),
        GgufValue::U64(u64::MAX),
    ] {
        let err = header(&[arch.clone(), ("qwen2.block_count", bad)])
            .layer_count()
            .unwrap_err();
        assert!(
            err.to_string().starts_with("metadata qwen2.block_count: "),
            "{err}"
        );
    }
    // The words say what is wrong with the count.
    for (bad, says) in [
        (GgufValue::U32(0), "is 0: a model has at least one layer"),
        (
            GgufValue::U64(u64::MAX),
            "18446744073709551615 is above the limit of 1024 layers",
        ),
    ] {
        let err = header(&[arch.clone(), ("qwen2.block_count", bad)])
            .layer_count()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("metadata qwen2.block_count: {says}")
        );
    }
    let ok = header(&[arch.clone(), ("qwen2.block_count", GgufValue::U64(28))]);
    assert_eq!(ok.layer_count().unwrap(), 28);
}

#[test]
fn an_unsupported_tensor_format_names_the_tensor() {
    let tensor = GgufTensor {
        name: "blk.3.ffn_up.weight".into(),
        dims: vec![4096, 14336],
        // q5_K
        ggml_type: 13,
        offset: 0,
    };
    let err = tensor_format(&tensor).unwrap_err();
    let message = err.to_string();
    assert!(
        message.starts_with("tensor \"blk.3.ffn_up.weight\" has ggml type 13"),
        "{message}"
    );
    assert!(message.contains("q4_K = 12"), "{message}");
}

#[test]
fn a_fifo_or_a_directory_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("model.gguf");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let path = fifo.clone();
    let err = watchdog::guard("reading a FIFO", move || {
        read_gguf_header(&path).unwrap_err()
    });
    assert!(
        matches!(&err, WorkloadError::NotAFile(p) if *p == fifo),
        "{err}"
    );
    assert!(err.to_string().ends_with("is not a regular file"), "{err}");

    let err = read_gguf_header(dir.path()).unwrap_err();
    assert!(
        matches!(&err, WorkloadError::NotAFile(p) if p == dir.path()),
        "{err}"
    );
}

/// A xorshift generator: the same bytes on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn corrupted_and_random_bytes_never_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let valid = sample(3);
    for _ in 0..3000 {
        let mut bytes = valid.clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(bytes.len());
            // Mostly small values and 0xFF runs: the ones that turn counts absurd.
            bytes[at] = match rng.below(3) {
                0 => 0xFF,
                1 => rng.below(16) as u8,
                _ => rng.next() as u8,
            };
        }
        let cut = bytes.len() - rng.below(8);
        let _ = GgufHeader::from_bytes(&bytes[..cut]);
        let _ = GgufHeader::from_reader(&bytes[..cut]);
    }
    for _ in 0..3000 {
        let len = rng.below(256);
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if len >= 8 {
            bytes[..4].copy_from_slice(b"GGUF");
            bytes[4..8].copy_from_slice(&(2 + rng.below(2) as u32).to_le_bytes());
        }
        let _ = GgufHeader::from_bytes(&bytes);
    }
}

/// A reader that fails (other than at an end of file) after the first `ok` bytes.
struct Failing {
    ok: usize,
}

impl Read for Failing {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.ok == 0 {
            return Err(io::Error::other("disk on fire"));
        }
        let n = buf.len().min(self.ok);
        buf[..n].fill(0);
        self.ok -= n;
        Ok(n)
    }
}

#[test]
fn a_read_error_names_the_field_and_offset() {
    let reader = Cursor::new(b"GGUF".to_vec()).chain(Failing { ok: 2 });
    let err = GgufHeader::from_reader(reader).unwrap_err();
    assert!(
        matches!(&err, WorkloadError::Read { offset: 4, .. }),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "cannot read the version at byte 4: disk on fire"
    );
}

/// A file written by gguf-py (the `gguf` package of PyPI), not by the writer above:
/// `tests/fixtures/make_gguf_fixture.py` made it.
#[test]
fn a_file_written_by_gguf_py_reads_as_gguf_py_reads_it() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf-py-tiny.gguf");
    let header = read_gguf_header(&path).unwrap();
    assert_eq!(header.version, 3);
    assert_eq!(header.architecture().unwrap(), "llama");
    assert_eq!(header.layer_count().unwrap(), 2);
    let m = &header.metadata;
    assert_eq!(m["llama.embedding_length"], GgufValue::U32(64));
    assert_eq!(m["llama.rope.freq_base"], GgufValue::F32(500000.0));
    assert_eq!(m["test.flag"], GgufValue::Bool(true));
    assert_eq!(m["test.i8"], GgufValue::I8(-3));
    assert_eq!(m["test.u64"], GgufValue::U64(1 << 40));
    assert_eq!(m["test.f64"], GgufValue::F64(0.125));
    assert_eq!(
        m["test.ints"],
        GgufValue::Array(GgufArray::I32(vec![1, 2, 3]))
    );
    assert_eq!(
        m["tokenizer.ggml.tokens"],
        GgufValue::Array(GgufArray::String(vec![
            "<s>".into(),
            "</s>".into(),
            "héllo".into()
        ]))
    );
    // gguf-py's shapes and data offsets (from the start of the data section, 672 here).
    let table: Vec<_> = header
        .tensors
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.dims.clone(),
                tensor_format(t).unwrap(),
                t.offset,
            )
        })
        .collect();
    assert_eq!(
        table,
        [
            ("token_embd.weight", vec![64, 4], WeightFormat::F16, 0),
            ("blk.0.attn_q.weight", vec![64, 64], WeightFormat::Q8_0, 512),
            ("output_norm.weight", vec![64], WeightFormat::F32, 4864),
        ]
    );
}

#[test]
fn a_megabyte_key_that_is_not_utf8_gives_a_short_error_line() {
    let mut key = vec![0xff; MAX_STRING_BYTES as usize];
    key[0] = b'k';
    let mut w = Writer::header(3, 0, 1);
    w.u64(key.len() as u64).raw(&key).u32(4).u32(1);
    let message = error_of(&w.bytes).to_string();
    assert!(message.len() < 400, "{} bytes", message.len());
    assert!(message.contains("(1048576 bytes)"), "{message}");
    // A megabyte key that is valid UTF-8 but holds escapes is cut as well, in every message
    // that names it.
    let key = format!("\x1b[2K{}", "k".repeat(MAX_STRING_BYTES as usize - 4));
    let mut w = Writer::header(3, 0, 1);
    w.key(&key, 99);
    let message = error_of(&w.bytes).to_string();
    assert!(message.len() < 400, "{} bytes", message.len());
    assert!(!message.chars().any(char::is_control), "{message:?}");
}

#[test]
fn a_header_of_empty_strings_and_arrays_is_bounded_in_memory() {
    // 4096 empty strings take 8 bytes each in the file and 24 in memory; 4096 empty arrays
    // 12 in the file and 32 in memory.
    for (ty, element) in [
        (8u32, &[0u8; 8][..]),
        (9, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
    ] {
        let mut w = Writer::header(3, 0, 1);
        w.key("tokenizer.ggml.tokens", 9).u32(ty).u64(4096);
        for _ in 0..4096 {
            w.raw(element);
        }
        let bytes = w.bytes.clone();
        // Within a limit of twice the file's size: refused, since the elements alone need
        // more than that.
        let limit = 2 * bytes.len() as u64;
        let err = Parser::new(&bytes[..], Some(bytes.len() as u64))
            .with_memory_limit(limit)
            .header()
            .unwrap_err();
        assert!(
            matches!(&err, WorkloadError::MemoryLimit { what, .. } if what.contains("tokenizer.ggml.tokens")),
            "{err}"
        );
        // With the default limit it parses.
        GgufHeader::from_bytes(&bytes).unwrap();
    }
}
