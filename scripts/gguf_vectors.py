#!/usr/bin/env python3
"""Generate the GGUF weight-format test vectors of crates/matmul-kernel/tests/data/.

The reference is gguf-py (the `gguf` package on PyPI, the Python side of llama.cpp): its numpy
dequantizers for every format and its quantizers for f16, bf16, q8_0 and q4_0. The vectors are
generated once and committed; `cargo test -p matmul-kernel` checks the crate against them bit
for bit. Run it again only to regenerate them, e.g. with another gguf-py version:

    pip install gguf==0.19.0
    python3 scripts/gguf_vectors.py [OUTPUT_DIR]

One JSON file per format, `gguf_<format>.json`, holding the gguf-py and numpy versions, the
format's ggml type id, block size and bytes per block as gguf-py declares them, and two lists
of cases:

- `dequantize`: `bytes` (hex of the raw block bytes, as they lie in a .gguf file) and `f32_bits`
  (what gguf-py's dequantizer returns, each value's IEEE-754 bit pattern as 8 hex digits);
- `quantize` (f16, bf16, q8_0, q4_0 only): `f32_bits` (the input) and `bytes` (what gguf-py's
  quantizer returns).

The generator is deterministic (a fixed seed).
"""

import json
import pathlib
import sys
from importlib.metadata import version

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

RNG = np.random.default_rng(20260001)

FORMATS = {
    "f32": T.F32,
    "f16": T.F16,
    "bf16": T.BF16,
    "q8_0": T.Q8_0,
    "q4_0": T.Q4_0,
    "q4_K": T.Q4_K,
    "q6_K": T.Q6_K,
}

# f16 bit patterns for scales: a normal one, the largest, the smallest normal, subnormals,
# negative ones.
F16_ONE = 0x3C00
F16_SCALES = {
    "one": 0x3C00,
    "negative": 0xBC00,
    "max": 0x7BFF,
    "min_normal": 0x0400,
    "subnormal": 0x0001,
    "largest_subnormal": 0x03FF,
    "negative_subnormal": 0x8201,
    "small": 0x1E66,
}


def f16_bytes(bits):
    return int(bits).to_bytes(2, "little")


def random_finite_f16(n):
    """Random f16 bit patterns with every finite exponent, subnormals included."""
    bits = RNG.integers(0, 1 << 16, size=n, dtype=np.uint32)
    exp = (bits >> 10) & 0x1F
    bits = np.where(exp == 0x1F, bits & 0x83FF, bits)  # fold inf/NaN onto subnormals
    return [int(b) for b in bits]


def f32_hex(values):
    return "".join(f"{int(b):08x}" for b in np.asarray(values, dtype=np.float32).view(np.uint32).ravel())


def deq_case(fmt, name, raw):
    raw = bytes(raw)
    block_size, type_size = GGML_QUANT_SIZES[FORMATS[fmt]]
    assert len(raw) % type_size == 0, (fmt, name, len(raw))
    out = dequantize(np.frombuffer(raw, dtype=np.uint8).copy(), FORMATS[fmt])
    out = np.asarray(out, dtype=np.float32).ravel()
    assert out.size == len(raw) // type_size * block_size
    return {"name": name, "bytes": raw.hex(), "f32_bits": f32_hex(out)}


def q_case(name, fmt, values):
    values = np.asarray(values, dtype=np.float32)
    out = quantize(values.reshape(1, -1), FORMATS[fmt])
    return {"name": name, "f32_bits": f32_hex(values), "bytes": np.asarray(out).view(np.uint8).tobytes().hex()}


