//! The pages of a private file mapping: mapped in one call before a conversion reads them,
//! given back once a read-once conversion is done with them, kept while JS may hold a view.
//!
//! A checkpoint loaded as F32 reads each stored tensor once. Left alone, every page it read
//! stays mapped — and counted in the process's resident set — until the whole file is
//! dropped: 1.2 GB of BF16 pages beside the 2.4 GB of F32 arrays made of them. So a
//! conversion that reads a range gives its whole pages back (`MADV_DONTNEED`) when it is
//! done. For a private file mapping that is only correct for pages nobody wrote: the pages
//! of a view handed to JS may have been written (they are this process's copy-on-write
//! copies, and dropping them would silently restore the file's bytes under the view), so
//! viewed ranges are recorded and their pages are never given back. Clean pages dropped this
//! way stay in the page cache; reading them again maps them again.
//!
//! A range converted a second time is kept mapped from then on: a caller converting the same
//! tensor over and over would otherwise pay for mapping its pages on every call.
//!
//! An element-wise conversion's first read of a range no view covers does not map it at all:
//! it reads the file with positioned reads ([`PageState::first_read`],
//! `Memory::convert_once`), which costs less than mapping the pages and giving them back.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Mutex, MutexGuard};

const PAGE: usize = 4096;

/// What has been done to the pages of one mapping. Ranges are byte offsets in the mapping.
#[derive(Default)]
pub struct PageState {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Ranges whose pages were asked to be mapped (and not given back since).
    populated: HashSet<(usize, usize)>,
    /// Ranges given back once after a read: read again, they are kept.
    released: HashSet<(usize, usize)>,
    /// Page intervals `start → end` that JS may view (and write): disjoint, merged.
    viewed: BTreeMap<usize, usize>,
}

impl PageState {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing that can panic runs under the lock; recover the state regardless.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Map the pages of `bytes` (the range `start..start + len` of the mapping `base`) in one
    /// call before a conversion walks them, instead of one fault per 4 KiB page — once per
    /// range: asking again for pages already mapped still walks the page tables (profiled
    /// at 10–19 ms per 128 MiB).
    pub fn populate_once(&self, base: &[u8], start: usize, len: usize) {
        let Some(bytes) = base.get(start..start.saturating_add(len)) else {
            return;
        };
        if bytes.is_empty() || !self.lock().populated.insert((start, len)) {
            return;
        }
        crate::buffer::populate_read(bytes);
    }

    /// Record that `start..start + len` is handed to JS as a view: its pages (rounded out to
    /// whole pages) are never given back.
    pub fn mark_viewed(&self, start: usize, len: usize) {
        if len == 0 {
            return;
        }
        let (mut a, mut b) = outward(start, len);
        let mut state = self.lock();
        // Merge with every interval that overlaps or touches [a, b).
        let touching: Vec<(usize, usize)> = state
            .viewed
            .range(..=b)
            .rev()
            .take_while(|&(_, &end)| end >= a)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in touching {
            state.viewed.remove(&s);
            a = a.min(s);
            b = b.max(e);
        }
        state.viewed.insert(a, b);
    }

    /// Whether a conversion of `start..start + len`, which the mapping path would read in
    /// `parts` (`[from, to)`), may read the file instead of the mapping: the first time, when
    /// no view covers any of its pages (a view may have written them). It is recorded as read
    /// once, as the mapping path would, so a second conversion reads the mapping and keeps it.
    pub fn first_read(&self, start: usize, len: usize, parts: &[(usize, usize)]) -> bool {
        let (a, b) = outward(start, len);
        let mut state = self.lock();
        let viewed = state
            .viewed
            .range(..b)
            .next_back()
            .is_some_and(|(_, &e)| e > a);
        let seen = parts.iter().any(|&(from, to)| {
            let key = (from, to - from);
            state.populated.contains(&key) || state.released.contains(&key)
        });
        if viewed || seen {
            return false;
        }
        for &(from, to) in parts {
            state.released.insert((from, to - from));
        }
        true
    }

    /// A conversion has read `start..start + len` of the mapping `base`: give back the whole
    /// pages inside it that no view covers — the first time. A range read again is kept.
    pub fn release(&self, base: &[u8], start: usize, len: usize) {
        if base.get(start..start.saturating_add(len)).is_none() || len == 0 {
            return;
        }
        let mut state = self.lock();
        if !state.released.insert((start, len)) {
            return;
        }
        state.populated.remove(&(start, len));
        let (a, b) = inward(start, len);
        give_back(&state, base, a, b);
    }

    /// Give back every page of the mapping that no view covers, recording nothing: for what
    /// a parser touched while opening the file (a zip's local headers, a pickle), which can be
    /// far more than it read — Linux 6.18 maps a page cache folio whole on a fault, so a few
    /// hundred header reads left 213 MiB of a 1.19 GB checkpoint resident before any tensor
    /// was read. The pages stay in the page cache; a read maps them again.
    pub fn give_back_unviewed(&self, base: &[u8]) {
        let state = self.lock();
        give_back(&state, base, 0, base.len() / PAGE * PAGE);
    }

