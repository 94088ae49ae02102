//! Unit tests of `options.rs`.

use super::*;

fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
    move |name| {
        pairs
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| OsString::from(v))
    }
}

#[test]
fn env_overrides_are_read_and_explicit_values_win() {
    let opt = AutoTunerOptions::default()
        .with_env(vars(&[
            ("SIPLLM_THREADS", "3"),
            ("SIPLLM_POLICY", "guided"),
        ]))
        .unwrap();
    assert_eq!(opt.overrides.threads, Some(3));
    assert_eq!(opt.overrides.policy, Some(SchedulePolicy::Guided));

    let opt = {
        let mut opt = AutoTunerOptions::default();
        opt.overrides.threads = Some(1);
        opt
    }
    .with_env(vars(&[("SIPLLM_THREADS", "3")]))
    .unwrap();
    assert_eq!(opt.overrides.threads, Some(1));
}

#[test]
fn bad_env_values_name_the_variable_and_the_range() {
    for bad in ["0", "-1", "many", "", "1025", "2.5"] {
        let err = AutoTunerOptions::default()
            .with_env(vars(&[("SIPLLM_THREADS", bad)]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("SIPLLM_THREADS"), "{err}");
        assert!(err.contains("from 1 to 1024"), "{err}");
    }
    let err = AutoTunerOptions::default()
        .with_env(vars(&[("SIPLLM_POLICY", "fastest")]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("SIPLLM_POLICY") && err.contains("workstealing"),
        "{err}"
    );
}

#[test]
fn home_comes_from_sipllm_home_then_home() {
    let opt = AutoTunerOptions::default()
        .with_env(vars(&[("SIPLLM_HOME", "/a"), ("HOME", "/b")]))
        .unwrap();
    assert_eq!(opt.stores.home, ProfileHome::Dir(PathBuf::from("/a")));
    let opt = AutoTunerOptions::default()
        .with_env(vars(&[("HOME", "/b")]))
        .unwrap();
    assert_eq!(
        opt.stores.home,
        ProfileHome::Dir(PathBuf::from("/b/.sipllm"))
    );
    // Neither set: left for the tuner, which then saves nothing and warns.
    let opt = AutoTunerOptions::default().with_env(vars(&[])).unwrap();
    assert_eq!(opt.stores.home, ProfileHome::FromEnv);
    // Empty means unset.
    let opt = AutoTunerOptions::default()
        .with_env(vars(&[("SIPLLM_HOME", ""), ("HOME", "/b")]))
        .unwrap();
    assert_eq!(
        opt.stores.home,
        ProfileHome::Dir(PathBuf::from("/b/.sipllm"))
    );
    // An explicit directory or no cache is never replaced by the environment.
    for home in [ProfileHome::None, ProfileHome::Dir(PathBuf::from("/c"))] {
        let opt = {
            let mut opt = AutoTunerOptions::default();
            opt.stores.home = home.clone();
            opt
        }
        .with_env(vars(&[("SIPLLM_HOME", "/a")]))
        .unwrap();
        assert_eq!(opt.stores.home, home);
    }
}

#[test]
fn the_default_home_is_sipllm_home_else_dot_sipllm_in_home() {
    assert_eq!(
        AutoTunerOptions::default().stores.home,
        ProfileHome::FromEnv
    );
    let home = |pairs: &[(&str, &str)]| default_home(vars(pairs)).unwrap();
    assert_eq!(
        home(&[("SIPLLM_HOME", "/srv/s"), ("HOME", "/home/u")]),
        Some(PathBuf::from("/srv/s"))
    );
    assert_eq!(
        home(&[("HOME", "/home/u")]),
        Some(PathBuf::from("/home/u/.sipllm"))
    );
    assert_eq!(
        home(&[("SIPLLM_HOME", ""), ("HOME", "/home/u")]),
        Some(PathBuf::from("/home/u/.sipllm"))
    );
    assert_eq!(home(&[]), None);
    assert_eq!(home(&[("SIPLLM_HOME", ""), ("HOME", "")]), None);
}

#[test]
fn a_home_that_is_not_utf8_is_that_directory_and_a_setting_that_is_not_is_an_error() {
    use std::os::unix::ffi::OsStringExt as _;
    let bytes = |b: &[u8]| OsString::from_vec(b.to_vec());
    let odd = bytes(b"/srv/caf\xe9");
    // The directory is the bytes given, never `$HOME/.sipllm` as if it were unset.
    let env = |name: &str| match name {
        "SIPLLM_HOME" => Some(odd.clone()),
        "HOME" => Some(OsString::from("/home/u")),
        _ => None,
    };
    assert_eq!(default_home(env).unwrap(), Some(PathBuf::from(odd.clone())));
    let opt = AutoTunerOptions::default().with_env(env).unwrap();
    assert_eq!(
        opt.stores.home,
        ProfileHome::Dir(PathBuf::from(odd.clone()))
    );
    let home_only = |name: &str| (name == "HOME").then(|| odd.clone());
    assert_eq!(
        default_home(home_only).unwrap(),
        Some(PathBuf::from(odd.clone()).join(".sipllm"))
    );
    for name in [
        "SIPLLM_THREADS",
        "SIPLLM_POLICY",
        "SIPLLM_KERNEL",
        "SIPLLM_CACHED_ONLY",
        "SIPLLM_LOAD_AVERAGE",
    ] {
        let env = |n: &str| (n == name).then(|| bytes(b"2\xff"));
        match AutoTunerOptions::default().with_env(env) {
            Err(TunerError::InvalidSetting {
                name: n, expected, ..
            }) => {
                assert_eq!(n, name);
                assert_eq!(expected, "UTF-8 text");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn the_store_env_reads_the_stores_and_kernel_and_no_setting_of_a_run() {
    let run_settings = [
        ("SIPLLM_THREADS", "abc"),
        ("SIPLLM_POLICY", "fastest"),
        ("SIPLLM_CACHED_ONLY", "maybe"),
        ("SIPLLM_LOAD_AVERAGE", "busy"),
    ];
    // Each of these stops a run ...
    for (name, value) in run_settings {
        let err = AutoTunerOptions::default()
            .with_env(vars(&[(name, value)]))
            .unwrap_err();
        assert!(matches!(err, TunerError::InvalidSetting { .. }), "{name}");
    }
    // ... and none stops what reads only the stores, which are still found.
    let mut env = run_settings.to_vec();
    env.extend([
        ("SIPLLM_HOME", "/a"),
        ("SIPLLM_SYSTEM_PROFILES", "/s"),
        ("SIPLLM_KERNEL", "portable"),
    ]);
    let opt = AutoTunerOptions::default()
        .with_store_env(vars(&env))
        .unwrap();
    assert_eq!(opt.stores.home, ProfileHome::Dir(PathBuf::from("/a")));
    assert_eq!(opt.stores.system_profiles, Some(PathBuf::from("/s")));
    assert_eq!(opt.question.kernel().isa(), matmul_kernel::Isa::Portable);
    assert!(opt.overrides.threads.is_none() && opt.overrides.policy.is_none());
    assert!(!opt.stores.cached_only);
    assert_eq!(opt.measuring.load_average, LoadAverage::Proc);
    // A bad kernel still stops it: it decides which profiles a listing calls valid.
    let err = AutoTunerOptions::default()
        .with_store_env(vars(&[("SIPLLM_KERNEL", "sse9")]))
        .unwrap_err();
    assert!(matches!(err, TunerError::InvalidSetting { .. }), "{err:?}");
}

#[test]
fn the_kernel_comes_from_sipllm_kernel_and_a_bad_one_is_an_error() {
    let opt = AutoTunerOptions::default()
        .with_env(vars(&[("SIPLLM_KERNEL", "portable")]))
        .unwrap();
    assert_eq!(opt.question.kernel().isa(), matmul_kernel::Isa::Portable);
    let opt = AutoTunerOptions::default().with_env(vars(&[])).unwrap();
    assert_eq!(opt.question.kernel, None);
    assert_eq!(opt.question.kernel().isa(), matmul_kernel::selected().isa());
    let err = AutoTunerOptions::default()
        .with_env(vars(&[("SIPLLM_KERNEL", "sse9")]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("SIPLLM_KERNEL") && err.contains("sse9"),
        "{err}"
    );
}

#[test]
fn the_system_store_and_cached_only_come_from_the_environment() {
    let opt = AutoTunerOptions::default().with_env(vars(&[])).unwrap();
    assert_eq!(
        opt.stores.system_profiles,
        Some(PathBuf::from(DEFAULT_SYSTEM_PROFILES))
    );
    assert!(!opt.stores.cached_only);
    let opt = AutoTunerOptions::default()
        .with_env(vars(&[
            ("SIPLLM_SYSTEM_PROFILES", "/srv/fleet"),
            ("SIPLLM_CACHED_ONLY", "1"),
        ]))
        .unwrap();
    assert_eq!(
        opt.stores.system_profiles,
        Some(PathBuf::from("/srv/fleet"))
    );
    assert!(opt.stores.cached_only);
    let opt = AutoTunerOptions::default()
        .with_env(vars(&[("SIPLLM_SYSTEM_PROFILES", "")]))
        .unwrap();
    assert_eq!(opt.stores.system_profiles, None);
    let opt = AutoTunerOptions::default()
        .with_env(vars(&[("SIPLLM_LOAD_AVERAGE", "3.5")]))
        .unwrap();
    assert_eq!(opt.measuring.load_average, LoadAverage::Given(Some(3.5)));
    let err = AutoTunerOptions::default()
        .with_env(vars(&[("SIPLLM_LOAD_AVERAGE", "busy")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("SIPLLM_LOAD_AVERAGE"), "{err}");
    let err = AutoTunerOptions::default()
        .with_env(vars(&[("SIPLLM_CACHED_ONLY", "maybe")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("SIPLLM_CACHED_ONLY"), "{err}");
}

#[test]
fn a_relative_home_is_made_absolute() {
    let cwd = std::env::current_dir().unwrap();
    let opt = AutoTunerOptions::default()
        .with_env(vars(&[("SIPLLM_HOME", "relative/path")]))
        .unwrap();
    assert_eq!(opt.stores.home, ProfileHome::Dir(cwd.join("relative/path")));
    let home = default_home(vars(&[("HOME", "rel")])).unwrap().unwrap();
    assert!(home.is_absolute(), "{}", home.display());
    assert!(home.ends_with("rel/.sipllm"));
}

#[test]
fn the_thread_limit_is_the_effective_cpus_capped() {
    let hw = HardwareInfo {
        effective_cpus: 32,
        ..HardwareInfo::default()
    };
    let mut opt = AutoTunerOptions::default();
    assert_eq!(opt.question.thread_limit(&hw), DEFAULT_THREAD_CAP);
    opt.question.thread_cap = None;
    assert_eq!(opt.question.thread_limit(&hw), 32);
    opt.question.thread_cap = Some(3);
    assert_eq!(opt.question.thread_limit(&hw), 3);
    assert!(!opt.question.is_default_request(&hw));
    let small = HardwareInfo {
        effective_cpus: 2,
        ..HardwareInfo::default()
    };
    // On 2 CPUs, a cap of 3 or none asks what the default asks.
    assert!(opt.question.is_default_request(&small));
    // A 1-CPU quota on 3 CPUs the process may run on: every one of them is a
    // candidate, the quota is measured, not assumed.
    let quota = HardwareInfo {
        effective_cpus: 1,
        cpu_quota_millicpus: Some(1000),
        allowed_cpus: vec![0, 1, 2],
        logical_cores: 4,
        ..HardwareInfo::default()
    };
    opt.question.thread_cap = None;
    assert_eq!(opt.question.thread_limit(&quota), 3);
}

#[test]
fn budget_and_workload_parse_and_reject() {
    assert_eq!(
        parse_budget("--budget", "1.5").unwrap(),
        Duration::from_millis(1500)
    );
    for bad in [
        "0", "-1", "nan", "inf", "x", "1e9", "1e-12", "1e-300", "0.0009",
    ] {
        assert!(parse_budget("--budget", bad).is_err(), "{bad}");
    }
    assert_eq!(
        parse_budget("--budget", "0.001").unwrap(),
        Duration::from_millis(1)
    );
    let w = parse_matrix_workload("--workload", "64x128").unwrap();
    assert_eq!(w, matrix_workload(64, 128));
    for bad in ["64", "0x4", "4x0", "axb", "4x99999999"] {
        assert!(parse_matrix_workload("--workload", bad).is_err(), "{bad}");
    }
    assert_eq!(parse_batch("--batch", "64").unwrap(), 64);
    for bad in ["0", "-1", "4097", "x"] {
        let err = parse_batch("--batch", bad).unwrap_err().to_string();
        assert!(err.contains("--batch") && err.contains("4096"), "{err}");
    }
}
