//! Tests of the `.gguf` workloads, on small headers written here and on a file gguf-py wrote.

use super::*;
use crate::gguf::GgufHeader;
use crate::test_writer::Writer;
use crate::weights::Weights;
use matmul_kernel::WeightFormat;

/// ggml type ids.
const F32: u32 = 0;
const F16: u32 = 1;
const Q8_0: u32 = 8;
const Q4_K: u32 = 12;
const Q5_K: u32 = 13;
const Q6_K: u32 = 14;

/// The seven tensor bases of a Llama layer.
const LLAMA: [&str; 7] = [
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
];

/// A `.gguf` header to write: the architecture, the block count (if any), the name (if
/// any) and the tensor table.
struct File {
    arch: &'static str,
    block_count: Option<u32>,
    name: Option<String>,
    tensors: Vec<(String, Vec<u64>, u32)>,
}

impl File {
    fn bytes(&self) -> Vec<u8> {
        let n_kvs = 1 + u64::from(self.block_count.is_some()) + u64::from(self.name.is_some());
        let mut w = Writer::header(3, self.tensors.len() as u64, n_kvs);
        w.key("general.architecture", 8).string(self.arch);
        if let Some(n) = self.block_count {
            w.key(&format!("{}.block_count", self.arch), 4).u32(n);
        }
        if let Some(name) = &self.name {
            w.key("general.name", 8).string(name);
        }
        for (i, (name, dims, ggml_type)) in self.tensors.iter().enumerate() {
            w.tensor(name, dims, *ggml_type, i as u64 * 4096);
        }
        w.bytes
    }

    fn workload(&self) -> Result<Workload, WorkloadError> {
        Workload::from_gguf_header(&GgufHeader::from_bytes(&self.bytes()).unwrap())
    }

    fn error(&self) -> WorkloadError {
        self.workload().unwrap_err()
    }

    /// Sets the ggml type of `name`.
    fn retype(&mut self, name: &str, ggml_type: u32) {
        self.entry(name).2 = ggml_type;
    }

    fn entry(&mut self, name: &str) -> &mut (String, Vec<u64>, u32) {
        self.tensors.iter_mut().find(|t| t.0 == name).unwrap()
    }

    fn remove(&mut self, name: &str) {
        self.tensors.retain(|t| t.0 != name);
    }
}

/// The ggml dims (`[n_in, n_out]`) of a Llama tensor base, for a model `hidden` wide with
/// key/value projections `kv` wide and a feed-forward `ff` wide.
fn llama_dims(base: &str, hidden: u64, kv: u64, ff: u64) -> Vec<u64> {
    match base {
        "attn_q" | "attn_output" => vec![hidden, hidden],
        "attn_k" | "attn_v" => vec![hidden, kv],
        "ffn_gate" | "ffn_up" => vec![hidden, ff],
        "ffn_down" => vec![ff, hidden],
        other => panic!("{other}"),
    }
}

/// A Llama file of `layers` layers, 256 wide (kv 128, feed-forward 512), each tensor of the
/// type `ggml_type(layer, base)`, with an output norm and embeddings around them.
fn tiny_llama(layers: u32, ggml_type: impl Fn(usize, &str) -> u32) -> File {
    let mut tensors = vec![("token_embd.weight".to_string(), vec![256, 1000], Q8_0)];
    for layer in 0..layers as usize {
        tensors.push((format!("blk.{layer}.attn_norm.weight"), vec![256], F32));
        for base in LLAMA {
            tensors.push((
                layer_tensor(layer, base),
                llama_dims(base, 256, 128, 512),
                ggml_type(layer, base),
            ));
        }
    }
    tensors.push(("output_norm.weight".to_string(), vec![256], F32));
    File {
        arch: "llama",
        block_count: Some(layers),
        name: Some("Tiny Llama".to_string()),
        tensors,
    }
}

