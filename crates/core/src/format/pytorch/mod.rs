//! PyTorch checkpoints (`.bin`, `.pt`, `.pth`) read without Python and without executing
//! anything: the zip format of `torch.save` (torch ≥ 1.6) and the legacy format before it.
//!
//! The pickle is read by a weights-only unpickler ([`pickle`]) against torch's allow-list
//! ([`allow`]); what comes out is a tree of containers with tensor descriptions (a storage
//! key, dtype, offset, shape, strides) at the leaves. The tree is flattened into dotted
//! names (`state_dict.encoder.weight`, `layers.0.bias`), every tensor is checked to lie
//! within its storage, and every storage against the bytes the file holds for it — all at
//! open. Reading a tensor then is a slice of the mapping (contiguous, little-endian: zero
//! copy) or a gather into a fresh row-major buffer (views, big-endian files).

pub mod allow;
mod legacy;
pub mod pickle;

pub use legacy::{looks_like_legacy, CountAt, LegacyHead};

use crate::dtype::DType;
use crate::error::{CoreError, Result};
use crate::format::safetensors::{Memory, TensorBytes};
use crate::format::strided;
use crate::format::zip::{Method, ZipArchive, ZipEntry};
use crate::format::{FileReader, Reader, Registration};
use crate::source::{
    self, Metadata, SourceFile, SourceTensor, TensorList, TensorSource, WeightsFormat, WholeFile,
};
use pickle::{Limits, Object, PersistentIds, Unpickled, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The name of the one tensor of a checkpoint that is a bare tensor (`torch.save(t, f)`).
pub const BARE_TENSOR_NAME: &str = "tensor";
/// Longest `data.pkl` read.
const MAX_PICKLE_BYTES: u64 = 1 << 30;
/// A zip member's bytes, at most the limit given ([`ZipEntry::read`]'s), from wherever the
/// file is held.
pub type MemberReader<'m> = dyn Fn(&ZipEntry, u64) -> Result<Cow<'m, [u8]>> + 'm;
/// The most bytes of a `byteorder` record read (`little` or `big`).
const BYTEORDER_MAX_BYTES: u64 = 16;
/// A deflated `data.pkl` (torch stores it; another zip tool may deflate it) inflates to at
/// most [`DEFLATED_PICKLE_BASE`] + [`DEFLATED_PICKLE_RATIO`] × its compressed bytes, and
/// never past this: the pickle's structures take up to ~100 bytes of memory per pickle byte,
/// so a ratio of 1,032 (deflate's) would let a few KB of file take gigabytes. A checkpoint's
/// pickle takes ~120 bytes per tensor and deflates about 5:1.
pub const MAX_DEFLATED_PICKLE_BYTES: u64 = 64 << 20;
pub const DEFLATED_PICKLE_BASE: u64 = 1 << 20;
pub const DEFLATED_PICKLE_RATIO: u64 = 32;
/// Longest tensor name flattening may produce.
const MAX_NAME_BYTES: usize = 1 << 16;
/// Name bytes flattening may build in all: this plus 8 per byte of pickle (a checkpoint's
/// names take about as many bytes as its pickle: a name per tensor, ~120 bytes of pickle each).
const NAME_BYTES_BASE: usize = 1 << 20;
/// Views that repeat their storage's elements (a stride of 0, overlapping strides) may
/// materialise, all the file's together, into at most this many bytes beyond the storage
/// bytes each reads.
pub const MAX_EXPANDED_BYTES: u64 = 1 << 30;
/// Deflated storages that several tensors view are inflated once and kept while the file is
/// open; together they may take at most this many bytes.
pub const MAX_SHARED_INFLATED_BYTES: u64 = 1 << 30;

/// Which of torch's two layouts a checkpoint uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// `torch.save` since 1.6: a zip of `<top>/data.pkl`, `<top>/data/<key>`, `<top>/byteorder`.
    Zip,
    /// Before 1.6: magic, protocol, sys-info and object pickles, then the raw storages.
    Legacy,
}

/// One tensor as listed (the core's [`SourceTensor`]; `stored` is torch's name for the dtype,
/// `torch.bfloat16`; `stored_len` the bytes the tensor takes row-major, what `fetch` returns).
pub type TensorListing = SourceTensor;

/// Where a tensor's bytes live: its stored storage and the byte span it touches there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageSpan<'a> {
    pub key: &'a str,
    pub start: u64,
    pub end: u64,
    /// Starts at its storage's first byte and has as many bytes as the storage: the
    /// tensor that "owns" it (safetensors' `_is_complete`, which convert.py keeps).
    pub complete: bool,
}

#[derive(Debug, Clone)]
enum StoredBytes {
    Mapped(Range<usize>),
    Deflated(ZipEntry),
}

#[derive(Debug, Clone)]
struct Storage {
    key: String,
    bytes: StoredBytes,
    /// Total bytes of the stored storage.
    len: u64,
}

