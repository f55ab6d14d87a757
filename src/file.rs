//! `SafeTensorsFile`, `loadFile`: reading SafeTensors files from JavaScript.

use crate::args::GetOptions;
use crate::error::{guard, CoreResult, OrThrow};
use crate::handle::{
    read_source_all, reader_factories, reader_methods, Reader, SourceHandle, StringRecord,
    TensorInfo, TensorRecord,
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

reader_methods!(SafeTensorsFile, "SafeTensorsFile", slices);
reader_factories!(
    SafeTensorsFile,
    "SafeTensorsFile",
    open_file,
    "SafeTensorsFile.open(path), openAsync(path), fromBytes(bytes) or openUrl(url)",
    "Promise<SafeTensorsFile>"
);

impl Reader for SafeTensorsFile {}

#[napi]
impl SafeTensorsFile {
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
