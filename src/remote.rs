//! Remote files and model directories through the core's sans-IO opener
//! (`stcore::remote`): `RemoteOpener` says which bytes it needs and is fed them by the one
//! HTTP driver (`lib/remote.js`), and `RemoteWeights` serves the tensors of what it opened,
//! from bytes the driver fetches for each tensor's spans. Neither does any I/O.

use crate::args::{bytes_arg, slice_args, with_view, GetOptions, JsRanges};
use crate::convert::Json;
use crate::error::{guard, invalid_argument, CoreResult, OrThrow};
use crate::gguf::GgufFile;
use crate::handle::{
    read_source_slice, read_source_tensor, shape_to_js, Held, SourceHandle, Tensor, TensorInfo,
};
use crate::typed::{decoded_f32, to_typed_array, ReadAs, ReadMode};
use crate::weights::parse_format;
use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;
use stcore::format::gguf::Served;
use stcore::memory::TensorBytes;
use stcore::remote::{Opener, RemoteFile, Reply, Span, Step, Want};
use stcore::TensorSource;
use std::sync::Arc;

impl Held for RemoteFile {
    fn source(&self) -> &dyn TensorSource {
        RemoteFile::source(self)
    }
}

/// Bytes the opener needs: `[start, end)` of the file at `url`, or (`cap` set) all of it,
/// refused past `cap` bytes.
#[napi(object, object_from_js = false)]
pub struct RemoteRequest {
    pub id: f64,
    /// Relative to the model directory ('' for the URL opened).
    pub file: String,
    pub url: String,
    /// `file` lies beside the URL opened, in its URL directory (a later file of a split
    /// GGUF set), not under a model directory.
    pub beside: bool,
    pub start: Option<f64>,
    pub end: Option<f64>,
    pub cap: Option<f64>,
}

/// Where a tensor's stored bytes lie.
#[napi(object, object_from_js = false)]
pub struct RemoteSpan {
    pub file: String,
    pub url: String,
    pub start: f64,
    pub length: f64,
}

fn span_to_js(s: Span) -> RemoteSpan {
    RemoteSpan {
        file: s.file,
        url: s.url,
        start: s.start as f64,
        length: s.len as f64,
    }
}

/// A slice's shape and the spans holding its bytes.
#[napi(object, object_from_js = false)]
pub struct RemoteSlice {
    pub shape: Vec<i64>,
    pub spans: Vec<RemoteSpan>,
}

/// A companion file of a model directory.
#[napi(object, object_from_js = false)]
pub struct Companion {
    pub file: String,
    pub url: String,
    pub cap: f64,
}

/// Opens a file or model directory by the byte ranges a driver fetches. Internal
/// (lib/remote.js).
#[napi]
pub struct RemoteOpener {
    inner: Opener,
}

fn id_of(id: f64) -> CoreResult<u64> {
    if id.fract() == 0.0 && (0.0..=9007199254740991.0).contains(&id) {
        Ok(id as u64)
    } else {
        Err(invalid_argument(format!("bad request id {id}")))
    }
}

