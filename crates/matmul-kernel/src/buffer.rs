//! [`WeightBuffer`] and [`WeightBytes`]: 64-byte aligned buffers of f32 and of raw bytes (the
//! blocks of a quantized format) that ask the OS for transparent huge pages.
//!
//! On Linux the buffer is an anonymous `mmap` (through `nix`), aligned to 2 MiB when it is at
//! least that large, and advised with `madvise(MADV_HUGEPAGE)` before its first touch, so the
//! kernel can back it with huge pages on first write (the `madvise` mode of
//! `/sys/kernel/mm/transparent_hugepage/enabled`). Whether it did is read back from
//! `/proc/self/smaps` ([`WeightBuffer::huge_pages`]). Elsewhere the buffer is a plain 64-byte
//! aligned heap allocation.

use crate::error::MatmulError;
use std::ptr::NonNull;

/// Alignment every [`WeightBuffer`] has at least (one cache line, one AVX-512 vector).
pub const WEIGHT_ALIGN: usize = 64;

/// Size of a transparent huge page on x86-64 and most aarch64 kernels.
#[cfg(target_os = "linux")]
const HUGE_PAGE: usize = 2 << 20;

/// What the OS did with a [`WeightBuffer`]'s request for huge pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HugePages {
    /// `madvise(MADV_HUGEPAGE)` succeeded and this many bytes of the buffer are backed by huge
    /// pages now (`AnonHugePages` in `/proc/self/smaps`).
    Granted {
        /// Bytes backed by huge pages.
        huge_bytes: u64,
    },
    /// `madvise` succeeded but no byte is backed by a huge page (untouched buffer, THP off, or
    /// no free huge page).
    NotGranted,
    /// The request was not made or was refused; the reason says which.
    Unavailable(String),
}

impl HugePages {
    /// Whether any part of the buffer is backed by huge pages.
    pub fn granted(&self) -> bool {
        matches!(self, HugePages::Granted { huge_bytes } if *huge_bytes > 0)
    }
}

/// A 64-byte aligned, zero-initialised `[f32]` for weights, backed by huge pages where the OS
/// grants them. Dereferences to `[f32]`.
pub struct WeightBuffer {
    raw: RawBuffer,
    len: usize,
}

/// A 64-byte aligned, zero-initialised `[u8]` for the blocks of a quantized weight format,
/// backed by huge pages where the OS grants them, like [`WeightBuffer`]. Dereferences to `[u8]`.
pub struct WeightBytes {
    raw: RawBuffer,
}

/// The memory behind both buffers: `bytes` zeroed bytes at `ptr`, aligned to at least
/// [`WEIGHT_ALIGN`].
struct RawBuffer {
    ptr: NonNull<u8>,
    bytes: usize,
    alloc: Allocation,
}

/// How the memory of a [`WeightBuffer`] was obtained, for `Drop`.
enum Allocation {
    /// No memory (`len == 0`).
    Empty,
    /// An anonymous mapping of `map_len` bytes at `map`, advised or not.
    #[cfg(target_os = "linux")]
    Mapped {
        map: NonNull<std::ffi::c_void>,
        map_len: usize,
        advice: Result<(), String>,
    },
    /// A heap allocation with this layout.
    #[cfg_attr(target_os = "linux", allow(dead_code))]
    Heap(std::alloc::Layout),
}

// SAFETY: the buffer owns its memory exclusively, like a `Vec<u8>`.
unsafe impl Send for RawBuffer {}
// SAFETY: shared access only reads through `&[f32]` or `&[u8]`, like a `Vec<u8>`.
unsafe impl Sync for RawBuffer {}

impl std::fmt::Debug for WeightBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeightBuffer")
            .field("len", &self.len)
            .field("ptr", &self.raw.ptr)
            .finish()
    }
}

impl std::fmt::Debug for WeightBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeightBytes")
            .field("len", &self.raw.bytes)
            .field("ptr", &self.raw.ptr)
            .finish()
    }
}

