//! Large output mappings kept for reuse once their buffer is dropped.
//!
//! A fresh mapping costs page faults and the kernel's zeroing of every page when it is first
//! written: for a 64 MiB decode that is more than the decoding (7.2 ms against 4.3 ms into
//! memory written before, Q4_K on two threads here). A loop that reads a tensor, uses it and
//! drops it — dequantising a GGUF, converting a checkpoint, a `getTensorAsync` per layer —
//! asks for outputs of the same sizes again and again. So a dropped [`super::LargeBuffer`]'s
//! mapping is kept here, resident with its huge pages, and the next output that fits takes it
//! (MLX's allocator keeps a cache of freed buffers for the same reason).
//!
//! Bounded twice: at most [`limit`] bytes are kept (the oldest go first), and a mapping unused
//! for [`IDLE`] is unmapped by a thread that runs only while the cache holds something. An
//! idle process gives every byte back within about 1.5 × [`IDLE`].
//!
//! A reused mapping holds an earlier output's values, not zeros: it is handed out only by
//! [`super::LargeBuffer::for_overwrite`], whose callers write every element before anything
//! reads it.

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a kept mapping may go unused before it is unmapped.
pub const IDLE: Duration = Duration::from_secs(1);

/// At most this much is kept, whatever the memory: more is rarely reused before [`IDLE`].
const MAX_LIMIT: usize = 1 << 30;

struct Entry {
    addr: usize,
    len: usize,
    since: Instant,
}

struct Cache {
    entries: Vec<Entry>,
    bytes: usize,
    /// Whether a trimming thread is running (it clears this as it exits).
    trimming: bool,
}

static CACHE: Mutex<Cache> = Mutex::new(Cache {
    entries: Vec::new(),
    bytes: 0,
    trimming: false,
});

fn lock() -> MutexGuard<'static, Cache> {
    // Nothing that can panic runs under the lock; recover the state regardless.
    CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The most the cache keeps: 1/16 of physical memory, at most 1 GiB. Without the `threads`
/// feature nothing would unmap idle mappings, so nothing is kept.
pub fn limit() -> usize {
    if !cfg!(feature = "threads") {
        return 0;
    }
    static LIMIT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| (super::physical_memory() / 16).min(MAX_LIMIT))
}

/// Bytes kept now.
pub fn kept_bytes() -> usize {
    lock().bytes
}

/// Unmap every kept mapping now; returns how many bytes that gave back.
pub fn release() -> usize {
    let stale: Vec<Entry> = {
        let mut c = lock();
        c.bytes = 0;
        std::mem::take(&mut c.entries)
    };
    unmap_all(stale)
}

/// A kept mapping of exactly `len` bytes (a multiple of the huge-page size, like every kept
/// length), cut from the smallest one that holds it; the rest of that one stays kept.
pub(super) fn take(len: usize) -> Option<*mut u8> {
    let (found, stale) = {
        let mut c = lock();
        let stale = c.drain_idle(Instant::now());
        (c.take(len), stale)
    };
    unmap_all(stale);
    found.map(|addr| addr as *mut u8)
}

/// Keep the mapping of `len` bytes at `addr` (which nothing uses any more) for reuse, or
/// unmap it when it is larger than the limit. Older mappings make room for it.
pub(super) fn give(addr: *mut u8, len: usize) {
    let limit = limit();
    if len == 0 || len > limit {
        unmap(addr as usize, len);
        return;
    }
    let (spawn, stale) = {
        let mut c = lock();
        let stale = c.give(addr as usize, len, Instant::now(), limit);
        let spawn = !c.trimming;
        c.trimming = true;
        (spawn, stale)
    };
    unmap_all(stale);
    if spawn && !spawn_trimmer() {
        // No thread: nothing would unmap what is kept once the process goes idle.
        lock().trimming = false;
        release();
    }
}

impl Cache {
    /// The smallest kept mapping of at least `len` bytes, cut to `len` (the rest stays).
    fn take(&mut self, len: usize) -> Option<usize> {
        let best = (0..self.entries.len())
            .filter(|&i| self.entries[i].len >= len)
            .min_by_key(|&i| self.entries[i].len)?;
        let e = self.entries.swap_remove(best);
        self.bytes -= e.len;
        if e.len > len {
            self.keep(e.addr + len, e.len - len, e.since);
        }
        Some(e.addr)
    }

    /// Keep `len` bytes at `addr` (at most `limit` in all), taking out the idle and then the
    /// oldest entries to make room; returns what was taken out, to unmap.
    fn give(&mut self, addr: usize, len: usize, now: Instant, limit: usize) -> Vec<Entry> {
        let mut out = self.drain_idle(now);
        while self.bytes + len > limit {
            let Some(oldest) = (0..self.entries.len()).min_by_key(|&i| self.entries[i].since)
            else {
                break;
            };
            let e = self.entries.swap_remove(oldest);
            self.bytes -= e.len;
            out.push(e);
        }
        self.keep(addr, len, now);
        out
    }

