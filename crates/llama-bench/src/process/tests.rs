//! Tests of `process.rs`.
