//! Tests of `output.rs`: llama.cpp 0c1e57098's real output, each field missing, mistyped or
//! out of bounds, and a test checked against its run.

use super::*;

/// `llama-bench -m tiny-q4km.gguf -o json -r 3 -p 0 -n 8 -t 1` of llama.cpp 0c1e57098 on
/// the tests' tiny model.
const DECODE: &str = include_str!("../../tests/fixtures/llama-bench-0c1e57098-tg8.json");

/// `llama-bench -m tiny-q4km.gguf -o json -r 2 -p 64 -n 0 -t 2 -C 0x3 --cpu-strict 1 --poll 0
/// --repack 0` of the same build.
const PREFILL: &str = include_str!("../../tests/fixtures/llama-bench-0c1e57098-pp64-pinned.json");

const CMD: &str = "llama-bench -m m.gguf";

/// The one test of `text` as a JSON object, for editing.
fn object(text: &str) -> Map<String, Value> {
    let Value::Array(mut tests) = serde_json::from_str(text).unwrap() else {
        panic!("not an array")
    };
    let Value::Object(fields) = tests.remove(0) else {
        panic!("not an object")
    };
    fields
}

fn parse_object(fields: Map<String, Value>) -> Result<Vec<BenchResult>, Error> {
    let text = serde_json::to_vec(&Value::Array(vec![Value::Object(fields)])).unwrap();
    parse_json(CMD, &text)
}

fn bad_field(err: Error) -> (&'static str, String) {
    let message = err.to_string();
    assert!(message.starts_with(&format!("`{CMD}`")), "{message}");
    match err {
        Error::BadField {
            field, index: 0, ..
        } => (field, message),
        other => panic!("not a bad field: {other}"),
    }
}

#[test]
fn the_real_decode_output_reads_into_its_fields() {
    let tests = parse_json(CMD, DECODE.as_bytes()).unwrap();
    assert_eq!(tests.len(), 1);
    let t = &tests[0];
    assert_eq!(t.build_commit, "0c1e57098");
    assert_eq!(t.build_number, 0);
    assert_eq!(t.backends, "CPU");
    assert_eq!(t.gpu_info, "");
    assert_eq!(t.model_type, "llama ?B Q4_K - Medium");
    assert_eq!((t.model_size, t.model_n_params), (1277056, 2131712));
    assert_eq!((t.n_threads, t.n_prompt, t.n_gen), (1, 0, 8));
    assert_eq!(t.cpu_mask, None);
    assert!(!t.cpu_strict);
    assert_eq!(t.poll, 50);
    assert_eq!(t.repack, Some(true));
    assert_eq!(t.samples_ts, [9512.08, 2559.59, 10949.9]);
    assert_eq!(t.avg_ts, 7673.853361);
    assert_eq!(t.stddev_ns, 1351942);
    assert!(t.avg_ns > 0 && t.stddev_ts > 0.0);
}

#[test]
fn the_real_pinned_prefill_output_reads_its_mask_and_knobs() {
    let t = parse_json(CMD, PREFILL.as_bytes()).unwrap().remove(0);
    assert_eq!((t.n_threads, t.n_prompt, t.n_gen), (2, 64, 0));
    assert_eq!(t.cpu_mask.as_ref().map(CpuMask::cpus), Some(vec![0, 1]));
    assert!(t.cpu_strict);
    assert_eq!(t.poll, 0);
    assert_eq!(t.repack, Some(false));
    let run = Run {
        cpu_mask: Some(CpuMask::from_cpus([0, 1]).unwrap()),
        cpu_strict: Some(true),
        poll: Some(0),
        repack: Some(false),
        repetitions: 2,
        ..Run::prefill(2, 64)
    };
    assert_eq!(check_against(CMD, &run, vec![t.clone()]).unwrap(), t);
}

#[test]
fn every_read_field_that_is_missing_is_named() {
    for field in [
        "build_commit",
        "build_number",
        "cpu_info",
        "gpu_info",
        "backends",
        "model_type",
        "model_size",
        "model_n_params",
        "n_threads",
        "cpu_mask",
        "cpu_strict",
        "poll",
        "n_prompt",
        "n_gen",
        "avg_ns",
        "stddev_ns",
        "avg_ts",
        "stddev_ts",
        "samples_ts",
    ] {
        let mut fields = object(DECODE);
        fields.remove(field);
        let (named, message) = bad_field(parse_object(fields).unwrap_err());
        assert_eq!(named, field);
        assert!(
            message.contains(&format!("field {field} is missing")),
            "{message}"
        );
    }
}

