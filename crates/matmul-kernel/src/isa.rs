//! Instruction sets: their names ([`Isa`]), the token that proves this CPU runs one
//! ([`Kernel`]), and the process's choice from `SIPLLM_KERNEL` ([`selection`]).
//!
//! A [`Kernel`] is created only by detection ([`Isa::token`], [`Kernel::best`], the
//! selection), so every safe path into a SIMD kernel carries the proof that the CPU has its
//! instructions. Inside the crate each variant holds the zero-sized token of its ISA's file
//! (`portable.rs`, `x86.rs`, `aarch64.rs`), whose safe methods are the only callers of the
//! `#[target_feature]` wrappers; a new ISA is one more variant of `Token` and one more arm in
//! each dispatcher below.

#[cfg(target_arch = "aarch64")]
use crate::aarch64::Neon;
use crate::bodies::{GemmBody, GemvBody, IsaLevel};
use crate::error::MatmulError;
use crate::isa_name::Isa;
use crate::kernel::GemmDims;
use crate::portable::Portable;
use crate::quant::WeightFormat;
use crate::quant::activations::{Activations, CodeLayout};
#[cfg(target_arch = "x86_64")]
use crate::x86::{Avx2, Avx512};
use std::fmt;
use std::ops::Range;
use std::str::FromStr;
use std::sync::OnceLock;

/// The environment variable that forces a kernel: `portable`, `neon`, `avx2` or `avx512`.
pub const KERNEL_ENV: &str = "SIPLLM_KERNEL";

/// This CPU's CPUID vendor string (leaf 0's EBX, EDX, ECX: `GenuineIntel`, `AuthenticAMD`),
/// read once per process; `None` off x86_64. The rules that differ by vendor (how the GEMV
/// bodies walk and prefetch the weights, `quant/x86_walk.rs`; the benchmark floors) key on it.
pub fn cpuid_vendor() -> Option<[u8; 12]> {
    #[cfg(target_arch = "x86_64")]
    {
        static VENDOR: OnceLock<[u8; 12]> = OnceLock::new();
        Some(*VENDOR.get_or_init(|| {
            // Every x86_64 CPU has leaf 0.
            let leaf = std::arch::x86_64::__cpuid(0);
            let mut vendor = [0u8; 12];
            vendor[..4].copy_from_slice(&leaf.ebx.to_le_bytes());
            vendor[4..8].copy_from_slice(&leaf.edx.to_le_bytes());
            vendor[8..].copy_from_slice(&leaf.ecx.to_le_bytes());
            vendor
        }))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

impl Isa {
    /// The token that runs this ISA's kernels, when this CPU (and this build's target) has
    /// the instructions; else [`MatmulError::UnavailableIsa`].
    pub fn token(self) -> Result<Kernel, MatmulError> {
        let token = match self {
            Isa::Portable => Some(Token::Portable(Portable)),
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => Neon::detect().map(Token::Neon),
            #[cfg(not(target_arch = "aarch64"))]
            Isa::Neon => None,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => Avx2::detect().map(Token::Avx2),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => Avx512::detect().map(Token::Avx512),
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Avx2 | Isa::Avx512 => None,
        };
        token.map(Kernel).ok_or(MatmulError::UnavailableIsa(self))
    }

    /// Whether this CPU (and this build's target) can run the kernel: `self.token().is_ok()`.
    pub fn is_available(self) -> bool {
        self.token().is_ok()
    }
}

impl FromStr for Isa {
    type Err = MatmulError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim().to_ascii_lowercase();
        Isa::ALL
            .into_iter()
            .find(|isa| isa.name() == name)
            .ok_or_else(|| MatmulError::UnknownIsa(s.to_string()))
    }
}

/// Proof that this CPU runs the kernels of one [`Isa`]: the argument of
/// [`Exec::kernel`](crate::Exec::kernel).
///
/// Only detection creates one: [`Isa::token`], [`Kernel::best`], [`selection`],
/// [`try_selected`]. The field is private and there is no other constructor (and no
/// `Default` or `Deserialize`), so no safe code can reach a kernel the CPU lacks:
///
/// ```compile_fail,E0423
/// use matmul_kernel::{Isa, Kernel};
/// let forged = Kernel(Isa::Avx512); // the field is private: this does not compile
/// ```
///
/// It is `Copy` and zero-cost to pass around; its [`Display`](fmt::Display) is the ISA name.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Kernel(Token);

/// The per-ISA token inside a [`Kernel`]; each payload is its file's detected zero-sized type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Token {
    Portable(Portable),
    #[cfg(target_arch = "aarch64")]
    Neon(Neon),
    #[cfg(target_arch = "x86_64")]
    Avx2(Avx2),
    #[cfg(target_arch = "x86_64")]
    Avx512(Avx512),
}

