//! The header: parsing the JSON (strictly, as the reference does), validating offsets,
//! sizes and coverage, and the problems `validate` reports.

#[cfg(feature = "fs")]
use super::storage::read_up_to;
use crate::dtype::DType;
use crate::error::{CoreError, Result};
#[cfg(feature = "fs")]
use crate::fsutil;
use crate::source::{SourceTensor, TensorList};
use crate::tensor::checked_numel;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
#[cfg(feature = "fs")]
use std::os::unix::fs::FileExt;
#[cfg(feature = "fs")]
use std::path::Path;

/// The reference's limit on the JSON header.
pub const MAX_HEADER_SIZE: usize = 100_000_000;
pub(super) const N_LEN: usize = 8;

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
    tensors: TensorList,
    /// `data_offsets` of each tensor, in the same order.
    offsets: Vec<(usize, usize)>,
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
        let offsets = tensors.iter().map(|t| t.data_offsets).collect();
        let tensors = TensorList::new(
            tensors
                .into_iter()
                .map(|t| SourceTensor {
                    stored: Cow::Borrowed(t.dtype.name()),
                    stored_len: (t.data_offsets.1 - t.data_offsets.0) as u64,
                    name: t.name,
                    dtype: t.dtype,
                    shape: t.shape,
                })
                .collect(),
            // Refused above, with the reference's message.
            |name| CoreError::invalid_header(format!("duplicate entry '{name}' in header")),
        )?;
        Ok(Header {
            metadata,
            tensors,
            offsets,
            json_len,
        })
    }

    pub fn metadata(&self) -> Option<&BTreeMap<String, String>> {
        self.metadata.as_ref()
    }
    /// Tensors in data-offset order.
    pub fn tensors(&self) -> &[SourceTensor] {
        self.tensors.as_slice()
    }
    pub fn get(&self, name: &str) -> Option<&SourceTensor> {
        self.tensors.get(name)
    }
    /// The tensors with their name index.
    pub fn list(&self) -> &TensorList {
        &self.tensors
    }
    /// Where the tensor called `name` lives in the file.
    pub fn info(&self, name: &str) -> Option<TensorInfo> {
        let i = self.tensors.position(name)?;
        let t = &self.tensors.as_slice()[i];
        Some(TensorInfo {
            name: t.name.clone(),
            dtype: t.dtype,
            shape: t.shape.clone(),
            data_offsets: self.offsets[i],
        })
    }
    /// Offset of the data section from the start of the file.
    pub fn data_start(&self) -> usize {
        N_LEN + self.json_len
    }
    pub fn data_len(&self) -> usize {
        self.offsets.last().map_or(0, |o| o.1)
    }
    pub fn num_parameters(&self) -> u64 {
        self.tensors().iter().map(|t| t.numel() as u64).sum()
    }
}

#[cfg(feature = "fs")]
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
