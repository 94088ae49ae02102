//! The generic f32 bodies, written against [`SimdF32`] and instantiated per ISA: the GEMV of
//! NEON and the portable kernel (x86's f32 GEMV is the float formats' body,
//! `quant/x86_float.rs`), the blocked GEMM and the read of every ISA.
//!
//! Every body is `#[inline(always)]`: it is compiled inside a thin wrapper that carries the
//! ISA's `#[target_feature]` (see `x86.rs`) or inside the portable wrapper, so one source
//! gives every instruction set. The order of floating-point operations for one output element
//! depends only on the ISA and the shape, never on which other rows share a block, which is
//! what makes the parallel entry points bitwise deterministic.

#![allow(
    clippy::needless_range_loop,
    reason = "indexed loops over register arrays read like the math and unroll the same"
)]

/// Whether a slice of `len` floats holds `n_rows` rows of `row_len` (no overflow): the
/// length check of every safe per-ISA entry point.
pub(crate) fn rows_fit(len: usize, n_rows: usize, row_len: usize) -> bool {
    n_rows.checked_mul(row_len).is_some_and(|need| need <= len)
}

/// `bytes` as the f32s they hold (little-endian, as every supported target), when they start
/// on a 4-byte boundary and are whole f32s: a [`WeightMatrix`](crate::WeightMatrix) of f32
/// rows always does (its buffer is 64-byte aligned), so the f32 entry points run on it.
pub(crate) fn as_f32(bytes: &[u8]) -> Option<&[f32]> {
    // SAFETY: every bit pattern is an f32, and `align_to` returns only the aligned middle.
    let (head, floats, tail) = unsafe { bytes.align_to::<f32>() };
    (head.is_empty() && tail.is_empty()).then_some(floats)
}

/// A vector of `LANES` f32 lanes and the few operations the kernels need.
///
/// # Safety
/// Implementations call ISA intrinsics: every method may only be called from code compiled
/// for (and running on a CPU with) the implementor's instruction set, and pointer arguments
/// must be valid for the reads described on each method.
pub(crate) unsafe trait SimdF32 {
    /// Lanes per vector.
    const LANES: usize;
    /// The vector type.
    type V: Copy;
    /// All lanes zero.
    ///
    /// # Safety
    /// The CPU supports the implementor's ISA.
    unsafe fn zero() -> Self::V;
    /// Loads `LANES` floats from `p` (no alignment required).
    ///
    /// # Safety
    /// `p..p + LANES` is readable; the CPU supports the ISA.
    unsafe fn load(p: *const f32) -> Self::V;
    /// Loads `n < LANES` floats from `p`; the other lanes are zero.
    ///
    /// # Safety
    /// `p..p + n` is readable; the CPU supports the ISA.
    unsafe fn load_partial(p: *const f32, n: usize) -> Self::V;
    /// `a * b + acc` (fused where the ISA has FMA).
    ///
    /// # Safety
    /// The CPU supports the ISA.
    unsafe fn mul_add(a: Self::V, b: Self::V, acc: Self::V) -> Self::V;
    /// Lane-wise `a + b`.
    ///
    /// # Safety
    /// The CPU supports the ISA.
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    /// The sum of all lanes, in a fixed pairwise order.
    ///
    /// # Safety
    /// The CPU supports the ISA.
    unsafe fn reduce_sum(v: Self::V) -> f32;
}

/// Output rows per GEMV block: four rows share each load of `x`.
const GEMV_ROWS: usize = 4;

/// Weight rows per GEMM block.
const GEMM_W_ROWS: usize = 4;

/// Columns of `K` per GEMM cache block: a 4-row weight block of this length (8 KiB) stays in
/// L1 while every row of `X` passes over it. A multiple of every ISA's lane count; chosen by
/// measurement among 128, 256, 384 and 512 (see `docs/matmul-kernel.md`).
const GEMM_KC: usize = 512;

/// Weight rows per GEMM super-block: the `X` panel of one `K` block is reused by this many
/// weight rows before the next `K` block. Chosen by measurement against 16 and 32 (see
/// `docs/matmul-kernel.md`).
const GEMM_NB: usize = 64;

/// Rows of `X` per GEMM pass (the largest batch); bounds the scratch of partial sums.
const GEMM_MB: usize = 64;

