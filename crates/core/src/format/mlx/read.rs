//! Reading `weights.mlx`: the streaming driver and the serde visitors of the document, its
//! keys, `version`, `metadata`, `weights` and each entry's `shape`, `dtype` and `data`.

#[cfg(feature = "fs")]
use super::PROGRESS_STEP_BYTES;
use super::{MlxDtype, MlxWeights, ENCODE_BATCH, WEIGHTS_ELSEWHERE};
use crate::cast;
use crate::dtype::DType;
use crate::error::{CoreError, Result};
use crate::tensor::{checked_numel, TensorView};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
#[cfg(feature = "fs")]
use std::cell::Cell;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
#[cfg(feature = "fs")]
use std::io::{self, Read};

// ---------------------------------------------------------------------------------------
// Reading: the driver.

/// Upper bound on how many numbers `len` bytes of JSON can hold (each needs a digit and a
/// comma, but the last), used to cap capacity hints taken from untrusted shapes.
pub(super) fn max_numbers_in(len: u64) -> usize {
    usize::try_from(len / 2 + 1).unwrap_or(usize::MAX)
}

pub(super) fn json_error(e: serde_json::Error) -> CoreError {
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

pub(super) fn decode<'de, R: serde_json::de::Read<'de>>(
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

#[cfg(feature = "fs")]
/// Counts the bytes read for progress reports and the size limit.
pub(super) struct CountingReader<'p, R> {
    pub(super) inner: R,
    pub(super) bytes_read: u64,
    pub(super) total: u64,
    pub(super) max_bytes: u64,
    pub(super) next_report: u64,
    pub(super) over_limit: &'p Cell<bool>,
    pub(super) on_progress: &'p mut dyn FnMut(u64, u64),
}

#[cfg(feature = "fs")]
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
// Reading: every seed is its own visitor.

/// `DeserializeSeed` for the seeds below, each its own [`Visitor`]: deserializing one asks
/// the JSON for what it visits (a map, a sequence, or any value).
macro_rules! self_visiting_seeds {
    ($($seed:ty => $how:ident,)*) => {$(
        impl<'de> DeserializeSeed<'de> for $seed {
            type Value = <Self as Visitor<'de>>::Value;
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.$how(self)
            }
        }
    )*};
}

self_visiting_seeds! {
    TopLevelSeed<'_> => deserialize_map,
    TextSeed => deserialize_any,
    MetadataSeed => deserialize_any,
    WeightsSeed<'_> => deserialize_map,
    EntrySeed => deserialize_map,
    ShapeSeed => deserialize_seq,
    DimSeed => deserialize_any,
    DtypeSeed => deserialize_any,
    DataSeed<'_> => deserialize_seq,
    NumberSeed => deserialize_any,
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
                    top.version = map.next_value_seed(VERSION)?;
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

/// `metadata`: an object whose scalar values are kept as text. Anything else in its place is
/// not metadata this reader understands, and is skipped rather than refused.
struct MetadataSeed;

impl<'de> Visitor<'de> for MetadataSeed {
    type Value = Option<BTreeMap<String, String>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a \"metadata\" object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut metadata = BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            if let Some(value) = map.next_value_seed(METADATA_VALUE)? {
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

/// A scalar kept as its text: `version` (a string or a number; `null` counts as absent) and,
/// `lenient`, a metadata value (booleans too, and `None` — skipped — for null, arrays and
/// objects).
struct TextSeed {
    expecting: &'static str,
    lenient: bool,
}

/// `version`.
const VERSION: TextSeed = TextSeed {
    expecting: "\"version\" as a string or a number",
    lenient: false,
};

/// One value of `metadata`.
const METADATA_VALUE: TextSeed = TextSeed {
    expecting: "a metadata value",
    lenient: true,
};

impl<'de> Visitor<'de> for TextSeed {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        if !self.lenient {
            return Err(E::invalid_type(de::Unexpected::Bool(v), &self));
        }
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
        if !self.lenient {
            return Err(de::Error::invalid_type(de::Unexpected::Seq, &self));
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        if !self.lenient {
            return Err(de::Error::invalid_type(de::Unexpected::Map, &self));
        }
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

// ---------------------------------------------------------------------------------------
// Reading: `weights` and its entries.

struct WeightsSeed<'s> {
    state: &'s mut ParseState,
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
pub(super) fn integer_to_f64_round_to_odd(magnitude: u64) -> f64 {
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
