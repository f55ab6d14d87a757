//! `Model`: pretrained model directories (config.json + weights) from JavaScript.

use crate::error::{invalid_argument, CoreResult, OrThrow};
use crate::file::{GetOptions, Tensor, TensorRecord};
use crate::models::{parse_matrix, with_matrix};
use crate::tasks::{CoreTask, ProgressSink};
use crate::typed::{new_array, to_typed_array, JsArray, ReadAs, ReadMode};
use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;
use stcore::models::AnyModel;
use stcore::pretrained::{LoadProgress, ModelDir, SaveOptions};
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
    /// fsync each file before its rename, and the directory after (default false: atomic
    /// renames only, as `saveFile`).
    pub durable: Option<bool>,
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
        out.durability = crate::write::durability(o.durable);
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
    inner: Arc<ModelDir>,
    default_as: ReadAs,
    /// The classical model the directory holds, built on first `predict`.
    predictor: OnceLock<CoreResult<AnyModel>>,
}

#[napi]
impl Model {
    /// Instances come from `Model.loadPretrained` / `loadPretrainedSync` (factories bypass this).
    #[napi(constructor)]
    pub fn not_constructible(env: Env) -> napi::Result<Self> {
        Err(crate::error::not_constructible(
            &env,
            "Model",
            "Model.loadPretrained(dir) or Model.loadPretrainedSync(dir)",
        ))
    }

    /// `loadPretrained` on the calling thread.
    #[napi(
        strict,
        writable,
        ts_args_type = "dir: string, options?: LoadPretrainedOptions"
    )]
    pub fn load_pretrained_sync(
        env: Env,
        dir: String,
        options: Option<Object>,
    ) -> napi::Result<Model> {
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
    }

    #[napi(getter)]
    pub fn dir(&self) -> String {
        self.inner.dir().display().to_string()
    }

    /// config.json, parsed (keys as written).
    #[napi(getter, ts_return_type = "Record<string, unknown>")]
    pub fn config(&self) -> crate::convert::Json {
        crate::convert::Json(self.inner.config().clone())
    }

    #[napi(
        getter,
        ts_return_type = "'safetensors' | 'sharded-safetensors' | 'mlx'"
    )]
    pub fn format(&self) -> String {
        self.inner.format().name().to_string()
    }

    /// Weight files used, relative to `dir`.
    #[napi(getter)]
    pub fn files(&self) -> Vec<String> {
        self.inner.files().to_vec()
    }

    #[napi(getter)]
    pub fn tensor_names(&self) -> Vec<String> {
        self.inner.tensor_names().map(str::to_string).collect()
    }

    #[napi(getter)]
    pub fn num_parameters(&self) -> f64 {
        self.inner.num_parameters() as f64
    }

    #[napi(strict)]
    pub fn has(&self, name: String) -> bool {
        self.inner.source(&name).is_ok()
    }

    #[napi(strict)]
    pub fn get_tensor(
        &self,
        env: Env,
        name: String,
        options: Option<GetOptions>,
    ) -> napi::Result<Tensor> {
        let run = || {
            let mode = GetOptions::mode(&options, self.default_as)?;
            read_model_tensor(&self.inner, &name, mode)
        };
        run().or_throw(&env)
    }

    #[napi(strict, ts_return_type = "Promise<Tensor>")]
    pub fn get_tensor_async(
        &self,
        name: String,
        options: Option<GetOptions>,
    ) -> AsyncTask<CoreTask<Tensor>> {
        let inner = Arc::clone(&self.inner);
        let mode = GetOptions::mode(&options, self.default_as);
        CoreTask::new(move || read_model_tensor(&inner, &name, mode?))
    }

    #[napi(strict, ts_return_type = "Record<string, Tensor>")]
    pub fn tensors(&self, env: Env, options: Option<GetOptions>) -> napi::Result<TensorRecord> {
        let run = || {
            let mode = GetOptions::mode(&options, self.default_as)?;
            self.inner
                .tensor_names()
                .map(|n| read_model_tensor(&self.inner, n, mode))
                .collect::<CoreResult<Vec<_>>>()
                .map(TensorRecord)
        };
        run().or_throw(&env)
    }

    /// Write config.json and the weights to `dir` (atomically per file).
    #[napi(strict, ts_return_type = "Promise<void>")]
    pub fn save(&self, dir: String, options: Option<ModelSaveOptions>) -> AsyncTask<CoreTask<()>> {
        let inner = Arc::clone(&self.inner);
        let options = save_options(&options);
        CoreTask::new(move || inner.save(Path::new(&dir), &options?).map(|_| ()))
    }
}

impl Model {
    fn new(inner: ModelDir, default_as: ReadAs) -> Model {
        Model {
            inner: Arc::new(inner),
            default_as,
            predictor: OnceLock::new(),
        }
    }
}

#[napi]
impl Model {
    /// Predictions of a directory saved by `LinearRegression`/`LogisticRegression.save`
    /// (config.json `model_type`): linear → one value per row; logistic → class
    /// probabilities, rows × classes. Other models: ERR_INVALID_MODEL.
    #[napi(strict, ts_args_type = "x: Matrix", ts_return_type = "Float32Array")]
    pub fn predict(&self, env: Env, x: Unknown) -> napi::Result<JsArray> {
        let run = || {
            let model = self
                .predictor
                .get_or_init(|| AnyModel::from_model_dir(&self.inner))
                .as_ref()
                .map_err(Clone::clone)?;
            Ok((model, parse_matrix(&x)?))
        };
        let (model, x) = run().or_throw(&env)?;
        let len = x.rows().saturating_mul(model.output_width());
        new_array(&env, TypedArrayType::Float32, len, |out| {
            with_matrix(&x, |x| model.predict_into(x, out))
        })
    }
}

fn read_model_tensor(model: &ModelDir, name: &str, mode: ReadMode) -> CoreResult<Tensor> {
    let (info, bytes) = model.bytes(name)?;
    let data = to_typed_array(info.dtype, bytes, mode).map_err(|e| e.with_tensor(name))?;
    Ok(Tensor {
        name: info.name.clone(),
        dtype: info.dtype.name().to_string(),
        shape: crate::file::shape_to_js(&info.shape),
        data,
    })
}

/// Load a local model directory off the event loop (index.js's `Model.loadPretrained` calls
/// this for paths; URLs go to lib/remote.js). Internal: not exported by the package entry.
#[napi(
    strict,
    ts_args_type = "dir: string, options?: LoadPretrainedOptions",
    ts_return_type = "Promise<Model>"
)]
pub fn load_model_dir(
    dir: String,
    options: Option<Object>,
) -> napi::Result<AsyncTask<CoreTask<Model>>> {
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
}
