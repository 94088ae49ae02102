//! Tests of `run.rs`: the arguments of each knob, the refused runs, the CPU mask's hex form.

use super::*;

fn strings(run: &Run, model: &str) -> Vec<String> {
    run.args(Path::new(model))
        .unwrap()
        .into_iter()
        .map(|a| a.into_string().unwrap())
        .collect()
}

#[test]
fn decode_and_prefill_are_one_test_each() {
    assert_eq!(
        strings(&Run::decode(3, 16), "m.gguf"),
        [
            "-m", "m.gguf", "-o", "json", "-r", "5", "-p", "0", "-n", "16", "-t", "3"
        ]
    );
    assert_eq!(
        strings(&Run::prefill(2, 64), "dir/m.gguf"),
        [
            "-m",
            "dir/m.gguf",
            "-o",
            "json",
            "-r",
            "5",
            "-p",
            "64",
            "-n",
            "0",
            "-t",
            "2"
        ]
    );
    assert_eq!(Run::decode(1, 8).phase(), Phase::Decode);
    assert_eq!(Run::prefill(1, 8).phase(), Phase::Prefill);
    assert_eq!(Run::prefill(1, 8).tokens(), 8);
}

#[test]
fn every_knob_becomes_its_flag() {
    let run = Run {
        cpu_mask: Some(CpuMask::from_cpus([1, 3]).unwrap()),
        cpu_strict: Some(true),
        poll: Some(0),
        repack: Some(false),
        repetitions: 2,
        warmup: false,
        ..Run::decode(2, 4)
    };
    assert_eq!(
        strings(&run, "m.gguf"),
        [
            "-m",
            "m.gguf",
            "-o",
            "json",
            "-r",
            "2",
            "-p",
            "0",
            "-n",
            "4",
            "-t",
            "2",
            "-C",
            "0xa",
            "--cpu-strict",
            "1",
            "--poll",
            "0",
            "--repack",
            "0",
            "--no-warmup"
        ]
    );
    let run = Run {
        cpu_strict: Some(false),
        repack: Some(true),
        poll: Some(100),
        ..Run::prefill(1, 32)
    };
    assert!(strings(&run, "m").ends_with(&[
        "--cpu-strict".to_string(),
        "0".into(),
        "--poll".into(),
        "100".into(),
        "--repack".into(),
        "1".into()
    ]));
}

#[test]
fn invalid_runs_are_refused_with_the_value() {
    let cases = [
        (Run::decode(0, 16), "threads 0"),
        (Run::decode(513, 16), "threads 513"),
        (Run::decode(1, 0), "no prompt and no generated tokens"),
        (
            Run {
                gen_tokens: 4,
                ..Run::prefill(1, 8)
            },
            "prompt tokens 8 and generated tokens 4",
        ),
        (Run::prefill(1, MAX_TOKENS + 1), "65537 tokens"),
        (
            Run {
                poll: Some(101),
                ..Run::decode(1, 1)
            },
            "poll 101",
        ),
        (
            Run {
                repetitions: 0,
                ..Run::decode(1, 1)
            },
            "repetitions 0",
        ),
        (
            Run {
                repetitions: MAX_REPETITIONS + 1,
                ..Run::decode(1, 1)
            },
            "repetitions 1001",
        ),
    ];
    for (run, expected) in cases {
        let err = run.args(Path::new("m.gguf")).unwrap_err();
        assert!(matches!(err, Error::InvalidRun { .. }), "{err}");
        assert!(err.to_string().contains(expected), "{err} lacks {expected}");
    }
    assert!(Run::decode(MAX_THREADS, MAX_TOKENS).validate().is_ok());
}

#[test]
fn cpu_masks_are_lowercase_hex_without_leading_zeros() {
    let mask = |cpus: &[u32]| CpuMask::from_cpus(cpus.iter().copied()).unwrap();
    assert_eq!(mask(&[0]).to_string(), "0x1");
    assert_eq!(mask(&[0, 2]).to_string(), "0x5");
    assert_eq!(mask(&[4, 5, 6, 7]).to_string(), "0xf0");
    assert_eq!(mask(&[64]).to_string(), "0x10000000000000000");
    assert_eq!(mask(&[0, 64]).to_string(), "0x10000000000000001");
    assert_eq!(mask(&[511]).cpus(), [511]);
    assert_eq!(mask(&[3, 1, 3]).cpus(), [1, 3]);
    assert!(CpuMask::from_cpus([]).is_err());
    assert!(CpuMask::from_cpus([512]).is_err());
}

#[test]
fn cpu_masks_parse_as_llama_bench_prints_them() {
    for cpus in [vec![0], vec![1, 3], vec![0, 63, 64, 200, 511]] {
        let mask = CpuMask::from_cpus(cpus.clone()).unwrap();
        assert_eq!(CpuMask::parse(&mask.to_string()), Some(mask.clone()));
        assert_eq!(CpuMask::parse(&mask.to_string()).unwrap().cpus(), cpus);
    }
    assert_eq!(CpuMask::parse("0X0A").unwrap().cpus(), [1, 3]);
    assert_eq!(CpuMask::parse("0x0005").unwrap().cpus(), [0, 2]);
    for bad in ["", "0x", "0x0", "0x000", "5", "0xg", "x5", "0x 5", "-0x5"] {
        assert_eq!(CpuMask::parse(bad), None, "{bad:?}");
    }
    let too_wide = format!("0x1{}", "0".repeat(128));
    assert_eq!(CpuMask::parse(&too_wide), None);
}

#[test]
fn runs_round_trip_through_json() {
    let run = Run {
        cpu_mask: Some(CpuMask::from_cpus([0, 1]).unwrap()),
        cpu_strict: Some(true),
        ..Run::prefill(2, 64)
    };
    let text = serde_json::to_string(&run).unwrap();
    assert!(text.contains("\"cpu_mask\":\"0x3\""), "{text}");
    assert_eq!(serde_json::from_str::<Run>(&text).unwrap(), run);
    let bad = text.replace("0x3", "0x0");
    assert!(serde_json::from_str::<Run>(&bad).is_err());
}
