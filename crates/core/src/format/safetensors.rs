//! The SafeTensors format: header validation, lazy reading, slicing and the writer.
//!
//! Validation follows Hugging Face's reference implementation (safetensors 0.8) rule by rule;
//! each rule maps to one error kind:
//!
//! | rule | kind |
//! |---|---|
//! | fewer than 8 bytes | `HeaderTooSmall` |
//! | header length over 100,000,000 | `HeaderTooLarge` |
//! | header runs past the file, is not UTF-8, not a header JSON, unknown dtype, duplicate name | `InvalidHeader` |
//! | offsets (sorted) not contiguous from 0, or end before start | `InvalidOffsets` |
//! | byte range ≠ shape × dtype size, or sizes overflow | `SizeMismatch` |
//! | data section not exactly covered | `IncompleteFile` |
//!
//! The header is parsed and validated once, at open; afterwards every tensor access is a
//! bounds-checked slice of a validated range.

use crate::dtype::DType;
use crate::error::{CoreError, Result};
use crate::fsutil::{self, Durability};
use crate::tensor::{checked_numel, TensorView};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs::File;
use std::io::Write;
use std::ops::Deref;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The reference's limit on the JSON header.
pub const MAX_HEADER_SIZE: usize = 100_000_000;
const N_LEN: usize = 8;

/// Where a tensor lives in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Byte range within the data section (after the header).
    pub data_offsets: (usize, usize),
}

impl TensorInfo {
    pub fn numel(&self) -> usize {
        // Validated at parse time.
        checked_numel(&self.shape).unwrap_or(0)
    }
    pub fn byte_len(&self) -> usize {
        self.data_offsets.1 - self.data_offsets.0
    }
}

/// A parsed, validated header.
#[derive(Debug, Clone)]
pub struct Header {
    metadata: Option<BTreeMap<String, String>>,
    /// Tensors in data-offset order.
    tensors: Vec<TensorInfo>,
    index: HashMap<String, usize>,
    /// Length of the JSON header (the 8-byte prefix's value).
    json_len: usize,
}

/// The raw shape of a tensor entry, as the reference deserializes it: an object with the
/// three fields (or the three values in an array, which serde's derive also accepts), unknown
/// fields allowed — but, as the reference buffers and so validates them, walked through
/// [`StrictJson`] rather than skipped.
struct RawInfo {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: (usize, usize),
}

/// A key of a tensor entry, read without allocating.
enum InfoField {
    Dtype,
    Shape,
    DataOffsets,
    Unknown,
}

impl<'de> Deserialize<'de> for InfoField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct FieldVisitor;
        impl Visitor<'_> for FieldVisitor {
            type Value = InfoField;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E>(self, key: &str) -> std::result::Result<InfoField, E> {
                Ok(match key {
                    "dtype" => InfoField::Dtype,
                    "shape" => InfoField::Shape,
                    "data_offsets" => InfoField::DataOffsets,
                    _ => InfoField::Unknown,
                })
            }
        }
        d.deserialize_identifier(FieldVisitor)
    }
}

impl<'de> Deserialize<'de> for RawInfo {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct InfoVisitor;
        impl<'de> Visitor<'de> for InfoVisitor {
            type Value = RawInfo;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("struct TensorInfo")
            }
            fn visit_seq<A: de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<RawInfo, A::Error> {
                let dtype = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let shape = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(1, &self))?;
                let data_offsets = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(2, &self))?;
                Ok(RawInfo {
                    dtype,
                    shape,
                    data_offsets,
                })
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<RawInfo, A::Error> {
                let (mut dtype, mut shape, mut data_offsets) = (None, None, None);
                fn set<T, E: de::Error>(
                    slot: &mut Option<T>,
                    value: T,
                    name: &'static str,
                ) -> std::result::Result<(), E> {
                    match slot.replace(value) {
                        Some(_) => Err(E::duplicate_field(name)),
                        None => Ok(()),
                    }
                }
                while let Some(field) = map.next_key::<InfoField>()? {
                    match field {
                        InfoField::Dtype => set(&mut dtype, map.next_value()?, "dtype")?,
                        InfoField::Shape => set(&mut shape, map.next_value()?, "shape")?,
                        InfoField::DataOffsets => {
                            set(&mut data_offsets, map.next_value()?, "data_offsets")?
                        }
                        InfoField::Unknown => map.next_value_seed(StrictJson)?,
                    }
                }
                Ok(RawInfo {
                    dtype: dtype.ok_or_else(|| de::Error::missing_field("dtype"))?,
                    shape: shape.ok_or_else(|| de::Error::missing_field("shape"))?,
                    data_offsets: data_offsets
                        .ok_or_else(|| de::Error::missing_field("data_offsets"))?,
                })
            }
        }
        d.deserialize_struct(
            "TensorInfo",
            &["dtype", "shape", "data_offsets"],
            InfoVisitor,
        )
    }
}

enum RawEntry {
    Metadata(Option<BTreeMap<String, String>>),
    Tensor(String, RawInfo),
}

/// The header's top-level map, kept in order, with duplicate keys reported.
struct RawHeader {
    entries: Vec<RawEntry>,
    duplicate: Option<String>,
}