impl Kernel {
    /// The widest kernel this CPU runs.
    pub fn best() -> Kernel {
        Isa::ALL
            .into_iter()
            .rev()
            .find_map(|isa| isa.token().ok())
            .unwrap_or(Kernel(Token::Portable(Portable)))
    }

    /// The instruction set this kernel runs.
    pub fn isa(self) -> Isa {
        match self.0 {
            Token::Portable(_) => Isa::Portable,
            #[cfg(target_arch = "aarch64")]
            Token::Neon(_) => Isa::Neon,
            #[cfg(target_arch = "x86_64")]
            Token::Avx2(_) => Isa::Avx2,
            #[cfg(target_arch = "x86_64")]
            Token::Avx512(_) => Isa::Avx512,
        }
    }

    /// The same kernel with the VNNI dot products of the quantized formats turned off: on an
    /// AVX-512 CPU with VNNI, the integer bodies of one without it (AVX2's multiply-adds, which
    /// give the same bits); any other kernel is returned as it is. Removing an extension is
    /// always safe; tests and measurements use this to run the path such a CPU takes.
    pub fn without_vnni(self) -> Kernel {
        match self.0 {
            #[cfg(target_arch = "x86_64")]
            Token::Avx512(t) => Kernel(Token::Avx512(t.without_vnni())),
            _ => self,
        }
    }

    /// Whether the quantized formats' integer dot products use VNNI (`vpdpbusd`) on this
    /// kernel.
    pub fn has_vnni(self) -> bool {
        match self.0 {
            #[cfg(target_arch = "x86_64")]
            Token::Avx512(t) => t.has_vnni(),
            _ => false,
        }
    }

    /// The same kernel with AVX512-VBMI turned off: on an AVX-512 CPU with VNNI and VBMI,
    /// q4_0's GEMV with the word permutes of one without VBMI (which give the same bits); any
    /// other kernel is returned as it is. Tests use this to run the path such a CPU takes.
    pub fn without_vbmi(self) -> Kernel {
        match self.0 {
            #[cfg(target_arch = "x86_64")]
            Token::Avx512(t) => Kernel(Token::Avx512(t.without_vbmi())),
            _ => self,
        }
    }

    /// Whether q4_0's 512-bit GEMV gathers its weights by AVX512-VBMI's byte permutes on this
    /// kernel (with VNNI only).
    pub fn has_vbmi(self) -> bool {
        match self.0 {
            #[cfg(target_arch = "x86_64")]
            Token::Avx512(t) => t.has_vbmi(),
            _ => false,
        }
    }

    /// The same kernel with NEON's `dotprod` extension turned off: on an aarch64 CPU with
    /// `dotprod`, the integer bodies of one without it (`SMULL` and pairwise additions, which
    /// give the same bits as `SDOT`); any other kernel is returned as it is. Removing an
    /// extension is always safe; tests use this to run the path such a CPU takes.
    pub fn without_dotprod(self) -> Kernel {
        match self.0 {
            #[cfg(target_arch = "aarch64")]
            Token::Neon(t) => Kernel(Token::Neon(t.without_dotprod())),
            _ => self,
        }
    }

    /// Whether the quantized formats' integer dot products use `dotprod` (`SDOT`) on this
    /// kernel.
    pub fn has_dotprod(self) -> bool {
        match self.0 {
            #[cfg(target_arch = "aarch64")]
            Token::Neon(t) => t.has_dotprod(),
            _ => false,
        }
    }

    /// GEMV over `y.len()` rows of `w` (panics when `w` is shorter than `y.len() · x.len()`).
    pub(crate) fn gemv_rows(self, w: &[f32], x: &[f32], y: &mut [f32]) {
        match self.0 {
            Token::Portable(t) => t.gemv_rows(w, x, y),
            #[cfg(target_arch = "aarch64")]
            Token::Neon(t) => t.gemv_rows(w, x, y),
            #[cfg(target_arch = "x86_64")]
            Token::Avx2(t) => t.gemv_rows(w, x, y),
            #[cfg(target_arch = "x86_64")]
            Token::Avx512(t) => t.gemv_rows(w, x, y),
        }
    }

    /// GEMM for columns `cols` of `Y`.
    ///
    /// # Safety
    /// The pointer contract of `kernel::gemm_cols`: `dims` matches the slices behind `x`,
    /// `w`, `y`; no other thread writes columns `cols` of `Y`; `cols.end <= n_out`.
    pub(crate) unsafe fn gemm_cols(
        self,
        dims: GemmDims,
        x: *const f32,
        w: *const f32,
        y: *mut f32,
        cols: Range<usize>,
    ) {
        // SAFETY: the pointer contract is forwarded; the token proves the ISA.
        unsafe {
            match self.0 {
                Token::Portable(t) => t.gemm_cols(dims, x, w, y, cols),
                #[cfg(target_arch = "aarch64")]
                Token::Neon(t) => t.gemm_cols(dims, x, w, y, cols),
                #[cfg(target_arch = "x86_64")]
                Token::Avx2(t) => t.gemm_cols(dims, x, w, y, cols),
                #[cfg(target_arch = "x86_64")]
                Token::Avx512(t) => t.gemm_cols(dims, x, w, y, cols),
            }
        }
    }

