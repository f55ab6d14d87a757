//! NumPy arrays: `.npy` (format versions 1, 2 and 3) and `.npz` (a zip of `.npy` members,
//! stored by `np.savez` or deflated by `np.savez_compressed`), with `allow_pickle=False`
//! semantics: object arrays (whose data is a pickle) are refused, never unpickled.
//!
//! The header is a Python dict literal (`{'descr': '<f4', 'fortran_order': False,
//! 'shape': (3, 4), }`), parsed by a small literal reader that accepts only strings, ints,
//! booleans, `None`, tuples, lists and dicts. Every numeric dtype SafeTensors has is read in
//! any byte order (`<`, `>`, `|`) and either memory order; arrays come out row-major and
//! little-endian — a view of the mapping when they are stored that way.

use crate::dtype::DType;
use crate::error::{CoreError, Result};
use crate::format::pytorch::TensorListing;
use crate::format::safetensors::{Memory, TensorBytes};
use crate::format::strided;
use crate::format::zip::{Method, ZipArchive, ZipEntry};
use crate::format::{FileReader, Reader, Registration};
use crate::source::{
    self, Metadata, SourceFile, TensorList, TensorSource, WeightsFormat, WholeFile,
};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The name of a `.npy` file's one array (what `np.savez` calls its first positional array).
pub const NPY_ARRAY_NAME: &str = "arr_0";
const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// numpy's own default `max_header_size` (`numpy.lib.format`): longer headers are refused.
pub const MAX_HEADER_LEN: usize = 10_000;
/// The most bytes before a `.npy`'s data: magic, version, length and the longest header
/// (an `.npz` member's first bytes read to parse it).
pub const HEAD_BYTES: usize = 12 + MAX_HEADER_LEN;

/// Whether `bytes` start like a `.npy` file.
pub fn looks_like_npy(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// Whether a zip is an `.npz`: `.npy` members and no torch `data.pkl`.
pub fn is_npz(zip: &ZipArchive) -> bool {
    zip.entries().iter().any(|e| e.name.ends_with(".npy"))
        && !zip.entries().iter().any(|e| e.name.ends_with("/data.pkl"))
}

/// A parsed `.npy` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyHeader {
    pub dtype: DType,
    /// The `descr` as written (`<f4`, `>i8`, `|b1`).
    pub descr: String,
    pub big_endian: bool,
    pub fortran_order: bool,
    pub shape: Vec<usize>,
    /// Where the data starts, from the start of the `.npy`.
    pub data_offset: usize,
    /// Bytes of data: shape × element size.
    pub data_len: usize,
}

fn bad(message: impl Into<String>) -> CoreError {
    CoreError::invalid_header(format!("npy: {}", message.into()))
}

/// The bytes before a `.npy`'s data (magic, version, length and header), from its first
/// bytes: `None` until they say (at most 12 are needed), an error for a bad magic, version
/// or a header over [`MAX_HEADER_LEN`].
pub fn header_span(bytes: &[u8]) -> Result<Option<usize>> {
    Ok(header_fields(bytes)?.map(|(_, start, len)| start + len))
}

/// The version, where the header text starts and its length (`None` until the bytes say).
fn header_fields(bytes: &[u8]) -> Result<Option<(u8, usize, usize)>> {
    if !MAGIC.starts_with(&bytes[..bytes.len().min(MAGIC.len())]) {
        return Err(bad("no \\x93NUMPY magic"));
    }
    let Some(&major) = bytes.get(6) else {
        return Ok(None);
    };
    let (len_at, len_size) = match major {
        1 => (8, 2),
        2 | 3 => (8, 4),
        v => return Err(bad(format!("format version {v} (1, 2 and 3 are read)"))),
    };
    let Some(len_bytes) = bytes.get(len_at..len_at + len_size) else {
        return Ok(None);
    };
    let header_len = len_bytes
        .iter()
        .rev()
        .fold(0usize, |n, &b| (n << 8) | b as usize);
    if header_len > MAX_HEADER_LEN {
        return Err(CoreError::header_too_large(format!(
            "npy: header of {header_len} bytes (numpy's limit is {MAX_HEADER_LEN})"
        )));
    }
    Ok(Some((major, len_at + len_size, header_len)))
}

