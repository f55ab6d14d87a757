//! The GGUF reader: parses and validates a whole file held in memory (usually a map).
//!
//! Nothing read from the file is trusted: every count and length is checked against the
//! bytes that remain before anything is allocated for it, every offset and size with checked
//! arithmetic. Any violation is ERR_INVALID_GGUF, naming the tensor where there is one.
//! Beyond the spec, the limits of ggml's own reader apply (strings of at most 64 MiB, arrays
//! of at most 64 Mi elements and never of arrays, alignment at most 1 MiB, `general.alignment`
//! typed UINT32, tensor names shorter than 64 bytes, at most 4 dimensions, rows a whole number
//! of blocks), so whatever opens here opens there.

use super::{
    align_up, keys, GgmlType, DEFAULT_ALIGNMENT, GGUF_MAGIC, MAX_ALIGNMENT, MAX_ARRAY_ELEMENTS,
    MAX_DIMS, MAX_STRING_BYTES, MAX_TENSOR_NAME_BYTES,
};
use crate::codecs;
use crate::dtype::DType;
use crate::error::{CoreError, Result};
use crate::names::printable;
use crate::source::value::{GgufArray, GgufValue, GgufValueType};
use crate::tensor::TensorView;
use std::collections::{HashMap, HashSet};

/// The fewest bytes a key-value pair can take: key length, one key byte, type, one byte.
const MIN_KV_BYTES: u64 = 8 + 1 + 4 + 1;
/// The fewest bytes a tensor info can take: name length, one name byte, n_dims, type, offset.
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 1 + 4 + 4 + 8;
/// Initial capacity of lists whose final length comes from the file: they grow as entries
/// actually parse, so a lying count cannot reserve memory.
const INITIAL_CAPACITY: usize = 256;

/// A tensor as listed in the file's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgufTensorInfo {
    pub name: String,
    pub ggml_type: GgmlType,
    /// Outermost first (the reverse of the file's `ne`).
    pub shape: Vec<usize>,
    /// Offset of the data within the data section.
    pub offset: u64,
    /// Bytes of data.
    pub byte_len: usize,
}

impl GgufTensorInfo {
    pub fn numel(&self) -> usize {
        // Checked at parse time.
        crate::tensor::checked_numel(&self.shape).unwrap_or(0)
    }
}

/// A parsed, validated GGUF file borrowing its bytes.
#[derive(Debug, Clone)]
pub struct GgufFile<'a> {
    bytes: &'a [u8],
    version: u32,
    alignment: usize,
    data_offset: usize,
    metadata: Vec<(String, GgufValue)>,
    tensors: Vec<GgufTensorInfo>,
    index: HashMap<String, usize>,
}

fn invalid(message: impl Into<String>) -> CoreError {
    CoreError::invalid_gguf(message)
}