/// `y[r] = dot(w[r·n_in ..], x)` for every `r < y.len()`; `w` holds `y.len()` rows of `x.len()`.
///
/// # Safety
/// `w.len() >= y.len() * x.len()`; the CPU supports `S`'s ISA.
#[inline(always)]
pub(crate) unsafe fn gemv_rows<S: SimdF32>(w: &[f32], x: &[f32], y: &mut [f32]) {
    let n_in = x.len();
    let n_out = y.len();
    debug_assert!(w.len() >= n_out * n_in);
    let mut row = 0;
    while row + GEMV_ROWS <= n_out {
        // SAFETY: rows `row..row + 4` lie inside `w` by the caller's contract.
        unsafe {
            let out = &mut *(y.as_mut_ptr().add(row) as *mut [f32; GEMV_ROWS]);
            dot_rows::<S, GEMV_ROWS>(w.as_ptr().add(row * n_in), n_in, x.as_ptr(), out);
        }
        row += GEMV_ROWS;
    }
    while row < n_out {
        // SAFETY: row `row` lies inside `w` by the caller's contract.
        unsafe {
            let out = &mut *(y.as_mut_ptr().add(row) as *mut [f32; 1]);
            dot_rows::<S, 1>(w.as_ptr().add(row * n_in), n_in, x.as_ptr(), out);
        }
        row += 1;
    }
}

/// `R` dot products of consecutive weight rows (stride `n_in`) with `x`, sharing the loads of
/// `x`. Each row has two vector accumulators: even vectors of the row go to the first, odd ones
/// and the partial tail to the second; the result is `reduce_sum(acc0 + acc1)`. This order is
/// the same for `R = 4` and `R = 1`, so a row's value does not depend on its block.
///
/// # Safety
/// `w..w + R·n_in` and `x..x + n_in` are readable; the CPU supports `S`'s ISA.
#[inline(always)]
unsafe fn dot_rows<S: SimdF32, const R: usize>(
    w: *const f32,
    n_in: usize,
    x: *const f32,
    out: &mut [f32; R],
) {
    let lanes = S::LANES;
    // SAFETY: every load below stays inside `x[..n_in]` and `w[..R·n_in]` by the loop bounds;
    // the ISA is supported by the caller's contract.
    unsafe {
        let mut acc0 = [S::zero(); R];
        let mut acc1 = [S::zero(); R];
        let mut k = 0;
        while k + 2 * lanes <= n_in {
            let x0 = S::load(x.add(k));
            let x1 = S::load(x.add(k + lanes));
            for r in 0..R {
                let row = w.add(r * n_in + k);
                acc0[r] = S::mul_add(S::load(row), x0, acc0[r]);
                acc1[r] = S::mul_add(S::load(row.add(lanes)), x1, acc1[r]);
            }
            k += 2 * lanes;
        }
        if k + lanes <= n_in {
            let x0 = S::load(x.add(k));
            for r in 0..R {
                acc0[r] = S::mul_add(S::load(w.add(r * n_in + k)), x0, acc0[r]);
            }
            k += lanes;
        }
        if k < n_in {
            let tail = n_in - k;
            let xt = S::load_partial(x.add(k), tail);
            for r in 0..R {
                acc1[r] = S::mul_add(S::load_partial(w.add(r * n_in + k), tail), xt, acc1[r]);
            }
        }
        for r in 0..R {
            out[r] = S::reduce_sum(S::add(acc0[r], acc1[r]));
        }
    }
}

/// The dimensions of one GEMM call: `X` is `m × n_in`, `W` is `n_out × n_in`, `Y` is `m × n_out`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GemmDims {
    pub m: usize,
    pub n_in: usize,
    pub n_out: usize,
}

/// Storage for one [`SimdF32::V`] of any ISA (at most 64 bytes, 64-byte aligned).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
pub(crate) struct VecSlot(pub(crate) [f32; 16]);

/// `x` copied to the start of a 64-byte line (its rows of `n_in` stay on line starts when
/// `n_in` is a multiple of 16), or `None` when it is there already or its rows would not be.
pub(crate) fn on_lines(x: &[f32], n_in: usize) -> Option<Vec<VecSlot>> {
    if x.as_ptr().cast::<VecSlot>().is_aligned() || !n_in.is_multiple_of(16) {
        return None;
    }
    let mut out = vec![VecSlot([0.0; 16]); x.len().div_ceil(16)];
    fill_slots(&mut out, x);
    Some(out)
}

