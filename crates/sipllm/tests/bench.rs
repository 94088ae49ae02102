//! `sipllm bench` as a user runs it: the JSON's keys and ratios, the SVG chart, bad flags.

mod common;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// A small one-matrix workload so that the tune and the comparison take about a second.
const WORKLOAD: &str = "48x256";

/// `sipllm` with no `SIPLLM_*` variable of the developer's, a quiet machine, `home` as its
/// cache.
fn sipllm(home: &Path, args: &[&str]) -> Command {
    let mut cmd = common::hermetic(env!("CARGO_BIN_EXE_sipllm"));
    cmd.env("SIPLLM_HOME", home).args(args);
    cmd
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("sipllm runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn bench_json_has_both_phases_the_tuned_setting_and_every_baseline() {
    let home = tempfile::tempdir().unwrap();
    let svg = home.path().join("out").join("chart.svg");
    std::fs::create_dir(svg.parent().unwrap()).unwrap();
    let out = run(&mut sipllm(
        home.path(),
        &[
            "bench",
            "-q",
            "--json",
            "--workload",
            WORKLOAD,
            "--repetitions",
            "5",
            "--svg",
            svg.to_str().unwrap(),
        ],
    ));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert!(
        doc["workload"].as_str().is_some_and(|w| !w.is_empty()),
        "{doc}"
    );
    for phase in ["decode", "prefill"] {
        let p = &doc["phases"][phase];
        let tuned = &p["tuned"];
        assert!(tuned["threads"].as_u64().is_some_and(|t| t >= 1), "{p}");
        assert!(tuned["policy"].is_string(), "{p}");
        let tuned_rate = tuned["tokens_per_sec"].as_f64().unwrap();
        assert!(tuned_rate > 0.0, "{p}");
        let baselines = p["baselines"].as_object().expect("baselines");
        let names: Vec<&str> = baselines.keys().map(String::as_str).collect();
        for name in ["seed-default", "all-logical", "physical-cores", "llama.cpp"] {
            assert!(names.contains(&name), "{phase}: no {name} in {names:?}");
        }
        for (name, b) in baselines {
            let rate = b["tokens_per_sec"].as_f64().unwrap();
            let ratio = b["ratio"].as_f64().unwrap();
            assert!(rate > 0.0, "{name}: {b}");
            assert!(
                (ratio - tuned_rate / rate).abs() <= 1e-9 * ratio,
                "{name}: {b}"
            );
            assert_eq!(b["policy"], "static", "{name}");
        }
        assert_eq!(baselines["seed-default"]["threads"], 4);
    }
    let text = std::fs::read_to_string(&svg).expect("the chart was written");
    let chart = roxmltree::Document::parse(&text).expect("well-formed SVG");
    assert_eq!(chart.root_element().tag_name().name(), "svg");
    let texts: Vec<&str> = chart
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(str::trim)
        .collect();
    for expected in ["decode", "prefill", "static", "threads", "tokens/s"] {
        assert!(texts.contains(&expected), "no {expected:?} in the chart");
    }
    assert_eq!(
        texts.iter().filter(|t| t.starts_with("pick: ")).count(),
        2,
        "one pick per phase"
    );
}

#[test]
fn bench_table_names_every_contender_and_bad_flags_are_refused() {
    let home = tempfile::tempdir().unwrap();
    // bench ignores SIPLLM_THREADS and SIPLLM_POLICY, invalid values too, and
    // SIPLLM_CACHED_ONLY: with nothing cached it tunes, and saves what it tuned.
    let out = run(sipllm(
        home.path(),
        &["bench", "-q", "--workload", WORKLOAD, "--repetitions", "5"],
    )
    .env("SIPLLM_THREADS", "0")
    .env("SIPLLM_POLICY", "bogus")
    .env("SIPLLM_CACHED_ONLY", "1"));
    let saved = std::fs::read_dir(home.path().join("runtime"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                .count()
        })
        .unwrap_or(0);
    assert!(saved > 0, "bench tuned and saved a profile");
    let table = String::from_utf8(out.stdout).unwrap();
    // The header names the rounds that ran.
    assert!(table.contains("of 5 interleaved repetitions"), "{table}");
    for name in ["decode", "prefill", "tuned", "seed-default", "llama.cpp"] {
        assert!(table.contains(name), "no {name} in\n{table}");
    }
    for bad in [
        &["bench", "--repetitions", "1"][..],
        // Fewer rounds than the library's least would run more than asked.
        &["bench", "--repetitions", "4"],
        &["bench", "--repetitions", "x"],
        &["bench", "--model", "llama3-8b", "--gguf", "f.gguf"],
        &["bench", "--nonsense"],
        // Refused after parsing, as given: exit 2 as well.
        &["bench", "--llama-bench", "/nonexistent/llama-bench"],
    ] {
        let out = sipllm(home.path(), bad).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(out.stdout.is_empty(), "{bad:?}");
    }
    // An SVG that cannot be written is an error naming the file, after nothing half-written.
    let out = sipllm(
        home.path(),
        &[
            "bench",
            "-q",
            "--workload",
            WORKLOAD,
            "--repetitions",
            "5",
            "--svg",
            "/nonexistent-dir/chart.svg",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent-dir/chart.svg"), "{err}");
}

/// Runs `bench --svg dest` on the small workload; the failed output.
fn bench_svg_refused(home: &Path, dest: &str) -> String {
    let out = sipllm(
        home,
        &[
            "bench",
            "-q",
            "--workload",
            WORKLOAD,
            "--repetitions",
            "5",
            "--svg",
            dest,
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(1), "--svg {dest} was not refused");
    assert!(out.stdout.is_empty());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn bench_svg_never_replaces_a_fifo_a_link_a_directory_or_a_device() {
    use std::os::unix::fs::FileTypeExt as _;
    let home = tempfile::tempdir().unwrap();
    let fifo = home.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let target = home.path().join("target.txt");
    std::fs::write(&target, "kept").unwrap();
    let link = home.path().join("link.svg");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let dir = home.path().join("dir.svg");
    std::fs::create_dir(&dir).unwrap();
    for (path, what) in [
        (&fifo, "a FIFO"),
        (&link, "a symbolic link"),
        (&dir, "a directory"),
    ] {
        let err = bench_svg_refused(home.path(), path.to_str().unwrap());
        assert!(
            err.contains(what) && err.contains("never replaced"),
            "{err}"
        );
    }
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert_eq!(std::fs::read_link(&link).unwrap(), target);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept");
    assert!(dir.is_dir());
    // Refused before anything was measured: no profile was saved.
    assert!(!home.path().join("runtime").exists());
    // A device node (a copy of /dev/null), where this process may make one (root).
    let device = home.path().join("null");
    let made = Command::new("mknod")
        .arg(&device)
        .args(["c", "1", "3"])
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    if made.success() {
        let err = bench_svg_refused(home.path(), device.to_str().unwrap());
        assert!(err.contains("a device"), "{err}");
        let kind = std::fs::symlink_metadata(&device).unwrap().file_type();
        assert!(kind.is_char_device(), "the device node was replaced");
    }
}

#[test]
fn bench_svg_into_a_missing_directory_is_refused_before_anything_is_measured() {
    let home = tempfile::tempdir().unwrap();
    let missing = home.path().join("nodir");
    let dest = missing.join("x.svg");
    let err = bench_svg_refused(home.path(), dest.to_str().unwrap());
    assert!(
        err.contains(&format!(
            "--svg {}: the directory {} does not exist",
            dest.display(),
            missing.display()
        )),
        "{err}"
    );
    assert!(!err.contains(".sipllm-"), "{err}");
    // Nothing was tuned or measured: no profile was saved, and the directory is not made.
    assert!(!home.path().join("runtime").exists());
    assert!(!missing.exists());
    // A file where the directory should be is refused the same way.
    let file = home.path().join("file");
    std::fs::write(&file, "kept").unwrap();
    let err = bench_svg_refused(home.path(), file.join("x.svg").to_str().unwrap());
    assert!(
        err.contains(&format!("{} is not a directory", file.display())),
        "{err}"
    );
    assert!(!home.path().join("runtime").exists());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "kept");
}

#[test]
fn bench_svg_dash_is_refused_instead_of_writing_a_file_named_dash() {
    let home = tempfile::tempdir().unwrap();
    let out = sipllm(
        home.path(),
        &[
            "bench",
            "-q",
            "--workload",
            WORKLOAD,
            "--repetitions",
            "5",
            "--svg",
            "-",
        ],
    )
    .current_dir(home.path())
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("give a file name"), "{err}");
    assert!(!home.path().join("-").exists());
}

#[test]
fn bench_names_the_profile_it_compares_and_an_estimate_s_empty_chart() {
    let home = tempfile::tempdir().unwrap();
    let svg = home.path().join("chart.svg");
    let args = [
        "bench",
        "--workload",
        WORKLOAD,
        "--repetitions",
        "5",
        "--rigor",
        "estimate",
        "--svg",
        svg.to_str().unwrap(),
    ];
    let out = run(&mut sipllm(home.path(), &args));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Which profile "tuned" is: here an estimate, with nothing measured.
    assert!(
        stderr.contains("sipllm: bench: source estimated,") && stderr.contains("nothing measured"),
        "{stderr}"
    );
    assert!(
        stderr.contains("the profile holds no measurement of its search (estimated)"),
        "{stderr}"
    );
    assert!(svg.is_file());
}