#[derive(Debug, Clone)]
struct Layout {
    storage: usize,
    /// Byte offset of the tensor's window in its stored storage.
    window: u64,
    offset: usize,
    strides: Vec<usize>,
    conj: bool,
    neg: bool,
}

/// A deflated storage's bytes once inflated (see [`PyTorchFile::inflate`]).
type InflatedSlot = Mutex<Option<Arc<Vec<u8>>>>;

/// An opened checkpoint: tensors listed and validated, bytes read on demand.
pub struct PyTorchFile {
    memory: Arc<Memory>,
    container: Container,
    big_endian: bool,
    protocol: u8,
    tensors: TensorList,
    layouts: Vec<Layout>,
    storages: Vec<Storage>,
    /// The deflated storages that several tensors view, by storage index: inflated by the
    /// first fetch that needs one, then kept, so that N views cost one inflation, not N.
    shared_inflated: HashMap<usize, InflatedSlot>,
    /// The file it was opened from (none for bytes held in memory).
    path: Option<PathBuf>,
}

impl std::fmt::Debug for PyTorchFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PyTorchFile")
            .field("container", &self.container)
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

/// What a file looks like to the PyTorch reader, from its first bytes (and zip directory).
pub fn sniff(bytes: &[u8], zip: Option<&ZipArchive>) -> Option<Container> {
    if let Some(zip) = zip {
        return zip_top(zip).ok().map(|_| Container::Zip);
    }
    looks_like_legacy(bytes).then_some(Container::Legacy)
}

/// The folder every member of a torch zip lives in (`archive`, or the file's stem), found,
/// not assumed: the first member's, which all others must share, with a `data.pkl`.
fn zip_top(zip: &ZipArchive) -> Result<String> {
    let first = zip
        .entries()
        .first()
        .ok_or_else(|| CoreError::invalid_header("zip: an empty archive"))?;
    let top = first
        .name
        .split_once('/')
        .map(|(t, _)| t.to_string())
        .ok_or_else(|| CoreError::invalid_header("zip: the first member is not in a folder"))?;
    let prefix = format!("{top}/");
    if let Some(stray) = zip.entries().iter().find(|e| !e.name.starts_with(&prefix)) {
        return Err(CoreError::invalid_header(format!(
            "zip: member {:?} is outside the archive folder {top:?}",
            stray.name
        )));
    }
    if zip.find(&format!("{top}/data.pkl")).is_none() {
        let what = if zip.find(&format!("{top}/constants.pkl")).is_some() {
            "a TorchScript archive (torch.jit.save), not a torch.save checkpoint"
        } else {
            "a zip without data.pkl, not a torch.save checkpoint"
        };
        return Err(CoreError::invalid_header(format!("zip: {what}")));
    }
    Ok(top)
}

// Checkpoints are opened (`PyTorchFile::open`, `open_with`) and registered as every
// whole-file format is.
source::impl_whole_file!(PyTorchFile, "a PyTorch checkpoint");

impl PyTorchFile {
    /// Read a checkpoint held in memory.
    pub fn from_memory(memory: Arc<Memory>) -> Result<PyTorchFile> {
        if crate::format::zip::looks_like_zip(&memory) {
            let zip = ZipArchive::parse(&memory)?;
            Self::from_zip(memory, &zip)
        } else if looks_like_legacy(&memory) {
            Self::from_legacy(memory)
        } else {
            Err(CoreError::invalid_header(
                "neither a torch zip checkpoint nor a legacy torch checkpoint",
            ))
        }
    }

    /// Read a checkpoint whose zip directory the caller has parsed already.
    pub fn from_zip(memory: Arc<Memory>, zip: &ZipArchive) -> Result<PyTorchFile> {
        let read = |e: &ZipEntry, limit: u64| e.read(&memory, limit);
        Self::zip_checkpoint(memory.clone(), zip, &read)
    }