/// Parse the header at the start of `bytes` (which may hold only a prefix of the file).
pub fn parse_header(bytes: &[u8]) -> Result<NpyHeader> {
    if !bytes.starts_with(MAGIC) {
        return Err(bad("no \\x93NUMPY magic"));
    }
    let short = || CoreError::incomplete_file("npy: the header runs past the end of the file");
    let (major, start, header_len) = header_fields(bytes)?.ok_or_else(short)?;
    let raw = bytes.get(start..start + header_len).ok_or_else(short)?;
    // Versions 1 and 2 are latin-1, 3 is UTF-8; a valid header is ASCII either way.
    let text = std::str::from_utf8(raw)
        .ok()
        .filter(|t| t.is_ascii() || major == 3)
        .ok_or_else(|| bad("header is not text"))?;
    let dict = match Literal::parse(text)? {
        Literal::Dict(d) => d,
        _ => return Err(bad("header is not a dict")),
    };
    let field = |k: &str| {
        dict.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v)
            .ok_or_else(|| bad(format!("header has no '{k}'")))
    };
    if dict.len() != 3 {
        return Err(bad(
            "header must hold exactly descr, fortran_order and shape",
        ));
    }
    let descr = match field("descr")? {
        Literal::Str(s) => s.clone(),
        _ => {
            return Err(CoreError::unsupported_dtype(
                "npy: a structured dtype (only plain numeric arrays are read)",
            ))
        }
    };
    let fortran_order = match field("fortran_order")? {
        Literal::Bool(b) => *b,
        _ => return Err(bad("fortran_order is not a bool")),
    };
    let shape = match field("shape")? {
        Literal::Tuple(items) => items
            .iter()
            .map(|d| match d {
                Literal::Int(n) if *n >= 0 => {
                    usize::try_from(*n).map_err(|_| bad("dimension too large"))
                }
                _ => Err(bad("shape holds something other than non-negative ints")),
            })
            .collect::<Result<Vec<_>>>()?,
        _ => return Err(bad("shape is not a tuple")),
    };
    let (dtype, big_endian) = parse_descr(&descr)?;
    let es = dtype.size().unwrap_or(1);
    let data_offset = start + header_len;
    // The data's end, not only its length, must be representable: an end that wrapped around
    // would make a shape far too large for any file look like a file with bytes to spare.
    let data_len = crate::tensor::checked_numel(&shape)
        .and_then(|n| n.checked_mul(es))
        .filter(|&n| n.checked_add(data_offset).is_some())
        .ok_or_else(|| {
            CoreError::size_mismatch(format!(
                "npy: shape {shape:?} overflows: its {es}-byte elements after the \
                 {data_offset}-byte header are too large for any file"
            ))
        })?;
    Ok(NpyHeader {
        dtype,
        descr,
        big_endian,
        fortran_order,
        shape,
        data_offset,
        data_len,
    })
}

/// A dtype string: byte order, kind, size. Object arrays are refused as `numpy.load`
/// refuses them without `allow_pickle`.
fn parse_descr(descr: &str) -> Result<(DType, bool)> {
    let (order, rest) = match descr.as_bytes().first() {
        Some(b'<' | b'|' | b'=') => (b'<', &descr[1..]),
        Some(b'>' | b'!') => (b'>', &descr[1..]),
        _ => (b'<', descr),
    };
    let unsupported = || {
        CoreError::unsupported_dtype(format!(
            "npy: dtype '{descr}' has no SafeTensors equivalent"
        ))
    };
    if rest.starts_with('O') {
        return Err(CoreError::unsafe_pickle(format!(
            "npy: an object array (dtype '{descr}') holds a pickle; it is refused as numpy.load(allow_pickle=False) refuses it, and nothing was executed"
        )));
    }
    let mut chars = rest.chars();
    let kind = chars.next().ok_or_else(unsupported)?;
    let size: usize = chars.as_str().parse().map_err(|_| unsupported())?;
    let dtype = match (kind, size) {
        ('f', 2) => DType::F16,
        ('f', 4) => DType::F32,
        ('f', 8) => DType::F64,
        ('i', 1) => DType::I8,
        ('i', 2) => DType::I16,
        ('i', 4) => DType::I32,
        ('i', 8) => DType::I64,
        ('u', 1) => DType::U8,
        ('u', 2) => DType::U16,
        ('u', 4) => DType::U32,
        ('u', 8) => DType::U64,
        ('b', 1) => DType::BOOL,
        ('c', 8) => DType::C64,
        _ => return Err(unsupported()),
    };
    Ok((dtype, order == b'>' && size > 1))
}

