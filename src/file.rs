//! `SafeTensorsFile`, `loadFile`: reading SafeTensors files from JavaScript.

use crate::error::{guard, invalid_argument, option, CoreResult, OrThrow};
use crate::handle::SourceHandle;
use crate::tasks::CoreTask;
use crate::typed::{ReadAs, ReadMode, TypedArrayOut};
use crate::weights::read_source_all;
use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;
use stcore::format::safetensors::{Backend, SafeTensors, SliceArg, TensorInfo as CoreInfo};
use std::path::Path;
use std::sync::Arc;

#[napi(object, object_to_js = false)]
#[derive(Default)]
pub struct GetOptions {
    #[napi(js_name = "as", ts_type = "'native' | 'F32' | 'F64' | 'raw'")]
    pub as_: Option<String>,
    pub copy: Option<bool>,
}

impl GetOptions {
    pub fn mode(options: &Option<GetOptions>, default: ReadAs) -> CoreResult<ReadMode> {
        let o = options.as_ref();
        ReadMode::parse(
            o.and_then(|o| o.as_.as_deref()),
            o.and_then(|o| o.copy),
            default,
        )
    }
}

#[napi(object, object_from_js = false)]
pub struct Tensor {
    pub name: String,
    #[napi(ts_type = "DType")]
    pub dtype: String,
    pub shape: Vec<i64>,
    #[napi(ts_type = "TypedArray")]
    pub data: TypedArrayOut,
}

#[napi(object, object_from_js = false)]
pub struct TensorInfo {
    pub name: String,
    #[napi(ts_type = "DType")]
    pub dtype: String,
    pub shape: Vec<i64>,
    #[napi(ts_type = "[number, number]")]
    pub data_offsets: Vec<i64>,
    pub byte_length: i64,
    pub numel: i64,
}

pub fn shape_to_js(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}

impl From<&CoreInfo> for TensorInfo {
    fn from(t: &CoreInfo) -> Self {
        TensorInfo {
            name: t.name.clone(),
            dtype: t.dtype.name().to_string(),
            shape: shape_to_js(&t.shape),
            data_offsets: vec![t.data_offsets.0 as i64, t.data_offsets.1 as i64],
            byte_length: t.byte_len() as i64,
            numel: t.numel() as i64,
        }
    }
}

/// Tensors keyed by name, in the order given (JS objects keep string keys in insertion order).
pub struct TensorRecord(pub Vec<Tensor>);

impl TypeName for TensorRecord {
    fn type_name() -> &'static str {
        "Record<string, Tensor>"
    }
    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ToNapiValue for TensorRecord {
    unsafe fn to_napi_value(
        env: napi::sys::napi_env,
        val: Self,
    ) -> napi::Result<napi::sys::napi_value> {
        // SAFETY: called by napi-rs with a live env, as this trait requires.
        unsafe { own_record(env, val.0.into_iter().map(|t| (t.name.clone(), t))) }
    }
}

/// A JS object with one own, enumerable data property per entry, in order, as `JSON.parse`
/// would build it: each key string is created with its length (names may contain NUL) and
/// defined rather than assigned (a tensor or metadata key `__proto__` must not set the
/// object's prototype).
///
/// # Safety
/// `env` must be the live env of the current Node-API call.
pub unsafe fn own_record<V: ToNapiValue>(
    env: napi::sys::napi_env,
    entries: impl Iterator<Item = (String, V)>,
) -> napi::Result<napi::sys::napi_value> {
    use napi::sys;
    let mut obj = std::ptr::null_mut();
    // SAFETY: plain Node-API calls on the caller's env with values created here.
    unsafe {
        napi::check_status!(sys::napi_create_object(env, &mut obj))?;
        for (name, value) in entries {
            let mut key = std::ptr::null_mut();
            napi::check_status!(sys::napi_create_string_utf8(
                env,
                name.as_ptr().cast(),
                name.len() as isize,
                &mut key
            ))?;
            let descriptor = sys::napi_property_descriptor {
                utf8name: std::ptr::null(),
                name: key,
                method: None,
                getter: None,
                setter: None,
                value: V::to_napi_value(env, value)?,
                attributes: sys::PropertyAttributes::writable
                    | sys::PropertyAttributes::enumerable
                    | sys::PropertyAttributes::configurable,
                data: std::ptr::null_mut(),
            };
            napi::check_status!(sys::napi_define_properties(env, obj, 1, &descriptor))?;
        }
    }
    Ok(obj)
}