/// `(name, n_out, n_in, format)` of each projection, whose layers all store `format`.
fn table(w: &Workload) -> Vec<(&str, usize, usize, WeightFormat)> {
    w.projections
        .iter()
        .map(|p| {
            let [(format, layers)] = p.format_mix()[..] else {
                panic!("{} mixes formats: {:?}", p.name, p.formats)
            };
            assert_eq!(layers, w.layers);
            (p.name.as_str(), p.n_out, p.n_in, format)
        })
        .collect()
}

#[test]
fn a_llama_file_gives_its_shapes_and_stored_formats() {
    let file = tiny_llama(3, |_, base| if base == "ffn_down" { Q6_K } else { Q4_K });
    let w = file.workload().unwrap();
    assert_eq!(w.name, "Tiny Llama (llama)");
    assert_eq!(w.layers, 3);
    use WeightFormat::{Q4K, Q6K};
    assert_eq!(
        table(&w),
        [
            ("attn_q", 256, 256, Q4K),
            ("attn_k", 128, 256, Q4K),
            ("attn_v", 128, 256, Q4K),
            ("attn_output", 256, 256, Q4K),
            ("ffn_gate", 512, 256, Q4K),
            ("ffn_up", 512, 256, Q4K),
            ("ffn_down", 256, 512, Q6K),
        ]
    );
    // Without general.name, the architecture names it.
    let mut file = file;
    file.name = None;
    assert_eq!(file.workload().unwrap().name, "llama");
}

/// The bytes of `tensor`'s weights, from its dims and ggml type.
fn tensor_bytes(tensor: &GgufTensor) -> u64 {
    let format = tensor_format(tensor).unwrap();
    format.row_bytes(tensor.dims[0] as usize).unwrap() as u64 * tensor.dims[1]
}

/// Llama-3-8B's layers, as llama.cpp's `llama-quantize` writes `Q4_K_M`: `attn_v` and
/// `ffn_down` in `q6_K` in the layers its `use_more_bits` picks, `q4_K` elsewhere.
fn q4_k_m_llama3_8b() -> File {
    let mut tensors = Vec::new();
    for layer in 0..32 {
        for base in LLAMA {
            // llama.cpp's use_more_bits for 32 layers, written out.
            let more_bits = !(32 / 8..7 * 32 / 8).contains(&layer) || (layer - 32 / 8) % 3 == 2;
            let heavier = matches!(base, "attn_v" | "ffn_down") && more_bits;
            tensors.push((
                layer_tensor(layer, base),
                llama_dims(base, 4096, 1024, 14336),
                if heavier { Q6_K } else { Q4_K },
            ));
        }
    }
    File {
        arch: "llama",
        block_count: Some(32),
        name: Some("Meta Llama 3 8B".into()),
        tensors,
    }
}

#[test]
fn a_q4_k_m_llama3_8b_file_is_the_q4_k_m_preset_layer_by_layer() {
    let file = q4_k_m_llama3_8b();
    let from_file = file.workload().unwrap();
    let preset = Workload::preset("llama3-8b", Weights::Q4KM).unwrap();
    for (a, b) in from_file.projections.iter().zip(&preset.projections) {
        assert_eq!(a.formats, b.formats, "{} and {}", a.name, b.name);
    }
    assert_eq!(from_file.key(), preset.key());
    // The bytes a token reads are the file's projection tensors, every one of them.
    let header = GgufHeader::from_bytes(&file.bytes()).unwrap();
    let file_bytes: u64 = header.tensors.iter().map(tensor_bytes).sum();
    assert_eq!(from_file.token_weight_bytes(), Some(file_bytes));
    assert_eq!(preset.token_weight_bytes(), Some(file_bytes));
    // q6_K is named: the file holds both formats, in the layers it stores them.
    let v = &from_file.projections[2];
    assert_eq!(
        v.format_mix(),
        [(WeightFormat::Q6K, 16), (WeightFormat::Q4K, 16)]
    );
    assert_eq!(v.formats[4], WeightFormat::Q4K);
    assert_eq!(v.formats[6], WeightFormat::Q6K);
    assert_eq!(from_file.formats(), [WeightFormat::Q4K, WeightFormat::Q6K]);
}