def float_cases(fmt):
    """f32, f16 and bf16: a block is one value; each case is a short row."""
    if fmt == "f32":
        specials = [0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x7F7FFFFF, 0xFF7FFFFF,
                    0x00800000, 0x00000001, 0x807FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000]
        raw = b"".join(int(b).to_bytes(4, "little") for b in specials)
        rand = RNG.standard_normal(16).astype(np.float32).tobytes()
        return [deq_case(fmt, "specials", raw), deq_case(fmt, "random", rand)], []
    if fmt == "f16":
        specials = [0x0000, 0x8000, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF, 0x0400, 0x0001, 0x83FF,
                    0x7C00, 0xFC00, 0x7E00, 0x3555]
        deq = [deq_case(fmt, "specials", b"".join(f16_bytes(b) for b in specials)),
               deq_case(fmt, "random", b"".join(f16_bytes(b) for b in random_finite_f16(32)))]
        # Rounding: ties to even, into and out of subnormals, the largest finite value.
        edge = np.array([0.0, -0.0, 1.0, 1.0 + 2**-11, 1.0 + 3 * 2**-11, 1.0 + 2**-12,
                         65504.0, 65519.0, -65519.0, 2**-24, 2**-25, 3 * 2**-26, 2**-26,
                         6.1e-5, -6.0e-8, 0.1], dtype=np.float32)
        rnd = RNG.standard_normal(16).astype(np.float32) * np.float32(100)
        return deq, [q_case("edges", fmt, edge), q_case("random", fmt, rnd)]
    assert fmt == "bf16"
    specials = [0x0000, 0x8000, 0x3F80, 0xBF80, 0x7F7F, 0xFF7F, 0x0080, 0x0001, 0x807F,
                0x7F80, 0xFF80, 0x7FC0, 0x4049]
    rand = [int(b) for b in RNG.integers(0, 1 << 16, size=32)]
    rand = [b & 0x807F if (b >> 7) & 0xFF == 0xFF else b for b in rand]
    deq = [deq_case(fmt, "specials", b"".join(f16_bytes(b) for b in specials)),
           deq_case(fmt, "random", b"".join(f16_bytes(b) for b in rand))]
    edge_bits = np.array([0x00000000, 0x80000000, 0x3F800000, 0x3F808000, 0x3F818000, 0x3F808001,
                          0x3F80FFFF, 0x00000001, 0x00008000, 0x00018000, 0x807FFFFF, 0x7F7F0000,
                          0x7F7F7FFF, 0xC0490FDB, 0x3DCCCCCD, 0x477FE000], dtype=np.uint32)
    rnd = RNG.standard_normal(16).astype(np.float32)
    return deq, [q_case("edges", fmt, edge_bits.view(np.float32)), q_case("random", fmt, rnd)]


def q8_0_block(d_bits, qs):
    return f16_bytes(d_bits) + np.asarray(qs, dtype=np.int8).tobytes()


def q4_0_block(d_bits, nibbles):
    nib = np.asarray(nibbles, dtype=np.uint8)
    return f16_bytes(d_bits) + (nib[:16] | (nib[16:] << 4)).astype(np.uint8).tobytes()


def q8_0_cases():
    deq = [
        deq_case("q8_0", "all_zero", bytes(34)),
        deq_case("q8_0", "max_codes", q8_0_block(F16_ONE, [127] * 32)),
        deq_case("q8_0", "min_codes", q8_0_block(F16_ONE, [-128] * 32)),
        deq_case("q8_0", "every_code_max_scale",
                 q8_0_block(F16_SCALES["max"], list(range(-128, -96)))
                 + q8_0_block(F16_SCALES["max"], list(range(96, 128)))),
    ]
    for name in ("negative", "subnormal", "largest_subnormal", "negative_subnormal", "min_normal"):
        qs = RNG.integers(-128, 128, size=32)
        deq.append(deq_case("q8_0", f"{name}_scale", q8_0_block(F16_SCALES[name], qs)))
    rand = b"".join(q8_0_block(d, RNG.integers(-128, 128, size=32)) for d in random_finite_f16(4))
    deq.append(deq_case("q8_0", "random", rand))
    return deq, quantize_32_cases("q8_0")


def q4_0_cases():
    deq = [
        deq_case("q4_0", "all_zero", bytes(18)),
        deq_case("q4_0", "max_codes", q4_0_block(F16_ONE, [15] * 32)),
        deq_case("q4_0", "min_codes", q4_0_block(F16_ONE, [0] * 32)),
        deq_case("q4_0", "every_code_max_scale", q4_0_block(F16_SCALES["max"], list(range(16)) * 2)),
        deq_case("q4_0", "nibble_order", q4_0_block(F16_ONE, list(range(16)) + list(range(15, -1, -1)))),
    ]
    for name in ("negative", "subnormal", "largest_subnormal", "negative_subnormal", "min_normal"):
        deq.append(deq_case("q4_0", f"{name}_scale", q4_0_block(F16_SCALES[name], RNG.integers(0, 16, size=32))))
    rand = b"".join(q4_0_block(d, RNG.integers(0, 16, size=32)) for d in random_finite_f16(4))
    deq.append(deq_case("q4_0", "random", rand))
    return deq, quantize_32_cases("q4_0")


def quantize_32_cases(fmt):
    """Inputs for the 32-weight quantizers: edges first, then random blocks."""
    one_hot = np.zeros(32, dtype=np.float32)
    one_hot[5] = -3.0
    ties = (np.arange(32, dtype=np.float32) - 16) * np.float32(0.5)
    equal_magnitude = np.where(np.arange(32) % 2 == 0, 1.0, -1.0).astype(np.float32)
    cases = [
        q_case("all_zero", fmt, np.zeros(32, dtype=np.float32)),
        q_case("one_hot_negative", fmt, one_hot),
        q_case("ties", fmt, ties),
        q_case("equal_magnitude", fmt, equal_magnitude),
        q_case("ramp", fmt, np.linspace(-1, 1, 32, dtype=np.float32)),
        q_case("large", fmt, RNG.standard_normal(32).astype(np.float32) * np.float32(1e5)),
        q_case("tiny", fmt, RNG.standard_normal(32).astype(np.float32) * np.float32(1e-6)),
    ]
    rnd = RNG.standard_normal(32 * 4).astype(np.float32)
    cases.append(q_case("random", fmt, rnd))
    return cases


