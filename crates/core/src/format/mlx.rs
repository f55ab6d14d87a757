//! `weights.mlx`: MLX-Node's JSON fallback format, read and written without ever holding the
//! whole document as a JSON tree.
//!
//! ```json
//! {"version": "1.0",
//!  "metadata": {"format": "mlx"},
//!  "weights": {"w": {"shape": [2, 2], "dtype": "float32", "data": [1, 2.5, -0.0, "NaN"]}}}
//! ```
//!
//! Reading rules (every violation is ERR_INVALID_MLX, naming the tensor when one is concerned):
//!
//! - The document is an object with a `weights` object; `version` (string or number) is
//!   optional, a `metadata` object is kept (string values as they are, numbers and booleans as
//!   their JSON text; nulls, arrays and objects inside it are skipped), any other top-level key
//!   (`config`, ...) is ignored.
//! - Each entry has `shape` (non-negative integers), `dtype` and `data` (numbers, row-major),
//!   in any order; other entry keys are ignored. `dtype` is `"float32"`, `"float16"`,
//!   `"bfloat16"`, `"int32"`, `"uint32"` or MLX-Node's integer code 0 F32, 1 I32, 2 F16,
//!   3 BF16, 4 U32.
//! - JSON has no NaN or infinities, so `data` also accepts the strings `"NaN"`, `"Infinity"`
//!   and `"-Infinity"` (float dtypes only). `null` (what `JSON.stringify` makes of NaN) is
//!   rejected like any other non-number.
//! - Numbers are rounded to the entry's dtype once, to nearest even, from the decimal text's
//!   f64 (integers beyond 2^53 go through a round-to-odd f64 so that no double rounding
//!   occurs); int32/uint32 data must be integers in range.
//! - A file whose entries all lack `data`, or that has no `weights` key, is MLX-Node's
//!   metadata file: the error says the weights are stored elsewhere.
//! - Files over [`DEFAULT_MAX_MLX_FILE_BYTES`] (16 GiB; see [`MlxReadOptions`]) are refused.
//!
//! Memory: the file streams through serde_json's `Deserializer` with hand-written visitors;
//! each `data` number is encoded into its tensor's byte buffer as it is read, so a parse costs
//! about the decoded tensor bytes (4 bytes per float32 number) plus a 256 KiB read buffer. When
//! `data` comes before `dtype` in an entry, its numbers wait as f64 (8 bytes each) until the
//! entry ends. Capacity hints from `shape` are capped by what the input could hold, so a
//! lying shape cannot make the reader allocate more than a small multiple of the file size.
//!
//! Writing streams too, number by number through a buffered writer. Floats are printed in the
//! shortest form that reads back to the same stored value (half-precision values as their
//! exact f32 value), `-0.0` keeps its sign, NaN and infinities become the strings above (NaN
//! payloads and sign are not kept: every NaN reads back as the canonical quiet NaN).

use crate::cast;
use crate::dtype::DType;
use crate::error::{CoreError, ErrorKind, Result};
use crate::fsutil;
use crate::tensor::{checked_numel, TensorView};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::cell::Cell;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

/// The largest file [`read_mlx`] accepts by default: 16 GiB of JSON decodes to at most a few
/// GiB of tensors, beyond what an in-memory fallback format is meant for.
pub const DEFAULT_MAX_MLX_FILE_BYTES: u64 = 16 << 30;

/// The `version` [`write_mlx`] writes.
pub const MLX_WRITE_VERSION: &str = "1.0";

/// Bytes read between two progress reports while a file is parsed.
const PROGRESS_STEP_BYTES: u64 = 16 << 20;

/// Read buffer of the streaming parser.
const READ_BUFFER_BYTES: usize = 256 << 10;

/// Numbers collected as f64 before they are encoded into the tensor's dtype in one batch.
const ENCODE_BATCH: usize = 8192;

/// Shared ending of the "this file holds no weights" messages.
const WEIGHTS_ELSEWHERE: &str =
    "the weights themselves are stored elsewhere — look for a .safetensors file beside it";

/// The contents of a `weights.mlx` file.
#[derive(Debug, Clone, PartialEq)]
pub struct MlxWeights {
    pub version: Option<String>,
    /// The top-level `metadata` object, if the file has one.
    pub metadata: Option<BTreeMap<String, String>>,
    /// The tensors, in file order, with owned little-endian bytes.
    pub tensors: Vec<TensorView<'static>>,
}

/// Limits of [`read_mlx_with_options`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MlxReadOptions {
    /// Files larger than this are refused with ERR_INVALID_MLX.
    pub max_file_bytes: u64,
}

impl Default for MlxReadOptions {
    fn default() -> Self {
        MlxReadOptions {
            max_file_bytes: DEFAULT_MAX_MLX_FILE_BYTES,
        }
    }
}

/// Read a `weights.mlx` file. Errors carry the path.
pub fn read_mlx(path: &Path) -> Result<MlxWeights> {
    read_mlx_with_options(path, &MlxReadOptions::default(), &mut |_, _| {})
}

/// [`read_mlx`], reporting `(bytes parsed, file size)` at the start, every 16 MiB and at the
/// end of a successful parse.
pub fn read_mlx_with_progress(
    path: &Path,
    on_progress: &mut dyn FnMut(u64, u64),
) -> Result<MlxWeights> {
    read_mlx_with_options(path, &MlxReadOptions::default(), on_progress)
}

/// [`read_mlx_with_progress`] with explicit limits.
pub fn read_mlx_with_options(
    path: &Path,
    options: &MlxReadOptions,
    on_progress: &mut dyn FnMut(u64, u64),
) -> Result<MlxWeights> {
    let (file, meta) = fsutil::open_regular(path, "an MLX weights file")?;
    let total = meta.len();
    let too_large = || {
        CoreError::invalid_mlx(format!(
            "the file is larger than the {} bytes an MLX weights file may have",
            options.max_file_bytes
        ))
        .with_path(path)
    };
    if total > options.max_file_bytes {
        return Err(too_large());
    }
    on_progress(0, total);
    // Set by the reader if the file grew past the limit after the size check.
    let over_limit = Cell::new(false);
    let weights = {
        let counting = CountingReader {
            inner: file,
            bytes_read: 0,
            total,
            max_bytes: options.max_file_bytes,
            next_report: PROGRESS_STEP_BYTES,
            over_limit: &over_limit,
            on_progress: &mut *on_progress,
        };
        let reader = BufReader::with_capacity(READ_BUFFER_BYTES, counting);
        let mut de = serde_json::Deserializer::from_reader(reader);
        decode(&mut de, max_numbers_in(total), |e| {
            if over_limit.get() {
                too_large()
            } else if e.classify() == serde_json::error::Category::Io {
                CoreError::io(io::Error::from(e), path)
            } else {
                json_error(e)
            }
        })
        .map_err(|e| e.with_path(path))?
    };
    on_progress(total, total);
    Ok(weights)
}

/// Parse `weights.mlx` bytes already in memory (no size limit: the bytes are already here).
pub fn parse_mlx(bytes: &[u8]) -> Result<MlxWeights> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    decode(&mut de, max_numbers_in(bytes.len() as u64), json_error)
}

