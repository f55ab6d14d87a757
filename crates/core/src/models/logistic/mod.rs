//! L2-penalised logistic regression with scikit-learn's objective, solved by Newton's method:
//! the API and persistence here, the prediction kernels in `kernels`, the solver in `solver`.

mod kernels;
mod solver;

use super::persist::{
    check_stated, check_zero_intercept, decode_f32, decode_i32, f32_tensor, i32_tensor, require,
    shape_error, ModelConfig, StoredMetadata, CLASSES, COEFFICIENTS, INTERCEPT,
};
use super::{check_label_count, for_row_blocks, MatrixData, MatrixRef};
use crate::error::{CoreError, Result};
use crate::tensor::TensorView;
use std::collections::BTreeMap;

use kernels::{labels_of_rows_best, probabilities_of_rows_best};
use solver::{Problem, DENSE_NEWTON_MAX_PARAMETERS};

pub(crate) const MODEL_TYPE: &str = "logistic_regression";

/// Hyperparameters of [`LogisticRegression`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogisticRegressionParams {
    pub fit_intercept: bool,
    /// Inverse regularisation strength, scikit-learn's `C`: the objective is
    /// `0.5·‖W‖² + C·Σ log-loss`. Positive and finite.
    pub c: f64,
    /// Maximum number of Newton iterations (default 100, scikit-learn's default number).
    /// A Newton iteration does far more than an L-BFGS one: typical problems converge in
    /// 5–30, so the default is rarely reached even on raw, badly scaled features where
    /// scikit-learn's lbfgs needs thousands. At least 1.
    pub max_iter: usize,
    /// Convergence tolerance (default 1e-4): the solver stops after taking a full Newton
    /// step whose Newton decrement `λ² = −gᵀΔ` (twice the objective decrease it predicts)
    /// is at most `tol² · max(1, objective)`, i.e. a step of relative size `tol` measured
    /// in the objective's own curvature, which makes the test blind to feature scaling.
    /// Newton converges quadratically there, so the step just taken leaves an error of
    /// order `tol²` in that measure (gradients of ~1e-8 on typical data). Positive and
    /// finite.
    pub tol: f64,
}

impl Default for LogisticRegressionParams {
    fn default() -> Self {
        LogisticRegressionParams {
            fit_intercept: true,
            c: 1.0,
            max_iter: 100,
            tol: 1e-4,
        }
    }
}

impl LogisticRegressionParams {
    /// ERR_INVALID_ARGUMENT for a non-positive or non-finite `c` or `tol`, or `max_iter` 0.
    pub fn validate(&self) -> Result<()> {
        if !(self.c > 0.0 && self.c.is_finite()) {
            return Err(CoreError::invalid_argument(format!(
                "C must be a positive finite number, got {}",
                self.c
            )));
        }
        if !(self.tol > 0.0 && self.tol.is_finite()) {
            return Err(CoreError::invalid_argument(format!(
                "tol must be a positive finite number, got {}",
                self.tol
            )));
        }
        if self.max_iter == 0 {
            return Err(CoreError::invalid_argument("max_iter must be at least 1"));
        }
        Ok(())
    }
}

/// Logistic regression minimising `0.5·‖W‖² + C·Σᵢ log-loss(xᵢ, yᵢ)` with the intercept
/// unpenalised: exactly the objective of scikit-learn's `LogisticRegression(C=...)`, so a
/// converged fit matches scikit-learn run to convergence.
///
/// * Two classes: a sigmoid on `x · coefficients + intercept`; the positive class is the
///   larger label. Coefficients `[n_features]`, intercept `[1]`.
/// * Three or more: multinomial softmax; coefficients `[n_classes, n_features]` (row-major),
///   intercept `[n_classes]`. Softmax is unchanged by adding a constant to every intercept;
///   the penalty fixes W, and the intercepts are taken with zero sum, which is the
///   solution scikit-learn's lbfgs (started from zero) returns.
///
/// The solver is Newton's method in f64 with a backtracking (Armijo) line search: a dense
/// Hessian solved by Cholesky after scaling to unit diagonal, which makes it insensitive to
/// features on very different scales; above 256 parameters, a Jacobi-preconditioned
/// conjugate-gradient solve of the Newton system instead. Coefficients are stored as f32.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogisticRegression {
    params: LogisticRegressionParams,
    fitted: Option<FittedLogistic>,
}

