//! Metadata edits of a conversion (the `metadata` option): keys set or removed in the
//! output, every other key kept as the conversion writes it.
//!
//! A value's GGUF type is the one given (`{ type: 'UINT32', value }`, for an array the
//! element type), else the one gguf-py's `GGUFValueType.get_type` gives the same value in
//! Python: a string is STRING, a boolean BOOL, an integer INT32 (a JavaScript integer beyond
//! INT32 but safe is INT64, a bigint INT64, or UINT64 beyond INT64), any other number
//! FLOAT32, an array an ARRAY of its elements' type (all of one kind), a typed array an
//! ARRAY of its element type. In a SafeTensors `__metadata__` (strings only) a value is
//! written as the text of its GGUF value ([`export::value_as_string`]).

use crate::error::{CoreError, Result};
use crate::format::gguf::split::is_split_key;
use crate::format::gguf::{export, keys, GgufArray, GgufValue, GgufValueType};
use std::collections::BTreeMap;

/// A metadata value as JavaScript gives it, before its GGUF type is chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum EditValue {
    /// `null`: remove the key.
    Null,
    Bool(bool),
    Number(f64),
    BigInt(i128),
    String(String),
    /// A plain array.
    List(Vec<EditValue>),
    /// A typed array (`Uint32Array`, `Float32Array`, …).
    Array(GgufArray),
    /// `{ type, value }`: the GGUF type named (`UINT32`, `FLOAT64`, `STRING`, …).
    Typed(String, Box<EditValue>),
}

/// One key set (`Some`) or removed (`None`).
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataEdit {
    pub key: String,
    pub value: Option<GgufValue>,
}

impl MetadataEdit {
    /// The edit of `key` to `value`, its GGUF type chosen as the module says.
    /// ERR_INVALID_ARGUMENT for a value no GGUF type holds as given, and for the keys that
    /// describe a file's place in a split set (`split.*`: set by the writer, see
    /// `maxShardBytes`).
    pub fn new(key: impl Into<String>, value: EditValue) -> Result<MetadataEdit> {
        let key = key.into();
        let fail = |msg: String| CoreError::invalid_argument(format!("metadata '{key}': {msg}"));
        if key.is_empty() {
            return Err(fail("keys cannot be empty".to_string()));
        }
        if is_split_key(&key) {
            return Err(fail(
                "split.* keys describe the files of a split GGUF and are written by the \
                 writer (use maxShardBytes)"
                    .to_string(),
            ));
        }
        let value = match value {
            EditValue::Null => None,
            v => Some(infer(&v).map_err(fail)?),
        };
        Ok(MetadataEdit { key, value })
    }
}

/// A GGUF type by its spec name (`UINT32`), or by the short names gguf-py prints (`U32`,
/// `F32`).
fn type_named(name: &str) -> Option<GgufValueType> {
    use GgufValueType as T;
    let upper = name.to_ascii_uppercase();
    [
        T::U8,
        T::I8,
        T::U16,
        T::I16,
        T::U32,
        T::I32,
        T::F32,
        T::Bool,
        T::String,
        T::U64,
        T::I64,
        T::F64,
    ]
    .into_iter()
    .find(|t| t.name() == upper)
}

type Msg = String;

