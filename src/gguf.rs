//! `GgufFile`: a GGUF file with its header as GGUF describes it (version, alignment, typed
//! metadata, each tensor's ggml type and offset) and its tensors as a `WeightsFile` serves
//! them (block types decoded to F32, plain types as stored, `as: 'raw'` the stored blocks).
//! The parsing and decoding are `stcore::format::gguf::GgufSource`'s; this module converts
//! arguments and values.

use crate::error::{guard, CoreResult, OrThrow};
use crate::handle::{
    own_record, reader_factories, reader_methods, Reader, SourceHandle, StringRecord, TensorInfo,
};
use napi::bindgen_prelude::*;
use napi::{sys, Env, JsValue};
use napi_derive::napi;
use stcore::format::gguf::{GgufArray, GgufSource, GgufValue};
use stcore::format::OpenOptions;
use stcore::memory::Backend;
use stcore::TensorSource;
use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

/// A GGUF file (llama.cpp, ggml), validated at open and read lazily.
#[napi(custom_finalize)]
pub struct GgufFile {
    pub(crate) inner: SourceHandle<GgufSource>,
    /// Where the bytes came from, for files read from memory (a URL).
    pub(crate) origin: Option<String>,
    /// The `metadata` object, made at its first read and the same at every read after (made
    /// anew, each read would copy every array of the header again). Released by `close()` or
    /// when JS collects this object.
    metadata: RefCell<Option<ObjectRef<false>>>,
}

impl ObjectFinalize for GgufFile {
    fn finalize(self, env: Env) -> napi::Result<()> {
        self.drop_metadata(&env)
    }
}

pub(crate) fn open_gguf(path: &str, backend: CoreResult<Backend>) -> CoreResult<GgufFile> {
    let mut options = OpenOptions::with_backend(backend?);
    let inner = GgufSource::open(Path::new(path), &mut options)?;
    Ok(GgufFile::wrap(inner, None))
}

impl GgufFile {
    pub(crate) fn wrap(source: GgufSource, origin: Option<String>) -> GgufFile {
        GgufFile::wrap_shared(Arc::new(source), origin)
    }

    /// A `GgufFile` over a source shared with another holder (a remote file's header).
    pub(crate) fn wrap_shared(source: Arc<GgufSource>, origin: Option<String>) -> GgufFile {
        let path = origin
            .clone()
            .or_else(|| source.path().map(|p| p.display().to_string()));
        GgufFile {
            inner: SourceHandle::new("GgufFile", path, source),
            origin,
            metadata: RefCell::new(None),
        }
    }

    /// Let JS collect the `metadata` object made for this file (if one was).
    fn drop_metadata(&self, env: &Env) -> napi::Result<()> {
        match self.metadata.borrow_mut().take() {
            Some(made) => made.unref(env),
            None => Ok(()),
        }
    }
}

/// `GgufFile.info`: the common fields, then the ones GGUF adds.
fn tensor_info(source: &GgufSource, name: &str) -> CoreResult<TensorInfo> {
    let common = crate::handle::tensor_info(source, name)?;
    let g = source.gguf_info(name).ok_or_else(|| {
        stcore::CoreError::not_found("no such tensor in the file").with_tensor(name)
    })?;
    Ok(TensorInfo {
        data_offsets: Some(common.data_offsets.unwrap_or_default()),
        ggml_type: Some(g.ggml_type.name().to_string()),
        offset: Some(source.file_offset(name).unwrap_or(g.offset) as f64),
        ..common
    })
}

reader_methods!(GgufFile, "GgufFile");
reader_factories!(
    GgufFile,
    "GgufFile",
    open_gguf,
    "GgufFile.open(path), openAsync(path) or openUrl(url)",
    "Promise<GgufFile>"
);

impl Reader for GgufFile {}

#[napi]
impl GgufFile {
    #[napi(catch_unwind, getter, ts_return_type = "'gguf'")]
    pub fn format(&self, env: Env) -> napi::Result<String> {
        guard(&env, "GgufFile.format", || {
            Ok(self.inner.get_or_throw(&env)?.format().name().to_string())
        })
    }

    /// The file opened (the URL for `openUrl`).
    #[napi(catch_unwind, getter)]
    pub fn path(&self, env: Env) -> napi::Result<Option<String>> {
        guard(&env, "GgufFile.path", || {
            let inner = self.inner.get_or_throw(&env)?;
            Ok(self
                .origin
                .clone()
                .or_else(|| inner.path().map(|p| p.display().to_string())))
        })
    }

