//! The dispatch table: which body runs a GEMV ([`gemv_body`]) and a GEMM ([`gemm_body`]) of
//! each weight format at each ISA level, written once; the x86 dispatch (`x86.rs`,
//! `quant/x86.rs`) follows it, and [`Kernel::gemv_body`](crate::Kernel::gemv_body) reports it,
//! so that a profile and `sipllm --json` say which body each format ran.
//!
//! GEMV:
//!
//! | level \ format  | f32          | f16, bf16    | q8_0         | q4_0          | q4_K, q6_K    |
//! |-----------------|--------------|--------------|--------------|---------------|---------------|
//! | `portable`      | `f32-rows`   | `reference`  | `reference`  | `reference`   | `reference`   |
//! | `neon`          | `f32-rows`   | `neon-f32`   | `neon-smull` | `neon-smull`  | `neon-smull`  |
//! | `neon-dotprod`  | `f32-rows`   | `neon-f32`   | `neon-sdot`  | `neon-sdot`   | `neon-sdot`   |
//! | `avx2`          | `avx2-f32`   | `avx2-f32`   | `avx2-int`   | `avx2-wide`   | `avx2-int`    |
//! | `avx512`        | `avx512-f32` | `avx512-f32` | `avx2-int`   | `avx2-wide`   | `avx2-int`    |
//! | `avx512-vnni`   | `avx512-f32` | `avx512-f32` | `vnni-wide`  | `vnni-wide`   | `vnni-wide`   |
//!
//! GEMM (several activation rows):
//!
//! | level \ format  | f32           | f16, bf16         | q8_0            | q4_0            | q4_K, q6_K      |
//! |-----------------|---------------|-------------------|-----------------|-----------------|-----------------|
//! | `portable`      | `gemv-rows`   | `gemv-rows`       | `gemv-rows`     | `gemv-rows`     | `gemv-rows`     |
//! | `neon`          | `gemv-rows`   | `gemv-rows`       | `gemv-rows`     | `gemv-rows`     | `gemv-rows`     |
//! | `neon-dotprod`  | `gemv-rows`   | `gemv-rows`       | `gemv-rows`     | `gemv-rows`     | `gemv-rows`     |
//! | `avx2`          | `f32-blocked` | `avx2-f32-tile`   | `avx2-int-rows` | `maddubs-tile`  | `maddubs-tile`  |
//! | `avx512`        | `f32-blocked` | `avx512-f32-tile` | `avx2-int-rows` | `maddubs-tile`  | `maddubs-tile`  |
//! | `avx512-vnni`   | `f32-blocked` | `avx512-f32-tile` | `vnni-tile`     | `vnni-tile`     | `vnni-tile`     |
//!
//! (`avx512` is an AVX-512 CPU without VNNI: its quantized formats run AVX2's integer
//! bodies. A test holds both tables to [`gemv_body`] and [`gemm_body`].) The f32 column is
//! also what the entry points on f32 slices run: [`Exec::gemv`](crate::Exec::gemv) the GEMV
//! table's, [`Exec::gemm`](crate::Exec::gemm) `f32-blocked` on every ISA, so each ISA has one
//! f32 GEMV body and one f32 GEMM body; [`Exec::stream_read`](crate::Exec::stream_read) runs
//! the read of `kernel.rs`. The GEMV bodies, by file:
//! - `f32-rows`: the generic f32 GEMV of `kernel.rs` (four rows share each load of `x`);
//! - `reference`: the portable GEMV, weights widened to f32 (`quant/gemv.rs`);
//! - `neon-f32`, `neon-smull`, `neon-sdot`: `aarch64.rs`, `quant/aarch64.rs`;
//! - `avx2-f32`, `avx512-f32`: the widening FMA rows of `quant/x86_float.rs`, 8 or 16 lanes;
//! - `avx2-int`: the 256-bit integer bodies of `quant/x86_int.rs` (`vpmaddubsw`);
//! - `avx2-wide`: q4_0's AVX2 body on the grouped activation layout (`quant/x86_wide.rs`);
//! - `vnni-wide`: the 512-bit `vpdpbusd` bodies of `quant/x86_wide.rs` (q4_0's gathers its
//!   nibbles and scales by AVX512-VBMI's byte permutes where the CPU has them, by word
//!   permutes elsewhere: the same bits).
//!
//! Within a family the formats are types of one trait, picked once per call: on x86
//! `Widen` (the float formats, `quant/x86_float.rs`), `IntBody` (`quant/x86_int.rs`),
//! `WideBody` (`quant/x86_wide.rs`) and `TileFormat` (`quant/x86_tile.rs`); on NEON
//! `FloatWeights` and `QuantizedWeights` (`quant/aarch64.rs`).
//!
//! The GEMM bodies: `gemv-rows`, the GEMV body once per activation row; `f32-blocked`, the
//! blocked GEMM of `kernel.rs` that [`Exec::gemm`](crate::Exec::gemm) runs on f32 slices
//! (from revision 17 an f32 matrix runs it too on x86, so the f32 GEMM has one body there);
//! `avx2-f32-tile` and `avx512-f32-tile`, f16 and bf16 widened to f32, two weight rows
//! against two or four activation rows (`quant/x86_float.rs`, bitwise the GEMV); `avx2-int-rows`, q8_0's 256-bit body on two activation rows at
//! once (four on AVX-512 without VNNI; its `q + 128` codes would overflow `vpmaddubsw`'s pairs
//! in a tile); `maddubs-tile` and
//! `vnni-tile`, the repacked sixteen-row tiles of `quant/x86_tile.rs`.
//!
//! The rule behind the x86 rows: on AVX-512 with VNNI every quantized format runs its
//! 512-bit body, which needs fewer vector instructions per byte than the 256-bit one on both
//! vendors' cores (Zen 4 runs 512-bit instructions as two halves, Intel on two 512-bit
//! ports; `docs/matmul-kernel.md` has both vendors' figures and llvm-mca's cycles per block).
//! The one thing the vendors' tables split on is how the bodies walk the weights, a rule per
//! CPUID vendor in `quant/x86_walk.rs`. `WideAccess` for the integer bodies, a `Walk` per
//! format: on Intel 4 KiB of prefetch into L1, five lines per q8_0 step and four per q6_K
//! super-block, and three rows far apart at once (three streams); on AMD Zen 4 2 KiB, none
//! for q8_0 and q6_K, one row at a time (three for q4_0, q4_K and q6_K when one thread runs
//! the call), and on rows of 12288 inputs or more
//! Intel's walk 2 KiB ahead, but no lines for q8_0 and q6_K's 4 KiB
//! ahead into L2 (when one thread runs the call, q4_0 and q4_K six rows at
//! once); it walks `avx2-wide` too. `Fill::float_of_vendor` for `avx512-f32`: on
//! Intel a prefetch into L1 1 KiB ahead, on AMD into L2 8 KiB ahead. Each is the best its
//! vendor measured from DRAM.

