//! `LinearRegression` and `LogisticRegression` from JavaScript.

use crate::args::{with_view, ViewArg};
use crate::error::{guard, invalid_argument, option, CoreResult, OrThrow};
use crate::tasks::CoreTask;
use crate::typed::{new_array, JsArray};
use crate::write::{metadata_arg, natural_dtype, Durable, SaveOptions};
use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;
use stcore::cast;
use stcore::format::gguf::Preset;
use stcore::models::{
    matrix_from_rows, AnyModel, LinearRegression as CoreLinear, LogisticRegression as CoreLogistic,
    LogisticRegressionParams, MatrixData, MatrixRef, ModelKind,
};
use stcore::CoreError;
use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

/// An owned row-major matrix from a JS `Matrix` argument (large copies in huge pages).
pub enum OwnedMatrix {
    F32(Vec<f32>, usize, usize),
    F64(Vec<f64>, usize, usize),
}

impl OwnedMatrix {
    pub fn as_ref(&self) -> CoreResult<MatrixRef<'_>> {
        match self {
            OwnedMatrix::F32(d, r, c) => MatrixRef::new(MatrixData::F32(d.as_slice()), *r, *c),
            OwnedMatrix::F64(d, r, c) => MatrixRef::new(MatrixData::F64(d.as_slice()), *r, *c),
        }
    }
}

fn napi_invalid(what: &'static str) -> impl Fn(napi::Error) -> CoreError {
    move |e| invalid_argument(format!("{what}: {}", e.reason))
}

fn count(v: f64, what: &str) -> CoreResult<usize> {
    if v.fract() == 0.0 && (0.0..=9007199254740991.0).contains(&v) {
        Ok(v as usize)
    } else {
        Err(invalid_argument(format!(
            "{what} must be a non-negative integer, got {v}"
        )))
    }
}

/// A `Matrix` argument read in phase 1 (see [`crate::args`]): `number[][]` rows converted to
/// f64, or a typed array whose bytes are still JavaScript's.
pub enum MatrixArg<'x> {
    Rows(Vec<f64>, usize, usize),
    F32(ViewArg<'x>, usize, usize),
    F64(ViewArg<'x>, usize, usize),
}

impl MatrixArg<'_> {
    pub fn rows(&self) -> usize {
        match self {
            MatrixArg::Rows(_, r, _) | MatrixArg::F32(_, r, _) | MatrixArg::F64(_, r, _) => *r,
        }
    }
}

/// Phase 1 of `number[][]` or `{ data: Float32Array | Float64Array, rows, cols }`
/// (row-major): every property is read here, no bytes are taken.
pub fn parse_matrix<'x>(x: &Unknown<'x>) -> CoreResult<MatrixArg<'x>> {
    let err = napi_invalid("x");
    if x.is_array().map_err(&err)? {
        // SAFETY: checked to be an array.
        let rows: Vec<Vec<f64>> = unsafe { x.cast() }.map_err(|e| {
            invalid_argument(format!(
                "x must be an array of rows of numbers: {}",
                e.reason
            ))
        })?;
        let (data, r, c) = matrix_from_rows(&rows)?;
        return Ok(MatrixArg::Rows(data, r, c));
    }
    if x.get_type().map_err(&err)? != ValueType::Object {
        return Err(invalid_argument(
            "x must be number[][] or { data, rows, cols }",
        ));
    }
    // SAFETY: checked to be an object.
    let obj: Object = unsafe { x.cast() }.map_err(&err)?;
    let (rows, cols) = matrix_dims(&obj)?;
    let data: Unknown = obj.get_named_property("data").map_err(&err)?;
    let Some(array) = ViewArg::typed_array(&data, "x.data")? else {
        return Err(invalid_argument(
            "x.data must be a Float32Array or Float64Array",
        ));
    };
    match array.kind() {
        TypedArrayType::Float32 => Ok(MatrixArg::F32(array, rows, cols)),
        TypedArrayType::Float64 => Ok(MatrixArg::F64(array, rows, cols)),
        other => Err(invalid_argument(format!(
            "x.data must be a Float32Array or Float64Array, not {other:?}"
        ))),
    }
}

