//! Records the optimization level this crate is built with (`BUILD_OPT_LEVEL`), so that the
//! tuner can refuse to measure, and cache, the timings of an unoptimized build.

fn main() {
    let opt_level = std::env::var("OPT_LEVEL").unwrap_or_else(|_| "0".to_string());
    println!("cargo:rustc-env=SIPLLM_BUILD_OPT_LEVEL={opt_level}");
    println!("cargo:rerun-if-changed=build.rs");
}
