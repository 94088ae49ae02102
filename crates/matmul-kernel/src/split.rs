//! How one call's output rows are split: serially or over a pool by a policy (`Split`),
//! the shared output each worker writes its own rows of (`SharedOut`), the shape checks, and
//! the f32 GEMV, GEMM and read over a split.

use crate::error::MatmulError;
use crate::isa::Kernel;
use crate::kernel::{GemmDims, on_lines, slots_as_f32};
use std::ops::Range;
use threadpool::{SchedulePolicy, ThreadPool};

pub(crate) fn check_gemv_shape(w: &[f32], x: &[f32], y: &[f32]) -> Result<(), MatmulError> {
    let expected = x.len().checked_mul(y.len());
    if expected != Some(w.len()) {
        return Err(MatmulError::Shape(format!(
            "w has {} elements, expected n_out {} x n_in {}",
            w.len(),
            y.len(),
            x.len()
        )));
    }
    Ok(())
}

/// Where the output rows of one call run: on the calling thread, or split over a pool. The
/// serial and parallel calls of [`Exec`] share one body per operation through it.
#[derive(Clone, Copy)]
pub(crate) enum Split<'a> {
    /// All rows, in one range, on the calling thread.
    Serial,
    /// Rows handed out by `parallel_for`.
    Pool(&'a ThreadPool, SchedulePolicy),
}

impl Split<'_> {
    /// Threads the rows are split over: 1 on the calling thread, else the pool's.
    pub(crate) fn threads(self) -> usize {
        match self {
            Split::Serial => 1,
            Split::Pool(pool, _) => pool.n_threads(),
        }
    }

    /// Calls `f` on ranges that cover `0..n_items`, each index exactly once.
    pub(crate) fn for_ranges(
        self,
        n_items: usize,
        f: impl Fn(Range<usize>) + Sync,
    ) -> Result<(), MatmulError> {
        match self {
            Split::Serial => {
                f(0..n_items);
                Ok(())
            }
            Split::Pool(pool, policy) => pool
                .parallel_for(n_items, policy, f)
                .map_err(|e| MatmulError::Pool(e.to_string())),
        }
    }

    /// Calls `f(rows, out_rows)` for ranges covering the rows of `out`, each exactly once,
    /// with `out_rows` the elements `rows` of `out`: the one place where workers write
    /// output rows through a shared pointer. `rows` is clamped to `out.len()`.
    pub(crate) fn for_output_rows(
        self,
        out: &mut [f32],
        f: impl Fn(Range<usize>, &mut [f32]) + Sync,
    ) -> Result<(), MatmulError> {
        let n_rows = out.len();
        let shared = SharedOut::new(out);
        self.for_ranges(n_rows, |rows: Range<usize>| {
            // SAFETY: `for_ranges` hands out every row index exactly once, so the ranges of
            // different calls are disjoint; `slice` clamps to `n_rows`.
            let out_rows = unsafe { shared.slice(rows.clone()) };
            f(rows.start.min(n_rows)..rows.end.min(n_rows), out_rows);
        })
    }
}

/// The body of [`Exec::gemv`](crate::Exec::gemv).
pub(crate) fn gemv_split(
    kernel: Kernel,
    split: Split<'_>,
    w: &[f32],
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    check_gemv_shape(w, x, y)?;
    let n_in = x.len();
    split.for_output_rows(y, |rows, y_rows| {
        kernel.gemv_rows(&w[rows.start * n_in..], x, y_rows);
    })
}

/// The shape of one [`Exec::gemm`](crate::Exec::gemm): `X` is `m × n_in`, `W` is `n_out × n_in`, `Y` is `m × n_out`,
/// all row-major.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GemmShape {
    /// Rows of `X` and `Y` (tokens in the batch).
    pub m: usize,
    /// Columns of `X` and `W` (input features).
    pub n_in: usize,
    /// Rows of `W`, columns of `Y` (output features).
    pub n_out: usize,
}

impl GemmShape {
    pub(crate) fn check(self, w: &[f32], x: &[f32], y: &[f32]) -> Result<GemmDims, MatmulError> {
        let GemmShape { m, n_in, n_out } = self;
        let mismatch = |what: &str, got: usize, rows: usize, cols: usize| {
            MatmulError::Shape(format!(
                "{what} has {got} elements, expected {rows} x {cols}"
            ))
        };
        if m.checked_mul(n_in) != Some(x.len()) {
            return Err(mismatch("x", x.len(), m, n_in));
        }
        if n_out.checked_mul(n_in) != Some(w.len()) {
            return Err(mismatch("w", w.len(), n_out, n_in));
        }
        if m.checked_mul(n_out) != Some(y.len()) {
            return Err(mismatch("y", y.len(), m, n_out));
        }
        Ok(GemmDims { m, n_in, n_out })
    }
}