    /// A checkpoint known by its directory and the members [`PyTorchFile::zip_members`] names
    /// (`read`: a member's bytes, at most `limit`), its storages read elsewhere: a file read
    /// by ranges (each tensor then served by [`PyTorchFile::from_range`]).
    pub fn from_zip_members<'m>(zip: &ZipArchive, read: &MemberReader<'m>) -> Result<PyTorchFile> {
        Self::zip_checkpoint(Arc::new(Memory::Owned(Vec::new())), zip, read)
    }

    /// The members a zip checkpoint's listing reads whole (its `byteorder` and `data.pkl`),
    /// with the most bytes read of each.
    pub fn zip_members(zip: &ZipArchive) -> Result<Vec<(&ZipEntry, u64)>> {
        let top = zip_top(zip)?;
        let members = [
            ("byteorder", BYTEORDER_MAX_BYTES),
            ("data.pkl", MAX_PICKLE_BYTES),
        ];
        Ok(members
            .into_iter()
            .filter_map(|(name, limit)| Some((zip.find(&format!("{top}/{name}"))?, limit)))
            .collect())
    }

    fn zip_checkpoint<'m>(
        memory: Arc<Memory>,
        zip: &ZipArchive,
        read: &MemberReader<'m>,
    ) -> Result<PyTorchFile> {
        let top = zip_top(zip)?;
        let record = |name: &str| zip.find(&format!("{top}/{name}"));
        let big_endian = match record("byteorder") {
            None => false,
            Some(e) => match &*read(e, BYTEORDER_MAX_BYTES)? {
                b"little" => false,
                b"big" => true,
                other => {
                    return Err(CoreError::invalid_header(format!(
                        "byteorder record says {:?}",
                        String::from_utf8_lossy(other)
                    )))
                }
            },
        };
        let pkl_entry =
            record("data.pkl").ok_or_else(|| CoreError::invalid_header("no data.pkl"))?;
        if pkl_entry.method == Method::Deflate {
            let cap = pkl_entry
                .compressed_len
                .saturating_mul(DEFLATED_PICKLE_RATIO)
                .saturating_add(DEFLATED_PICKLE_BASE)
                .min(MAX_DEFLATED_PICKLE_BYTES);
            if pkl_entry.uncompressed_len > cap {
                return Err(CoreError::size_mismatch(format!(
                    "zip: the deflated {:?} declares {} bytes from {} compressed bytes, over the {cap} read \
                     ({DEFLATED_PICKLE_BASE} + {DEFLATED_PICKLE_RATIO} per compressed byte, {MAX_DEFLATED_PICKLE_BYTES} at most; \
                     torch.save stores it uncompressed)",
                    pkl_entry.name, pkl_entry.uncompressed_len, pkl_entry.compressed_len
                )));
            }
        }
        let pkl = read(pkl_entry, MAX_PICKLE_BYTES)?;
        let un = pickle::unpickle(&pkl, 0, PersistentIds::Zip, Limits::default())?;
        if un.end != pkl.len() {
            return Err(CoreError::invalid_header(format!(
                "pickle: {} bytes after STOP in data.pkl",
                pkl.len() - un.end
            )));
        }
        // Each stored storage once: its record must exist and hold exactly its bytes.
        let mut storages: Vec<Storage> = Vec::new();
        let mut index: HashMap<&str, usize> = HashMap::new();
        let mut decl_storage = Vec::with_capacity(un.storages.len());
        for decl in &un.storages {
            if let Some(&i) = index.get(decl.key.as_str()) {
                decl_storage.push(i);
                continue;
            }
            let name = format!("data/{}", decl.key);
            let entry = record(&name).ok_or_else(|| {
                CoreError::invalid_header(format!(
                    "the pickle names storage '{}' but the archive has no record {top}/{name}",
                    decl.key
                ))
            })?;
            let len = decl.numel * decl.elem.size();
            if entry.uncompressed_len != len {
                return Err(CoreError::size_mismatch(format!(
                    "storage '{}' should hold {} elements ({len} bytes), its record holds {} bytes",
                    decl.key, decl.numel, entry.uncompressed_len
                )));
            }
            let bytes = match entry.method {
                Method::Stored => StoredBytes::Mapped(entry.data_range()),
                Method::Deflate => StoredBytes::Deflated(entry.clone()),
            };
            index.insert(&decl.key, storages.len());
            decl_storage.push(storages.len());
            storages.push(Storage {
                key: decl.key.clone(),
                bytes,
                len,
            });
        }
        Self::assemble(
            memory,
            Container::Zip,
            big_endian,
            un,
            storages,
            decl_storage,
        )
    }

    fn from_legacy(memory: Arc<Memory>) -> Result<PyTorchFile> {
        let head = LegacyHead::parse(&memory)?;
        let bytes = memory.clone();
        let count = |at: u64| {
            let at = usize::try_from(at).ok()?;
            bytes.get(at..at.checked_add(8)?)?.try_into().ok()
        };
        head.open(memory.clone(), memory.len() as u64, &count)
    }

    /// Name the tensors and check each one's bytes can be produced.
    fn assemble(
        memory: Arc<Memory>,
        container: Container,
        big_endian: bool,
        un: Unpickled,
        storages: Vec<Storage>,
        decl_storage: Vec<usize>,
    ) -> Result<PyTorchFile> {
        let names = flatten(&un)?;
        let mut tensors = Vec::with_capacity(names.len());
        let mut layouts = Vec::with_capacity(names.len());
        let mut expanded = 0u64;
        for (name, tid) in names {
            let t = &un.tensors[tid];
            let decl = &un.storages[t.storage];
            let named = |e: CoreError| e.with_tensor(&name);
            let usize_of = |v: u64| {
                usize::try_from(v).map_err(|_| {
                    CoreError::size_mismatch("tensor too large for this machine").with_tensor(&name)
                })
            };
            let shape = t
                .shape
                .iter()
                .map(|&d| usize_of(d))
                .collect::<Result<Vec<_>>>()?;
            let strides = t
                .stride
                .iter()
                .map(|&d| usize_of(d))
                .collect::<Result<Vec<_>>>()?;
            let es = t.dtype.size().unwrap_or(1) as u64;
            let numel = crate::tensor::checked_numel(&shape).unwrap_or(usize::MAX) as u64;
            let stored_len = numel.saturating_mul(es);
            // A view that reads each element of its span once produces at most the span's
            // bytes; what views that repeat elements (stride 0) produce beyond their spans is
            // bounded per file, never sized by the file alone.
            let offset = usize_of(t.offset)?;
            let span = strided::extent(offset, &shape, &strides)
                .map_or(u64::MAX, |end| end.saturating_sub(offset) as u64)
                .saturating_mul(es);
            expanded = expanded.saturating_add(stored_len.saturating_sub(span));
            if expanded > MAX_EXPANDED_BYTES {
                return Err(named(CoreError::size_mismatch(format!(
                    "views that repeat their storage's elements (stride 0) expand, with this one \
                     ({stored_len} bytes from {span} it reads), to more than {MAX_EXPANDED_BYTES} bytes \
                     beyond what they read, the limit per file"
                ))));
            }
            if t.neg && !negatable(t.dtype) {
                return Err(named(CoreError::unsupported_dtype(format!(
                    "a negative view of {} cannot be materialised",
                    t.dtype
                ))));
            }
            tensors.push(TensorListing {
                name: name.clone(),
                dtype: t.dtype,
                stored: std::borrow::Cow::Borrowed(allow::torch_dtype_name(t.dtype)),
                shape,
                stored_len,
            });
            layouts.push(Layout {
                storage: decl_storage[t.storage],
                window: decl.byte_offset,
                offset,
                strides,
                conj: t.conj,
                neg: t.neg,
            });
        }
        let tensors = TensorList::new(tensors, |name| {
            CoreError::invalid_header("two tensors flatten to this name").with_tensor(name)
        })?;
        let shared_inflated = shared_deflated(&storages, &layouts)?;
        Ok(PyTorchFile {
            memory,
            container,
            big_endian,
            protocol: un.protocol,
            tensors,
            layouts,
            storages,
            shared_inflated,
            path: None,
        })
    }

    pub fn container(&self) -> Container {
        self.container
    }
    pub fn pickle_protocol(&self) -> u8 {
        self.protocol
    }
    pub fn big_endian(&self) -> bool {
        self.big_endian
    }
    /// The tensors, in the order the checkpoint lists them.
    pub fn tensors(&self) -> &[TensorListing] {
        self.tensors.as_slice()
    }
    pub fn get(&self, name: &str) -> Option<&TensorListing> {
        self.tensors.get(name)
    }

    /// The stored storage a tensor reads and the byte span it touches there.
    pub fn storage_span(&self, name: &str) -> Option<StorageSpan<'_>> {
        let i = self.tensors.position(name)?;
        let (t, l) = (&self.tensors.as_slice()[i], &self.layouts[i]);
        let s = &self.storages[l.storage];
        let es = t.dtype.size().unwrap_or(1) as u64;
        let end_elems = strided::extent(l.offset, &t.shape, &l.strides).unwrap_or(0) as u64;
        let start = l.window + l.offset as u64 * es;
        let end = if end_elems == 0 {
            start
        } else {
            l.window + end_elems * es
        };
        Some(StorageSpan {
            key: &s.key,
            start,
            end,
            complete: start == 0 && t.stored_len == s.len,
        })
    }

    /// A tensor's bytes, row-major and little-endian: a view of the mapping when the tensor
    /// is stored that way, a fresh buffer otherwise.
    pub fn fetch(&self, name: &str) -> Result<TensorBytes<'_>> {
        let i = self.tensors.position(name).ok_or_else(|| {
            let e = CoreError::not_found("no such tensor in the file").with_tensor(name);
            match &self.path {
                Some(p) => e.with_path(p),
                None => e,
            }
        })?;
        self.fetch_index(i).map_err(|e| e.with_tensor(name))
    }

    fn fetch_index(&self, i: usize) -> Result<TensorBytes<'_>> {
        let (t, l) = (&self.tensors.as_slice()[i], &self.layouts[i]);
        let s = &self.storages[l.storage];
        let es = t.dtype.size().unwrap_or(1);
        if t.stored_len == 0 {
            return Ok(TensorBytes::Owned(Vec::new()));
        }
        let window = l.window as usize;
        let plain = !self.big_endian && !l.conj && !l.neg;
        if let (StoredBytes::Mapped(range), true) = (&s.bytes, plain) {
            if strided::is_row_major(&t.shape, &l.strides) {
                let start = range.start + window + l.offset * es;
                let len = t.stored_len as usize;
                if range.end > self.memory.len() {
                    return Err(crate::format::numpy::not_held());
                }
                // Bounds were checked at open; check again rather than trust arithmetic.
                if start + len <= range.end {
                    return Ok(TensorBytes::Shared {
                        memory: &self.memory,
                        start,
                        len,
                    });
                }
                return Err(CoreError::size_mismatch("tensor reaches past its storage"));
            }
        }
        let inflated;
        let storage: &[u8] = match &s.bytes {
            StoredBytes::Mapped(range) => {
                (self.memory.get(range.clone())).ok_or_else(crate::format::numpy::not_held)?
            }
            StoredBytes::Deflated(entry) => {
                inflated = self.inflate(l.storage, entry)?;
                &inflated
            }
        };
        Ok(TensorBytes::Owned(self.arrange_storage(i, storage)?))
    }

    /// Tensor `i`'s bytes row-major and little-endian, from all of its storage's bytes.
    fn arrange_storage(&self, i: usize, storage: &[u8]) -> Result<Vec<u8>> {
        let l = &self.layouts[i];
        let window = storage
            .get(l.window as usize..)
            .ok_or_else(|| CoreError::size_mismatch("storage window past its storage"))?;
        self.arrange(i, window, l.offset)
    }

    /// Tensor `i`'s bytes row-major and little-endian, from `window` (its storage from its
    /// window on, or from its element `offset`'s byte on where `offset` is 0).
    fn arrange(&self, i: usize, window: &[u8], offset: usize) -> Result<Vec<u8>> {
        let (t, l) = (&self.tensors.as_slice()[i], &self.layouts[i]);
        let es = t.dtype.size().unwrap_or(1);
        let mut out = strided::gather(window, es, offset, &t.shape, &l.strides)?;
        if self.big_endian {
            let unit = if t.dtype == DType::C64 { 4 } else { es };
            strided::swap_bytes(&mut out, unit);
        }
        if l.conj && t.dtype == DType::C64 {
            for e in out.chunks_exact_mut(8) {
                e[7] ^= 0x80;
            }
        }
        if l.neg {
            negate(&mut out, t.dtype)?;
        }
        Ok(out)
    }

    /// Where the stored bytes `name` reads lie in the file (its [`PyTorchFile::storage_span`]
    /// in a stored record, a deflated record's compressed bytes), and whether they are what
    /// [`PyTorchFile::fetch`] gives as they are (row-major, little-endian, no conj/neg view).
    pub fn file_range(&self, name: &str) -> Option<(Range<u64>, bool)> {
        let i = self.tensors.position(name)?;
        let (t, l) = (&self.tensors.as_slice()[i], &self.layouts[i]);
        let record = match &self.storages[l.storage].bytes {
            StoredBytes::Mapped(record) => record,
            StoredBytes::Deflated(entry) => {
                let r = entry.data_range();
                return Some((r.start as u64..r.end as u64, false));
            }
        };
        let span = self.storage_span(name)?;
        let start = record.start as u64 + span.start;
        let plain = !self.big_endian && !l.conj && !l.neg;
        let as_is = plain && strided::is_row_major(&t.shape, &l.strides);
        Some((start..start + (span.end - span.start), as_is))
    }

    /// What [`PyTorchFile::fetch`] gives, from the bytes of [`PyTorchFile::file_range`].
    pub fn from_range(&self, name: &str, stored: &[u8]) -> Result<Vec<u8>> {
        let i = self
            .tensors
            .position(name)
            .ok_or_else(|| CoreError::not_found("no such tensor in the file").with_tensor(name))?;
        if self.tensors.as_slice()[i].stored_len == 0 {
            return Ok(Vec::new());
        }
        let l = &self.layouts[i];
        let out = match &self.storages[l.storage].bytes {
            StoredBytes::Mapped(_) => self.arrange(i, stored, 0),
            StoredBytes::Deflated(entry) => {
                let storage = entry.read_at(stored, entry.data_start, entry.uncompressed_len)?;
                self.arrange_storage(i, &storage)
            }
        };
        out.map_err(|e| e.with_tensor(name))
    }

    /// A deflated storage's bytes: inflated once and kept when several tensors view it,
    /// inflated for this fetch alone otherwise.
    fn inflate(&self, storage: usize, entry: &ZipEntry) -> Result<Arc<Vec<u8>>> {
        let read = || -> Result<Arc<Vec<u8>>> {
            Ok(Arc::new(
                entry
                    .read(&self.memory, entry.uncompressed_len)?
                    .into_owned(),
            ))
        };
        let Some(slot) = self.shared_inflated.get(&storage) else {
            return read();
        };
        // Held while inflating: concurrent fetches of views of one storage wait for the one
        // inflation instead of each running their own.
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bytes) = &*slot {
            return Ok(bytes.clone());
        }
        let bytes = read()?;
        *slot = Some(bytes.clone());
        Ok(bytes)
    }

    /// Tensors that share storage bytes with another, grouped (each group sorted by name),
    /// as `safetensors.torch._find_shared_tensors` groups them: same storage, overlapping spans.
    pub fn shared_groups(&self) -> Vec<Vec<&str>> {
        let mut by_storage: HashMap<usize, Vec<usize>> = HashMap::new();
        for (i, (t, l)) in self.tensors().iter().zip(&self.layouts).enumerate() {
            if t.stored_len > 0 {
                by_storage.entry(l.storage).or_default().push(i);
            }
        }
        let mut groups = Vec::new();
        for members in by_storage.into_values() {
            let mut spans: Vec<(u64, u64, &str)> = members
                .iter()
                .filter_map(|&i| {
                    let name = self.tensors()[i].name.as_str();
                    self.storage_span(name).map(|s| (s.start, s.end, name))
                })
                .collect();
            spans.sort_unstable();
            let mut current: Vec<&str> = Vec::new();
            let mut reach = 0u64;
            for (start, end, name) in spans {
                if !current.is_empty() && start >= reach {
                    if current.len() > 1 {
                        current.sort_unstable();
                        groups.push(std::mem::take(&mut current));
                    }
                    current.clear();
                }
                reach = if current.is_empty() {
                    end
                } else {
                    reach.max(end)
                };
                current.push(name);
            }
            if current.len() > 1 {
                current.sort_unstable();
                groups.push(current);
            }
        }
        groups.sort();
        groups
    }

    /// Which tensors a SafeTensors conversion drops because another name holds the same
    /// bytes, as Hugging Face's `convert.py` decides (safetensors' `_remove_duplicate_names`):
    /// in each group of [`shared_groups`](Self::shared_groups), keep the first name (sorted)
    /// among those that cover their whole storage, preferring names not in `discard_names`;
    /// drop the others. `(kept, dropped)` pairs, sorted.
    ///
    /// One difference: where no tensor of a group covers its storage (overlapping slices of
    /// a larger tensor that was not saved), convert.py refuses the whole checkpoint; here
    /// nothing of that group is dropped, so each view is written with its own bytes.
    pub fn tied_duplicates(&self, discard_names: &[&str]) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        for group in self.shared_groups() {
            let complete: Vec<&str> = group
                .iter()
                .copied()
                .filter(|n| self.storage_span(n).is_some_and(|s| s.complete))
                .collect();
            let preferred = complete.iter().find(|n| !discard_names.contains(n));
            let Some(keep) = preferred.or(complete.first()) else {
                continue;
            };
            for name in &group {
                if name != keep {
                    out.push((keep.to_string(), name.to_string()));
                }
            }
        }
        out.sort();
        Ok(out)
    }
}