    #[cfg(test)]
    fn viewed(&self) -> Vec<(usize, usize)> {
        self.lock().viewed.iter().map(|(&s, &e)| (s, e)).collect()
    }
}

/// `MADV_DONTNEED` the whole pages of `[a, b)` (page-aligned offsets of the mapping `base`)
/// outside every viewed interval. The caller holds the lock until the pages are gone, so a
/// view cannot be handed out over them meanwhile.
fn give_back(state: &State, base: &[u8], a: usize, b: usize) {
    // The gaps between viewed intervals inside [a, b).
    let mut from = a;
    let mut gaps = Vec::new();
    for (&s, &e) in state.viewed.range(..b) {
        if e <= from {
            continue;
        }
        if s > from {
            gaps.push((from, s.min(b)));
        }
        from = from.max(e);
    }
    if from < b {
        gaps.push((from, b));
    }
    let origin = base.as_ptr() as usize;
    for (s, e) in gaps {
        // Offsets in the mapping are page-aligned because the mapping starts on a page.
        // SAFETY: [s, e) lies inside [a, b), which the callers take inside the mapping; its
        // pages are clean (never handed to JS, never written by us), so a private mapping
        // reads them again from the file.
        unsafe {
            libc::madvise(
                (origin + s) as *mut libc::c_void,
                e - s,
                libc::MADV_DONTNEED,
            )
        };
    }
}

/// Whole pages covering `start..start + len`.
fn outward(start: usize, len: usize) -> (usize, usize) {
    (
        start / PAGE * PAGE,
        start.saturating_add(len).next_multiple_of(PAGE),
    )
}