/// Reads little-endian values off the front of the remaining bytes.
///
/// `bytes` may be only the start of a file of `file_len` bytes (a header fetched over HTTP):
/// counts and lengths are checked against the whole file, and a read past the bytes at hand
/// but within the file records in `wanted` how far the header goes so far, and fails.
struct Cursor<'a> {
    bytes: &'a [u8],
    file_len: usize,
    pos: usize,
    wanted: Option<usize>,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.file_len - self.pos
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(invalid(format!(
                "file truncated: {what} needs {n} bytes at offset {}, only {} remain",
                self.pos,
                self.remaining()
            )));
        }
        if self.pos + n > self.bytes.len() {
            self.wanted = Some(self.pos + n);
            return Err(invalid(format!(
                "the header continues past the first {} bytes",
                self.bytes.len()
            )));
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let bytes = self.take(N, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A count read from the file that must be representable and fit the remaining bytes at
    /// `min_item_bytes` each.
    fn count(&mut self, what: &str, min_item_bytes: usize, limit: u64) -> Result<usize> {
        let n = self.u64(what)?;
        let fits = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(min_item_bytes))
            .is_some_and(|bytes| bytes <= self.remaining());
        if n > limit || !fits {
            return Err(invalid(format!(
                "{what} is {n}, but only {} bytes remain (at least {min_item_bytes} per item, \
                 at most {limit} items)",
                self.remaining()
            )));
        }
        Ok(n as usize)
    }

    fn string_bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let len = self.u64(what)?;
        if len > MAX_STRING_BYTES || len > self.remaining() as u64 {
            return Err(invalid(format!(
                "{what} has length {len}, but only {} bytes remain (limit {MAX_STRING_BYTES})",
                self.remaining()
            )));
        }
        self.take(len as usize, what)
    }

    /// A key or tensor name: the spec requires UTF-8 and so do we.
    fn name(&mut self, what: &str) -> Result<String> {
        let bytes = self.string_bytes(what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| invalid(format!("{what} is not UTF-8")))
    }

    /// A string value. Invalid UTF-8 is replaced rather than rejected: real vocabularies
    /// carry byte-level tokens, and ggml's reader does not check encodings either.
    fn string_value(&mut self, what: &str) -> Result<String> {
        let bytes = self.string_bytes(what)?;
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }

    fn value_type(&mut self, what: &str) -> Result<GgufValueType> {
        let id = self.u32(what)?;
        GgufValueType::from_id(id).ok_or_else(|| invalid(format!("{what} {id} is not a GGUF type")))
    }

    fn value(&mut self, ty: GgufValueType) -> Result<GgufValue> {
        macro_rules! scalar {
            ($t:ty, $variant:ident) => {
                GgufValue::$variant(<$t>::from_le_bytes(self.array("value")?))
            };
        }
        Ok(match ty {
            GgufValueType::U8 => scalar!(u8, U8),
            GgufValueType::I8 => scalar!(i8, I8),
            GgufValueType::U16 => scalar!(u16, U16),
            GgufValueType::I16 => scalar!(i16, I16),
            GgufValueType::U32 => scalar!(u32, U32),
            GgufValueType::I32 => scalar!(i32, I32),
            GgufValueType::F32 => scalar!(f32, F32),
            // Any nonzero byte is true, as in ggml's and gguf-py's readers.
            GgufValueType::Bool => GgufValue::Bool(self.array::<1>("value")?[0] != 0),
            GgufValueType::String => GgufValue::String(self.string_value("string value")?),
            GgufValueType::U64 => scalar!(u64, U64),
            GgufValueType::I64 => scalar!(i64, I64),
            GgufValueType::F64 => scalar!(f64, F64),
            GgufValueType::Array => GgufValue::Array(self.array_value()?),
        })
    }

    fn array_value(&mut self) -> Result<GgufArray> {
        let item = self.value_type("array element type")?;
        let n = self.count("array length", item.min_encoded_size(), MAX_ARRAY_ELEMENTS)?;
        macro_rules! fixed {
            ($t:ty, $variant:ident) => {{
                const SIZE: usize = std::mem::size_of::<$t>();
                // `count` checked n * SIZE against the remaining bytes.
                let bytes = self.take(n * SIZE, "array")?;
                GgufArray::$variant(
                    bytes
                        .chunks_exact(SIZE)
                        .map(|b| {
                            let mut a = [0u8; SIZE];
                            a.copy_from_slice(b);
                            <$t>::from_le_bytes(a)
                        })
                        .collect(),
                )
            }};
        }
        Ok(match item {
            GgufValueType::U8 => GgufArray::U8(self.take(n, "array")?.to_vec()),
            GgufValueType::I8 => fixed!(i8, I8),
            GgufValueType::U16 => fixed!(u16, U16),
            GgufValueType::I16 => fixed!(i16, I16),
            GgufValueType::U32 => fixed!(u32, U32),
            GgufValueType::I32 => fixed!(i32, I32),
            GgufValueType::F32 => fixed!(f32, F32),
            GgufValueType::Bool => {
                GgufArray::Bool(self.take(n, "array")?.iter().map(|&b| b != 0).collect())
            }
            GgufValueType::U64 => fixed!(u64, U64),
            GgufValueType::I64 => fixed!(i64, I64),
            GgufValueType::F64 => fixed!(f64, F64),
            GgufValueType::String => {
                // Grown as strings actually parse: a string costs 24 bytes here for its 8-byte
                // length there, so reserving a claimed count up front could cost 3x the file.
                let mut items = Vec::with_capacity(n.min(INITIAL_CAPACITY));
                for _ in 0..n {
                    items.push(self.string_value("array string")?);
                }
                GgufArray::String(items)
            }
            GgufValueType::Array => {
                return Err(invalid(
                    "an array of arrays, which ggml's reader refuses (and so does this one)",
                ))
            }
        })
    }
}

