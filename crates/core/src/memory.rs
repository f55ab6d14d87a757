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
    /// The file mapped (a duplicate descriptor) and its path, for the positioned reads of a
    /// range converted once ([`Memory::convert_once`]); none when it could not be duplicated.
    file: Option<(File, std::path::PathBuf)>,
}

#[cfg(feature = "mmap")]
impl Mapping {
    pub fn new(map: memmap2::MmapMut) -> Mapping {
        Mapping {
            map,
            pages: Default::default(),
            file: None,
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
            Ok(Memory::Mapped(Mapping {
                file: file.try_clone().ok().map(|f| (f, path.to_path_buf())),
                ..Mapping::new(map)
            }))
        }
    }

    #[cfg(feature = "fs")]
    /// The whole of an open regular file of `len` bytes (its size when opened), read into
    /// memory: no more than `len` bytes, and ERR_IO rather than an abort when they do not fit
    /// ([`reserve`]).
    fn read(file: &File, len: u64, path: &Path) -> Result<Memory> {
        use std::io::Read;
        let mut bytes = reserve(
            len,
            "backend 'read' holds the whole file in memory, backend 'mmap' maps it instead",
        )
        .map_err(|e| e.with_path(path))?;
        file.take(len)
            .read_to_end(&mut bytes)
            .map_err(|e| CoreError::io(e, path))?;
        if (bytes.len() as u64) < len {
            return Err(CoreError::incomplete_file(
                "file is shorter than when it was opened (changed on disk?)",
            )
            .with_path(path));
        }
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

/// An empty buffer with room for `len` bytes (`what` they are for, in messages), for a size that comes
/// from outside (a file's size, a tensor's length): ERR_IO when they cannot be held, never an
/// abort of the process. More than the machine's physical memory is refused before anything
/// is asked of the allocator: under overcommit such a reservation can succeed and the
/// process be killed while it fills.
pub fn reserve(len: u64, what: &str) -> Result<Vec<u8>> {
    let physical = crate::buffer::physical_memory() as u64;
    let too_large = || {
        CoreError::new(
            crate::error::ErrorKind::Io,
            format!("cannot hold {len} bytes in memory ({physical} bytes here): {what}"),
        )
    };
    if len > physical {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(usize::try_from(len).map_err(|_| too_large())?)
        .map_err(|_| too_large())?;
    Ok(bytes)
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
    /// each run of `len / dst.len()` bytes into one element of `dst`.
    ///
    /// The first conversion of a range of a file mapping that no view covers reads the file
    /// with positioned reads instead ([`convert_by_reads`]): its pages are never
    /// mapped into this process. Otherwise a range of two [`CONVERT_PART`]s or more is
    /// converted one part at a time (`f` gets matching parts of both), each part's pages given
    /// back as soon as it is done: converting a model's last large tensor then does not hold
    /// all of its source pages beside every output made so far (the peak RSS of a whole
    /// checkpoint loaded as F32). Parts end on `CONVERT_PART` boundaries of the memory when the
    /// elements allow, so that no page is split between two parts (a split page is never
    /// given back).
    pub fn convert_once<T: Send>(
        &self,
        start: usize,
        len: usize,
        dst: &mut [T],
        f: impl Fn(&[u8], &mut [T]) -> Result<()> + Sync,
    ) -> Result<()> {
        self.end_of(start, len)?;
        let n = dst.len();
        if n == 0 || !len.is_multiple_of(n) {
            return self.read_once(start, len, |src| f(src, dst));
        }
        let block = Block {
            bytes: len / n,
            values: 1,
        };
        self.convert_blocks_once(start, len, dst, block, f)
    }

    /// [`Memory::convert_once`] for a conversion that turns each `block` of bytes into
    /// `block.values` elements of `dst` (a ggml block type decoded): `f` is only ever given
    /// whole blocks and their elements. A range that is not a whole number of blocks, or a
    /// `dst` of another length, is ERR_INVALID_ARGUMENT.
    ///
    /// A file mapping's pages are read only while the file still holds them: a file truncated
    /// since it was mapped is ERR_IO (its first conversion reads the file and finds the end;
    /// later ones check the file's length first), where reading the mapping past the file's
    /// end would fault (SIGBUS) and kill the process. (A file truncated while its pages are
    /// being read still faults: no check can close that window; `Backend::Read` has none.)
    pub fn convert_blocks_once<T: Send>(
        &self,
        start: usize,
        len: usize,
        dst: &mut [T],
        block: Block,
        f: impl Fn(&[u8], &mut [T]) -> Result<()> + Sync,
    ) -> Result<()> {
        let end = self.end_of(start, len)?;
        let Block { bytes: k, values } = block;
        if k == 0 || !len.is_multiple_of(k) || (len / k).checked_mul(values) != Some(dst.len()) {
            return Err(CoreError::invalid_argument(format!(
                "{len} bytes in blocks of {k} cannot convert to {} elements, {values} a block",
                dst.len()
            )));
        }
        if len == 0 {
            return f(&[], dst);
        }
        let parts = parts(start, end, k);
        #[cfg(feature = "mmap")]
        if let Memory::Mapped(m) = self {
            if let Some((file, path)) = &m.file {
                if m.pages.first_read(start, len, &parts) {
                    let src = &m.map[start..end];
                    return convert_by_reads(src, start, block, file, path, dst, &f);
                }
            }
        }
        self.check_file_holds(end)?;
        let mut done = 0;
        for (from, to) in parts {
            let count = (to - from) / k * values;
            self.read_once(from, to - from, |src| f(src, &mut dst[done..done + count]))?;
            done += count;
        }
        Ok(())
    }

    /// ERR_IO when the file mapped is now shorter than `end` (truncated since it was mapped):
    /// reading the mapping there would fault. Memory that is no mapping of a file holds its
    /// bytes whatever happens to the file.
    fn check_file_holds(&self, end: usize) -> Result<()> {
        #[cfg(feature = "mmap")]
        if let Memory::Mapped(Mapping {
            file: Some((file, path)),
            ..
        }) = self
        {
            let now = file.metadata().map_err(|e| CoreError::io(e, path))?.len();
            if now < end as u64 {
                return Err(truncated(path));
            }
        }
        let _ = end;
        Ok(())
    }
}

/// The error of a read of a file that has become shorter than its mapping.
#[cfg(feature = "mmap")]
fn truncated(path: &Path) -> CoreError {
    CoreError::new(
        crate::error::ErrorKind::Io,
        "the file is shorter than when it was opened (changed on disk?)",
    )
    .with_path(path)
}

/// The unit a conversion reads in ([`Memory::convert_blocks_once`]): `bytes` of the source
/// become `values` elements of the output (1 for a plain cast, a ggml block's values for a
/// block type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub bytes: usize,
    pub values: usize,
}

/// The parts `[from, to)` in which [`Memory::convert_once`] reads `start..end` (runs of `k`
/// bytes): one part below two [`CONVERT_PART`]s, else parts ending on `CONVERT_PART`
/// boundaries of the memory when the runs allow.
fn parts(start: usize, end: usize, k: usize) -> Vec<(usize, usize)> {
    if end - start < 2 * CONVERT_PART {
        return vec![(start, end)];
    }
    let mut parts = Vec::new();
    let mut from = start;
    while from < end {
        let boundary = (from / CONVERT_PART + 1) * CONVERT_PART;
        let to = if (boundary - from).is_multiple_of(k) {
            boundary
        } else {
            from + CONVERT_PART / k * k
        }
        .min(end);
        parts.push((from, to));
        from = to;
    }
    parts
}

/// Source bytes each thread reads per positioned read in [`convert_by_reads`]: small enough
/// to stay in a core's cache while it is converted.
#[cfg(feature = "mmap")]
const READ_PART: usize = 256 << 10;

/// Convert the bytes `start..start + src.len()` of `file` (`src`: the same range of its
/// mapping, used only to cut the work: never read) into `dst` by `f` (each `block` of bytes
/// to its elements), on every core: each thread reads its share with positioned reads of
/// about [`READ_PART`] into a buffer of its own and converts it from there.
///
/// Against reading the mapping (pages mapped in one call, converted, given back), this maps
/// no page: 1.19 GB of a checkpoint's BF16 pages took 163 ms to map and 37 ms to give back on
/// the calling thread, against 86 ms for the reads on two threads, and never count in the
/// resident set. A file shorter than the mapping (truncated since) is ERR_IO, where reading
/// the mapping would fault.
#[cfg(feature = "mmap")]
fn convert_by_reads<T: Send>(
    src: &[u8],
    start: usize,
    block: Block,
    file: &File,
    path: &Path,
    dst: &mut [T],
    f: &(impl Fn(&[u8], &mut [T]) -> Result<()> + Sync),
) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let Block { bytes: k, values } = block;
    let origin = src.as_ptr() as usize;
    let per_read = (READ_PART / k).max(1);
    // Chunks of whole 4096-element groups, as `cast`'s own splits; threads for 2^19 elements.
    let split = crate::parallel::Split::new(k, values)
        .min_units_per_thread(((1 << 19) / values).max(1))
        .align_units((4096 / values).max(1));
    crate::parallel::for_chunks(split, src, dst, |_, chunk, out| {
        let mut offset = start + (chunk.as_ptr() as usize - origin);
        let blocks = out.len() / values;
        // u64s: aligned for every element type a conversion reads. No larger than the chunk:
        // a small tensor's buffer stays on the heap instead of being a mapping of its own.
        let mut buf = vec![0u64; (per_read.min(blocks) * k).div_ceil(8)];
        // SAFETY: a u64 buffer viewed as its bytes.
        let bytes =
            unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<u8>(), buf.len() * 8) };
        for out in out.chunks_mut(per_read * values) {
            let got = &mut bytes[..out.len() / values * k];
            file.read_exact_at(got, offset as u64)
                .map_err(|e| match e.kind() {
                    std::io::ErrorKind::UnexpectedEof => truncated(path),
                    _ => CoreError::io(e, path),
                })?;
            f(got, out)?;
            offset += got.len();
        }
        Ok(())
    })
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
        self.check_file_holds(end)?;
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

    /// `f` over the bytes in `block`s into `dst`: a range of shared memory read once with
    /// [`Memory::convert_blocks_once`] (whose checks keep a truncated file from faulting),
    /// owned bytes directly.
    pub fn convert_blocks<T: Send>(
        &self,
        dst: &mut [T],
        block: Block,
        f: impl Fn(&[u8], &mut [T]) -> Result<()> + Sync,
    ) -> Result<()> {
        match self {
            TensorBytes::Shared { memory, start, len } => {
                memory.convert_blocks_once(*start, *len, dst, block, f)
            }
            TensorBytes::Owned(v) => f(v, dst),
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
    #[cfg(feature = "mmap")]
    use std::sync::Mutex;

    /// Resident KiB of the mapping that starts at `base`.
    #[cfg(feature = "mmap")]
    fn resident_kib(base: usize) -> usize {
        let rss = crate::buffer::smaps_field(base, "Rss");
        rss.trim_end_matches("kB").trim().parse().unwrap()
    }

    /// The file at `path` mapped as [`Memory::map`] does, but without the descriptor for
    /// positioned reads: conversions read the mapping.
    #[cfg(feature = "mmap")]
    fn mapped_without_file(path: &Path) -> Memory {
        let file = File::open(path).unwrap();
        // SAFETY: a private mapping of a test's own file, which nothing truncates.
        let map = unsafe { memmap2::MmapOptions::new().map_copy(&file) }.unwrap();
        Memory::Mapped(Mapping::new(map))
    }

    /// A file of `n` u16s (`i % 65521`) after a 24-byte header.
    #[cfg(feature = "mmap")]
    fn u16_file(dir: &Path, n: usize) -> std::path::PathBuf {
        let path = dir.join("x.bin");
        let mut bytes = vec![0u8; 24];
        for i in 0..n {
            bytes.extend_from_slice(&((i % 65521) as u16).to_le_bytes());
        }
        std::fs::write(&path, &bytes).unwrap();
        path
    }

    /// A [`u16_file`] of `n` values opened as a mapping: its directory, the memory, its address.
    #[cfg(feature = "mmap")]
    fn open_u16(n: usize) -> (tempfile::TempDir, Memory, usize) {
        let d = tempfile::tempdir().unwrap();
        let memory = Memory::open(&u16_file(d.path(), n), "a test file", Backend::Mmap).unwrap();
        let base = memory.as_ptr() as usize;
        (d, Arc::try_unwrap(memory).ok().unwrap(), base)
    }

    /// Whether `dst` holds what [`widen`] makes of [`u16_file`]'s values.
    #[cfg(feature = "mmap")]
    fn widened(dst: &[u32]) -> bool {
        dst.iter()
            .enumerate()
            .all(|(i, &v)| v == (i % 65521) as u32)
    }

    #[cfg(feature = "mmap")]
    fn widen(src: &[u8], out: &mut [u32]) -> Result<()> {
        for (o, b) in out.iter_mut().zip(src.chunks_exact(2)) {
            *o = u16::from_le_bytes([b[0], b[1]]) as u32;
        }
        Ok(())
    }

    #[test]
    #[cfg(feature = "mmap")]
    fn a_first_conversion_reads_the_file_and_maps_no_page() {
        // 20 MiB of u16 (two threads' worth), then a second and third conversion.
        let n = 10 << 20;
        let (_d, memory, base) = open_u16(n);
        let reads = Mutex::new(Vec::new());
        let mut dst = vec![0u32; n];
        memory
            .convert_once(24, 2 * n, &mut dst, |src, out| {
                reads.lock().unwrap().push(src.len());
                widen(src, out)
            })
            .unwrap();
        assert!(widened(&dst));
        assert_eq!(resident_kib(base), 0, "no page of the file was mapped");
        let reads = reads.into_inner().unwrap();
        assert_eq!(reads.iter().sum::<usize>(), 2 * n);
        assert!(reads.iter().all(|&r| r <= READ_PART), "{reads:?}");
        // A second conversion reads the mapping (the pages are mapped, not read again from
        // the file) and keeps its pages from then on.
        dst.fill(0);
        memory.convert_once(24, 2 * n, &mut dst, widen).unwrap();
        assert!(widened(&dst));
        let kept = resident_kib(base);
        assert!(kept >= 2 * n / 1024 - 8, "{kept} KiB mapped");
        memory.convert_once(24, 2 * n, &mut dst, widen).unwrap();
        assert!(resident_kib(base) >= kept);
    }

    #[test]
    #[cfg(feature = "mmap")]
    fn a_viewed_range_is_converted_from_the_mapping() {
        // A view may have written its pages: the conversion must see what the mapping holds.
        let n = 1 << 20;
        let (_d, memory, base) = open_u16(n);
        memory.mark_viewed(24 + 2 * 1000, 2);
        let mut dst = vec![0u32; n];
        memory.convert_once(24, 2 * n, &mut dst, widen).unwrap();
        assert!(widened(&dst));
        assert!(resident_kib(base) > 0, "read through the mapping");
    }

    #[test]
    #[cfg(feature = "mmap")]
    fn a_file_truncated_under_its_mapping_is_an_io_error() {
        // Reading the mapping past the new end would fault (SIGBUS); the reads see the end.
        let d = tempfile::tempdir().unwrap();
        let n = 1 << 20;
        let path = u16_file(d.path(), n);
        let memory = Memory::open(&path, "a test file", Backend::Mmap).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(4096)
            .unwrap();
        let mut dst = vec![0u32; n];
        let first = memory.convert_once(24, 2 * n, &mut dst, widen).unwrap_err();
        // Again (the range now counts as read once: the mapping path), in blocks, streamed:
        // the file's length is checked before any page of the mapping is read.
        let again = memory.convert_once(24, 2 * n, &mut dst, widen).unwrap_err();
        let block = Block {
            bytes: 8,
            values: 4,
        };
        let blocks = memory
            .convert_blocks_once(24, 2 * n, &mut dst, block, widen)
            .unwrap_err();
        let streamed = memory.read_parts(24, 2 * n, |_| Ok(())).unwrap_err();
        for e in [first, again, blocks, streamed] {
            assert_eq!(e.code(), "ERR_IO");
            assert!(
                e.to_string().contains("shorter than when it was opened"),
                "{e}"
            );
            assert_eq!(e.path(), Some(path.to_str().unwrap()));
        }
        // What the file still holds reads as before.
        let mut head = vec![0u32; 2000];
        memory.convert_once(24, 4000, &mut head, widen).unwrap();
        assert!(widened(&head));
    }

    #[test]
    #[cfg(feature = "mmap")]
    fn blocks_convert_whole_by_reads_and_from_the_mapping() {
        // 20 MiB of u16 in blocks of 8 bytes (4 values): more than one thread's share, parts
        // of the mapping and positioned reads; the first conversion reads the file, the second
        // the mapping, both whole blocks only.
        let n = 10 << 20;
        let (_d, memory, _) = open_u16(n);
        let block = Block {
            bytes: 8,
            values: 4,
        };
        let whole_blocks = |src: &[u8], out: &mut [u32]| {
            assert!(src.len().is_multiple_of(8) && src.len() / 2 == out.len());
            widen(src, out)
        };
        for _ in 0..2 {
            let mut dst = vec![0u32; n];
            memory
                .convert_blocks_once(24, 2 * n, &mut dst, block, whole_blocks)
                .unwrap();
            assert!(widened(&dst));
        }
        // A range that is no whole number of blocks, or an output of another length.
        let mut dst = [0u32; 4];
        for (len, out) in [(10, 4), (8, 3), (0, 1)] {
            let e = memory
                .convert_blocks_once(24, len, &mut dst[..out], block, widen)
                .unwrap_err();
            assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
        }
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
        let memory = mapped_without_file(&path);
        let base = memory.as_ptr() as usize;
        let mut dst = vec![0u32; n];
        let parts = Mutex::new(Vec::new());
        memory
            .convert_once(24, 2 * n, &mut dst, |src, out| {
                // Only this part's pages (plus the header's and the split first page) are mapped.
                parts.lock().unwrap().push((src.len(), resident_kib(base)));
                for (o, b) in out.iter_mut().zip(src.chunks_exact(2)) {
                    *o = u16::from_le_bytes([b[0], b[1]]) as u32;
                }
                Ok(())
            })
            .unwrap();
        let parts = parts.into_inner().unwrap();
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
        assert!(widened(&dst));
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

    /// Backend::Read holds a whole file (GGUF, PyTorch, NumPy) or a tensor (SafeTensors) in
    /// memory: one larger than memory is ERR_IO, not an abort (a sparse file of a terabyte
    /// takes no disk). Sizes checked: 1 TiB and twice this machine's memory.
    #[cfg(feature = "fs")]
    #[test]
    fn whole_files_and_tensors_larger_than_memory_are_refused_not_aborted() {
        let d = tempfile::tempdir().unwrap();
        let physical = crate::buffer::physical_memory() as u64;
        for len in [1u64 << 40, 2 * physical]
            .into_iter()
            .filter(|&n| n > physical)
        {
            let path = d.path().join("sparse.bin");
            std::fs::File::create(&path).unwrap().set_len(len).unwrap();
            let e = Memory::open(&path, "a test file", Backend::Read)
                .err()
                .unwrap();
            assert_eq!(e.code(), "ERR_IO", "{e}");
            assert!(
                e.detail().contains(&format!("{len} bytes in memory")),
                "{e}"
            );
            assert!(e.detail().contains("backend 'mmap'"), "{e}");
            assert_eq!(e.path(), Some(path.display().to_string().as_str()));
        }
        // A SafeTensors file whose one tensor is a sparse terabyte, read with positioned reads.
        let path = d.path().join("sparse.safetensors");
        let header = format!(
            "{{\"t\":{{\"dtype\":\"U8\",\"shape\":[{n}],\"data_offsets\":[0,{n}]}}}}",
            n = 1u64 << 40
        );
        let mut head = (header.len() as u64).to_le_bytes().to_vec();
        head.extend_from_slice(header.as_bytes());
        std::fs::write(&path, &head).unwrap();
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(head.len() as u64 + (1 << 40)).unwrap();
        let st = crate::format::safetensors::SafeTensors::open(&path, Backend::Read).unwrap();
        let e = crate::source::TensorSource::fetch(&st, "t").err().unwrap();
        assert_eq!(e.code(), "ERR_IO", "{e}");
        assert!(e.detail().ends_with("the tensor is read whole"), "{e}");
        // Within memory, the read backend still reads.
        assert_eq!(reserve(16, "x").unwrap().capacity(), 16);
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
