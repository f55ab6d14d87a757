//! Memory that holds a source's bytes, and the bytes of one tensor handed to a caller.
//!
//! Every format reads through these: a whole file mapped privately (copy-on-write) or held
//! in an owned buffer, shared (`Arc`) by every view handed out, so a view outlives the
//! source that made it. [`TensorBytes`] is what a source's `fetch` returns: a range of such
//! shared memory (which the binding can hand to JS without a copy) or owned bytes (decoded,
//! gathered, or read with a positioned read).

use crate::error::{CoreError, Result};
#[cfg(feature = "fs")]
use std::fs::File;
use std::ops::Deref;
#[cfg(feature = "fs")]
use std::path::Path;
use std::sync::Arc;

/// How a file's bytes are reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// A private copy-on-write memory map: zero-copy views, pages read on first touch.
    #[default]
    Mmap,
    /// Plain reads instead of a mapping (for network file systems, where a mapping can fault
    /// with SIGBUS if the file changes or the server goes away). SafeTensors files read each
    /// tensor with one positioned read; formats that must parse the whole file (GGUF) read
    /// it into memory once.
    Read,
}

/// Memory that holds a whole file (or a decoded part of one): a private copy-on-write map or
/// an owned buffer.
pub enum Memory {
    #[cfg(feature = "mmap")]
    Mapped(Mapping),
    Owned(Vec<u8>),
}

/// A private file mapping, and what has been done to its pages ([`crate::pages`]).
#[cfg(feature = "mmap")]
pub struct Mapping {
    map: memmap2::MmapMut,
    pages: crate::pages::PageState,
}

#[cfg(feature = "mmap")]
impl Mapping {
    pub fn new(map: memmap2::MmapMut) -> Mapping {
        Mapping {
            map,
            pages: Default::default(),
        }
    }
}

impl Memory {
    #[cfg(feature = "fs")]
    /// The whole of an open regular file of `len` bytes, mapped privately (an empty file is
    /// an empty buffer: a zero-length mapping is an error). Without the `mmap` feature, read
    /// into memory.
    pub fn map(file: &File, len: u64, path: &Path) -> Result<Memory> {
        #[cfg(not(feature = "mmap"))]
        return Memory::read(file, len, path);
        #[cfg(feature = "mmap")]
        {
            if len == 0 {
                return Ok(Memory::Owned(Vec::new()));
            }
            // SAFETY: a private (copy-on-write) mapping; writes through it never reach the
            // file. If another process truncates the file while mapped, reads past the new
            // end fault (SIGBUS) — the documented hazard of mmap that `Backend::Read` avoids.
            let map = unsafe { memmap2::MmapOptions::new().map_copy(file) }
                .map_err(|e| CoreError::io(e, path))?;
            Ok(Memory::Mapped(Mapping::new(map)))
        }
    }

    #[cfg(feature = "fs")]
    /// The whole of an open regular file of `len` bytes, read into memory.
    fn read(file: &File, len: u64, path: &Path) -> Result<Memory> {
        use std::io::Read;
        let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        let mut reader = file;
        reader
            .read_to_end(&mut bytes)
            .map_err(|e| CoreError::io(e, path))?;
        Ok(Memory::Owned(bytes))
    }

    #[cfg(feature = "fs")]
    /// The whole of the regular file at `path` (`what` it should be, for the error when it
    /// is not a regular file), mapped or read into memory as `backend` says.
    pub fn open(path: &Path, what: &str, backend: Backend) -> Result<Arc<Memory>> {
        let (file, meta) = crate::fsutil::open_regular(path, what)?;
        Ok(Arc::new(Memory::load(&file, meta.len(), path, backend)?))
    }

    #[cfg(feature = "fs")]
    /// The whole of an open regular file of `len` bytes: mapped, or read into memory.
    pub fn load(file: &File, len: u64, path: &Path, backend: Backend) -> Result<Memory> {
        match backend {
            Backend::Mmap => Memory::map(file, len, path),
            Backend::Read => Memory::read(file, len, path),
        }
    }