#[derive(Debug, Clone, PartialEq)]
struct FittedLogistic {
    /// Sorted ascending, at least two.
    classes: Vec<i32>,
    n_features: usize,
    /// `outputs × n_features` row-major; `outputs` is 1 for two classes, else n_classes.
    coefficients: Vec<f32>,
    intercept: Vec<f32>,
    /// The f32 values widened once, so prediction is f64 × f64.
    wide_coefficients: Vec<f64>,
    wide_intercept: Vec<f64>,
    /// How the solver finished; `None` for a loaded model.
    report: Option<FitReport>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct FitReport {
    iterations: usize,
    converged: bool,
}

impl FittedLogistic {
    fn new(
        classes: Vec<i32>,
        n_features: usize,
        coefficients: Vec<f32>,
        intercept: Vec<f32>,
        report: Option<FitReport>,
    ) -> Self {
        let wide_coefficients = coefficients.iter().map(|&c| f64::from(c)).collect();
        let wide_intercept = intercept.iter().map(|&b| f64::from(b)).collect();
        FittedLogistic {
            classes,
            n_features,
            coefficients,
            intercept,
            wide_coefficients,
            wide_intercept,
            report,
        }
    }
}

impl LogisticRegression {
    /// A model with these hyperparameters (checked by [`LogisticRegressionParams::validate`]).
    pub fn new(params: LogisticRegressionParams) -> Result<Self> {
        params.validate()?;
        Ok(LogisticRegression {
            params,
            fitted: None,
        })
    }

    pub fn params(&self) -> &LogisticRegressionParams {
        &self.params
    }

    pub fn is_fitted(&self) -> bool {
        self.fitted.is_some()
    }

    /// The class labels, ascending (empty before fitting).
    pub fn classes(&self) -> &[i32] {
        self.fitted.as_ref().map_or(&[], |f| f.classes.as_slice())
    }

    /// Two classes: `[n_features]`; more: `[n_classes × n_features]` row-major. Empty
    /// before fitting.
    pub fn coefficients(&self) -> &[f32] {
        self.fitted
            .as_ref()
            .map_or(&[], |f| f.coefficients.as_slice())
    }

    /// Two classes: one value; more: one per class. Empty before fitting.
    pub fn intercept(&self) -> &[f32] {
        self.fitted.as_ref().map_or(&[], |f| f.intercept.as_slice())
    }

    pub fn n_features(&self) -> Option<usize> {
        self.fitted.as_ref().map(|f| f.n_features)
    }

    /// Newton iterations the last fit took (`None` before fitting or for a loaded model).
    pub fn n_iter(&self) -> Option<usize> {
        self.fitted
            .as_ref()
            .and_then(|f| f.report.map(|r| r.iterations))
    }

    /// Whether the last fit met `tol` within `max_iter` (`None` before fitting or for a
    /// loaded model). A fit that did not is still usable, like scikit-learn's after its
    /// ConvergenceWarning.
    pub fn converged(&self) -> Option<bool> {
        self.fitted
            .as_ref()
            .and_then(|f| f.report.map(|r| r.converged))
    }

    fn fitted(&self) -> Result<&FittedLogistic> {
        self.fitted.as_ref().ok_or_else(|| {
            CoreError::not_fitted("this LogisticRegression is not fitted; call fit first")
        })
    }

    /// Fit to `x` (`rows × n_features`) and integer labels `y` (any `i32` values, at least
    /// two distinct). Replaces any earlier fit. ERR_INVALID_ARGUMENT for y of the wrong
    /// length, NaN/±Inf in x, or a single class.
    pub fn fit(&mut self, x: MatrixRef<'_>, y: &[i32]) -> Result<()> {
        let problem = Problem::new(x, y, &self.params, DENSE_NEWTON_MAX_PARAMETERS)?;
        let solution = problem.solve(self.params.max_iter, self.params.tol);
        self.fitted = Some(problem.into_fitted(&solution));
        Ok(())
    }

    /// Class probabilities, `rows × n_classes` row-major, columns in the order of
    /// [`LogisticRegression::classes`].
    pub fn predict_proba(&self, x: MatrixRef<'_>) -> Result<Vec<f32>> {
        let width = self.fitted()?.classes.len();
        let mut out = vec![0.0; x.rows().saturating_mul(width)];
        self.predict_proba_into(x, &mut out)?;
        Ok(out)
    }

    /// Class probabilities written into `out` (`rows × n_classes`), without per-row
    /// allocation. ERR_INVALID_ARGUMENT for the wrong width, the wrong `out` length, or a
    /// NaN/±Inf feature (named by row and column).
    pub fn predict_proba_into(&self, x: MatrixRef<'_>, out: &mut [f32]) -> Result<()> {
        let fitted = self.fitted()?;
        x.check_width(fitted.n_features)?;
        let needed = x.rows().checked_mul(fitted.classes.len());
        if needed != Some(out.len()) {
            return Err(CoreError::invalid_argument(format!(
                "the output has room for {} values, but x has {} rows × {} classes",
                out.len(),
                x.rows(),
                fitted.classes.len()
            )));
        }
        let (cols, width) = (fitted.n_features, fitted.classes.len());
        match x.data() {
            MatrixData::F32(values) => for_row_blocks(values, cols, out, width, |first, x, out| {
                probabilities_of_rows_best(fitted, x, first, out)
            }),
            MatrixData::F64(values) => for_row_blocks(values, cols, out, width, |first, x, out| {
                probabilities_of_rows_best(fitted, x, first, out)
            }),
        }
    }