    /// The level of the GEMV dispatch table ([`gemv_body`](crate::gemv_body)) this kernel
    /// runs: its ISA with the extensions its integer bodies use.
    pub fn level(self) -> IsaLevel {
        match self.0 {
            Token::Portable(_) => IsaLevel::Portable,
            #[cfg(target_arch = "aarch64")]
            Token::Neon(t) if t.has_dotprod() => IsaLevel::NeonDotprod,
            #[cfg(target_arch = "aarch64")]
            Token::Neon(_) => IsaLevel::Neon,
            #[cfg(target_arch = "x86_64")]
            Token::Avx2(_) => IsaLevel::Avx2,
            #[cfg(target_arch = "x86_64")]
            Token::Avx512(t) => t.level(),
        }
    }

    /// The body a GEMV of `format` runs on this kernel (the dispatch table's cell): what a
    /// profile records beside the figures it measured.
    pub fn gemv_body(self, format: WeightFormat) -> GemvBody {
        crate::bodies::gemv_body(self.level(), format)
    }

    /// The body a GEMM of `format` (several activation rows: a prompt's prefill) runs on
    /// this kernel (the dispatch table's cell).
    pub fn gemm_body(self, format: WeightFormat) -> GemmBody {
        crate::bodies::gemm_body(self.level(), format)
    }

    /// The layout of the activation codes this kernel's GEMV of `format` reads beside the
    /// blocks: the order of a 512-bit body (`quant::x86_layout::wide_order`) where the table
    /// gives one, so a call quantizes them that way too.
    pub(crate) fn gemv_layout(self, format: WeightFormat) -> CodeLayout {
        if self.gemv_body(format).wide_layout() {
            CodeLayout::WideGemv
        } else {
            CodeLayout::Blocks
        }
    }

    /// The layout of the activations this kernel's GEMM of `format` reads: the chunks of the
    /// x86 tiles (`quant::x86_layout::TileLayout`) where the table gives a tile, the even-odd
    /// order of the values for bf16 in sixteen lanes.
    pub(crate) fn gemm_layout(self, format: WeightFormat) -> CodeLayout {
        let body = self.gemm_body(format);
        if body.is_int_tile() {
            CodeLayout::GemmTiles
        } else if body == GemmBody::Avx512F32Tile {
            CodeLayout::FloatTiles
        } else {
            CodeLayout::Blocks
        }
    }

    /// GEMV over `y.len()` rows of `format` at the start of `w`, each `acts.x().len()`
    /// weights long (panics when `w` is shorter or the row is not whole blocks). `acts` holds
    /// the activations quantized once per call when `format` is quantized (see
    /// `quant::activations`).
    ///
    /// f32 weights run [`Kernel::gemv_rows`], the body of `Exec::gemv` (one f32 GEMV body per
    /// ISA); the other formats one arm per ISA: the portable body is the reference; the x86
    /// bodies are in `quant/x86_float.rs`, `quant/x86_int.rs` and `quant/x86_wide.rs`,
    /// reached through `quant/x86.rs`. `threads` is how many threads the call's rows are
    /// split over: the x86 bodies' walk takes it into account on AMD (`quant/x86_walk.rs`);
    /// the other ISAs do not use it.
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
    pub(crate) fn qgemv_rows(
        self,
        format: WeightFormat,
        w: &[u8],
        acts: Activations<'_>,
        y: &mut [f32],
        threads: usize,
    ) {
        if format == WeightFormat::F32
            && let Some(w) = crate::kernel::as_f32(w)
        {
            return self.gemv_rows(w, acts.x(), y);
        }
        match self.0 {
            Token::Portable(t) => t.qgemv_rows(format, w, acts, y),
            #[cfg(target_arch = "aarch64")]
            Token::Neon(t) => t.qgemv_rows(format, w, acts, y),
            #[cfg(target_arch = "x86_64")]
            Token::Avx2(t) => t.qgemv_rows(format, w, std::slice::from_ref(&acts), y, threads),
            #[cfg(target_arch = "x86_64")]
            Token::Avx512(t) => t.qgemv_rows(format, w, std::slice::from_ref(&acts), y, threads),
        }
    }

