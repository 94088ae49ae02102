//! llama-bench's stdout, its `--version` text and a CPU mask, as a hostile binary may write them.
#![no_main]
#![forbid(unsafe_code)]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(results) = llama_bench::parse_json("llama-bench -o json", data) {
        let _ = format!("{results:?}");
    }
    let text = String::from_utf8_lossy(data);
    let _ = llama_bench::BuildInfo::parse_version(&text);
    if let Some(mask) = llama_bench::CpuMask::parse(&text) {
        let _ = mask.cpus();
    }
});