impl WeightBuffer {
    /// A zeroed buffer of `len` floats. Pages are not touched yet: huge pages are granted on
    /// first write.
    pub fn zeroed(len: usize) -> Result<Self, MatmulError> {
        let bytes = len
            .checked_mul(size_of::<f32>())
            .filter(|b| *b <= isize::MAX as usize / 2)
            .ok_or_else(|| {
                MatmulError::Alloc(format!("weight buffer of {len} floats is too large"))
            })?;
        Ok(WeightBuffer {
            raw: RawBuffer::zeroed(bytes)?,
            len,
        })
    }

    /// A buffer holding a copy of `values`.
    pub fn from_slice(values: &[f32]) -> Result<Self, MatmulError> {
        let mut buf = Self::zeroed(values.len())?;
        buf.copy_from_slice(values);
        Ok(buf)
    }

    /// Whether the buffer is backed by huge pages, as the OS reports it now.
    pub fn huge_pages(&self) -> HugePages {
        self.raw.huge_pages()
    }
}

impl WeightBytes {
    /// A zeroed buffer of `len` bytes. Pages are not touched yet: huge pages are granted on
    /// first write.
    pub fn zeroed(len: usize) -> Result<Self, MatmulError> {
        if len > isize::MAX as usize / 2 {
            return Err(MatmulError::Alloc(format!(
                "weight buffer of {len} bytes is too large"
            )));
        }
        Ok(WeightBytes {
            raw: RawBuffer::zeroed(len)?,
        })
    }

    /// A buffer holding a copy of `bytes`.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, MatmulError> {
        let mut buf = Self::zeroed(bytes.len())?;
        buf.copy_from_slice(bytes);
        Ok(buf)
    }

    /// Whether the buffer is backed by huge pages, as the OS reports it now.
    pub fn huge_pages(&self) -> HugePages {
        self.raw.huge_pages()
    }
}

impl RawBuffer {
    /// `bytes` zeroed bytes (at most `isize::MAX / 2`, checked by the callers).
    fn zeroed(bytes: usize) -> Result<Self, MatmulError> {
        if bytes == 0 {
            // An aligned dangling pointer keeps the alignment promise for empty buffers too.
            let aligned = std::ptr::without_provenance_mut::<u8>(WEIGHT_ALIGN);
            return Ok(RawBuffer {
                ptr: NonNull::new(aligned).unwrap_or(NonNull::dangling()),
                bytes: 0,
                alloc: Allocation::Empty,
            });
        }
        Self::allocate(bytes)
    }