#[test]
fn a_three_layer_q4_k_m_file_keeps_q6_k_in_its_last_layer() {
    // llama.cpp's Q4_K_M of a 3-layer model: use_more_bits picks layer 2 only.
    let file = tiny_llama(3, |layer, base| match (base, layer) {
        ("attn_v" | "ffn_down", 2) => Q6_K,
        _ => Q4_K,
    });
    let w = file.workload().unwrap();
    use WeightFormat::{Q4K, Q6K};
    for p in &w.projections {
        let expected = if matches!(p.name.as_str(), "attn_v" | "ffn_down") {
            vec![Q4K, Q4K, Q6K]
        } else {
            vec![Q4K; 3]
        };
        assert_eq!(p.formats, expected, "{}", p.name);
    }
    let header = GgufHeader::from_bytes(&file.bytes()).unwrap();
    let projection_bytes: u64 = header
        .tensors
        .iter()
        .filter(|t| t.name.starts_with("blk.") && t.dims.len() == 2)
        .map(tensor_bytes)
        .sum();
    assert_eq!(w.token_weight_bytes(), Some(projection_bytes));
}

#[test]
fn each_layer_keeps_its_own_format() {
    let file = tiny_llama(3, |layer, base| match (base, layer) {
        ("attn_v", 1) => Q6_K,
        ("ffn_down", 0) => F16,
        ("ffn_down", 1) => F32,
        ("ffn_down", _) => Q8_0,
        ("attn_k", 0) => 30,
        _ => Q4_K,
    });
    let w = file.workload().unwrap();
    let formats = |name| {
        w.projections
            .iter()
            .find(|p| p.name == name)
            .unwrap()
            .formats
            .clone()
    };
    use WeightFormat as W;
    assert_eq!(formats("attn_v"), [W::Q4K, W::Q6K, W::Q4K]);
    assert_eq!(formats("ffn_down"), [W::F16, W::F32, W::Q8_0]);
    assert_eq!(formats("attn_k"), [W::Bf16, W::Q4K, W::Q4K]);
    assert_eq!(
        w.formats(),
        [W::Q4K, W::Bf16, W::Q6K, W::F16, W::F32, W::Q8_0]
    );
}

#[test]
fn fused_and_ungated_layouts_are_read() {
    // phi3: fused qkv (3 × 3072 wide), fused gate and up (2 × 8192), no ffn_gate.
    let mut tensors = Vec::new();
    for layer in 0..2 {
        for (base, dims) in [
            ("attn_qkv", vec![3072, 9216]),
            ("attn_output", vec![3072, 3072]),
            ("ffn_up", vec![3072, 16384]),
            ("ffn_down", vec![8192, 3072]),
        ] {
            tensors.push((layer_tensor(layer, base), dims, Q8_0));
        }
    }
    let file = File {
        arch: "phi3",
        block_count: Some(2),
        name: None,
        tensors,
    };
    let w = file.workload().unwrap();
    use WeightFormat::Q8_0 as Q8;
    assert_eq!(
        table(&w),
        [
            ("attn_qkv", 9216, 3072, Q8),
            ("attn_output", 3072, 3072, Q8),
            ("ffn_up", 16384, 3072, Q8),
            ("ffn_down", 3072, 8192, Q8),
        ]
    );
    // The same bytes as the phi-3-mini preset's seven separate projections.
    let preset = Workload::preset("phi-3-mini", Weights::Uniform(Q8)).unwrap();
    assert_eq!(w.distinct_matrix_bytes(), preset.distinct_matrix_bytes());

    // starcoder2: separate q, k, v and a feed-forward without a gate.
    let mut file = tiny_llama(2, |_, _| F16);
    file.arch = "starcoder2";
    file.block_count = Some(2);
    for layer in 0..2 {
        file.remove(&layer_tensor(layer, "ffn_gate"));
    }
    let w = file.workload().unwrap();
    let names: Vec<_> = w.projections.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "attn_q",
            "attn_k",
            "attn_v",
            "attn_output",
            "ffn_up",
            "ffn_down"
        ]
    );
}

