//! Typed metadata values (GGUF's key-value pairs, what [`super::Metadata::Gguf`] holds): their
//! JSON and text forms, and their byte encoding in a GGUF file.

use crate::error::{CoreError, Result};
use serde_json::Value as Json;
use std::collections::BTreeMap;

/// The type tag of a metadata value, with its id in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GgufValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl GgufValueType {
    const ALL: [GgufValueType; 13] = [
        GgufValueType::U8,
        GgufValueType::I8,
        GgufValueType::U16,
        GgufValueType::I16,
        GgufValueType::U32,
        GgufValueType::I32,
        GgufValueType::F32,
        GgufValueType::Bool,
        GgufValueType::String,
        GgufValueType::Array,
        GgufValueType::U64,
        GgufValueType::I64,
        GgufValueType::F64,
    ];

    pub fn from_id(id: u32) -> Option<GgufValueType> {
        GgufValueType::ALL.into_iter().find(|t| t.id() == id)
    }

    pub fn id(self) -> u32 {
        self as u32
    }

    /// The spec's name of the type (`UINT32`, `STRING`, ...).
    pub fn name(self) -> &'static str {
        match self {
            GgufValueType::U8 => "UINT8",
            GgufValueType::I8 => "INT8",
            GgufValueType::U16 => "UINT16",
            GgufValueType::I16 => "INT16",
            GgufValueType::U32 => "UINT32",
            GgufValueType::I32 => "INT32",
            GgufValueType::F32 => "FLOAT32",
            GgufValueType::Bool => "BOOL",
            GgufValueType::String => "STRING",
            GgufValueType::Array => "ARRAY",
            GgufValueType::U64 => "UINT64",
            GgufValueType::I64 => "INT64",
            GgufValueType::F64 => "FLOAT64",
        }
    }

    /// Bytes of one value of a fixed-size type; `None` for strings and arrays.
    pub fn fixed_size(self) -> Option<usize> {
        match self {
            GgufValueType::U8 | GgufValueType::I8 | GgufValueType::Bool => Some(1),
            GgufValueType::U16 | GgufValueType::I16 => Some(2),
            GgufValueType::U32 | GgufValueType::I32 | GgufValueType::F32 => Some(4),
            GgufValueType::U64 | GgufValueType::I64 | GgufValueType::F64 => Some(8),
            GgufValueType::String | GgufValueType::Array => None,
        }
    }

    /// The fewest bytes one value of this type can occupy in a file: a string is at least its
    /// u64 length, an array at least its element type and u64 count. Used to bound counts
    /// read from the file by the bytes that remain.
    pub(crate) fn min_encoded_size(self) -> usize {
        match self {
            GgufValueType::String => 8,
            GgufValueType::Array => 12,
            fixed => fixed.fixed_size().unwrap_or(1),
        }
    }
}

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum GgufValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    U64(u64),
    I64(i64),
    F64(f64),
    Array(GgufArray),
}

