//! Output buffers for large conversions.
//!
//! A fresh 256 MiB `Vec` costs 65,536 page faults of 4 KiB when first written — on these
//! machines that alone takes ~10× longer than converting the data. Large outputs therefore
//! get transparent huge pages requested (`MADV_HUGEPAGE`: THP is madvise-only here, as it is
//! on many distributions; [`prepare_output`]), and the conversion that writes them faults
//! them in 2 MiB at a time.

pub mod cache;

use crate::cast::Element;
use crate::error::{CoreError, Result};
use std::ptr::NonNull;

/// Outputs at least this large use a huge-page mapping; smaller ones a plain `Vec`.
pub const LARGE_BUFFER_BYTES: usize = 4 << 20;
const HUGE_PAGE: usize = 2 << 20;

/// A buffer of `len` elements in an anonymous mapping of its own (2 MiB-aligned, huge pages
/// asked for), which goes back to the [`cache`] for reuse when dropped.
pub struct LargeBuffer<T: Element> {
    ptr: NonNull<T>,
    len: usize,
    map_len: usize,
}

// SAFETY: the buffer owns its mapping exclusively, like a Vec.
unsafe impl<T: Element> Send for LargeBuffer<T> {}
unsafe impl<T: Element> Sync for LargeBuffer<T> {}

impl<T: Element> LargeBuffer<T> {
    /// `len` zeros, in a fresh mapping.
    pub fn zeroed(len: usize) -> Result<Self> {
        let map_len = Self::map_len(len)?;
        Self::at(map_output(map_len)?, len, map_len)
    }

    /// `len` elements of unspecified value (an earlier output's, or zeros), for a caller that
    /// writes every one of them before anything reads it: a mapping a dropped buffer left in
    /// the [`cache`] when one fits (no page faults, no zeroing by the kernel), else a fresh one.
    pub fn for_overwrite(len: usize) -> Result<Self> {
        let map_len = Self::map_len(len)?;
        let ptr = match cache::take(map_len) {
            Some(ptr) => ptr,
            None => map_output(map_len)?,
        };
        Self::at(ptr, len, map_len)
    }

    /// Like [`for_overwrite`](Self::for_overwrite), but only from the [`cache`]: `None` when no
    /// kept mapping fits (nothing new is mapped).
    pub fn cached(len: usize) -> Result<Option<Self>> {
        let map_len = Self::map_len(len)?;
        match cache::take(map_len) {
            Some(ptr) => Self::at(ptr, len, map_len).map(Some),
            None => Ok(None),
        }
    }

    fn map_len(len: usize) -> Result<usize> {
        len.checked_mul(std::mem::size_of::<T>())
            .and_then(|bytes| bytes.max(1).checked_next_multiple_of(HUGE_PAGE))
            .ok_or_else(|| CoreError::invalid_argument("buffer size overflows"))
    }

    fn at(ptr: *mut u8, len: usize, map_len: usize) -> Result<Self> {
        match NonNull::new(ptr.cast::<T>()) {
            Some(ptr) => Ok(LargeBuffer { ptr, len, map_len }),
            None => Err(CoreError::invalid_argument("null mapping")),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.ptr.as_ptr()
    }
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: the mapping holds `len` initialised (zeroed or written: T is POD, so any
        // bytes are valid) elements.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as above, and we have exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Element> Drop for LargeBuffer<T> {
    fn drop(&mut self) {
        // Nothing uses the mapping any more: keep it for the next output that fits.
        cache::give(self.ptr.as_ptr().cast(), self.map_len);
    }
}

/// A conversion's output: a plain vector, or a huge-page buffer when large.
pub enum Output<T: Element> {
    Small(Vec<T>),
    Large(LargeBuffer<T>),
}

impl<T: Element + Default> Output<T> {
    /// `len` elements for a caller that writes every one before anything reads it: large
    /// ones may reuse a kept mapping ([`LargeBuffer::for_overwrite`]), small ones are zeros.
    pub fn for_overwrite(len: usize) -> Result<Self> {
        if len.saturating_mul(std::mem::size_of::<T>()) >= LARGE_BUFFER_BYTES {
            LargeBuffer::for_overwrite(len).map(Output::Large)
        } else {
            Ok(Output::Small(vec![T::default(); len]))
        }
    }

    /// The elements of `bytes` (native byte order; a trailing partial element is ignored)
    /// in a new output buffer: large copies land in huge pages, not 4 KiB page faults.
    pub fn copy_of(bytes: &[u8]) -> Result<Self> {
        let n = bytes.len() / std::mem::size_of::<T>();
        let mut out = Output::for_overwrite(n)?;
        let dst = out.as_mut_slice();
        // SAFETY: `dst` holds n elements = n * size_of::<T>() bytes; T is POD, so any bytes
        // form valid values; a fresh buffer cannot overlap `bytes`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                dst.as_mut_ptr() as *mut u8,
                n * std::mem::size_of::<T>(),
            )
        };
        Ok(out)
    }
}

