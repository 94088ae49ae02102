//! Every corrupt-cache case: each broken field of a valid profile, and documents that are
//! not profiles (empty, truncated, not JSON, too large, an earlier schema), each rejected
//! with its reason and replaced.

mod common;

use common::{assert_rejected, hw, options, profile_path, tune};
use device_profile::HardwareInfo;
use serde_json::Value;
use std::path::Path;

/// A valid cached profile as JSON, to be broken by each case.
fn valid_profile_json(home: &Path, hw: &HardwareInfo) -> Value {
    let tuned = tune(hw, &options(home));
    serde_json::to_value(tuned.profile).unwrap()
}

/// Sets `key` of the decode setting and of the top level that repeats it.
fn set_decode(v: &mut Value, key: &str, value: Value) {
    v[key] = value.clone();
    v["decode"][key] = value;
}

#[test]
fn each_broken_field_is_rejected_with_its_reason() {
    let hw = hw();
    type Break = fn(&mut Value);
    let cases: [(&str, Break); 33] = [
        ("schema version 99", |v| v["schema_version"] = 99.into()),
        ("another machine", |v| {
            v["hardware_id"] = "x86_64_other_8c_16gb".into()
        }),
        ("threads = 0", |v| set_decode(v, "threads", 0.into())),
        ("threads = 4096", |v| v["prefill"]["threads"] = 4096.into()),
        ("unknown schedule policy", |v| {
            v["schedule_policy"] = "turbo".into()
        }),
        // Another id than the policy's, whichever policy won.
        ("has id", |v| {
            let id = v["decode"]["schedule_policy_id"].as_u64().unwrap();
            set_decode(v, "schedule_policy_id", ((id + 1) % 7).into());
        }),
        ("has id", |v| {
            let id = v["prefill"]["schedule_policy_id"].as_u64().unwrap();
            v["prefill"]["schedule_policy_id"] = ((id + 1) % 7).into();
        }),
        ("not the decode setting", |v| {
            let n = v["threads"].as_u64().unwrap();
            v["threads"] = (n % 2 + 1).into();
            v["decode"]["threads"] = (2 - n % 2).into();
        }),
        ("decode.tokens_per_sec = -1", |v| {
            v["decode"]["tokens_per_sec"] = (-1.0).into()
        }),
        ("prefill.gbps = 0", |v| v["prefill"]["gbps"] = 0.0.into()),
        ("prefill.gbps is missing", |v| {
            v["prefill"].as_object_mut().unwrap().remove("gbps");
        }),
        ("machine has changed", |v| {
            let n = v["hardware"]["logical_cores"].as_u64().unwrap();
            v["hardware"]["logical_cores"] = (n + 64).into();
        }),
        ("effective_cpus", |v| {
            // The cgroup limit changed behind the same id.
            let n = v["hardware"]["effective_cpus"].as_u64().unwrap();
            v["hardware"]["effective_cpus"] = (n + 1).into();
        }),
        ("allowed_cpus", |v| {
            v["hardware"]["allowed_cpus"] = serde_json::json!([0, 1, 2, 3, 4, 5, 6, 7]);
        }),
        ("simd", |v| {
            v["hardware"]["simd"] = serde_json::json!(["neon"]);
        }),
        ("measured with kernel", |v| {
            v["kernel"] = "avx2 matmul-kernel r0".into()
        }),
        ("cut short by a", |v| v["partial"] = true.into()),
        ("it was measured on workload 4096x4096 f32", |v| {
            v["request"]["workload"] =
                serde_json::to_value(auto_tuner::matrix_workload(4096, 4096)).unwrap();
        }),
        ("at a batch of 8", |v| v["request"]["batch"] = 8.into()),
        ("tried at most 1 threads", |v| {
            set_decode(v, "threads", 1.into());
            v["prefill"]["threads"] = 1.into();
            v["request"]["thread_limit"] = 1.into();
        }),
        ("decode threads = 2 exceeds its own thread limit 1", |v| {
            set_decode(v, "threads", 2.into());
            v["request"]["thread_limit"] = 1.into();
        }),
        ("gate is 0x4", |v| {
            v["request"]["workload"]["projections"][0] =
                serde_json::json!({"name": "gate", "n_out": 0, "n_in": 4, "formats": ["f32"]});
        }),
        ("rigor estimate is not one a saved profile has", |v| {
            v["rigor"] = "estimate".into();
            v["request"]["rigor"] = "estimate".into();
        }),
        ("is not an RFC 3339 UTC time", |v| {
            v["tuned_at"] = "\u{1b}[2Jstatus: valid".into();
        }),
        (
            "crate_version is not plain text (holds control characters)",
            |v| {
                v["crate_version"] = "0.1.0\nstatus: valid".into();
            },
        ),
        // A long value: the reason comes before the value, which is cut.
        (
            "crate_version is not plain text (is 206 bytes long, over 128)",
            |v| {
                v["crate_version"] = format!("0.1.0-{}", "x".repeat(200)).into();
            },
        ),
        (
            "workload name is not plain text (holds control characters): \"\\u{1b}[31m",
            |v| {
                let name = format!("\u{1b}[31m{}", "y".repeat(250));
                v["request"]["workload"]["name"] = name.into();
            },
        ),
        // Pinned CPUs that the runtime could not pin to.
        ("CPU 99999 is not one this process may use", |v| {
            v["prefill"]["threads"] = 2.into();
            v["prefill"]["cores"] = "physical_cores".into();
            v["prefill"]["pinned_cpus"] = serde_json::json!([99999, 5]);
        }),
        ("[0] for 2 threads (one CPU per thread expected)", |v| {
            set_decode(v, "threads", 2.into());
            set_decode(v, "cores", "performance".into());
            set_decode(v, "pinned_cpus", serde_json::json!([0]));
        }),
        ("CPU 1 is listed twice", |v| {
            set_decode(v, "threads", 2.into());
            set_decode(v, "cores", "performance".into());
            set_decode(v, "pinned_cpus", serde_json::json!([1, 1]));
        }),
        ("for an unpinned (cores = any) profile", |v| {
            set_decode(v, "cores", "any".into());
            set_decode(v, "pinned_cpus", serde_json::json!([0]));
        }),
        // Knobs are llama.cpp's: a profile of our kernels names none.
        (
            "names llama.cpp knobs, but the profile has no llama.cpp record",
            |v| {
                v["prefill"]["measurements"][0]["knobs"] = serde_json::json!({"repack": false});
            },
        ),
        (
            "governor is not plain text (holds control characters): \"perf\\u{1b}[2J\"",
            |v| {
                v["environment"]["governor"] = "perf\u{1b}[2J".into();
            },
        ),
    ];
    for (reason, break_it) in cases {
        let home = tempfile::tempdir().unwrap();
        let mut v = valid_profile_json(home.path(), &hw);
        break_it(&mut v);
        std::fs::write(profile_path(home.path(), &hw), v.to_string()).unwrap();
        assert_rejected(home.path(), &hw, reason);
    }
}

