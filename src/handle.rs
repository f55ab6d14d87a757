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

use crate::convert::Json;
use crate::error::{CoreResult, OrThrow};
use crate::file::{slice_arg, GetOptions, Tensor, TensorRecord};
use crate::tasks::CoreTask;
use crate::typed::ReadAs;
use crate::weights::{
    read_source_all, read_source_slice, read_source_tensor, tensor_info, WeightsTensorInfo,
};
use napi::bindgen_prelude::{AsyncTask, Either};
use napi::Env;
use stcore::format::gguf::GgufSource;
use stcore::format::safetensors::{SafeTensors, SliceArg};
use stcore::{CoreError, TensorSource};
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

/// The leading-dimension ranges of `getSlice`, as JS gives them.
pub type JsRanges = Vec<Option<Either<Vec<f64>, f64>>>;

fn slice_args(ranges: &JsRanges) -> CoreResult<Vec<SliceArg>> {
    ranges.iter().map(slice_arg).collect()
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

    pub fn info(&self, env: &Env, name: &str) -> napi::Result<WeightsTensorInfo> {
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