impl<T: Element> Output<T> {
    pub fn as_slice(&self) -> &[T] {
        match self {
            Output::Small(v) => v,
            Output::Large(b) => b.as_slice(),
        }
    }
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            Output::Small(v) => v,
            Output::Large(b) => b.as_mut_slice(),
        }
    }
    pub fn into_vec(self) -> Vec<T> {
        match self {
            Output::Small(v) => v,
            Output::Large(b) => b.as_slice().to_vec(),
        }
    }
}

/// Get fresh, untouched memory ready to receive an output of `len` bytes at `ptr` (memory of
/// our own or that someone else allocated, e.g. a V8 ArrayBuffer, which glibc maps afresh when
/// large): ask for transparent huge pages on its 2 MiB-aligned part, so that the conversion
/// which writes it takes one fault per 2 MiB instead of one per 4 KiB. The pages are faulted
/// in by whoever writes them first (the conversion's threads, each in its own chunk, each huge
/// page zeroed while it is about to be written), as numpy's outputs are.
///
/// Faulting everything in ahead (`MADV_POPULATE_WRITE`), which this did until 2026-11-23, cost
/// more: the memory was written twice, and on this VM huge pages that the hypervisor must back
/// afresh are slow at first (4–8 ms each), which made a heuristic fall back to 4 KiB pages —
/// for good, as the fallback kept the process from ever reusing warm huge pages. Measured on a
/// 64M-element BF16 → F32 `getTensor` loop (256 MiB outputs, docs/benchmarks.md): faulted in
/// ahead 120–200 ms per call; lazily, after the first few calls, 29–64 ms (numpy: 45–59 ms).
/// Below [`LARGE_BUFFER_BYTES`] it does nothing. Advisory: errors are ignored, and the contents
/// are unchanged.
pub fn prepare_output(ptr: *mut u8, len: usize) {
    if len < LARGE_BUFFER_BYTES {
        return;
    }
    let start = (ptr as usize).next_multiple_of(HUGE_PAGE);
    let end = (ptr as usize).saturating_add(len) / HUGE_PAGE * HUGE_PAGE;
    if end > start {
        // SAFETY: [start, end) lies inside [ptr, ptr + len), the caller's fresh allocation;
        // the advice changes no contents.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

/// Fill `numel` f32 values through `fill` and return their little-endian bytes, decoding in
/// place when the byte buffer happens to be aligned for f32 (it nearly always is).
pub fn f32_bytes(numel: usize, fill: &dyn Fn(&mut [f32]) -> Result<()>) -> Result<Vec<u8>> {
    let len = numel.checked_mul(4).ok_or_else(|| {
        CoreError::invalid_argument(format!("{numel} f32 values overflow the address space"))
    })?;
    let mut bytes = vec![0u8; len];
    // A large zeroed Vec is a fresh mapping nobody has touched: ask for huge pages (a 64 MiB
    // decode otherwise spends more time in 4 KiB page faults than decoding).
    prepare_output(bytes.as_mut_ptr(), len);
    // SAFETY: every bit pattern is a valid f32; align_to_mut only yields aligned elements.
    let (head, body, tail) = unsafe { bytes.align_to_mut::<f32>() };
    if head.is_empty() && tail.is_empty() {
        fill(body)?;
        return Ok(bytes);
    }
    let mut values = vec![0f32; numel];
    fill(&mut values)?;
    Ok(crate::cast::element_bytes(&values).to_vec())
}

/// A fresh mapping of `map_len` bytes (a multiple of 2 MiB) at a 2 MiB boundary, huge pages
/// asked for: every page of it can be a huge page, and the [`cache`] can cut it on huge-page
/// boundaries. Over-allocated by 2 MiB and trimmed, as kernels before 6.7 do not align.
fn map_output(map_len: usize) -> Result<*mut u8> {
    let span = map_len
        .checked_add(HUGE_PAGE)
        .ok_or_else(|| CoreError::invalid_argument("buffer size overflows"))?;
    let base = map_anonymous(span, map_len)? as usize;
    let start = base.next_multiple_of(HUGE_PAGE);
    let end = start + map_len;
    // SAFETY: [base, start) and [end, base + span) are the unused ends of the mapping just
    // made (start - base < HUGE_PAGE, so both lie inside it).
    unsafe {
        if start > base {
            libc::munmap(base as *mut libc::c_void, start - base);
        }
        if base + span > end {
            libc::munmap(end as *mut libc::c_void, base + span - end);
        }
    }
    prepare_output(start as *mut u8, map_len);
    Ok(start as *mut u8)
}

/// Bytes of physical memory (1 GiB when unknown).
pub fn physical_memory() -> usize {
    // SAFETY: sysconf only reads system configuration.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages > 0 && page > 0 {
        (pages as usize).saturating_mul(page as usize)
    } else {
        1 << 30
    }
}

/// A fresh private anonymous mapping of `map_len` bytes (untouched), or ERR_IO naming the
/// `bytes` that were asked for.
fn map_anonymous(map_len: usize, bytes: usize) -> Result<*mut libc::c_void> {
    // SAFETY: a fresh private anonymous mapping; checked for failure below.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(CoreError::new(
            crate::error::ErrorKind::Io,
            format!(
                "cannot allocate {bytes} bytes: {}",
                std::io::Error::last_os_error()
            ),
        ));
    }
    Ok(ptr)
}

