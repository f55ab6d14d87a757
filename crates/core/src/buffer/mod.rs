//! Output buffers: plain vectors, allocated fallibly and zeroed by the kernel, with
//! transparent huge pages asked for when large.
//!
//! A fresh 256 MiB buffer costs 65,536 page faults of 4 KiB when first written — on these
//! machines that alone takes longer than converting the data. Large outputs therefore get
//! transparent huge pages requested (`MADV_HUGEPAGE`: THP is madvise-only on many
//! distributions; [`prepare_output`]), and the conversion that writes them faults them in
//! 2 MiB at a time. Nothing is kept once a buffer is dropped: its memory goes back to the
//! allocator as any vector's does.

use crate::cast::Element;
use crate::error::{CoreError, Result};

/// Outputs at least this large get huge pages asked for (and, in the binding, are handed to
/// JS without a copy when a task made them).
pub const LARGE_BUFFER_BYTES: usize = 4 << 20;
const HUGE_PAGE: usize = 2 << 20;

/// `len` zeroed elements, or ERR_IO when that much memory cannot be had: the size may come
/// from a file, so a failed allocation is an error, never an abort. The allocator's zeroed
/// allocation is a fresh mapping for large sizes (no pass over the memory to zero it), and
/// its huge pages are asked for.
pub fn zeroed<T: Element>(len: usize) -> Result<Vec<T>> {
    let layout = std::alloc::Layout::array::<T>(len).map_err(|_| {
        CoreError::invalid_argument(format!("{len} elements overflow the address space"))
    })?;
    if layout.size() == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: a non-zero-sized layout; checked for failure below.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(CoreError::new(
            crate::error::ErrorKind::Io,
            format!("cannot allocate {} bytes", layout.size()),
        ));
    }
    prepare_output(ptr, layout.size());
    // SAFETY: `ptr` was allocated by the global allocator with `Layout::array::<T>(len)`, as
    // a Vec of capacity `len` is; all its bytes are zero, a valid value of every Element.
    Ok(unsafe { Vec::from_raw_parts(ptr.cast::<T>(), len, len) })
}

/// The elements of `bytes` (native byte order; a trailing partial element is ignored) in a
/// new buffer (see [`zeroed`]).
pub fn copy_of<T: Element>(bytes: &[u8]) -> Result<Vec<T>> {
    let n = bytes.len() / std::mem::size_of::<T>();
    let mut out = zeroed::<T>(n)?;
    // SAFETY: `out` holds n elements = n * size_of::<T>() bytes; T is POD, so any bytes form
    // valid values; a fresh buffer cannot overlap `bytes`.
    unsafe {
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            out.as_mut_ptr().cast::<u8>(),
            n * std::mem::size_of::<T>(),
        )
    };
    Ok(out)
}

/// Get fresh, untouched memory ready to receive an output of `len` bytes at `ptr` (memory of
/// our own or that someone else allocated, e.g. a V8 ArrayBuffer, which glibc maps afresh when
/// large): ask for transparent huge pages on its 2 MiB-aligned part, so that the conversion
/// which writes it takes one fault per 2 MiB instead of one per 4 KiB. The pages are faulted
/// in by whoever writes them first (the conversion's threads, each in its own chunk, each huge
/// page zeroed while it is about to be written), as numpy's outputs are.
///
/// The pages are not faulted in ahead (`MADV_POPULATE_WRITE`): that writes the memory twice,
/// and huge pages a hypervisor must back afresh are slow at first. Below [`LARGE_BUFFER_BYTES`] it does nothing. Advisory: errors are ignored, and the contents
/// are unchanged.
pub fn prepare_output(ptr: *mut u8, len: usize) {
    if len < LARGE_BUFFER_BYTES {
        return;
    }
    let start = (ptr as usize).next_multiple_of(HUGE_PAGE);
    let end = (ptr as usize).saturating_add(len) / HUGE_PAGE * HUGE_PAGE;
    // Hosts without madvise (WebAssembly) have no pages to advise about.
    #[cfg(unix)]
    if end > start {
        // SAFETY: [start, end) lies inside [ptr, ptr + len), the caller's fresh allocation;
        // the advice changes no contents.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
    #[cfg(not(unix))]
    let _ = (start, end);
}

/// Fill `numel` f32 values through `fill` and return their little-endian bytes, decoding in
/// place when the byte buffer happens to be aligned for f32 (it nearly always is).
pub fn f32_bytes(numel: usize, fill: &dyn Fn(&mut [f32]) -> Result<()>) -> Result<Vec<u8>> {
    let len = numel.checked_mul(4).ok_or_else(|| {
        CoreError::invalid_argument(format!("{numel} f32 values overflow the address space"))
    })?;
    let mut bytes = zeroed::<u8>(len)?;
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

/// Bytes of physical memory (1 GiB when unknown).
#[cfg(not(unix))]
pub fn physical_memory() -> usize {
    1 << 30
}

/// Bytes of physical memory (1 GiB when unknown).
#[cfg(unix)]
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

#[cfg(unix)]
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

/// [`zeroed`] bytes, the error naming `what` they are for.
pub fn zeroed_vec(len: usize, what: &dyn std::fmt::Display) -> Result<Vec<u8>> {
    zeroed::<u8>(len)
        .map_err(|e| CoreError::new(e.kind(), format!("cannot allocate {len} bytes for {what}")))
}

/// Whether `len` bytes can be allocated at all: an allocator that aborts the process on
/// failure (V8's `ArrayBuffer::New`) must only be asked for what the kernel would grant. A
/// fresh anonymous mapping of that size is created (nothing is touched) and released again;
/// it fails as the real allocation would (overcommit policy, address-space limits).
pub fn check_allocatable(len: usize) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    #[cfg(unix)]
    {
        let ptr = map_anonymous(len, len)?;
        // SAFETY: exactly the mapping created above.
        unsafe { libc::munmap(ptr, len) };
    }
    // Without mappings to probe with (WebAssembly), the allocation itself is fallible.
    #[cfg(not(unix))]
    std::alloc::Layout::array::<u8>(len).map_err(|_| {
        CoreError::invalid_argument(format!("{len} bytes overflow the address space"))
    })?;
    Ok(())
}

/// Ask the kernel to map the pages of `bytes` (part of a file mapping) in one call, instead
/// of one fault per 4 KiB page as a conversion walks them. Advisory: errors are ignored.
pub fn populate_read(bytes: &[u8]) {
    if bytes.is_empty() || cfg!(not(unix)) {
        return;
    }
    #[cfg(unix)]
    populate_pages(bytes);
}

#[cfg(unix)]
fn populate_pages(bytes: &[u8]) {
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
    fn outputs_are_zeroed_writable_sized_and_fallible() {
        let mut b = zeroed::<f32>(3 << 20).unwrap();
        assert_eq!(b.len(), 3 << 20);
        assert!(b.iter().all(|&v| v == 0.0));
        b[12345] = 1.5;
        assert_eq!(b[12345], 1.5);
        assert!(zeroed::<f64>(0).unwrap().is_empty());
        let bytes: Vec<u8> = (0..10).collect();
        assert_eq!(
            copy_of::<u16>(&bytes).unwrap(),
            [0x0100, 0x0302, 0x0504, 0x0706, 0x0908]
        );
        // More than the address space can hold: a coded error, not an abort.
        let e = zeroed::<u8>(usize::MAX / 2).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Io, "{e}");
        assert!(zeroed::<u64>(usize::MAX / 4).is_err());
    }
}