/// What [`parse_header`] makes of the first bytes of a file.
#[derive(Debug)]
pub enum GgufHeader {
    /// The whole header, validated against the file's length.
    Parsed(GgufParts),
    /// The header runs past the bytes given: it needs at least this many.
    NeedBytes(usize),
}

/// Parse and validate the header of a GGUF file of `file_len` bytes from its first bytes
/// `prefix` (a file read piecewise, e.g. over HTTP): every check of [`GgufFile::parse`] that
/// the header alone decides, with tensor ranges checked against `file_len`.
pub fn parse_header(prefix: &[u8], file_len: u64) -> Result<GgufHeader> {
    let file_len = usize::try_from(file_len)
        .map_err(|_| invalid(format!("a file of {file_len} bytes cannot be addressed")))?;
    if prefix.len() > file_len {
        return Err(CoreError::invalid_argument(format!(
            "{} bytes given of a {file_len}-byte file",
            prefix.len()
        )));
    }
    let mut c = Cursor {
        bytes: prefix,
        file_len,
        pos: 0,
        wanted: None,
    };
    match parse_parts(&mut c) {
        Ok((parts, _)) => Ok(GgufHeader::Parsed(parts)),
        Err(e) => match c.wanted {
            Some(n) => Ok(GgufHeader::NeedBytes(n)),
            None => Err(e),
        },
    }
}

/// The header (all of [`GgufParts`]) and the tensor index, read through `c`.
fn parse_parts(c: &mut Cursor<'_>) -> Result<(GgufParts, HashMap<String, usize>)> {
    let file_len = c.file_len;
    let magic = c
        .take(4, "magic")
        .map_err(|_| invalid("not a GGUF file: shorter than its 4-byte magic"))?;
    if magic != GGUF_MAGIC {
        return Err(invalid(format!(
            "not a GGUF file: magic is {magic:02x?}, expected \"GGUF\""
        )));
    }
    let version = c.u32("version")?;
    if version != 2 && version != 3 {
        let hint = if version & 0xFFFF == 0 {
            " (a big-endian file?)"
        } else {
            ""
        };
        return Err(invalid(format!(
            "unsupported GGUF version {version}{hint}; versions 2 and 3 are read"
        )));
    }
    let n_tensors = c.u64("tensor count")?;
    let n_kv = c.u64("metadata count")?;
    let needed = n_tensors
        .checked_mul(MIN_TENSOR_INFO_BYTES)
        .zip(n_kv.checked_mul(MIN_KV_BYTES))
        .and_then(|(t, k)| t.checked_add(k));
    if !matches!(needed, Some(needed) if needed <= c.remaining() as u64) {
        return Err(invalid(format!(
            "{n_tensors} tensors and {n_kv} metadata entries cannot fit in the {} bytes \
                 that remain",
            c.remaining()
        )));
    }
    // Both fit in the file, hence in usize.
    let (n_tensors, n_kv) = (n_tensors as usize, n_kv as usize);

    let mut metadata: Vec<(String, GgufValue)> = Vec::with_capacity(n_kv.min(INITIAL_CAPACITY));
    let mut seen_keys = HashSet::new();
    for i in 0..n_kv {
        let key = c.name("metadata key")?;
        let shown = printable(&key);
        let in_key = |e: CoreError| invalid(format!("metadata '{shown}': {}", e.detail()));
        if key.is_empty() {
            return Err(invalid(format!("metadata key {i} is empty")));
        }
        if !seen_keys.insert(key.clone()) {
            return Err(invalid(format!("duplicate metadata key '{shown}'")));
        }
        let value = c
            .value_type("value type")
            .and_then(|ty| c.value(ty))
            .map_err(in_key)?;
        metadata.push((key, value));
    }

    let alignment = match metadata.iter().find(|(k, _)| k == keys::ALIGNMENT) {
        None => DEFAULT_ALIGNMENT,
        Some((_, GgufValue::U32(a))) => {
            let a = *a as usize;
            if !a.is_power_of_two() || a > MAX_ALIGNMENT {
                return Err(invalid(format!(
                    "{} is {a}; it must be a power of two of at most {MAX_ALIGNMENT}",
                    keys::ALIGNMENT
                )));
            }
            a
        }
        Some((_, other)) => {
            return Err(invalid(format!(
                "{} must be UINT32, found {}",
                keys::ALIGNMENT,
                other.value_type().name()
            )))
        }
    };

    let mut tensors = Vec::with_capacity(n_tensors.min(INITIAL_CAPACITY));
    let mut index = HashMap::new();
    for i in 0..n_tensors {
        let name = c.name("tensor name")?;
        if name.len() > MAX_TENSOR_NAME_BYTES {
            return Err(invalid(format!(
                "a name of {} bytes; ggml reads names of at most {MAX_TENSOR_NAME_BYTES}",
                name.len()
            ))
            .with_tensor(name));
        }
        if index.insert(name.clone(), i).is_some() {
            return Err(invalid("duplicate tensor name").with_tensor(name));
        }
        let info = read_tensor_info(c, &name, alignment).map_err(|e| e.with_tensor(&name))?;
        tensors.push(info);
    }

    // The data section starts at the next multiple of the alignment (ggml seeks there only
    // when there are tensors).
    let data_offset = if n_tensors > 0 {
        align_up(c.pos as u64, alignment as u64)
            .filter(|&o| o <= file_len as u64)
            .ok_or_else(|| {
                invalid(format!(
                    "data section (aligned to {alignment}) would start past the end of the \
                         {}-byte file",
                    file_len
                ))
            })? as usize
    } else {
        c.pos
    };
    for t in &tensors {
        let end = (data_offset as u64)
            .checked_add(t.offset)
            .and_then(|start| start.checked_add(t.byte_len as u64));
        if !matches!(end, Some(end) if end <= file_len as u64) {
            return Err(invalid(format!(
                "data at offset {} (+{} bytes after the data section start {data_offset}) \
                     runs past the end of the {}-byte file",
                t.offset, t.byte_len, file_len
            ))
            .with_tensor(&t.name));
        }
    }
    let mut by_offset: Vec<&GgufTensorInfo> = tensors.iter().filter(|t| t.byte_len > 0).collect();
    by_offset.sort_by_key(|t| t.offset);
    for pair in by_offset.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        // Both ends were checked to lie within the file, so this cannot overflow.
        if a.offset + a.byte_len as u64 > b.offset {
            return Err(invalid(format!(
                "data [{}, {}) overlaps tensor '{}' at [{}, {})",
                b.offset,
                b.offset + b.byte_len as u64,
                printable(&a.name),
                a.offset,
                a.offset + a.byte_len as u64
            ))
            .with_tensor(&b.name));
        }
    }

    Ok((
        GgufParts {
            version,
            alignment,
            data_offset,
            metadata,
            tensors,
        },
        index,
    ))
}