impl<'de> Deserialize<'de> for RawHeader {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct HeaderVisitor;
        impl<'de> Visitor<'de> for HeaderVisitor {
            type Value = RawHeader;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object of tensor entries")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<RawHeader, A::Error> {
                let mut entries = Vec::new();
                let mut seen = std::collections::HashSet::new();
                let mut duplicate = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key == "__metadata__" {
                        let m = map
                            .next_value::<Option<BTreeMap<String, String>>>()
                            .map_err(|e| {
                                de::Error::custom(format!(
                                    "__metadata__ must be a map of strings ({e})"
                                ))
                            })?;
                        if !seen.insert(key.clone()) && duplicate.is_none() {
                            duplicate = Some(key);
                        }
                        entries.push(RawEntry::Metadata(m));
                    } else {
                        let info = map
                            .next_value::<RawInfo>()
                            .map_err(|e| de::Error::custom(format!("tensor '{key}': {e}")))?;
                        if !seen.insert(key.clone()) && duplicate.is_none() {
                            duplicate = Some(key.clone());
                        }
                        entries.push(RawEntry::Tensor(key, info));
                    }
                }
                Ok(RawHeader { entries, duplicate })
            }
        }
        d.deserialize_map(HeaderVisitor)
    }
}

/// Walks any JSON value through serde_json's *validating* paths, storing nothing.
///
/// The reference deserializes its header into a struct that flattens the tensor map, so
/// serde_json buffers every value of the document — unknown fields of tensor entries
/// included — and on the way checks what skipping a value does not: every string's escapes
/// (a lone UTF-16 surrogate such as `"\ud800"` is an error), every number's range (`1e400`
/// is an error), and its recursion limit of 128 nested levels. [`RawInfo`] walks its unknown
/// fields with this instead of skipping them, so the same checks apply in the same parse.
struct StrictJson;

impl<'de> de::DeserializeSeed<'de> for StrictJson {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictJson {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        while seq.next_element_seed(StrictJson)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        while map.next_key_seed(StrictJson)?.is_some() {
            map.next_value_seed(StrictJson)?;
        }
        Ok(())
    }
}

/// Parse the header JSON into its raw entries, with the reference's verdict on every value.
fn parse_raw(text: &str) -> Result<RawHeader> {
    serde_json::from_str(text).map_err(|e| {
        CoreError::invalid_header(format!(
            "header is not a valid SafeTensors JSON header: {e}"
        ))
    })
}

impl Header {
    /// Read the 8-byte little-endian length prefix and check it against the limits and the
    /// file size. Returns the JSON length.
    pub fn json_len(prefix: &[u8], file_len: u64) -> Result<usize> {
        let Some(bytes) = prefix.get(..N_LEN) else {
            return Err(CoreError::header_too_small(format!(
                "file has {file_len} bytes; a SafeTensors file starts with an 8-byte header length"
            )));
        };
        let mut arr = [0u8; N_LEN];
        arr.copy_from_slice(bytes);
        let n = u64::from_le_bytes(arr);
        if n > MAX_HEADER_SIZE as u64 {
            return Err(CoreError::header_too_large(format!(
                "header length {n} exceeds the limit of {MAX_HEADER_SIZE} bytes"
            )));
        }
        if n + N_LEN as u64 > file_len {
            return Err(CoreError::invalid_header(format!(
                "header length {n} runs past the end of the file ({file_len} bytes)"
            )));
        }
        Ok(n as usize)
    }

    /// Parse and validate the JSON header of a file of `file_len` bytes whose header JSON is
    /// `json` (exactly the prefix's length).
    pub fn parse(json: &[u8], file_len: u64) -> Result<Header> {
        let text = std::str::from_utf8(json)
            .map_err(|e| CoreError::invalid_header(format!("header is not valid UTF-8: {e}")))?;
        let raw = parse_raw(text)?;
        if let Some(name) = raw.duplicate {
            return Err(
                CoreError::invalid_header(format!("duplicate entry '{name}' in header"))
                    .with_tensor(name),
            );
        }
        let mut metadata = None;
        let mut tensors = Vec::with_capacity(raw.entries.len());
        for entry in raw.entries {
            match entry {
                RawEntry::Metadata(m) => metadata = m,
                RawEntry::Tensor(name, info) => {
                    let dtype = DType::from_name(&info.dtype).ok_or_else(|| {
                        CoreError::invalid_header(format!("unknown dtype '{}'", info.dtype))
                            .with_tensor(&name)
                    })?;
                    tensors.push(TensorInfo {
                        name,
                        dtype,
                        shape: info.shape,
                        data_offsets: info.data_offsets,
                    });
                }
            }
        }
        // Files may list tensors in any order; the data must still tile the buffer.
        tensors.sort_by(|a, b| {
            a.data_offsets
                .cmp(&b.data_offsets)
                .then_with(|| a.name.cmp(&b.name))
        });
        let data_len = validate_layout(&tensors)?;
        let json_len = json.len();
        // `json_len` was checked against `file_len` by `json_len()`; `data_len` may be close to
        // 2^64 (the offsets only have to tile), so compare instead of adding.
        let have = file_len.saturating_sub(N_LEN as u64 + json_len as u64);
        if data_len as u64 != have {
            let what = if (data_len as u64) > have {
                "truncated"
            } else {
                "has trailing bytes"
            };
            return Err(CoreError::incomplete_file(format!(
                "data section {what}: tensors cover {data_len} bytes, the file holds {have}"
            )));
        }
        let index = tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        Ok(Header {
            metadata,
            tensors,
            index,
            json_len,
        })
    }