/// Phase 2, copying: the matrix for work that outlives the call (async tasks: JavaScript may
/// change the array meanwhile).
pub fn matrix_arg(x: &Unknown) -> CoreResult<OwnedMatrix> {
    Ok(match parse_matrix(x)? {
        MatrixArg::Rows(data, r, c) => OwnedMatrix::F64(data, r, c),
        MatrixArg::F32(array, r, c) => {
            OwnedMatrix::F32(with_view(&array, stcore::buffer::copy_of)?, r, c)
        }
        MatrixArg::F64(array, r, c) => {
            OwnedMatrix::F64(with_view(&array, stcore::buffer::copy_of)?, r, c)
        }
    })
}

/// Phase 2, borrowing: run `f` on the matrix read by [`parse_matrix`], borrowing a typed
/// array's memory instead of copying it (`f` runs no JavaScript, so nothing can detach or
/// resize the buffer meanwhile). The rare typed array whose memory is not aligned for its
/// element type is copied.
pub fn with_matrix<R>(
    x: &MatrixArg,
    f: impl FnOnce(MatrixRef<'_>) -> CoreResult<R>,
) -> CoreResult<R> {
    match x {
        MatrixArg::Rows(data, r, c) => f(MatrixRef::new(MatrixData::F64(data), *r, *c)?),
        MatrixArg::F32(array, r, c) => with_view(array, |bytes| {
            let values = cast::elements::<f32>(bytes);
            f(MatrixRef::new(MatrixData::F32(&values), *r, *c)?)
        }),
        MatrixArg::F64(array, r, c) => with_view(array, |bytes| {
            let values = cast::elements::<f64>(bytes);
            f(MatrixRef::new(MatrixData::F64(&values), *r, *c)?)
        }),
    }
}

fn matrix_dims(obj: &Object) -> CoreResult<(usize, usize)> {
    let err = napi_invalid("x");
    let rows: f64 = obj
        .get_named_property::<Option<f64>>("rows")
        .map_err(&err)?
        .ok_or_else(|| invalid_argument("x.rows is missing"))?;
    let cols: f64 = obj
        .get_named_property::<Option<f64>>("cols")
        .map_err(&err)?
        .ok_or_else(|| invalid_argument("x.cols is missing"))?;
    Ok((count(rows, "x.rows")?, count(cols, "x.cols")?))
}

/// `ArrayLike<number>` read in phase 1: an array of numbers (converted now), or any numeric
/// typed array (its bytes taken in phase 2 by [`NumbersArg::values`]).
enum NumbersArg<'y> {
    Values(Vec<f64>),
    View(ViewArg<'y>),
}

fn numbers_arg<'y>(y: &Unknown<'y>, what: &'static str) -> CoreResult<NumbersArg<'y>> {
    let err = napi_invalid(what);
    if y.is_array().map_err(&err)? {
        // SAFETY: checked to be an array.
        return unsafe { y.cast::<Vec<f64>>() }
            .map(NumbersArg::Values)
            .map_err(&err);
    }
    if let Some(array) = ViewArg::typed_array(y, what)? {
        natural_dtype(array.kind())?;
        return Ok(NumbersArg::View(array));
    }
    Err(invalid_argument(format!(
        "{what} must be an array of numbers or a typed array"
    )))
}

impl NumbersArg<'_> {
    /// Phase 2: the numbers, copied.
    fn values(self) -> CoreResult<Vec<f64>> {
        match self {
            NumbersArg::Values(v) => Ok(v),
            NumbersArg::View(array) => {
                let dtype = natural_dtype(array.kind())?;
                with_view(&array, |bytes| cast::to_f64_vec(dtype, bytes))
            }
        }
    }
}

fn labels(y: Vec<f64>) -> CoreResult<Vec<i32>> {
    y.into_iter()
        .enumerate()
        .map(|(i, v)| {
            if v.fract() == 0.0 && (i32::MIN as f64..=i32::MAX as f64).contains(&v) {
                Ok(v as i32)
            } else {
                Err(invalid_argument(format!(
                    "y[{i}] = {v} is not an integer class label"
                )))
            }
        })
        .collect()
}

