//! `Model`: pretrained model directories (config.json + weights) from JavaScript.

use crate::convert::Json;
use crate::error::{guard, invalid_argument, CoreResult, OrThrow};
use crate::handle::{reader_methods, Held, Reader, SourceHandle, TensorInfo};
use crate::models::{parse_matrix, with_matrix, MatrixArg};
use crate::tasks::{CoreTask, ProgressSink};
use crate::typed::{new_array, JsArray, ReadAs};
use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;
use stcore::models::AnyModel;
use stcore::pretrained::{LoadProgress, ModelDir, SaveOptions};
use stcore::TensorSource;
use std::path::Path;
use std::sync::{Arc, OnceLock};

#[napi(object)]
pub struct ProgressEvent {
    /// The weight file, relative to the model directory.
    pub file: String,
    pub loaded_bytes: f64,
    pub total_bytes: f64,
}

impl From<LoadProgress> for ProgressEvent {
    fn from(p: LoadProgress) -> Self {
        ProgressEvent {
            file: p.file,
            loaded_bytes: p.loaded_bytes as f64,
            total_bytes: p.total_bytes as f64,
        }
    }
}

#[napi(object, object_to_js = false)]
pub struct ModelSaveOptions {
    #[napi(ts_type = "'safetensors' | 'mlx'")]
    pub format: Option<String>,
    pub max_shard_bytes: Option<f64>,
    /// fsync every file and the new directory before it takes the old one's place, and the
    /// parent directory after (default false).
    pub durable: Option<bool>,
}

/// What `Model.save` wrote.
#[napi(object, object_from_js = false)]
pub struct SaveReport {
    /// The weight files, relative to the directory (`model.safetensors`, or the shards and
    /// `model.safetensors.index.json`, or `weights.mlx`).
    pub files: Vec<String>,
    /// The tokenizer, template, generation and processor files copied from the model's own
    /// directory.
    pub companions: Vec<String>,
    /// Files of the model's directory left out, and why (one that resolves outside it, into
    /// /proc, /sys or /dev, or is not a regular file).
    pub warnings: Vec<String>,
}

fn save_options(options: &Option<ModelSaveOptions>) -> CoreResult<SaveOptions> {
    let mut out = SaveOptions::default();
    if let Some(o) = options {
        out.mlx = match o.format.as_deref() {
            None | Some("safetensors") => false,
            Some("mlx") => true,
            Some(other) => {
                return Err(invalid_argument(format!(
                    "options.format must be 'safetensors' or 'mlx', not '{other}'"
                )))
            }
        };
        if let Some(max) = o.max_shard_bytes {
            if !(max >= 1.0 && max.fract() == 0.0) {
                return Err(invalid_argument(format!(
                    "options.maxShardBytes must be a positive integer, got {max}"
                )));
            }
            out.max_shard_bytes = Some(max as u64);
        }
        out.durability = crate::write::Durable::arg(o.durable).durability();
    }
    Ok(out)
}

/// `options.as` of loadPretrained: the default form of `getTensor` (`'F32'` upcasts, the
/// MLX-Node behaviour).
fn default_as(options: &Option<Object>) -> CoreResult<ReadAs> {
    let as_: Option<String> = match options {
        Some(o) => o
            .get_named_property::<Option<String>>("as")
            .map_err(|e| invalid_argument(format!("options.as: {}", e.reason)))?,
        None => None,
    };
    match as_.as_deref() {
        None | Some("native") => Ok(ReadAs::Native),
        Some("F32") => Ok(ReadAs::F32),
        Some(other) => Err(invalid_argument(format!(
            "options.as must be 'native' or 'F32', not '{other}'"
        ))),
    }
}

type ProgressFn<'a> = Function<'a, ProgressEvent, ()>;

fn progress_callback<'a>(options: &Option<Object<'a>>) -> CoreResult<Option<ProgressFn<'a>>> {
    match options {
        Some(o) => o
            .get_named_property::<Option<ProgressFn<'a>>>("onProgress")
            .map_err(|e| {
                invalid_argument(format!(
                    "options.onProgress must be a function: {}",
                    e.reason
                ))
            }),
        None => Ok(None),
    }
}

/// A pretrained model directory: `config.json` plus weights (`weights.safetensors`,
/// `model.safetensors`, a sharded `model.safetensors.index.json`, or `weights.mlx`).
#[napi]
pub struct Model {
    inner: SourceHandle<Loaded>,
    default_as: ReadAs,
}

/// What a `Model` holds until `close()`.
struct Loaded {
    dir: ModelDir,
    /// The classical model the directory holds, built on first `predict`.
    predictor: OnceLock<CoreResult<AnyModel>>,
}

impl Held for Loaded {
    fn source(&self) -> &dyn TensorSource {
        &self.dir
    }
}

impl Loaded {
    fn predictor(&self) -> CoreResult<&AnyModel> {
        self.predictor
            .get_or_init(|| AnyModel::from_source(&self.dir))
            .as_ref()
            .map_err(Clone::clone)
    }
}

