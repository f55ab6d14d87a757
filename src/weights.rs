//! `WeightsFile` (`openWeights`, `openWeightsSync`): one reader for every format, detected by
//! content. Everything format-specific lives behind `stcore::TensorSource`; this module
//! only converts arguments and hands tensors out as typed arrays (views of the mapping
//! where the bytes allow, as `SafeTensorsFile` does).

use crate::args::parse_backend;
use crate::convert::Json;
use crate::error::{guard, invalid_argument, option, CoreResult, OrThrow};
use crate::gguf::GgufFile;
use crate::handle::{reader_methods, Reader, SourceHandle, TensorInfo};
use crate::tasks::CoreTask;
use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;
use stcore::{OpenOptions, TensorSource, WeightsFormat};
use std::path::Path;
use std::sync::Arc;

pub(crate) fn parse_format(name: Option<String>) -> CoreResult<Option<WeightsFormat>> {
    name.map(|n| {
        WeightsFormat::from_name(&n).ok_or_else(|| {
            let names: Vec<String> = WeightsFormat::ALL
                .iter()
                .map(|f| format!("'{}'", f.name()))
                .collect();
            invalid_argument(format!(
                "options.format must be one of {}, not '{n}'",
                names.join(", ")
            ))
        })
    })
    .transpose()
}

struct OpenArgs {
    format: Option<WeightsFormat>,
    backend: stcore::memory::Backend,
}

fn open_args(options: &Option<Object>) -> CoreResult<OpenArgs> {
    Ok(OpenArgs {
        format: parse_format(option::<String>(options, "format")?)?,
        backend: parse_backend(options)?,
    })
}

/// What `openWeights` returns: a `GgufFile` for GGUF (which adds the header's own
/// description), a `WeightsFile` for everything else.
pub type Opened = Either<WeightsFile, GgufFile>;

fn open_source(path: &str, args: CoreResult<OpenArgs>) -> CoreResult<Opened> {
    let args = args?;
    if path.starts_with("http://") || path.starts_with("https://") {
        return Err(invalid_argument(
            "a URL needs the network: use openWeights (async)",
        ));
    }
    use stcore::format::detect::Detected;
    let p = Path::new(path);
    // A regular file is recognised here (once), so that GGUF becomes a `GgufFile`; anything
    // else (a directory, a path that cannot be read) goes to `stcore::open` for its errors.
    let is_file = std::fs::metadata(p).is_ok_and(|m| m.is_file());
    let detected = match args.format {
        Some(f) => Some(Detected::Format(f)),
        None if is_file => stcore::format::detect_file(p).ok(),
        None => None,
    };
    if is_file && detected == Some(Detected::Format(WeightsFormat::Gguf)) {
        return crate::gguf::open_gguf(path, Ok(args.backend)).map(Either::B);
    }
    let mut options = OpenOptions::with_backend(args.backend);
    let source = match detected {
        Some(d) if is_file => stcore::pretrained::open_detected(p, d, &mut options)?,
        _ => stcore::open(p, args.format, &mut options)?,
    };
    Ok(Either::A(WeightsFile::wrap(Arc::from(source), None)))
}

/// A weights file of any format this package reads (SafeTensors, a sharded index, a model
/// directory, GGUF, weights.mlx), detected by its bytes. Tensors come back as typed arrays
/// that view the file's mapping where the bytes allow, copies otherwise.
#[napi]
pub struct WeightsFile {
    pub(crate) inner: SourceHandle<dyn TensorSource>,
    /// Where the bytes came from, for sources read from memory (a URL).
    origin: Option<String>,
}

impl WeightsFile {
    fn wrap(source: Arc<dyn TensorSource>, origin: Option<String>) -> WeightsFile {
        let path = origin
            .clone()
            .or_else(|| source.path().map(|p| p.display().to_string()));
        WeightsFile {
            inner: SourceHandle::new("WeightsFile", path, source),
            origin,
        }
    }
}

/// `openWeightsSync`: open and validate a file or model directory on the calling thread.
#[napi(
    catch_unwind,
    strict,
    ts_args_type = "path: string, options?: OpenWeightsOptions",
    ts_return_type = "WeightsFile | GgufFile"
)]
pub fn open_weights_sync(env: Env, path: String, options: Option<Object>) -> napi::Result<Opened> {
    guard(&env, "openWeightsSync", || {
        open_source(&path, open_args(&options)).or_throw(&env)
    })
}

/// `openWeights` of a local path: open off the event loop. Internal (index.js routes URLs
/// to lib/remote.js and paths here).
#[napi(
    catch_unwind,
    strict,
    ts_args_type = "path: string, options?: OpenWeightsOptions",
    ts_return_type = "Promise<WeightsFile | GgufFile>"
)]
pub fn open_weights_async(
    env: Env,
    path: String,
    options: Option<Object>,
) -> napi::Result<AsyncTask<CoreTask<Opened>>> {
    guard(&env, "openWeightsAsync", || {
        let args = open_args(&options);
        Ok(CoreTask::new(move || open_source(&path, args)))
    })
}

reader_methods!(WeightsFile, "WeightsFile");

impl Reader for WeightsFile {}

#[napi]
impl WeightsFile {
    /// Instances come from `openWeights` and `openWeightsSync`.
    #[napi(catch_unwind, constructor)]
    pub fn not_constructible(env: Env) -> napi::Result<Self> {
        guard(&env, "WeightsFile.constructor", || {
            Err(crate::error::not_constructible(
                &env,
                "WeightsFile",
                "openWeights(pathOrUrl) or openWeightsSync(path)",
            ))
        })
    }

    #[napi(catch_unwind, getter, ts_return_type = "WeightsFormat")]
    pub fn format(&self, env: Env) -> napi::Result<String> {
        guard(&env, "WeightsFile.format", || {
            Ok(self.inner.get_or_throw(&env)?.format().name().to_string())
        })
    }

    /// The file or directory opened (a URL for remote files), or null for bytes.
    #[napi(catch_unwind, getter)]
    pub fn path(&self, env: Env) -> napi::Result<Option<String>> {
        guard(&env, "WeightsFile.path", || {
            let inner = self.inner.get_or_throw(&env)?;
            Ok(self
                .origin
                .clone()
                .or_else(|| inner.path().map(|p| p.display().to_string())))
        })
    }

    /// The format's key/values (SafeTensors `__metadata__`, GGUF's pairs, …), or null.
    #[napi(
        catch_unwind,
        getter,
        ts_return_type = "Record<string, unknown> | null"
    )]
    pub fn metadata(&self, env: Env) -> napi::Result<Option<Json>> {
        guard(&env, "WeightsFile.metadata", || self.inner.metadata(&env))
    }

    /// `config.json` of a model directory, or null.
    #[napi(
        catch_unwind,
        getter,
        ts_return_type = "Record<string, unknown> | null"
    )]
    pub fn config(&self, env: Env) -> napi::Result<Option<Json>> {
        guard(&env, "WeightsFile.config", || {
            Ok(self.inner.get_or_throw(&env)?.config().cloned().map(Json))
        })
    }

    #[napi(catch_unwind, strict)]
    pub fn info(&self, env: Env, name: String) -> napi::Result<TensorInfo> {
        guard(&env, "WeightsFile.info", || self.inner.info(&env, &name))
    }

    /// Release the file now (see `SafeTensorsFile.close`). A second call does nothing.
    #[napi(catch_unwind)]
    pub fn close(&self, env: Env) -> napi::Result<()> {
        guard(&env, "WeightsFile.close", || {
            self.inner.close();
            Ok(())
        })
    }
}