/// Write `tensors` (float32, float16, bfloat16, int32 or uint32) as a `weights.mlx` document,
/// version [`MLX_WRITE_VERSION`]. Every tensor is checked before the first byte is written.
pub fn write_mlx(
    out: &mut dyn Write,
    tensors: &[TensorView<'_>],
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<()> {
    let mut names = HashSet::with_capacity(tensors.len());
    for tensor in tensors {
        if MlxDtype::of(tensor.dtype).is_none() {
            return Err(CoreError::unsupported_dtype(format!(
                "MLX weights hold float32, float16, bfloat16, int32 or uint32, not {}; \
                 convert the tensor first",
                tensor.dtype
            ))
            .with_tensor(&tensor.name));
        }
        let expected = checked_numel(&tensor.shape).and_then(|n| tensor.dtype.byte_len(n));
        if expected != Some(tensor.data.len()) {
            return Err(CoreError::invalid_argument(format!(
                "shape {:?} of {} does not match its {} data bytes",
                tensor.shape,
                tensor.dtype,
                tensor.data.len()
            ))
            .with_tensor(&tensor.name));
        }
        if !names.insert(tensor.name.as_str()) {
            return Err(
                CoreError::invalid_argument("duplicate tensor name").with_tensor(&tensor.name)
            );
        }
    }
    let mut writer = BufWriter::with_capacity(1 << 16, out);
    write_document(&mut writer, tensors, metadata)
        .and_then(|()| writer.flush())
        .map_err(|e| CoreError::new(ErrorKind::Io, format!("writing MLX weights failed: {e}")))
}

/// Write a `weights.mlx` file atomically (see [`fsutil::write_atomic`]).
pub fn save_mlx(
    path: &Path,
    tensors: &[TensorView<'_>],
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<()> {
    save_mlx_with(path, fsutil::Durability::default(), tensors, metadata)
}

/// [`save_mlx`] with the [`fsutil::Durability`] asked for.
pub fn save_mlx_with(
    path: &Path,
    durability: fsutil::Durability,
    tensors: &[TensorView<'_>],
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<()> {
    fsutil::write_atomic_with(path, durability, |out| write_mlx(out, tensors, metadata))
        .map_err(|e| e.with_path(path))
}

// ---------------------------------------------------------------------------------------
// Dtypes.

/// The element types MLX weights files hold, with their names and MLX-Node codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MlxDtype {
    dtype: DType,
    name: &'static str,
    code: u64,
}

const MLX_DTYPES: [MlxDtype; 5] = [
    MlxDtype {
        dtype: DType::F32,
        name: "float32",
        code: 0,
    },
    MlxDtype {
        dtype: DType::I32,
        name: "int32",
        code: 1,
    },
    MlxDtype {
        dtype: DType::F16,
        name: "float16",
        code: 2,
    },
    MlxDtype {
        dtype: DType::BF16,
        name: "bfloat16",
        code: 3,
    },
    MlxDtype {
        dtype: DType::U32,
        name: "uint32",
        code: 4,
    },
];

impl MlxDtype {
    fn of(dtype: DType) -> Option<MlxDtype> {
        MLX_DTYPES.into_iter().find(|d| d.dtype == dtype)
    }
    fn named(name: &str) -> Option<MlxDtype> {
        MLX_DTYPES.into_iter().find(|d| d.name == name)
    }
    fn coded(code: u64) -> Option<MlxDtype> {
        MLX_DTYPES.into_iter().find(|d| d.code == code)
    }
}

// ---------------------------------------------------------------------------------------
// Reading: the driver.

/// Upper bound on how many numbers `len` bytes of JSON can hold (each needs a digit and a
/// comma, but the last), used to cap capacity hints taken from untrusted shapes.
fn max_numbers_in(len: u64) -> usize {
    usize::try_from(len / 2 + 1).unwrap_or(usize::MAX)
}

fn json_error(e: serde_json::Error) -> CoreError {
    use serde_json::error::Category;
    match e.classify() {
        Category::Syntax | Category::Eof => CoreError::invalid_mlx(format!("not valid JSON: {e}")),
        Category::Data | Category::Io => CoreError::invalid_mlx(e.to_string()),
    }
}

/// Everything the visitors accumulate while the document streams by.
struct ParseState {
    max_numbers: usize,
    /// The entry being parsed, so that an error can name it.
    current_tensor: Option<String>,
    tensors: Vec<TensorView<'static>>,
    names: HashSet<String>,
    /// The first entry that has shape and dtype but no `data`, and how many there are.
    first_dataless: Option<String>,
    dataless_count: usize,
}

/// The top-level fields other than the tensors (which go to [`ParseState::tensors`]).
struct TopLevel {
    version: Option<String>,
    metadata: Option<BTreeMap<String, String>>,
    has_weights: bool,
}

fn decode<'de, R: serde_json::de::Read<'de>>(
    de: &mut serde_json::Deserializer<R>,
    max_numbers: usize,
    map_json_error: impl Fn(serde_json::Error) -> CoreError,
) -> Result<MlxWeights> {
    let mut state = ParseState {
        max_numbers,
        current_tensor: None,
        tensors: Vec::new(),
        names: HashSet::new(),
        first_dataless: None,
        dataless_count: 0,
    };
    let parsed = TopLevelSeed { state: &mut state }
        .deserialize(&mut *de)
        .and_then(|top| de.end().map(|()| top));
    let top = match parsed {
        Ok(top) => top,
        Err(e) => {
            let err = map_json_error(e);
            return Err(match state.current_tensor.take() {
                Some(name) => err.with_tensor(name),
                None => err,
            });
        }
    };
    if !top.has_weights {
        return Err(CoreError::invalid_mlx(format!(
            "weights.mlx has no \"weights\" object, so it holds only metadata: {WEIGHTS_ELSEWHERE}"
        )));
    }
    if state.tensors.is_empty() && state.dataless_count > 0 {
        return Err(CoreError::invalid_mlx(format!(
            "weights.mlx holds only metadata (no \"data\" arrays): {WEIGHTS_ELSEWHERE}"
        )));
    }
    Ok(MlxWeights {
        version: top.version,
        metadata: top.metadata,
        tensors: state.tensors,
    })
}

/// Counts the bytes read for progress reports and the size limit.
struct CountingReader<'p, R> {
    inner: R,
    bytes_read: u64,
    total: u64,
    max_bytes: u64,
    next_report: u64,
    over_limit: &'p Cell<bool>,
    on_progress: &'p mut dyn FnMut(u64, u64),
}

impl<R: Read> Read for CountingReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes_read += n as u64;
        if self.bytes_read > self.max_bytes {
            self.over_limit.set(true);
            return Err(io::Error::other("file exceeds the size limit"));
        }
        if self.bytes_read >= self.next_report {
            (self.on_progress)(self.bytes_read.min(self.total), self.total);
            self.next_report = self.bytes_read + PROGRESS_STEP_BYTES;
        }
        Ok(n)
    }
}

// ---------------------------------------------------------------------------------------
// Reading: keys.

/// Deserialize a map key as one of `names` (its index) or `None` for any other key, without
/// allocating it.
struct KeyVisitor(&'static [&'static str]);

impl Visitor<'_> for KeyVisitor {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().position(|&name| name == key))
    }
}

