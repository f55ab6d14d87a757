//! Output buffers for large conversions.
//!
//! A fresh 256 MiB `Vec` costs 65,536 page faults of 4 KiB when first written — on these
//! machines that alone takes ~10× longer than converting the data. Large outputs therefore
//! come from an anonymous mapping with transparent huge pages requested (`MADV_HUGEPAGE`:
//! THP is madvise-only here, as it is on many distributions), so they fault in 2 MiB steps.

use crate::cast::Element;
use crate::error::{CoreError, Result};
use std::ptr::NonNull;

/// Outputs at least this large use a huge-page mapping; smaller ones a plain `Vec`.
pub const LARGE_BUFFER_BYTES: usize = 4 << 20;
const HUGE_PAGE: usize = 2 << 20;

/// A zero-initialised buffer of `len` elements in its own anonymous mapping.
pub struct LargeBuffer<T: Element> {
    ptr: NonNull<T>,
    len: usize,
    map_len: usize,
}

// SAFETY: the buffer owns its mapping exclusively, like a Vec.
unsafe impl<T: Element> Send for LargeBuffer<T> {}
unsafe impl<T: Element> Sync for LargeBuffer<T> {}

impl<T: Element> LargeBuffer<T> {
    pub fn zeroed(len: usize) -> Result<Self> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| CoreError::invalid_argument("buffer size overflows"))?;
        let map_len = bytes.max(1).next_multiple_of(HUGE_PAGE);
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
        // SAFETY: advisory only, on the mapping just created; failure is harmless.
        unsafe { libc::madvise(ptr, map_len, libc::MADV_HUGEPAGE) };
        Ok(LargeBuffer {
            ptr: NonNull::new(ptr as *mut T)
                .ok_or_else(|| CoreError::invalid_argument("null mapping"))?,
            len,
            map_len,
        })
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
        // SAFETY: the mapping holds `len` zero-initialised (valid, POD) elements.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as above, and we have exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Element> Drop for LargeBuffer<T> {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping created in `zeroed`.
        unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.map_len) };
    }
}

/// A conversion's output: a plain vector, or a huge-page buffer when large.
pub enum Output<T: Element> {
    Small(Vec<T>),
    Large(LargeBuffer<T>),
}

impl<T: Element + Default> Output<T> {
    pub fn zeroed(len: usize) -> Result<Self> {
        if len.saturating_mul(std::mem::size_of::<T>()) >= LARGE_BUFFER_BYTES {
            LargeBuffer::zeroed(len).map(Output::Large)
        } else {
            Ok(Output::Small(vec![T::default(); len]))
        }
    }
}

impl<T: Element + Default> Output<T> {
    /// The elements of `bytes` (native byte order; a trailing partial element is ignored)
    /// in a new output buffer: large copies land in huge pages, not 4 KiB page faults.
    pub fn copy_of(bytes: &[u8]) -> Result<Self> {
        let n = bytes.len() / std::mem::size_of::<T>();
        let mut out = Output::zeroed(n)?;
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

/// Ask for transparent huge pages on the 2 MiB-aligned part of `len` bytes at `ptr`, memory
/// someone else allocated (e.g. a V8 ArrayBuffer, which glibc maps afresh when large) and
/// nobody has touched yet. Advisory: errors are ignored; below [`LARGE_BUFFER_BYTES`] it does
/// nothing.
pub fn advise_huge_pages(ptr: *mut u8, len: usize) {
    if len < LARGE_BUFFER_BYTES {
        return;
    }
    let start = (ptr as usize).next_multiple_of(HUGE_PAGE);
    let end = (ptr as usize).saturating_add(len) / HUGE_PAGE * HUGE_PAGE;
    if end > start {
        // SAFETY: the range lies inside the caller's live allocation (2 MiB-aligned subrange
        // of it); MADV_HUGEPAGE changes no contents.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

/// Whether `len` bytes can be allocated at all: an allocator that aborts the process on
/// failure (V8's `ArrayBuffer::New`) must only be asked for what the kernel would grant. A
/// fresh anonymous mapping of that size is created (nothing is touched) and released again;
/// it fails as the real allocation would (overcommit policy, address-space limits).
pub fn check_allocatable(len: usize) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    // SAFETY: a fresh private anonymous mapping, never touched, unmapped below.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
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
                "cannot allocate {len} bytes: {}",
                std::io::Error::last_os_error()
            ),
        ));
    }
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

/// Drop this process's copies of the whole pages inside `bytes` (part of a private file
/// mapping): the process's RSS falls by their size, and the pages come back from the file (or
/// the page cache) if touched again. Pages modified through the mapping (copy-on-write)
/// would revert to the file's contents: call it only on bytes nobody wrote. Advisory.
pub fn release_pages(bytes: &[u8]) {
    let page = 4096usize;
    let start = (bytes.as_ptr() as usize).div_ceil(page) * page;
    let end = (bytes.as_ptr() as usize + bytes.len()) / page * page;
    if end > start {
        // SAFETY: the range lies within `bytes`, part of a live private file mapping; for
        // such a mapping MADV_DONTNEED only drops page-table entries (contents refault from
        // the file), so no memory this process relies on becomes invalid.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_buffers_are_zeroed_writable_and_sized() {
        let mut b = LargeBuffer::<f32>::zeroed(3 << 20).unwrap();
        assert_eq!(b.len(), 3 << 20);
        assert!(b.as_slice().iter().all(|&v| v == 0.0));
        b.as_mut_slice()[12345] = 1.5;
        assert_eq!(b.as_slice()[12345], 1.5);
        assert!(matches!(
            Output::<f32>::zeroed(10).unwrap(),
            Output::Small(_)
        ));
        assert!(matches!(
            Output::<f32>::zeroed(2 << 20).unwrap(),
            Output::Large(_)
        ));
        let empty = LargeBuffer::<f64>::zeroed(0).unwrap();
        assert!(empty.is_empty());
    }
}
