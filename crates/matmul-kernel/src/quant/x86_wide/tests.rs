//! q4_0's gathers, checked on any x86 CPU: the permutes' index tables of `x86_wide.rs`
//! applied by the instructions' rules in plain Rust, so that the byte tables of a VBMI CPU
//! are checked where VBMI is missing too.

use super::{Q4_0_NIBBLE_BYTES, Q4_0_NIBBLES, Q4_0_SCALE_BYTES, Q4_0_SCALES};

/// A q4_0 group's 72 bytes, each its own index, and the step's two loads: bytes `0..64`
/// and `8..72`.
fn loads() -> ([u8; 64], [u8; 64]) {
    let group: Vec<u8> = (0..72).collect();
    (
        group[..64].try_into().unwrap(),
        group[8..].try_into().unwrap(),
    )
}

/// `vpermt2w` (two sources, words) as bytes: word `j` of the result is word `idx[j] & 31`
/// of `first`, or of `second` when bit 5 is set.
fn permt2w(first: &[u8; 64], idx: &[u16; 32], second: &[u8; 64]) -> [u8; 64] {
    std::array::from_fn(|b| {
        let w = idx[b / 2] as usize;
        let src = if w & 32 != 0 { second } else { first };
        src[2 * (w & 31) + b % 2]
    })
}

/// `vpermt2b` (two sources, bytes): byte `j` is byte `idx[j] & 63` of `first`, or of
/// `second` when bit 6 is set.
fn permt2b(first: &[u8; 64], idx: &[u8; 64], second: &[u8; 64]) -> [u8; 64] {
    std::array::from_fn(|j| {
        let i = idx[j] as usize;
        let src = if i & 64 != 0 { second } else { first };
        src[i & 63]
    })
}

#[test]
fn q4_0_byte_and_word_gathers_pick_the_nibbles_and_scales() {
    let (first, second) = loads();
    let nibbles = permt2w(&first, &Q4_0_NIBBLES, &second);
    assert_eq!(permt2b(&first, &Q4_0_NIBBLE_BYTES, &second), nibbles);
    // Block k's sixteen nibble bytes, 18k + 2 .. 18k + 18, in block order.
    let expected: [u8; 64] = std::array::from_fn(|j| (18 * (j / 16) + 2 + j % 16) as u8);
    assert_eq!(nibbles, expected);
    // One-source permutes (`vpermw`, `vpermb`) read `first` alone: the rule of the
    // two-source ones with the selecting bit clear.
    let scales = permt2w(&first, &Q4_0_SCALES, &first);
    assert_eq!(permt2b(&first, &Q4_0_SCALE_BYTES, &first)[..8], scales[..8]);
    // The four f16 scales, bytes 18k and 18k + 1.
    assert_eq!(scales[..8], [0, 1, 18, 19, 36, 37, 54, 55]);
}

#[test]
fn every_rule_walk_is_compiled_for_its_body() {
    use super::super::x86_walk::{LONG_ROW_INPUTS, WideAccess, compiled};
    use super::{Q4_0Avx2, Q4_0Wide, Q4KWide, Q6KWide, Q8_0Wide};
    use crate::WeightFormat::{Q4_0, Q4K, Q6K, Q8_0};
    for vendor in [&b"GenuineIntel"[..], b"AuthenticAMD", b""] {
        for n_in in [4096, LONG_ROW_INPUTS, 28672] {
            for threads in [1, 2, 16] {
                let rule = WideAccess::of_vendor(vendor, n_in, threads);
                let at = format!("{vendor:?}, {n_in} inputs, {threads} threads");
                assert!(compiled::<Q8_0Wide>(rule.of(Q8_0)), "q8_0, {at}");
                assert!(compiled::<Q4_0Wide<true>>(rule.of(Q4_0)), "q4_0, {at}");
                assert!(compiled::<Q4_0Wide<false>>(rule.of(Q4_0)), "q4_0, {at}");
                assert!(compiled::<Q4_0Avx2>(rule.of(Q4_0)), "q4_0 AVX2, {at}");
                assert!(compiled::<Q4KWide>(rule.of(Q4K)), "q4_K, {at}");
                assert!(compiled::<Q6KWide>(rule.of(Q6K)), "q6_K, {at}");
            }
        }
    }
}
