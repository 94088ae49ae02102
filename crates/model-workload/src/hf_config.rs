//! A workload from a Hugging Face `config.json` ([`Workload::from_hf_config`]).
//!
//! The fields read are those of [`ModelDims`]: `hidden_size`, `intermediate_size`,
//! `num_attention_heads`, `num_key_value_heads` (absent or `null`: as many as the attention
//! heads, as transformers assumes), `head_dim` (absent or `null`: `hidden_size /
//! num_attention_heads`, which must then divide) and `num_hidden_layers`. A multimodal
//! config whose top level lacks `hidden_size` is read from its `text_config` object (the
//! language model's; Gemma 3, LLaVA). The name is `_name_or_path`, else `model_type`.
//!
//! The file is at most [`MAX_CONFIG_BYTES`], checked before it is read. A missing field,
//! one that is not a whole number, an absurd value ([`ModelDims::check`]) or a
//! mixture-of-experts config (`num_local_experts`, `num_experts` or `n_routed_experts` above
//! 1: a token runs only some experts, which these seven projections do not describe) is a
//! [`WorkloadError::ModelConfigField`] naming the field.

use crate::dims::ModelDims;
use crate::error::WorkloadError;
use crate::limits::{MAX_CONFIG_BYTES, MAX_DIMENSION, MAX_NAME_CHARS};
use crate::weights::Weights;
use crate::workload::Workload;
use serde_json::{Map, Value};
use std::path::Path;

/// The fields that count a mixture-of-experts model's experts.
const EXPERT_FIELDS: [&str; 3] = ["num_local_experts", "num_experts", "n_routed_experts"];

/// What is wrong with a config, before the path is known.
#[derive(Debug, PartialEq, Eq)]
enum Problem {
    /// The file as a whole.
    File(String),
    /// One field.
    Field { field: String, reason: String },
}

impl Workload {
    /// The workload of the Hugging Face `config.json` at `path` in `weights`, named
    /// `<_name_or_path or model_type> <weights>` (see the module docs for the fields read and
    /// the bounds).
    pub fn from_hf_config(path: &Path, weights: Weights) -> Result<Workload, WorkloadError> {
        let to_error = |problem| match problem {
            Problem::File(message) => WorkloadError::ModelConfig {
                path: path.to_path_buf(),
                message,
            },
            Problem::Field { field, reason } => WorkloadError::ModelConfigField {
                path: path.to_path_buf(),
                field,
                reason,
            },
        };
        let bytes = read_bounded(path).map_err(to_error)?;
        let (name, dims) = parse(&bytes).map_err(to_error)?;
        Ok(dims.workload(format!("{name} {weights}"), weights))
    }
}

/// The file's bytes, refused when it is not a regular file or larger than
/// [`MAX_CONFIG_BYTES`]. It is opened without blocking, so that a FIFO is an error, not a
/// hang.
fn read_bounded(path: &Path) -> Result<Vec<u8>, Problem> {
    regular_file::read(path, MAX_CONFIG_BYTES).map_err(|e| {
        Problem::File(match e {
            regular_file::Error::NotAFile(_) | regular_file::Error::SymbolicLink(_) => {
                "is not a regular file".to_string()
            }
            regular_file::Error::TooLarge { bytes, .. } => {
                format!("is {bytes} bytes, above the limit of {MAX_CONFIG_BYTES} for a config.json")
            }
            regular_file::Error::NotFound(_) => "cannot read it: no such file".to_string(),
            regular_file::Error::Io { source, .. } => format!("cannot read it: {source}"),
            other => format!("cannot read it: {other}"),
        })
    })
}