/// The `__metadata__` map as a JS object (see [`own_record`]).
pub struct StringRecord(pub Vec<(String, String)>);

impl TypeName for StringRecord {
    fn type_name() -> &'static str {
        "Record<string, string>"
    }
    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ToNapiValue for StringRecord {
    unsafe fn to_napi_value(
        env: napi::sys::napi_env,
        val: Self,
    ) -> napi::Result<napi::sys::napi_value> {
        // SAFETY: called by napi-rs with a live env, as this trait requires.
        unsafe { own_record(env, val.0.into_iter()) }
    }
}

pub(crate) fn parse_backend(options: &Option<Object>) -> CoreResult<Backend> {
    match option::<String>(options, "backend")?.as_deref() {
        None | Some("mmap") => Ok(Backend::Mmap),
        Some("read") => Ok(Backend::Read),
        Some(other) => Err(invalid_argument(format!(
            "options.backend must be 'mmap' or 'read', not '{other}'"
        ))),
    }
}

fn open_file(path: &str, backend: CoreResult<Backend>) -> CoreResult<SafeTensorsFile> {
    let inner = SafeTensors::open(Path::new(path), backend?)?;
    Ok(SafeTensorsFile::wrap(inner))
}

/// A SafeTensors file, validated at open and read lazily. Tensors come back as typed arrays
/// that view the (private, copy-on-write) mapping when aligned, and copies otherwise.
#[napi]
pub struct SafeTensorsFile {
    pub(crate) inner: SourceHandle<SafeTensors>,
}

impl SafeTensorsFile {
    pub(crate) fn wrap(inner: SafeTensors) -> SafeTensorsFile {
        let path = inner.path().map(|p| p.display().to_string());
        SafeTensorsFile {
            inner: SourceHandle::new("SafeTensorsFile", path, Arc::new(inner)),
        }
    }
}

#[napi]
impl SafeTensorsFile {
    /// Instances come from `open`, `openAsync` and `fromBytes` (factories bypass this).
    #[napi(catch_unwind, constructor)]
    pub fn not_constructible(env: Env) -> napi::Result<Self> {
        guard(&env, "SafeTensorsFile.constructor", || {
            Err(crate::error::not_constructible(
                &env,
                "SafeTensorsFile",
                "SafeTensorsFile.open(path), openAsync(path), fromBytes(bytes) or openUrl(url)",
            ))
        })
    }