    pub fn metadata(&self) -> Option<&BTreeMap<String, String>> {
        self.metadata.as_ref()
    }
    /// Tensors in data-offset order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }
    pub fn get(&self, name: &str) -> Option<&TensorInfo> {
        self.index.get(name).and_then(|&i| self.tensors.get(i))
    }
    /// Offset of the data section from the start of the file.
    pub fn data_start(&self) -> usize {
        N_LEN + self.json_len
    }
    pub fn data_len(&self) -> usize {
        self.tensors.last().map_or(0, |t| t.data_offsets.1)
    }
    pub fn num_parameters(&self) -> u64 {
        self.tensors.iter().map(|t| t.numel() as u64).sum()
    }
}

/// Every problem in a file, not only the first: the rules of [`Header::parse`], continued
/// past a failing tensor wherever the header's structure still allows it. An empty list
/// means the file is valid. Only the header is read.
pub fn validate_file(path: &Path) -> Vec<CoreError> {
    let run = || -> Result<Vec<CoreError>> {
        let (file, meta) = fsutil::open_regular(path, "a SafeTensors file")?;
        let file_len = meta.len();
        let mut prefix = [0u8; N_LEN];
        let got = read_up_to(&file, &mut prefix, 0).map_err(|e| CoreError::io(e, path))?;
        let json_len = Header::json_len(&prefix[..got], file_len)?;
        let mut json = vec![0u8; json_len];
        file.read_exact_at(&mut json, N_LEN as u64)
            .map_err(|e| CoreError::io(e, path))?;
        Ok(header_problems(&json, file_len))
    };
    match run() {
        Ok(list) => list,
        Err(e) => vec![e],
    }
    .into_iter()
    .map(|e| e.with_path(path))
    .collect()
}

/// See [`validate_file`]; `json` is the header JSON of a file of `file_len` bytes.
pub fn header_problems(json: &[u8], file_len: u64) -> Vec<CoreError> {
    let text = match std::str::from_utf8(json) {
        Ok(t) => t,
        Err(e) => {
            return vec![CoreError::invalid_header(format!(
                "header is not valid UTF-8: {e}"
            ))]
        }
    };
    let raw = match parse_raw(text) {
        Ok(r) => r,
        Err(e) => return vec![e],
    };
    let mut problems = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut tensors = Vec::new();
    for entry in raw.entries {
        let RawEntry::Tensor(name, info) = entry else {
            continue;
        };
        if !seen.insert(name.clone()) {
            problems.push(
                CoreError::invalid_header(format!("duplicate entry '{name}' in header"))
                    .with_tensor(&name),
            );
            continue;
        }
        match DType::from_name(&info.dtype) {
            Some(dtype) => tensors.push(TensorInfo {
                name,
                dtype,
                shape: info.shape,
                data_offsets: info.data_offsets,
            }),
            None => problems.push(
                CoreError::invalid_header(format!("unknown dtype '{}'", info.dtype))
                    .with_tensor(&name),
            ),
        }
    }
    tensors.sort_by(|a, b| {
        a.data_offsets
            .cmp(&b.data_offsets)
            .then_with(|| a.name.cmp(&b.name))
    });
    // Check each tensor on its own, resuming after a failure at the tensor's own end.
    let mut start = 0usize;
    for t in &tensors {
        if let Err(e) = validate_layout_from(t, start) {
            problems.push(e);
        }
        start = start.max(t.data_offsets.1);
    }
    let data_len = tensors.iter().map(|t| t.data_offsets.1).max().unwrap_or(0) as u64;
    let have = file_len.saturating_sub(N_LEN as u64 + json.len() as u64);
    if data_len != have {
        let what = if data_len > have {
            "truncated"
        } else {
            "has trailing bytes"
        };
        problems.push(CoreError::incomplete_file(format!(
            "data section {what}: tensors cover {data_len} bytes, the file holds {have}"
        )));
    }
    problems
}

/// The reference's per-tensor rules, in its order: contiguous offsets, then exact sizes.
fn validate_layout(tensors: &[TensorInfo]) -> Result<usize> {
    let mut start = 0usize;
    for t in tensors {
        validate_layout_from(t, start)?;
        start = t.data_offsets.1;
    }
    Ok(start)
}