#[test]
fn a_missing_layer_tensor_is_named() {
    for (layer, base) in [
        (2, "ffn_down"),
        (0, "attn_k"),
        (1, "attn_output"),
        (0, "ffn_up"),
    ] {
        let mut file = tiny_llama(3, |_, _| Q4_K);
        let name = layer_tensor(layer, base);
        file.remove(&name);
        let err = file.error();
        assert!(
            matches!(&err, WorkloadError::Tensor { name: n, .. } if *n == name),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "tensor {name:?} is missing: llama.block_count says 3 layers, and every layer needs it"
            )
        );
    }
    // A block count above the layers the file has.
    let mut file = tiny_llama(2, |_, _| Q4_K);
    file.block_count = Some(3);
    let err = file.error();
    assert!(
        err.to_string()
            .starts_with("tensor \"blk.2.attn_q.weight\" is missing"),
        "{err}"
    );
    // No attention at all.
    let mut file = tiny_llama(1, |_, _| Q4_K);
    file.remove("blk.0.attn_q.weight");
    let err = file.error();
    assert_eq!(
        err.to_string(),
        "tensor \"blk.0.attn_q.weight\" is missing, and so is a fused blk.0.attn_qkv.weight"
    );
    // Tensors of layers beyond the block count are not read.
    let mut file = tiny_llama(3, |_, _| Q4_K);
    file.block_count = Some(2);
    file.entry("blk.2.attn_q.weight").1 = vec![7];
    assert_eq!(file.workload().unwrap().layers, 2);
}

#[test]
fn mixture_of_experts_layers_are_refused() {
    let mut file = tiny_llama(1, |_, _| Q4_K);
    file.arch = "qwen3moe";
    file.block_count = Some(1);
    file.tensors
        .push(("blk.0.ffn_gate_inp.weight".into(), vec![256, 8], F32));
    let err = file.error();
    assert!(
        matches!(&err, WorkloadError::Tensor { name, reason }
            if name == "blk.0.ffn_gate_inp.weight" && reason.contains("mixture-of-experts")),
        "{err}"
    );
    // A dense first layer does not hide the experts of the next ones.
    let mut file = tiny_llama(3, |_, _| Q4_K);
    file.arch = "deepseek2";
    file.block_count = Some(3);
    for layer in 1..3 {
        file.remove(&layer_tensor(layer, "ffn_up"));
        file.tensors
            .push((layer_tensor(layer, "ffn_up_exps"), vec![256, 512, 64], Q4_K));
    }
    let err = file.error();
    assert!(
        matches!(&err, WorkloadError::Tensor { name, reason }
            if name == "blk.1.ffn_up_exps.weight" && reason.contains("mixture-of-experts")),
        "{err}"
    );
}

#[test]
fn a_shape_unlike_layer_0s_is_named() {
    let mut file = tiny_llama(3, |_, _| Q4_K);
    file.entry("blk.2.attn_k.weight").1 = vec![256, 256];
    let err = file.error();
    assert_eq!(
        err.to_string(),
        "tensor \"blk.2.attn_k.weight\" has dims [256, 256], unlike blk.0.attn_k.weight's \
         [256, 128]: every layer must have layer 0's shapes"
    );
}

