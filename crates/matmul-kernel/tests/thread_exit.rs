//! A GEMM called while its thread's thread-locals are being destroyed (from another
//! thread-local's `Drop`) returns its result: `with` on the kernel's scratch would panic
//! there, and a panic in a thread-local's destructor aborts the whole process. A test
//! binary of its own, so that such an abort takes no other test with it.

use matmul_kernel::{Exec, GemmShape, Isa};
use std::cell::RefCell;
use std::sync::mpsc::{Sender, channel};

/// Runs a GEMM when dropped and sends its result.
struct GemmOnDrop(Sender<Result<Vec<f32>, String>>);

impl Drop for GemmOnDrop {
    fn drop(&mut self) {
        let (m, n_in, n_out) = (2, 4, 3);
        let w = vec![1.0f32; n_out * n_in];
        let x: Vec<f32> = (0..m * n_in).map(|i| i as f32).collect();
        let mut y = vec![0.0f32; m * n_out];
        let result = Exec::new()
            .kernel(Isa::Portable.token().unwrap())
            .gemm(GemmShape { m, n_in, n_out }, &w, &x, &mut y)
            .map(|()| y)
            .map_err(|e| e.to_string());
        let _ = self.0.send(result);
    }
}

thread_local! {
    static ON_EXIT: RefCell<Option<GemmOnDrop>> = const { RefCell::new(None) };
}

#[test]
fn a_gemm_in_a_thread_local_s_destructor_returns_its_result() {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        // Registered first, so destroyed after the kernel's scratch, registered by the
        // GEMM below.
        ON_EXIT.with(|slot| *slot.borrow_mut() = Some(GemmOnDrop(tx)));
        let mut y = vec![0.0f32; 2];
        Exec::new()
            .gemm(
                GemmShape {
                    m: 2,
                    n_in: 1,
                    n_out: 1,
                },
                &[1.0],
                &[1.0, 2.0],
                &mut y,
            )
            .unwrap();
        assert_eq!(y, [1.0, 2.0]);
    })
    .join()
    .unwrap();
    // Each output is the sum of its row of x: 0+1+2+3 and 4+5+6+7.
    let y = rx.recv().unwrap().unwrap();
    assert_eq!(y, [6.0, 6.0, 6.0, 22.0, 22.0, 22.0]);
}