/// The config's name and dimensions.
fn parse(bytes: &[u8]) -> Result<(String, ModelDims), Problem> {
    // A byte-order mark, as some editors on Windows write, is not part of the JSON.
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let value = crate::from_slice_unique_keys(bytes)
        .map_err(|e| Problem::File(format!("is not valid JSON: {e}")))?;
    let Value::Object(top) = value else {
        return Err(Problem::File(format!(
            "is {}, not a JSON object",
            kind(&value)
        )));
    };
    let fields = match top.get("text_config") {
        // A `null` hidden_size is as good as none.
        Some(Value::Object(text)) if top.get("hidden_size").is_none_or(Value::is_null) => Fields {
            object: text,
            prefix: "text_config.",
        },
        _ => Fields {
            object: &top,
            prefix: "",
        },
    };
    // The experts' count at either level: the model's own fields, or the top beside them.
    let top_fields = Fields {
        object: &top,
        prefix: "",
    };
    for (fields, expert_field) in [&fields, &top_fields]
        .into_iter()
        .flat_map(|f| EXPERT_FIELDS.iter().map(move |e| (f, *e)))
    {
        if let Some(experts) = fields.optional(expert_field)?
            && experts > 1
        {
            return Err(fields.problem(
                expert_field,
                format!(
                    "is {experts}: mixture-of-experts models are not supported (a token runs \
                     only some experts' feed-forward)"
                ),
            ));
        }
    }
    let hidden_size = fields.required("hidden_size")?;
    let num_attention_heads = fields.required("num_attention_heads")?;
    // Each within its bounds first, so that the fallback's division below never blames the
    // heads for an absurd hidden size.
    for (field, value) in [
        ("hidden_size", hidden_size),
        ("num_attention_heads", num_attention_heads),
    ] {
        if !(1..=MAX_DIMENSION).contains(&value) {
            return Err(fields.problem(
                field,
                format!("is {value}, not between 1 and {MAX_DIMENSION}"),
            ));
        }
    }
    let head_dim = match fields.optional("head_dim")? {
        Some(head_dim) => head_dim,
        None if !hidden_size.is_multiple_of(num_attention_heads) => {
            return Err(fields.problem(
                "num_attention_heads",
                format!(
                    "is {num_attention_heads}, which does not divide hidden_size \
                     {hidden_size}, and there is no head_dim"
                ),
            ));
        }
        // The head count is at least 1 (checked above).
        None => hidden_size / num_attention_heads,
    };
    let dims = ModelDims {
        hidden_size,
        intermediate_size: fields.required("intermediate_size")?,
        num_attention_heads,
        num_key_value_heads: fields
            .optional("num_key_value_heads")?
            .unwrap_or(num_attention_heads),
        head_dim,
        num_hidden_layers: fields.required("num_hidden_layers")?,
        // Phi-3's checkpoints fuse q, k and v (`qkv_proj`), as llama.cpp's converter keeps.
        fused_qkv: top.get("model_type").and_then(Value::as_str) == Some("phi3"),
    };
    dims.check()
        .map_err(|e| fields.problem(e.field, e.reason))?;
    Ok((name_of(&top), dims))
}

/// The fields of the object the dimensions are read from (the top level or its
/// `text_config`).
struct Fields<'a> {
    object: &'a Map<String, Value>,
    /// What names the object in errors: empty, or `text_config.`.
    prefix: &'static str,
}

impl Fields<'_> {
    fn problem(&self, field: &str, reason: String) -> Problem {
        Problem::Field {
            field: format!("{}{field}", self.prefix),
            reason,
        }
    }

    /// A field that must be there.
    fn required(&self, field: &str) -> Result<usize, Problem> {
        self.optional(field)?
            .ok_or_else(|| self.problem(field, "is missing".to_string()))
    }

    /// A whole number, or `None` when absent or `null`.
    fn optional(&self, field: &str) -> Result<Option<usize>, Problem> {
        match self.object.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => match value.as_u64().map(usize::try_from) {
                Some(Ok(n)) => Ok(Some(n)),
                _ => Err(self.problem(field, not_whole(value))),
            },
        }
    }
}