/// The Python literals a `.npy` header may hold.
#[derive(Debug, Clone, PartialEq)]
enum Literal {
    Str(String),
    Int(i64),
    Bool(bool),
    None,
    Tuple(Vec<Literal>),
    List(Vec<Literal>),
    Dict(Vec<(String, Literal)>),
}

impl Literal {
    fn parse(text: &str) -> Result<Literal> {
        let mut p = LiteralParser {
            s: text.as_bytes(),
            at: 0,
        };
        let v = p.value(0)?;
        p.skip_ws();
        if p.at != p.s.len() {
            return Err(bad("trailing characters after the header dict"));
        }
        Ok(v)
    }
}

struct LiteralParser<'a> {
    s: &'a [u8],
    at: usize,
}

impl LiteralParser<'_> {
    fn skip_ws(&mut self) {
        while self.s.get(self.at).is_some_and(|c| c.is_ascii_whitespace()) {
            self.at += 1;
        }
    }
    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.at).copied()
    }
    fn value(&mut self, depth: usize) -> Result<Literal> {
        if depth > 16 {
            return Err(bad("header nested too deeply"));
        }
        match self.peek().ok_or_else(|| bad("header ends early"))? {
            b'\'' | b'"' => self.string().map(Literal::Str),
            b'(' => self.items(b')', depth).map(|(v, _)| Literal::Tuple(v)),
            b'[' => self.items(b']', depth).map(|(v, _)| Literal::List(v)),
            b'{' => self.dict(depth),
            b'-' | b'0'..=b'9' => self.int(),
            _ => {
                for (word, v) in [
                    ("True", Literal::Bool(true)),
                    ("False", Literal::Bool(false)),
                    ("None", Literal::None),
                ] {
                    if self.s[self.at..].starts_with(word.as_bytes()) {
                        self.at += word.len();
                        return Ok(v);
                    }
                }
                Err(bad(format!(
                    "unexpected character at header byte {}",
                    self.at
                )))
            }
        }
    }
    fn string(&mut self) -> Result<String> {
        let quote = self.s[self.at];
        let start = self.at + 1;
        let len = self.s[start..]
            .iter()
            .position(|&c| c == quote || c == b'\\')
            .ok_or_else(|| bad("unterminated string"))?;
        if self.s[start + len] == b'\\' {
            return Err(bad("escapes in header strings are not read"));
        }
        self.at = start + len + 1;
        Ok(String::from_utf8_lossy(&self.s[start..start + len]).into_owned())
    }
    fn int(&mut self) -> Result<Literal> {
        let start = self.at;
        if self.s[self.at] == b'-' {
            self.at += 1;
        }
        while self.s.get(self.at).is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
        let digits = std::str::from_utf8(&self.s[start..self.at]).unwrap_or("");
        let n = digits
            .parse()
            .map_err(|_| bad(format!("bad integer '{digits}'")))?;
        // Python 2 wrote longs as `3L`.
        if self.s.get(self.at) == Some(&b'L') {
            self.at += 1;
        }
        Ok(Literal::Int(n))
    }
    /// Comma-separated values up to `close`; also says whether a comma ended the list.
    fn items(&mut self, close: u8, depth: usize) -> Result<(Vec<Literal>, bool)> {
        self.at += 1;
        let mut out = Vec::new();
        let mut trailing = false;
        loop {
            if self.peek() == Some(close) {
                self.at += 1;
                return Ok((out, trailing));
            }
            out.push(self.value(depth + 1)?);
            trailing = false;
            match self.peek() {
                Some(b',') => {
                    self.at += 1;
                    trailing = true;
                }
                Some(c) if c == close => {}
                _ => return Err(bad("expected ',' or a closing bracket")),
            }
        }
    }
    fn dict(&mut self, depth: usize) -> Result<Literal> {
        self.at += 1;
        let mut out: Vec<(String, Literal)> = Vec::new();
        loop {
            match self.peek() {
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Literal::Dict(out));
                }
                Some(b'\'' | b'"') => {}
                _ => return Err(bad("a header key is not a string")),
            }
            let key = self.string()?;
            if self.peek() != Some(b':') {
                return Err(bad("expected ':' after a header key"));
            }
            self.at += 1;
            let v = self.value(depth + 1)?;
            if out.iter().any(|(k, _)| *k == key) {
                return Err(bad(format!("header key '{key}' appears twice")));
            }
            out.push((key, v));
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {}
                _ => return Err(bad("expected ',' or '}' in the header")),
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Data {
    /// The data bytes in the file.
    Mapped(Range<usize>),
    /// A deflated `.npz` member: inflate, then skip the header.
    Deflated(ZipEntry, NpyHeader),
}

