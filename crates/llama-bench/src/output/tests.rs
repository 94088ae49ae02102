//! Tests of `output.rs`.
