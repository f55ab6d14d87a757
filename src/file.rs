//! `SafeTensorsFile`, `loadFile`: reading SafeTensors files from JavaScript.

use crate::args::{parse_backend, GetOptions, JsRanges};
use crate::error::{guard, CoreResult, OrThrow};
use crate::handle::{
    read_source_all, SourceHandle, StringRecord, Tensor, TensorInfo, TensorRecord,
};
use crate::tasks::CoreTask;
use crate::typed::{ReadAs, ReadMode};
use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;
use stcore::format::safetensors::{Backend, SafeTensors};
use std::path::Path;
use std::sync::Arc;

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

    /// Every SafeTensors tensor has its `dataOffsets`.
    #[napi(
        catch_unwind,
        strict,
        ts_return_type = "TensorInfo & { dataOffsets: [number, number] }"
    )]
    pub fn info(&self, env: Env, name: String) -> napi::Result<TensorInfo> {
        guard(&env, "SafeTensorsFile.info", || {
            self.inner.info(&env, &name)
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
        ranges: JsRanges,
        options: Option<GetOptions>,
    ) -> napi::Result<Tensor> {
        guard(&env, "SafeTensorsFile.getSlice", || {
            self.inner
                .get_slice(&env, &name, &ranges, &options, ReadAs::Native)
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
        env: Env,
        name: String,
        ranges: JsRanges,
        options: Option<GetOptions>,
    ) -> napi::Result<AsyncTask<CoreTask<Tensor>>> {
        guard(&env, "SafeTensorsFile.getSliceAsync", || {
            Ok(self
                .inner
                .get_slice_async(name, &ranges, &options, ReadAs::Native))
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