#[test]
fn a_build_without_repack_reads_as_unknown() {
    let mut fields = object(DECODE);
    fields.remove("repack");
    assert_eq!(parse_object(fields).unwrap()[0].repack, None);
}

#[test]
fn a_field_of_the_wrong_type_is_named() {
    let cases: [(&str, Value); 10] = [
        ("build_commit", Value::from(1)),
        // Optional, but of its type when present: a string skipped the check against it.
        ("samples_ns", Value::from("1")),
        ("n_threads", Value::from("1")),
        ("n_threads", Value::from(-1)),
        ("model_size", Value::from(1.5)),
        ("cpu_strict", Value::from(0)),
        ("avg_ts", Value::Null),
        ("avg_ts", Value::from("7673.8")),
        ("samples_ts", Value::from(1.0)),
        ("samples_ts", Value::from(vec!["1"])),
    ];
    for (field, value) in cases {
        let mut fields = object(DECODE);
        fields.insert(field.into(), value.clone());
        let (named, message) = bad_field(parse_object(fields).unwrap_err());
        assert_eq!(named, field, "{message}");
        assert!(message.contains("is a JSON"), "{message}");
    }
}

#[test]
fn rates_that_are_not_positive_or_are_absurd_are_refused() {
    for rate in [-5.0, 0.0, 1e12, MAX_TOKENS_PER_SECOND * 1.01] {
        let mut fields = object(DECODE);
        fields.insert("avg_ts".into(), Value::from(rate));
        fields.insert("samples_ts".into(), Value::from(vec![rate]));
        let (field, message) = bad_field(parse_object(fields).unwrap_err());
        assert_eq!(field, "avg_ts", "{message}");
        assert!(message.contains("is not a rate"), "{message}");
    }
    let mut fields = object(DECODE);
    fields.insert(
        "samples_ts".into(),
        Value::from(vec![9512.08, -1.0, 10949.9]),
    );
    assert_eq!(bad_field(parse_object(fields).unwrap_err()).0, "samples_ts");
    let mut fields = object(DECODE);
    fields.insert("samples_ts".into(), Value::from(Vec::<f64>::new()));
    assert_eq!(bad_field(parse_object(fields).unwrap_err()).0, "samples_ts");
    let mut fields = object(DECODE);
    fields.insert("stddev_ts".into(), Value::from(-0.5));
    assert_eq!(bad_field(parse_object(fields).unwrap_err()).0, "stddev_ts");
    let mut fields = object(DECODE);
    fields.insert("avg_ns".into(), Value::from(0));
    assert_eq!(bad_field(parse_object(fields).unwrap_err()).0, "avg_ns");
}

#[test]
fn an_average_that_is_not_the_mean_of_the_samples_is_refused() {
    let mut fields = object(DECODE);
    fields.insert("avg_ts".into(), Value::from(9000.0));
    let (field, message) = bad_field(parse_object(fields).unwrap_err());
    assert_eq!(field, "avg_ts");
    assert!(message.contains("is not the mean"), "{message}");
}

