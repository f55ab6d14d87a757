//! The unpickler's resource use, input by input. Each pickle is run alone (zip and legacy
//! persistent ids), then opened as the `data.pkl` of a torch zip with four 256-byte storages
//! behind it: at no moment may that allocate more than [`BASE_BYTES`] + [`BYTES_PER_BYTE`] ×
//! its length (a counting global allocator keeps the peak), nor take more CPU time than
//! [`BASE_TIME`] + [`TIME_PER_BYTE`] × its length (the thread's CPU time, which a loaded
//! machine does not stretch as it does the wall clock). Reading each listed tensor may add no more
//! than the tensor's own bytes. A copy per shared reference, a name built per shared key or
//! a digit-by-digit conversion of a long number breaks one of these lines; a quadratic cost
//! at 32 KB does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stcore::format::pytorch::pickle::{unpickle, Limits, PersistentIds};
use stcore::format::pytorch::PyTorchFile;
use stcore::format::safetensors::Memory;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What any input may allocate: the zip around it, the copy and name budgets' bases (1 MiB
/// each), the allow-list's index.
const BASE_BYTES: usize = 8 << 20;
/// What each input byte may add: the unpickler's structures take at most ~130 bytes per byte
/// (an `]` is a container and a stack slot, in vectors that double), copies 4, names 8.
const BYTES_PER_BYTE: usize = 256;
/// Tensors larger than this are not read here (`pickle_read` reads them): the time is the
/// output's, not the pickle's.
const MAX_READ_BYTES: u64 = 64 << 20;
const BASE_TIME: Duration = Duration::from_secs(2);
const TIME_PER_BYTE: Duration = Duration::from_micros(30);

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = CURRENT.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is forwarded to the system allocator unchanged; only counts are kept.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The CPU time this thread has used.
fn cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Run `f`, returning what it gave and the most it held allocated beyond what was before.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = CURRENT.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(before))
}

fuzz_target!(|pkl: &[u8]| {
    let allowed = BASE_BYTES + BYTES_PER_BYTE * pkl.len();
    let started = cpu_time();
    for ids in [
        PersistentIds::Zip,
        PersistentIds::Legacy,
        PersistentIds::Refused,
    ] {
        let (_, peak) = peak_of(|| drop(unpickle(pkl, 0, ids, Limits::default())));
        assert!(
            peak <= allowed,
            "unpickling {} bytes ({ids:?}) held {peak} bytes, over {allowed}",
            pkl.len()
        );
    }
    let (file, peak) = peak_of(|| {
        let zip = fuzz_oracles::torch_zip_with_storages(pkl);
        PyTorchFile::from_memory(Arc::new(Memory::Owned(zip)))
    });
    assert!(
        peak <= allowed,
        "opening a {}-byte pickle held {peak} bytes, over {allowed}",
        pkl.len()
    );
    let took = cpu_time() - started;
    let limit = BASE_TIME + TIME_PER_BYTE * pkl.len() as u32;
    assert!(
        took <= limit,
        "reading a {}-byte pickle took {took:?} of CPU time, over {limit:?}",
        pkl.len()
    );
    let Ok(file) = file else { return };
    for t in file.tensors() {
        if t.stored_len > MAX_READ_BYTES {
            continue;
        }
        let (_, peak) = peak_of(|| drop(file.fetch(&t.name)));
        let bound = allowed + t.stored_len as usize;
        assert!(
            peak <= bound,
            "reading {} ({} bytes) held {peak} bytes, over {bound}",
            t.name,
            t.stored_len
        );
    }
});