/// The rules for one tensor expected to start at `start`.
fn validate_layout_from(t: &TensorInfo, start: usize) -> Result<()> {
    let (s, e) = t.data_offsets;
    if s != start || e < s {
        let why = if e < s {
            format!("data_offsets [{s}, {e}] end before they start")
        } else {
            format!(
                "data_offsets [{s}, {e}] do not continue from the previous tensor's end ({start})"
            )
        };
        return Err(CoreError::invalid_offsets(why).with_tensor(&t.name));
    }
    let numel = checked_numel(&t.shape).ok_or_else(|| {
        CoreError::size_mismatch(format!("shape {:?} overflows", t.shape)).with_tensor(&t.name)
    })?;
    let nbits = numel.checked_mul(t.dtype.bits()).ok_or_else(|| {
        CoreError::size_mismatch(format!("shape {:?} of {} overflows", t.shape, t.dtype))
            .with_tensor(&t.name)
    })?;
    if !nbits.is_multiple_of(8) {
        return Err(CoreError::size_mismatch(format!(
            "{numel} elements of {} do not fill whole bytes",
            t.dtype
        ))
        .with_tensor(&t.name));
    }
    if e - s != nbits / 8 {
        return Err(CoreError::size_mismatch(format!(
            "shape {:?} of {} needs {} bytes, data_offsets [{s}, {e}] give {}",
            t.shape,
            t.dtype,
            nbits / 8,
            e - s
        ))
        .with_tensor(&t.name));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Storage.

/// `(offset, length)` of a run of bytes within a file.
pub type FileSpan = (u64, u64);

/// How `SafeTensors::open` reaches the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// A private copy-on-write memory map: zero-copy views, pages read on first touch.
    #[default]
    Mmap,
    /// Plain positioned reads, one per tensor access (for network file systems, where a
    /// mapping can fault with SIGBUS if the file changes or the server goes away).
    Read,
}

/// Memory that holds a whole file: a private copy-on-write map or an owned buffer. Shared
/// (`Arc`) by every view handed out, so views outlive the `SafeTensors` that made them.
pub enum Memory {
    Mapped(Mapping),
    Owned(Vec<u8>),
}

/// A private file mapping, and what has been done to its pages ([`crate::pages`]).
pub struct Mapping {
    map: memmap2::MmapMut,
    pages: crate::pages::PageState,
}

impl Mapping {
    pub fn new(map: memmap2::MmapMut) -> Mapping {
        Mapping {
            map,
            pages: Default::default(),
        }
    }
}

impl Memory {
    /// Map the pages of `start..start + len` in one call before a conversion walks them,
    /// once per range and mapping ([`crate::pages::PageState::populate_once`]).
    pub fn populate_once(&self, start: usize, len: usize) {
        if let Memory::Mapped(m) = self {
            m.pages.populate_once(&m.map, start, len);
        }
    }

    /// `start..start + len` is handed out as a view that may be written: its pages stay.
    pub fn mark_viewed(&self, start: usize, len: usize) {
        if let Memory::Mapped(m) = self {
            m.pages.mark_viewed(start, len);
        }
    }

    /// A conversion has read `start..start + len` (and will likely not read it again): give
    /// its pages back unless a view covers them ([`crate::pages::PageState::release`]).
    pub fn release(&self, start: usize, len: usize) {
        if let Memory::Mapped(m) = self {
            m.pages.release(&m.map, start, len);
        }
    }
}

impl Deref for Memory {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Memory::Mapped(m) => &m.map,
            Memory::Owned(v) => v,
        }
    }
}

enum Storage {
    Memory(Arc<Memory>),
    File(File),
    /// Only the header is here; the data lives elsewhere (e.g. behind HTTP range requests)
    /// and is fetched by the caller, which asks [`SafeTensors::file_range`] where to look.
    Detached,
}

/// A validated SafeTensors file (or buffer) whose tensors are read lazily.
pub struct SafeTensors {
    header: Header,
    storage: Storage,
    path: Option<PathBuf>,
    file_len: u64,
    /// What the file was when opened (files opened from a path only).
    identity: Option<FileIdentity>,
}

/// A file's identity and state at one moment: enough to tell, with one `stat`, whether the
/// path still names the same, unchanged file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileIdentity {
    dev: u64,
    ino: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

impl FileIdentity {
    fn of(meta: &std::fs::Metadata) -> FileIdentity {
        use std::os::unix::fs::MetadataExt;
        FileIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            modified: meta.modified().ok(),
        }
    }
}

/// A tensor's bytes: borrowed from shared memory (with the `Arc` and absolute range so a
/// binding can hand out a zero-copy view), or read into an owned buffer.
pub enum TensorBytes<'a> {
    Shared {
        memory: &'a Arc<Memory>,
        start: usize,
        len: usize,
    },
    Owned(Vec<u8>),
}

impl TensorBytes<'_> {
    pub fn as_slice(&self) -> &[u8] {
        match self {
            // Range validated against the file length at open.
            TensorBytes::Shared { memory, start, len } => &memory[*start..*start + *len],
            TensorBytes::Owned(v) => v,
        }
    }
}