#[derive(Debug, Clone)]
struct Array {
    big_endian: bool,
    fortran_order: bool,
    data: Data,
}

/// An opened `.npy` or `.npz`: arrays listed and checked, bytes read on demand.
pub struct NumpyFile {
    memory: Arc<Memory>,
    npz: bool,
    tensors: TensorList,
    arrays: Vec<Array>,
    /// The file it was opened from (none for bytes held in memory).
    path: Option<PathBuf>,
}

// `.npy` / `.npz` files are opened (`NumpyFile::open`, `open_with`) and registered as
// every whole-file format is.
source::impl_whole_file!(NumpyFile, "a NumPy file");

/// The one array of a `.npy` of `file_len` bytes, from bytes holding at least its header.
fn npy_array(bytes: &[u8], file_len: usize) -> Result<(Vec<TensorListing>, Vec<Array>)> {
    let h = parse_header(bytes)?;
    let end = h.data_offset + h.data_len;
    match end.cmp(&file_len) {
        std::cmp::Ordering::Greater => {
            return Err(CoreError::incomplete_file(format!(
                "npy: the array needs {} data bytes, the file has {}",
                h.data_len,
                file_len - h.data_offset.min(file_len)
            )))
        }
        std::cmp::Ordering::Less => {
            return Err(CoreError::incomplete_file(format!(
                "npy: {} bytes after the array's data",
                file_len - end
            )))
        }
        std::cmp::Ordering::Equal => {}
    }
    let mut listed = Vec::with_capacity(1);
    let mut arrays = Vec::with_capacity(1);
    push(
        &mut listed,
        &mut arrays,
        NPY_ARRAY_NAME.to_string(),
        &h,
        Data::Mapped(h.data_offset..end),
    );
    Ok((listed, arrays))
}

impl NumpyFile {
    pub fn from_memory(memory: Arc<Memory>) -> Result<NumpyFile> {
        if looks_like_npy(&memory) {
            let (listed, arrays) = npy_array(&memory, memory.len())?;
            return NumpyFile::new(memory, false, listed, arrays);
        }
        if crate::format::zip::looks_like_zip(&memory) {
            let zip = ZipArchive::parse(&memory)?;
            return NumpyFile::from_zip(memory, &zip);
        }
        Err(bad("neither a .npy nor an .npz file"))
    }

    /// A `.npy` known by its first bytes (at least its header, [`header_span`]) and its
    /// length, its data read elsewhere: a file read by ranges, checked as
    /// [`NumpyFile::from_memory`] checks a whole one (the array must end the file).
    pub fn from_npy_header(head: &[u8], file_len: usize) -> Result<NumpyFile> {
        let (listed, arrays) = npy_array(head, file_len)?;
        NumpyFile::new(Arc::new(Memory::Owned(Vec::new())), false, listed, arrays)
    }

    /// An `.npz` whose directory the caller has parsed: every `*.npy` member, named as
    /// `numpy.load(f).files` names it (the member name without `.npy`). A name that is not
    /// printable text ([`crate::names::unprintable`]) is refused: it becomes a tensor name,
    /// which reaches terminals, logs and other formats' files.
    pub fn from_zip(memory: Arc<Memory>, zip: &ZipArchive) -> Result<NumpyFile> {
        let head = |entry: &ZipEntry| -> Result<Vec<u8>> {
            match entry.method {
                Method::Stored => {
                    let at = entry.data_range();
                    Ok(memory[at.start..at.end.min(at.start + HEAD_BYTES)].to_vec())
                }
                Method::Deflate => entry.read_prefix(&memory, HEAD_BYTES),
            }
        };
        let (listed, arrays) = Self::zip_arrays(zip, &head)?;
        NumpyFile::new(memory, true, listed, arrays)
    }

    /// An `.npz` known by its directory and its members' first bytes (`head`: at least the
    /// `.npy` header of each; a deflated member's inflated), its bytes read elsewhere: a file
    /// read by ranges.
    pub fn from_zip_heads(
        zip: &ZipArchive,
        head: &dyn Fn(&ZipEntry) -> Result<Vec<u8>>,
    ) -> Result<NumpyFile> {
        let (listed, arrays) = Self::zip_arrays(zip, head)?;
        let empty = Arc::new(Memory::Owned(Vec::new()));
        NumpyFile::new(empty, true, listed, arrays)
    }