/// The body of [`Exec::gemm`](crate::Exec::gemm).
pub(crate) fn gemm_split(
    kernel: Kernel,
    split: Split<'_>,
    shape: GemmShape,
    w: &[f32],
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    let dims = shape.check(w, x, y)?;
    let aligned = if dims.m > 1 {
        on_lines(x, dims.n_in)
    } else {
        None
    };
    let x = aligned
        .as_deref()
        .map_or(x, |slots| slots_as_f32(slots, x.len()));
    let y_out = SharedOut::new(y);
    split.for_ranges(dims.n_out, |cols: Range<usize>| {
        let cols = cols.start.min(dims.n_out)..cols.end.min(dims.n_out);
        // SAFETY: shapes checked; `for_ranges` hands out every column exactly once, so no
        // two calls write the same column of `Y`; `cols` is clamped to `n_out`.
        unsafe { kernel.gemm_cols(dims, x.as_ptr(), w.as_ptr(), y_out.as_ptr(), cols) };
    })
}

/// The body of [`Exec::stream_read`](crate::Exec::stream_read).
pub(crate) fn stream_read_split(
    kernel: Kernel,
    split: Split<'_>,
    buf: &[f32],
    row_sums: &mut [f32],
) -> Result<(), MatmulError> {
    let n_rows = row_sums.len();
    let row_len = buf.len().checked_div(n_rows).unwrap_or(0);
    if row_len * n_rows != buf.len() {
        return Err(MatmulError::Shape(format!(
            "buf has {} elements, not a multiple of {n_rows} rows",
            buf.len()
        )));
    }
    split.for_output_rows(row_sums, |rows, sums| {
        kernel.read_rows(&buf[rows.start * row_len..], row_len, sums);
    })
}

/// An output slice shared by the workers of one `parallel_for`, each writing its own rows.
pub(crate) struct SharedOut {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: workers only write disjoint ranges (see `slice`), handed out by `parallel_for`.
unsafe impl Sync for SharedOut {}

impl SharedOut {
    pub(crate) fn new(out: &mut [f32]) -> Self {
        SharedOut {
            ptr: out.as_mut_ptr(),
            len: out.len(),
        }
    }

    /// The start of the whole slice (method, so closures capture `self`, which is `Sync`).
    pub(crate) fn as_ptr(&self) -> *mut f32 {
        self.ptr
    }

    /// The elements `range` (clamped to the slice).
    ///
    /// # Safety
    /// No other live reference covers any element of `range`.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn slice(&self, range: Range<usize>) -> &mut [f32] {
        let end = range.end.min(self.len);
        let start = range.start.min(end);
        // SAFETY: `start..end` lies inside the slice `new` borrowed mutably for the lifetime of
        // the `parallel_for`; exclusivity is the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), end - start) }
    }
}

#[cfg(test)]
mod tests {
    use crate::kernel::{VecSlot, on_lines};
    use crate::{Exec, GemmShape, Isa};

    #[test]
    fn x_is_copied_to_a_line_start_only_where_its_rows_stay_on_line_starts() {
        let mut store = vec![VecSlot::default(); 5];
        for (i, slot) in store.iter_mut().enumerate() {
            slot.0 = std::array::from_fn(|j| (16 * i + j) as f32);
        }
        let base = crate::kernel::slots_as_f32(&store, 80);
        // On a line start already: as it is.
        assert!(on_lines(&base[..64], 32).is_none());
        // Rows of 20 would leave the line starts after the first row: as it is.
        assert!(on_lines(&base[4..64], 20).is_none());
        // 16 bytes into a line, rows of 32: copied.
        let shifted = &base[4..68];
        let slots = on_lines(shifted, 32).expect("a copy");
        let copy = crate::kernel::slots_as_f32(&slots, shifted.len());
        assert_eq!(copy, shifted);
        assert!(copy.as_ptr().cast::<VecSlot>().is_aligned());
    }

    #[test]
    fn a_gemm_gives_the_same_bits_wherever_x_lies() {
        let (m, n_in, n_out) = (5, 48, 7);
        let shape = GemmShape { m, n_in, n_out };
        let w: Vec<f32> = (0..n_out * n_in)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let store: Vec<f32> = (0..m * n_in + 16)
            .map(|i| ((i * 13 % 97) as f32 - 48.0) / 5.0)
            .collect();
        for isa in Isa::ALL {
            let Ok(kernel) = isa.token() else { continue };
            let exec = Exec::new().kernel(kernel);
            let mut want: Option<Vec<u32>> = None;
            // The same values at every offset into a line.
            for shift in 0..16 {
                let x: Vec<f32> = store[..m * n_in].to_vec();
                let mut moved = vec![0.0f32; m * n_in + 16];
                moved[shift..shift + m * n_in].copy_from_slice(&x);
                let mut y = vec![f32::NAN; m * n_out];
                exec.gemm(shape, &w, &moved[shift..shift + m * n_in], &mut y)
                    .unwrap();
                let bits: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
                match &want {
                    Some(want) => assert_eq!(&bits, want, "{kernel} shift {shift}"),
                    None => want = Some(bits),
                }
            }
        }
    }
}