/// Phase 1 of `(x, y)` for `fit` and `score` (every getter of both runs here), then phase 2:
/// `y` copied, `x` borrowed for `f`.
fn with_xy<R>(
    x: &Unknown,
    y: &Unknown,
    f: impl FnOnce(MatrixRef<'_>, Vec<f64>) -> CoreResult<R>,
) -> CoreResult<R> {
    let y = numbers_arg(y, "y")?;
    let x = parse_matrix(x)?;
    let y = y.values()?;
    with_matrix(&x, |x| f(x, y))
}

#[napi(object, object_to_js = false)]
pub struct GgufOptions {
    /// The type of 2-D coefficient matrices: a llama-quantize preset's main type (Q4_K_M →
    /// Q4_K); 1-D vectors stay F32 unless F16 or BF16 is asked. Default F32.
    #[napi(ts_type = "GgufQuantization")]
    pub quantization: Option<String>,
    /// `fsync` the file before renaming it into place, and its directory after (default false).
    pub durable: Option<bool>,
}

/// Options of a model's `save` and `toOnnx`.
#[napi(object, object_to_js = false)]
pub struct WriteOptions {
    /// `fsync` each file before renaming it into place, and its directory after, so that it
    /// survives a power cut once the call returns (default false; the write is atomic either way).
    pub durable: Option<bool>,
}

fn quantization_arg(options: &Option<GgufOptions>) -> CoreResult<Preset> {
    match options.as_ref().and_then(|o| o.quantization.as_deref()) {
        None => Ok(Preset::F32),
        Some(q) => Preset::parse(q),
    }
}

fn not_fitted() -> CoreError {
    CoreError::not_fitted("the model is not fitted: call fit() or load it first")
}

/// Persistence and export members shared by both classes.
macro_rules! persistence_methods {
    ($class:ident, $promise:literal, $kind:expr, $wrap:expr, $unwrap:pat => $inner:ident) => {
        #[napi]
        impl $class {
            /// Save as SafeTensors in aprender's layout, with `model_type`, `n_features`, …
            /// and the caller's metadata in `__metadata__`.
            #[napi(catch_unwind, strict)]
            pub fn save_safetensors(
                &self,
                env: Env,
                path: String,
                options: Option<SaveOptions>,
            ) -> napi::Result<()> {
                guard(
                    &env,
                    concat!(stringify!($class), ".saveSafetensors"),
                    || {
                        let durable = Durable::arg(options.as_ref().and_then(|o| o.durable));
                        let run = || {
                            self.any().save_safetensors(
                                Path::new(&path),
                                metadata_arg(&options)?.as_ref(),
                                durable.options(),
                            )
                        };
                        run().or_throw(&env)
                    },
                )
            }

            #[napi(catch_unwind, strict, ts_return_type = "Promise<void>")]
            pub fn save_safetensors_async(
                &self,
                env: Env,
                path: String,
                options: Option<SaveOptions>,
            ) -> napi::Result<AsyncTask<CoreTask<()>>> {
                guard(
                    &env,
                    concat!(stringify!($class), ".saveSafetensorsAsync"),
                    || {
                        let model = self.any();
                        let metadata = metadata_arg(&options);
                        let durable = Durable::arg(options.as_ref().and_then(|o| o.durable));
                        Ok(CoreTask::new(move || {
                            model.save_safetensors(
                                Path::new(&path),
                                metadata?.as_ref(),
                                durable.options(),
                            )
                        }))
                    },
                )
            }

            /// Load a file written by `saveSafetensors` or by aprender.
            #[napi(catch_unwind, strict, factory, writable)]
            pub fn load_safetensors(env: Env, path: String) -> napi::Result<$class> {
                guard(
                    &env,
                    concat!(stringify!($class), ".loadSafetensors"),
                    || Self::from_file(&path).or_throw(&env),
                )
            }

            #[napi(catch_unwind, strict, writable, ts_return_type = $promise)]
            pub fn load_safetensors_async(
                env: Env,
                path: String,
            ) -> napi::Result<AsyncTask<CoreTask<$class>>> {
                guard(
                    &env,
                    concat!(stringify!($class), ".loadSafetensorsAsync"),
                    || Ok(CoreTask::new(move || Self::from_file(&path))),
                )
            }

            /// Write `config.json` + `weights.safetensors` to `dir` (loadable by `Model.loadPretrained`).
            #[napi(catch_unwind, strict, ts_return_type = "Promise<void>")]
            pub fn save(
                &self,
                env: Env,
                dir: String,
                options: Option<WriteOptions>,
            ) -> napi::Result<AsyncTask<CoreTask<()>>> {
                guard(&env, concat!(stringify!($class), ".save"), || {
                    let model = self.any();
                    let durable = Durable::arg(options.and_then(|o| o.durable));
                    Ok(CoreTask::new(move || {
                        model.save_dir(Path::new(&dir), durable.options())
                    }))
                })
            }

            /// Export to GGUF (`quantization` applies to 2-D coefficient matrices).
            #[napi(catch_unwind, strict)]
            pub fn to_gguf(
                &self,
                env: Env,
                path: String,
                options: Option<GgufOptions>,
            ) -> napi::Result<()> {
                guard(&env, concat!(stringify!($class), ".toGguf"), || {
                    let durable = Durable::arg(options.as_ref().and_then(|o| o.durable));
                    let run = || {
                        self.fitted()?.to_gguf(
                            Path::new(&path),
                            quantization_arg(&options)?,
                            durable.options(),
                        )
                    };
                    run().or_throw(&env)
                })
            }

            /// Export to ONNX (IR 8, opset 17), runnable by ONNX Runtime.
            #[napi(catch_unwind, strict)]
            pub fn to_onnx(
                &self,
                env: Env,
                path: String,
                options: Option<WriteOptions>,
            ) -> napi::Result<()> {
                guard(&env, concat!(stringify!($class), ".toOnnx"), || {
                    let durable = Durable::arg(options.and_then(|o| o.durable));
                    let run = || self.fitted()?.to_onnx(Path::new(&path), durable.options());
                    run().or_throw(&env)
                })
            }
        }

        impl $class {
            fn any(&self) -> Arc<AnyModel> {
                Arc::new($wrap(self.inner.borrow().clone()))
            }
            fn fitted(&self) -> CoreResult<Arc<AnyModel>> {
                if self.inner.borrow().is_fitted() {
                    Ok(self.any())
                } else {
                    Err(not_fitted())
                }
            }
            fn from_file(path: &str) -> CoreResult<$class> {
                match AnyModel::load_safetensors(Path::new(path), $kind)? {
                    $unwrap => Ok($class {
                        inner: RefCell::new($inner),
                    }),
                    _ => Err(CoreError::invalid_model("unexpected model class").with_path(path)),
                }
            }
        }
    };
}

/// Ordinary least squares (pivoted QR; the minimum-norm solution when columns are dependent).
#[napi]
pub struct LinearRegression {
    // RefCell, not `&mut self`: napi keeps a shared borrow of the object while an async
    // task made by one of its methods is pending, which would make `fit` fail then.
    inner: RefCell<CoreLinear>,
}

#[napi]
impl LinearRegression {
    #[napi(
        catch_unwind,
        constructor,
        ts_args_type = "options?: { fitIntercept?: boolean }"
    )]
    pub fn new(env: Env, options: Option<Object>) -> napi::Result<Self> {
        guard(&env, "LinearRegression.constructor", || {
            let fit_intercept = option::<bool>(&options, "fitIntercept")
                .or_throw(&env)?
                .unwrap_or(true);
            Ok(LinearRegression {
                inner: RefCell::new(CoreLinear::new(fit_intercept)),
            })
        })
    }

    #[napi(
        catch_unwind,
        strict,
        ts_args_type = "x: Matrix, y: ArrayLike<number>",
        ts_return_type = "this"
    )]
    pub fn fit<'a>(
        &self,
        env: Env,
        this: This<'a>,
        x: Unknown,
        y: Unknown,
    ) -> napi::Result<This<'a>> {
        guard(&env, "LinearRegression.fit", || {
            let run = || with_xy(&x, &y, |x, y| self.inner.borrow_mut().fit(x, &y));
            run().or_throw(&env)?;
            Ok(this)
        })
    }

    #[napi(
        catch_unwind,
        strict,
        ts_args_type = "x: Matrix",
        ts_return_type = "Float32Array"
    )]
    pub fn predict(&self, env: Env, x: Unknown) -> napi::Result<JsArray> {
        guard(&env, "LinearRegression.predict", || {
            let x = parse_matrix(&x).or_throw(&env)?;
            let model = self.inner.borrow();
            new_array(&env, TypedArrayType::Float32, x.rows(), |out| {
                with_matrix(&x, |x| model.predict_into(x, out))
            })
        })
    }

    /// `predict` off the event loop (for large batches; the input is copied first).
    #[napi(
        catch_unwind,
        strict,
        ts_args_type = "x: Matrix",
        ts_return_type = "Promise<Float32Array>"
    )]
    pub fn predict_async(
        &self,
        env: Env,
        x: Unknown,
    ) -> napi::Result<AsyncTask<CoreTask<Float32Array>>> {
        guard(&env, "LinearRegression.predictAsync", || {
            // A bad matrix rejects the promise (it does not throw): the error travels with the task.
            let x = matrix_arg(&x);
            let model = self.inner.borrow().clone();
            Ok(CoreTask::new(move || {
                model.predict(x?.as_ref()?).map(Float32Array::new)
            }))
        })
    }

    /// R² of the predictions.
    #[napi(catch_unwind, strict, ts_args_type = "x: Matrix, y: ArrayLike<number>")]
    pub fn score(&self, env: Env, x: Unknown, y: Unknown) -> napi::Result<f64> {
        guard(&env, "LinearRegression.score", || {
            let run = || with_xy(&x, &y, |x, y| self.inner.borrow().score(x, &y));
            run().or_throw(&env)
        })
    }

    #[napi(catch_unwind, getter)]
    pub fn coefficients(&self, env: Env) -> napi::Result<Float32Array> {
        guard(&env, "LinearRegression.coefficients", || {
            self.require_fitted(&env)?;
            Ok(Float32Array::new(
                self.inner.borrow().coefficients().to_vec(),
            ))
        })
    }

    #[napi(catch_unwind, getter)]
    pub fn intercept(&self, env: Env) -> napi::Result<f64> {
        guard(&env, "LinearRegression.intercept", || {
            self.require_fitted(&env)?;
            Ok(self.inner.borrow().intercept() as f64)
        })
    }

    #[napi(catch_unwind, getter)]
    pub fn n_features(&self, env: Env) -> napi::Result<u32> {
        guard(&env, "LinearRegression.nFeatures", || {
            self.require_fitted(&env)?;
            Ok(self.inner.borrow().n_features().unwrap_or(0) as u32)
        })
    }

    #[napi(catch_unwind, getter)]
    pub fn is_fitted(&self, env: Env) -> napi::Result<bool> {
        guard(&env, "LinearRegression.isFitted", || {
            Ok(self.inner.borrow().is_fitted())
        })
    }

    #[napi(catch_unwind, getter)]
    pub fn fit_intercept(&self, env: Env) -> napi::Result<bool> {
        guard(&env, "LinearRegression.fitIntercept", || {
            Ok(self.inner.borrow().fit_intercept())
        })
    }
}

