//! The stand-in `llama-bench` of this crate's tests: [`llama_bench::stand_in`] as a binary.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    llama_bench::stand_in::main()
}