    /// The arrays of an `.npz`, from each member's first bytes.
    fn zip_arrays(
        zip: &ZipArchive,
        head: &dyn Fn(&ZipEntry) -> Result<Vec<u8>>,
    ) -> Result<(Vec<TensorListing>, Vec<Array>)> {
        let mut listed = Vec::new();
        let mut arrays = Vec::new();
        for entry in zip.entries() {
            let Some(name) = entry.name.strip_suffix(".npy") else {
                continue;
            };
            if let Some(why) = crate::names::unprintable(name) {
                return Err(bad(format!(
                    "the .npz array name '{}' is refused: {why}",
                    crate::names::printable(name)
                )));
            }
            let named = |e: CoreError| e.with_tensor(name);
            let h = parse_header(&head(entry)?).map_err(named)?;
            if (h.data_offset as u64).checked_add(h.data_len as u64) != Some(entry.uncompressed_len)
            {
                return Err(named(CoreError::incomplete_file(format!(
                    "npz: member {:?} is {} bytes, its array needs {} + {} header bytes",
                    entry.name, entry.uncompressed_len, h.data_len, h.data_offset
                ))));
            }
            let data = match entry.method {
                Method::Stored => {
                    let start = entry.data_range().start + h.data_offset;
                    Data::Mapped(start..start + h.data_len)
                }
                Method::Deflate => Data::Deflated(entry.clone(), h.clone()),
            };
            push(&mut listed, &mut arrays, name.to_string(), &h, data);
        }
        if listed.is_empty() {
            return Err(bad("an .npz without .npy members"));
        }
        Ok((listed, arrays))
    }

    fn new(
        memory: Arc<Memory>,
        npz: bool,
        listed: Vec<TensorListing>,
        arrays: Vec<Array>,
    ) -> Result<NumpyFile> {
        let tensors = TensorList::new(listed, |name| {
            bad(format!("two arrays named '{name}'")).with_tensor(name)
        })?;
        Ok(NumpyFile {
            memory,
            npz,
            tensors,
            arrays,
            path: None,
        })
    }

    /// Whether this is an `.npz` (else a single `.npy`).
    pub fn is_npz(&self) -> bool {
        self.npz
    }
    pub fn tensors(&self) -> &[TensorListing] {
        self.tensors.as_slice()
    }
    pub fn get(&self, name: &str) -> Option<&TensorListing> {
        self.tensors.get(name)
    }
    /// An array's bytes, row-major and little-endian (bool as 0/1 bytes, as stored).
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
        match &self.arrays[i].data {
            Data::Mapped(range) => {
                let stored = self.memory.get(range.clone()).ok_or_else(not_held)?;
                if !self.arranges(i) {
                    return Ok(TensorBytes::Shared {
                        memory: &self.memory,
                        start: range.start,
                        len: range.len(),
                    });
                }
                Ok(TensorBytes::Owned(self.arrange(i, stored)?))
            }
            Data::Deflated(entry, h) => Ok(TensorBytes::Owned(self.inflated(
                i,
                entry,
                h,
                &self.memory,
                0,
            )?)),
        }
    }

    /// Array `i`, a deflated member, from `bytes` (the file's from byte `base` on, holding
    /// the member's compressed bytes): inflated into exactly the size the directory declares
    /// (its checksum checked), its `.npy` header the one read at open, then arranged.
    fn inflated(
        &self,
        i: usize,
        entry: &ZipEntry,
        h: &NpyHeader,
        bytes: &[u8],
        base: u64,
    ) -> Result<Vec<u8>> {
        let all = entry.read_at(bytes, base, entry.uncompressed_len)?;
        if parse_header(&all)? != *h {
            return Err(bad(format!(
                "member {:?} inflates to another header than the one read at open",
                entry.name
            )));
        }
        let data = all
            .get(h.data_offset..)
            .ok_or_else(|| CoreError::incomplete_file("npz: member shorter than its header"))?;
        self.arrange(i, data)
    }

    /// Whether array `i` is stored otherwise than row-major and little-endian.
    fn arranges(&self, i: usize) -> bool {
        let (t, a) = (&self.tensors.as_slice()[i], &self.arrays[i]);
        let fortran = a.fortran_order && t.shape.iter().filter(|&&d| d != 1).count() > 1;
        fortran || a.big_endian
    }

    /// Array `i`'s bytes row-major and little-endian, from its stored data.
    fn arrange(&self, i: usize, stored: &[u8]) -> Result<Vec<u8>> {
        let (t, a) = (&self.tensors.as_slice()[i], &self.arrays[i]);
        let es = t.dtype.size().unwrap_or(1);
        let fortran = a.fortran_order && t.shape.iter().filter(|&&d| d != 1).count() > 1;
        let mut bytes = if fortran {
            gather_fortran(stored, es, &t.shape)?
        } else {
            stored.to_vec()
        };
        if a.big_endian {
            let unit = if t.dtype == DType::C64 { 4 } else { es };
            strided::swap_bytes(&mut bytes, unit);
        }
        Ok(bytes)
    }

    /// Where the stored data of `name` lies in the file (a stored member's array, a deflated
    /// member's compressed bytes), and whether it is what [`NumpyFile::fetch`] gives as it is.
    pub fn data_range(&self, name: &str) -> Option<(Range<usize>, bool)> {
        let i = self.tensors.position(name)?;
        match &self.arrays[i].data {
            Data::Mapped(range) => Some((range.clone(), !self.arranges(i))),
            Data::Deflated(entry, _) => Some((entry.data_range(), false)),
        }
    }

    /// What [`NumpyFile::fetch`] gives, from the bytes of [`NumpyFile::data_range`].
    pub fn from_data(&self, name: &str, stored: &[u8]) -> Result<Vec<u8>> {
        let i = self
            .tensors
            .position(name)
            .ok_or_else(|| CoreError::not_found("no such tensor in the file").with_tensor(name))?;
        let out = match &self.arrays[i].data {
            Data::Mapped(_) => self.arrange(i, stored),
            Data::Deflated(entry, h) => self.inflated(i, entry, h, stored, entry.data_start),
        };
        out.map_err(|e| e.with_tensor(name))
    }
}