    /// Predicted labels, one per row.
    pub fn predict(&self, x: MatrixRef<'_>) -> Result<Vec<i32>> {
        let mut out = vec![0; x.rows()];
        self.predict_into(x, &mut out)?;
        Ok(out)
    }

    /// Predicted labels written into `out` (`rows` values). A tie (score exactly 0 for
    /// two classes, equal scores for more) goes to the smaller label, as in scikit-learn.
    pub fn predict_into(&self, x: MatrixRef<'_>, out: &mut [i32]) -> Result<()> {
        let fitted = self.fitted()?;
        x.check_width(fitted.n_features)?;
        if out.len() != x.rows() {
            return Err(CoreError::invalid_argument(format!(
                "the output has room for {} labels, but x has {} rows",
                out.len(),
                x.rows()
            )));
        }
        let cols = fitted.n_features;
        match x.data() {
            MatrixData::F32(values) => for_row_blocks(values, cols, out, 1, |first, x, out| {
                labels_of_rows_best(fitted, x, first, out)
            }),
            MatrixData::F64(values) => for_row_blocks(values, cols, out, 1, |first, x, out| {
                labels_of_rows_best(fitted, x, first, out)
            }),
        }
    }

    /// Accuracy: the fraction of rows whose predicted label equals `y`.
    pub fn score(&self, x: MatrixRef<'_>, y: &[i32]) -> Result<f64> {
        self.fitted()?;
        check_label_count(y.len(), x.rows())?;
        let predicted = self.predict(x)?;
        let correct = predicted.iter().zip(y).filter(|(p, t)| p == t).count();
        Ok(correct as f64 / y.len() as f64)
    }

    /// The persisted form. Two classes: `coefficients` F32 `[n_features]`, `intercept` F32
    /// `[1]` (the layout of the `aprender` crate) and, only when the labels are not
    /// `[0, 1]`, `classes` I32 `[2]`. More classes: `coefficients` `[n_classes,
    /// n_features]`, `intercept` `[n_classes]`, `classes` I32 `[n_classes]`. Metadata:
    /// `model_type`, `n_features`, `fit_intercept`, `n_classes`.
    pub fn to_tensors(&self) -> Result<(Vec<TensorView<'static>>, BTreeMap<String, String>)> {
        let fitted = self.fitted()?;
        let n_classes = fitted.classes.len();
        let mut tensors = Vec::with_capacity(3);
        if n_classes == 2 {
            tensors.push(f32_tensor(
                COEFFICIENTS,
                vec![fitted.n_features],
                &fitted.coefficients,
            )?);
            tensors.push(f32_tensor(INTERCEPT, vec![1], &fitted.intercept)?);
            if fitted.classes != [0, 1] {
                tensors.push(i32_tensor(CLASSES, vec![2], &fitted.classes)?);
            }
        } else {
            tensors.push(f32_tensor(
                COEFFICIENTS,
                vec![n_classes, fitted.n_features],
                &fitted.coefficients,
            )?);
            tensors.push(f32_tensor(INTERCEPT, vec![n_classes], &fitted.intercept)?);
            tensors.push(i32_tensor(CLASSES, vec![n_classes], &fitted.classes)?);
        }
        let metadata = BTreeMap::from([
            ("model_type".to_owned(), MODEL_TYPE.to_owned()),
            ("n_features".to_owned(), fitted.n_features.to_string()),
            (
                "fit_intercept".to_owned(),
                self.params.fit_intercept.to_string(),
            ),
            ("n_classes".to_owned(), n_classes.to_string()),
        ]);
        Ok((tensors, metadata))
    }