#[test]
fn rates_that_the_times_beside_them_deny_are_refused() {
    // A rate of 1e-300 in every sample, beside the real times: below tokens ÷ avg_ns.
    let mut fields = object(DECODE);
    let n = fields["samples_ts"].as_array().unwrap().len();
    fields.insert("samples_ts".into(), Value::from(vec![1e-300; n]));
    fields.insert("avg_ts".into(), Value::from(1e-300));
    let (field, message) = bad_field(parse_object(fields).unwrap_err());
    assert_eq!(field, "avg_ts");
    assert!(
        message.contains("is below the tokens ÷ avg_ns"),
        "{message}"
    );
    // Rates scaled up together, average and samples: each sample disagrees with its time.
    let mut fields = object(DECODE);
    let scaled: Vec<f64> = fields["samples_ts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() * 10.0)
        .collect();
    let mean = scaled.iter().sum::<f64>() / scaled.len() as f64;
    fields.insert("samples_ts".into(), Value::from(scaled));
    fields.insert("avg_ts".into(), Value::from(mean));
    let (field, message) = bad_field(parse_object(fields).unwrap_err());
    assert_eq!(field, "samples_ts");
    assert!(message.contains("repetition by repetition"), "{message}");
}

#[test]
fn out_of_range_counts_and_masks_are_refused() {
    let cases: [(&str, Value); 7] = [
        ("n_threads", Value::from(0)),
        ("n_threads", Value::from(crate::MAX_THREADS + 1)),
        ("poll", Value::from(101)),
        ("n_gen", Value::from(u64::from(crate::MAX_TOKENS) + 1)),
        ("cpu_mask", Value::from("0xzz")),
        // One `0x` prefix: a second made the mask read as none.
        ("cpu_mask", Value::from("0x0x0")),
        ("build_commit", Value::from("x".repeat(MAX_TEXT_CHARS + 1))),
    ];
    for (field, value) in cases {
        let mut fields = object(DECODE);
        fields.insert(field.into(), value);
        assert_eq!(bad_field(parse_object(fields).unwrap_err()).0, field);
    }
    let mut fields = object(DECODE);
    fields.insert("n_gen".into(), Value::from(0));
    assert_eq!(bad_field(parse_object(fields).unwrap_err()).0, "n_gen");
}

#[test]
fn output_that_is_not_a_json_array_of_objects_is_not_json() {
    let nan = DECODE.replace("7673.853361", "nan");
    let inf = DECODE.replace("7673.853361", "-inf");
    let cases = [
        "",
        "[\n",
        "| model | size |",
        "{}",
        "[1]",
        "[[]]",
        nan.as_str(),
        inf.as_str(),
    ];
    for text in cases {
        match parse_json(CMD, text.as_bytes()) {
            Err(e @ Error::NotJson { .. }) => {
                assert!(
                    e.to_string()
                        .starts_with(&format!("`{CMD}` printed no JSON")),
                    "{e}"
                )
            }
            other => panic!("{text:?} gave {other:?}"),
        }
    }
    assert_eq!(parse_json(CMD, b"[]").unwrap(), []);
    let invalid_utf8 = b"[\xff]";
    assert!(matches!(
        parse_json(CMD, invalid_utf8),
        Err(Error::NotJson { .. })
    ));
}

#[test]
fn a_test_that_is_not_the_run_is_a_mismatch() {
    let test = parse_json(CMD, DECODE.as_bytes()).unwrap().remove(0);
    let run = Run {
        repetitions: 3,
        ..Run::decode(1, 8)
    };
    assert_eq!(check_against(CMD, &run, vec![test.clone()]).unwrap(), test);
    let cases = [
        (
            Run {
                threads: 2,
                ..run.clone()
            },
            "threads 1, the run asked for 2",
        ),
        (
            Run {
                gen_tokens: 16,
                ..run.clone()
            },
            "generated tokens 8, the run asked for 16",
        ),
        (
            Run {
                gen_tokens: 0,
                prompt_tokens: 8,
                ..run.clone()
            },
            "prompt tokens 0, the run asked for 8",
        ),
        (
            Run {
                cpu_mask: Some(CpuMask::from_cpus([0]).unwrap()),
                ..run.clone()
            },
            "cpu mask none, the run asked for 0x1",
        ),
        (
            Run {
                cpu_strict: Some(true),
                ..run.clone()
            },
            "cpu-strict false",
        ),
        (
            Run {
                poll: Some(0),
                ..run.clone()
            },
            "poll 50, the run asked for 0",
        ),
        (
            Run {
                repack: Some(false),
                ..run.clone()
            },
            "repack true, the run asked for false",
        ),
        (
            Run {
                repetitions: 5,
                ..run.clone()
            },
            "3 samples in the test, the run asked for 5",
        ),
    ];
    for (asked, expected) in cases {
        let err = check_against(CMD, &asked, vec![test.clone()]).unwrap_err();
        assert!(matches!(err, Error::Mismatch { .. }), "{err}");
        assert!(err.to_string().contains(expected), "{err} lacks {expected}");
    }
    for tests in [vec![], vec![test.clone(), test]] {
        let n = tests.len();
        let err = check_against(CMD, &run, tests).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("{n} tests in the output")),
            "{err}"
        );
    }
}

#[test]
fn results_round_trip_through_json() {
    let test = parse_json(CMD, PREFILL.as_bytes()).unwrap().remove(0);
    let text = serde_json::to_string(&test).unwrap();
    assert_eq!(serde_json::from_str::<BenchResult>(&text).unwrap(), test);
}
