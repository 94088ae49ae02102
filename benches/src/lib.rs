//! Side-by-side measurements of the project's pieces against their peers.
//!
//! [`contenders`] defines every timed call, ours and the peers', once; the `perf` report and
//! the criterion benches (`benches/*.rs`) both run them. Each other module measures one
//! area and returns a [`Section`]; the `perf` binary merges the sections into one JSON
//! object (`cargo xtask perf --json`) or one human table. [`regress`] measures the ratios
//! `cargo xtask bench-regress` checks against `benches/floors.json`. [`qmatmul`] measures the
//! quantized kernels against the read and candle.
#![deny(missing_docs)]

pub mod contenders;
pub mod dispatch;
pub mod matmul;
pub mod qmatmul;
pub mod regress;
mod section;

pub use section::Section;