reader_methods!(Model, "Model", slices);

impl Reader for Model {
    fn default_as(&self) -> ReadAs {
        self.default_as
    }
}

#[napi]
impl Model {
    /// Instances come from `Model.loadPretrained` / `loadPretrainedSync` (factories bypass this).
    #[napi(catch_unwind, constructor)]
    pub fn not_constructible(env: Env) -> napi::Result<Self> {
        guard(&env, "Model.constructor", || {
            Err(crate::error::not_constructible(
                &env,
                "Model",
                "Model.loadPretrained(dir) or Model.loadPretrainedSync(dir)",
            ))
        })
    }

    /// `loadPretrained` on the calling thread.
    #[napi(
        catch_unwind,
        strict,
        writable,
        ts_args_type = "dir: string, options?: LoadPretrainedOptions"
    )]
    pub fn load_pretrained_sync(
        env: Env,
        dir: String,
        options: Option<Object>,
    ) -> napi::Result<Model> {
        guard(&env, "Model.loadPretrainedSync", || {
            if dir.starts_with("http://") || dir.starts_with("https://") {
                return Err(crate::error::to_js(
                    &env,
                    &invalid_argument(
                        "remote directories need the network: use Model.loadPretrained (async)",
                    ),
                ));
            }
            let default_as = default_as(&options).or_throw(&env)?;
            let callback = progress_callback(&options).or_throw(&env)?;
            let mut callback_error = None;
            let inner = ModelDir::open(Path::new(&dir), &mut |p| {
                if let Some(f) = &callback {
                    if let Err(e) = f.call(ProgressEvent::from(p)) {
                        callback_error.get_or_insert(e);
                    }
                }
            })
            .or_throw(&env)?;
            if let Some(e) = callback_error {
                return Err(e);
            }
            Ok(Model::new(inner, default_as))
        })
    }

    #[napi(catch_unwind, getter)]
    pub fn dir(&self, env: Env) -> napi::Result<String> {
        guard(&env, "Model.dir", || {
            let m = self.inner.get().or_throw(&env)?;
            Ok(m.dir.dir().display().to_string())
        })
    }

    /// config.json, parsed (keys as written).
    #[napi(catch_unwind, getter, ts_return_type = "Record<string, unknown>")]
    pub fn config(&self, env: Env) -> napi::Result<Json> {
        guard(&env, "Model.config", || {
            let m = self.inner.get().or_throw(&env)?;
            Ok(Json(m.dir.config().clone()))
        })
    }

    /// The format of the weights (each weight file is recognised by its bytes).
    #[napi(catch_unwind, getter, ts_return_type = "WeightsFormat")]
    pub fn format(&self, env: Env) -> napi::Result<String> {
        guard(&env, "Model.format", || {
            let m = self.inner.get().or_throw(&env)?;
            Ok(m.dir.format().name().to_string())
        })
    }

    /// Weight files used, relative to `dir`.
    #[napi(catch_unwind, getter)]
    pub fn files(&self, env: Env) -> napi::Result<Vec<String>> {
        guard(&env, "Model.files", || {
            let m = self.inner.get().or_throw(&env)?;
            Ok(m.dir.files().to_vec())
        })
    }

    /// The directory (as `dir`).
    #[napi(catch_unwind, getter)]
    pub fn path(&self, env: Env) -> napi::Result<String> {
        guard(&env, "Model.path", || self.dir(env))
    }

    /// The weights' key/values (a SafeTensors `__metadata__`, …), or null.
    #[napi(
        catch_unwind,
        getter,
        ts_return_type = "Record<string, unknown> | null"
    )]
    pub fn metadata(&self, env: Env) -> napi::Result<Option<Json>> {
        guard(&env, "Model.metadata", || self.inner.metadata(&env))
    }

    #[napi(catch_unwind, strict)]
    pub fn info(&self, env: Env, name: String) -> napi::Result<TensorInfo> {
        guard(&env, "Model.info", || self.inner.info(&env, &name))
    }

    /// Release the weights now (see `SafeTensorsFile.close`); a `save` already started
    /// finishes. A second call does nothing.
    #[napi(catch_unwind)]
    pub fn close(&self, env: Env) -> napi::Result<()> {
        guard(&env, "Model.close", || {
            self.inner.close();
            Ok(())
        })
    }

    /// Write the model to `dir` as transformers' `save_pretrained` lays it out: config.json,
    /// `model.safetensors` (or shards and their index), the tokenizer and generation files of
    /// the model's own directory. The directory is replaced whole: built beside it, then
    /// swapped in (what else it held is kept, weight files of other layouts excepted).
    #[napi(catch_unwind, strict, ts_return_type = "Promise<SaveReport>")]
    pub fn save(
        &self,
        env: Env,
        dir: String,
        options: Option<ModelSaveOptions>,
    ) -> napi::Result<AsyncTask<CoreTask<SaveReport>>> {
        guard(&env, "Model.save", || {
            let m = self.inner.get();
            let options = save_options(&options);
            Ok(CoreTask::new(move || {
                let saved = m?.dir.save(Path::new(&dir), &options?)?;
                Ok(SaveReport {
                    files: saved.files,
                    companions: saved.companions,
                    warnings: saved.warnings,
                })
            }))
        })
    }
}