/// A tensor of a file opened from its headers alone (by ranges) is fetched by its driver.
pub(crate) fn not_held() -> CoreError {
    CoreError::invalid_argument(
        "the tensor's bytes were not read: the file was opened from its headers (fetch its spans)",
    )
}

fn push(
    listed: &mut Vec<TensorListing>,
    arrays: &mut Vec<Array>,
    name: String,
    h: &NpyHeader,
    data: Data,
) {
    listed.push(TensorListing {
        name,
        dtype: h.dtype,
        stored: std::borrow::Cow::Owned(h.descr.clone()),
        shape: h.shape.clone(),
        stored_len: h.data_len as u64,
    });
    arrays.push(Array {
        big_endian: h.big_endian,
        fortran_order: h.fortran_order,
        data,
    });
}

/// NumPy's entry in the format registry.
pub const FORMAT: Registration = Registration {
    format: WeightsFormat::NumPy,
    name: "numpy",
    describe: "a NumPy file",
    metadata_namespace: "numpy",
    sniff: crate::format::detect::is_numpy,
    reader: Reader::File(FileReader::whole::<NumpyFile>()),
};

impl TensorSource for NumpyFile {
    fn format(&self) -> WeightsFormat {
        WeightsFormat::NumPy
    }
    fn list(&self) -> &TensorList {
        &self.tensors
    }
    fn metadata(&self) -> Metadata<'_> {
        Metadata::None
    }
    fn fetch(&self, name: &str) -> Result<TensorBytes<'_>> {
        NumpyFile::fetch(self, name)
    }
    /// The bytes row-major and little-endian, as [`fetch`](Self::fetch): what a `.npy`
    /// stores is one array of `stored_len` bytes, whatever its order.
    fn fetch_raw(&self, name: &str) -> Result<TensorBytes<'_>> {
        NumpyFile::fetch(self, name)
    }
    fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
    fn files(&self) -> Vec<SourceFile> {
        self.whole_files()
    }
    fn release(&self, name: &str) {
        if let Some(i) = self.tensors.position(name) {
            if let Data::Mapped(range) = &self.arrays[i].data {
                self.memory.release(range.start, range.len());
            }
        }
    }
}

/// Row-major bytes of an array stored in Fortran (column-major) order.
fn gather_fortran(src: &[u8], es: usize, shape: &[usize]) -> Result<Vec<u8>> {
    let mut strides = Vec::with_capacity(shape.len());
    let mut s = 1usize;
    for &d in shape {
        strides.push(s);
        s = s.saturating_mul(d);
    }
    strided::gather(src, es, 0, shape, &strides)
}

#[cfg(test)]
pub(crate) mod tests;
