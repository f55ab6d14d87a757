//! What every weights class (`SafeTensorsFile`, `WeightsFile`, `Model`, `GgufFile`) holds: its
//! source in a [`SourceHandle`], which `close()` empties on the spot, and the accessors they
//! share, so each class's `#[napi]` methods are one-line delegations.
//!
//! Why natively: Node runs the finalizers of wrapped objects only between event-loop turns,
//! so a synchronous loop that opens and drops files held every mapping until it yielded.
//! `close()` drops the object's reference to its source at once; the source (and with it
//! the mapping) goes as soon as nothing else holds it. What can still hold it: the arrays
//! handed out before (each view keeps its `Arc<Memory>`, so they stay valid — they go when
//! JS collects them and their finalizers run), and calls in flight (an `…Async` task took
//! its own `Arc` of the source when it was started, and finishes with it).
//!
//! Every accessor goes through [`SourceHandle::get`], which gives its own `Arc` (the lock is
//! never held while anything else runs, so a JS getter reached during argument conversion
//! can call `close()` without deadlock or panic: the call in progress keeps its clone).
//!
//! The values the accessors return (`Tensor`, the records of tensors and strings, the
//! description of a tensor) and the readers of a source they share are here too.

use crate::args::{slice_args, GetOptions, JsRanges};
use crate::convert::Json;
use crate::error::{CoreResult, OrThrow};
use crate::tasks::CoreTask;
use crate::typed::TypedArrayOut;
use crate::typed::{converted_runs, decoded_f32, runs_convert, to_typed_array, ReadAs, ReadMode};
use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;
use stcore::format::gguf::GgufSource;
use stcore::format::safetensors::SafeTensors;
use stcore::slice::SliceArg;
use stcore::{CoreError, Selected, Selection, TensorSource};
use std::sync::{Arc, Mutex, MutexGuard};

/// What a handle may hold: anything that is, or holds, a tensor source.
pub trait Held: Send + Sync + 'static {
    fn source(&self) -> &dyn TensorSource;
}

impl Held for dyn TensorSource {
    fn source(&self) -> &dyn TensorSource {
        self
    }
}

impl Held for GgufSource {
    fn source(&self) -> &dyn TensorSource {
        self
    }
}

impl Held for SafeTensors {
    fn source(&self) -> &dyn TensorSource {
        self
    }
}

/// A weights object's source until `close()`.
pub struct SourceHandle<T: ?Sized> {
    held: Mutex<Option<Arc<T>>>,
    /// The class name (and path) the ERR_CLOSED message names.
    class: &'static str,
    path: Option<String>,
}