impl Model {
    fn new(dir: ModelDir, default_as: ReadAs) -> Model {
        let path = Some(dir.dir().display().to_string());
        let loaded = Loaded {
            dir,
            predictor: OnceLock::new(),
        };
        Model {
            inner: SourceHandle::new("Model", path, Arc::new(loaded)),
            default_as,
        }
    }
}

#[napi]
impl Model {
    /// Predictions of a directory saved by `LinearRegression`/`LogisticRegression.save`
    /// (config.json `model_type`), as that class's `predict` gives them: linear → one value
    /// per row (Float32Array); logistic → one class label per row (Int32Array). Other
    /// models: ERR_INVALID_MODEL.
    #[napi(
        catch_unwind,
        strict,
        ts_args_type = "x: Matrix",
        ts_return_type = "Float32Array | Int32Array"
    )]
    pub fn predict(&self, env: Env, x: Unknown) -> napi::Result<JsArray> {
        guard(&env, "Model.predict", || {
            let (loaded, x) = self.model_and_matrix(&x).or_throw(&env)?;
            match loaded.predictor().or_throw(&env)? {
                AnyModel::Linear(model) => {
                    new_array(&env, TypedArrayType::Float32, x.rows(), |out| {
                        with_matrix(&x, |x| model.predict_into(x, out))
                    })
                }
                AnyModel::Logistic(model) => {
                    new_array(&env, TypedArrayType::Int32, x.rows(), |out| {
                        with_matrix(&x, |x| model.predict_into(x, out))
                    })
                }
            }
        })
    }

    /// Class probabilities of a classifier directory (`LogisticRegression.save`): rows ×
    /// classes, row-major, columns in the order of config.json's `classes`. A regression
    /// model has none: ERR_INVALID_ARGUMENT.
    #[napi(
        catch_unwind,
        strict,
        ts_args_type = "x: Matrix",
        ts_return_type = "Float32Array"
    )]
    pub fn predict_proba(&self, env: Env, x: Unknown) -> napi::Result<JsArray> {
        guard(&env, "Model.predictProba", || {
            let (loaded, x) = self.model_and_matrix(&x).or_throw(&env)?;
            match loaded.predictor().or_throw(&env)? {
                AnyModel::Logistic(model) => {
                    let len = x.rows().saturating_mul(model.classes().len());
                    new_array(&env, TypedArrayType::Float32, len, |out| {
                        with_matrix(&x, |x| model.predict_proba_into(x, out))
                    })
                }
                other => Err(crate::error::to_js(
                    &env,
                    &invalid_argument(format!(
                        "predictProba needs a classifier; this directory holds a {} (use predict)",
                        other.model_type()
                    ))
                    .with_path(loaded.dir.dir()),
                )),
            }
        })
    }
}

impl Model {
    /// The loaded weights with their model built (ERR_CLOSED, ERR_INVALID_MODEL first), then
    /// the matrix (whose getters may run JS: the call keeps its own `Arc`).
    fn model_and_matrix<'x>(&self, x: &Unknown<'x>) -> CoreResult<(Arc<Loaded>, MatrixArg<'x>)> {
        let loaded = self.inner.get()?;
        loaded.predictor()?;
        Ok((loaded, parse_matrix(x)?))
    }
}

/// Load a local model directory off the event loop (index.js's `Model.loadPretrained` calls
/// this for paths; URLs go to lib/remote.js). Internal: not exported by the package entry.
#[napi(
    catch_unwind,
    strict,
    ts_args_type = "dir: string, options?: LoadPretrainedOptions",
    ts_return_type = "Promise<Model>"
)]
pub fn load_model_dir(
    env: Env,
    dir: String,
    options: Option<Object>,
) -> napi::Result<AsyncTask<CoreTask<Model>>> {
    guard(&env, "loadModelDir", || {
        // Bad options reject the promise (like every other failure) rather than throw.
        let default_as = default_as(&options);
        let callback = progress_callback(&options);
        let (sink, callback_ok) = match callback {
            Ok(f) => (ProgressSink::new(f)?, Ok(())),
            Err(e) => (None, Err(e)),
        };
        Ok(CoreTask::new(move || {
            callback_ok?;
            let default_as = default_as?;
            let inner = ModelDir::open(Path::new(&dir), &mut |p| {
                if let Some(sink) = &sink {
                    sink.send(ProgressEvent::from(p));
                }
            })?;
            Ok(Model::new(inner, default_as))
        }))
    })
}