    /// Load from tensors as [`LogisticRegression::to_tensors`] (or `aprender`) writes them.
    /// A rank-1 `coefficients` is a binary model whose labels default to `[0, 1]` when there
    /// is no `classes` tensor; a rank-2 one (`n_classes ≥ 3`) needs `classes`. Without
    /// metadata, `fit_intercept` is taken as true; `c`, `max_iter` and `tol` are the
    /// defaults. ERR_INVALID_MODEL, naming the tensor, for a missing tensor, a wrong dtype
    /// or shape, a non-finite value, or classes not strictly ascending; ERR_INVALID_MODEL
    /// also for metadata naming another model type or contradicting the tensors.
    pub fn from_tensors<'t>(
        get: &dyn Fn(&str) -> Option<TensorView<'t>>,
        metadata: Option<&BTreeMap<String, String>>,
    ) -> Result<Self> {
        let stated = StoredMetadata::parse(metadata, MODEL_TYPE)?;
        let coefficients_view = require(get, COEFFICIENTS)?;
        let coefficients = decode_f32(&coefficients_view, COEFFICIENTS)?;
        let (outputs, n_features) = match coefficients_view.shape.as_slice() {
            &[n_features] if n_features > 0 => (1, n_features),
            &[n_classes, n_features] if n_classes >= 3 && n_features > 0 => (n_classes, n_features),
            other => {
                return Err(shape_error(
                    COEFFICIENTS,
                    other,
                    "[n_features] (two classes) or [n_classes ≥ 3, n_features]",
                ))
            }
        };
        let intercept_view = require(get, INTERCEPT)?;
        let intercept = decode_f32(&intercept_view, INTERCEPT)?;
        if intercept_view.shape != [outputs] {
            return Err(shape_error(
                INTERCEPT,
                &intercept_view.shape,
                &format!("[{outputs}]"),
            ));
        }
        let n_classes = outputs.max(2);
        let classes = match get(CLASSES) {
            None if n_classes == 2 => vec![0, 1],
            None => {
                return Err(CoreError::invalid_model(format!(
                    "the model has {n_classes} classes but no 'classes' tensor"
                ))
                .with_tensor(CLASSES))
            }
            Some(view) => {
                let classes = decode_i32(&view, CLASSES)?;
                if view.shape != [n_classes] {
                    return Err(shape_error(CLASSES, &view.shape, &format!("[{n_classes}]")));
                }
                if classes.windows(2).any(|pair| pair[0] >= pair[1]) {
                    return Err(CoreError::invalid_model(format!(
                        "labels {classes:?} are not strictly ascending"
                    ))
                    .with_tensor(CLASSES));
                }
                classes
            }
        };
        check_stated(
            "the file metadata",
            "n_features",
            stated.n_features,
            n_features,
        )?;
        check_stated(
            "the file metadata",
            "n_classes",
            stated.n_classes,
            n_classes,
        )?;
        let fit_intercept = stated.fit_intercept.unwrap_or(true);
        if !fit_intercept {
            check_zero_intercept("the file metadata", &intercept)?;
        }
        Ok(LogisticRegression {
            params: LogisticRegressionParams {
                fit_intercept,
                ..LogisticRegressionParams::default()
            },
            fitted: Some(FittedLogistic::new(
                classes,
                n_features,
                coefficients,
                intercept,
                None,
            )),
        })
    }

    /// `{"model_type": "logistic_regression", "n_features", "fit_intercept", "n_classes",
    /// "classes", "c", "max_iter", "tol"}` (`n_features`/`n_classes` null and `classes`
    /// empty before fitting).
    pub fn config_json(&self) -> serde_json::Value {
        serde_json::json!({
            "model_type": MODEL_TYPE,
            "n_features": self.n_features(),
            "fit_intercept": self.params.fit_intercept,
            "n_classes": self.fitted.as_ref().map(|f| f.classes.len()),
            "classes": self.classes(),
            "c": self.params.c,
            "max_iter": self.params.max_iter,
            "tol": self.params.tol,
        })
    }

    /// Apply a parsed `config_json` to a loaded model, checking it against the tensors.
    pub(crate) fn with_config(mut self, config: &ModelConfig) -> Result<Self> {
        let (n_features, classes) = match &self.fitted {
            Some(fitted) => (fitted.n_features, fitted.classes.clone()),
            None => (0, Vec::new()),
        };
        check_stated(
            "the model config",
            "n_features",
            config.n_features,
            n_features,
        )?;
        check_stated(
            "the model config",
            "n_classes",
            config.n_classes,
            classes.len(),
        )?;
        check_stated(
            "the model config",
            "classes",
            config.classes.clone(),
            classes,
        )?;
        let mut params = self.params;
        if let Some(fit_intercept) = config.fit_intercept {
            if !fit_intercept {
                check_zero_intercept("the model config", self.intercept())?;
            }
            params.fit_intercept = fit_intercept;
        }
        params.c = config.c.unwrap_or(params.c);
        params.max_iter = config.max_iter.unwrap_or(params.max_iter);
        params.tol = config.tol.unwrap_or(params.tol);
        params
            .validate()
            .map_err(|e| CoreError::invalid_model(format!("model config: {}", e.detail())))?;
        self.params = params;
        Ok(self)
    }
}

#[cfg(test)]
mod tests;