/// The GGUF value of `v`, its type chosen as the module says.
fn infer(v: &EditValue) -> std::result::Result<GgufValue, Msg> {
    Ok(match v {
        EditValue::Null => {
            return Err("null is allowed only as a whole value (it removes the key)".into())
        }
        EditValue::Bool(b) => GgufValue::Bool(*b),
        EditValue::String(s) => GgufValue::String(s.clone()),
        EditValue::Number(n) => number(*n),
        EditValue::BigInt(b) => bigint(*b)?,
        EditValue::Array(a) => GgufValue::Array(a.clone()),
        EditValue::List(items) => {
            let ty = items
                .iter()
                .map(|i| infer(i).map(|v| v.value_type()))
                .try_fold(None::<GgufValueType>, |acc, t| {
                    let t = t?;
                    Ok::<_, Msg>(Some(match acc {
                        None => t,
                        Some(a) => widen(a, t).ok_or_else(|| {
                            format!(
                                "an array holds values of one type, not {} and {}",
                                a.name(),
                                t.name()
                            )
                        })?,
                    }))
                })?
                .ok_or(
                    "an empty array has no element type: give one ({ type: 'INT32', value: [] })",
                )?;
            list(ty, items)?
        }
        EditValue::Typed(name, value) => {
            let ty = type_named(name).ok_or_else(|| {
                format!("'{name}' is not a GGUF value type (UINT8 … FLOAT64, BOOL, STRING)")
            })?;
            match &**value {
                EditValue::List(items) => list(ty, items)?,
                other => typed(ty, other)?,
            }
        }
    })
}

/// An untyped number as gguf-py types a Python value: integers INT32 (INT64 when beyond it
/// but exact in a double), others FLOAT32.
fn number(n: f64) -> GgufValue {
    const SAFE: f64 = 9_007_199_254_740_991.0;
    if n.fract() == 0.0 && n >= f64::from(i32::MIN) && n <= f64::from(i32::MAX) {
        GgufValue::I32(n as i32)
    } else if n.fract() == 0.0 && n.abs() <= SAFE {
        GgufValue::I64(n as i64)
    } else {
        GgufValue::F32(n as f32)
    }
}

fn bigint(b: i128) -> std::result::Result<GgufValue, Msg> {
    if let Ok(v) = i64::try_from(b) {
        Ok(GgufValue::I64(v))
    } else {
        u64::try_from(b)
            .map(GgufValue::U64)
            .map_err(|_| format!("{b} is beyond UINT64 and INT64"))
    }
}

/// The element type of an array holding values inferred as `a` and `b`: the same type, or
/// the wider of two number types.
fn widen(a: GgufValueType, b: GgufValueType) -> Option<GgufValueType> {
    use GgufValueType as T;
    let rank = |t| match t {
        T::I32 => Some(0),
        T::I64 => Some(1),
        T::U64 => Some(1),
        T::F32 => Some(2),
        _ => None,
    };
    if a == b {
        return Some(a);
    }
    match (rank(a)?, rank(b)?) {
        (1, 1) => None, // INT64 and UINT64: no type holds both
        (x, y) => Some(if x >= y { a } else { b }),
    }
}

/// `value` as a scalar of type `ty`, refusing values the type cannot hold exactly (integers)
/// or at all.
fn typed(ty: GgufValueType, value: &EditValue) -> std::result::Result<GgufValue, Msg> {
    use GgufValueType as T;
    let wrong = || format!("{} cannot be stored as {}", describe(value), ty.name());
    let int = || -> std::result::Result<i128, Msg> {
        match value {
            EditValue::Number(n) if n.fract() == 0.0 && n.abs() <= 9.007_199_254_740_991e15 => {
                Ok(*n as i128)
            }
            EditValue::BigInt(b) => Ok(*b),
            _ => Err(wrong()),
        }
    };
    macro_rules! int_as {
        ($t:ty, $variant:ident) => {
            GgufValue::$variant(<$t>::try_from(int()?).map_err(|_| wrong())?)
        };
    }
    Ok(match ty {
        T::U8 => int_as!(u8, U8),
        T::I8 => int_as!(i8, I8),
        T::U16 => int_as!(u16, U16),
        T::I16 => int_as!(i16, I16),
        T::U32 => int_as!(u32, U32),
        T::I32 => int_as!(i32, I32),
        T::U64 => int_as!(u64, U64),
        T::I64 => int_as!(i64, I64),
        T::F32 | T::F64 => {
            let n = match value {
                EditValue::Number(n) => *n,
                EditValue::BigInt(b) => *b as f64,
                _ => return Err(wrong()),
            };
            if ty == T::F32 {
                GgufValue::F32(n as f32)
            } else {
                GgufValue::F64(n)
            }
        }
        T::Bool => match value {
            EditValue::Bool(b) => GgufValue::Bool(*b),
            _ => return Err(wrong()),
        },
        T::String => match value {
            EditValue::String(s) => GgufValue::String(s.clone()),
            _ => return Err(wrong()),
        },
        T::Array => return Err(wrong()),
    })
}

