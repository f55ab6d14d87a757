//! `saveFile`, `saveFileAsync`, `serialize`: JS tensors → SafeTensors bytes.

use crate::args::{with_views, ViewArg};
use crate::error::{guard, invalid_argument, CoreResult, OrThrow};
use crate::tasks::CoreTask;
use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;
use stcore::cast;
use stcore::format::safetensors;
use stcore::fsutil;
use stcore::tensor::PackedTensors;
use stcore::{CoreError, DType, TensorView};
use std::collections::BTreeMap;
use std::path::Path;

#[napi(object, object_to_js = false)]
pub struct SaveOptions {
    #[napi(ts_type = "Record<string, string>")]
    pub metadata: Option<serde_json::Value>,
    /// `saveFile` / `saveFileAsync` / `saveSafetensors`: `fsync` the new file before renaming it into place, and
    /// its directory after, so that it survives a power cut once the call returns (default
    /// false). Without it the write is still atomic — a crashed or killed process leaves the
    /// complete old or new file — but a power cut may leave the old file, the new one, or an
    /// empty file, as with `fs.writeFileSync`.
    pub durable: Option<bool>,
}

/// The `durable` option of every writer (`true` → fsync; absent or false → rename only),
/// read once. `Copy` and `Send`, so an asynchronous task carries it to the thread that
/// writes and makes the core's options there with [`Durable::options`] (those may hold a
/// progress callback, and are not `Send`).
#[derive(Debug, Clone, Copy)]
pub struct Durable(fsutil::Durability);

impl Durable {
    pub fn arg(durable: Option<bool>) -> Durable {
        Durable(if durable == Some(true) {
            fsutil::Durability::Sync
        } else {
            fsutil::Durability::RenameOnly
        })
    }

    pub fn durability(self) -> fsutil::Durability {
        self.0
    }

    /// The core's write options: this durability, no progress reports.
    pub fn options(self) -> fsutil::WriteOptions<'static> {
        fsutil::WriteOptions::with_durability(self.0)
    }
}

/// `__metadata__` from the caller: every value must be a string.
pub fn metadata_arg(options: &Option<SaveOptions>) -> CoreResult<Option<BTreeMap<String, String>>> {
    let Some(value) = options.as_ref().and_then(|o| o.metadata.as_ref()) else {
        return Ok(None);
    };
    string_map(value, "options.metadata").map(Some)
}

pub fn string_map(value: &serde_json::Value, what: &str) -> CoreResult<BTreeMap<String, String>> {
    let map = value
        .as_object()
        .ok_or_else(|| invalid_argument(format!("{what} must be an object of strings")))?;
    map.iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => Ok((k.clone(), s.clone())),
            other => Err(invalid_argument(format!(
                "{what}['{k}'] must be a string, got {other}"
            ))),
        })
        .collect()
}

pub fn natural_dtype(t: TypedArrayType) -> CoreResult<DType> {
    Ok(match t {
        TypedArrayType::Int8 => DType::I8,
        TypedArrayType::Uint8 | TypedArrayType::Uint8Clamped => DType::U8,
        TypedArrayType::Int16 => DType::I16,
        TypedArrayType::Uint16 => DType::U16,
        TypedArrayType::Int32 => DType::I32,
        TypedArrayType::Uint32 => DType::U32,
        TypedArrayType::Float32 => DType::F32,
        TypedArrayType::Float64 => DType::F64,
        TypedArrayType::BigInt64 => DType::I64,
        TypedArrayType::BigUint64 => DType::U64,
        other => {
            return Err(invalid_argument(format!(
                "unsupported typed array type {other:?}"
            )))
        }
    })
}

fn napi_arg(name: &str) -> impl Fn(napi::Error) -> CoreError + '_ {
    // The message gets its "tensor 'NAME': " prefix from the error's tensor.
    move |e| invalid_argument(e.reason).with_tensor(name)
}