    /// Map the pages of `start..start + len` in one call before a conversion walks them,
    /// once per range and mapping ([`crate::pages::PageState::populate_once`]).
    pub fn populate_once(&self, start: usize, len: usize) {
        #[cfg(feature = "mmap")]
        if let Memory::Mapped(m) = self {
            m.pages.populate_once(&m.map, start, len);
        }
        #[cfg(not(feature = "mmap"))]
        let _ = (start, len);
    }

    /// `start..start + len` is handed out as a view that may be written: its pages stay.
    pub fn mark_viewed(&self, start: usize, len: usize) {
        #[cfg(feature = "mmap")]
        if let Memory::Mapped(m) = self {
            m.pages.mark_viewed(start, len);
        }
        #[cfg(not(feature = "mmap"))]
        let _ = (start, len);
    }

    /// Give back every mapped page no view covers ([`crate::pages::PageState::give_back_unviewed`]):
    /// what parsing the file touched, once it is parsed.
    pub fn give_back_unviewed(&self) {
        #[cfg(feature = "mmap")]
        if let Memory::Mapped(m) = self {
            m.pages.give_back_unviewed(&m.map);
        }
    }

    /// A conversion has read `start..start + len` (and will likely not read it again): give
    /// its pages back unless a view covers them ([`crate::pages::PageState::release`]).
    pub fn release(&self, start: usize, len: usize) {
        #[cfg(feature = "mmap")]
        if let Memory::Mapped(m) = self {
            m.pages.release(&m.map, start, len);
        }
        #[cfg(not(feature = "mmap"))]
        let _ = (start, len);
    }
}

/// Source bytes a conversion reads per part in [`Memory::convert_once`].
pub const CONVERT_PART: usize = 16 << 20;

impl Memory {
    /// Read `start..start + len` once for `f`: the pages are mapped in one call before `f`
    /// reads them and given back after ([`Memory::populate_once`], [`Memory::release`]). A
    /// range outside the memory (the callers check theirs) reads as empty.
    pub fn read_once<R>(&self, start: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        self.populate_once(start, len);
        let out = f(self
            .get(start..start.saturating_add(len))
            .unwrap_or_default());
        self.release(start, len);
        out
    }

    /// Read `start..start + len` once ([`Memory::read_once`]) for a conversion `f` that turns
    /// each run of `len / dst.len()` bytes into one element of `dst`. A range of two [`CONVERT_PART`]s or more is converted one part at
    /// a time (`f` gets matching parts of both), each part's pages given back as soon as it is
    /// done: converting a model's last large tensor then does not hold all of its source
    /// pages beside every output made so far (the peak RSS of a whole checkpoint loaded as
    /// F32). Parts end on `CONVERT_PART` boundaries of the memory when the elements allow,
    /// so that no page is split between two parts (a split page is never given back).
    pub fn convert_once<T>(
        &self,
        start: usize,
        len: usize,
        dst: &mut [T],
        mut f: impl FnMut(&[u8], &mut [T]) -> Result<()>,
    ) -> Result<()> {
        let end = self.end_of(start, len)?;
        let n = dst.len();
        if n == 0 || !len.is_multiple_of(n) || len < 2 * CONVERT_PART {
            return self.read_once(start, len, |src| f(src, dst));
        }
        let k = len / n;
        let mut done = 0;
        while done < n {
            let from = start + done * k;
            let boundary = (from / CONVERT_PART + 1) * CONVERT_PART;
            let to = if (boundary - from).is_multiple_of(k) {
                boundary
            } else {
                from + CONVERT_PART / k * k
            }
            .min(end);
            let count = (to - from) / k;
            self.read_once(from, to - from, |src| f(src, &mut dst[done..done + count]))?;
            done += count;
        }
        Ok(())
    }
}

impl Memory {
    /// `start + len`, when that range lies inside the memory.
    fn end_of(&self, start: usize, len: usize) -> Result<usize> {
        start
            .checked_add(len)
            .filter(|&end| end <= self.len())
            .ok_or_else(|| {
                CoreError::invalid_argument(format!(
                    "byte range {start}+{len} outside the {} bytes held",
                    self.len()
                ))
            })
    }