/// `len` zero bytes in a `Vec`, or ERR_IO ("cannot allocate … for `what`") where the
/// allocator refuses them, never an abort.
pub fn zeroed_vec(len: usize, what: &dyn std::fmt::Display) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|_| {
        CoreError::new(
            crate::error::ErrorKind::Io,
            format!("cannot allocate {len} bytes for {what}"),
        )
    })?;
    out.resize(len, 0);
    Ok(out)
}

/// Whether `len` bytes can be allocated at all: an allocator that aborts the process on
/// failure (V8's `ArrayBuffer::New`) must only be asked for what the kernel would grant. A
/// fresh anonymous mapping of that size is created (nothing is touched) and released again;
/// it fails as the real allocation would (overcommit policy, address-space limits).
pub fn check_allocatable(len: usize) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    let ptr = map_anonymous(len, len)?;
    // SAFETY: exactly the mapping created above.
    unsafe { libc::munmap(ptr, len) };
    Ok(())
}

/// Ask the kernel to map the pages of `bytes` (part of a file mapping) in one call, instead
/// of one fault per 4 KiB page as a conversion walks them. Advisory: errors are ignored.
pub fn populate_read(bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    let page = 4096usize;
    let start = bytes.as_ptr() as usize / page * page;
    let end = bytes.as_ptr() as usize + bytes.len();
    // MADV_POPULATE_READ (Linux 5.14+); older kernels answer EINVAL, harmlessly.
    const MADV_POPULATE_READ: libc::c_int = 22;
    // SAFETY: the range lies within a live mapping (it covers `bytes`); advisory call.
    unsafe { libc::madvise(start as *mut libc::c_void, end - start, MADV_POPULATE_READ) };
}

/// The value of `field` (e.g. `Rss`, `VmFlags`) for the mapping of this process that holds
/// `addr`, from /proc/self/smaps: for tests that check what the kernel did with our memory.
#[cfg(all(test, feature = "fs"))]
pub(crate) fn smaps_field(addr: usize, field: &str) -> String {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut inside = false;
    for line in smaps.lines() {
        let range = line.split_whitespace().next().unwrap_or("");
        if let Some((from, to)) = range.split_once('-') {
            if let (Ok(from), Ok(to)) = (
                usize::from_str_radix(from, 16),
                usize::from_str_radix(to, 16),
            ) {
                inside = from <= addr && addr < to;
                continue;
            }
        }
        if inside {
            if let Some(value) = line.strip_prefix(field).and_then(|l| l.strip_prefix(':')) {
                return value.trim().to_string();
            }
        }
    }
    panic!("no mapping holds {addr:#x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "fs")]
    const PAGE: usize = 4096;

    #[test]
    #[cfg(feature = "fs")]
    fn prepared_outputs_ask_for_huge_pages_and_stay_zero() {
        for (len, offset, huge) in [
            (40 << 20, 16, true),
            (6 << 20, 4096 + 8, true),
            (LARGE_BUFFER_BYTES - 1, 0, false),
        ] {
            let map_len = len + offset + PAGE;
            // A fresh private anonymous mapping, unmapped below.
            let base = map_anonymous(map_len, map_len).unwrap();
            let ptr = base as usize + offset;
            prepare_output(ptr as *mut u8, len);
            let inner = ptr.next_multiple_of(HUGE_PAGE);
            let flags = smaps_field(inner, "VmFlags");
            assert_eq!(
                flags.split_whitespace().any(|f| f == "hg"),
                huge,
                "{len} bytes at +{offset}: {flags}"
            );
            // The bytes before the first 2 MiB boundary keep the mapping's own flags.
            if inner > ptr {
                assert!(!smaps_field(ptr, "VmFlags")
                    .split_whitespace()
                    .any(|f| f == "hg"));
            }
            // SAFETY: the range is inside the mapping.
            let bytes = unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, len) };
            assert!(bytes.iter().all(|&b| b == 0));
            bytes[len - 1] = 7;
            assert_eq!(bytes[len - 1], 7);
            // SAFETY: the mapping created above.
            unsafe { libc::munmap(base, map_len) };
        }
    }

    #[test]
    fn large_buffers_are_zeroed_writable_and_sized() {
        let mut b = LargeBuffer::<f32>::zeroed(3 << 20).unwrap();
        assert_eq!(b.len(), 3 << 20);
        assert!(b.as_slice().iter().all(|&v| v == 0.0));
        b.as_mut_slice()[12345] = 1.5;
        assert_eq!(b.as_slice()[12345], 1.5);
        assert!(matches!(
            Output::<f32>::for_overwrite(10).unwrap(),
            Output::Small(_)
        ));
        assert!(matches!(
            Output::<f32>::for_overwrite(2 << 20).unwrap(),
            Output::Large(_)
        ));
        let empty = LargeBuffer::<f64>::zeroed(0).unwrap();
        assert!(empty.is_empty());
    }
}