fn describe(v: &EditValue) -> String {
    match v {
        EditValue::Null => "null".into(),
        EditValue::Bool(b) => b.to_string(),
        EditValue::Number(n) => n.to_string(),
        EditValue::BigInt(b) => format!("{b}n"),
        EditValue::String(_) => "a string".into(),
        EditValue::List(_) | EditValue::Array(_) => "an array".into(),
        EditValue::Typed(..) => "an object".into(),
    }
}

/// `items` as an ARRAY of `ty`.
fn list(ty: GgufValueType, items: &[EditValue]) -> std::result::Result<GgufValue, Msg> {
    let values: Vec<GgufValue> = items
        .iter()
        .map(|i| typed(ty, i))
        .collect::<std::result::Result<_, _>>()?;
    macro_rules! collect {
        ($variant:ident) => {
            GgufArray::$variant(
                values
                    .into_iter()
                    .filter_map(|v| match v {
                        GgufValue::$variant(x) => Some(x),
                        _ => None,
                    })
                    .collect(),
            )
        };
    }
    use GgufValueType as T;
    Ok(GgufValue::Array(match ty {
        T::U8 => collect!(U8),
        T::I8 => collect!(I8),
        T::U16 => collect!(U16),
        T::I16 => collect!(I16),
        T::U32 => collect!(U32),
        T::I32 => collect!(I32),
        T::F32 => collect!(F32),
        T::Bool => collect!(Bool),
        T::String => collect!(String),
        T::U64 => collect!(U64),
        T::I64 => collect!(I64),
        T::F64 => collect!(F64),
        T::Array => return Err("GGUF has no arrays of arrays".into()),
    }))
}

/// Apply `edits` to a GGUF output's key/values: a key set replaces its value where it is
/// (new keys go last), a key removed goes. `general.architecture` cannot be removed (every
/// GGUF reader needs it).
pub fn apply_gguf(metadata: &mut Vec<(String, GgufValue)>, edits: &[MetadataEdit]) -> Result<()> {
    for edit in edits {
        let at = metadata.iter().position(|(k, _)| *k == edit.key);
        match (&edit.value, at) {
            (None, _) if edit.key == keys::ARCHITECTURE => {
                return Err(CoreError::invalid_argument(format!(
                    "metadata '{}' cannot be removed: readers of GGUF need it",
                    keys::ARCHITECTURE
                )))
            }
            (None, Some(i)) => {
                metadata.remove(i);
            }
            (None, None) => {}
            (Some(v), Some(i)) => metadata[i].1 = v.clone(),
            (Some(v), None) => metadata.push((edit.key.clone(), v.clone())),
        }
    }
    Ok(())
}