    /// Read `start..start + len` once, in parts ending on [`CONVERT_PART`] boundaries of the
    /// memory when the range spans two parts or more: `f` gets each part in order, and each
    /// part's pages are given back as soon as `f` returns ([`Memory::read_once`]), so a large
    /// tensor streamed somewhere (written to a file, checksummed) is never resident whole.
    pub fn read_parts(
        &self,
        start: usize,
        len: usize,
        mut f: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let end = self.end_of(start, len)?;
        if len < 2 * CONVERT_PART {
            return self.read_once(start, len, f);
        }
        let mut from = start;
        while from < end {
            let to = ((from / CONVERT_PART + 1) * CONVERT_PART).min(end);
            self.read_once(from, to - from, &mut f)?;
            from = to;
        }
        Ok(())
    }
}

impl Deref for Memory {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            #[cfg(feature = "mmap")]
            Memory::Mapped(m) => &m.map,
            Memory::Owned(v) => v,
        }
    }
}

/// A tensor's bytes: borrowed from shared memory (with the `Arc` and absolute range so a
/// binding can hand out a zero-copy view), or owned.
pub enum TensorBytes<'a> {
    Shared {
        memory: &'a Arc<Memory>,
        start: usize,
        len: usize,
    },
    Owned(Vec<u8>),
}