    #[cfg(target_os = "linux")]
    fn allocate(bytes: usize) -> Result<Self, MatmulError> {
        use nix::sys::mman::{MapFlags, MmapAdvise, ProtFlags, madvise, mmap_anonymous};
        use std::num::NonZeroUsize;
        // Large buffers are aligned to a huge page so that every 2 MiB of them can be one.
        let align = if bytes >= HUGE_PAGE {
            HUGE_PAGE
        } else {
            WEIGHT_ALIGN
        };
        let map_len = bytes + align;
        let map_len_nz = NonZeroUsize::new(map_len)
            .ok_or_else(|| MatmulError::Alloc("empty mapping".to_string()))?;
        // SAFETY: an anonymous private mapping at an address of the kernel's choice aliases no
        // existing memory.
        let map = unsafe {
            mmap_anonymous(
                None,
                map_len_nz,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_PRIVATE,
            )
        }
        .map_err(|e| MatmulError::Alloc(format!("mmap of {map_len} bytes failed: {e}")))?;
        let offset = (align - (map.as_ptr() as usize % align)) % align;
        // SAFETY: `offset < align` and the mapping is `bytes + align` long.
        let data = unsafe { map.cast::<u8>().add(offset) };
        let advice = if bytes >= HUGE_PAGE {
            // SAFETY: the advised range lies inside our own fresh mapping; MADV_HUGEPAGE does not
            // change its contents.
            unsafe { madvise(data.cast(), bytes, MmapAdvise::MADV_HUGEPAGE) }
                .map_err(|e| format!("madvise(MADV_HUGEPAGE) refused: {e}"))
        } else {
            Err(format!("{bytes} bytes is smaller than one huge page"))
        };
        Ok(RawBuffer {
            ptr: data,
            bytes,
            alloc: Allocation::Mapped {
                map,
                map_len,
                advice,
            },
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn allocate(bytes: usize) -> Result<Self, MatmulError> {
        let layout = std::alloc::Layout::from_size_align(bytes, WEIGHT_ALIGN)
            .map_err(|e| MatmulError::Alloc(format!("layout of {bytes} bytes: {e}")))?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw)
            .ok_or_else(|| MatmulError::Alloc(format!("allocation of {bytes} bytes failed")))?;
        Ok(RawBuffer {
            ptr,
            bytes,
            alloc: Allocation::Heap(layout),
        })
    }

    /// Whether the memory is backed by huge pages, as the OS reports it now.
    fn huge_pages(&self) -> HugePages {
        match &self.alloc {
            Allocation::Empty => HugePages::Unavailable("empty buffer".to_string()),
            #[cfg(target_os = "linux")]
            Allocation::Mapped { advice, .. } => match advice {
                Err(reason) => HugePages::Unavailable(reason.clone()),
                Ok(()) => match smaps_anon_huge_bytes(self.ptr.as_ptr() as usize) {
                    Some(0) => HugePages::NotGranted,
                    Some(huge_bytes) => HugePages::Granted { huge_bytes },
                    None => {
                        HugePages::Unavailable("mapping not found in /proc/self/smaps".to_string())
                    }
                },
            },
            Allocation::Heap(_) => {
                HugePages::Unavailable("huge pages are requested on linux only".to_string())
            }
        }
    }
}

/// `AnonHugePages` of the mapping of `/proc/self/smaps` that contains `addr`, in bytes.
#[cfg(target_os = "linux")]
fn smaps_anon_huge_bytes(addr: usize) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut in_mapping = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = first.split_once('-')
            && let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
        {
            in_mapping = (lo..hi).contains(&addr);
            continue;
        }
        if in_mapping && let Some(rest) = line.strip_prefix("AnonHugePages:") {
            let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
            return Some(kib * 1024);
        }
    }
    None
}

impl std::ops::Deref for WeightBuffer {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        // SAFETY: `ptr` is valid for `len * 4` initialised (zeroed or written) bytes, aligned to
        // at least 64, and every bit pattern is an f32; or dangling with `len == 0`.
        unsafe { std::slice::from_raw_parts(self.raw.ptr.as_ptr().cast::<f32>(), self.len) }
    }
}

impl std::ops::DerefMut for WeightBuffer {
    fn deref_mut(&mut self) -> &mut [f32] {
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.raw.ptr.as_ptr().cast::<f32>(), self.len) }
    }
}

impl std::ops::Deref for WeightBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `bytes` initialised (zeroed or written) bytes, or dangling
        // with `bytes == 0`.
        unsafe { std::slice::from_raw_parts(self.raw.ptr.as_ptr(), self.raw.bytes) }
    }
}

impl std::ops::DerefMut for WeightBytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.raw.ptr.as_ptr(), self.raw.bytes) }
    }
}

impl Drop for RawBuffer {
    fn drop(&mut self) {
        match &self.alloc {
            Allocation::Empty => {}
            #[cfg(target_os = "linux")]
            Allocation::Mapped { map, map_len, .. } => {
                // SAFETY: the mapping is ours, `map_len` long, and no slice of it outlives
                // `self`. A failing munmap only leaks address space.
                let _ = unsafe { nix::sys::mman::munmap(*map, *map_len) };
            }
            Allocation::Heap(layout) => {
                // SAFETY: allocated with this layout by `allocate`.
                unsafe { std::alloc::dealloc(self.ptr.as_ptr(), *layout) };
            }
        }
    }
}