impl SafeTensors {
    pub fn open(path: &Path, backend: Backend) -> Result<SafeTensors> {
        let (file, meta) = fsutil::open_regular(path, "a SafeTensors file")?;
        let file_len = meta.len();
        let identity = Some(FileIdentity::of(&meta));
        let with_path = |e: CoreError| e.with_path(path);
        match backend {
            Backend::Mmap => {
                let memory = if file_len == 0 {
                    Memory::Owned(Vec::new())
                } else {
                    // SAFETY: a private (copy-on-write) mapping; writes through it never reach
                    // the file. If another process truncates the file while mapped, reads past
                    // the new end fault (SIGBUS) — the documented hazard of mmap that the
                    // `Read` backend avoids.
                    let map = unsafe { memmap2::MmapOptions::new().map_copy(&file) }
                        .map_err(|e| CoreError::io(e, path))?;
                    Memory::Mapped(Mapping::new(map))
                };
                let mut st = SafeTensors::from_memory(Arc::new(memory)).map_err(with_path)?;
                st.path = Some(path.to_path_buf());
                st.identity = identity;
                Ok(st)
            }
            Backend::Read => {
                let mut prefix = [0u8; N_LEN];
                let got = read_up_to(&file, &mut prefix, 0).map_err(|e| CoreError::io(e, path))?;
                let json_len = Header::json_len(&prefix[..got], file_len).map_err(with_path)?;
                let mut json = vec![0u8; json_len];
                file.read_exact_at(&mut json, N_LEN as u64)
                    .map_err(|e| CoreError::io(e, path))?;
                let header = Header::parse(&json, file_len).map_err(with_path)?;
                Ok(SafeTensors {
                    header,
                    storage: Storage::File(file),
                    path: Some(path.to_path_buf()),
                    file_len,
                    identity,
                })
            }
        }
    }

    /// Validate a whole file already in memory.
    pub fn from_memory(memory: Arc<Memory>) -> Result<SafeTensors> {
        let file_len = memory.len() as u64;
        let json_len = Header::json_len(&memory, file_len)?;
        let header = Header::parse(&memory[N_LEN..N_LEN + json_len], file_len)?;
        Ok(SafeTensors {
            header,
            storage: Storage::Memory(memory),
            path: None,
            file_len,
            identity: None,
        })
    }

    /// Validate a file known only by its first bytes (the 8-byte prefix and the whole JSON
    /// header, possibly more) and its total length. Tensor data is not available from the
    /// result: callers fetch the bytes of [`SafeTensors::file_range`] themselves.
    pub fn from_header(head: &[u8], file_len: u64, origin: &str) -> Result<SafeTensors> {
        let json_len = Header::json_len(head, file_len)?;
        let json = head.get(N_LEN..N_LEN + json_len).ok_or_else(|| {
            CoreError::incomplete_file(format!(
                "have {} bytes of the file's start, the header needs {}",
                head.len(),
                N_LEN + json_len
            ))
        })?;
        let header = Header::parse(json, file_len).map_err(|e| e.with_path(origin))?;
        Ok(SafeTensors {
            header,
            storage: Storage::Detached,
            path: Some(PathBuf::from(origin)),
            file_len,
            identity: None,
        })
    }

    /// Absolute byte range `[start, end)` of a tensor within the file.
    pub fn file_range(&self, info: &TensorInfo) -> (u64, u64) {
        let base = self.header.data_start() as u64;
        (
            base + info.data_offsets.0 as u64,
            base + info.data_offsets.1 as u64,
        )
    }

    /// The absolute byte spans of a slice (see [`SafeTensors::slice`]) and its shape.
    pub fn slice_spans(
        &self,
        name: &str,
        ranges: &[SliceArg],
    ) -> Result<(Vec<usize>, Vec<FileSpan>)> {
        let info = self.info(name)?;
        let plan = SlicePlan::new(info, ranges).map_err(|e| self.context(e.with_tensor(name)))?;
        let (base, _) = self.file_range(info);
        let spans = plan
            .spans
            .iter()
            .map(|&(s, l)| (base + s as u64, l as u64))
            .collect();
        Ok((plan.shape, spans))
    }

    pub fn from_bytes(bytes: Vec<u8>) -> Result<SafeTensors> {
        SafeTensors::from_memory(Arc::new(Memory::Owned(bytes)))
    }

    pub fn header(&self) -> &Header {
        &self.header
    }
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
    pub fn file_len(&self) -> u64 {
        self.file_len
    }
    pub fn metadata(&self) -> Option<&BTreeMap<String, String>> {
        self.header.metadata()
    }
    pub fn tensors(&self) -> &[TensorInfo] {
        self.header.tensors()
    }

    fn context(&self, e: CoreError) -> CoreError {
        match &self.path {
            Some(p) => e.with_path(p),
            None => e,
        }
    }

    /// The tensor's description, or ERR_NOT_FOUND naming it.
    pub fn info(&self, name: &str) -> Result<&TensorInfo> {
        self.header.get(name).ok_or_else(|| {
            self.context(CoreError::not_found("no such tensor in the file").with_tensor(name))
        })
    }