/// Whole pages inside `start..start + len` (empty when there are none).
fn inward(start: usize, len: usize) -> (usize, usize) {
    let a = start.next_multiple_of(PAGE);
    let b = (start + len) / PAGE * PAGE;
    (a, b.max(a))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Resident pages of `bytes` (mincore).
    fn resident(bytes: &[u8]) -> usize {
        let pages = bytes.len().div_ceil(PAGE);
        let mut vec = vec![0u8; pages];
        // SAFETY: the range is a live mapping; `vec` holds one byte per page.
        let r = unsafe {
            libc::mincore(
                bytes.as_ptr() as *mut libc::c_void,
                bytes.len(),
                vec.as_mut_ptr(),
            )
        };
        assert_eq!(r, 0);
        vec.iter().filter(|&&b| b & 1 == 1).count()
    }

    /// Pages of `bytes` mapped in this process (/proc/self/pagemap: present bit).
    fn mapped(bytes: &[u8]) -> usize {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::open("/proc/self/pagemap").unwrap();
        let first = bytes.as_ptr() as usize / PAGE;
        let pages = bytes.len().div_ceil(PAGE);
        let mut raw = vec![0u8; pages * 8];
        f.read_exact_at(&mut raw, (first * 8) as u64).unwrap();
        raw.chunks_exact(8)
            .filter(|c| u64::from_le_bytes((*c).try_into().unwrap()) >> 63 == 1)
            .count()
    }

    fn mapping(pages: usize) -> (tempfile_path::TempPath, memmap2::MmapMut) {
        let path = tempfile_path::TempPath::new();
        let mut f = std::fs::File::create(&path.0).unwrap();
        let data: Vec<u8> = (0..pages * PAGE).map(|i| (i % 251) as u8).collect();
        f.write_all(&data).unwrap();
        drop(f);
        let f = std::fs::File::open(&path.0).unwrap();
        // SAFETY: a private mapping of a file only this test uses.
        let map = unsafe { memmap2::MmapOptions::new().map_copy(&f) }.unwrap();
        (path, map)
    }

    mod tempfile_path {
        pub struct TempPath(pub std::path::PathBuf);
        impl TempPath {
            pub fn new() -> TempPath {
                use std::sync::atomic::{AtomicUsize, Ordering};
                static N: AtomicUsize = AtomicUsize::new(0);
                TempPath(std::env::temp_dir().join(format!(
                    "stn-pages-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                )))
            }
        }
        impl Drop for TempPath {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
    }

    #[test]
    fn viewed_intervals_merge() {
        let p = PageState::default();
        p.mark_viewed(10, 5);
        p.mark_viewed(3 * PAGE, 1);
        assert_eq!(p.viewed(), vec![(0, PAGE), (3 * PAGE, 4 * PAGE)]);
        p.mark_viewed(PAGE - 1, 2 * PAGE); // touches both, fills the gap
        assert_eq!(p.viewed(), vec![(0, 4 * PAGE)]);
        p.mark_viewed(4 * PAGE, 1); // adjacent: merged
        p.mark_viewed(10 * PAGE, 0); // empty: nothing
        assert_eq!(p.viewed(), vec![(0, 5 * PAGE)]);
    }

    #[test]
    fn a_first_read_is_once_and_never_of_viewed_pages() {
        let p = PageState::default();
        p.mark_viewed(4 * PAGE + 100, PAGE); // pages 4..6
                                             // Ranges sharing a page with the view are not first reads; one ending at it is.
        assert!(!p.first_read(3 * PAGE, PAGE + 1, &[(3 * PAGE, 4 * PAGE + 1)]));
        assert!(!p.first_read(5 * PAGE + 10, 10, &[(5 * PAGE + 10, 5 * PAGE + 20)]));
        assert!(!p.first_read(0, 20 * PAGE, &[(0, 20 * PAGE)]));
        assert!(p.first_read(PAGE, 3 * PAGE, &[(PAGE, 2 * PAGE), (2 * PAGE, 4 * PAGE)]));
        assert!(p.first_read(6 * PAGE, 2, &[(6 * PAGE, 6 * PAGE + 2)]));
        // The second time it is not, and the parts count as read once: released again (by
        // a conversion from the mapping), they are kept.
        assert!(!p.first_read(PAGE, 3 * PAGE, &[(PAGE, 2 * PAGE), (2 * PAGE, 4 * PAGE)]));
        assert!(p.lock().released.contains(&(2 * PAGE, 2 * PAGE)));
        // A range populated for a conversion from the mapping is not a first read either.
        let (_path, map) = mapping(16);
        p.populate_once(&map, 10 * PAGE, PAGE);
        assert!(!p.first_read(10 * PAGE, PAGE, &[(10 * PAGE, 11 * PAGE)]));
    }

    #[test]
    fn release_gives_back_whole_unviewed_pages_once() {
        let (_path, mut map) = mapping(16);
        let p = PageState::default();
        // A view over pages 4..6, written through (a private copy of page 4).
        p.mark_viewed(4 * PAGE + 100, PAGE);
        map[4 * PAGE + 100] = 0xAB;
        let touch = |map: &[u8]| map.iter().step_by(PAGE).map(|&b| b as usize).sum::<usize>();
        std::hint::black_box(touch(&map));
        assert_eq!(mapped(&map), 16);
        // Read pages 1.5 .. 12.5: whole pages 2..12 inside, minus the viewed 4..6.
        let (start, len) = (PAGE + PAGE / 2, 11 * PAGE);
        p.release(&map, start, len);
        assert_eq!(mapped(&map[..2 * PAGE]), 2);
        assert_eq!(mapped(&map[2 * PAGE..4 * PAGE]), 0);
        assert_eq!(mapped(&map[4 * PAGE..6 * PAGE]), 2);
        assert_eq!(mapped(&map[6 * PAGE..12 * PAGE]), 0);
        assert_eq!(mapped(&map[12 * PAGE..]), 4);
        // The written byte survives; the given-back pages read the file's bytes again.
        assert_eq!(map[4 * PAGE + 100], 0xAB);
        assert_eq!(map[7 * PAGE + 5], ((7 * PAGE + 5) % 251) as u8);
        assert!(resident(&map) >= 1);
        // The second read of the same range keeps its pages.
        std::hint::black_box(touch(&map));
        p.release(&map, start, len);
        assert_eq!(mapped(&map[2 * PAGE..12 * PAGE]), 10);
    }

    #[test]
    fn an_opened_files_touched_pages_are_given_back_but_views() {
        let (_path, mut map) = mapping(16);
        let p = PageState::default();
        p.mark_viewed(9 * PAGE, 2 * PAGE);
        map[9 * PAGE] = 0xCD;
        let touch = |map: &[u8]| map.iter().step_by(PAGE).map(|&b| b as usize).sum::<usize>();
        std::hint::black_box(touch(&map));
        assert_eq!(mapped(&map), 16);
        p.give_back_unviewed(&map);
        assert_eq!(mapped(&map[..9 * PAGE]), 0);
        assert_eq!(mapped(&map[9 * PAGE..11 * PAGE]), 2);
        assert_eq!(mapped(&map[11 * PAGE..]), 0);
        assert_eq!(map[9 * PAGE], 0xCD);
        assert_eq!(map[3 * PAGE + 7], ((3 * PAGE + 7) % 251) as u8);
        // It records nothing: a later read's release still gives its pages back.
        std::hint::black_box(touch(&map));
        p.release(&map, 0, 4 * PAGE);
        assert_eq!(mapped(&map[..4 * PAGE]), 0);
    }

    #[test]
    fn ranges_outside_the_mapping_are_ignored() {
        let (_path, map) = mapping(2);
        let p = PageState::default();
        p.populate_once(&map, PAGE, usize::MAX);
        p.release(&map, PAGE, 2 * PAGE);
        p.release(&map, usize::MAX, 1);
        p.release(&map, 0, 0);
        assert_eq!(map[PAGE + 1], ((PAGE + 1) % 251) as u8);
    }
}