#[napi]
impl RemoteOpener {
    /// `kind`: 'file' (a single file), 'any' (a file, else the directory of that name),
    /// 'directory', or 'model' (a directory, or a `.gguf` file as a model).
    #[napi(
        factory,
        catch_unwind,
        strict,
        ts_args_type = "url: string, kind: 'file' | 'any' | 'directory' | 'model', format?: WeightsFormat | null"
    )]
    pub fn create(
        env: Env,
        url: String,
        kind: String,
        format: Option<String>,
    ) -> napi::Result<RemoteOpener> {
        guard(&env, "RemoteOpener.create", || {
            let run = || -> CoreResult<RemoteOpener> {
                let hint = parse_format(format)?;
                let inner = match kind.as_str() {
                    "file" => Opener::new(&url, hint),
                    "any" => Opener::any(&url, hint),
                    "directory" => Opener::directory(&url),
                    "model" => Opener::model(&url),
                    other => {
                        return Err(invalid_argument(format!("unknown opener kind '{other}'")))
                    }
                };
                Ok(RemoteOpener { inner })
            };
            run().or_throw(&env)
        })
    }

    /// The requests to make next, or the open file.
    #[napi(catch_unwind, ts_return_type = "RemoteRequest[] | RemoteWeights")]
    pub fn step(&mut self, env: Env) -> napi::Result<Either<Vec<RemoteRequest>, RemoteWeights>> {
        guard(&env, "RemoteOpener.step", || {
            let step = self.inner.step().or_throw(&env)?;
            Ok(match step {
                Step::Fetch(requests) => Either::A(
                    requests
                        .into_iter()
                        .map(|r| {
                            let (start, end, cap) = match r.want {
                                Want::Range { start, end } => {
                                    (Some(start as f64), Some(end as f64), None)
                                }
                                Want::Whole { cap } => (None, None, Some(cap as f64)),
                            };
                            RemoteRequest {
                                id: r.id as f64,
                                file: r.file,
                                url: r.url,
                                beside: r.beside,
                                start,
                                end,
                                cap,
                            }
                        })
                        .collect(),
                ),
                Step::Ready(file) => Either::B(RemoteWeights::wrap(*file)),
            })
        })
    }

    /// Answer request `id` with its bytes (`total`: the file's length the reply said, if it
    /// did); `bytes` null: the file does not exist.
    #[napi(
        catch_unwind,
        strict,
        ts_args_type = "id: number, bytes: Uint8Array | null, total?: number | null"
    )]
    pub fn reply(
        &mut self,
        env: Env,
        id: f64,
        bytes: Option<Unknown>,
        total: Option<f64>,
    ) -> napi::Result<()> {
        guard(&env, "RemoteOpener.reply", || {
            let mut run = || -> CoreResult<()> {
                let id = id_of(id)?;
                let total = match total {
                    Some(t) => Some(id_of(t)?),
                    None => None,
                };
                let reply = match bytes {
                    None => Reply::NotFound,
                    Some(b) => {
                        let view = bytes_arg(&b, "bytes")?;
                        let bytes = with_view(&view, |b| Ok(b.to_vec()))?;
                        Reply::Bytes { bytes, total }
                    }
                };
                self.inner.reply(id, reply)
            };
            run().or_throw(&env)
        })
    }

    /// Read the rest of the directory under `base` (a URL ending in '/').
    #[napi(catch_unwind, strict)]
    pub fn rebase(&mut self, env: Env, base: String) -> napi::Result<()> {
        guard(&env, "RemoteOpener.rebase", || {
            self.inner.rebase(&base).or_throw(&env)
        })
    }
}

/// An open remote file or model directory: its listing, and its tensors served from bytes
/// the driver fetches. Internal (lib/remote.js wraps it).
#[napi]
pub struct RemoteWeights {
    inner: SourceHandle<RemoteFile>,
}

impl RemoteWeights {
    fn wrap(file: RemoteFile) -> RemoteWeights {
        let origin = file.origin().to_string();
        RemoteWeights {
            inner: SourceHandle::new("remote file", Some(origin), Arc::new(file)),
        }
    }
}

/// The bytes of a fetch (null: the tensor's file is held whole).
fn fetched(bytes: &Option<Unknown>) -> CoreResult<Option<Vec<u8>>> {
    match bytes {
        None => Ok(None),
        Some(b) => {
            let view = bytes_arg(b, "bytes")?;
            with_view(&view, |b| Ok(Some(b.to_vec())))
        }
    }
}

/// A tensor from its stored bytes, as `getTensor` gives it locally.
fn served_tensor(
    file: &RemoteFile,
    name: &str,
    stored: Vec<u8>,
    mode: ReadMode,
) -> CoreResult<Tensor> {
    let t = file.source().info(name)?.clone();
    let data = match (mode.as_, file.serve(name, stored)?) {
        (_, Served::Bytes(b)) => to_typed_array(t.dtype, b, mode),
        (ReadAs::Raw, Served::Decoder(d)) => to_typed_array(t.dtype, d.stored, mode),
        // Block types decode straight into the output array, as local reads do.
        (ReadAs::Native | ReadAs::F32, Served::Decoder(d)) => decoded_f32(t.numel(), d),
        (ReadAs::F64, Served::Decoder(d)) => {
            let bytes = TensorBytes::Owned(d.decode_to_bytes(t.numel())?);
            to_typed_array(t.dtype, bytes, mode)
        }
    }
    .map_err(|e| e.with_tensor(name))?;
    Ok(Tensor {
        name: t.name,
        dtype: t.dtype.name().to_string(),
        shape: shape_to_js(&t.shape),
        data,
    })
}