const TOP_KEYS: &[&str] = &["version", "metadata", "weights"];
const ENTRY_KEYS: &[&str] = &["shape", "dtype", "data"];

macro_rules! key_enum {
    ($name:ident, $names:expr, [$($variant:ident),*]) => {
        #[derive(Clone, Copy, PartialEq, Eq)]
        enum $name { $($variant,)* Other }
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                const VARIANTS: &[$name] = &[$($name::$variant),*];
                let index = d.deserialize_identifier(KeyVisitor($names))?;
                Ok(index.and_then(|i| VARIANTS.get(i).copied()).unwrap_or($name::Other))
            }
        }
    };
}
key_enum!(TopKey, TOP_KEYS, [Version, Metadata, Weights]);
key_enum!(EntryKey, ENTRY_KEYS, [Shape, Dtype, Data]);

fn duplicate_key<E: de::Error>(key: &str) -> E {
    E::custom(format!("duplicate key \"{key}\""))
}

// ---------------------------------------------------------------------------------------
// Reading: the document and its top-level fields.

struct TopLevelSeed<'s> {
    state: &'s mut ParseState,
}

impl<'de> DeserializeSeed<'de> for TopLevelSeed<'_> {
    type Value = TopLevel;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<TopLevel, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for TopLevelSeed<'_> {
    type Value = TopLevel;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object with a \"weights\" object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopLevel, A::Error> {
        let mut top = TopLevel {
            version: None,
            metadata: None,
            has_weights: false,
        };
        let (mut seen_version, mut seen_metadata) = (false, false);
        while let Some(key) = map.next_key::<TopKey>()? {
            match key {
                TopKey::Version => {
                    if std::mem::replace(&mut seen_version, true) {
                        return Err(duplicate_key("version"));
                    }
                    top.version = map.next_value_seed(VersionSeed)?;
                }
                TopKey::Metadata => {
                    if std::mem::replace(&mut seen_metadata, true) {
                        return Err(duplicate_key("metadata"));
                    }
                    top.metadata = map.next_value_seed(MetadataSeed)?;
                }
                TopKey::Weights => {
                    if std::mem::replace(&mut top.has_weights, true) {
                        return Err(duplicate_key("weights"));
                    }
                    map.next_value_seed(WeightsSeed {
                        state: &mut *self.state,
                    })?;
                }
                TopKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(top)
    }
}

/// `version`: a string or a number (kept as its text); `null` counts as absent.
struct VersionSeed;

impl<'de> DeserializeSeed<'de> for VersionSeed {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl Visitor<'_> for VersionSeed {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"version\" as a string or a number")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// `metadata`: an object whose scalar values are kept as text. Anything else in its place is
/// not metadata this reader understands, and is skipped rather than refused.
struct MetadataSeed;

impl<'de> DeserializeSeed<'de> for MetadataSeed {
    type Value = Option<BTreeMap<String, String>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MetadataSeed {
    type Value = Option<BTreeMap<String, String>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a \"metadata\" object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut metadata = BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            if let Some(value) = map.next_value_seed(MetadataValueSeed)? {
                metadata.insert(key, value);
            }
        }
        Ok(Some(metadata))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// One metadata value: strings as they are, numbers and booleans as their JSON text,
/// `None` (skipped) for null, arrays and objects.
struct MetadataValueSeed;

impl<'de> DeserializeSeed<'de> for MetadataValueSeed {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MetadataValueSeed {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a metadata value")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

// ---------------------------------------------------------------------------------------
// Reading: `weights` and its entries.

struct WeightsSeed<'s> {
    state: &'s mut ParseState,
}

impl<'de> DeserializeSeed<'de> for WeightsSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for WeightsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"weights\" as an object mapping tensor names to entries")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let state = self.state;
        while let Some(name) = map.next_key::<String>()? {
            state.current_tensor = Some(name.clone());
            if state.names.contains(&name) {
                return Err(de::Error::custom("duplicate tensor name"));
            }
            let entry = map.next_value_seed(EntrySeed {
                max_numbers: state.max_numbers,
            })?;
            match entry {
                Entry::Tensor(shape, dtype, bytes) => {
                    if let Some(first) = &state.first_dataless {
                        state.current_tensor = Some(first.clone());
                        return Err(missing_data());
                    }
                    let view = TensorView::new(name.clone(), dtype, shape, bytes)
                        .map_err(|e| de::Error::custom(e.detail()))?;
                    state.tensors.push(view);
                }
                Entry::Dataless => {
                    if !state.tensors.is_empty() {
                        return Err(missing_data());
                    }
                    state.first_dataless.get_or_insert_with(|| name.clone());
                    state.dataless_count += 1;
                }
            }
            state.names.insert(name);
            state.current_tensor = None;
        }
        Ok(())
    }
}

/// Some entries have `data` and this one has not: a broken file, not a metadata file.
fn missing_data<E: de::Error>() -> E {
    E::custom("missing field \"data\" (other tensors of this file have theirs)")
}

/// A parsed entry: a tensor, or shape and dtype without `data` (a metadata file's entry).
enum Entry {
    Tensor(Vec<usize>, DType, Vec<u8>),
    Dataless,
}

struct EntrySeed {
    max_numbers: usize,
}