    /// The bytes of a validated tensor (shared memory, or one positioned read).
    pub fn bytes(&self, info: &TensorInfo) -> Result<TensorBytes<'_>> {
        self.bytes_range(info.data_offsets.0, info.byte_len())
            .map_err(|e| self.context(e.with_tensor(&info.name)))
    }

    /// Bytes `[offset, offset + len)` of the data section.
    fn bytes_range(&self, offset: usize, len: usize) -> Result<TensorBytes<'_>> {
        let data_len = self.header.data_len();
        if offset.checked_add(len).is_none_or(|end| end > data_len) {
            return Err(CoreError::invalid_argument(
                "byte range outside the data section",
            ));
        }
        let start = self.header.data_start() + offset;
        match &self.storage {
            Storage::Memory(memory) => Ok(TensorBytes::Shared { memory, start, len }),
            Storage::File(file) => {
                let mut buf = vec![0u8; len];
                file.read_exact_at(&mut buf, start as u64).map_err(|e| {
                    let e = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                        CoreError::incomplete_file(
                            "file is shorter than when it was opened (changed on disk?)",
                        )
                    } else {
                        CoreError::io(e, "")
                    };
                    self.context(e)
                })?;
                Ok(TensorBytes::Owned(buf))
            }
            Storage::Detached => Err(self.context(CoreError::invalid_argument(
                "this file's data is remote: use getTensorAsync (or getSliceAsync)",
            ))),
        }
    }

    /// A [`TensorView`] of one tensor (borrowed from memory, or owned after a read).
    pub fn view(&self, name: &str) -> Result<TensorView<'_>> {
        let info = self.info(name)?;
        let data: Cow<'_, [u8]> = match self.bytes(info)? {
            TensorBytes::Shared { memory, start, len } => {
                Cow::Borrowed(&memory.as_ref()[start..start + len])
            }
            TensorBytes::Owned(v) => Cow::Owned(v),
        };
        Ok(TensorView {
            name: info.name.clone(),
            dtype: info.dtype,
            shape: info.shape.clone(),
            data,
        })
    }

    /// A sub-tensor selected along the leading dimensions (see [`SlicePlan`]). When the
    /// selection is one contiguous run the result borrows; otherwise it is gathered.
    pub fn slice(&self, name: &str, ranges: &[SliceArg]) -> Result<(Vec<usize>, TensorBytes<'_>)> {
        let info = self.info(name)?;
        let plan = SlicePlan::new(info, ranges).map_err(|e| self.context(e.with_tensor(name)))?;
        let base = info.data_offsets.0;
        if let [(start, len)] = plan.spans[..] {
            return Ok((plan.shape, self.bytes_range(base + start, len)?));
        }
        let mut out = Vec::with_capacity(plan.byte_len);
        for (start, len) in plan.spans {
            let part = self.bytes_range(base + start, len)?;
            out.extend_from_slice(part.as_slice());
        }
        Ok((plan.shape, TensorBytes::Owned(out)))
    }

    /// What has happened to the file on disk since it was opened, with one `stat` (nothing
    /// for files not opened from a path): removed (ERR_NOT_FOUND), replaced by another file
    /// (ERR_IO: this handle keeps reading the one it opened), its length changed in place
    /// (ERR_INCOMPLETE_FILE: reading a memory map past a new end faults with SIGBUS, the
    /// read backend gets short reads), or modified in place (ERR_IO: untouched pages may
    /// show new bytes).
    pub fn changes_since_open(&self) -> Vec<CoreError> {
        let (Some(path), Some(then)) = (&self.path, &self.identity) else {
            return Vec::new();
        };
        let now = match std::fs::metadata(path) {
            Ok(meta) => FileIdentity::of(&meta),
            Err(e) => {
                let kind = CoreError::io(e, path).kind();
                let what = if kind == crate::error::ErrorKind::NotFound {
                    "removed since it was opened (this handle still reads the file it opened)"
                } else {
                    "cannot be checked since it was opened"
                };
                return vec![CoreError::new(kind, what).with_path(path)];
            }
        };
        let problem = if (now.dev, now.ino) != (then.dev, then.ino) {
            CoreError::new(
                crate::error::ErrorKind::Io,
                "replaced on disk since it was opened (this handle still reads the file it opened)",
            )
        } else if now.len != then.len {
            CoreError::incomplete_file(format!(
                "file changed on disk since it was opened ({} bytes then, {} now): reads past \
                 the new end fail, and through a memory map they fault (SIGBUS)",
                then.len, now.len
            ))
        } else if now.modified != then.modified {
            CoreError::new(
                crate::error::ErrorKind::Io,
                "modified in place since it was opened (tensors not yet read may show the new bytes)",
            )
        } else {
            return Vec::new();
        };
        vec![problem.with_path(path)]
    }

    /// The first of [`SafeTensors::changes_since_open`], if any.
    pub fn check_unchanged(&self) -> Result<()> {
        match self.changes_since_open().into_iter().next() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

fn read_up_to(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64)? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}

// ---------------------------------------------------------------------------------------
// Slicing.

/// One entry of a slice request, per leading dimension.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SliceArg {
    /// The whole dimension.
    Full,
    /// One index; the dimension is dropped from the result (negative counts from the end).
    Index(i64),
    /// Half-open `[start, stop)`; negative values count from the end.
    Range(i64, i64),
}

/// The product of `dims`: 0 if any is 0 (even when others would overflow), `None` on overflow.
fn zero_aware_product(mut dims: impl Iterator<Item = usize> + Clone) -> Option<usize> {
    if dims.clone().any(|d| d == 0) {
        return Some(0);
    }
    dims.try_fold(1usize, |acc, d| acc.checked_mul(d))
}

/// The contiguous byte spans (relative to the tensor's start) that a slice selects.
pub struct SlicePlan {
    pub shape: Vec<usize>,
    pub spans: Vec<(usize, usize)>,
    pub byte_len: usize,
}