impl<'a> TensorBytes<'a> {
    /// `memory[start..start + len]`, checked: a range outside the memory is an error, never
    /// a panic later.
    pub fn shared(memory: &'a Arc<Memory>, start: usize, len: usize) -> Result<TensorBytes<'a>> {
        if start.checked_add(len).is_none_or(|end| end > memory.len()) {
            return Err(CoreError::invalid_argument(format!(
                "byte range {start}+{len} outside the {} bytes held",
                memory.len()
            )));
        }
        Ok(TensorBytes::Shared { memory, start, len })
    }

    pub fn as_slice(&self) -> &[u8] {
        match self {
            // Checked by `shared` (and by every source's validation at open).
            TensorBytes::Shared { memory, start, len } => {
                memory.get(*start..*start + *len).unwrap_or_default()
            }
            TensorBytes::Owned(v) => v,
        }
    }

    /// The bytes in order, in parts: a range of shared memory read with
    /// [`Memory::read_parts`] (each part's pages given back once `f` is done with it), owned
    /// bytes in one part.
    pub fn read_parts(&self, mut f: impl FnMut(&[u8]) -> Result<()>) -> Result<()> {
        match self {
            TensorBytes::Shared { memory, start, len } => memory.read_parts(*start, *len, f),
            TensorBytes::Owned(v) => f(v),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            TensorBytes::Shared { len, .. } => *len,
            TensorBytes::Owned(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes as a `Cow`: borrowed from the shared memory, or the owned buffer.
    pub fn into_cow(self) -> std::borrow::Cow<'a, [u8]> {
        match self {
            TensorBytes::Shared { memory, start, len } => {
                let memory: &'a Memory = memory;
                std::borrow::Cow::Borrowed(memory.get(start..start + len).unwrap_or_default())
            }
            TensorBytes::Owned(v) => std::borrow::Cow::Owned(v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident KiB of the mapping that starts at `base`.
    #[cfg(feature = "mmap")]
    fn resident_kib(base: usize) -> usize {
        let rss = crate::buffer::smaps_field(base, "Rss");
        rss.trim_end_matches("kB").trim().parse().unwrap()
    }

    #[test]
    #[cfg(feature = "mmap")]
    fn large_conversions_give_each_part_back_as_they_go() {
        // 40 MiB of u16 after a 24-byte header: parts of 16 MiB on the mapping's boundaries.
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("x.bin");
        let n = 20 << 20;
        let mut bytes = vec![0u8; 24];
        for i in 0..n {
            bytes.extend_from_slice(&((i % 65521) as u16).to_le_bytes());
        }
        std::fs::write(&path, &bytes).unwrap();
        let memory = Memory::open(&path, "a test file", Backend::Mmap).unwrap();
        let base = memory.as_ptr() as usize;
        let mut dst = vec![0u32; n];
        let mut parts = Vec::new();
        memory
            .convert_once(24, 2 * n, &mut dst, |src, out| {
                // Only this part's pages (plus the header's and the split first page) are mapped.
                parts.push((src.len(), resident_kib(base)));
                for (o, b) in out.iter_mut().zip(src.chunks_exact(2)) {
                    *o = u16::from_le_bytes([b[0], b[1]]) as u32;
                }
                Ok(())
            })
            .unwrap();
        assert_eq!(
            parts.iter().map(|p| p.0).collect::<Vec<_>>(),
            [
                CONVERT_PART - 24,
                CONVERT_PART,
                2 * n + 24 - 2 * CONVERT_PART
            ]
        );
        for (len, kib) in &parts {
            assert!(
                *kib <= len / 1024 + 8,
                "{kib} KiB resident converting {len} bytes"
            );
        }
        assert!(dst
            .iter()
            .enumerate()
            .all(|(i, &v)| v == (i % 65521) as u32));
        assert!(resident_kib(base) <= 8, "all given back");
        // An error in a part stops the conversion and is returned.
        let e = memory
            .convert_once(24, 2 * n, &mut dst, |_, _| {
                Err(CoreError::invalid_argument("no"))
            })
            .unwrap_err();
        assert!(e.to_string().contains("no"));
        assert!(memory
            .convert_once(24, 2 * n + 2, &mut dst, |_, _| Ok(()))
            .is_err());
    }

    #[test]
    #[cfg(feature = "mmap")]
    fn streamed_reads_give_each_part_back_as_they_go() {
        // 40 MiB + 100 bytes after a 24-byte header: parts end on the mapping's 16 MiB marks.
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("x.bin");
        let len = (40 << 20) + 100;
        let bytes: Vec<u8> = (0..len + 24).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let memory = Memory::open(&path, "a test file", Backend::Mmap).unwrap();
        let base = memory.as_ptr() as usize;
        let mut parts = Vec::new();
        let mut seen = Vec::with_capacity(len);
        memory
            .read_parts(24, len, |part| {
                parts.push((part.len(), resident_kib(base)));
                seen.extend_from_slice(part);
                Ok(())
            })
            .unwrap();
        assert_eq!(
            parts.iter().map(|p| p.0).collect::<Vec<_>>(),
            [CONVERT_PART - 24, CONVERT_PART, len + 24 - 2 * CONVERT_PART]
        );
        for (len, kib) in &parts {
            assert!(
                *kib <= len / 1024 + 8,
                "{kib} KiB resident reading {len} bytes"
            );
        }
        assert!(seen == bytes[24..], "the parts are the bytes, in order");
        assert!(resident_kib(base) <= 8, "all given back");
        // Owned bytes come in one part; errors stop the reading; ranges are checked.
        let owned = TensorBytes::Owned(vec![7; 5]);
        let mut n = 0;
        owned
            .read_parts(|p| {
                n += 1;
                assert_eq!(p, [7; 5]);
                Ok(())
            })
            .unwrap();
        assert_eq!(n, 1);
        let e = memory
            .read_parts(24, len, |_| Err(CoreError::invalid_argument("no")))
            .unwrap_err();
        assert!(e.to_string().contains("no"));
        assert!(memory.read_parts(24, len + 1, |_| Ok(())).is_err());
        assert!(memory.read_parts(usize::MAX, 2, |_| Ok(())).is_err());
    }

    #[test]
    fn shared_ranges_are_checked() {
        let memory = Arc::new(Memory::Owned(vec![1, 2, 3, 4]));
        let b = TensorBytes::shared(&memory, 1, 2).unwrap();
        assert_eq!((b.as_slice(), b.len()), (&[2u8, 3][..], 2));
        assert_eq!(b.into_cow().as_ref(), &[2u8, 3]);
        for (start, len) in [(3, 2), (usize::MAX, 2), (5, 0)] {
            let e = TensorBytes::shared(&memory, start, len).err().unwrap();
            assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
        }
        assert!(TensorBytes::shared(&memory, 4, 0).unwrap().is_empty());
    }
}
