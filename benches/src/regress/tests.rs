//! The floor rule and the floors file, fed with numbers: nothing here is timed.

use super::*;

/// The committed floors file.
fn committed() -> Floors {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("floors.json");
    Floors::load(&path, None, None).unwrap_or_else(|e| panic!("{e}"))
}

fn floors(entries: &[(&str, f64, f64)]) -> Floors {
    Floors {
        path: PathBuf::from("floors.json"),
        by_name: entries
            .iter()
            .map(|(name, floor, margin)| {
                let floor = Floor {
                    floor: *floor,
                    margin: *margin,
                    reason: "test".into(),
                };
                (name.to_string(), floor)
            })
            .collect(),
    }
}

fn measured(name: &str, ratio: f64) -> Measured {
    Measured {
        name: name.into(),
        ratio,
        detail: String::new(),
    }
}

fn verdicts(rows: &[Row]) -> Vec<(&str, Verdict)> {
    rows.iter().map(|r| (r.name.as_str(), r.verdict)).collect()
}

#[test]
fn the_committed_file_has_one_floor_per_check_each_with_its_reason_and_margin() {
    let floors = committed();
    let names: Vec<&str> = floors.by_name.keys().map(String::as_str).collect();
    let mut checks = CHECKS.to_vec();
    checks.sort();
    assert_eq!(names, checks);
    for (name, floor) in &floors.by_name {
        assert!(
            floor.reason.len() > 20,
            "{name}: the reason says too little"
        );
        assert!(floor.margin > 0.0, "{name}: no margin for noise");
        // A ratio at its floor that halves (a 2× regression) must fail the rule.
        assert!(
            floor.floor / 2.0 < floor.limit(),
            "{name}: a 2x regression from the floor would pass"
        );
    }
}

#[test]
fn a_ratio_at_the_limit_passes_and_below_it_fails() {
    let floors = floors(&[("a", 1.0, 0.25), ("b", 2.0, 0.5), ("c", 0.8, 0.0)]);
    let rows = check(
        &[
            measured("a", 0.75),
            measured("b", 0.999),
            measured("c", 0.8),
        ],
        &floors,
    );
    assert_eq!(
        verdicts(&rows),
        [
            ("a", Verdict::Pass),
            ("b", Verdict::Below),
            ("c", Verdict::Pass)
        ]
    );
    assert!(!passed(&rows));
    let rows = check(&[measured("a", 0.7499)], &floors);
    assert_eq!(rows[0].verdict, Verdict::Below);
    let rows = check(
        &[measured("a", 5.0), measured("b", 1.0), measured("c", 0.9)],
        &floors,
    );
    assert!(passed(&rows), "{rows:?}");
}

#[test]
fn a_halved_ratio_fails_where_the_measured_one_passes() {
    let floors = floors(&[("gemv", 0.8, 0.3)]);
    assert!(passed(&check(&[measured("gemv", 0.9)], &floors)));
    assert!(!passed(&check(&[measured("gemv", 0.45)], &floors)));
}

#[test]
fn a_ratio_that_is_not_a_number_fails() {
    let floors = floors(&[("a", 1.0, 0.25)]);
    for ratio in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let rows = check(&[measured("a", ratio)], &floors);
        assert_eq!(rows[0].verdict, Verdict::Below, "{ratio}");
    }
}

#[test]
fn a_check_without_a_floor_and_a_floor_without_a_check_both_fail() {
    let floors = floors(&[("a", 1.0, 0.25), ("gone", 1.0, 0.25)]);
    let rows = check(&[measured("a", 1.0), measured("new", 3.0)], &floors);
    assert_eq!(
        verdicts(&rows),
        [
            ("a", Verdict::Pass),
            ("new", Verdict::NoFloor),
            ("gone", Verdict::NotMeasured)
        ]
    );
    assert!(!passed(&rows));
}