fn shape_arg(values: &[f64], name: &str) -> CoreResult<Vec<usize>> {
    values
        .iter()
        .map(|&d| {
            if d.fract() == 0.0 && (0.0..=9007199254740991.0).contains(&d) {
                Ok(d as usize)
            } else {
                Err(invalid_argument(format!(
                    "shape entries must be non-negative integers, got {d}"
                ))
                .with_tensor(name))
            }
        })
        .collect()
}

/// A tensor's data as read in phase 1 (see [`crate::args`]): a typed array still in
/// JavaScript's hands, or bytes already encoded from a `number[]`.
enum DataArg<'env> {
    View(ViewArg<'env>, DType),
    Encoded(Vec<u8>),
}

/// One `TensorInput` (`{dtype?, shape, data}`) with every property read and checked.
struct TensorArg<'env> {
    name: String,
    dtype: DType,
    shape: Vec<usize>,
    data: DataArg<'env>,
}

/// Phase 1 for one entry: read `dtype`, `shape` and `data` (any of which may be a getter).
fn tensor_arg<'env>(name: &str, entry: &Object<'env>) -> CoreResult<TensorArg<'env>> {
    let err = napi_arg(name);
    let dtype: Option<String> = entry.get_named_property("dtype").map_err(&err)?;
    let target = dtype
        .as_deref()
        .map(DType::parse_arg)
        .transpose()
        .map_err(|e| e.with_tensor(name))?;
    let shape: Vec<f64> = entry
        .get_named_property::<Option<Vec<f64>>>("shape")
        .map_err(&err)?
        .ok_or_else(|| {
            invalid_argument("missing shape (an array of integers)").with_tensor(name)
        })?;
    let shape = shape_arg(&shape, name)?;
    let data: Unknown = entry.get_named_property("data").map_err(&err)?;
    let what = format!("tensor '{name}': data");
    let (dtype, data) = if let Some(view) = ViewArg::typed_array(&data, &what)? {
        let src = natural_dtype(view.kind()).map_err(|e| e.with_tensor(name))?;
        (target.unwrap_or(src), DataArg::View(view, src))
    } else if data.is_dataview().map_err(&err)? {
        return Err(invalid_argument(
            "DataView data is not supported; pass a Uint8Array of the raw bytes",
        )
        .with_tensor(name));
    } else if data.is_array().map_err(&err)? {
        // SAFETY: checked to be an array just above.
        let values: Vec<f64> = unsafe { data.cast() }.map_err(|_| {
            invalid_argument(
                "data must be an array of numbers only (for 64-bit integers beyond 2^53, \
                 pass a BigInt64Array or BigUint64Array)",
            )
            .with_tensor(name)
        })?;
        let dtype = target.unwrap_or(DType::F32);
        let bytes = cast::encode_f64(&values, dtype).map_err(|e| e.with_tensor(name))?;
        (dtype, DataArg::Encoded(bytes))
    } else {
        return Err(
            invalid_argument("data must be a typed array or an array of numbers").with_tensor(name),
        );
    };
    Ok(TensorArg {
        name: name.to_string(),
        dtype,
        shape,
        data,
    })
}

/// The `Record<string, TensorInput>` argument, read (phase 1) but with its typed arrays'
/// bytes not yet taken: [`TensorArgs::with_views`] takes them.
pub struct TensorArgs<'env>(Vec<TensorArg<'env>>);