/// PyTorch's entry in the format registry.
pub const FORMAT: Registration = Registration {
    format: WeightsFormat::PyTorch,
    name: "pytorch",
    describe: "a PyTorch checkpoint",
    metadata_namespace: "pytorch",
    sniff: crate::format::detect::is_pytorch,
    reader: Reader::File(FileReader::whole::<PyTorchFile>()),
};

impl TensorSource for PyTorchFile {
    fn format(&self) -> WeightsFormat {
        WeightsFormat::PyTorch
    }
    fn list(&self) -> &TensorList {
        &self.tensors
    }
    /// A checkpoint's pickle holds no string metadata a SafeTensors header could keep.
    fn metadata(&self) -> Metadata<'_> {
        Metadata::None
    }
    fn fetch(&self, name: &str) -> Result<TensorBytes<'_>> {
        PyTorchFile::fetch(self, name)
    }
    /// The tensor row-major, as [`fetch`](Self::fetch): a torch tensor is a view of a
    /// storage, so "as stored" is its elements in order (`stored_len` bytes).
    fn fetch_raw(&self, name: &str) -> Result<TensorBytes<'_>> {
        PyTorchFile::fetch(self, name)
    }
    fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
    fn files(&self) -> Vec<SourceFile> {
        self.whole_files()
    }
    /// The mapped pages of the storage span the tensor reads (a strided view's too).
    fn release(&self, name: &str) {
        let Some(i) = self.tensors.position(name) else {
            return;
        };
        let storage = &self.storages[self.layouts[i].storage];
        if let (StoredBytes::Mapped(range), Some(span)) = (&storage.bytes, self.storage_span(name))
        {
            let start = range.start.saturating_add(span.start as usize);
            let len = (span.end.saturating_sub(span.start)) as usize;
            if start.saturating_add(len) <= range.end {
                self.memory.release(start, len);
            }
        }
    }
    fn tied_tensors(&self) -> Vec<(String, String)> {
        self.tied_duplicates(&[]).unwrap_or_default()
    }
}

