//! Tests of `identity.rs`.
