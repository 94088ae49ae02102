//! The one generic body of each kernel, written against [`SimdF32`] and instantiated per ISA.
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

/// Columns of `K` per GEMM cache block: a 4-row weight block of this length (8 KiB) stays in L1
/// while every row of `X` passes over it.
const GEMM_KC: usize = 512;

/// Rows of `X` per GEMM pass; bounds the stack scratch of partial sums.
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

/// Columns `cols` of `Y = X·Wᵀ` (weight rows `cols`), written through `y`.
///
/// Loop order: rows of `X` in passes of [`GEMM_MB`]; weight rows in blocks of 4; `K` in blocks of
/// [`GEMM_KC`]; rows of `X` in tiles of `XR`. Each block of weight rows is read from memory
/// once per pass and reused from L1 by every row of `X`. Every `Y[i][j]` has one vector
/// accumulator, fed in increasing `k` (the tail last) and reduced with `reduce_sum`, so its
/// value does not depend on the block it was computed in.
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
    let m = dims.m;
    let mut i0 = 0;
    while i0 < m {
        let mb = GEMM_MB.min(m - i0);
        let mut j = cols.start;
        while j + GEMM_W_ROWS <= cols.end {
            // SAFETY: rows `i0..i0 + mb` and weight rows `j..j + 4` are in bounds; forwarded.
            unsafe { gemm_block::<S, GEMM_W_ROWS, XR>(dims, x, w, y, i0, mb, j) };
            j += GEMM_W_ROWS;
        }
        while j < cols.end {
            // SAFETY: as above for the single weight row `j`.
            unsafe { gemm_block::<S, 1, XR>(dims, x, w, y, i0, mb, j) };
            j += 1;
        }
        i0 += mb;
    }
}

/// `Y[i0..i0+mb][j..j+WR]` for one block of `WR` weight rows.
///
/// # Safety
/// As [`gemm_cols`], with `i0 + mb <= m`, `mb <= GEMM_MB` and `j + WR` inside the columns owned
/// by the caller.
#[inline(always)]
unsafe fn gemm_block<S: SimdF32, const WR: usize, const XR: usize>(
    dims: GemmDims,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    i0: usize,
    mb: usize,
    j: usize,
) {
    let GemmDims { n_in, n_out, .. } = dims;
    // SAFETY: the scratch holds `mb·WR <= GEMM_MB·WR` accumulators; all pointer offsets stay in
    // the bounds stated by the caller; the ISA is supported by the caller's contract.
    unsafe {
        let mut scratch = [[S::zero(); WR]; GEMM_MB];
        let w_block = w.add(j * n_in);
        let mut k0 = 0;
        while k0 < n_in {
            let kc = GEMM_KC.min(n_in - k0);
            let mut i = 0;
            while i + XR <= mb {
                let acc = &mut *(scratch.as_mut_ptr().add(i) as *mut [[S::V; WR]; XR]);
                gemm_tile::<S, WR, XR>(w_block.add(k0), x.add((i0 + i) * n_in + k0), n_in, kc, acc);
                i += XR;
            }
            while i < mb {
                let acc = &mut *(scratch.as_mut_ptr().add(i) as *mut [[S::V; WR]; 1]);
                gemm_tile::<S, WR, 1>(w_block.add(k0), x.add((i0 + i) * n_in + k0), n_in, kc, acc);
                i += 1;
            }
            k0 += kc;
        }
        for (i, row_acc) in scratch.iter().take(mb).enumerate() {
            let y_row = y.add((i0 + i) * n_out + j);
            for (r, acc) in row_acc.iter().enumerate() {
                *y_row.add(r) = S::reduce_sum(*acc);
            }
        }
    }
}

/// Accumulates `kc` columns of `WR` weight rows against `XR` rows of `X` into `acc`.
///
/// # Safety
/// `w..` and `x..` are readable for `WR` (resp. `XR`) rows of stride `n_in` and length `kc`;
/// the CPU supports `S`'s ISA.
#[inline(always)]
unsafe fn gemm_tile<S: SimdF32, const WR: usize, const XR: usize>(
    w: *const f32,
    x: *const f32,
    n_in: usize,
    kc: usize,
    acc: &mut [[S::V; WR]; XR],
) {
    let lanes = S::LANES;
    // SAFETY: loads stay inside `kc` columns of the given rows; ISA by the caller's contract.
    unsafe {
        let mut a = *acc;
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
        *acc = a;
    }
}

/// `sums[r] = Σ buf[r·row_len ..][..row_len]`: the STREAM-style read. It walks the rows with
/// exactly the GEMV's access pattern (four rows at a time, two vectors per row per step) and
/// only adds, so it is the physical ceiling of that pattern.
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