    /// The GGUF version of the file (2 or 3).
    #[napi(catch_unwind, getter)]
    pub fn version(&self, env: Env) -> napi::Result<u32> {
        guard(&env, "GgufFile.version", || {
            Ok(self.inner.get_or_throw(&env)?.header().version)
        })
    }

    /// The alignment of the data section and of each tensor (`general.alignment`, default 32).
    #[napi(catch_unwind, getter)]
    pub fn alignment(&self, env: Env) -> napi::Result<u32> {
        guard(&env, "GgufFile.alignment", || {
            Ok(self.inner.get_or_throw(&env)?.header().alignment as u32)
        })
    }

    /// Offset of the data section from the start of the file.
    #[napi(catch_unwind, getter)]
    pub fn data_offset(&self, env: Env) -> napi::Result<f64> {
        guard(&env, "GgufFile.dataOffset", || {
            Ok(self.inner.get_or_throw(&env)?.header().data_offset as f64)
        })
    }

    /// Every key/value in file order, typed: see `GgufValue`. The same object at every read.
    #[napi(catch_unwind, getter, ts_return_type = "Record<string, GgufValue>")]
    pub fn metadata(&self, env: Env) -> napi::Result<GgufMetadata> {
        guard(&env, "GgufFile.metadata", || {
            let inner = self.inner.get_or_throw(&env)?;
            let mut made = self.metadata.borrow_mut();
            if let Some(made) = made.as_ref() {
                return Ok(GgufMetadata(made.get_value(&env)?.raw()));
            }
            let pairs = &inner.header().metadata;
            // SAFETY: `env` is the live env of this call.
            let value =
                unsafe { own_record(env.raw(), pairs.iter().map(|(k, v)| (k.clone(), Value(v)))) }?;
            *made = Some(Object::from_raw(env.raw(), value).create_ref()?);
            Ok(GgufMetadata(value))
        })
    }

    /// Each key's GGUF type: 'UINT32', 'STRING', … and 'ARRAY[FLOAT32]' for arrays.
    #[napi(catch_unwind, getter, ts_return_type = "Record<string, string>")]
    pub fn metadata_types(&self, env: Env) -> napi::Result<StringRecord> {
        guard(&env, "GgufFile.metadataTypes", || {
            Ok(StringRecord(
                self.inner
                    .get_or_throw(&env)?
                    .header()
                    .metadata
                    .iter()
                    .map(|(k, v)| (k.clone(), type_name(v)))
                    .collect(),
            ))
        })
    }

    /// Always null (model directories have one).
    #[napi(catch_unwind, getter, ts_return_type = "null")]
    pub fn config(&self, env: Env) -> napi::Result<Null> {
        guard(&env, "GgufFile.config", || {
            self.inner.get_or_throw(&env)?;
            Ok(Null)
        })
    }

    /// Size of the whole file in bytes.
    #[napi(catch_unwind, getter)]
    pub fn byte_length(&self, env: Env) -> napi::Result<f64> {
        guard(&env, "GgufFile.byteLength", || {
            Ok(self.inner.get_or_throw(&env)?.file_len() as f64)
        })
    }

    #[napi(
        catch_unwind,
        strict,
        ts_return_type = "TensorInfo & { dataOffsets: [number, number]; ggmlType: string; offset: number }"
    )]
    pub fn info(&self, env: Env, name: String) -> napi::Result<TensorInfo> {
        guard(&env, "GgufFile.info", || {
            self.inner
                .get()
                .and_then(|inner| tensor_info(&inner, &name))
                .or_throw(&env)
        })
    }

    /// Release the file now (see `SafeTensorsFile.close`). A second call does nothing.
    #[napi(catch_unwind)]
    pub fn close(&self, env: Env) -> napi::Result<()> {
        guard(&env, "GgufFile.close", || {
            self.inner.close();
            self.drop_metadata(&env)
        })
    }
}

/// A GGUF type name for `metadataTypes`.
fn type_name(v: &GgufValue) -> String {
    match v {
        GgufValue::Array(a) => format!("ARRAY[{}]", array_type_name(a)),
        other => other.value_type().name().to_string(),
    }
}

fn array_type_name(a: &GgufArray) -> &'static str {
    match a {
        GgufArray::U8(_) => "UINT8",
        GgufArray::I8(_) => "INT8",
        GgufArray::U16(_) => "UINT16",
        GgufArray::I16(_) => "INT16",
        GgufArray::U32(_) => "UINT32",
        GgufArray::I32(_) => "INT32",
        GgufArray::F32(_) => "FLOAT32",
        GgufArray::Bool(_) => "BOOL",
        GgufArray::String(_) => "STRING",
        GgufArray::U64(_) => "UINT64",
        GgufArray::I64(_) => "INT64",
        GgufArray::F64(_) => "FLOAT64",
    }
}