use crate::quant::WeightFormat;

/// The ISA levels of the table: an [`Isa`](crate::Isa) with the extensions its integer
/// bodies use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IsaLevel {
    /// The portable reference.
    Portable,
    /// NEON without `dotprod`.
    Neon,
    /// NEON with `dotprod` (`SDOT`).
    NeonDotprod,
    /// AVX2 with FMA and F16C.
    Avx2,
    /// AVX-512F without VNNI.
    Avx512,
    /// AVX-512F with VNNI, VL and BW.
    Avx512Vnni,
}

impl IsaLevel {
    /// Every level, in the table's order.
    pub const ALL: [IsaLevel; 6] = [
        IsaLevel::Portable,
        IsaLevel::Neon,
        IsaLevel::NeonDotprod,
        IsaLevel::Avx2,
        IsaLevel::Avx512,
        IsaLevel::Avx512Vnni,
    ];

    /// The level's name in the table.
    pub fn name(self) -> &'static str {
        match self {
            IsaLevel::Portable => "portable",
            IsaLevel::Neon => "neon",
            IsaLevel::NeonDotprod => "neon-dotprod",
            IsaLevel::Avx2 => "avx2",
            IsaLevel::Avx512 => "avx512",
            IsaLevel::Avx512Vnni => "avx512-vnni",
        }
    }
}

