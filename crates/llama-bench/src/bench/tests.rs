//! Tests of `bench.rs`.