impl SlicePlan {
    pub fn new(info: &TensorInfo, args: &[SliceArg]) -> Result<SlicePlan> {
        let elem = info.dtype.size().ok_or_else(|| {
            CoreError::unsupported_dtype(format!(
                "{} packs below a byte and cannot be sliced",
                info.dtype
            ))
        })?;
        let shape = &info.shape;
        if args.len() > shape.len() {
            return Err(CoreError::invalid_argument(format!(
                "{} slice ranges given for a tensor of rank {}",
                args.len(),
                shape.len()
            )));
        }
        // Normalise each argument to [start, stop) and whether the dim is kept. i128: indices
        // come from the caller as i64 and dimensions may exceed i64::MAX on zero-size tensors.
        let mut bounds = Vec::with_capacity(args.len());
        for (axis, (&arg, &dim)) in args.iter().zip(shape).enumerate() {
            let dim_i = dim as i128;
            let resolve = |v: i64| -> i128 {
                let v = v as i128;
                if v < 0 {
                    v + dim_i
                } else {
                    v
                }
            };
            let (start, stop, keep) = match arg {
                SliceArg::Full => (0, dim_i, true),
                SliceArg::Index(i) => {
                    let i = resolve(i);
                    (i, i + 1, false)
                }
                SliceArg::Range(a, b) => (resolve(a), resolve(b), true),
            };
            if start < 0 || stop < start || stop > dim_i {
                return Err(CoreError::invalid_argument(format!(
                    "slice {arg:?} is out of bounds for axis {axis} of size {dim}"
                )));
            }
            bounds.push((start as usize, stop as usize, keep));
        }
        let mut out_shape = Vec::with_capacity(shape.len());
        for &(a, b, keep) in &bounds {
            if keep {
                out_shape.push(b - a);
            }
        }
        out_shape.extend_from_slice(&shape[bounds.len()..]);
        // Bytes of the selection and of one contiguous block below the last sliced axis. A
        // zero anywhere makes a product zero, whatever the other (possibly huge) dimensions.
        let selected = zero_aware_product(bounds.iter().map(|&(a, b, _)| b - a));
        let inner = zero_aware_product(shape[bounds.len()..].iter().copied())
            .and_then(|n| n.checked_mul(elem));
        let total = match (selected, inner) {
            (Some(0), _) | (_, Some(0)) => 0,
            (Some(s), Some(i)) => s.checked_mul(i).ok_or_else(|| {
                CoreError::size_mismatch(format!("slice of shape {shape:?} overflows"))
            })?,
            _ => {
                return Err(CoreError::size_mismatch(format!(
                    "slice of shape {shape:?} overflows"
                )))
            }
        };
        let inner = inner.unwrap_or(0);
        let mut spans: Vec<(usize, usize)> = Vec::new();
        if total > 0 {
            // Row-major strides (in bytes) of the sliced axes.
            let mut strides = vec![0usize; bounds.len()];
            let mut acc = inner;
            for axis in (0..bounds.len()).rev() {
                strides[axis] = acc;
                // Only reached when nothing is zero: the products are within the tensor's size.
                acc = acc.saturating_mul(shape[axis]);
            }
            // Iterate the selected index tuples of all axes but the last, odometer style;
            // the last sliced axis is one contiguous run per tuple.
            let k = bounds.len();
            if k == 0 {
                spans.push((0, inner));
            } else {
                let mut idx: Vec<usize> = bounds.iter().map(|&(a, _, _)| a).collect();
                loop {
                    let offset: usize = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
                    let (a, b, _) = bounds[k - 1];
                    let len = (b - a) * strides[k - 1];
                    match spans.last_mut() {
                        Some((s, l)) if *s + *l == offset => *l += len,
                        _ => spans.push((offset, len)),
                    }
                    // Advance axes k-2 .. 0.
                    let mut axis = k - 1;
                    loop {
                        if axis == 0 {
                            return Ok(SlicePlan {
                                shape: out_shape,
                                spans,
                                byte_len: total,
                            });
                        }
                        axis -= 1;
                        idx[axis] += 1;
                        if idx[axis] < bounds[axis].1 {
                            break;
                        }
                        idx[axis] = bounds[axis].0;
                    }
                }
            }
        }
        Ok(SlicePlan {
            shape: out_shape,
            spans,
            byte_len: total,
        })
    }
}

// ---------------------------------------------------------------------------------------
// Writer.

/// What the writer needs to know of a tensor before its data: name, dtype, shape, size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSpec {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub byte_len: usize,
}

impl TensorSpec {
    /// The spec of a tensor whose data comes later (size from shape and dtype).
    pub fn new(name: impl Into<String>, dtype: DType, shape: Vec<usize>) -> Result<TensorSpec> {
        let name = name.into();
        let byte_len = checked_numel(&shape)
            .and_then(|n| dtype.byte_len(n))
            .ok_or_else(|| {
                CoreError::invalid_argument(format!(
                    "shape {shape:?} of {dtype} overflows or does not fill whole bytes"
                ))
                .with_tensor(&name)
            })?;
        Ok(TensorSpec {
            name,
            dtype,
            shape,
            byte_len,
        })
    }

    fn of(view: &TensorView<'_>) -> TensorSpec {
        TensorSpec {
            name: view.name.clone(),
            dtype: view.dtype,
            shape: view.shape.clone(),
            byte_len: view.data.len(),
        }
    }
}