#[napi]
impl RemoteWeights {
    #[napi(catch_unwind, getter, ts_return_type = "WeightsFormat")]
    pub fn format(&self, env: Env) -> napi::Result<String> {
        guard(&env, "RemoteWeights.format", || {
            let file = self.inner.get_or_throw(&env)?;
            Ok(file.source().format().name().to_string())
        })
    }

    /// The URL opened.
    #[napi(catch_unwind, getter)]
    pub fn path(&self, env: Env) -> napi::Result<String> {
        guard(&env, "RemoteWeights.path", || {
            Ok(self.inner.get_or_throw(&env)?.origin().to_string())
        })
    }

    /// A directory's URL (ending in '/'), or null for a file.
    #[napi(catch_unwind, getter)]
    pub fn base(&self, env: Env) -> napi::Result<Option<String>> {
        guard(&env, "RemoteWeights.base", || {
            Ok(self.inner.get_or_throw(&env)?.base().map(str::to_string))
        })
    }

    #[napi(
        catch_unwind,
        getter,
        ts_return_type = "Record<string, unknown> | null"
    )]
    pub fn config(&self, env: Env) -> napi::Result<Option<Json>> {
        guard(&env, "RemoteWeights.config", || {
            Ok(self.inner.get_or_throw(&env)?.config().cloned().map(Json))
        })
    }

    /// A directory's weight files, relative to it.
    #[napi(catch_unwind, getter)]
    pub fn files(&self, env: Env) -> napi::Result<Vec<String>> {
        guard(&env, "RemoteWeights.files", || {
            Ok(self.inner.get_or_throw(&env)?.files())
        })
    }

    #[napi(catch_unwind, getter, ts_return_type = "Record<string, string> | null")]
    pub fn metadata(&self, env: Env) -> napi::Result<Option<Json>> {
        guard(&env, "RemoteWeights.metadata", || self.inner.metadata(&env))
    }

    #[napi(catch_unwind, getter)]
    pub fn tensor_names(&self, env: Env) -> napi::Result<Vec<String>> {
        guard(&env, "RemoteWeights.tensorNames", || {
            self.inner.tensor_names(&env)
        })
    }

    #[napi(catch_unwind, getter)]
    pub fn num_parameters(&self, env: Env) -> napi::Result<f64> {
        guard(&env, "RemoteWeights.numParameters", || {
            self.inner.num_parameters(&env)
        })
    }

    #[napi(catch_unwind, getter)]
    pub fn byte_length(&self, env: Env) -> napi::Result<f64> {
        guard(&env, "RemoteWeights.byteLength", || {
            Ok(self.inner.get_or_throw(&env)?.byte_length() as f64)
        })
    }

    #[napi(catch_unwind, strict)]
    pub fn has(&self, env: Env, name: String) -> napi::Result<bool> {
        guard(&env, "RemoteWeights.has", || self.inner.has(&env, &name))
    }

    #[napi(catch_unwind, strict)]
    pub fn info(&self, env: Env, name: String) -> napi::Result<TensorInfo> {
        guard(&env, "RemoteWeights.info", || self.inner.info(&env, &name))
    }

    /// The header of a GGUF file read by ranges, as a `GgufFile` (its tensors are served
    /// here), or null.
    #[napi(catch_unwind)]
    pub fn gguf(&self, env: Env) -> napi::Result<Option<GgufFile>> {
        guard(&env, "RemoteWeights.gguf", || {
            let file = self.inner.get_or_throw(&env)?;
            let origin = file.origin().to_string();
            Ok(file
                .gguf()
                .map(|g| GgufFile::wrap_shared(Arc::clone(g), Some(origin))))
        })
    }

    /// The companion files of a directory (each fetched whole, at most `cap` bytes, and
    /// skipped where missing).
    #[napi(catch_unwind)]
    pub fn companions(&self, env: Env) -> napi::Result<Vec<Companion>> {
        guard(&env, "RemoteWeights.companions", || {
            let run = || -> CoreResult<Vec<Companion>> {
                let file = self.inner.get()?;
                Ok(file
                    .companions()?
                    .into_iter()
                    .map(|(file, url)| Companion {
                        file,
                        url,
                        cap: stcore::pretrained::layout::COMPANION_MAX_BYTES as f64,
                    })
                    .collect())
            };
            run().or_throw(&env)
        })
    }

    /// Where the stored bytes of `name` lie, or null when its file is held whole.
    #[napi(catch_unwind, strict)]
    pub fn spans(&self, env: Env, name: String) -> napi::Result<Option<Vec<RemoteSpan>>> {
        guard(&env, "RemoteWeights.spans", || {
            let run = || -> CoreResult<Option<Vec<RemoteSpan>>> {
                let file = self.inner.get()?;
                if file.holds(&name)? {
                    return Ok(None);
                }
                Ok(Some(
                    file.spans(&name)?.into_iter().map(span_to_js).collect(),
                ))
            };
            run().or_throw(&env)
        })
    }

    /// The spans a slice needs and its shape, or null when the file is held whole.
    #[napi(
        catch_unwind,
        strict,
        ts_args_type = "name: string, ranges: Array<[number, number] | number | null>"
    )]
    pub fn slice_spans(
        &self,
        env: Env,
        name: String,
        ranges: JsRanges,
    ) -> napi::Result<Option<RemoteSlice>> {
        guard(&env, "RemoteWeights.sliceSpans", || {
            let run = || -> CoreResult<Option<RemoteSlice>> {
                let file = self.inner.get()?;
                if file.holds(&name)? {
                    return Ok(None);
                }
                let (shape, spans) = file.slice_spans(&name, &slice_args(&ranges)?)?;
                Ok(Some(RemoteSlice {
                    shape: shape_to_js(&shape),
                    spans: spans.into_iter().map(span_to_js).collect(),
                }))
            };
            run().or_throw(&env)
        })
    }

    /// The tensor, from the bytes of its spans concatenated (null: its file is held).
    #[napi(
        catch_unwind,
        strict,
        ts_args_type = "name: string, bytes: Uint8Array | null, options?: GetOptions | null"
    )]
    pub fn serve(
        &self,
        env: Env,
        name: String,
        bytes: Option<Unknown>,
        options: Option<GetOptions>,
    ) -> napi::Result<Tensor> {
        guard(&env, "RemoteWeights.serve", || {
            let run = || -> CoreResult<Tensor> {
                // `options` was converted before this body ran: the bytes are taken last, copied.
                let mode = GetOptions::mode(&options, ReadAs::Native)?;
                let file = self.inner.get()?;
                match fetched(&bytes)? {
                    None => read_source_tensor(file.source(), &name, mode),
                    Some(stored) => served_tensor(&file, &name, stored, mode),
                }
            };
            run().or_throw(&env)
        })
    }

    /// A slice, from the bytes of its spans concatenated (null: its file is held).
    #[napi(
        catch_unwind,
        strict,
        ts_args_type = "name: string, ranges: Array<[number, number] | number | null>, bytes: Uint8Array | null, options?: GetOptions | null"
    )]
    pub fn serve_slice(
        &self,
        env: Env,
        name: String,
        ranges: JsRanges,
        bytes: Option<Unknown>,
        options: Option<GetOptions>,
    ) -> napi::Result<Tensor> {
        guard(&env, "RemoteWeights.serveSlice", || {
            let run = || -> CoreResult<Tensor> {
                let mode = GetOptions::mode(&options, ReadAs::Native)?;
                let args = slice_args(&ranges)?;
                let file = self.inner.get()?;
                let Some(stored) = fetched(&bytes)? else {
                    return read_source_slice(file.source(), &name, &args, mode);
                };
                let t = file.source().info(&name)?.clone();
                let (shape, stored) = file.serve_slice(&name, &args, stored)?;
                let data = to_typed_array(t.dtype, TensorBytes::Owned(stored), mode)
                    .map_err(|e| e.with_tensor(&name))?;
                Ok(Tensor {
                    name: t.name,
                    dtype: t.dtype.name().to_string(),
                    shape: shape_to_js(&shape),
                    data,
                })
            };
            run().or_throw(&env)
        })
    }

    /// Release the listing now (later calls throw ERR_CLOSED).
    #[napi(catch_unwind)]
    pub fn close(&self, env: Env) -> napi::Result<()> {
        guard(&env, "RemoteWeights.close", || {
            self.inner.close();
            Ok(())
        })
    }
}