impl<T: ?Sized> SourceHandle<T> {
    /// Hold `value` for an instance of `class` opened from `path` (if it has one).
    pub fn new(class: &'static str, path: Option<String>, value: Arc<T>) -> Self {
        SourceHandle {
            held: Mutex::new(Some(value)),
            class,
            path,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Arc<T>>> {
        // Nothing panics while holding the lock, but a poisoned lock still holds valid data.
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The value, or ERR_CLOSED once `close()` was called.
    pub fn get(&self) -> CoreResult<Arc<T>> {
        self.lock().clone().ok_or_else(|| {
            let e = CoreError::closed(format!(
                "this {} was closed: open the file again to read it",
                self.class
            ));
            match &self.path {
                Some(p) => e.with_path(p),
                None => e,
            }
        })
    }

    /// [`SourceHandle::get`] for synchronous calls (ERR_CLOSED thrown).
    pub fn get_or_throw(&self, env: &Env) -> napi::Result<Arc<T>> {
        self.get().or_throw(env)
    }

    /// Drop the value now (a second call does nothing).
    pub fn close(&self) {
        // Take it out under the lock, drop it after: a source's drop unmaps memory, which
        // need not happen while the lock is held.
        let value = self.lock().take();
        drop(value);
    }
}

/// The accessors every weights class shares. `default` is the form `getTensor` gives
/// without `options.as` (`Model.loadPretrained(dir, { as: 'F32' })` changes it).
impl<T: ?Sized + Held> SourceHandle<T> {
    pub fn tensor_names(&self, env: &Env) -> napi::Result<Vec<String>> {
        let held = self.get_or_throw(env)?;
        Ok(held
            .source()
            .tensors()
            .iter()
            .map(|t| t.name.clone())
            .collect())
    }

    pub fn num_parameters(&self, env: &Env) -> napi::Result<f64> {
        Ok(self.get_or_throw(env)?.source().num_parameters() as f64)
    }

    pub fn has(&self, env: &Env, name: &str) -> napi::Result<bool> {
        Ok(self.get_or_throw(env)?.source().tensor(name).is_some())
    }

    /// The format's key/values as JSON, or null.
    pub fn metadata(&self, env: &Env) -> napi::Result<Option<Json>> {
        let held = self.get_or_throw(env)?;
        let m = held.source().metadata();
        Ok((!m.is_none()).then(|| Json(m.to_json())))
    }

    pub fn info(&self, env: &Env, name: &str) -> napi::Result<TensorInfo> {
        self.get()
            .and_then(|held| tensor_info(held.source(), name))
            .or_throw(env)
    }

    pub fn get_tensor(
        &self,
        env: &Env,
        name: &str,
        options: &Option<GetOptions>,
        default: ReadAs,
    ) -> napi::Result<Tensor> {
        let run = || {
            let mode = GetOptions::mode(options, default)?;
            read_source_tensor(self.get()?.source(), name, mode)
        };
        run().or_throw(env)
    }

    pub fn get_tensor_async(
        &self,
        name: String,
        options: &Option<GetOptions>,
        default: ReadAs,
    ) -> AsyncTask<CoreTask<Tensor>> {
        let held = self.get();
        let mode = GetOptions::mode(options, default);
        CoreTask::new(move || read_source_tensor(held?.source(), &name, mode?))
    }

    pub fn tensors(
        &self,
        env: &Env,
        options: &Option<GetOptions>,
        default: ReadAs,
    ) -> napi::Result<TensorRecord> {
        let run = || {
            let mode = GetOptions::mode(options, default)?;
            read_source_all(self.get()?.source(), mode)
        };
        run().or_throw(env)
    }

    pub fn tensors_async(
        &self,
        options: &Option<GetOptions>,
        default: ReadAs,
    ) -> AsyncTask<CoreTask<TensorRecord>> {
        let held = self.get();
        let mode = GetOptions::mode(options, default);
        CoreTask::new(move || read_source_all(held?.source(), mode?))
    }

    /// A sub-tensor along the leading dimensions, cut from the served bytes.
    pub fn get_slice(
        &self,
        env: &Env,
        name: &str,
        ranges: &JsRanges,
        options: &Option<GetOptions>,
        default: ReadAs,
    ) -> napi::Result<Tensor> {
        let run = || {
            let mode = GetOptions::mode(options, default)?;
            let args = slice_args(ranges)?;
            read_source_slice(self.get()?.source(), name, &args, mode)
        };
        run().or_throw(env)
    }

    pub fn get_slice_async(
        &self,
        name: String,
        ranges: &JsRanges,
        options: &Option<GetOptions>,
        default: ReadAs,
    ) -> AsyncTask<CoreTask<Tensor>> {
        let held = self.get();
        let mode = GetOptions::mode(options, default);
        let args = slice_args(ranges);
        CoreTask::new(move || read_source_slice(held?.source(), &name, &args?, mode?))
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

pub fn shape_to_js(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
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

/// One tensor of a source in the form `mode` asks for: `as: 'raw'` gives the bytes as
/// stored, anything else the bytes `fetch` yields (decoded where the stored type needs it).
pub fn read_source_tensor(
    source: &dyn TensorSource,
    name: &str,
    mode: ReadMode,
) -> CoreResult<Tensor> {
    let t = source.info(name)?;
    let data = match mode.as_ {
        ReadAs::Raw => to_typed_array(t.dtype, source.fetch_raw(name)?, mode),
        ReadAs::Native | ReadAs::F32 => match source.f32_decoder(name)? {
            Some(decoder) => decoded_f32(t.numel(), decoder),
            None => to_typed_array(t.dtype, source.fetch(name)?, mode),
        },
        ReadAs::F64 => to_typed_array(t.dtype, source.fetch(name)?, mode),
    }
    .map_err(|e| e.with_tensor(name))?;
    Ok(Tensor {
        name: t.name.clone(),
        dtype: t.dtype.name().to_string(),
        shape: shape_to_js(&t.shape),
        data,
    })
}

/// A sub-tensor of a source's tensor along its leading dimensions (as
/// `SafeTensorsFile.getSlice`), from the bytes `TensorSource::select` finds: several runs of
/// memory asked for as F32/F64 are converted where they lie, anything else is handed out as
/// the selected bytes.
pub fn read_source_slice(
    source: &dyn TensorSource,
    name: &str,
    ranges: &[SliceArg],
    mode: ReadMode,
) -> CoreResult<Tensor> {
    let t = source.info(name)?;
    let Selection { shape, bytes } = source.select(name, ranges)?;
    let data = match bytes {
        Selected::Runs { memory, runs } if runs_convert(t.dtype, mode) => {
            let n = shape.iter().product();
            converted_runs(t.dtype, mode, Arc::clone(memory), runs, n)
        }
        bytes => to_typed_array(t.dtype, bytes.into_bytes()?, mode),
    }
    .map_err(|e| e.with_tensor(name))?;
    Ok(Tensor {
        name: t.name.clone(),
        dtype: t.dtype.name().to_string(),
        shape: shape_to_js(&shape),
        data,
    })
}

/// Every tensor of a source, keyed by name in serving order.
pub fn read_source_all(source: &dyn TensorSource, mode: ReadMode) -> CoreResult<TensorRecord> {
    source
        .tensors()
        .iter()
        .map(|t| read_source_tensor(source, &t.name, mode))
        .collect::<CoreResult<Vec<_>>>()
        .map(TensorRecord)
}

/// What every reader's `info(name)` returns (`SafeTensorsFile`, `WeightsFile`, `Model`,
/// `GgufFile`): a format adds fields, never renames them. The optional fields are the ones a
/// format adds; napi-rs sets them after the others, in this order.
#[napi(object, object_from_js = false)]
pub struct TensorInfo {
    pub name: String,
    /// What `getTensor` serves: the stored dtype, or the one a stored type decodes to (GGUF
    /// block types: F32).
    #[napi(ts_type = "DType")]
    pub dtype: String,
    /// The stored type as the format names it: 'BF16', 'Q4_K', 'torch.bfloat16', …
    pub stored_type: String,
    /// Row-major, outermost first.
    pub shape: Vec<i64>,
    /// Bytes as stored (what `as: 'raw'` returns).
    pub byte_length: f64,
    pub numel: f64,
    /// `[start, end)` of the stored bytes in the format's data section, for formats that have
    /// one (SafeTensors, GGUF; a shard's own data section in a sharded model).
    #[napi(ts_type = "[number, number]")]
    pub data_offsets: Option<Vec<f64>>,
    /// GGUF (`GgufFile.info`): the ggml type as stored ('Q4_K', 'F16', 'I32', …).
    pub ggml_type: Option<String>,
    /// GGUF (`GgufFile.info`): where the stored bytes start, from the start of the file.
    pub offset: Option<f64>,
}

/// The description of one tensor of a source.
pub fn tensor_info(source: &dyn TensorSource, name: &str) -> CoreResult<TensorInfo> {
    let t = source.info(name)?;
    Ok(TensorInfo {
        name: t.name.clone(),
        dtype: t.dtype.name().to_string(),
        stored_type: t.stored.to_string(),
        shape: shape_to_js(&t.shape),
        byte_length: t.stored_len as f64,
        numel: t.numel() as f64,
        data_offsets: source
            .stored_range(name)
            .map(|(a, b)| vec![a as f64, b as f64]),
        ggml_type: None,
        offset: None,
    })
}

/// A weights class: what its shared methods ([`reader_methods`]) need besides `inner`.
pub trait Reader {
    /// The form `getTensor` gives without `options.as` (`Model.loadPretrained(dir, { as:
    /// 'F32' })` changes it).
    fn default_as(&self) -> ReadAs {
        ReadAs::Native
    }
}

/// The reading methods every weights class shares, written once: napi classes cannot inherit
/// from one another, so each class gets these as a `#[napi] impl` block of its own that
/// delegates to its [`SourceHandle`] (the field `inner`), with the form [`Reader::default_as`]
/// gives; `slices` adds `getSlice` / `getSliceAsync` (the readers whose tensors are cut by
/// ranges).
macro_rules! reader_methods {
    ($class:ident, $js:literal $(, $slices:ident)?) => {
        #[napi_derive::napi]
        impl $class {
            /// Tensor names, in the order the reader serves them.
            #[napi(catch_unwind, getter)]
            pub fn tensor_names(&self, env: napi::Env) -> napi::Result<Vec<String>> {
                $crate::error::guard(&env, concat!($js, ".tensorNames"), || {
                    self.inner.tensor_names(&env)
                })
            }

            #[napi(catch_unwind, getter)]
            pub fn num_parameters(&self, env: napi::Env) -> napi::Result<f64> {
                $crate::error::guard(&env, concat!($js, ".numParameters"), || {
                    self.inner.num_parameters(&env)
                })
            }

            #[napi(catch_unwind, strict)]
            pub fn has(&self, env: napi::Env, name: String) -> napi::Result<bool> {
                $crate::error::guard(&env, concat!($js, ".has"), || self.inner.has(&env, &name))
            }

            #[napi(catch_unwind, strict)]
            pub fn get_tensor(
                &self,
                env: napi::Env,
                name: String,
                options: Option<$crate::args::GetOptions>,
            ) -> napi::Result<$crate::handle::Tensor> {
                $crate::error::guard(&env, concat!($js, ".getTensor"), || {
                    self.inner.get_tensor(&env, &name, &options, $crate::handle::Reader::default_as(self))
                })
            }

            #[napi(catch_unwind, strict, ts_return_type = "Promise<Tensor>")]
            pub fn get_tensor_async(
                &self,
                env: napi::Env,
                name: String,
                options: Option<$crate::args::GetOptions>,
            ) -> napi::Result<
                napi::bindgen_prelude::AsyncTask<$crate::tasks::CoreTask<$crate::handle::Tensor>>,
            > {
                $crate::error::guard(&env, concat!($js, ".getTensorAsync"), || {
                    Ok(self.inner.get_tensor_async(name, &options, $crate::handle::Reader::default_as(self)))
                })
            }

            /// Every tensor, keyed by name in `tensorNames` order.
            #[napi(catch_unwind, strict, ts_return_type = "Record<string, Tensor>")]
            pub fn tensors(
                &self,
                env: napi::Env,
                options: Option<$crate::args::GetOptions>,
            ) -> napi::Result<$crate::handle::TensorRecord> {
                $crate::error::guard(&env, concat!($js, ".tensors"), || {
                    self.inner.tensors(&env, &options, $crate::handle::Reader::default_as(self))
                })
            }

            #[napi(
                catch_unwind,
                strict,
                ts_return_type = "Promise<Record<string, Tensor>>"
            )]
            pub fn tensors_async(
                &self,
                env: napi::Env,
                options: Option<$crate::args::GetOptions>,
            ) -> napi::Result<
                napi::bindgen_prelude::AsyncTask<
                    $crate::tasks::CoreTask<$crate::handle::TensorRecord>,
                >,
            > {
                $crate::error::guard(&env, concat!($js, ".tensorsAsync"), || {
                    Ok(self.inner.tensors_async(&options, $crate::handle::Reader::default_as(self)))
                })
            }
        }
        $($crate::handle::reader_methods!(@$slices $class, $js);)?
    };
    (@slices $class:ident, $js:literal) => {
        #[napi_derive::napi]
        impl $class {
            /// A sub-tensor along the leading dimensions: per dimension `[start, stop)`, an
            /// index (which drops the dimension), or null for all of it. Negative values
            /// count from the end.
            #[napi(
                catch_unwind,
                strict,
                ts_args_type = "name: string, ranges: Array<[number, number] | number | null>, options?: GetOptions"
            )]
            pub fn get_slice(
                &self,
                env: napi::Env,
                name: String,
                ranges: $crate::args::JsRanges,
                options: Option<$crate::args::GetOptions>,
            ) -> napi::Result<$crate::handle::Tensor> {
                $crate::error::guard(&env, concat!($js, ".getSlice"), || {
                    self.inner.get_slice(&env, &name, &ranges, &options, $crate::handle::Reader::default_as(self))
                })
            }

            /// `getSlice` off the event loop.
            #[napi(
                catch_unwind,
                strict,
                ts_args_type = "name: string, ranges: Array<[number, number] | number | null>, options?: GetOptions",
                ts_return_type = "Promise<Tensor>"
            )]
            pub fn get_slice_async(
                &self,
                env: napi::Env,
                name: String,
                ranges: $crate::args::JsRanges,
                options: Option<$crate::args::GetOptions>,
            ) -> napi::Result<
                napi::bindgen_prelude::AsyncTask<$crate::tasks::CoreTask<$crate::handle::Tensor>>,
            > {
                $crate::error::guard(&env, concat!($js, ".getSliceAsync"), || {
                    Ok(self.inner.get_slice_async(name, &ranges, &options, $crate::handle::Reader::default_as(self)))
                })
            }
        }
    };
}
pub(crate) use reader_methods;