    fn keep(&mut self, addr: usize, len: usize, since: Instant) {
        self.bytes += len;
        self.entries.push(Entry { addr, len, since });
    }

    /// Take out the entries unused for [`IDLE`] or longer.
    fn drain_idle(&mut self, now: Instant) -> Vec<Entry> {
        let mut stale = Vec::new();
        let mut i = 0;
        while i < self.entries.len() {
            if now.duration_since(self.entries[i].since) >= IDLE {
                let e = self.entries.swap_remove(i);
                self.bytes -= e.len;
                stale.push(e);
            } else {
                i += 1;
            }
        }
        stale
    }
}

/// A thread that unmaps idle mappings every half [`IDLE`] and exits once nothing is kept.
fn spawn_trimmer() -> bool {
    #[cfg(feature = "threads")]
    {
        std::thread::Builder::new()
            .name("stcore-cache".into())
            .spawn(|| loop {
                std::thread::sleep(IDLE / 2);
                let (stale, done) = {
                    let mut c = lock();
                    let stale = c.drain_idle(Instant::now());
                    let done = c.entries.is_empty();
                    if done {
                        c.trimming = false;
                    }
                    (stale, done)
                };
                unmap_all(stale);
                if done {
                    return;
                }
            })
            .is_ok()
    }
    #[cfg(not(feature = "threads"))]
    false
}

fn unmap_all(entries: Vec<Entry>) -> usize {
    entries.iter().map(|e| unmap(e.addr, e.len)).sum()
}

fn unmap(addr: usize, len: usize) -> usize {
    if len > 0 {
        // SAFETY: every (addr, len) here is a whole mapping made by `super::map_output` or
        // a part of one cut by `take`, which no buffer uses any more.
        unsafe { libc::munmap(addr as *mut libc::c_void, len) };
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    fn cache() -> Cache {
        Cache {
            entries: Vec::new(),
            bytes: 0,
            trimming: false,
        }
    }

    fn kept(c: &Cache) -> Vec<(usize, usize)> {
        let mut v: Vec<_> = c.entries.iter().map(|e| (e.addr, e.len)).collect();
        v.sort();
        v
    }

    #[test]
    fn the_smallest_mapping_that_fits_is_cut_to_size_and_the_rest_kept() {
        let now = Instant::now();
        let mut c = cache();
        assert!(c.give(0x1000_0000, 64 * MIB, now, usize::MAX).is_empty());
        assert!(c.give(0x8000_0000, 16 * MIB, now, usize::MAX).is_empty());
        assert_eq!(c.take(128 * MIB), None);
        // 12 MiB comes out of the 16 MiB mapping, not the 64 MiB one.
        assert_eq!(c.take(12 * MIB), Some(0x8000_0000));
        assert_eq!(
            kept(&c),
            [(0x1000_0000, 64 * MIB), (0x8000_0000 + 12 * MIB, 4 * MIB)]
        );
        assert_eq!(c.bytes, 68 * MIB);
        assert_eq!(c.take(64 * MIB), Some(0x1000_0000));
        assert_eq!(c.take(4 * MIB), Some(0x8000_0000 + 12 * MIB));
        assert_eq!((c.take(2 * MIB), c.bytes), (None, 0));
    }

    #[test]
    fn the_limit_takes_out_the_oldest_first_and_idle_ones_go() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut c = cache();
        c.give(0x1000_0000, 32 * MIB, t0, 64 * MIB);
        c.give(0x2000_0000, 16 * MIB, t0 + ms(10), 64 * MIB);
        c.give(0x3000_0000, 16 * MIB, t0 + ms(20), 64 * MIB);
        // 8 MiB more exceeds 64 MiB: the oldest (32 MiB) makes room.
        let out = c.give(0x4000_0000, 8 * MIB, t0 + ms(30), 64 * MIB);
        assert_eq!(
            out.iter().map(|e| e.addr).collect::<Vec<_>>(),
            [0x1000_0000]
        );
        assert_eq!(c.bytes, 40 * MIB);
        // A mapping unused for IDLE goes at the next call; the others stay.
        let out = c.drain_idle(t0 + ms(15) + IDLE);
        assert_eq!(
            out.iter().map(|e| e.addr).collect::<Vec<_>>(),
            [0x2000_0000]
        );
        assert_eq!(kept(&c), [(0x3000_0000, 16 * MIB), (0x4000_0000, 8 * MIB)]);
        assert_eq!(c.drain_idle(t0 + ms(30) + IDLE).len(), 2);
        assert_eq!((c.entries.len(), c.bytes), (0, 0));
    }

    #[test]
    fn a_cut_keeps_the_age_of_its_mapping() {
        let t0 = Instant::now();
        let mut c = cache();
        c.give(0x1000_0000, 8 * MIB, t0, usize::MAX);
        assert_eq!(c.take(2 * MIB), Some(0x1000_0000));
        assert_eq!(c.drain_idle(t0 + IDLE).len(), 1);
    }
}
