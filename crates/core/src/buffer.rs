//! Output buffers for large conversions.
//!
//! A fresh 256 MiB `Vec` costs 65,536 page faults of 4 KiB when first written — on these
//! machines that alone takes ~10× longer than converting the data. Large outputs therefore
//! get transparent huge pages requested (`MADV_HUGEPAGE`: THP is madvise-only here, as it is
//! on many distributions) and are faulted in before the conversion writes them
//! ([`prepare_output`]), in 2 MiB steps while huge pages come fast, in one
//! `MADV_POPULATE_WRITE` call of 4 KiB pages when they do not.

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
        let ptr = map_anonymous(map_len, bytes)?;
        prepare_output(ptr.cast(), bytes);
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

/// `MADV_POPULATE_WRITE` (Linux 5.14+): fault pages in, writable, in one call.
const MADV_POPULATE_WRITE: libc::c_int = 23;
const PAGE: usize = 4096;

/// How much CPU time faulting in a 2 MiB huge page may take, on average, before 4 KiB pages
/// are the better choice. Measured on this project's benchmark VM (CPU time of the faulting
/// thread, 256 MiB outputs): 4 KiB pages cost 0.7–0.9 ms per 2 MiB whatever memory they come
/// from; a huge page 0.3–0.4 ms when it reuses memory freed moments ago (single pages now and
/// then 3–4 ms), but 4–8 ms when the hypervisor must back the memory afresh — the guest hands
/// large free blocks back to the host, so memory not freed recently is cold, and huge pages
/// come from large free blocks. The same stall happens on bare metal when the kernel must
/// compact memory to find a free 2 MiB block (THP `defrag=madvise` compacts synchronously).
const SLOW_HUGE_PAGE: std::time::Duration = std::time::Duration::from_micros(1500);

/// Huge pages faulted in per measurement: the average of a few, as single pages vary.
const PROBE_PAGES: usize = 4;

/// After slow huge pages, how long outputs use 4 KiB pages before huge pages are tried again.
const HUGE_PAGE_RETRY: std::time::Duration = std::time::Duration::from_millis(500);

/// Until when (ms since [`epoch`]) huge pages are not asked for, after one was slow.
static HUGE_PAGES_SLOW_UNTIL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn epoch() -> std::time::Instant {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(std::time::Instant::now)
}

fn now_ms() -> u64 {
    epoch().elapsed().as_millis() as u64
}

/// The calling thread's CPU time: what a page fault costs it, without the time other processes
/// ran meanwhile (on a busy machine, wall time would blame huge pages for every preemption).
/// A stall of the hypervisor backing guest memory counts, as the thread's vCPU is busy.
fn thread_cpu_time() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the timespec it is given; cannot fail for this clock on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    std::time::Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// # Safety
/// `[from, to)` must lie inside a live allocation of the caller that nobody else uses yet.
unsafe fn advise(from: usize, to: usize, advice: libc::c_int) {
    if to > from {
        // SAFETY: per the contract; these advices change no contents (populating fresh
        // anonymous memory faults in zero pages; touched pages stay as they are).
        unsafe { libc::madvise(from as *mut libc::c_void, to - from, advice) };
    }
}

/// Fault in `[from, to)` (page-aligned), in huge pages while they come fast: [`PROBE_PAGES`]
/// at a time, switching what is left to 4 KiB pages (and telling other outputs to, for a
/// while) as soon as they took longer than [`SLOW_HUGE_PAGE`] each.
///
/// # Safety
/// As [`advise`].
unsafe fn populate(from: usize, to: usize) {
    let mut at = from;
    while at < to {
        if now_ms() < HUGE_PAGES_SLOW_UNTIL.load(std::sync::atomic::Ordering::Relaxed) {
            // SAFETY: per the contract.
            unsafe {
                advise(at, to, libc::MADV_NOHUGEPAGE);
                advise(at, to, MADV_POPULATE_WRITE);
            }
            return;
        }
        let next = (at + PROBE_PAGES * HUGE_PAGE).min(to);
        let pages = (next - at).div_ceil(HUGE_PAGE) as u32;
        let t0 = thread_cpu_time();
        // SAFETY: per the contract.
        unsafe { advise(at, next, MADV_POPULATE_WRITE) };
        if thread_cpu_time().saturating_sub(t0) > SLOW_HUGE_PAGE * pages {
            let until = now_ms() + HUGE_PAGE_RETRY.as_millis() as u64;
            HUGE_PAGES_SLOW_UNTIL.fetch_max(until, std::sync::atomic::Ordering::Relaxed);
        }
        at = next;
    }
}

