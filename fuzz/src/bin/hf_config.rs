//! A `config.json` as bytes, read from a file as `--model-config` reads it.
#![no_main]
#![forbid(unsafe_code)]

use libfuzzer_sys::fuzz_target;
use model_workload::{Weights, Workload};
use std::io::Write;

fuzz_target!(|data: &[u8]| {
    let mut file = tempfile::NamedTempFile::new().expect("a temporary file");
    file.write_all(data).expect("write the input");
    let Ok(workload) = Workload::from_hf_config(file.path(), Weights::default()) else {
        return;
    };
    let _ = workload.validate();
    let _ = (workload.key(), workload.token_weight_bytes());
});
