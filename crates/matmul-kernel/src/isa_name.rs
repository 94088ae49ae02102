//! [`Isa`]: the name of an instruction set a kernel is written for. A name runs nothing;
//! `isa.rs` turns it into a [`Kernel`](crate::Kernel) token where the CPU has it.

use std::fmt;

/// The name of an instruction set a kernel is written for. A name runs nothing: get a
/// [`Kernel`](crate::Kernel) for it with [`Isa::token`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isa {
    /// Portable kernel with independent accumulators; the reference.
    Portable,
    /// NEON (aarch64), with the `dotprod` extension in the quantized kernels where the CPU
    /// has it.
    Neon,
    /// AVX2 + FMA.
    Avx2,
    /// AVX-512F.
    Avx512,
}

impl Isa {
    /// Every ISA, from the most portable to the widest (a CPU has at most one of NEON and
    /// the x86 ones).
    pub const ALL: [Isa; 4] = [Isa::Portable, Isa::Neon, Isa::Avx2, Isa::Avx512];

    /// The lowercase name (`portable`, `neon`, `avx2`, `avx512`), as `SIPLLM_KERNEL` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Neon => "neon",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