#[test]
fn tensors_that_are_not_usable_matrices_are_named() {
    let cases: [(Vec<u64>, u32, &str); 6] = [
        (
            vec![256],
            Q4_K,
            "has dims [256], not the 2 of a weight matrix",
        ),
        (vec![256, 256, 2], Q4_K, "has dims [256, 256, 2], not the 2"),
        (
            vec![100, 256],
            Q4_K,
            "has rows of 100 weights, not whole q4_K blocks of 256",
        ),
        (
            vec![48, 256],
            Q8_0,
            "has rows of 48 weights, not whole q8_0 blocks of 32",
        ),
        (
            vec![256, 1 << 21],
            F32,
            "has n_out (ne[1]) 2097152, above the limit of 1048576",
        ),
        (
            vec![1 << 40, 1],
            F32,
            "has n_in (ne[0]) 1099511627776, above the limit",
        ),
    ];
    // A side of 0, which the file parser refuses first, from a header built by hand.
    let mut header = GgufHeader::from_bytes(&tiny_llama(1, |_, _| F32).bytes()).unwrap();
    let tensor = header
        .tensors
        .iter_mut()
        .find(|t| t.name == "blk.0.attn_q.weight")
        .unwrap();
    tensor.dims[1] = 0;
    let err = Workload::from_gguf_header(&header).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor \"blk.0.attn_q.weight\" has n_out (ne[1]) 0: a weight matrix has no empty side"
    );
    for (dims, ggml_type, reason) in cases {
        let mut file = tiny_llama(1, |_, _| Q4_K);
        *file.entry("blk.0.attn_q.weight") = ("blk.0.attn_q.weight".into(), dims, ggml_type);
        let err = file.error();
        assert!(
            matches!(&err, WorkloadError::Tensor { name, reason: r }
                if name == "blk.0.attn_q.weight" && r.starts_with(reason)),
            "{err}"
        );
    }
    // Trailing dimensions of 1 are a matrix still.
    let mut file = tiny_llama(1, |_, _| Q4_K);
    file.entry("blk.0.attn_q.weight").1 = vec![256, 256, 1, 1];
    assert_eq!(file.workload().unwrap().projections[0].n_out, 256);
}

#[test]
fn a_format_we_lack_names_the_tensor_and_its_type() {
    // q5_K in one layer of a Q5_K_M-like file.
    let mut file = tiny_llama(2, |_, _| Q4_K);
    file.retype("blk.1.ffn_up.weight", Q5_K);
    let err = file.error();
    assert!(
        matches!(&err, WorkloadError::UnsupportedFormat { name, ggml_type: 13 }
            if name == "blk.1.ffn_up.weight"),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("tensor \"blk.1.ffn_up.weight\" has ggml type 13"),
        "{err}"
    );
}

#[test]
fn the_layer_count_must_be_there_and_sane() {
    let mut file = tiny_llama(1, |_, _| Q4_K);
    for (count, reason) in [
        (None, "is missing"),
        (Some(0), "is 0: a model has at least one layer"),
        (Some(1025), "1025 is above the limit of 1024 layers"),
    ] {
        file.block_count = count;
        let err = file.error();
        assert!(
            matches!(&err, WorkloadError::Metadata { key, reason: r }
                if key == "llama.block_count" && r.starts_with(reason)),
            "{err}"
        );
    }
}

#[test]
fn names_are_cleaned_and_cut() {
    let mut file = tiny_llama(1, |_, _| Q4_K);
    file.name = Some(format!("  Evil\u{1b}[2J{}", "x".repeat(500)));
    let name = file.workload().unwrap().name;
    assert!(name.starts_with("Evil[2Jxxx"), "{name}");
    assert!(name.ends_with(" (llama)"), "{name}");
    assert!(name.chars().count() <= MAX_NAME_CHARS + " (llama)".len());
    file.name = Some("   ".into());
    assert_eq!(file.workload().unwrap().name, "llama");
}

#[test]
fn projections_that_do_not_chain_are_refused_naming_the_tensor() {
    // (tensor base, its dims as stored, the error's words)
    let cases = [
        // ffn_down the other way round: 512 outputs of 256 inputs.
        (
            "ffn_down",
            vec![256, 512],
            "has 512 outputs where blk.0.attn_q.weight takes 256",
        ),
        (
            "ffn_gate",
            vec![256, 384],
            "has 384 outputs where blk.0.ffn_up.weight gives 512",
        ),
        (
            "attn_output",
            vec![128, 256],
            "has 128 inputs where blk.0.attn_q.weight gives 256",
        ),
        (
            "attn_k",
            vec![128, 128],
            "has 128 inputs where blk.0.attn_q.weight takes 256",
        ),
    ];
    for (base, dims, words) in cases {
        let mut file = tiny_llama(2, |_, _| F32);
        for tensor in &mut file.tensors {
            if tensor.0.ends_with(&format!(".{base}.weight")) {
                tensor.1.clone_from(&dims);
            }
        }
        let err = file.error().to_string();
        assert!(
            err.contains(&format!("blk.0.{base}.weight")) && err.contains(words),
            "{base}: {err}"
        );
    }
}