    /// Open and validate a file. `backend: 'read'` uses plain reads instead of a memory map.
    #[napi(
        catch_unwind,
        strict,
        factory,
        writable,
        ts_args_type = "path: string, options?: OpenOptions"
    )]
    pub fn open(env: Env, path: String, options: Option<Object>) -> napi::Result<SafeTensorsFile> {
        guard(&env, "SafeTensorsFile.open", || {
            open_file(&path, parse_backend(&options)).or_throw(&env)
        })
    }

    /// `open` off the event loop.
    #[napi(
        catch_unwind,
        strict,
        writable,
        ts_args_type = "path: string, options?: OpenOptions",
        ts_return_type = "Promise<SafeTensorsFile>"
    )]
    pub fn open_async(
        env: Env,
        path: String,
        options: Option<Object>,
    ) -> napi::Result<AsyncTask<CoreTask<SafeTensorsFile>>> {
        guard(&env, "SafeTensorsFile.openAsync", || {
            let backend = parse_backend(&options);
            Ok(CoreTask::new(move || open_file(&path, backend)))
        })
    }

    /// Validate a whole file held in memory (the bytes are copied).
    #[napi(
        catch_unwind,
        strict,
        factory,
        writable,
        ts_args_type = "bytes: Uint8Array"
    )]
    pub fn from_bytes(env: Env, bytes: Unknown) -> napi::Result<SafeTensorsFile> {
        guard(&env, "SafeTensorsFile.fromBytes", || {
            crate::args::bytes_arg(&bytes, "bytes")
                .and_then(|view| crate::args::with_view(&view, |b| Ok(b.to_vec())))
                .and_then(SafeTensors::from_bytes)
                .map(SafeTensorsFile::wrap)
                .or_throw(&env)
        })
    }

    #[napi(catch_unwind, getter)]
    pub fn path(&self, env: Env) -> napi::Result<Option<String>> {
        guard(&env, "SafeTensorsFile.path", || {
            let inner = self.inner.get().or_throw(&env)?;
            Ok(inner.path().map(|p| p.display().to_string()))
        })
    }

    /// The `__metadata__` map, or null.
    #[napi(catch_unwind, getter, ts_return_type = "Record<string, string> | null")]
    pub fn metadata(&self, env: Env) -> napi::Result<Option<StringRecord>> {
        guard(&env, "SafeTensorsFile.metadata", || {
            let inner = self.inner.get().or_throw(&env)?;
            Ok(inner
                .metadata()
                .map(|m| StringRecord(m.clone().into_iter().collect())))
        })
    }

    /// Tensor names in data-offset order.
    #[napi(catch_unwind, getter)]
    pub fn tensor_names(&self, env: Env) -> napi::Result<Vec<String>> {
        guard(&env, "SafeTensorsFile.tensorNames", || {
            self.inner.tensor_names(&env)
        })
    }

    #[napi(catch_unwind, getter)]
    pub fn num_parameters(&self, env: Env) -> napi::Result<f64> {
        guard(&env, "SafeTensorsFile.numParameters", || {
            self.inner.num_parameters(&env)
        })
    }

    /// Size of the whole file in bytes.
    #[napi(catch_unwind, getter)]
    pub fn byte_length(&self, env: Env) -> napi::Result<f64> {
        guard(&env, "SafeTensorsFile.byteLength", || {
            let inner = self.inner.get().or_throw(&env)?;
            Ok(inner.file_len() as f64)
        })
    }

    /// Release the file now: later calls throw ERR_CLOSED, and the mapping goes as soon as
    /// no array handed out before views it (those stay valid). A second call does nothing.
    #[napi(catch_unwind)]
    pub fn close(&self, env: Env) -> napi::Result<()> {
        guard(&env, "SafeTensorsFile.close", || {
            self.inner.close();
            Ok(())
        })
    }

    /// Whether the file on disk changed since it was opened (one `stat`): removed
    /// (ERR_NOT_FOUND), replaced (ERR_IO; this object keeps reading the file it opened),
    /// modified in place (ERR_IO), or resized in place (ERR_INCOMPLETE_FILE: reading a
    /// memory map past the new end would fault). Always ok for `fromBytes`.
    #[napi(catch_unwind, strict, ts_return_type = "ValidationReport")]
    pub fn validate(&self, env: Env) -> napi::Result<crate::convert::Json> {
        guard(&env, "SafeTensorsFile.validate", || {
            let inner = self.inner.get().or_throw(&env)?;
            crate::convert::json(stcore::convert::validate_open(&inner)).or_throw(&env)
        })
    }

    #[napi(catch_unwind, strict)]
    pub fn has(&self, env: Env, name: String) -> napi::Result<bool> {
        guard(&env, "SafeTensorsFile.has", || self.inner.has(&env, &name))
    }

    #[napi(catch_unwind, strict)]
    pub fn info(&self, env: Env, name: String) -> napi::Result<TensorInfo> {
        guard(&env, "SafeTensorsFile.info", || {
            self.inner
                .get()
                .and_then(|inner| inner.info(&name))
                .map(|i| TensorInfo::from(&i))
                .or_throw(&env)
        })
    }

    #[napi(catch_unwind, strict)]
    pub fn get_tensor(
        &self,
        env: Env,
        name: String,
        options: Option<GetOptions>,
    ) -> napi::Result<Tensor> {
        guard(&env, "SafeTensorsFile.getTensor", || {
            self.inner.get_tensor(&env, &name, &options, ReadAs::Native)
        })
    }

    #[napi(catch_unwind, strict, ts_return_type = "Promise<Tensor>")]
    pub fn get_tensor_async(
        &self,
        env: Env,
        name: String,
        options: Option<GetOptions>,
    ) -> napi::Result<AsyncTask<CoreTask<Tensor>>> {
        guard(&env, "SafeTensorsFile.getTensorAsync", || {
            Ok(self.inner.get_tensor_async(name, &options, ReadAs::Native))
        })
    }

    /// A sub-tensor along the leading dimensions: per dimension `[start, stop)`, an index
    /// (which drops the dimension), or null for all of it. Negative values count from the end.
    #[napi(
        catch_unwind,
        strict,
        ts_args_type = "name: string, ranges: Array<[number, number] | number | null>, options?: GetOptions"
    )]
    pub fn get_slice(
        &self,
        env: Env,
        name: String,
        ranges: Vec<Option<Either<Vec<f64>, f64>>>,
        options: Option<GetOptions>,
    ) -> napi::Result<Tensor> {
        guard(&env, "SafeTensorsFile.getSlice", || {
            self.inner
                .get_slice(&env, &name, &ranges, &options, ReadAs::Native)
        })
    }

    /// Every tensor, keyed by name in data-offset order.
    #[napi(catch_unwind, strict, ts_return_type = "Record<string, Tensor>")]
    pub fn tensors(&self, env: Env, options: Option<GetOptions>) -> napi::Result<TensorRecord> {
        guard(&env, "SafeTensorsFile.tensors", || {
            self.inner.tensors(&env, &options, ReadAs::Native)
        })
    }

    #[napi(
        catch_unwind,
        strict,
        ts_return_type = "Promise<Record<string, Tensor>>"
    )]
    pub fn tensors_async(
        &self,
        env: Env,
        options: Option<GetOptions>,
    ) -> napi::Result<AsyncTask<CoreTask<TensorRecord>>> {
        guard(&env, "SafeTensorsFile.tensorsAsync", || {
            Ok(self.inner.tensors_async(&options, ReadAs::Native))
        })
    }
}