/// The workload's name: `_name_or_path`, else `model_type`, else `config.json`; control
/// characters dropped and at most [`MAX_NAME_CHARS`] characters.
fn name_of(top: &Map<String, Value>) -> String {
    let name = ["_name_or_path", "model_type"]
        .into_iter()
        .filter_map(|key| top.get(key)?.as_str())
        .map(str::trim)
        .find(|name| !name.is_empty())
        .unwrap_or("config.json");
    name.chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME_CHARS)
        .collect()
}

/// What kind of JSON value `value` is, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `value` as JSON through [`crate::shown::shown`] (a string value may be long).
/// Why `value` is not a whole number. A float with no fraction (`896.0`) is one written with
/// a point, which transformers would read as a float too: the message says how to write it.
fn not_whole(value: &Value) -> String {
    match value.as_f64() {
        Some(f) if f.fract() == 0.0 && f.is_sign_positive() && f < 1e15 => {
            format!(
                "is {}, written with a point: write it as {f:.0}",
                shown(value)
            )
        }
        _ => format!("is {}, not a whole number", shown(value)),
    }
}

fn shown(value: &Value) -> String {
    crate::shown::shown(&value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use matmul_kernel::WeightFormat;

    /// Qwen2.5-0.5B's config.json (as published, shortened): hidden 896, which is not whole
    /// blocks of 256.
    const QWEN2_5_0_5B: &str = r#"{
      "_name_or_path": "Qwen/Qwen2.5-0.5B",
      "architectures": ["Qwen2ForCausalLM"],
      "hidden_act": "silu",
      "hidden_size": 896,
      "intermediate_size": 4864,
      "max_position_embeddings": 32768,
      "model_type": "qwen2",
      "num_attention_heads": 14,
      "num_hidden_layers": 24,
      "num_key_value_heads": 2,
      "rope_theta": 1000000.0,
      "sliding_window": null,
      "tie_word_embeddings": true,
      "torch_dtype": "bfloat16"
    }"#;

    fn parsed(json: &str) -> Result<(String, ModelDims), Problem> {
        parse(json.as_bytes())
    }

    /// `QWEN2_5_0_5B` with `field` set to `value` (raw JSON) or removed (`None`).
    fn with(field: &str, value: Option<&str>) -> String {
        let mut object: Map<String, Value> = serde_json::from_str(QWEN2_5_0_5B).unwrap();
        match value {
            Some(v) => object.insert(field.to_string(), serde_json::from_str(v).unwrap()),
            None => object.remove(field),
        };
        Value::Object(object).to_string()
    }

    fn field_problem(json: &str) -> (String, String) {
        match parsed(json).unwrap_err() {
            Problem::Field { field, reason } => (field, reason),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_phi_3_config_fuses_q_k_and_v_as_llama_cpp_quantizes_them() {
        // microsoft/Phi-3-mini-4k-instruct's config.json, the fields read.
        let phi3 = r#"{
          "_name_or_path": "Phi-3-mini-4k-instruct",
          "architectures": ["Phi3ForCausalLM"],
          "hidden_size": 3072,
          "intermediate_size": 8192,
          "model_type": "phi3",
          "num_attention_heads": 32,
          "num_hidden_layers": 32,
          "num_key_value_heads": 32
        }"#;
        let (name, dims) = parsed(phi3).unwrap();
        assert!(dims.fused_qkv);
        assert!(!parsed(QWEN2_5_0_5B).unwrap().1.fused_qkv);
        // A byte-order mark before the JSON reads as the same config.
        let with_bom = format!("\u{feff}{QWEN2_5_0_5B}");
        assert_eq!(
            parsed(&with_bom).unwrap().1,
            parsed(QWEN2_5_0_5B).unwrap().1
        );
        // A field given twice is refused, not read as its last value.
        let twice = QWEN2_5_0_5B.replacen('{', r#"{"hidden_size": 0,"#, 1);
        let err = format!("{:?}", parsed(&twice).unwrap_err());
        assert!(err.contains(r#"duplicate key \"hidden_size\""#), "{err}");
        let w = dims.workload(name, Weights::Q4KM);
        for p in &w.projections[..3] {
            assert!(
                p.formats.iter().all(|&f| f == WeightFormat::Q6K),
                "{}",
                p.name
            );
        }
    }

    #[test]
    fn a_published_config_gives_its_shapes_with_llama_cpp_fallbacks() {
        let (name, dims) = parsed(QWEN2_5_0_5B).unwrap();
        assert_eq!(name, "Qwen/Qwen2.5-0.5B");
        assert_eq!(
            dims,
            ModelDims {
                hidden_size: 896,
                intermediate_size: 4864,
                num_attention_heads: 14,
                num_key_value_heads: 2,
                head_dim: 64,
                num_hidden_layers: 24,
                fused_qkv: false,
            }
        );
        let w = dims.workload(name, Weights::Q4KM);
        let table: Vec<_> = w
            .projections
            .iter()
            .map(|p| (p.name.as_str(), p.n_out, p.n_in, p.formats[0]))
            .collect();
        use WeightFormat::{Q6K, Q8_0};
        // Rows of 896 are not whole k-quant blocks: q8_0, as llama.cpp falls back; down's
        // rows of 4864 = 19 · 256 keep q6_K.
        assert_eq!(
            table,
            [
                ("q", 896, 896, Q8_0),
                ("k", 128, 896, Q8_0),
                ("v", 128, 896, Q8_0),
                ("o", 896, 896, Q8_0),
                ("gate", 4864, 896, Q8_0),
                ("up", 4864, 896, Q8_0),
                ("down", 896, 4864, Q6K),
            ]
        );
    }

    #[test]
    fn head_dim_and_kv_heads_follow_transformers_defaults() {
        // No num_key_value_heads (or null): as many as the attention heads.
        for json in [
            with("num_key_value_heads", None),
            with("num_key_value_heads", Some("null")),
        ] {
            assert_eq!(parsed(&json).unwrap().1.num_key_value_heads, 14);
        }
        // An explicit head_dim wins over hidden / heads (Gemma 2: 256 × 16 ≠ 3584).
        let gemma = r#"{"model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336,
            "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
            "num_hidden_layers": 42}"#;
        let (name, dims) = parsed(gemma).unwrap();
        assert_eq!(name, "gemma2");
        assert_eq!(dims.shape(super::super::Role::Q), (4096, 3584));
        // Without head_dim, the heads must divide the hidden size.
        let json = with("num_attention_heads", Some("15"));
        let (field, reason) = field_problem(&json);
        assert_eq!(field, "num_attention_heads");
        assert!(
            reason.contains("does not divide hidden_size 896"),
            "{reason}"
        );
        // With it, they need not.
        let json = with("head_dim", Some("60"));
        let json = {
            let mut o: Map<String, Value> = serde_json::from_str(&json).unwrap();
            o.insert("num_attention_heads".into(), 15.into());
            o.insert("num_key_value_heads".into(), 5.into());
            Value::Object(o).to_string()
        };
        assert_eq!(
            parsed(&json).unwrap().1.shape(super::super::Role::Q),
            (900, 896)
        );
    }

    #[test]
    fn a_multimodal_config_is_read_from_its_text_config() {
        let json = format!(
            r#"{{"model_type": "gemma3", "vision_config": {{"hidden_size": 1152}},
                "text_config": {QWEN2_5_0_5B}}}"#
        );
        let (name, dims) = parsed(&json).unwrap();
        assert_eq!(name, "gemma3");
        assert_eq!(dims.hidden_size, 896);
        let json = format!(r#"{{"text_config": {}}}"#, with("num_hidden_layers", None));
        let (field, reason) = field_problem(&json);
        assert_eq!(
            (field.as_str(), reason.as_str()),
            ("text_config.num_hidden_layers", "is missing")
        );
    }

    #[test]
    fn missing_fields_are_named() {
        for field in [
            "hidden_size",
            "intermediate_size",
            "num_attention_heads",
            "num_hidden_layers",
        ] {
            assert_eq!(
                field_problem(&with(field, None)),
                (field.to_string(), "is missing".to_string())
            );
        }
    }

    #[test]
    fn values_that_are_not_whole_numbers_are_named() {
        for (field, value, shown) in [
            ("hidden_size", "\"896\"", "\"896\""),
            ("num_hidden_layers", "-24", "-24"),
            ("intermediate_size", "[4864]", "[4864]"),
            ("head_dim", "true", "true"),
            (
                "num_key_value_heads",
                "18446744073709551616",
                "1.8446744073709552e+19",
            ),
        ] {
            let (f, reason) = field_problem(&with(field, Some(value)));
            assert_eq!(f, field);
            assert_eq!(reason, format!("is {shown}, not a whole number"));
        }
        // A whole number written with a point is named, with the way to write it.
        let (f, reason) = field_problem(&with("hidden_size", Some("896.0")));
        assert_eq!(f, "hidden_size");
        assert_eq!(reason, "is 896.0, written with a point: write it as 896");
        let (_, reason) = field_problem(&with("hidden_size", Some("896.5")));
        assert_eq!(reason, "is 896.5, not a whole number");
        // A long string is cut in the message.
        let long = format!("\"{}\"", "x".repeat(5000));
        let (_, reason) = field_problem(&with("hidden_size", Some(&long)));
        assert!(reason.len() < 160, "{reason}");
        assert!(reason.contains("(5002 bytes)"), "{reason}");
    }

    #[test]
    fn absurd_values_are_named() {
        for (field, value, reason) in [
            ("hidden_size", "0", "is 0, not between 1 and 1048576"),
            (
                "intermediate_size",
                "4294967296",
                "is 4294967296, not between",
            ),
            (
                "num_hidden_layers",
                "100000",
                "is 100000, not between 1 and 1024",
            ),
            ("num_hidden_layers", "0", "is 0"),
            (
                "num_key_value_heads",
                "3",
                "does not divide the 14 attention heads",
            ),
            ("num_key_value_heads", "0", "is 0"),
            ("num_attention_heads", "0", "is 0"),
            ("head_dim", "1048576", "above 1048576"),
        ] {
            let (f, r) = field_problem(&with(field, Some(value)));
            assert_eq!(f, field, "{field}={value}: {r}");
            assert!(r.contains(reason), "{field}={value}: {r}");
        }
    }

    #[test]
    fn an_absurd_hidden_size_is_blamed_on_hidden_size_not_the_heads() {
        // 2^64 - 1 is odd: the heads do not divide it, but the hidden size is at fault.
        let (field, reason) = field_problem(&with("hidden_size", Some("18446744073709551615")));
        assert_eq!(field, "hidden_size", "{reason}");
        assert!(reason.contains("not between 1 and 1048576"), "{reason}");
        let (field, _) = field_problem(&with("num_attention_heads", Some("0")));
        assert_eq!(field, "num_attention_heads");
    }

    #[test]
    fn a_null_hidden_size_at_the_top_reads_the_text_config() {
        let json = format!(
            r#"{{"model_type": "llava", "hidden_size": null, "text_config": {QWEN2_5_0_5B}}}"#
        );
        let (_, dims) = parsed(&json).unwrap();
        assert_eq!(dims.hidden_size, 896);
    }

    #[test]
    fn mixture_of_experts_configs_are_refused() {
        let (field, reason) = field_problem(&with("num_local_experts", Some("8")));
        assert_eq!(field, "num_local_experts");
        assert!(reason.contains("mixture-of-experts"), "{reason}");
        // One expert (or none) is a dense model.
        assert!(parsed(&with("num_experts", Some("1"))).is_ok());
        // Beside a text_config that holds the model's dimensions, at the top: refused too.
        let top = r#"{"num_local_experts": 8, "text_config": {"hidden_size": 64,
            "intermediate_size": 128, "num_attention_heads": 4, "num_hidden_layers": 2,
            "vocab_size": 100}}"#;
        let (field, reason) = field_problem(top);
        assert_eq!(field, "num_local_experts");
        assert!(reason.contains("mixture-of-experts"), "{reason}");
    }

    #[test]
    fn names_fall_back_and_are_cleaned() {
        let (name, _) = parsed(&with("_name_or_path", Some("\"\""))).unwrap();
        assert_eq!(name, "qwen2");
        let json = with("_name_or_path", None);
        let json = {
            let mut o: Map<String, Value> = serde_json::from_str(&json).unwrap();
            o.remove("model_type");
            Value::Object(o).to_string()
        };
        assert_eq!(parsed(&json).unwrap().0, "config.json");
        let long = format!("\"a\\u0007{}\"", "b".repeat(500));
        let (name, _) = parsed(&with("_name_or_path", Some(&long))).unwrap();
        assert_eq!(name.chars().count(), MAX_NAME_CHARS);
        assert!(name.starts_with("abbb"), "{name}");
    }

    #[test]
    fn a_file_that_is_not_a_json_object_is_refused() {
        for (json, message) in [
            ("", "is not valid JSON"),
            ("{\"hidden_size\": 896", "is not valid JSON"),
            ("[1, 2]", "is an array, not a JSON object"),
            ("null", "is null, not a JSON object"),
        ] {
            match parsed(json).unwrap_err() {
                Problem::File(m) => assert!(m.starts_with(message), "{m}"),
                other => panic!("{other:?}"),
            }
        }
        // Deep nesting is refused by serde_json's recursion limit, not by a stack overflow.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(parsed(&deep), Err(Problem::File(_))));
    }

    #[test]
    fn files_are_read_within_bounds_and_errors_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, QWEN2_5_0_5B).unwrap();
        let w = Workload::from_hf_config(&path, Weights::Uniform(WeightFormat::F32)).unwrap();
        assert_eq!(w.name, "Qwen/Qwen2.5-0.5B f32");
        assert_eq!(w.layers, 24);
        assert!(
            w.projections
                .iter()
                .all(|p| p.formats.iter().all(|&f| f == WeightFormat::F32))
        );

        std::fs::write(&path, with("hidden_size", None)).unwrap();
        let err = Workload::from_hf_config(&path, Weights::default()).unwrap_err();
        assert!(
            matches!(&err, WorkloadError::ModelConfigField { field, .. } if field == "hidden_size"),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "model config {}: field `hidden_size` is missing",
                path.display()
            )
        );

        // Too large: refused from its size, before it is read.
        let big = dir.path().join("big.json");
        let file = std::fs::File::create(&big).unwrap();
        file.set_len(MAX_CONFIG_BYTES + 1).unwrap();
        let err = Workload::from_hf_config(&big, Weights::default()).unwrap_err();
        assert!(
            err.to_string()
                .contains("is 1048577 bytes, above the limit"),
            "{err}"
        );

        let err = Workload::from_hf_config(&dir.path().join("absent.json"), Weights::default())
            .unwrap_err();
        assert!(
            matches!(&err, WorkloadError::ModelConfig { message, .. } if message.starts_with("cannot read it")),
            "{err}"
        );
        let err = Workload::from_hf_config(dir.path(), Weights::default()).unwrap_err();
        assert!(err.to_string().ends_with("is not a regular file"), "{err}");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("config.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // Opened without blocking, the FIFO (with no writer) is seen and refused at once.
        let err = Workload::from_hf_config(&fifo, Weights::default()).unwrap_err();
        assert!(err.to_string().ends_with("is not a regular file"), "{err}");
    }
}
