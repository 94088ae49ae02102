//! A profile bundle imported into an empty store, then the same bytes as a cached profile
//! that `profile list` inspects and `tune_if_needed --cached-only` reads; every profile
//! found valid is rendered for every runtime (`sipllm emit`), whose text and notes may hold
//! no control character the bytes brought in (a line break only where the text has lines).
#![no_main]
#![forbid(unsafe_code)]

use auto_tuner::{AutoTunerOptions, ProfileHome};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn hardware() -> &'static device_profile::HardwareInfo {
    static HW: OnceLock<device_profile::HardwareInfo> = OnceLock::new();
    HW.get_or_init(device_profile::get_hardware_info)
}

fuzz_target!(|data: &[u8]| {
    let hw = hardware();
    let home = tempfile::tempdir().expect("a temporary folder");
    let mut opt = AutoTunerOptions::default();
    opt.stores.home = ProfileHome::Dir(home.path().to_path_buf());
    opt.stores.system_profiles = None;
    opt.stores.cached_only = true;
    let _ = auto_tuner::import_profiles(hw, &opt, data, false);
    let _ = auto_tuner::import_profiles(hw, &opt, data, true);

    let runtime = home.path().join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    std::fs::write(runtime.join(format!("{}.json", hw.hardware_id())), data).unwrap();
    let (listed, _) = auto_tuner::list_profiles(hw, &opt);
    let _ = format!("{listed:?}");
    for stored in &listed {
        let (Some(profile), Ok(())) = (&stored.profile, &stored.valid) else {
            continue;
        };
        let Ok(forms) = sipllm::render_runtimes(profile, hw) else {
            continue;
        };
        for form in forms {
            assert!(
                !form.text.chars().any(|c| c.is_control() && c != '\n'),
                "{}: a control character in {:?}",
                form.target,
                form.text
            );
            for note in &form.notes {
                assert!(
                    !note.chars().any(char::is_control),
                    "a control character in {note:?}"
                );
            }
        }
    }
    let _ = auto_tuner::tune_if_needed(hw, &opt);
});
