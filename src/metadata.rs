//! `convert`'s `metadata` option: an object of key → value (`null` removes the key) read
//! into the core's edits ([`stcore::convert::metadata`] chooses the GGUF types). Typed
//! arrays are taken in two phases (see [`crate::args`]): every property is read first, the
//! arrays' bytes copied last.

use crate::args::{with_views, ViewArg};
use crate::error::{invalid_argument, CoreResult};
use napi::bindgen_prelude::*;
use napi::{JsValue, ValueType};
use stcore::cast;
use stcore::convert::{EditValue, MetadataEdit};
use stcore::format::gguf::GgufArray;

/// Arrays and `{ type, value }` objects nest at most this deep (an array of arrays is
/// refused by the core; the bound keeps a deeply nested value from taking the stack).
const MAX_DEPTH: usize = 4;

/// A value read in phase 1: typed arrays as the index of their view.
enum Pending {
    Value(EditValue),
    View(usize),
    List(Vec<Pending>),
    Typed(String, Box<Pending>),
}

/// The edits of `options.metadata` (none when it is absent).
pub fn metadata_edits(options: &Option<Object>) -> CoreResult<Vec<MetadataEdit>> {
    let Some(o) = options else {
        return Ok(Vec::new());
    };
    let wrong = || invalid_argument("options.metadata must be an object of key → value");
    let value: Unknown = o.get_named_property("metadata").map_err(|_| wrong())?;
    match value.get_type().map_err(|_| wrong())? {
        ValueType::Undefined => return Ok(Vec::new()),
        ValueType::Object if !value.is_array().map_err(|_| wrong())? => {}
        _ => return Err(wrong()),
    }
    // SAFETY: checked to be an object.
    let object: Object = unsafe { value.cast() }.map_err(|_| wrong())?;
    let keys = Object::keys(&object).map_err(|_| wrong())?;
    let mut views = Vec::new();
    let mut pending = Vec::with_capacity(keys.len());
    for key in keys {
        let what = format!("options.metadata['{key}']");
        let v: Unknown = object
            .get_named_property(&key)
            .map_err(|e| invalid_argument(format!("{what}: {}", e.reason)))?;
        pending.push((key, read(v, &mut views, &what, 0)?));
    }
    let refs: Vec<&ViewArg> = views.iter().collect();
    with_views(&refs, |bytes| {
        pending
            .into_iter()
            .map(|(key, p)| {
                let value = resolve(p, &views, bytes);
                MetadataEdit::new(key, value)
            })
            .collect()
    })
}

fn read<'env>(
    v: Unknown<'env>,
    views: &mut Vec<ViewArg<'env>>,
    what: &str,
    depth: usize,
) -> CoreResult<Pending> {
    let fail = |msg: &str| invalid_argument(format!("{what} {msg}"));
    let napi = |e: napi::Error| invalid_argument(format!("{what}: {}", e.reason));
    if depth > MAX_DEPTH {
        return Err(fail("nests too deep"));
    }
    Ok(Pending::Value(match v.get_type().map_err(napi)? {
        ValueType::Null => EditValue::Null,
        ValueType::Boolean => EditValue::Bool(bool::from_unknown(v).map_err(napi)?),
        ValueType::Number => EditValue::Number(f64::from_unknown(v).map_err(napi)?),
        ValueType::String => EditValue::String(String::from_unknown(v).map_err(napi)?),
        ValueType::BigInt => {
            let b = BigInt::from_unknown(v).map_err(napi)?;
            let magnitude = match b.words.as_slice() {
                [] => 0u128,
                [lo] => u128::from(*lo),
                [lo, hi] => u128::from(*lo) | (u128::from(*hi) << 64),
                _ => return Err(fail("is beyond 128 bits")),
            };
            let m = i128::try_from(magnitude).map_err(|_| fail("is beyond 128 bits"))?;
            EditValue::BigInt(if b.sign_bit { -m } else { m })
        }
        ValueType::Object => {
            if let Some(view) = ViewArg::typed_array(&v, what)? {
                views.push(view);
                return Ok(Pending::View(views.len() - 1));
            }
            if v.is_array().map_err(napi)? {
                // SAFETY: checked to be an array.
                let items: Vec<Unknown> = unsafe { v.cast() }.map_err(napi)?;
                let items = items
                    .into_iter()
                    .map(|item| read(item, views, what, depth + 1))
                    .collect::<CoreResult<_>>()?;
                return Ok(Pending::List(items));
            }
            // SAFETY: checked to be an object.
            let o: Object = unsafe { v.cast() }.map_err(napi)?;
            let ty: Option<String> = o
                .get_named_property("type")
                .map_err(|_| fail("must be { type: 'UINT32' | …, value } when an object"))?;
            let Some(ty) = ty else {
                return Err(fail(
                    "must be a string, number, bigint, boolean, array, typed array, null or \
                     { type, value }",
                ));
            };
            let inner: Unknown = o.get_named_property("value").map_err(napi)?;
            let inner = read(inner, views, what, depth + 1)?;
            return Ok(Pending::Typed(ty, Box::new(inner)));
        }
        _ => {
            return Err(fail(
                "must be a string, number, bigint, boolean, array, typed array, null or \
                 { type, value }",
            ))
        }
    }))
}

/// Phase 2: the value with every typed array's elements copied.
fn resolve(p: Pending, views: &[ViewArg], bytes: &[&[u8]]) -> EditValue {
    match p {
        Pending::Value(v) => v,
        Pending::List(items) => EditValue::List(
            items
                .into_iter()
                .map(|i| resolve(i, views, bytes))
                .collect(),
        ),
        Pending::Typed(ty, inner) => EditValue::Typed(ty, Box::new(resolve(*inner, views, bytes))),
        Pending::View(i) => {
            let b = bytes[i];
            EditValue::Array(match views[i].kind() {
                TypedArrayType::Int8 => GgufArray::I8(cast::elements::<i8>(b).into_owned()),
                TypedArrayType::Uint8 | TypedArrayType::Uint8Clamped => GgufArray::U8(b.to_vec()),
                TypedArrayType::Int16 => GgufArray::I16(cast::elements::<i16>(b).into_owned()),
                TypedArrayType::Uint16 => GgufArray::U16(cast::elements::<u16>(b).into_owned()),
                TypedArrayType::Int32 => GgufArray::I32(cast::elements::<i32>(b).into_owned()),
                TypedArrayType::Uint32 => GgufArray::U32(cast::elements::<u32>(b).into_owned()),
                TypedArrayType::Float32 => GgufArray::F32(cast::elements::<f32>(b).into_owned()),
                TypedArrayType::Float64 => GgufArray::F64(cast::elements::<f64>(b).into_owned()),
                TypedArrayType::BigInt64 => GgufArray::I64(cast::elements::<i64>(b).into_owned()),
                TypedArrayType::BigUint64 => GgufArray::U64(cast::elements::<u64>(b).into_owned()),
                // ViewArg refuses the other kinds.
                _ => GgufArray::U8(Vec::new()),
            })
        }
    }
}