#[test]
fn the_table_shows_ratio_floor_margin_limit_and_verdict() {
    let floors = floors(&[("gemv_f32_vs_read", 0.8, 0.25)]);
    let rows = check(&[measured("gemv_f32_vs_read", 0.4)], &floors);
    let table = table(&rows);
    assert_eq!(table.len(), 2);
    for column in ["benchmark", "ratio", "floor", "margin", "limit", "verdict"] {
        assert!(table[0].contains(column), "{column}: {}", table[0]);
    }
    let fields: Vec<&str> = table[1].split_whitespace().collect();
    assert_eq!(
        fields,
        ["gemv_f32_vs_read", "0.40", "0.80", "25%", "0.60", "BELOW"]
    );
}

#[test]
fn a_fifo_or_an_endless_file_is_refused_without_blocking_and_a_key_given_twice_too() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("floors.json");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let err = watchdog::guard("reading a FIFO", move || {
        Floors::load(&fifo, None, None).unwrap_err()
    });
    assert!(err.to_string().contains("not a regular file"), "{err}");
    let big = dir.path().join("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(MAX_FLOORS_BYTES + 1)
        .unwrap();
    let err = Floors::load(&big, None, None).unwrap_err();
    assert!(matches!(err, FloorsError::Read { .. }), "{err}");
    // A check given twice would take its last floor, whatever the first says.
    let text = r#"{"floors": {"a": {"floor": 1.0, "margin": 0.2, "reason": "r"},
                              "a": {"floor": 1e-300, "margin": 0.2, "reason": "r"}}}"#;
    let err = Floors::parse(text, Path::new("f.json"), None, None).unwrap_err();
    assert!(err.to_string().contains("duplicate key \"a\""), "{err}");
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("floors.json");
    let err = Floors::load(&path, None, None).unwrap_err();
    assert!(matches!(err, FloorsError::Read { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.starts_with("cannot read the floors file ") && message.contains("floors.json"),
        "{message}"
    );
}

#[test]
fn a_malformed_file_is_an_error_naming_what_is_wrong() {
    let entry = |body: &str| format!(r#"{{"floors": {{"a": {body}}}}}"#);
    // A check whose Intel floor names `models`.
    let model_entry = |models: &str| {
        entry(&format!(
            r#"{{"floor": 1, "margin": 0.2, "reason": "r",
                 "vendors": {{"intel": {{"floor": 1, "margin": 0.2, "reason": "r",
                                          "models": {models}}}}}}}"#
        ))
    };
    let cases = [
        ("{".to_string(), "not JSON"),
        ("[]".to_string(), "not a JSON object"),
        ("{}".to_string(), "no \"floors\" object"),
        (
            r#"{"floors": {}, "flors": 1}"#.to_string(),
            "unknown top-level key \"flors\"",
        ),
        (entry("1.0"), "floor \"a\": not a JSON object"),
        (entry(r#"{"floor": 1, "reason": "r"}"#), "no \"margin\""),
        (entry(r#"{"margin": 0.2, "reason": "r"}"#), "no \"floor\""),
        (entry(r#"{"floor": 1, "margin": 0.2}"#), "no \"reason\""),
        (
            entry(r#"{"floor": 1, "margin": 0.2, "reason": " "}"#),
            "\"reason\" is empty",
        ),
        (
            entry(r#"{"floor": 1, "margin": 1, "reason": "r"}"#),
            "\"margin\" 1 is not a share",
        ),
        (
            entry(r#"{"floor": 1, "margin": -0.1, "reason": "r"}"#),
            "\"margin\" -0.1",
        ),
        (
            entry(r#"{"floor": 1, "margin": 20, "reason": "r"}"#),
            "\"margin\" 20",
        ),
        (
            entry(r#"{"floor": 0, "margin": 0.2, "reason": "r"}"#),
            "\"floor\" 0 is not a positive",
        ),
        (
            entry(r#"{"floor": 5e-324, "margin": 0.5, "reason": "r"}"#),
            "which is no limit",
        ),
        (
            entry(r#"{"floor": "1", "margin": 0.2, "reason": "r"}"#),
            "\"floor\" is not a number",
        ),
        (
            entry(r#"{"floor": 1, "margin": 0.2, "reason": "r", "margn": 1}"#),
            "unknown key \"margn\"",
        ),
        (
            entry(r#"{"floor": 1, "margin": 0.2, "reason": "r", "vendors": []}"#),
            "\"vendors\" is not a JSON object",
        ),
        (
            entry(r#"{"floor": 1, "margin": 0.2, "reason": "r", "vendors": {"via": {}}}"#),
            "unknown vendor \"via\" (known: amd, intel)",
        ),
        (
            entry(
                r#"{"floor": 1, "margin": 0.2, "reason": "r",
                    "vendors": {"intel": {"floor": 1, "margin": 2, "reason": "r"}}}"#,
            ),
            "vendor \"intel\": \"margin\" 2",
        ),
        (
            entry(
                r#"{"floor": 1, "margin": 0.2, "reason": "r",
                    "vendors": {"intel": {"floor": 1, "margin": 0.2, "reason": "r", "vendors": {}}}}"#,
            ),
            "vendor \"intel\": unknown key \"vendors\"",
        ),
        (
            model_entry(r#"{"6-106": {"floor": 1, "margin": 0.2, "reason": "r"}}"#),
            r#"model "6-106" is not "<family>/<model>" in decimal"#,
        ),
        (
            model_entry(r#"{"06/106": {"floor": 1, "margin": 0.2, "reason": "r"}}"#),
            r#"model "06/106" is not "<family>/<model>" in decimal"#,
        ),
        (
            model_entry(r#"{"6/": {"floor": 1, "margin": 0.2, "reason": "r"}}"#),
            r#"model "6/" is not "<family>/<model>" in decimal"#,
        ),
        (
            model_entry(r#"{"/106": {"floor": 1, "margin": 0.2, "reason": "r"}}"#),
            r#"model "/106" is not "<family>/<model>" in decimal"#,
        ),
        (
            model_entry(r#"{"+6/106": {"floor": 1, "margin": 0.2, "reason": "r"}}"#),
            r#"model "+6/106" is not "<family>/<model>" in decimal"#,
        ),
        (
            model_entry(r#"{"6/106/1": {"floor": 1, "margin": 0.2, "reason": "r"}}"#),
            r#"model "6/106/1" is not "<family>/<model>" in decimal"#,
        ),
        (
            model_entry(r#"{" 6/106": {"floor": 1, "margin": 0.2, "reason": "r"}}"#),
            r#"model " 6/106" is not "<family>/<model>" in decimal"#,
        ),
        (
            model_entry(r#"{"6/99999999999": {"floor": 1, "margin": 0.2, "reason": "r"}}"#),
            r#"model "6/99999999999" is not "<family>/<model>" in decimal"#,
        ),
        (
            model_entry(r#"[]"#),
            r#"vendor "intel": "models" is not a JSON object"#,
        ),
        (
            model_entry(r#"{"6/106": {"floor": 1, "margin": 1, "reason": "r"}}"#),
            r#"vendor "intel": model "6/106": "margin" 1"#,
        ),
        (
            model_entry(r#"{"6/106": {"floor": 1, "margin": 0.2, "reason": "r", "models": {}}}"#),
            r#"model "6/106": unknown key "models""#,
        ),
        (
            entry(r#"{"floor": 1, "margin": 0.2, "reason": "r", "models": {}}"#),
            "unknown key \"models\"",
        ),
    ];
    for (text, expected) in cases {
        // A vendor's floor is validated whichever vendor is asked for.
        let err = Floors::parse(
            &text,
            Path::new("benches/floors.json"),
            Some("amd"),
            Some((6, 106)),
        )
        .unwrap_err();
        let message = err.to_string();
        assert!(
            message.starts_with("malformed floors file benches/floors.json: ")
                && message.contains(expected),
            "{text}: {message}"
        );
    }
}

#[test]
fn a_valid_document_parses() {
    let text =
        r#"{"about": "x", "floors": {"a": {"floor": 0.9, "margin": 0.3, "reason": " why "}}}"#;
    let floors = Floors::parse(text, Path::new("f.json"), None, None).unwrap();
    let a = &floors.by_name["a"];
    assert_eq!((a.floor, a.margin, a.reason.as_str()), (0.9, 0.3, "why"));
    assert!((a.limit() - 0.63).abs() < 1e-12);
}

#[test]
fn a_vendor_takes_its_own_floor_and_every_other_cpu_the_default() {
    let text = r#"{"floors": {
        "a": {"floor": 0.9, "margin": 0.25, "reason": "amd",
              "vendors": {"intel": {"floor": 0.4, "margin": 0.2, "reason": "intel"}}},
        "b": {"floor": 2.0, "margin": 0.1, "reason": "one for all"}}}"#;
    let floor = |vendor| {
        let floors = Floors::parse(text, Path::new("f.json"), vendor, None).unwrap();
        let (a, b) = (&floors.by_name["a"], &floors.by_name["b"]);
        ((a.floor, a.reason.clone()), (b.floor, b.reason.clone()))
    };
    let default = ((0.9, "amd".to_string()), (2.0, "one for all".to_string()));
    assert_eq!(floor(None), default);
    assert_eq!(floor(Some("amd")), default);
    assert_eq!(
        floor(Some("intel")),
        ((0.4, "intel".to_string()), (2.0, "one for all".to_string()))
    );
}

#[test]
fn a_model_takes_its_own_floor_within_its_vendor_alone() {
    let text = r#"{"floors": {
        "a": {"floor": 0.9, "margin": 0.25, "reason": "amd",
              "vendors": {"intel": {"floor": 0.4, "margin": 0.2, "reason": "intel",
                                    "models": {"6/106": {"floor": 0.3, "margin": 0.1,
                                                         "reason": "icx"}}}}},
        "b": {"floor": 2.0, "margin": 0.1, "reason": "one for all",
              "vendors": {"intel": {"floor": 1.5, "margin": 0.1, "reason": "intel b"}}}}}"#;
    let floor = |vendor, model| {
        let floors = Floors::parse(text, Path::new("f.json"), vendor, model).unwrap();
        let (a, b) = (&floors.by_name["a"], &floors.by_name["b"]);
        (
            (a.floor, a.margin, a.reason.clone()),
            (b.floor, b.reason.clone()),
        )
    };
    let intel_b = (1.5, "intel b".to_string());
    // The model's floor, and its vendor's for a check that names no model.
    assert_eq!(
        floor(Some("intel"), Some((6, 106))),
        ((0.3, 0.1, "icx".to_string()), intel_b.clone())
    );
    // Another model, or none known: the vendor's.
    for model in [Some((6, 143)), Some((106, 6)), Some((25, 17)), None] {
        assert_eq!(
            floor(Some("intel"), model),
            ((0.4, 0.2, "intel".to_string()), intel_b.clone()),
            "{model:?}"
        );
    }
    // The same family and model of another vendor, or of no vendor: the default.
    let default = (
        (0.9, 0.25, "amd".to_string()),
        (2.0, "one for all".to_string()),
    );
    assert_eq!(floor(Some("amd"), Some((6, 106))), default);
    assert_eq!(floor(None, Some((6, 106))), default);
}

#[test]
fn a_model_key_is_family_slash_model() {
    assert_eq!(model_key((6, 106)), "6/106");
    assert_eq!(model_key((25, 17)), "25/17");
}

#[test]
fn cpuid_vendor_strings_name_the_floors_vendor() {
    assert_eq!(vendor_of(b"GenuineIntel"), Some("intel"));
    assert_eq!(vendor_of(b"AuthenticAMD"), Some("amd"));
    assert_eq!(vendor_of(b"HygonGenuine"), None);
    assert_eq!(vendor_of(b""), None);
    // This machine's vendor is one of the file's names or none.
    assert!(this_vendor().is_none_or(|v| VENDORS.contains(&v)));
}

#[test]
fn every_vendor_floor_of_the_committed_file_guards_a_2x_regression() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("floors.json");
    // Every vendor, alone and with each family and model any check names for it.
    let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut kinds: Vec<(&str, Option<(u32, u32)>)> = VENDORS.iter().map(|v| (*v, None)).collect();
    for check in doc["floors"].as_object().unwrap().values() {
        for vendor in VENDORS {
            if let Some(models) = check["vendors"][vendor]["models"].as_object() {
                for key in models.keys() {
                    let (family, model) = key.split_once('/').unwrap();
                    kinds.push((
                        vendor,
                        Some((family.parse().unwrap(), model.parse().unwrap())),
                    ));
                }
            }
        }
    }
    for (vendor, model) in kinds {
        let floors = Floors::load(&path, Some(vendor), model).unwrap_or_else(|e| panic!("{e}"));
        let vendor = format!("{vendor} {model:?}");
        for (name, floor) in &floors.by_name {
            assert!(floor.margin > 0.0, "{vendor} {name}: no margin for noise");
            assert!(
                floor.floor / 2.0 < floor.limit(),
                "{vendor} {name}: a 2x regression from the floor would pass"
            );
            assert!(
                floor.reason.len() > 20,
                "{vendor} {name}: the reason says too little"
            );
        }
    }
}

#[test]
fn a_breach_must_hold_in_every_run_to_fail() {
    let f = floors(&[("a", 1.0, 0.0), ("b", 1.0, 0.0)]);
    // `a` breaches once then passes: kept as passing, with the runs it took.
    let mut calls = Vec::new();
    let out = confirm(vec![measured("a", 0.5), measured("b", 2.0)], &f, |name| {
        calls.push(name.to_string());
        Some(measured(name, 1.5))
    });
    assert_eq!(calls, ["a"], "only a breached check is measured again");
    assert_eq!(out[0].ratio, 1.5);
    assert!(
        out[0].detail.contains("best of 2 runs"),
        "{}",
        out[0].detail
    );
    assert_eq!(out[1].ratio, 2.0);
    assert!(passed(&check(&out, &f)));
    // A real regression breaches every time: it fails after 1 + CONFIRMATIONS runs.
    let mut runs = 0;
    let out = confirm(vec![measured("a", 0.5)], &f, |name| {
        runs += 1;
        Some(measured(name, 0.4))
    });
    assert_eq!(runs, CONFIRMATIONS);
    assert_eq!(out[0].ratio, 0.5, "the best run is reported");
    assert!(!passed(&check(&out, &f)));
}

#[test]
fn every_weight_format_has_a_gemv_check_that_names_it() {
    for format in matmul_kernel::WeightFormat::ALL {
        let name = format!("gemv_{}_vs_read", format.name());
        assert!(CHECKS.contains(&name.as_str()), "{name} is not a check");
        let measured_here = qgemv::format_of(&name);
        assert_eq!(
            measured_here,
            (format != matmul_kernel::WeightFormat::F32).then_some(format),
            "{name}"
        );
    }
    assert_eq!(
        qgemv::format_of("gemv_Q4_K_vs_read"),
        None,
        "names are exact"
    );
    assert_eq!(qgemv::format_of("gemm_q4_0_vs_read"), None);
}

#[test]
fn every_tiled_format_has_a_gemm_check_that_names_it() {
    for format in qgemm::FORMATS {
        let name = format!("gemm_{}_m32_vs_candle", format.name());
        assert!(CHECKS.contains(&name.as_str()), "{name} is not a check");
        assert_eq!(qgemm::format_of(&name), Some(format), "{name}");
    }
    let gemm_checks = CHECKS
        .iter()
        .filter(|c| qgemm::format_of(c).is_some())
        .count();
    assert_eq!(gemm_checks, qgemm::FORMATS.len());
}