    /// `y[i·n_rows + r]` = row `r` of `format` at the start of `w` dotted with activation row
    /// `acts[i]`, `n_rows = y.len() / acts.len()` (panics as [`Kernel::qgemv_rows`] does, or
    /// when `y` is not whole rows). The x86 bodies of the quantized formats run tiles of
    /// sixteen weight rows against many activation rows (each output within the documented bound, not
    /// bitwise the GEMV); any other ISA runs `qgemv_rows` once per activation row.
    pub(crate) fn qgemm_rows(
        self,
        format: WeightFormat,
        w: &[u8],
        acts: &[Activations<'_>],
        y: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        match self.0 {
            Token::Avx2(t) => return t.qgemm_rows(format, w, acts, y),
            Token::Avx512(t) => return t.qgemm_rows(format, w, acts, y),
            _ => {}
        }
        let n_rows = y.len().checked_div(acts.len()).unwrap_or(0);
        assert_eq!(n_rows * acts.len(), y.len(), "qgemm: y is not whole rows");
        if n_rows > 0 {
            for (a, out) in acts.iter().zip(y.chunks_exact_mut(n_rows)) {
                // Inside one thread of the GEMM's split, a tile at a time.
                self.qgemv_rows(format, w, *a, out, 1);
            }
        }
    }

    /// Sums of `sums.len()` rows of `row_len` (panics when `buf` is shorter).
    pub(crate) fn read_rows(self, buf: &[f32], row_len: usize, sums: &mut [f32]) {
        match self.0 {
            Token::Portable(t) => t.read_rows(buf, row_len, sums),
            #[cfg(target_arch = "aarch64")]
            Token::Neon(t) => t.read_rows(buf, row_len, sums),
            #[cfg(target_arch = "x86_64")]
            Token::Avx2(t) => t.read_rows(buf, row_len, sums),
            #[cfg(target_arch = "x86_64")]
            Token::Avx512(t) => t.read_rows(buf, row_len, sums),
        }
    }
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Kernel({})", self.isa().name())
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.isa().name())
    }
}

/// The kernel a process runs, as `SIPLLM_KERNEL` asks, and why the request was not followed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Selection {
    /// The kernel that runs: the requested one, or [`Kernel::best`] when unset or refused.
    pub kernel: Kernel,
    /// Why `SIPLLM_KERNEL` was refused ([`MatmulError::UnknownIsa`] or
    /// [`MatmulError::UnavailableIsa`]); `None` when it was followed or unset.
    pub fallback: Option<MatmulError>,
}

impl Selection {
    /// The selection for a given value of `SIPLLM_KERNEL` (`None`: unset); reads nothing.
    pub fn from_env_value(value: Option<&str>) -> Selection {
        match kernel_from_env_value(value) {
            Ok(kernel) => Selection {
                kernel,
                fallback: None,
            },
            Err(e) => Selection {
                kernel: Kernel::best(),
                fallback: Some(e),
            },
        }
    }

    /// The line to show the user when the request was refused:
    /// `SIPLLM_KERNEL: <error>; using <kernel>`. The caller decides where (and whether) to
    /// print it.
    pub fn warning(&self) -> Option<String> {
        self.fallback
            .as_ref()
            .map(|e| format!("{KERNEL_ENV}: {e}; using {}", self.kernel))
    }
}

/// The kernel `SIPLLM_KERNEL` asks for, checked against this CPU; the best one when the
/// variable is unset or empty. Reads the environment on every call.
pub fn try_selected() -> Result<Kernel, MatmulError> {
    kernel_from_env_value(kernel_env().as_deref())
}

/// `SIPLLM_KERNEL`'s value; one that is not UTF-8 with its bad bytes replaced (U+FFFD), so
/// that it names no kernel and is refused rather than taken as unset.
fn kernel_env() -> Option<String> {
    std::env::var_os(KERNEL_ENV).map(|v| v.to_string_lossy().into_owned())
}

/// [`try_selected`] for a given value of `SIPLLM_KERNEL` (`None`: unset); reads nothing.
pub fn kernel_from_env_value(value: Option<&str>) -> Result<Kernel, MatmulError> {
    match value.map(str::trim) {
        None | Some("") => Ok(Kernel::best()),
        Some(name) => name.parse::<Isa>()?.token(),
    }
}

/// This process's [`Selection`], decided once from `SIPLLM_KERNEL` at the first call; never
/// fails and never prints. Show [`Selection::warning`] where the user will see it, or call
/// [`try_selected`] to treat a refused request as an error.
pub fn selection() -> &'static Selection {
    static SELECTION: OnceLock<Selection> = OnceLock::new();
    SELECTION.get_or_init(|| Selection::from_env_value(kernel_env().as_deref()))
}

/// The kernel of this process's [`selection`]: what [`Exec::new`](crate::Exec::new) runs unless
/// [`Exec::kernel`](crate::Exec::kernel) names another, and what the tuner's cache signature
/// names.
pub fn selected() -> Kernel {
    selection().kernel
}