/// One body of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GemvBody {
    /// The portable GEMV: weights widened to f32.
    Reference,
    /// The generic f32 GEMV of `kernel.rs` (`Exec::gemv` on NEON and the portable kernel):
    /// four rows at a time.
    F32Rows,
    /// NEON: float formats widened to f32, four lanes.
    NeonF32,
    /// NEON integer dot products by `SMULL` and pairwise additions.
    NeonSmull,
    /// NEON integer dot products by `SDOT`.
    NeonSdot,
    /// AVX2: float formats widened to f32, eight lanes of FMA.
    Avx2F32,
    /// AVX-512: float formats widened to f32, sixteen lanes of FMA.
    Avx512F32,
    /// The 256-bit integer bodies (`vpmaddubsw` + `vpmaddwd`).
    Avx2Int,
    /// q4_0's AVX2 body on the grouped activation layout.
    Avx2Wide,
    /// The 512-bit `vpdpbusd` bodies on their own activation layout.
    VnniWide,
}

impl GemvBody {
    /// The body's name, as the table, profiles and `sipllm --json` give it.
    pub fn name(self) -> &'static str {
        match self {
            GemvBody::Reference => "reference",
            GemvBody::F32Rows => "f32-rows",
            GemvBody::NeonF32 => "neon-f32",
            GemvBody::NeonSmull => "neon-smull",
            GemvBody::NeonSdot => "neon-sdot",
            GemvBody::Avx2F32 => "avx2-f32",
            GemvBody::Avx512F32 => "avx512-f32",
            GemvBody::Avx2Int => "avx2-int",
            GemvBody::Avx2Wide => "avx2-wide",
            GemvBody::VnniWide => "vnni-wide",
        }
    }

    /// Whether the body reads the activation codes in its own order
    /// (`quant::x86_layout::wide_order`), so a call quantizes them that way.
    pub(crate) fn wide_layout(self) -> bool {
        matches!(self, GemvBody::Avx2Wide | GemvBody::VnniWide)
    }
}

/// One GEMM body of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GemmBody {
    /// The GEMV body once per activation row.
    GemvRows,
    /// f32 weights: the blocked GEMM of `Exec::gemm` (`kernel.rs`: tiles of four weight rows
    /// × three or four activation rows, `K` in blocks of 512), in the level's lanes.
    F32Blocked,
    /// f16 and bf16, widened to f32: two weight rows × two activation rows, eight lanes.
    Avx2F32Tile,
    /// f16 and bf16, widened to f32: two weight rows × four activation rows, sixteen lanes.
    Avx512F32Tile,
    /// q8_0's 256-bit integer body on several activation rows at once.
    Avx2IntRows,
    /// The sixteen-row tiles with `vpmaddubsw` + `vpmaddwd`, eight lanes.
    MaddubsTile,
    /// The sixteen-row tiles with 512-bit `vpdpbusd`.
    VnniTile,
}

impl GemmBody {
    /// The body's name, as the table gives it.
    pub fn name(self) -> &'static str {
        match self {
            GemmBody::GemvRows => "gemv-rows",
            GemmBody::F32Blocked => "f32-blocked",
            GemmBody::Avx2F32Tile => "avx2-f32-tile",
            GemmBody::Avx512F32Tile => "avx512-f32-tile",
            GemmBody::Avx2IntRows => "avx2-int-rows",
            GemmBody::MaddubsTile => "maddubs-tile",
            GemmBody::VnniTile => "vnni-tile",
        }
    }

    /// Whether the body is a repacked tile of `quant/x86_tile.rs`.
    pub(crate) fn is_int_tile(self) -> bool {
        matches!(self, GemmBody::MaddubsTile | GemmBody::VnniTile)
    }
}

/// The body a GEMM of `format` runs at `level`: the GEMM table of [the module docs](self).
pub fn gemm_body(level: IsaLevel, format: WeightFormat) -> GemmBody {
    let float = !format.is_quantized();
    match level {
        IsaLevel::Portable | IsaLevel::Neon | IsaLevel::NeonDotprod => GemmBody::GemvRows,
        _ if format == WeightFormat::F32 => GemmBody::F32Blocked,
        IsaLevel::Avx2 if float => GemmBody::Avx2F32Tile,
        IsaLevel::Avx512 | IsaLevel::Avx512Vnni if float => GemmBody::Avx512F32Tile,
        IsaLevel::Avx2 | IsaLevel::Avx512 if format == WeightFormat::Q8_0 => GemmBody::Avx2IntRows,
        IsaLevel::Avx2 | IsaLevel::Avx512 => GemmBody::MaddubsTile,
        IsaLevel::Avx512Vnni => GemmBody::VnniTile,
    }
}