impl<'de> DeserializeSeed<'de> for EntrySeed {
    type Value = Entry;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Entry, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EntrySeed {
    type Value = Entry;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object with \"shape\", \"dtype\" and \"data\"")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry, A::Error> {
        let mut shape: Option<Vec<usize>> = None;
        let mut dtype: Option<DType> = None;
        let mut data: Option<ElementSink> = None;
        while let Some(key) = map.next_key::<EntryKey>()? {
            match key {
                EntryKey::Shape => {
                    if shape.is_some() {
                        return Err(duplicate_key("shape"));
                    }
                    shape = Some(map.next_value_seed(ShapeSeed)?);
                }
                EntryKey::Dtype => {
                    if dtype.is_some() {
                        return Err(duplicate_key("dtype"));
                    }
                    dtype = Some(map.next_value_seed(DtypeSeed)?);
                }
                EntryKey::Data => {
                    if data.is_some() {
                        return Err(duplicate_key("data"));
                    }
                    data = Some(map.next_value_seed(DataSeed {
                        dtype,
                        shape: shape.as_deref(),
                        max_numbers: self.max_numbers,
                    })?);
                }
                EntryKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let shape = shape.ok_or_else(|| de::Error::missing_field("shape"))?;
        let dtype = dtype.ok_or_else(|| de::Error::missing_field("dtype"))?;
        let Some(sink) = data else {
            return Ok(Entry::Dataless);
        };
        let numel = checked_numel(&shape).ok_or_else(|| {
            de::Error::custom(format!(
                "shape {shape:?} has more elements than fit in memory"
            ))
        })?;
        if sink.count != numel {
            return Err(de::Error::custom(format!(
                "shape {shape:?} holds {numel} elements but \"data\" has {} numbers",
                sink.count
            )));
        }
        let bytes = sink.finish(dtype).map_err(de::Error::custom)?;
        Ok(Entry::Tensor(shape, dtype, bytes))
    }
}

/// `shape`: an array of non-negative integers.
struct ShapeSeed;

impl<'de> DeserializeSeed<'de> for ShapeSeed {
    type Value = Vec<usize>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<usize>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ShapeSeed {
    type Value = Vec<usize>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"shape\" as an array of non-negative integers")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<usize>, A::Error> {
        let mut shape = Vec::new();
        while let Some(dim) = seq.next_element_seed(DimSeed)? {
            shape.push(dim);
        }
        Ok(shape)
    }
}

/// One `shape` entry. JavaScript writes numbers without an integer/float distinction, so an
/// integral float such as `2.0` is accepted as 2.
struct DimSeed;

impl<'de> DeserializeSeed<'de> for DimSeed {
    type Value = usize;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_any(self)
    }
}

impl Visitor<'_> for DimSeed {
    type Value = usize;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a non-negative integer shape entry")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<usize, E> {
        usize::try_from(v).map_err(|_| E::custom(format!("shape entry {v} is too large")))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<usize, E> {
        u64::try_from(v)
            .map_err(|_| E::custom(format!("shape entry {v} is negative")))
            .and_then(|v| self.visit_u64(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<usize, E> {
        // 2^53: beyond it a float no longer stands for one integer.
        if v.fract() == 0.0 && (0.0..=9007199254740992.0).contains(&v) {
            self.visit_u64(v as u64)
        } else {
            Err(E::custom(format!(
                "shape entry {v} is not a non-negative integer"
            )))
        }
    }
}

/// `dtype`: a name or an MLX-Node integer code.
struct DtypeSeed;

impl<'de> DeserializeSeed<'de> for DtypeSeed {
    type Value = DType;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<DType, D::Error> {
        d.deserialize_any(self)
    }
}

const DTYPE_CHOICES: &str =
    "float32, float16, bfloat16, int32, uint32, or the codes 0 (float32), 1 (int32), \
     2 (float16), 3 (bfloat16), 4 (uint32)";

impl Visitor<'_> for DtypeSeed {
    type Value = DType;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a dtype: {DTYPE_CHOICES}")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<DType, E> {
        MlxDtype::named(v)
            .map(|d| d.dtype)
            .ok_or_else(|| E::custom(format!("unknown dtype \"{v}\"; expected {DTYPE_CHOICES}")))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<DType, E> {
        MlxDtype::coded(v)
            .map(|d| d.dtype)
            .ok_or_else(|| E::custom(format!("unknown dtype code {v}; expected {DTYPE_CHOICES}")))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<DType, E> {
        Err(E::custom(format!(
            "unknown dtype code {v}; expected {DTYPE_CHOICES}"
        )))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<DType, E> {
        Err(E::custom(format!(
            "unknown dtype code {v}; expected {DTYPE_CHOICES}"
        )))
    }
}

/// `data`: numbers streamed straight into an [`ElementSink`].
struct DataSeed<'a> {
    /// The entry's dtype if it came before `data`.
    dtype: Option<DType>,
    /// The entry's shape if it came before `data`.
    shape: Option<&'a [usize]>,
    max_numbers: usize,
}

impl<'de> DeserializeSeed<'de> for DataSeed<'_> {
    type Value = ElementSink;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<ElementSink, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for DataSeed<'_> {
    type Value = ElementSink;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"data\" as an array of numbers")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ElementSink, A::Error> {
        let numel = self.shape.and_then(checked_numel);
        // Trust the shape for a capacity hint only as far as the input could back it.
        let reserve = numel.map_or(0, |n| n.min(self.max_numbers));
        let mut sink = ElementSink::new(self.dtype, reserve);
        while let Some(value) = seq.next_element_seed(NumberSeed)? {
            if let (Some(numel), Some(shape)) = (numel, self.shape) {
                if sink.count == numel {
                    // Stop at once rather than buffer the rest of an oversized array.
                    return Err(de::Error::custom(format!(
                        "\"data\" has more numbers than the {numel} elements of shape {shape:?}"
                    )));
                }
            }
            sink.push(value).map_err(de::Error::custom)?;
        }
        Ok(sink)
    }
}

/// One `data` element as an f64 that rounds to the correct value of any MLX dtype.
struct NumberSeed;

impl<'de> DeserializeSeed<'de> for NumberSeed {
    type Value = f64;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<f64, D::Error> {
        d.deserialize_any(self)
    }
}

impl Visitor<'_> for NumberSeed {
    type Value = f64;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number, or one of the strings \"NaN\", \"Infinity\", \"-Infinity\"")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
        Ok(integer_to_f64_round_to_odd(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
        let magnitude = integer_to_f64_round_to_odd(v.unsigned_abs());
        Ok(if v < 0 { -magnitude } else { magnitude })
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
        match v {
            "NaN" => Ok(f64::NAN),
            "Infinity" => Ok(f64::INFINITY),
            "-Infinity" => Ok(f64::NEG_INFINITY),
            _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
        }
    }
}

/// An integer as an f64, exact up to 2^53 and rounded to odd beyond: the sticky last bit
/// keeps the later rounding to f32/f16/bf16 (all at least two bits narrower) correct, where
/// a round-to-nearest here could round twice.
fn integer_to_f64_round_to_odd(magnitude: u64) -> f64 {
    const EXACT_LIMIT: u64 = 1 << 53;
    if magnitude <= EXACT_LIMIT {
        return magnitude as f64;
    }
    // 1..=11 low bits do not fit the 53-bit significand.
    let dropped_bits = 64 - magnitude.leading_zeros() - 53;
    let kept = magnitude >> dropped_bits;
    let sticky = u64::from(magnitude & ((1u64 << dropped_bits) - 1) != 0);
    // Both factors and the product are exact in f64.
    (kept | sticky) as f64 * (1u64 << dropped_bits) as f64
}

/// The bytes of one tensor, encoded as its numbers arrive. Numbers wait as f64 in `pending`:
/// in batches when the dtype is known, all of them when `data` came before `dtype`.
struct ElementSink {
    dtype: Option<DType>,
    encoded: Vec<u8>,
    pending: Vec<f64>,
    /// Numbers received (encoded and pending).
    count: usize,
}

impl ElementSink {
    fn new(dtype: Option<DType>, reserve_numbers: usize) -> Self {
        let (encoded, pending) = match dtype {
            Some(dtype) => (
                Vec::with_capacity(reserve_numbers.saturating_mul(dtype.size().unwrap_or(1))),
                Vec::with_capacity(reserve_numbers.min(ENCODE_BATCH)),
            ),
            None => (Vec::new(), Vec::with_capacity(reserve_numbers)),
        };
        ElementSink {
            dtype,
            encoded,
            pending,
            count: 0,
        }
    }

    fn push(&mut self, value: f64) -> Result<(), String> {
        self.pending.push(value);
        self.count += 1;
        if self.dtype.is_some() && self.pending.len() >= ENCODE_BATCH {
            self.encode_pending()?;
        }
        Ok(())
    }

    fn encode_pending(&mut self) -> Result<(), String> {
        let Some(dtype) = self.dtype else {
            return Ok(());
        };
        if self.pending.is_empty() {
            return Ok(());
        }
        let first_index = self.count - self.pending.len();
        check_integers(dtype, &self.pending, first_index)?;
        let bytes = cast::encode_f64(&self.pending, dtype).map_err(|e| e.detail().to_string())?;
        if self.encoded.capacity() == 0 {
            // All of `data` came before the dtype: take the batch's buffer as it is.
            self.encoded = bytes;
        } else {
            self.encoded.extend_from_slice(&bytes);
        }
        self.pending.clear();
        Ok(())
    }