fn integer(v: f64, what: &str) -> CoreResult<i64> {
    if v.fract() != 0.0 || !v.is_finite() || v.abs() > 9007199254740991.0 {
        return Err(invalid_argument(format!(
            "{what} must be an integer, got {v}"
        )));
    }
    Ok(v as i64)
}

pub fn slice_arg(r: &Option<Either<Vec<f64>, f64>>) -> CoreResult<SliceArg> {
    Ok(match r {
        None => SliceArg::Full,
        Some(Either::B(i)) => SliceArg::Index(integer(*i, "a slice index")?),
        Some(Either::A(pair)) if pair.len() == 2 => SliceArg::Range(
            integer(pair[0], "a slice start")?,
            integer(pair[1], "a slice stop")?,
        ),
        Some(Either::A(_)) => return Err(invalid_argument("a slice range must be [start, stop]")),
    })
}

fn load_all(path: &str, mode: CoreResult<ReadMode>) -> CoreResult<TensorRecord> {
    let st = SafeTensors::open(Path::new(path), Backend::Mmap)?;
    read_source_all(&st, mode?)
}

/// Open a file and read every tensor.
#[napi(catch_unwind, strict, ts_return_type = "Record<string, Tensor>")]
pub fn load_file(
    env: Env,
    path: String,
    options: Option<GetOptions>,
) -> napi::Result<TensorRecord> {
    guard(&env, "loadFile", || {
        load_all(&path, GetOptions::mode(&options, ReadAs::Native)).or_throw(&env)
    })
}

#[napi(
    catch_unwind,
    strict,
    ts_return_type = "Promise<Record<string, Tensor>>"
)]
pub fn load_file_async(
    env: Env,
    path: String,
    options: Option<GetOptions>,
) -> napi::Result<AsyncTask<CoreTask<TensorRecord>>> {
    guard(&env, "loadFileAsync", || {
        let mode = GetOptions::mode(&options, ReadAs::Native);
        Ok(CoreTask::new(move || load_all(&path, mode)))
    })
}