/// The body a GEMV of `format` runs at `level`: the GEMV table of [the module docs](self).
pub fn gemv_body(level: IsaLevel, format: WeightFormat) -> GemvBody {
    use WeightFormat as F;
    let float = !format.is_quantized();
    match level {
        IsaLevel::Portable | IsaLevel::Neon | IsaLevel::NeonDotprod if format == F::F32 => {
            GemvBody::F32Rows
        }
        IsaLevel::Portable => GemvBody::Reference,
        IsaLevel::Neon if float => GemvBody::NeonF32,
        IsaLevel::Neon => GemvBody::NeonSmull,
        IsaLevel::NeonDotprod if float => GemvBody::NeonF32,
        IsaLevel::NeonDotprod => GemvBody::NeonSdot,
        IsaLevel::Avx2 if float => GemvBody::Avx2F32,
        IsaLevel::Avx512 | IsaLevel::Avx512Vnni if float => GemvBody::Avx512F32,
        IsaLevel::Avx2 | IsaLevel::Avx512 if format == F::Q4_0 => GemvBody::Avx2Wide,
        IsaLevel::Avx2 | IsaLevel::Avx512 => GemvBody::Avx2Int,
        IsaLevel::Avx512Vnni => GemvBody::VnniWide,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One table of the module docs, parsed back: the formats of each column (from its
    /// header) and `(level, [body per column])` per row.
    struct DocTable {
        columns: Vec<Vec<WeightFormat>>,
        rows: Vec<(String, Vec<String>)>,
    }

    /// The cells of a table line of the module docs, without the backticks.
    fn cells(line: &str) -> Vec<String> {
        line.split('|')
            .map(|c| c.trim().trim_matches('`').to_string())
            .filter(|c| !c.is_empty())
            .collect()
    }

    /// The module doc's tables, the GEMV's then the GEMM's.
    fn doc_tables() -> Vec<DocTable> {
        let mut tables: Vec<DocTable> = Vec::new();
        for line in include_str!("bodies.rs").lines() {
            if let Some(header) = line.strip_prefix("//! | level") {
                let columns = cells(header)[1..]
                    .iter()
                    .map(|c| c.split(',').map(|f| f.trim().parse().unwrap()).collect())
                    .collect();
                let rows = Vec::new();
                tables.push(DocTable { columns, rows });
            } else if let Some(row) = line.strip_prefix("//! | `") {
                let cells = cells(row);
                let table = tables.last_mut().expect("a row before any header");
                table.rows.push((cells[0].clone(), cells[1..].to_vec()));
            }
        }
        tables
    }

    #[test]
    fn the_module_docs_show_the_table_as_it_is() {
        let tables = doc_tables();
        assert_eq!(tables.len(), 2, "a GEMV and a GEMM table");
        let body_of = |op: usize, level, format| match op {
            0 => gemv_body(level, format).name(),
            _ => gemm_body(level, format).name(),
        };
        for (op, table) in tables.iter().enumerate() {
            let mut formats: Vec<WeightFormat> = table.columns.concat();
            formats.sort_by_key(|f| f.name());
            let mut all = WeightFormat::ALL.to_vec();
            all.sort_by_key(|f| f.name());
            assert_eq!(formats, all, "every format has one column");
            let levels: Vec<&str> = table.rows.iter().map(|(l, _)| l.as_str()).collect();
            let expected: Vec<&str> = IsaLevel::ALL.iter().map(|l| l.name()).collect();
            assert_eq!(levels, expected);
            for (level, (_, cells)) in IsaLevel::ALL.into_iter().zip(&table.rows) {
                assert_eq!(cells.len(), table.columns.len(), "{}", level.name());
                for (column, cell) in table.columns.iter().zip(cells) {
                    for format in column {
                        assert_eq!(
                            body_of(op, level, *format),
                            cell,
                            "{} {format}",
                            level.name()
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn only_the_wide_bodies_read_the_wide_layout() {
        for level in IsaLevel::ALL {
            for format in WeightFormat::ALL {
                let body = gemv_body(level, format);
                assert_eq!(
                    body.wide_layout(),
                    body.name().ends_with("-wide"),
                    "{} {format}",
                    level.name()
                );
            }
        }
    }
}