/// The metadata object of a file, made by `metadata` during the call it is returned from.
pub struct GgufMetadata(sys::napi_value);

impl TypeName for GgufMetadata {
    fn type_name() -> &'static str {
        "Record<string, GgufValue>"
    }
    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ToNapiValue for GgufMetadata {
    unsafe fn to_napi_value(_: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        Ok(val.0)
    }
}

/// One metadata value: numbers for 8/16/32-bit integers and floats, BigInt for 64-bit
/// integers, strings, booleans; arrays of numbers as the typed array of their type, arrays
/// of strings and booleans as JS arrays.
struct Value<'a>(&'a GgufValue);

impl ToNapiValue for Value<'_> {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        // SAFETY (all arms): called with a live env, as this trait requires.
        unsafe {
            match val.0 {
                GgufValue::U8(v) => u32::to_napi_value(env, u32::from(*v)),
                GgufValue::I8(v) => i32::to_napi_value(env, i32::from(*v)),
                GgufValue::U16(v) => u32::to_napi_value(env, u32::from(*v)),
                GgufValue::I16(v) => i32::to_napi_value(env, i32::from(*v)),
                GgufValue::U32(v) => u32::to_napi_value(env, *v),
                GgufValue::I32(v) => i32::to_napi_value(env, *v),
                GgufValue::F32(v) => f64::to_napi_value(env, f64::from(*v)),
                GgufValue::F64(v) => f64::to_napi_value(env, *v),
                GgufValue::Bool(v) => bool::to_napi_value(env, *v),
                GgufValue::String(v) => <&str>::to_napi_value(env, v.as_str()),
                GgufValue::U64(v) => BigInt::to_napi_value(env, BigInt::from(*v)),
                GgufValue::I64(v) => BigInt::to_napi_value(env, BigInt::from(*v)),
                GgufValue::Array(a) => JsArray(a).to_napi_value_inner(env),
            }
        }
    }
}

#[derive(Clone, Copy)]
struct JsArray<'a>(&'a GgufArray);

impl JsArray<'_> {
    /// # Safety
    /// `env` must be the live env of the current Node-API call.
    unsafe fn to_napi_value_inner(self, env: sys::napi_env) -> napi::Result<sys::napi_value> {
        // SAFETY (all arms): called with a live env.
        unsafe {
            match self.0 {
                GgufArray::U8(v) => Uint8Array::to_napi_value(env, Uint8Array::new(v.clone())),
                GgufArray::I8(v) => Int8Array::to_napi_value(env, Int8Array::new(v.clone())),
                GgufArray::U16(v) => Uint16Array::to_napi_value(env, Uint16Array::new(v.clone())),
                GgufArray::I16(v) => Int16Array::to_napi_value(env, Int16Array::new(v.clone())),
                GgufArray::U32(v) => Uint32Array::to_napi_value(env, Uint32Array::new(v.clone())),
                GgufArray::I32(v) => Int32Array::to_napi_value(env, Int32Array::new(v.clone())),
                GgufArray::F32(v) => Float32Array::to_napi_value(env, Float32Array::new(v.clone())),
                GgufArray::F64(v) => Float64Array::to_napi_value(env, Float64Array::new(v.clone())),
                GgufArray::U64(v) => {
                    BigUint64Array::to_napi_value(env, BigUint64Array::new(v.clone()))
                }
                GgufArray::I64(v) => {
                    BigInt64Array::to_napi_value(env, BigInt64Array::new(v.clone()))
                }
                GgufArray::Bool(v) => js_array(env, v.iter().map(|b| bool::to_napi_value(env, *b))),
                GgufArray::String(v) => js_array(
                    env,
                    v.iter().map(|s| <&str>::to_napi_value(env, s.as_str())),
                ),
            }
        }
    }
}

/// A JS array of the given values, in order.
///
/// # Safety
/// `env` must be the live env of the current Node-API call.
unsafe fn js_array(
    env: sys::napi_env,
    items: impl ExactSizeIterator<Item = napi::Result<sys::napi_value>>,
) -> napi::Result<sys::napi_value> {
    let mut array = std::ptr::null_mut();
    // SAFETY: plain Node-API calls on the caller's env with values created here.
    unsafe {
        napi::check_status!(sys::napi_create_array_with_length(
            env,
            items.len(),
            &mut array
        ))?;
        for (i, item) in items.enumerate() {
            napi::check_status!(sys::napi_set_element(env, array, i as u32, item?))?;
        }
    }
    Ok(array)
}