impl<'a> GgufFile<'a> {
    /// Parse and validate a whole GGUF file.
    pub fn parse(bytes: &'a [u8]) -> Result<GgufFile<'a>> {
        let mut c = Cursor {
            bytes,
            file_len: bytes.len(),
            pos: 0,
            wanted: None,
        };
        let (parts, index) = parse_parts(&mut c)?;
        Ok(GgufFile {
            bytes,
            version: parts.version,
            alignment: parts.alignment,
            data_offset: parts.data_offset,
            metadata: parts.metadata,
            tensors: parts.tensors,
            index,
        })
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    /// The alignment of the data section and of each tensor's offset.
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// Byte offset of the data section in the file.
    pub fn data_offset(&self) -> usize {
        self.data_offset
    }

    /// Every key-value pair, in file order.
    pub fn metadata(&self) -> &[(String, GgufValue)] {
        &self.metadata
    }

    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// `general.architecture`, when present and a string.
    pub fn architecture(&self) -> Option<&str> {
        self.get(keys::ARCHITECTURE).and_then(GgufValue::as_str)
    }

    /// Every tensor, in file order.
    pub fn tensors(&self) -> &[GgufTensorInfo] {
        &self.tensors
    }

    pub fn tensor_info(&self, name: &str) -> Option<&GgufTensorInfo> {
        self.index.get(name).and_then(|&i| self.tensors.get(i))
    }

    fn info_or_not_found(&self, name: &str) -> Result<&GgufTensorInfo> {
        self.tensor_info(name)
            .ok_or_else(|| CoreError::not_found("no such tensor in the file").with_tensor(name))
    }

    fn raw_of(&self, info: &GgufTensorInfo) -> &'a [u8] {
        // The range was checked against the file length at parse time.
        let start = self.data_offset + info.offset as usize;
        self.bytes.get(start..start + info.byte_len).unwrap_or(&[])
    }

    /// The tensor's stored bytes, whatever its type.
    pub fn raw(&self, name: &str) -> Result<&'a [u8]> {
        self.info_or_not_found(name).map(|info| self.raw_of(info))
    }