impl<'env> TensorArgs<'env> {
    /// Phase 1: every key and property of every entry (getters and Proxy traps run here).
    pub fn read(tensors: &Object<'env>) -> CoreResult<Self> {
        let names = Object::keys(tensors).map_err(|e| invalid_argument(e.reason.clone()))?;
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            // `get`, not `get_named_property`: a key may contain NUL (it is sent with its length).
            let bad = || {
                invalid_argument("each tensor must be an object {dtype?, shape, data}")
                    .with_tensor(&name)
            };
            let entry: Object<'env> = tensors
                .get::<Object<'env>>(&name)
                .map_err(|_| bad())?
                .ok_or_else(bad)?;
            out.push(tensor_arg(&name, &entry)?);
        }
        Ok(TensorArgs(out))
    }

    /// Phase 2: run `f` on views of every tensor, borrowing typed-array memory where the bytes
    /// can be written as they are. `f` must not call into JavaScript.
    pub fn with_views<R>(
        &self,
        f: impl FnOnce(&[TensorView<'_>]) -> CoreResult<R>,
    ) -> CoreResult<R> {
        let views: Vec<&ViewArg> = self
            .0
            .iter()
            .filter_map(|t| match &t.data {
                DataArg::View(v, _) => Some(v),
                DataArg::Encoded(_) => None,
            })
            .collect();
        with_views(&views, |bytes| {
            let mut bytes = bytes.iter();
            let tensors = self
                .0
                .iter()
                .map(|t| {
                    let data = match &t.data {
                        DataArg::View(_, src) => {
                            let b = bytes.next().expect("one slice per typed array");
                            cast::convert_bytes(*src, b, t.dtype)
                                .map_err(|e| e.with_tensor(&t.name))?
                        }
                        DataArg::Encoded(b) => std::borrow::Cow::Borrowed(b.as_slice()),
                    };
                    TensorView::new(t.name.as_str(), t.dtype, t.shape.clone(), data)
                })
                .collect::<CoreResult<Vec<_>>>()?;
            f(&tensors)
        })
    }
}

/// Write tensors to a SafeTensors file, atomically.
#[napi(
    catch_unwind,
    strict,
    ts_args_type = "path: string, tensors: Record<string, TensorInput>, options?: SaveOptions"
)]
pub fn save_file(
    env: Env,
    path: String,
    tensors: Object,
    options: Option<SaveOptions>,
) -> napi::Result<()> {
    guard(&env, "saveFile", || {
        let run = || {
            let metadata = metadata_arg(&options)?;
            TensorArgs::read(&tensors)?.with_views(|views| {
                safetensors::save_file(
                    Path::new(&path),
                    views,
                    metadata.as_ref(),
                    Durable::arg(options.as_ref().and_then(|o| o.durable)).options(),
                )
            })
        };
        run().or_throw(&env)
    })
}

/// `saveFile` off the event loop (the tensor data is copied first, into one buffer, before
/// this returns, so the caller may reuse, resize or detach its arrays at once).
#[napi(
    catch_unwind,
    strict,
    ts_args_type = "path: string, tensors: Record<string, TensorInput>, options?: SaveOptions",
    ts_return_type = "Promise<void>"
)]
pub fn save_file_async(
    env: Env,
    path: String,
    tensors: Object,
    options: Option<SaveOptions>,
) -> napi::Result<AsyncTask<CoreTask<()>>> {
    guard(&env, "saveFileAsync", || {
        let metadata = metadata_arg(&options).or_throw(&env)?;
        let packed = TensorArgs::read(&tensors)
            .and_then(|args| args.with_views(PackedTensors::pack))
            .or_throw(&env)?;
        let durable = Durable::arg(options.as_ref().and_then(|o| o.durable));
        Ok(CoreTask::new(move || {
            let views = packed.views();
            safetensors::save_file(
                Path::new(&path),
                &views,
                metadata.as_ref(),
                durable.options(),
            )
        }))
    })
}

/// The bytes of a SafeTensors file holding `tensors`.
#[napi(
    catch_unwind,
    strict,
    ts_args_type = "tensors: Record<string, TensorInput>, options?: { metadata?: Record<string, string> }"
)]
pub fn serialize(env: Env, tensors: Object, options: Option<SaveOptions>) -> napi::Result<Buffer> {
    guard(&env, "serialize", || {
        let run = || {
            let metadata = metadata_arg(&options)?;
            TensorArgs::read(&tensors)?
                .with_views(|views| safetensors::serialize(views, metadata.as_ref()))
        };
        run().map(Buffer::from).or_throw(&env)
    })
}