/// Writes `bytes` to a file in a new directory.
fn on_disk(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.gguf");
    std::fs::write(&path, bytes).unwrap();
    (dir, path)
}

#[test]
fn a_file_on_disk_reads_and_every_error_names_it() {
    let file = tiny_llama(2, |_, _| Q8_0);
    let (_dir, path) = on_disk(&file.bytes());
    let w = Workload::from_gguf(&path).unwrap();
    assert_eq!(w, file.workload().unwrap());

    let good = file.bytes();
    let mut duplicated = tiny_llama(2, |_, _| Q8_0);
    duplicated.tensors.push(duplicated.tensors[3].clone());
    let mut missing = tiny_llama(2, |_, _| Q8_0);
    missing.remove("blk.1.attn_v.weight");
    let mut huge_count = good.clone();
    huge_count[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    let mut bad_version = good.clone();
    bad_version[4..8].copy_from_slice(&7u32.to_le_bytes());
    let mut bad_magic = good.clone();
    bad_magic[..4].copy_from_slice(b"GGML");
    let cases: [(Vec<u8>, &str); 6] = [
        (good[..good.len() - 5].to_vec(), "the file ends in"),
        (bad_magic, "not a gguf file"),
        (bad_version, "unsupported gguf version 7"),
        (
            huge_count,
            "the tensor count at byte 8 is 18446744073709551615, above the limit",
        ),
        (duplicated.bytes(), "is given twice"),
        (missing.bytes(), "tensor \"blk.1.attn_v.weight\" is missing"),
    ];
    for (bytes, message) in cases {
        let (_dir, path) = on_disk(&bytes);
        let err = Workload::from_gguf(&path).unwrap_err();
        assert!(
            matches!(&err, WorkloadError::InFile { path: p, .. } if *p == path),
            "{err}"
        );
        let text = err.to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains(message), "{text}");
    }
}

/// A file written by gguf-py (the `gguf` package of PyPI), not by the writer above:
/// `tests/fixtures/make_gguf_fixture.py` made it.
#[test]
fn a_llama_file_written_by_gguf_py_gives_its_workload() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf-py-llama-2-layers.gguf");
    let w = Workload::from_gguf(&path).unwrap();
    assert_eq!(w.name, "gguf-py tiny llama (llama)");
    assert_eq!(w.layers, 2);
    use WeightFormat::{F32 as F, Q8_0 as Q8};
    let rows: Vec<_> = w
        .projections
        .iter()
        .map(|p| (p.name.as_str(), p.n_out, p.n_in, p.formats.clone()))
        .collect();
    // attn_v is f32 in layer 0 and q8_0 in layer 1, and the workload says so.
    assert_eq!(
        rows,
        [
            ("attn_q", 32, 32, vec![Q8, Q8]),
            ("attn_k", 16, 32, vec![Q8, Q8]),
            ("attn_v", 16, 32, vec![F, Q8]),
            ("attn_output", 32, 32, vec![Q8, Q8]),
            ("ffn_gate", 64, 32, vec![Q8, Q8]),
            ("ffn_up", 64, 32, vec![Q8, Q8]),
            ("ffn_down", 32, 64, vec![Q8, Q8]),
        ]
    );
}

#[test]
fn an_architecture_with_terminal_escapes_is_shown_escaped_in_errors() {
    let mut file = tiny_llama(1, |_, _| Q4_K);
    file.arch = "llama\n\x1b[31mFAKE: all good\x1b[0m\r";
    file.block_count = None;
    let message = file.error().to_string();
    assert!(!message.chars().any(char::is_control), "{message:?}");
    assert!(
        message.contains("llama\\n\\u{1b}[31mFAKE: all good\\u{1b}[0m\\r.block_count"),
        "{message}"
    );
}