    fn finish(mut self, dtype: DType) -> Result<Vec<u8>, String> {
        self.dtype = Some(dtype);
        self.encode_pending()?;
        drop(self.pending);
        self.encoded.shrink_to_fit();
        Ok(self.encoded)
    }
}

/// int32/uint32 data must be integers in range; say which element is not.
fn check_integers(dtype: DType, values: &[f64], first_index: usize) -> Result<(), String> {
    let range = match dtype {
        DType::I32 => f64::from(i32::MIN)..=f64::from(i32::MAX),
        DType::U32 => 0.0..=f64::from(u32::MAX),
        _ => return Ok(()),
    };
    match values
        .iter()
        .position(|v| v.fract() != 0.0 || !range.contains(v))
    {
        Some(i) => Err(format!(
            "element {} ({}) is not an integer in the range of {}",
            first_index + i,
            values[i],
            MlxDtype::of(dtype).map_or("an integer type", |d| d.name)
        )),
        None => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------
// Writing.

fn write_document(
    w: &mut impl Write,
    tensors: &[TensorView<'_>],
    metadata: Option<&BTreeMap<String, String>>,
) -> io::Result<()> {
    write!(w, "{{\"version\":\"{MLX_WRITE_VERSION}\"")?;
    if let Some(metadata) = metadata {
        w.write_all(b",\"metadata\":")?;
        serde_json::to_writer(&mut *w, metadata)?;
    }
    w.write_all(b",\"weights\":{")?;
    for (i, tensor) in tensors.iter().enumerate() {
        w.write_all(if i == 0 { b"\n" } else { b",\n" })?;
        write_tensor(w, tensor)?;
    }
    w.write_all(b"\n}}\n")
}

fn write_tensor(w: &mut impl Write, tensor: &TensorView<'_>) -> io::Result<()> {
    let dtype = MlxDtype::of(tensor.dtype)
        .ok_or_else(|| io::Error::other(format!("{} cannot be written", tensor.dtype)))?;
    serde_json::to_writer(&mut *w, &tensor.name)?;
    write!(w, ":{{\"dtype\":\"{}\",\"shape\":[", dtype.name)?;
    for (i, dim) in tensor.shape.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        write!(w, "{dim}")?;
    }
    w.write_all(b"],\"data\":[")?;
    let size = tensor.dtype.size().unwrap_or(1);
    for (i, element) in tensor.data.chunks_exact(size).enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        match tensor.dtype {
            DType::F32 => write_float(
                w,
                f32::from_le_bytes([element[0], element[1], element[2], element[3]]),
            )?,
            DType::F16 => write_float(
                w,
                half::f16::from_le_bytes([element[0], element[1]]).to_f32(),
            )?,
            DType::BF16 => write_float(
                w,
                half::bf16::from_le_bytes([element[0], element[1]]).to_f32(),
            )?,
            DType::I32 => write!(
                w,
                "{}",
                i32::from_le_bytes([element[0], element[1], element[2], element[3]])
            )?,
            DType::U32 => write!(
                w,
                "{}",
                u32::from_le_bytes([element[0], element[1], element[2], element[3]])
            )?,
            other => return Err(io::Error::other(format!("{other} cannot be written"))),
        }
    }
    w.write_all(b"]}")
}

/// The shortest decimal that reads back as `v` (f16/bf16 values are exact f32 values, and
/// the nearest half to that decimal is the half itself). Plain notation in JavaScript's range
/// [1e-6, 1e21), exponent notation outside it to keep subnormals short.
fn write_float(w: &mut impl Write, v: f32) -> io::Result<()> {
    if v.is_nan() {
        return w.write_all(b"\"NaN\"");
    }
    if v.is_infinite() {
        return w.write_all(if v > 0.0 {
            b"\"Infinity\""
        } else {
            b"\"-Infinity\""
        });
    }
    if v == 0.0 {
        // "-0" would parse as the integer 0 and lose the sign.
        return w.write_all(if v.is_sign_negative() { b"-0.0" } else { b"0" });
    }
    let magnitude = v.abs();
    if (1e-6..1e21).contains(&magnitude) {
        write!(w, "{v}")
    } else {
        write!(w, "{v:e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }
    fn u16_bytes(values: &[u16]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    fn tensor<'a>(weights: &'a MlxWeights, name: &str) -> &'a TensorView<'static> {
        weights
            .tensors
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no tensor {name}"))
    }

    fn err(json: &str) -> CoreError {
        parse_mlx(json.as_bytes()).expect_err(json)
    }

    /// Assert ERR_INVALID_MLX naming `tensor`, with `fragment` in the message.
    fn assert_invalid(json: &str, tensor: Option<&str>, fragment: &str) {
        let e = err(json);
        assert_eq!(e.code(), "ERR_INVALID_MLX", "{json}: {e}");
        assert_eq!(e.tensor(), tensor, "{json}: {e}");
        assert!(e.detail().contains(fragment), "{json}: {e}");
    }

    const TYPED: &str = r#"{"version": "0.1", "weights": {
        "f": {"shape": [3], "dtype": DF32, "data": [1.5, -2, 0.1]},
        "h": {"shape": [1, 2], "dtype": DF16, "data": [0.1, -65504]},
        "b": {"shape": [2], "dtype": DBF16, "data": [0.1, 3]},
        "i": {"shape": [2], "dtype": DI32, "data": [-2147483648, 2147483647]},
        "u": {"shape": [], "dtype": DU32, "data": [4294967295]}
    }}"#;

    fn check_typed(weights: &MlxWeights) {
        let names: Vec<&str> = weights.tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["f", "h", "b", "i", "u"], "file order");
        let f = tensor(weights, "f");
        assert_eq!((f.dtype, f.shape.clone()), (DType::F32, vec![3]));
        assert_eq!(f.data.as_ref(), f32_bytes(&[1.5, -2.0, 0.1]));
        let h = tensor(weights, "h");
        assert_eq!((h.dtype, h.shape.clone()), (DType::F16, vec![1, 2]));
        assert_eq!(h.data.as_ref(), u16_bytes(&[0x2E66, 0xFBFF]));
        let b = tensor(weights, "b");
        assert_eq!(b.dtype, DType::BF16);
        assert_eq!(b.data.as_ref(), u16_bytes(&[0x3DCD, 0x4040]));
        let i = tensor(weights, "i");
        assert_eq!(i.dtype, DType::I32);
        let ints: Vec<u8> = [i32::MIN, i32::MAX]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(i.data.as_ref(), ints);
        let u = tensor(weights, "u");
        assert_eq!((u.dtype, u.shape.clone()), (DType::U32, vec![]));
        assert_eq!(u.data.as_ref(), u32::MAX.to_le_bytes());
    }

    #[test]
    fn dtype_names_parse_to_exact_bytes() {
        let json = TYPED
            .replace("DF32", "\"float32\"")
            .replace("DF16", "\"float16\"")
            .replace("DBF16", "\"bfloat16\"")
            .replace("DI32", "\"int32\"")
            .replace("DU32", "\"uint32\"");
        let weights = parse_mlx(json.as_bytes()).unwrap();
        assert_eq!(weights.version.as_deref(), Some("0.1"));
        assert_eq!(weights.metadata, None);
        check_typed(&weights);
    }

    #[test]
    fn dtype_codes_parse_to_exact_bytes() {
        let json = TYPED
            .replace("DF32", "0")
            .replace("DF16", "2")
            .replace("DBF16", "3")
            .replace("DI32", "1")
            .replace("DU32", "4");
        check_typed(&parse_mlx(json.as_bytes()).unwrap());
    }

    #[test]
    fn half_precision_rounds_to_nearest_even_from_the_decimal() {
        let json = r#"{"weights": {
            "h": {"shape": [5], "dtype": "float16",
                  "data": [1.00048828125, 1.00146484375, 65519.99, 65520, 5.960464477539063e-8]},
            "b": {"shape": [4], "dtype": "bfloat16",
                  "data": [1.00390625, 1.0039062500000009, 1157425104234217473, -1157425104234217473]}
        }}"#;
        let weights = parse_mlx(json.as_bytes()).unwrap();
        // 1 + 2^-11 ties to even (1.0); 1 + 3·2^-11 ties to even upward; 65520 overflows.
        assert_eq!(
            tensor(&weights, "h").data.as_ref(),
            u16_bytes(&[0x3C00, 0x3C02, 0x7BFF, 0x7C00, 0x0001])
        );
        // 1 + 2^-8 ties to 1.0, but a hair above it (only visible in f64) rounds up. The
        // integer 2^60 + 2^52 + 1 lies just above a bf16 tie: a nearest-even f64 conversion
        // would land on the tie and round down.
        assert_eq!(
            tensor(&weights, "b").data.as_ref(),
            u16_bytes(&[0x3F80, 0x3F81, 0x5D81, 0xDD81])
        );
    }

    #[test]
    fn float32_rounds_once_from_the_decimal() {
        // 16777217 = 2^24 + 1 ties to even (2^24); 16777219 ties upward.
        let json = r#"{"weights": {"f": {"shape": [3], "dtype": "float32",
            "data": [16777217, 16777219, 1e-46]}}}"#;
        let weights = parse_mlx(json.as_bytes()).unwrap();
        assert_eq!(
            tensor(&weights, "f").data.as_ref(),
            f32_bytes(&[16777216.0, 16777220.0, 0.0])
        );
    }

    #[test]
    fn field_order_does_not_matter() {
        let orders = [
            r#"{"shape": [2, 2], "dtype": "DT", "data": [0.1, 2, -3.5, 1e-7]}"#,
            r#"{"data": [0.1, 2, -3.5, 1e-7], "dtype": "DT", "shape": [2, 2]}"#,
            r#"{"dtype": "DT", "data": [0.1, 2, -3.5, 1e-7], "extra": {"x": [1]}, "shape": [2, 2]}"#,
            r#"{"shape": [2, 2], "data": [0.1, 2, -3.5, 1e-7], "dtype": "DT"}"#,
        ];
        for dtype in ["float32", "float16", "bfloat16"] {
            let mut results = orders.iter().map(|entry| {
                let json = format!(r#"{{"weights": {{"w": {}}}}}"#, entry.replace("DT", dtype));
                parse_mlx(json.as_bytes()).unwrap().tensors
            });
            let first = results.next().unwrap();
            let expected = cast::encode_f64(&[0.1, 2.0, -3.5, 1e-7], first[0].dtype).unwrap();
            assert_eq!(first[0].data.as_ref(), expected, "{dtype}");
            assert_eq!(first[0].shape, vec![2, 2]);
            for other in results {
                assert_eq!(other, first, "{dtype}");
            }
        }
        // Integers buffered before their dtype are still range-checked.
        assert_invalid(
            r#"{"weights": {"w": {"data": [1, 2.5], "shape": [2], "dtype": "int32"}}}"#,
            Some("w"),
            "element 1 (2.5)",
        );
    }

    #[test]
    fn non_finite_strings_and_metadata() {
        let json = r#"{"version": 2, "config": {"deep": [[1, null], {"a": true}]},
            "metadata": {"format": "mlx", "layers": 12, "ok": true, "skip": null, "nested": {"a": 1}},
            "weights": {"w": {"shape": [3], "dtype": "float32", "data": ["NaN", "Infinity", "-Infinity"]}}}"#;
        let weights = parse_mlx(json.as_bytes()).unwrap();
        assert_eq!(weights.version.as_deref(), Some("2"));
        let metadata = weights.metadata.as_ref().unwrap();
        let entries: Vec<(&str, &str)> = metadata
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            entries,
            [("format", "mlx"), ("layers", "12"), ("ok", "true")]
        );
        let w = tensor(&weights, "w");
        assert_eq!(
            w.data.as_ref(),
            f32_bytes(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY])
        );
        // Version is optional; a non-object metadata is skipped, not refused.
        let weights = parse_mlx(br#"{"metadata": [1, 2], "weights": {}}"#).unwrap();
        assert_eq!((weights.version, weights.metadata), (None, None));
        assert!(weights.tensors.is_empty());
    }

    #[test]
    fn malformed_entries_name_the_tensor() {
        let entry = |body: &str| {
            format!(
                r#"{{"weights": {{"ok": {{"shape": [1], "dtype": "float32", "data": [1]}}, "bad": {body}}}}}"#
            )
        };
        let cases: &[(&str, &str)] = &[
            (
                r#"{"shape": [2, 2], "dtype": "float32", "data": [1, 2, 3]}"#,
                "holds 4 elements but \"data\" has 3",
            ),
            (
                r#"{"shape": [2], "dtype": "float32", "data": [1, 2, 3]}"#,
                "more numbers than the 2 elements",
            ),
            (
                r#"{"shape": [2], "dtype": "float32", "data": [1, null]}"#,
                "invalid type: null",
            ),
            (
                r#"{"shape": [2], "dtype": "float32", "data": [1, "1.5"]}"#,
                "invalid value: string \"1.5\"",
            ),
            (
                r#"{"shape": [2], "dtype": "float32", "data": [1, [2]]}"#,
                "invalid type: sequence",
            ),
            (
                r#"{"shape": [2], "dtype": "float32", "data": [true, 2]}"#,
                "invalid type: boolean",
            ),
            (
                r#"{"shape": [2], "dtype": "float32", "data": {"0": 1}}"#,
                "invalid type: map",
            ),
            (
                r#"{"shape": [2], "dtype": "float32", "data": 1.5}"#,
                "invalid type: floating point",
            ),
            (
                r#"{"shape": [-2], "dtype": "float32", "data": [1, 2]}"#,
                "shape entry -2 is negative",
            ),
            (
                r#"{"shape": [1.5], "dtype": "float32", "data": [1]}"#,
                "shape entry 1.5 is not a non-negative integer",
            ),
            (
                r#"{"shape": ["2"], "dtype": "float32", "data": [1, 2]}"#,
                "invalid type: string",
            ),
            (
                r#"{"shape": [null], "dtype": "float32", "data": [1]}"#,
                "invalid type: null",
            ),
            (
                r#"{"shape": 2, "dtype": "float32", "data": [1, 2]}"#,
                "invalid type: integer",
            ),
            (
                r#"{"shape": [4294967296, 4294967296, 4294967296], "dtype": "float32", "data": []}"#,
                "more elements than fit",
            ),
            (
                r#"{"shape": [1], "dtype": "float64", "data": [1]}"#,
                "unknown dtype \"float64\"",
            ),
            (
                r#"{"shape": [1], "dtype": 7, "data": [1]}"#,
                "unknown dtype code 7",
            ),
            (
                r#"{"shape": [1], "dtype": -1, "data": [1]}"#,
                "unknown dtype code -1",
            ),
            (
                r#"{"shape": [1], "dtype": null, "data": [1]}"#,
                "invalid type: null",
            ),
            (r#"{"shape": [1], "data": [1]}"#, "missing field `dtype`"),
            (
                r#"{"dtype": "float32", "data": [1]}"#,
                "missing field `shape`",
            ),
            (
                r#"{"shape": [1], "dtype": "float32"}"#,
                "missing field \"data\"",
            ),
            (
                r#"{"shape": [1], "shape": [1], "dtype": "float32", "data": [1]}"#,
                "duplicate key \"shape\"",
            ),
            (
                r#"{"shape": [1], "dtype": "int32", "data": [2147483648]}"#,
                "element 0 (2147483648) is not an integer in the range of int32",
            ),
            (
                r#"{"shape": [2], "dtype": "int32", "data": [1, 1.5]}"#,
                "element 1 (1.5)",
            ),
            (
                r#"{"shape": [1], "dtype": "uint32", "data": [-1]}"#,
                "range of uint32",
            ),
            (
                r#"{"shape": [1], "dtype": "int32", "data": ["NaN"]}"#,
                "element 0 (NaN)",
            ),
            (
                r#"{"shape": [1], "dtype": "float32", "data": [1e999]}"#,
                "number out of range",
            ),
            (r#"[1, 2]"#, "invalid type: sequence"),
            (r#""w""#, "invalid type: string"),
        ];
        for (body, fragment) in cases {
            assert_invalid(&entry(body), Some("bad"), fragment);
        }
        assert_invalid(
            r#"{"weights": {"w": {"shape": [1], "dtype": "float32", "data": [1]}, "w": {"shape": [1], "dtype": "float32", "data": [1]}}}"#,
            Some("w"),
            "duplicate tensor name",
        );
        // A dataless entry followed by a complete one: the dataless one is named.
        assert_invalid(
            r#"{"weights": {"a": {"shape": [1], "dtype": "float32"}, "b": {"shape": [1], "dtype": "float32", "data": [1]}}}"#,
            Some("a"),
            "missing field \"data\"",
        );
    }

    #[test]
    fn malformed_documents() {
        let cases: &[(&str, &str)] = &[
            ("", "not valid JSON: EOF"),
            ("<html>", "not valid JSON: expected value"),
            ("[1, 2]", "expected a JSON object with a \"weights\" object"),
            ("42", "invalid type: integer"),
            (r#"{"weights": [1]}"#, "invalid type: sequence"),
            (
                r#"{"weights": {}, "version": true}"#,
                "invalid type: boolean",
            ),
            (
                r#"{"weights": {}, "weights": {}}"#,
                "duplicate key \"weights\"",
            ),
            (r#"{"weights": {}} trailing"#, "trailing characters"),
            (
                r#"{"weights": {"w": {"shape": [1], "dtype": "float32", "data": [1]}"#,
                "EOF while parsing",
            ),
        ];
        for (json, fragment) in cases {
            assert_invalid(json, None, fragment);
        }
        // Ignored keys are skipped iteratively by serde_json: deep nesting there is neither
        // refused nor a stack overflow.
        let deep = format!(
            r#"{{"config": {}1{}, "weights": {{}}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(parse_mlx(deep.as_bytes()).unwrap().tensors.is_empty());
    }

    #[test]
    fn metadata_only_files_say_where_the_weights_are() {
        let e = err(
            r#"{"version": "1", "weights": {"a": {"shape": [2], "dtype": "float16"}, "b": {"dtype": 0, "shape": []}}}"#,
        );
        assert_eq!(e.code(), "ERR_INVALID_MLX");
        assert_eq!(e.tensor(), None);
        assert!(e.detail().contains("only metadata"), "{e}");
        assert!(e.detail().contains("stored elsewhere"), "{e}");
        assert!(e.detail().contains(".safetensors"), "{e}");
        let e = err(r#"{"version": "1", "metadata": {"a": "b"}}"#);
        assert_eq!(e.code(), "ERR_INVALID_MLX");
        assert!(e.detail().contains("no \"weights\" object"), "{e}");
        assert!(e.detail().contains("stored elsewhere"), "{e}");
        // A complete tensor followed by a dataless one is a broken file instead.
        assert_invalid(
            r#"{"weights": {"a": {"shape": [1], "dtype": "float32", "data": [1]}, "b": {"shape": [1], "dtype": "float32"}}}"#,
            Some("b"),
            "missing field \"data\"",
        );
    }

    fn round_trip(tensors: &[TensorView<'_>]) -> MlxWeights {
        let mut json = Vec::new();
        write_mlx(&mut json, tensors, None).unwrap();
        let weights = parse_mlx(&json).unwrap();
        assert_eq!(weights.version.as_deref(), Some(MLX_WRITE_VERSION));
        assert_eq!(weights.tensors.len(), tensors.len());
        weights
    }

    /// Canonical quiet NaNs come back bit-exact; other NaNs come back as NaN.
    fn assert_same_halves(dtype: DType, bits: &[u16], back: &[u8], canonical_nan: u16) {
        let is_nan = |b: u16| match dtype {
            DType::F16 => half::f16::from_bits(b).is_nan(),
            _ => half::bf16::from_bits(b).is_nan(),
        };
        for (&b, got) in bits.iter().zip(back.chunks_exact(2)) {
            let got = u16::from_le_bytes([got[0], got[1]]);
            if is_nan(b) {
                assert_eq!(got, canonical_nan, "{dtype} NaN {b:#06x}");
            } else {
                assert_eq!(got, b, "{dtype} {b:#06x}");
            }
        }
    }

    #[test]
    fn write_read_round_trip_is_bit_exact() {
        // float32: specials, subnormals, the extremes, and pseudo-random bit patterns.
        let mut bits: Vec<u32> = vec![
            0,
            0x8000_0000,
            1,
            0x8000_0001,
            0x007F_FFFF,
            0x0080_0000,
            0x7F7F_FFFF,
            0xFF7F_FFFF,
            0x7F80_0000,
            0xFF80_0000,
            0x7FC0_0000,
            0x3DCC_CCCD,
            0x4B80_0000,
            0x3380_0000,
        ];
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            bits.push(state as u32);
        }
        let f32_data: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
        let all_halves: Vec<u16> = (0..=u16::MAX).collect();
        let half_data = u16_bytes(&all_halves);
        let ints: Vec<u8> = [0, -1, 1, i32::MIN, i32::MAX, 123456789]
            .iter()
            .flat_map(|v: &i32| v.to_le_bytes())
            .collect();
        let uints: Vec<u8> = [0, 1, u32::MAX, 1 << 31]
            .iter()
            .flat_map(|v: &u32| v.to_le_bytes())
            .collect();
        let tensors = vec![
            TensorView::new("f32", DType::F32, vec![bits.len()], f32_data).unwrap(),
            TensorView::new("f16", DType::F16, vec![256, 256], half_data.clone()).unwrap(),
            TensorView::new("bf16", DType::BF16, vec![65536], half_data).unwrap(),
            TensorView::new("i32", DType::I32, vec![2, 3], ints.clone()).unwrap(),
            TensorView::new("u32", DType::U32, vec![4], uints.clone()).unwrap(),
            TensorView::new("scalar", DType::F32, vec![], f32_bytes(&[-0.0])).unwrap(),
            TensorView::new("empty", DType::F16, vec![0, 3], vec![]).unwrap(),
            TensorView::new("na\"me\\ \u{e9}\n", DType::F32, vec![1], f32_bytes(&[1.0])).unwrap(),
        ];
        let weights = round_trip(&tensors);
        for (written, read) in tensors.iter().zip(&weights.tensors) {
            assert_eq!(
                (&read.name, read.dtype, &read.shape),
                (&written.name, written.dtype, &written.shape)
            );
        }
        let f32_back = &weights.tensors[0].data;
        for (&b, got) in bits.iter().zip(f32_back.chunks_exact(4)) {
            let got = u32::from_le_bytes([got[0], got[1], got[2], got[3]]);
            if f32::from_bits(b).is_nan() {
                assert_eq!(got, 0x7FC0_0000, "NaN {b:#010x}");
            } else {
                assert_eq!(got, b, "{b:#010x} ({})", f32::from_bits(b));
            }
        }
        assert_same_halves(DType::F16, &all_halves, &weights.tensors[1].data, 0x7E00);
        assert_same_halves(DType::BF16, &all_halves, &weights.tensors[2].data, 0x7FC0);
        assert_eq!(weights.tensors[3].data.as_ref(), ints);
        assert_eq!(weights.tensors[4].data.as_ref(), uints);
        assert_eq!(weights.tensors[5].data.as_ref(), (-0.0f32).to_le_bytes());
        assert!(weights.tensors[6].data.is_empty());
        assert_eq!(weights.tensors[7].data.as_ref(), f32_bytes(&[1.0]));
    }

    #[test]
    fn writer_output_is_compact_and_readable() {
        let tensors = [TensorView::from_f32(
            "w",
            vec![2, 3],
            &[0.1, -0.0, 1.0, 1e-7, 3.4028235e38, f32::NAN],
        )
        .unwrap()];
        let metadata = BTreeMap::from([("format".to_string(), "mlx".to_string())]);
        let mut json = Vec::new();
        write_mlx(&mut json, &tensors, Some(&metadata)).unwrap();
        assert_eq!(
            String::from_utf8(json.clone()).unwrap(),
            "{\"version\":\"1.0\",\"metadata\":{\"format\":\"mlx\"},\"weights\":{\n\
             \"w\":{\"dtype\":\"float32\",\"shape\":[2,3],\"data\":[0.1,-0.0,1,1e-7,3.4028235e38,\"NaN\"]}\n}}\n"
        );
        assert_eq!(parse_mlx(&json).unwrap().metadata, Some(metadata));
    }

    #[test]
    fn writer_refuses_what_the_format_cannot_hold() {
        let f64_tensor =
            TensorView::new("d", DType::F64, vec![1], 1.0f64.to_le_bytes().to_vec()).unwrap();
        let ok = TensorView::from_f32("ok", vec![1], &[1.0]).unwrap();
        let mut out = Vec::new();
        let e = write_mlx(&mut out, &[ok.clone(), f64_tensor], None).unwrap_err();
        assert_eq!((e.code(), e.tensor()), ("ERR_UNSUPPORTED_DTYPE", Some("d")));
        assert!(out.is_empty(), "nothing written before the check");
        let e = write_mlx(&mut out, &[ok.clone(), ok.clone()], None).unwrap_err();
        assert_eq!((e.code(), e.tensor()), ("ERR_INVALID_ARGUMENT", Some("ok")));
        let mut bad = ok;
        bad.shape = vec![2];
        let e = write_mlx(&mut out, &[bad], None).unwrap_err();
        assert_eq!((e.code(), e.tensor()), ("ERR_INVALID_ARGUMENT", Some("ok")));
        assert!(out.is_empty());
    }

    #[test]
    fn files_round_trip_with_progress_limits_and_paths() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("weights.mlx");
        let tensors = [TensorView::from_f32("w", vec![2], &[0.5, -1.25]).unwrap()];
        save_mlx(&path, &tensors, None).unwrap();
        let size = std::fs::metadata(&path).unwrap().len();
        let mut reports = Vec::new();
        let weights =
            read_mlx_with_progress(&path, &mut |done, total| reports.push((done, total))).unwrap();
        assert_eq!(weights.tensors, tensors.to_vec());
        assert_eq!(reports.first(), Some(&(0, size)));
        assert_eq!(reports.last(), Some(&(size, size)));

        let options = MlxReadOptions {
            max_file_bytes: size - 1,
        };
        let e = read_mlx_with_options(&path, &options, &mut |_, _| {}).unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_MLX");
        assert!(e.detail().contains("larger than"), "{e}");
        assert_eq!(e.path(), Some(path.display().to_string().as_str()));

        std::fs::write(
            &path,
            br#"{"weights": {"t": {"shape": [1], "dtype": "float32", "data": [null]}}}"#,
        )
        .unwrap();
        let e = read_mlx(&path).unwrap_err();
        assert_eq!((e.code(), e.tensor()), ("ERR_INVALID_MLX", Some("t")));
        assert_eq!(e.path(), Some(path.display().to_string().as_str()));
        assert!(e.to_string().contains("line 1 column"), "{e}");

        let e = read_mlx(&dir.path().join("missing.mlx")).unwrap_err();
        assert_eq!(e.code(), "ERR_NOT_FOUND");
        // A directory is refused before any read, as SafeTensorsFile.open refuses one.
        let e = read_mlx(dir.path()).unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_ARGUMENT", "{e}");
        assert!(e.to_string().contains("is a directory"), "{e}");

        // save_mlx refuses unsupported tensors without leaving a file behind.
        let f64_tensor = TensorView::new("d", DType::F64, vec![1], vec![0; 8]).unwrap();
        let out = dir.path().join("other.mlx");
        let e = save_mlx(&out, &[f64_tensor], None).unwrap_err();
        assert_eq!(e.code(), "ERR_UNSUPPORTED_DTYPE");
        assert!(!out.exists());
    }

    #[test]
    fn round_to_odd_integers() {
        assert_eq!(integer_to_f64_round_to_odd(0), 0.0);
        assert_eq!(integer_to_f64_round_to_odd(1 << 53), 9007199254740992.0);
        // 2^53 + 1 is not representable: the sticky bit makes it 2^53 + 2 (odd significand).
        assert_eq!(
            integer_to_f64_round_to_odd((1 << 53) + 1),
            9007199254740994.0
        );
        assert_eq!(
            integer_to_f64_round_to_odd((1 << 53) + 2),
            9007199254740994.0
        );
        assert_eq!(
            integer_to_f64_round_to_odd(u64::MAX),
            18446744073709549568.0
        );
    }
}