/// The header bytes (length prefix + padded JSON) of the file the reference writer would
/// produce for `specs`, and the order (indices into `specs`) in which their data follows:
/// dtype descending (the reference's alignment order), then name.
pub fn header_bytes(
    specs: &[TensorSpec],
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<(Vec<u8>, Vec<usize>)> {
    let mut order: Vec<usize> = (0..specs.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&specs[a], &specs[b]);
        b.dtype.cmp(&a.dtype).then_with(|| a.name.cmp(&b.name))
    });
    let mut seen = std::collections::HashSet::with_capacity(specs.len());
    for spec in specs {
        if !seen.insert(spec.name.as_str()) {
            return Err(CoreError::invalid_argument(format!(
                "duplicate tensor name '{}'",
                spec.name
            )));
        }
    }
    let mut json = String::from("{");
    if let Some(m) = metadata {
        json.push_str("\"__metadata__\":");
        json.push_str(&to_json(m)?);
    }
    let mut offset = 0usize;
    for &i in &order {
        let t = &specs[i];
        if t.name == "__metadata__" {
            return Err(CoreError::invalid_argument(
                "'__metadata__' is reserved and cannot name a tensor",
            ));
        }
        if json.len() > 1 {
            json.push(',');
        }
        let end = offset
            .checked_add(t.byte_len)
            .ok_or_else(|| CoreError::invalid_argument("total size overflows"))?;
        json.push_str(&format!(
            "{}:{{\"dtype\":\"{}\",\"shape\":{},\"data_offsets\":[{offset},{end}]}}",
            to_json(&t.name)?,
            t.dtype,
            to_json(&t.shape)?,
        ));
        offset = end;
    }
    json.push('}');
    let padded = json.len().next_multiple_of(N_LEN);
    if padded > MAX_HEADER_SIZE {
        return Err(CoreError::invalid_argument(format!(
            "the header would be {padded} bytes, over the format's limit of {MAX_HEADER_SIZE}"
        )));
    }
    let mut header = Vec::with_capacity(N_LEN + padded);
    header.extend_from_slice(&(padded as u64).to_le_bytes());
    header.extend_from_slice(json.as_bytes());
    header.resize(N_LEN + padded, b' ');
    Ok((header, order))
}

/// JSON text of a value, exactly as the reference (serde_json, compact) writes it.
fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| CoreError::invalid_argument(e.to_string()))
}

/// Serialize tensors to the bytes of a SafeTensors file, byte-identical to the reference
/// writer (metadata keys sorted, so the output is deterministic).
pub fn serialize(
    tensors: &[TensorView<'_>],
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<Vec<u8>> {
    let specs: Vec<TensorSpec> = tensors.iter().map(TensorSpec::of).collect();
    let (header, order) = header_bytes(&specs, metadata)?;
    let total = header.len() + specs.iter().map(|t| t.byte_len).sum::<usize>();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&header);
    for i in order {
        out.extend_from_slice(&tensors[i].data);
    }
    Ok(out)
}

/// Write tensors to `path` atomically (temporary file in the same directory, then rename;
/// no `fsync`: see [`save_file_with`] and [`Durability`]).
pub fn save_file(
    path: &Path,
    tensors: &[TensorView<'_>],
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<()> {
    save_file_with(path, tensors, metadata, Durability::default())
}

/// [`save_file`] with the [`Durability`] asked for.
pub fn save_file_with(
    path: &Path,
    tensors: &[TensorView<'_>],
    metadata: Option<&BTreeMap<String, String>>,
    durability: Durability,
) -> Result<()> {
    let specs: Vec<TensorSpec> = tensors.iter().map(TensorSpec::of).collect();
    save_streaming_with(path, &specs, metadata, durability, &mut |i| {
        Ok(Cow::Borrowed(tensors[i].data.as_ref()))
    })
}

/// Write a file whose tensor data is produced one tensor at a time by `fetch(i)` (an index
/// into `specs`), so a conversion never holds the whole model in memory twice. Atomic.
pub fn save_streaming<'d>(
    path: &Path,
    specs: &[TensorSpec],
    metadata: Option<&BTreeMap<String, String>>,
    fetch: &mut dyn FnMut(usize) -> Result<Cow<'d, [u8]>>,
) -> Result<()> {
    save_streaming_with(path, specs, metadata, Durability::default(), fetch)
}

/// [`save_streaming`] with the [`Durability`] asked for.
pub fn save_streaming_with<'d>(
    path: &Path,
    specs: &[TensorSpec],
    metadata: Option<&BTreeMap<String, String>>,
    durability: Durability,
    fetch: &mut dyn FnMut(usize) -> Result<Cow<'d, [u8]>>,
) -> Result<()> {
    let (header, order) = header_bytes(specs, metadata).map_err(|e| e.with_path(path))?;
    // The exact size (header_bytes checked that the data offsets add up).
    let len = specs.iter().fold(header.len() as u64, |n, s| {
        n.saturating_add(s.byte_len as u64)
    });
    fsutil::write_atomic_sized(path, durability, len, |out: &mut dyn Write| {
        fsutil::write_all(out, &header, path)?;
        for i in order {
            let spec = &specs[i];
            let data = fetch(i)?;
            if data.len() != spec.byte_len {
                return Err(CoreError::invalid_argument(format!(
                    "expected {} bytes of data, got {}",
                    spec.byte_len,
                    data.len()
                ))
                .with_tensor(&spec.name));
            }
            fsutil::write_all(out, &data, path)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests;