/// The factories of a class that opens a local file: `open` / `openAsync` over
/// `$open(path, backend)` (`openAsync` typed as `$promise`), and a constructor that throws,
/// naming `$how` to make one.
macro_rules! reader_factories {
    ($class:ident, $js:literal, $open:path, $how:literal, $promise:literal) => {
        #[napi_derive::napi]
        impl $class {
            /// Instances come from the factories (they bypass this).
            #[napi(catch_unwind, constructor)]
            pub fn not_constructible(env: napi::Env) -> napi::Result<Self> {
                $crate::error::guard(&env, concat!($js, ".constructor"), || {
                    Err($crate::error::not_constructible(&env, $js, $how))
                })
            }

            /// Open and validate the file. `backend: 'read'` uses plain reads instead of a
            /// memory map.
            #[napi(
                catch_unwind,
                strict,
                factory,
                writable,
                ts_args_type = "path: string, options?: OpenOptions"
            )]
            pub fn open(
                env: napi::Env,
                path: String,
                options: Option<napi::bindgen_prelude::Object>,
            ) -> napi::Result<$class> {
                $crate::error::guard(&env, concat!($js, ".open"), || {
                    let opened = $open(&path, $crate::args::parse_backend(&options));
                    $crate::error::OrThrow::or_throw(opened, &env)
                })
            }

            /// `open` off the event loop.
            #[napi(
                                        catch_unwind,
                                        strict,
                                        writable,
                                        ts_args_type = "path: string, options?: OpenOptions",
                                        ts_return_type = $promise
                                    )]
            pub fn open_async(
                env: napi::Env,
                path: String,
                options: Option<napi::bindgen_prelude::Object>,
            ) -> napi::Result<napi::bindgen_prelude::AsyncTask<$crate::tasks::CoreTask<$class>>>
            {
                $crate::error::guard(&env, concat!($js, ".openAsync"), || {
                    let backend = $crate::args::parse_backend(&options);
                    Ok($crate::tasks::CoreTask::new(move || $open(&path, backend)))
                })
            }
        }
    };
}
pub(crate) use reader_factories;