/// Get fresh, untouched memory ready to receive an output of `len` bytes at `ptr` (memory of
/// our own or that someone else allocated, e.g. a V8 ArrayBuffer, which glibc maps afresh when
/// large): ask for transparent huge pages on its 2 MiB-aligned part and fault everything in
/// now, on two threads when large, so that the conversion that follows writes at memory speed.
/// Huge pages are used while they come fast; when they do not (see [`SLOW_HUGE_PAGE`]), the
/// rest — and every output for the next [`HUGE_PAGE_RETRY`] — uses 4 KiB pages, which then
/// cost less. Below [`LARGE_BUFFER_BYTES`] it does nothing. Advisory: errors are ignored (an
/// old kernel without `MADV_POPULATE_WRITE` just faults the pages in as they are written), and
/// the contents are unchanged.
pub fn prepare_output(ptr: *mut u8, len: usize) {
    if len < LARGE_BUFFER_BYTES {
        return;
    }
    let first = (ptr as usize).next_multiple_of(PAGE);
    let last = (ptr as usize).saturating_add(len) / PAGE * PAGE;
    let start = (ptr as usize).next_multiple_of(HUGE_PAGE).min(last);
    let end = (last / HUGE_PAGE * HUGE_PAGE).max(start);
    // SAFETY: the ranges lie inside [ptr, ptr + len), the caller's fresh allocation, which
    // nobody else uses yet.
    unsafe {
        advise(start, end, libc::MADV_HUGEPAGE);
        advise(first, start, MADV_POPULATE_WRITE);
        advise(end, last, MADV_POPULATE_WRITE);
    }
    let threads = crate::parallel::default_threads().min(2);
    if threads < 2 || end - start < 8 * HUGE_PAGE {
        // SAFETY: as above.
        unsafe { populate(start, end) };
        return;
    }
    let mid = (start + (end - start) / 2) / HUGE_PAGE * HUGE_PAGE;
    std::thread::scope(|scope| {
        // SAFETY: as above; the two halves do not overlap. No thread (the OS refused one):
        // this thread populates both.
        let other = std::thread::Builder::new()
            .spawn_scoped(scope, move || unsafe { populate(mid, end) })
            .is_ok();
        unsafe { populate(start, mid) };
        if !other {
            unsafe { populate(mid, end) };
        }
    });
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident pages of `[ptr, ptr + len)` (page-aligned), by mincore.
    fn resident_pages(ptr: usize, len: usize) -> usize {
        let mut vec = vec![0u8; len.div_ceil(PAGE)];
        // SAFETY: a live mapping of the test; one byte per page.
        let r = unsafe { libc::mincore(ptr as *mut libc::c_void, len, vec.as_mut_ptr()) };
        assert_eq!(r, 0);
        vec.iter().filter(|&&b| b & 1 == 1).count()
    }

    /// Whether this kernel knows `MADV_POPULATE_WRITE` (Linux 5.14+); without it
    /// [`prepare_output`] only advises, and nothing is faulted in ahead.
    fn kernel_populates() -> bool {
        let mut page = vec![0u8; 2 * PAGE];
        let at = (page.as_mut_ptr() as usize).next_multiple_of(PAGE);
        // SAFETY: one page inside `page`, which this function owns.
        unsafe { libc::madvise(at as *mut libc::c_void, PAGE, MADV_POPULATE_WRITE) == 0 }
    }

    #[test]
    fn prepared_outputs_are_faulted_in_and_stay_zero() {
        let populates = kernel_populates();
        for (len, offset) in [
            (40 << 20, 16),
            (6 << 20, 4096 + 8),
            (LARGE_BUFFER_BYTES - 1, 0),
        ] {
            let map_len = len + offset + PAGE;
            // SAFETY: a fresh private anonymous mapping, unmapped below.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    map_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(base, libc::MAP_FAILED);
            let ptr = base as usize + offset;
            prepare_output(ptr as *mut u8, len);
            let first = ptr.next_multiple_of(PAGE);
            let last = (ptr + len) / PAGE * PAGE;
            let resident = resident_pages(first, last - first);
            if len >= LARGE_BUFFER_BYTES && populates {
                assert_eq!(resident, (last - first) / PAGE, "{len} bytes at +{offset}");
            } else if len < LARGE_BUFFER_BYTES {
                assert_eq!(resident, 0, "small outputs are left alone");
            }
            // SAFETY: the range is inside the mapping.
            let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
            assert!(bytes.iter().all(|&b| b == 0));
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