    /// The tensor decoded: F16, BF16 and every block type we decode (see
    /// [`crate::codecs`]) become owned F32, bit-exact with gguf-py's `dequantize`; F32, F64
    /// and the integer types are borrowed as they are. Types without a decoder are
    /// ERR_UNSUPPORTED_DTYPE (their bytes are available through [`GgufFile::raw`]).
    pub fn tensor(&self, name: &str) -> Result<TensorView<'a>> {
        let info = self.info_or_not_found(name)?;
        let raw = self.raw_of(info);
        let ty = info.ggml_type;
        let codec = ty.codec();
        match (codec.native, codec.decode) {
            (Some(DType::F32), _) | (Some(_), None) => {
                let dtype = codec.native.unwrap_or(DType::F32);
                TensorView::new(name, dtype, info.shape.clone(), raw)
            }
            (_, Some(_)) => {
                let data =
                    crate::buffer::f32_bytes(info.numel(), &|out| codecs::decode(ty, raw, out))
                        .map_err(|e| e.with_tensor(name))?;
                TensorView::new(name, DType::F32, info.shape.clone(), data)
            }
            (None, None) => Err(CoreError::unsupported_dtype(format!(
                "GGUF type {ty} cannot be decoded; read its raw bytes instead"
            ))
            .with_tensor(name)),
        }
    }

    /// The parsed header, without the bytes it was read from (for a reader that owns them).
    pub fn into_parts(self) -> GgufParts {
        GgufParts {
            version: self.version,
            alignment: self.alignment,
            data_offset: self.data_offset,
            metadata: self.metadata,
            tensors: self.tensors,
        }
    }
}

/// What [`GgufFile::parse`] found, owned: the tensors' data lie at `data_offset + offset`.
#[derive(Debug, Clone)]
pub struct GgufParts {
    pub version: u32,
    pub alignment: usize,
    pub data_offset: usize,
    pub metadata: Vec<(String, GgufValue)>,
    pub tensors: Vec<GgufTensorInfo>,
}

fn read_tensor_info(c: &mut Cursor<'_>, name: &str, alignment: usize) -> Result<GgufTensorInfo> {
    let n_dims = c.u32("dimension count")? as usize;
    if n_dims > MAX_DIMS {
        return Err(invalid(format!(
            "{n_dims} dimensions; at most {MAX_DIMS} are allowed"
        )));
    }
    let mut ne = Vec::with_capacity(n_dims);
    for j in 0..n_dims {
        let d = c.u64("dimension")?;
        // ggml stores dimensions as int64: the top bit set means negative.
        if d > i64::MAX as u64 {
            return Err(invalid(format!("dimension {j} is {} (negative)", d as i64)));
        }
        ne.push(d);
    }
    // The product of the non-zero dimensions must fit, so that the element count is the
    // same (and never overflows) whichever order a reader multiplies them in: a zero-size
    // tensor with huge other dimensions is refused rather than served to some and not others.
    let nonzero = ne
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= i64::MAX as u64)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| invalid(format!("shape (ne) {ne:?} has too many elements")))?;
    let numel = if ne.contains(&0) { 0 } else { nonzero };
    let type_id = c.u32("tensor type")?;
    let ggml_type = GgmlType::from_id(type_id)
        .ok_or_else(|| invalid(format!("unknown ggml type {type_id}")))?;
    let row = ne.first().copied().unwrap_or(1);
    if !row.is_multiple_of(ggml_type.block_size() as u64) {
        return Err(invalid(format!(
            "rows of {row} elements are not a whole number of {ggml_type} blocks of {}",
            ggml_type.block_size()
        )));
    }
    let byte_len = ggml_type
        .byte_len(numel)
        .ok_or_else(|| invalid(format!("{numel} elements of {ggml_type} overflow the size")))?;
    let offset = c.u64("tensor offset")?;
    if !offset.is_multiple_of(alignment as u64) {
        return Err(invalid(format!(
            "offset {offset} is not a multiple of the alignment {alignment}"
        )));
    }
    Ok(GgufTensorInfo {
        name: name.to_string(),
        ggml_type,
        // Dimensions fit in usize: their product does.
        shape: ne.iter().rev().map(|&d| d as usize).collect(),
        offset,
        byte_len,
    })
}