fn negatable(d: DType) -> bool {
    matches!(
        d,
        DType::F32
            | DType::F64
            | DType::F16
            | DType::BF16
            | DType::F8_E4M3
            | DType::F8_E5M2
            | DType::F8_E4M3FNUZ
            | DType::F8_E5M2FNUZ
            | DType::C64
            | DType::I8
            | DType::I16
            | DType::I32
            | DType::I64
    )
}

/// Apply torch's lazy negation bit: flip the sign of each float (keeping the FNUZ types'
/// single zero, whose negative bit pattern is their NaN), negate each integer (wrapping).
fn negate(out: &mut [u8], d: DType) -> Result<()> {
    match d {
        DType::F32 | DType::C64 => out.chunks_exact_mut(4).for_each(|e| e[3] ^= 0x80),
        DType::F64 => out.chunks_exact_mut(8).for_each(|e| e[7] ^= 0x80),
        DType::F16 | DType::BF16 => out.chunks_exact_mut(2).for_each(|e| e[1] ^= 0x80),
        DType::F8_E4M3 | DType::F8_E5M2 => out.iter_mut().for_each(|b| *b ^= 0x80),
        DType::F8_E4M3FNUZ | DType::F8_E5M2FNUZ => {
            out.iter_mut().filter(|b| **b != 0).for_each(|b| *b ^= 0x80)
        }
        DType::I8 => out
            .iter_mut()
            .for_each(|b| *b = (*b as i8).wrapping_neg() as u8),
        DType::I16 => out.chunks_exact_mut(2).for_each(|e| {
            let v = i16::from_le_bytes([e[0], e[1]]).wrapping_neg();
            e.copy_from_slice(&v.to_le_bytes())
        }),
        DType::I32 => out.chunks_exact_mut(4).for_each(|e| {
            let v = i32::from_le_bytes([e[0], e[1], e[2], e[3]]).wrapping_neg();
            e.copy_from_slice(&v.to_le_bytes())
        }),
        DType::I64 => out.chunks_exact_mut(8).for_each(|e| {
            let mut a = [0u8; 8];
            a.copy_from_slice(e);
            e.copy_from_slice(&i64::from_le_bytes(a).wrapping_neg().to_le_bytes())
        }),
        other => {
            return Err(CoreError::unsupported_dtype(format!(
                "a negative view of {other} cannot be materialised"
            )))
        }
    }
    Ok(())
}