/// `values` copied into `slots` from the first, sixteen a slot (the last slot's rest as it
/// was); `slots` holds at least `values.len()` values.
pub(crate) fn fill_slots(slots: &mut [VecSlot], values: &[f32]) {
    debug_assert!(values.len() <= 16 * slots.len());
    for (slot, values) in slots.iter_mut().zip(values.chunks(16)) {
        slot.0[..values.len()].copy_from_slice(values);
    }
}

/// The first `n` values of `slots`.
pub(crate) fn slots_as_f32(slots: &[VecSlot], n: usize) -> &[f32] {
    assert!(n <= 16 * slots.len());
    // SAFETY: a `VecSlot` is sixteen f32 and nothing else (`repr(C)`, size 64 = its
    // alignment), so the slots are `16 · slots.len() ≥ n` f32 in a row.
    unsafe { std::slice::from_raw_parts(slots.as_ptr().cast::<f32>(), n) }
}

thread_local! {
    /// Each thread's GEMM partial sums, reused across calls (`GEMM_MB × GEMM_NB` slots).
    static GEMM_SCRATCH: std::cell::Cell<Vec<VecSlot>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Columns `cols` of `Y = X·Wᵀ` (weight rows `cols`), written through `y`.
///
/// Loop order: rows of `X` in passes of [`GEMM_MB`] (one pass for m ≤ 64, so every weight row
/// is read from memory once); weight rows in super-blocks of [`GEMM_NB`]; `K` in blocks of
/// [`GEMM_KC`]; weight rows in blocks of 4; rows of `X` in tiles of `XR`. A block of 4 weight
/// rows × `GEMM_KC` columns stays in L1 while every row of `X` passes over it, and the `X`
/// panel of one `K` block stays in L2 for the whole super-block. Partial sums live in a
/// per-thread scratch between `K` blocks. Every `Y[i][j]` has one vector accumulator, fed in
/// increasing `k` (the tail last) and reduced with `reduce_sum`, so its value does not depend
/// on the block it was computed in.
///
/// # Safety
/// `x` holds `m·n_in` readable floats, `w` holds `n_out·n_in`, `y` points to `m·n_out` writable
/// floats of which no other thread touches columns `cols`; `cols.end <= n_out`; the CPU
/// supports `S`'s ISA.
#[inline(always)]
pub(crate) unsafe fn gemm_cols<S: SimdF32, const XR: usize>(
    dims: GemmDims,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    cols: std::ops::Range<usize>,
) {
    debug_assert!(size_of::<S::V>() <= size_of::<VecSlot>());
    let slots = GEMM_MB * GEMM_NB;
    // The scratch is taken out of the thread-local and put back, so a nested call finds an
    // empty one and allocates its own. No closure runs the kernel: a closure would not carry
    // the caller's `#[target_feature]`s and the intrinsics would not inline.
    // `try_with`: on a thread whose thread-locals are being destroyed (a call from another
    // thread-local's `Drop`), `with` would panic, and a panic there aborts the process; use
    // a scratch of this call's own instead.
    let mut scratch = GEMM_SCRATCH
        .try_with(std::cell::Cell::take)
        .unwrap_or_default();
    if scratch.len() < slots {
        scratch.resize(slots, VecSlot([0.0; 16]));
    }
    let acc = scratch.as_mut_ptr().cast::<S::V>();
    // SAFETY: the scratch holds `GEMM_MB·GEMM_NB` slots, each large and aligned enough for one
    // `S::V`, and is owned here; the rest is forwarded from the caller's contract.
    unsafe { gemm_cols_in::<S, XR>(dims, x, w, y, cols, acc) };
    // After destruction the scratch is simply dropped here.
    let _ = GEMM_SCRATCH.try_with(|cell| cell.set(scratch));
}

/// [`gemm_cols`] with its scratch `acc` (`GEMM_MB·GEMM_NB` vectors, row `i` of `X` at
/// `acc + i·GEMM_NB`).
///
/// # Safety
/// As [`gemm_cols`]; `acc` is valid for `GEMM_MB·GEMM_NB` vectors and used by no one else.
#[inline(always)]
unsafe fn gemm_cols_in<S: SimdF32, const XR: usize>(
    dims: GemmDims,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    cols: std::ops::Range<usize>,
    acc: *mut S::V,
) {
    let GemmDims { m, n_in, n_out } = dims;
    let mut i0 = 0;
    while i0 < m {
        let mb = GEMM_MB.min(m - i0);
        let mut j0 = cols.start;
        while j0 < cols.end {
            let nb = GEMM_NB.min(cols.end - j0);
            // SAFETY: all offsets stay inside `X` rows `i0..i0+mb`, weight rows `j0..j0+nb`
            // (owned columns), and the scratch (`mb <= GEMM_MB`, `nb <= GEMM_NB`).
            unsafe {
                for i in 0..mb {
                    for jb in 0..nb {
                        *acc.add(i * GEMM_NB + jb) = S::zero();
                    }
                }
                let mut k0 = 0;
                while k0 < n_in {
                    let kc = GEMM_KC.min(n_in - k0);
                    let x_panel = x.add(i0 * n_in + k0);
                    let mut jb = 0;
                    while jb + GEMM_W_ROWS <= nb {
                        let w_block = w.add((j0 + jb) * n_in + k0);
                        gemm_block::<S, GEMM_W_ROWS, XR>(
                            w_block,
                            x_panel,
                            n_in,
                            kc,
                            mb,
                            acc.add(jb),
                        );
                        jb += GEMM_W_ROWS;
                    }
                    while jb < nb {
                        let w_block = w.add((j0 + jb) * n_in + k0);
                        gemm_block::<S, 1, XR>(w_block, x_panel, n_in, kc, mb, acc.add(jb));
                        jb += 1;
                    }
                    k0 += kc;
                }
                for i in 0..mb {
                    let y_row = y.add((i0 + i) * n_out + j0);
                    for jb in 0..nb {
                        *y_row.add(jb) = S::reduce_sum(*acc.add(i * GEMM_NB + jb));
                    }
                }
            }
            j0 += nb;
        }
        i0 += mb;
    }
}

/// `kc` columns of `WR` weight rows against `mb` rows of `X`, in tiles of `XR` rows (then 2
/// and 1 for the remainder), accumulated into the scratch `acc` (row stride `GEMM_NB`).
///
/// # Safety
/// `w` (`WR` rows), `x` (`mb` rows) readable for `kc` columns at stride `n_in`; `acc` valid for
/// rows `0..mb` × columns `0..WR` at stride `GEMM_NB`; the CPU supports `S`'s ISA.
#[inline(always)]
unsafe fn gemm_block<S: SimdF32, const WR: usize, const XR: usize>(
    w: *const f32,
    x: *const f32,
    n_in: usize,
    kc: usize,
    mb: usize,
    acc: *mut S::V,
) {
    // SAFETY: tiles cover rows `0..mb` exactly; bounds forwarded from the caller.
    unsafe {
        let mut i = 0;
        while i + XR <= mb {
            gemm_tile::<S, WR, XR>(w, x.add(i * n_in), n_in, kc, acc.add(i * GEMM_NB));
            i += XR;
        }
        if XR > 2 && i + 2 <= mb {
            gemm_tile::<S, WR, 2>(w, x.add(i * n_in), n_in, kc, acc.add(i * GEMM_NB));
            i += 2;
        }
        while i < mb {
            gemm_tile::<S, WR, 1>(w, x.add(i * n_in), n_in, kc, acc.add(i * GEMM_NB));
            i += 1;
        }
    }
}

/// Accumulates `kc` columns of `WR` weight rows against `XR` rows of `X` into the scratch
/// `acc` (`acc[i·GEMM_NB + r]` for row `i` of the tile and weight row `r`).
///
/// # Safety
/// `w..` and `x..` are readable for `WR` (resp. `XR`) rows of stride `n_in` and length `kc`;
/// `acc` is valid as stated; the CPU supports `S`'s ISA.
#[inline(always)]
unsafe fn gemm_tile<S: SimdF32, const WR: usize, const XR: usize>(
    w: *const f32,
    x: *const f32,
    n_in: usize,
    kc: usize,
    acc: *mut S::V,
) {
    let lanes = S::LANES;
    // SAFETY: loads stay inside `kc` columns of the given rows; ISA by the caller's contract.
    unsafe {
        let mut a = [[S::zero(); WR]; XR];
        for i in 0..XR {
            for r in 0..WR {
                a[i][r] = *acc.add(i * GEMM_NB + r);
            }
        }
        let mut k = 0;
        while k + lanes <= kc {
            let mut xv = [S::zero(); XR];
            for (i, v) in xv.iter_mut().enumerate() {
                *v = S::load(x.add(i * n_in + k));
            }
            for r in 0..WR {
                let wv = S::load(w.add(r * n_in + k));
                for i in 0..XR {
                    a[i][r] = S::mul_add(wv, xv[i], a[i][r]);
                }
            }
            k += lanes;
        }
        if k < kc {
            let tail = kc - k;
            let mut xv = [S::zero(); XR];
            for (i, v) in xv.iter_mut().enumerate() {
                *v = S::load_partial(x.add(i * n_in + k), tail);
            }
            for r in 0..WR {
                let wv = S::load_partial(w.add(r * n_in + k), tail);
                for i in 0..XR {
                    a[i][r] = S::mul_add(wv, xv[i], a[i][r]);
                }
            }
        }
        for i in 0..XR {
            for r in 0..WR {
                *acc.add(i * GEMM_NB + r) = a[i][r];
            }
        }
    }
}

/// `sums[r] = Σ buf[r·row_len ..][..row_len]`: the STREAM-style read. It walks the rows with
/// exactly [`gemv_rows`]'s access pattern (four rows at a time, two vectors per row per step)
/// and only adds, so it is the physical ceiling of that pattern (on x86 the f32 GEMV is the
/// float formats' body, which walks eight rows with a prefetch).
///
/// # Safety
/// `buf.len() >= sums.len() * row_len`; the CPU supports `S`'s ISA.
#[inline(always)]
pub(crate) unsafe fn read_rows<S: SimdF32>(buf: &[f32], row_len: usize, sums: &mut [f32]) {
    let n_rows = sums.len();
    debug_assert!(buf.len() >= n_rows * row_len);
    let mut row = 0;
    while row + GEMV_ROWS <= n_rows {
        // SAFETY: rows `row..row + 4` lie inside `buf` by the caller's contract.
        unsafe {
            let out = &mut *(sums.as_mut_ptr().add(row) as *mut [f32; GEMV_ROWS]);
            sum_rows::<S, GEMV_ROWS>(buf.as_ptr().add(row * row_len), row_len, out);
        }
        row += GEMV_ROWS;
    }
    while row < n_rows {
        // SAFETY: row `row` lies inside `buf` by the caller's contract.
        unsafe {
            let out = &mut *(sums.as_mut_ptr().add(row) as *mut [f32; 1]);
            sum_rows::<S, 1>(buf.as_ptr().add(row * row_len), row_len, out);
        }
        row += 1;
    }
}

/// The sums of `R` consecutive rows of `row_len` floats, in the order of [`dot_rows`].
///
/// # Safety
/// `p..p + R·row_len` is readable; the CPU supports `S`'s ISA.
#[inline(always)]
unsafe fn sum_rows<S: SimdF32, const R: usize>(p: *const f32, row_len: usize, out: &mut [f32; R]) {
    let lanes = S::LANES;
    // SAFETY: every load stays inside the `R` rows by the loop bounds; ISA by contract.
    unsafe {
        let mut acc0 = [S::zero(); R];
        let mut acc1 = [S::zero(); R];
        let mut k = 0;
        while k + 2 * lanes <= row_len {
            for r in 0..R {
                let row = p.add(r * row_len + k);
                acc0[r] = S::add(S::load(row), acc0[r]);
                acc1[r] = S::add(S::load(row.add(lanes)), acc1[r]);
            }
            k += 2 * lanes;
        }
        if k + lanes <= row_len {
            for r in 0..R {
                acc0[r] = S::add(S::load(p.add(r * row_len + k)), acc0[r]);
            }
            k += lanes;
        }
        if k < row_len {
            for r in 0..R {
                let tail = S::load_partial(p.add(r * row_len + k), row_len - k);
                acc1[r] = S::add(tail, acc1[r]);
            }
        }
        for r in 0..R {
            out[r] = S::reduce_sum(S::add(acc0[r], acc1[r]));
        }
    }
}