/// Apply `edits` to a string-valued metadata (SafeTensors `__metadata__`, weights.mlx's
/// `metadata`): values as the text of their GGUF value.
pub fn apply_strings(metadata: &mut BTreeMap<String, String>, edits: &[MetadataEdit]) {
    for edit in edits {
        match &edit.value {
            None => {
                metadata.remove(&edit.key);
            }
            Some(v) => {
                metadata.insert(edit.key.clone(), export::value_as_string(v));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use EditValue as E;

    fn value(v: E) -> GgufValue {
        MetadataEdit::new("k", v).unwrap().value.unwrap()
    }

    #[test]
    fn types_are_gguf_pys_unless_given() {
        assert_eq!(value(E::String("x".into())), GgufValue::String("x".into()));
        assert_eq!(value(E::Bool(true)), GgufValue::Bool(true));
        assert_eq!(value(E::Number(7.0)), GgufValue::I32(7));
        assert_eq!(value(E::Number(-2147483648.0)), GgufValue::I32(i32::MIN));
        assert_eq!(value(E::Number(4294967296.0)), GgufValue::I64(1 << 32));
        assert_eq!(value(E::Number(0.5)), GgufValue::F32(0.5));
        assert_eq!(value(E::BigInt(-1)), GgufValue::I64(-1));
        assert_eq!(value(E::BigInt(u64::MAX.into())), GgufValue::U64(u64::MAX));
        assert_eq!(
            value(E::List(vec![E::Number(1.0), E::Number(1.5)])),
            GgufValue::Array(GgufArray::F32(vec![1.0, 1.5]))
        );
        assert_eq!(
            value(E::List(vec![E::String("a".into())])),
            GgufValue::Array(GgufArray::String(vec!["a".into()]))
        );
        let typed = |t: &str, v: E| E::Typed(t.into(), Box::new(v));
        assert_eq!(value(typed("UINT32", E::Number(5.0))), GgufValue::U32(5));
        assert_eq!(value(typed("float64", E::Number(0.1))), GgufValue::F64(0.1));
        assert_eq!(
            value(typed("UINT8", E::List(vec![]))),
            GgufValue::Array(GgufArray::U8(vec![]))
        );
        assert_eq!(MetadataEdit::new("k", E::Null).unwrap().value, None);
    }

    #[test]
    fn values_no_type_holds_are_refused() {
        let typed = |t: &str, v: E| E::Typed(t.into(), Box::new(v));
        for (v, fragment) in [
            (
                typed("UINT8", E::Number(256.0)),
                "cannot be stored as UINT8",
            ),
            (
                typed("UINT32", E::Number(-1.0)),
                "cannot be stored as UINT32",
            ),
            (typed("INT32", E::Number(1.5)), "cannot be stored as INT32"),
            (typed("BOOL", E::Number(1.0)), "cannot be stored as BOOL"),
            (typed("QUUX", E::Number(1.0)), "not a GGUF value type"),
            (E::List(vec![]), "empty array"),
            (
                E::List(vec![E::Number(1.0), E::String("a".into())]),
                "one type",
            ),
            (E::List(vec![E::List(vec![])]), "empty array"),
            (E::BigInt(1 << 64), "beyond UINT64"),
        ] {
            let e = MetadataEdit::new("k", v).unwrap_err();
            assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
            assert!(e.detail().contains(fragment), "{e}");
        }
        let e = MetadataEdit::new("split.count", E::Number(2.0)).unwrap_err();
        assert!(e.detail().contains("maxShardBytes"), "{e}");
    }

    #[test]
    fn edits_replace_in_place_append_and_remove() {
        let mut md = vec![
            (keys::ARCHITECTURE.to_string(), GgufValue::from("llama")),
            ("a".to_string(), GgufValue::U32(1)),
            ("b".to_string(), GgufValue::U32(2)),
        ];
        let edits = [
            MetadataEdit::new("a", E::String("x".into())).unwrap(),
            MetadataEdit::new("b", E::Null).unwrap(),
            MetadataEdit::new("c", E::Bool(false)).unwrap(),
            MetadataEdit::new("absent", E::Null).unwrap(),
        ];
        apply_gguf(&mut md, &edits).unwrap();
        assert_eq!(
            md,
            vec![
                (keys::ARCHITECTURE.to_string(), GgufValue::from("llama")),
                ("a".to_string(), GgufValue::from("x")),
                ("c".to_string(), GgufValue::Bool(false)),
            ]
        );
        let e = apply_gguf(
            &mut md,
            &[MetadataEdit::new(keys::ARCHITECTURE, E::Null).unwrap()],
        )
        .unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
        let mut strings = BTreeMap::from([("format".to_string(), "pt".to_string())]);
        apply_strings(&mut strings, &edits);
        apply_strings(
            &mut strings,
            &[MetadataEdit::new("format", E::Null).unwrap()],
        );
        assert_eq!(
            strings,
            BTreeMap::from([
                ("a".to_string(), "x".to_string()),
                ("c".to_string(), "false".to_string())
            ])
        );
    }
}