impl LinearRegression {
    fn require_fitted(&self, env: &Env) -> napi::Result<()> {
        if self.inner.borrow().is_fitted() {
            Ok(())
        } else {
            Err(crate::error::to_js(env, &not_fitted()))
        }
    }
}

persistence_methods!(LinearRegression, "Promise<LinearRegression>", ModelKind::Linear, AnyModel::Linear, AnyModel::Linear(inner) => inner);

/// L2-regularised logistic regression (binary: sigmoid; 3+ classes: multinomial softmax),
/// the objective of scikit-learn's `LogisticRegression(C=…)`, solved by Newton's method.
#[napi]
pub struct LogisticRegression {
    inner: RefCell<CoreLogistic>,
}

#[napi]
impl LogisticRegression {
    /// `c`: inverse L2 strength (default 1.0); `maxIter`: Newton iterations (default 100);
    /// `tol`: default 1e-4.
    #[napi(
        catch_unwind,
        constructor,
        ts_args_type = "options?: { fitIntercept?: boolean; c?: number; maxIter?: number; tol?: number }"
    )]
    pub fn new(env: Env, options: Option<Object>) -> napi::Result<Self> {
        guard(&env, "LogisticRegression.constructor", || {
            let run = || {
                let mut params = LogisticRegressionParams::default();
                params.fit_intercept =
                    option::<bool>(&options, "fitIntercept")?.unwrap_or(params.fit_intercept);
                params.c = option::<f64>(&options, "c")?.unwrap_or(params.c);
                params.tol = option::<f64>(&options, "tol")?.unwrap_or(params.tol);
                if let Some(m) = option::<f64>(&options, "maxIter")? {
                    params.max_iter = count(m, "maxIter")?;
                }
                CoreLogistic::new(params)
            };
            run()
                .map(|inner| LogisticRegression {
                    inner: RefCell::new(inner),
                })
                .or_throw(&env)
        })
    }

    /// Fit to integer class labels (any integers; two classes or more).
    #[napi(
        catch_unwind,
        strict,
        ts_args_type = "x: Matrix, y: ArrayLike<number>",
        ts_return_type = "this"
    )]
    pub fn fit<'a>(
        &self,
        env: Env,
        this: This<'a>,
        x: Unknown,
        y: Unknown,
    ) -> napi::Result<This<'a>> {
        guard(&env, "LogisticRegression.fit", || {
            let run = || with_xy(&x, &y, |x, y| self.inner.borrow_mut().fit(x, &labels(y)?));
            run().or_throw(&env)?;
            Ok(this)
        })
    }

    /// Predicted class labels.
    #[napi(
        catch_unwind,
        strict,
        ts_args_type = "x: Matrix",
        ts_return_type = "Int32Array"
    )]
    pub fn predict(&self, env: Env, x: Unknown) -> napi::Result<JsArray> {
        guard(&env, "LogisticRegression.predict", || {
            let x = parse_matrix(&x).or_throw(&env)?;
            let model = self.inner.borrow();
            new_array(&env, TypedArrayType::Int32, x.rows(), |out| {
                with_matrix(&x, |x| model.predict_into(x, out))
            })
        })
    }

    /// Class probabilities, rows × classes, row-major (columns in `classes` order).
    #[napi(
        catch_unwind,
        strict,
        ts_args_type = "x: Matrix",
        ts_return_type = "Float32Array"
    )]
    pub fn predict_proba(&self, env: Env, x: Unknown) -> napi::Result<JsArray> {
        guard(&env, "LogisticRegression.predictProba", || {
            let x = parse_matrix(&x).or_throw(&env)?;
            let model = self.inner.borrow();
            let len = x.rows().saturating_mul(model.classes().len());
            new_array(&env, TypedArrayType::Float32, len, |out| {
                with_matrix(&x, |x| model.predict_proba_into(x, out))
            })
        })
    }

    #[napi(
        catch_unwind,
        strict,
        ts_args_type = "x: Matrix",
        ts_return_type = "Promise<Int32Array>"
    )]
    pub fn predict_async(
        &self,
        env: Env,
        x: Unknown,
    ) -> napi::Result<AsyncTask<CoreTask<Int32Array>>> {
        guard(&env, "LogisticRegression.predictAsync", || {
            // A bad matrix rejects the promise (it does not throw): the error travels with the task.
            let x = matrix_arg(&x);
            let model = self.inner.borrow().clone();
            Ok(CoreTask::new(move || {
                model.predict(x?.as_ref()?).map(Int32Array::new)
            }))
        })
    }

    #[napi(
        catch_unwind,
        strict,
        ts_args_type = "x: Matrix",
        ts_return_type = "Promise<Float32Array>"
    )]
    pub fn predict_proba_async(
        &self,
        env: Env,
        x: Unknown,
    ) -> napi::Result<AsyncTask<CoreTask<Float32Array>>> {
        guard(&env, "LogisticRegression.predictProbaAsync", || {
            // A bad matrix rejects the promise (it does not throw): the error travels with the task.
            let x = matrix_arg(&x);
            let model = self.inner.borrow().clone();
            Ok(CoreTask::new(move || {
                model.predict_proba(x?.as_ref()?).map(Float32Array::new)
            }))
        })
    }

    /// Accuracy.
    #[napi(catch_unwind, strict, ts_args_type = "x: Matrix, y: ArrayLike<number>")]
    pub fn score(&self, env: Env, x: Unknown, y: Unknown) -> napi::Result<f64> {
        guard(&env, "LogisticRegression.score", || {
            let run = || with_xy(&x, &y, |x, y| self.inner.borrow().score(x, &labels(y)?));
            run().or_throw(&env)
        })
    }

    /// The class labels, sorted ascending.
    #[napi(catch_unwind, getter)]
    pub fn classes(&self, env: Env) -> napi::Result<Int32Array> {
        guard(&env, "LogisticRegression.classes", || {
            self.require_fitted(&env)?;
            Ok(Int32Array::new(self.inner.borrow().classes().to_vec()))
        })
    }

    /// Binary: `[nFeatures]`; multiclass: `[nClasses × nFeatures]`, row-major.
    #[napi(catch_unwind, getter)]
    pub fn coefficients(&self, env: Env) -> napi::Result<Float32Array> {
        guard(&env, "LogisticRegression.coefficients", || {
            self.require_fitted(&env)?;
            Ok(Float32Array::new(
                self.inner.borrow().coefficients().to_vec(),
            ))
        })
    }

    /// Binary: one value; multiclass: one per class.
    #[napi(catch_unwind, getter)]
    pub fn intercept(&self, env: Env) -> napi::Result<Float32Array> {
        guard(&env, "LogisticRegression.intercept", || {
            self.require_fitted(&env)?;
            Ok(Float32Array::new(self.inner.borrow().intercept().to_vec()))
        })
    }

    #[napi(catch_unwind, getter)]
    pub fn n_features(&self, env: Env) -> napi::Result<u32> {
        guard(&env, "LogisticRegression.nFeatures", || {
            self.require_fitted(&env)?;
            Ok(self.inner.borrow().n_features().unwrap_or(0) as u32)
        })
    }

    #[napi(catch_unwind, getter)]
    pub fn is_fitted(&self, env: Env) -> napi::Result<bool> {
        guard(&env, "LogisticRegression.isFitted", || {
            Ok(self.inner.borrow().is_fitted())
        })
    }

    /// Newton iterations of the last fit, and whether it converged within `maxIter`.
    #[napi(catch_unwind, getter)]
    pub fn n_iter(&self, env: Env) -> napi::Result<Option<u32>> {
        guard(&env, "LogisticRegression.nIter", || {
            Ok(self.inner.borrow().n_iter().map(|n| n as u32))
        })
    }

    #[napi(catch_unwind, getter)]
    pub fn converged(&self, env: Env) -> napi::Result<Option<bool>> {
        guard(&env, "LogisticRegression.converged", || {
            Ok(self.inner.borrow().converged())
        })
    }
}

impl LogisticRegression {
    fn require_fitted(&self, env: &Env) -> napi::Result<()> {
        if self.inner.borrow().is_fitted() {
            Ok(())
        } else {
            Err(crate::error::to_js(env, &not_fitted()))
        }
    }
}

persistence_methods!(LogisticRegression, "Promise<LogisticRegression>", ModelKind::Logistic, AnyModel::Logistic, AnyModel::Logistic(inner) => inner);
