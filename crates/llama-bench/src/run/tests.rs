//! Tests of `run.rs`.