#[test]
fn unreadable_documents_are_rejected_with_their_reason() {
    let hw = hw();
    let huge = vec![b' '; (auto_tuner::MAX_PROFILE_BYTES + 1) as usize];
    let cases: [(&str, &[u8]); 5] = [
        ("empty", b""),
        ("empty", b"  \n"),
        (
            "not a valid profile",
            b"{\"schema_version\": 2, \"threads\": ",
        ),
        ("not a valid profile", b"\x00\xffgarbage"),
        ("more than", &huge),
    ];
    for (reason, text) in cases {
        let home = tempfile::tempdir().unwrap();
        let path = profile_path(home.path(), &hw);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        assert_rejected(home.path(), &hw, reason);
    }
    // A NaN is not JSON; a truncated valid profile is not a profile.
    let home = tempfile::tempdir().unwrap();
    let text = valid_profile_json(home.path(), &hw).to_string();
    let path = profile_path(home.path(), &hw);
    std::fs::write(&path, &text[..text.len() / 2]).unwrap();
    assert_rejected(home.path(), &hw, "not a valid profile");
    std::fs::write(&path, text.replacen("\"gbps\":", "\"gbps\":NaN,\"x\":", 1)).unwrap();
    assert_rejected(home.path(), &hw, "not a valid profile");
    // A profile of an earlier schema is re-tuned with one clear message, never misread.
    std::fs::write(
        &path,
        text.replacen("\"schema_version\":4", "\"schema_version\":1", 1),
    )
    .unwrap();
    assert_rejected(home.path(), &hw, "schema version 1, expected 4");
    // A schema-2 profile as the previous tuner wrote it (one setting for everything, a
    // synthetic matrix): its decode setting is not guessed from the old top-level one.
    let schema_2 = serde_json::json!({
        "schema_version": 2,
        "hardware_id": hw.hardware_id(),
        "threads": 1,
        "schedule_policy": "static",
        "schedule_policy_id": 0,
        "cores": "any",
        "pinned_cpus": [],
        "pseudo_tokens_per_sec": 1.5,
        "gbps": 12.0,
        "partial": false,
        "request": {"workload": {"n_out": 48, "n_in": 80}, "thread_limit": 2},
        "measurements": [],
        "hardware": serde_json::to_value(&hw).unwrap(),
        "crate_version": "0.1.0",
        "kernel": "avx512 matmul-kernel r1",
        "tuned_at": "2026-11-29T16:33:31Z",
        "tuning_seconds": 2.5,
    });
    std::fs::write(&path, schema_2.to_string()).unwrap();
    assert_rejected(home.path(), &hw, "schema version 2, expected 4");
}