/// A homogeneous array value. Elements are stored in typed vectors (not one `GgufValue`
/// each) so that a large array, say a 150k-token vocabulary, costs what its elements cost,
/// and an empty array still knows its element type. Arrays of arrays, which the spec allows,
/// have no variant: ggml's reader refuses them, and so does ours (each inner array would
/// cost far more than its 12 bytes in the file once handed to JavaScript).
#[derive(Debug, Clone, PartialEq)]
pub enum GgufArray {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    String(Vec<String>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

impl GgufValue {
    pub fn value_type(&self) -> GgufValueType {
        match self {
            GgufValue::U8(_) => GgufValueType::U8,
            GgufValue::I8(_) => GgufValueType::I8,
            GgufValue::U16(_) => GgufValueType::U16,
            GgufValue::I16(_) => GgufValueType::I16,
            GgufValue::U32(_) => GgufValueType::U32,
            GgufValue::I32(_) => GgufValueType::I32,
            GgufValue::F32(_) => GgufValueType::F32,
            GgufValue::Bool(_) => GgufValueType::Bool,
            GgufValue::String(_) => GgufValueType::String,
            GgufValue::U64(_) => GgufValueType::U64,
            GgufValue::I64(_) => GgufValueType::I64,
            GgufValue::F64(_) => GgufValueType::F64,
            GgufValue::Array(_) => GgufValueType::Array,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an unsigned integer, for any integer type holding a non-negative value.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            GgufValue::U8(v) => Some(v.into()),
            GgufValue::U16(v) => Some(v.into()),
            GgufValue::U32(v) => Some(v.into()),
            GgufValue::U64(v) => Some(v),
            GgufValue::I8(v) => u64::try_from(v).ok(),
            GgufValue::I16(v) => u64::try_from(v).ok(),
            GgufValue::I32(v) => u64::try_from(v).ok(),
            GgufValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as JSON. 64-bit integers stay exact (serde_json keeps them as integers);
    /// non-finite floats, which JSON cannot hold, become `null`.
    pub fn to_json(&self) -> Json {
        match self {
            GgufValue::U8(v) => Json::from(*v),
            GgufValue::I8(v) => Json::from(*v),
            GgufValue::U16(v) => Json::from(*v),
            GgufValue::I16(v) => Json::from(*v),
            GgufValue::U32(v) => Json::from(*v),
            GgufValue::I32(v) => Json::from(*v),
            GgufValue::F32(v) => float_json(f64::from(*v)),
            GgufValue::Bool(v) => Json::from(*v),
            GgufValue::String(v) => Json::from(v.as_str()),
            GgufValue::U64(v) => Json::from(*v),
            GgufValue::I64(v) => Json::from(*v),
            GgufValue::F64(v) => float_json(*v),
            GgufValue::Array(a) => a.to_json(),
        }
    }

    /// Append the value's payload (everything after its type tag).
    pub(crate) fn encode_payload(&self, out: &mut Vec<u8>) {
        match self {
            GgufValue::U8(v) => out.push(*v),
            GgufValue::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
            GgufValue::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
            GgufValue::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
            GgufValue::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
            GgufValue::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
            GgufValue::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
            GgufValue::Bool(v) => out.push(u8::from(*v)),
            GgufValue::String(v) => encode_string(v, out),
            GgufValue::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
            GgufValue::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
            GgufValue::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
            GgufValue::Array(a) => a.encode_payload(out),
        }
    }
}

/// How many array elements (and string bytes) a JSON report may still spell out; see
/// [`GgufArray::to_json_within`].
#[derive(Debug, Clone)]
pub struct JsonBudget {
    pub items: usize,
    pub string_bytes: usize,
}

impl JsonBudget {
    /// What `inspect` lists of a file's metadata arrays: one million elements and 8 MiB of
    /// strings in all — every tokenizer array of the largest public vocabularies (~260k
    /// tokens), and a bounded report for a file built to blow it up.
    pub const REPORT: JsonBudget = JsonBudget {
        items: 1_000_000,
        string_bytes: 8 << 20,
    };
}

impl GgufValue {
    /// [`to_json`](Self::to_json), with arrays within `budget` (see
    /// [`GgufArray::to_json_within`]).
    pub fn to_json_within(&self, budget: &mut JsonBudget) -> Json {
        match self {
            GgufValue::Array(a) => a.to_json_within(budget),
            other => other.to_json(),
        }
    }
}

fn float_json(v: f64) -> Json {
    serde_json::Number::from_f64(v).map_or(Json::Null, Json::Number)
}

/// A GGUF string: u64 byte length, then the bytes.
pub(crate) fn encode_string(s: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

impl GgufArray {
    pub fn item_type(&self) -> GgufValueType {
        match self {
            GgufArray::U8(_) => GgufValueType::U8,
            GgufArray::I8(_) => GgufValueType::I8,
            GgufArray::U16(_) => GgufValueType::U16,
            GgufArray::I16(_) => GgufValueType::I16,
            GgufArray::U32(_) => GgufValueType::U32,
            GgufArray::I32(_) => GgufValueType::I32,
            GgufArray::F32(_) => GgufValueType::F32,
            GgufArray::Bool(_) => GgufValueType::Bool,
            GgufArray::String(_) => GgufValueType::String,
            GgufArray::U64(_) => GgufValueType::U64,
            GgufArray::I64(_) => GgufValueType::I64,
            GgufArray::F64(_) => GgufValueType::F64,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            GgufArray::U8(v) => v.len(),
            GgufArray::I8(v) => v.len(),
            GgufArray::U16(v) => v.len(),
            GgufArray::I16(v) => v.len(),
            GgufArray::U32(v) => v.len(),
            GgufArray::I32(v) => v.len(),
            GgufArray::F32(v) => v.len(),
            GgufArray::Bool(v) => v.len(),
            GgufArray::String(v) => v.len(),
            GgufArray::U64(v) => v.len(),
            GgufArray::I64(v) => v.len(),
            GgufArray::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn to_json(&self) -> Json {
        fn all<T: Copy>(v: &[T], f: impl Fn(T) -> Json) -> Json {
            Json::Array(v.iter().map(|&x| f(x)).collect())
        }
        match self {
            GgufArray::U8(v) => all(v, Json::from),
            GgufArray::I8(v) => all(v, Json::from),
            GgufArray::U16(v) => all(v, Json::from),
            GgufArray::I16(v) => all(v, Json::from),
            GgufArray::U32(v) => all(v, Json::from),
            GgufArray::I32(v) => all(v, Json::from),
            GgufArray::F32(v) => all(v, |x| float_json(f64::from(x))),
            GgufArray::Bool(v) => all(v, Json::from),
            GgufArray::String(v) => Json::Array(v.iter().map(|s| Json::from(s.as_str())).collect()),
            GgufArray::U64(v) => all(v, Json::from),
            GgufArray::I64(v) => all(v, Json::from),
            GgufArray::F64(v) => all(v, float_json),
        }
    }

    /// Bytes of the strings it holds.
    fn string_bytes(&self) -> usize {
        match self {
            GgufArray::String(v) => v.iter().map(String::len).sum(),
            _ => 0,
        }
    }

    /// [`to_json`](Self::to_json) while `budget` lasts: an array the budget cannot hold
    /// whole becomes `{"arrayOf": ITEM_TYPE, "length": N}`. A JSON value costs several
    /// times the bytes it had in the file (a boolean, 1 byte there, is 32 bytes as a JSON
    /// value and 8 in a JavaScript array), so reports list arrays within a budget.
    pub fn to_json_within(&self, budget: &mut JsonBudget) -> Json {
        let (items, bytes) = (self.len(), self.string_bytes());
        if items <= budget.items && bytes <= budget.string_bytes {
            budget.items -= items;
            budget.string_bytes -= bytes;
            return self.to_json();
        }
        serde_json::json!({ "arrayOf": self.item_type().name(), "length": self.len() })
    }

    /// Append item type, count and items.
    pub(crate) fn encode_payload(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.item_type().id().to_le_bytes());
        out.extend_from_slice(&(self.len() as u64).to_le_bytes());
        fn each<T: Copy, const N: usize>(v: &[T], out: &mut Vec<u8>, f: impl Fn(T) -> [u8; N]) {
            out.reserve(v.len() * N);
            for &x in v {
                out.extend_from_slice(&f(x));
            }
        }
        match self {
            GgufArray::U8(v) => out.extend_from_slice(v),
            GgufArray::I8(v) => each(v, out, i8::to_le_bytes),
            GgufArray::U16(v) => each(v, out, u16::to_le_bytes),
            GgufArray::I16(v) => each(v, out, i16::to_le_bytes),
            GgufArray::U32(v) => each(v, out, u32::to_le_bytes),
            GgufArray::I32(v) => each(v, out, i32::to_le_bytes),
            GgufArray::F32(v) => each(v, out, f32::to_le_bytes),
            GgufArray::Bool(v) => each(v, out, |b| [u8::from(b)]),
            GgufArray::String(v) => v.iter().for_each(|s| encode_string(s, out)),
            GgufArray::U64(v) => each(v, out, u64::to_le_bytes),
            GgufArray::I64(v) => each(v, out, i64::to_le_bytes),
            GgufArray::F64(v) => each(v, out, f64::to_le_bytes),
        }
    }
}

macro_rules! from_scalar {
    ($($t:ty => $variant:ident),* $(,)?) => {
        $(impl From<$t> for GgufValue {
            fn from(v: $t) -> Self { GgufValue::$variant(v) }
        })*
        $(impl From<Vec<$t>> for GgufValue {
            fn from(v: Vec<$t>) -> Self { GgufValue::Array(GgufArray::$variant(v)) }
        })*
    };
}
from_scalar! {
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, f32 => F32,
    bool => Bool, String => String, u64 => U64, i64 => I64, f64 => F64,
}

impl From<&str> for GgufValue {
    fn from(v: &str) -> Self {
        GgufValue::String(v.to_string())
    }
}

impl From<GgufArray> for GgufValue {
    fn from(v: GgufArray) -> Self {
        GgufValue::Array(v)
    }
}

/// A GGUF metadata value as a string, for a SafeTensors `__metadata__` (whose values are
/// strings): strings as they are, booleans `true`/`false`, integers in decimal (64-bit ones
/// exact), floats in the fewest digits that read back to the same f32 or f64 value, in
/// JavaScript's layout (exponent form below 1e-6 and from 1e21, `1e+300`; `-0` kept;
/// `NaN`, `Infinity`, `-Infinity`), arrays as JSON (non-finite floats in them become
/// `null`).
pub fn value_as_string(value: &GgufValue) -> String {
    value_text_within(value, usize::MAX).unwrap_or_default()
}

/// [`value_as_string`], or `None` when it is longer than `max` bytes: an array's text is
/// measured, then written element by element into a buffer of its size (never its JSON
/// tree, ~30 bytes per element whatever its type, nor more than `max` bytes).
fn value_text_within(value: &GgufValue, max: usize) -> Option<String> {
    let text = match value {
        GgufValue::String(s) => s.clone(),
        GgufValue::F32(v) => js_number(f64::from(*v), format!("{v}"), format!("{v:e}")),
        GgufValue::F64(v) => js_number(*v, format!("{v}"), format!("{v:e}")),
        GgufValue::Array(a) => {
            let mut len = Counter(0);
            serde_json::to_writer(&mut len, &ArrayJson(a)).ok()?;
            if len.0 > max {
                return None;
            }
            let mut text = Vec::with_capacity(len.0);
            serde_json::to_writer(&mut text, &ArrayJson(a)).ok()?;
            return String::from_utf8(text).ok();
        }
        other => other.to_json().to_string(),
    };
    (text.len() <= max).then_some(text)
}

/// An array serialized as [`GgufArray::to_json`] renders it (floats as f64, non-finite
/// ones `null`), element by element.
struct ArrayJson<'a>(&'a GgufArray);

impl serde::Serialize for ArrayJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self.0 {
            GgufArray::U8(v) => s.collect_seq(v),
            GgufArray::I8(v) => s.collect_seq(v),
            GgufArray::U16(v) => s.collect_seq(v),
            GgufArray::I16(v) => s.collect_seq(v),
            GgufArray::U32(v) => s.collect_seq(v),
            GgufArray::I32(v) => s.collect_seq(v),
            GgufArray::F32(v) => s.collect_seq(v.iter().map(|&x| f64::from(x))),
            GgufArray::Bool(v) => s.collect_seq(v),
            GgufArray::String(v) => s.collect_seq(v),
            GgufArray::U64(v) => s.collect_seq(v),
            GgufArray::I64(v) => s.collect_seq(v),
            GgufArray::F64(v) => s.collect_seq(v),
        }
    }
}

/// A writer that only counts.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A float as JavaScript writes it, from Rust's shortest plain and exponent forms.
fn js_number(v: f64, plain: String, exponent: String) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
    } else if v == 0.0 || (1e-6..1e21).contains(&plain.parse::<f64>().unwrap_or(v).abs()) {
        plain
    } else if let Some((mantissa, exp)) = exponent.split_once('e') {
        let sign = if exp.starts_with('-') { "" } else { "+" };
        format!("{mantissa}e{sign}{exp}")
    } else {
        exponent
    }
}

/// A GGUF file's metadata as SafeTensors `__metadata__` entries: `gguf.<key>` →
/// [`value_as_string`]; ERR_INVALID_ARGUMENT, with no more built, when their text would be
/// more than `max_bytes` in all (the SafeTensors header's limit: an array of 25 million
/// booleans is 140 MB of text).
pub fn metadata_as_strings(
    metadata: &[(String, GgufValue)],
    max_bytes: usize,
) -> Result<BTreeMap<String, String>> {
    let mut left = max_bytes;
    metadata
        .iter()
        .map(|(k, v)| {
            let text = value_text_within(v, left).ok_or_else(|| {
                CoreError::invalid_argument(format!(
                    "the GGUF metadata as SafeTensors metadata would be more than {max_bytes} \
                     bytes, the most a SafeTensors header holds ('{k}' passes the limit)"
                ))
            })?;
            left -= text.len();
            Ok((format!("gguf.{k}"), text))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_values_as_strings() {
        let cases = [
            (GgufValue::from("llama"), "llama"),
            (GgufValue::U64(u64::MAX), "18446744073709551615"),
            (GgufValue::I64(i64::MIN), "-9223372036854775808"),
            (GgufValue::F32(0.1), "0.1"),
            (GgufValue::F64(1e300), "1e+300"),
            (GgufValue::F64(-2.5e-7), "-2.5e-7"),
            (GgufValue::F32(1e-6), "0.000001"),
            (GgufValue::F32(3.4028235e38), "3.4028235e+38"),
            (GgufValue::F64(-0.0), "-0"),
            (GgufValue::F32(f32::NEG_INFINITY), "-Infinity"),
            (GgufValue::F64(f64::NAN), "NaN"),
            (GgufValue::Bool(true), "true"),
            (GgufValue::Array(GgufArray::I32(vec![1, -2])), "[1,-2]"),
            (GgufValue::from(vec!["a\"b".to_string()]), "[\"a\\\"b\"]"),
        ];
        for (v, want) in cases {
            assert_eq!(value_as_string(&v), want, "{v:?}");
        }
    }

    /// Arrays are written element by element as their JSON tree prints, within a cap.
    #[test]
    fn array_text_is_the_json_trees_and_capped() {
        use GgufArray as A;
        let arrays = [
            A::U8(vec![0, 255]),
            A::I8(vec![-128]),
            A::U16(vec![65535]),
            A::I16(vec![-1]),
            A::U32(vec![7]),
            A::I32(vec![i32::MIN]),
            A::F32(vec![0.1, -0.0, 1.0, f32::NAN, f32::INFINITY, 3e38, 1e-40]),
            A::Bool(vec![true, false]),
            A::String(vec!["é\n\"".into(), String::new()]),
            A::U64(vec![u64::MAX]),
            A::I64(vec![i64::MIN]),
            A::F64(vec![1e300, f64::NEG_INFINITY, 5e-324]),
        ];
        for a in arrays {
            let v = GgufValue::Array(a.clone());
            assert_eq!(value_as_string(&v), a.to_json().to_string(), "{a:?}");
        }
        let bools = GgufValue::Array(A::Bool(vec![true; 1000]));
        let pairs = [
            ("a".to_string(), GgufValue::from("x")),
            ("b".to_string(), bools),
        ];
        assert_eq!(metadata_as_strings(&pairs, 5002).unwrap().len(), 2);
        let e = metadata_as_strings(&pairs, 5001).unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
        assert!(e.detail().contains("'b' passes the limit"), "{e}");
    }
}