/// Slots for the deflated storages that more than one tensor views (see
/// [`PyTorchFile::inflate`]), refused when they would hold more than
/// [`MAX_SHARED_INFLATED_BYTES`] in all.
fn shared_deflated(
    storages: &[Storage],
    layouts: &[Layout],
) -> Result<HashMap<usize, InflatedSlot>> {
    let mut views: HashMap<usize, usize> = HashMap::new();
    for l in layouts {
        if matches!(storages[l.storage].bytes, StoredBytes::Deflated(_)) {
            *views.entry(l.storage).or_default() += 1;
        }
    }
    let shared: Vec<usize> = views
        .into_iter()
        .filter(|&(_, n)| n > 1)
        .map(|(s, _)| s)
        .collect();
    let total = shared
        .iter()
        .fold(0u64, |sum, &s| sum.saturating_add(storages[s].len));
    if total > MAX_SHARED_INFLATED_BYTES {
        return Err(CoreError::size_mismatch(format!(
            "deflated storages that several tensors view take {total} bytes inflated, over the \
             {MAX_SHARED_INFLATED_BYTES} kept inflated per file (torch.save stores storages uncompressed)"
        )));
    }
    Ok(shared.into_iter().map(|s| (s, Mutex::new(None))).collect())
}

/// Dotted names for every tensor in the pickled tree: dict keys (strings, or integers in
/// decimal) and list/tuple indices, joined with `.`; a bare tensor is [`BARE_TENSOR_NAME`].
/// Non-tensor leaves (`epoch`, hyper-parameters) and containers that hold no tensor are
/// skipped. Iterative and bounded: a container inside itself is refused, each name's length
/// is checked before it is built, and the work (container visits and their items) and the
/// name bytes built in all are budgeted, so shared containers cannot make it explode.
fn flatten(un: &Unpickled) -> Result<Vec<(String, usize)>> {
    let mut out = Vec::new();
    let root = match un.root {
        Value::Tensor(t) => {
            out.push((BARE_TENSOR_NAME.to_string(), t));
            return Ok(out);
        }
        Value::Obj(id) => id,
        _ => return Ok(out),
    };
    let holds = tensor_holders(un, root)?;
    let max_depth = Limits::default().max_depth as usize;
    // Each container is visited about once in a tree; sharing (memo references to one dict
    // from two places) may repeat a few, an exponential fan-out may not.
    let items: usize = (0..un.objects_len()).map(|i| un.object(i).len()).sum();
    let mut work = un
        .objects_len()
        .saturating_add(items)
        .saturating_mul(4)
        .saturating_add(1024);
    let max_names = un.len.saturating_mul(8).saturating_add(NAME_BYTES_BASE);
    let mut name_budget = max_names;
    let too_long =
        |what: String| CoreError::invalid_header(format!("tensor names too long ({what})"));
    let mut stack: Vec<(&Value, String, usize)> = vec![(&un.root, String::new(), 0)];
    while let Some((v, prefix, depth)) = stack.pop() {
        let id = match v {
            Value::Tensor(t) => {
                out.push((prefix, *t));
                continue;
            }
            Value::Obj(id) => *id,
            _ => continue,
        };
        let object = un.object(id);
        work = work.checked_sub(1 + object.len()).ok_or_else(|| {
            CoreError::invalid_header("pickle: containers referenced from too many places")
        })?;
        if depth >= max_depth {
            return Err(CoreError::invalid_header(format!(
                "pickle: containers nested deeper than {max_depth} levels"
            )));
        }
        let first = stack.len();
        // A child's name, its length checked and charged before it is built.
        let mut child = |key: &str| -> Result<String> {
            let len = if prefix.is_empty() {
                key.len()
            } else {
                prefix.len() + 1 + key.len()
            };
            if len > MAX_NAME_BYTES {
                return Err(too_long(format!(
                    "one would be {len} bytes, over {MAX_NAME_BYTES}"
                )));
            }
            name_budget = name_budget
                .checked_sub(len)
                .ok_or_else(|| too_long(format!("over {max_names} bytes in all")))?;
            let mut name = String::with_capacity(len);
            if !prefix.is_empty() {
                name.push_str(&prefix);
                name.push('.');
            }
            name.push_str(key);
            Ok(name)
        };
        let named = |v: &Value| match v {
            Value::Tensor(_) => true,
            Value::Obj(c) => holds[*c],
            _ => false,
        };
        match object {
            Object::Dict { items, .. } => {
                for (k, v) in items.iter().filter(|(_, v)| named(v)) {
                    let name = match k {
                        Value::Str(s) => child(s)?,
                        Value::Int(i) => child(&i.to_string())?,
                        _ => return Err(CoreError::invalid_header(
                            "pickle: a tensor under a dict key that is neither a string nor an int",
                        )),
                    };
                    stack.push((v, name, depth + 1));
                }
            }
            Object::List(items) | Object::Tuple(items) => {
                for (i, v) in items.iter().enumerate().filter(|(_, v)| named(v)) {
                    stack.push((v, child(&i.to_string())?, depth + 1));
                }
            }
            Object::Set(_) => {}
        }
        // Reversed on the stack, so names come out in the checkpoint's order.
        stack[first..].reverse();
    }
    Ok(out)
}