def q4_k_block(d_bits, dmin_bits, scales, qs):
    assert len(scales) == 12 and len(qs) == 128
    return f16_bytes(d_bits) + f16_bytes(dmin_bits) + bytes(scales) + bytes(qs)


def q4_k_cases():
    rb = lambda n: [int(b) for b in RNG.integers(0, 256, size=n)]  # noqa: E731
    deq = [
        deq_case("q4_K", "all_zero", bytes(144)),
        deq_case("q4_K", "max_codes", q4_k_block(F16_ONE, F16_ONE, [0xFF] * 12, [0xFF] * 128)),
        deq_case("q4_K", "min_codes", q4_k_block(F16_ONE, F16_ONE, [0] * 12, [0] * 128)),
        deq_case("q4_K", "max_scales_zero_codes", q4_k_block(F16_ONE, F16_ONE, [0xFF] * 12, [0] * 128)),
        deq_case("q4_K", "max_scale_values", q4_k_block(F16_SCALES["max"], F16_SCALES["max"], rb(12), rb(128))),
        deq_case("q4_K", "negative_scales", q4_k_block(F16_SCALES["negative"], 0xC000, rb(12), rb(128))),
        deq_case("q4_K", "subnormal_scales",
                 q4_k_block(F16_SCALES["subnormal"], F16_SCALES["negative_subnormal"], rb(12), rb(128))),
    ]
    d, dmin = random_finite_f16(3), random_finite_f16(3)
    rand = b"".join(q4_k_block(d[i], dmin[i], rb(12), rb(128)) for i in range(3))
    deq.append(deq_case("q4_K", "random", rand))
    return deq, []


def q6_k_block(ql, qh, scales, d_bits):
    assert len(ql) == 128 and len(qh) == 64 and len(scales) == 16
    return bytes(ql) + bytes(qh) + np.asarray(scales, dtype=np.int8).tobytes() + f16_bytes(d_bits)


def q6_k_cases():
    rb = lambda n: [int(b) for b in RNG.integers(0, 256, size=n)]  # noqa: E731
    rs = lambda: RNG.integers(-128, 128, size=16)  # noqa: E731
    deq = [
        deq_case("q6_K", "all_zero", bytes(210)),
        deq_case("q6_K", "max_codes", q6_k_block([0xFF] * 128, [0xFF] * 64, [127] * 16, F16_ONE)),
        deq_case("q6_K", "min_codes", q6_k_block([0] * 128, [0] * 64, [-128] * 16, F16_ONE)),
        deq_case("q6_K", "max_scale_values", q6_k_block(rb(128), rb(64), [127, -128] * 8, F16_SCALES["max"])),
        deq_case("q6_K", "negative_scale", q6_k_block(rb(128), rb(64), rs(), F16_SCALES["negative"])),
        deq_case("q6_K", "subnormal_scale", q6_k_block(rb(128), rb(64), rs(), F16_SCALES["subnormal"])),
        deq_case("q6_K", "negative_subnormal_scale",
                 q6_k_block(rb(128), rb(64), rs(), F16_SCALES["negative_subnormal"])),
    ]
    rand = b"".join(q6_k_block(rb(128), rb(64), rs(), d) for d in random_finite_f16(3))
    deq.append(deq_case("q6_K", "random", rand))
    return deq, []


def main():
    out_dir = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else (
        pathlib.Path(__file__).resolve().parent.parent / "crates/matmul-kernel/tests/data")
    out_dir.mkdir(parents=True, exist_ok=True)
    builders = {
        "f32": lambda: float_cases("f32"),
        "f16": lambda: float_cases("f16"),
        "bf16": lambda: float_cases("bf16"),
        "q8_0": q8_0_cases,
        "q4_0": q4_0_cases,
        "q4_K": q4_k_cases,
        "q6_K": q6_k_cases,
    }
    for fmt, build in builders.items():
        deq, quant = build()
        block_size, type_size = GGML_QUANT_SIZES[FORMATS[fmt]]
        doc = {
            "generator": "scripts/gguf_vectors.py",
            "gguf_version": version("gguf"),
            "numpy_version": np.__version__,
            "format": fmt,
            "ggml_type": int(FORMATS[fmt]),
            "block_size": block_size,
            "block_bytes": type_size,
            "dequantize": deq,
            "quantize": quant,
        }
        path = out_dir / f"gguf_{fmt}.json"
        path.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"{path}: {len(deq)} dequantize, {len(quant)} quantize cases")


if __name__ == "__main__":
    main()