/// Which containers hold a tensor (as a dict value or a list or tuple item, at any depth),
/// found in one walk from `root` that visits each container once. A container inside itself
/// is refused: a checkpoint is a tree of containers (parts may be shared), and a cycle would
/// name its tensors without end.
fn tensor_holders(un: &Unpickled, root: usize) -> Result<Vec<bool>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Seen {
        No,
        OnPath,
        Done,
    }
    let child = |id: usize, i: usize| -> Option<&Value> {
        match un.object(id) {
            Object::Dict { items, .. } => items.get(i).map(|(_, v)| v),
            Object::List(items) | Object::Tuple(items) => items.get(i),
            Object::Set(_) => None,
        }
    };
    let mut seen = vec![Seen::No; un.objects_len()];
    let mut holds = vec![false; un.objects_len()];
    // The containers from the root down to the one being walked, each with its next item.
    let mut path: Vec<(usize, usize)> = vec![(root, 0)];
    seen[root] = Seen::OnPath;
    while let Some(&mut (id, ref mut next)) = path.last_mut() {
        let Some(v) = child(id, *next) else {
            path.pop();
            seen[id] = Seen::Done;
            if let (true, Some(&(parent, _))) = (holds[id], path.last()) {
                holds[parent] = true;
            }
            continue;
        };
        *next += 1;
        match v {
            Value::Tensor(_) => holds[id] = true,
            Value::Obj(c) => match seen[*c] {
                Seen::No => {
                    seen[*c] = Seen::OnPath;
                    path.push((*c, 0));
                }
                Seen::OnPath => {
                    return Err(CoreError::invalid_header(format!(
                        "pickle: {} contains itself (a cycle of containers)",
                        un.object(*c).kind()
                    )))
                }
                Seen::Done => holds[id] |= holds[*c],
            },
            _ => {}
        }
    }
    Ok(holds)
}

#[cfg(test)]
pub(crate) mod tests;
