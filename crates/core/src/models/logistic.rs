//! L2-penalised logistic regression with scikit-learn's objective, solved by Newton's method.

use super::linalg::solve_spd;
use super::persist::{
    check_stated, check_zero_intercept, decode_f32, decode_i32, f32_tensor, i32_tensor, require,
    shape_error, ModelConfig, StoredMetadata, CLASSES, COEFFICIENTS, INTERCEPT,
};
use super::{
    avx2_twin, check_label_count, dot, for_row_blocks, non_finite_row_error, Feature, MatrixData,
    MatrixRef,
};
use crate::error::{CoreError, Result};
use crate::tensor::TensorView;
use std::collections::BTreeMap;

pub(crate) const MODEL_TYPE: &str = "logistic_regression";

/// Problems with at most this many parameters get a dense Hessian and a Cholesky solve per
/// Newton step; larger ones use Hessian-free preconditioned conjugate gradients, whose
/// memory stays linear in the parameter count.
const DENSE_NEWTON_MAX_PARAMETERS: usize = 256;
/// Sufficient-decrease constant of the backtracking line search.
const ARMIJO: f64 = 1e-4;
const MAX_STEP_HALVINGS: usize = 60;
/// Largest number of f64 values (2 GiB) one solver iteration may hold per array.
const MAX_WORKING_SET: usize = 1 << 28;

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

/// Linear scores of one row, one per output, into `scores`.
#[inline(always)]
fn row_scores<T: Feature>(
    fitted: &FittedLogistic,
    row: &[T],
    scores: &mut [f64],
    dot: &impl Fn(&[T], &[f64]) -> f64,
) {
    let weights = fitted.wide_coefficients.chunks_exact(fitted.n_features);
    for ((score, w), b) in scores.iter_mut().zip(weights).zip(&fitted.wide_intercept) {
        *score = b + dot(row, w);
    }
}

avx2_twin!(
    probabilities_of_rows_best,
    probabilities_of_rows_avx2,
    probabilities_of_rows,
    (fitted: &FittedLogistic, values: &[T], first_row: usize, out: &mut [f32]),
    Result<()>
);
avx2_twin!(
    labels_of_rows_best,
    labels_of_rows_avx2,
    labels_of_rows,
    (fitted: &FittedLogistic, values: &[T], first_row: usize, out: &mut [i32]),
    Result<()>
);

/// Rows whose scores are computed before their exponentials are taken: the exponentials of a
/// tile then run as one loop over contiguous values, which the compiler vectorises.
const TILE_ROWS: usize = 64;

#[inline(always)]
fn probabilities_of_rows<T: Feature>(
    fitted: &FittedLogistic,
    values: &[T],
    first_row: usize,
    out: &mut [f32],
    dot: impl Fn(&[T], &[f64]) -> f64,
) -> Result<()> {
    let (cols, outputs, classes) = (
        fitted.n_features,
        fitted.wide_intercept.len(),
        fitted.classes.len(),
    );
    let mut scores = vec![0.0; TILE_ROWS * outputs];
    let tiles = values
        .chunks(TILE_ROWS * cols)
        .zip(out.chunks_mut(TILE_ROWS * classes));
    for (tile_index, (x, probabilities)) in tiles.enumerate() {
        let rows = x.len() / cols;
        let scores = &mut scores[..rows * outputs];
        for (r, (row, s)) in x
            .chunks_exact(cols)
            .zip(scores.chunks_exact_mut(outputs))
            .enumerate()
        {
            row_scores(fitted, row, s, &dot);
            if s.iter().any(|v| !v.is_finite()) {
                let row_index = first_row + tile_index * TILE_ROWS + r;
                return Err(non_finite_row_error(row, row_index));
            }
        }
        if outputs == 1 {
            // σ(z) and σ(−z) from one exponential, e = exp(−|z|) ≤ 1: the larger is
            // 1/(1+e), the smaller e/(1+e), each to full relative precision (1 − p would
            // lose the small one).
            let mut e = [0.0f64; TILE_ROWS];
            for (e, z) in e.iter_mut().zip(scores.iter()) {
                *e = exp_non_positive(-z.abs());
            }
            for ((pair, e), z) in probabilities.chunks_exact_mut(2).zip(&e).zip(scores.iter()) {
                let (big, small) = ((1.0 / (1.0 + e)) as f32, (e / (1.0 + e)) as f32);
                let (p0, p1) = if *z >= 0.0 {
                    (small, big)
                } else {
                    (big, small)
                };
                pair[0] = p0;
                pair[1] = p1;
            }
        } else {
            // Softmax shifted by each row's maximum, so every exponent is ≤ 0.
            for s in scores.chunks_exact_mut(outputs) {
                let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                for v in s.iter_mut() {
                    *v -= max;
                }
            }
            for v in scores.iter_mut() {
                *v = exp_non_positive(*v);
            }
            for (s, p) in scores
                .chunks_exact(outputs)
                .zip(probabilities.chunks_exact_mut(classes))
            {
                let inverse = 1.0 / s.iter().sum::<f64>();
                for (slot, e) in p.iter_mut().zip(s) {
                    *slot = (e * inverse) as f32;
                }
            }
        }
    }
    Ok(())
}

/// `eˣ` for `x ≤ 0` (0 below −708, where it would be subnormal; a probability stored as f32
/// is 0 there anyway), written without calls or branches so that a loop of them vectorises.
/// `x = k·ln 2 + r` with `|r| ≤ ln 2 / 2` (ln 2 split in two parts, so `r` is exact to f64
/// precision), `eʳ` by its Taylor polynomial to degree 13 (truncation error < 1e-17), and
/// `2ᵏ` built in the exponent bits. Relative error < 1e-15 (tested against libm), against
/// the 6e-8 of the f32 results.
#[inline(always)]
pub(crate) fn exp_non_positive(x: f64) -> f64 {
    const LOG2_E: f64 = std::f64::consts::LOG2_E;
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    let x = x.max(-708.0);
    let k = (x * LOG2_E).round();
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let mut p = 1.0 / 6_227_020_800.0;
    for c in [
        1.0 / 479_001_600.0,
        1.0 / 39_916_800.0,
        1.0 / 3_628_800.0,
        1.0 / 362_880.0,
        1.0 / 40_320.0,
        1.0 / 5_040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ] {
        p = p * r + c;
    }
    // 2^k: k + 1023 is an integer in [2, 1023]; adding 2^52 puts it in the low mantissa bits,
    // and shifting those bits left by 52 makes it the exponent field.
    let biased = (k + 1023.0 + 4_503_599_627_370_496.0).to_bits();
    p * f64::from_bits(biased << 52)
}

#[inline(always)]
fn labels_of_rows<T: Feature>(
    fitted: &FittedLogistic,
    values: &[T],
    first_row: usize,
    out: &mut [i32],
    dot: impl Fn(&[T], &[f64]) -> f64,
) -> Result<()> {
    let mut scores = vec![0.0; fitted.wide_intercept.len()];
    let rows = values.chunks_exact(fitted.n_features);
    for (row_index, (row, label)) in rows.zip(out.iter_mut()).enumerate() {
        row_scores(fitted, row, &mut scores, &dot);
        if scores.iter().any(|s| !s.is_finite()) {
            return Err(non_finite_row_error(row, first_row + row_index));
        }
        let class_index = if let [score] = scores.as_slice() {
            usize::from(*score > 0.0)
        } else {
            // First maximum wins, like numpy's argmax.
            let mut best = 0;
            for (k, s) in scores.iter().enumerate() {
                if *s > scores[best] {
                    best = k;
                }
            }
            best
        };
        *label = fitted.classes.get(class_index).copied().unwrap_or_default();
    }
    Ok(())
}

fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// `ln(1 + eᶻ)` without overflow or loss for large |z|.
fn softplus(z: f64) -> f64 {
    z.max(0.0) + (-z.abs()).exp().ln_1p()
}

/// `ln Σ exp(s)`, shifted by the maximum so nothing overflows.
fn log_sum_exp(scores: &[f64]) -> f64 {
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    max + scores.iter().map(|s| (s - max).exp()).sum::<f64>().ln()
}

fn inner(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn norm(a: &[f64]) -> f64 {
    inner(a, a).sqrt()
}

/// `y += alpha · x`.
#[inline]
fn add_scaled(y: &mut [f64], alpha: f64, x: &[f64]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += alpha * xi;
    }
}

/// A fitting problem: the data in f64 and the objective
/// `0.5·Σ_{k, j<n_features} θ_kj² + C·Σᵢ loss(θ; xᵢ, yᵢ)`, plus, for the multinomial
/// model with intercepts, `0.5·(Σ_k b_k)²`. That last term is zero exactly on the
/// zero-sum intercepts and pins down the one direction (a constant added to every
/// intercept) the softmax cannot see, making the objective strictly convex without
/// changing its minimiser among zero-sum intercepts.
///
/// Parameters `θ` are `outputs` rows of `width` values: the `n_features` weights, then
/// the intercept when fitting one.
pub(crate) struct Problem {
    /// Row-major `rows × width`, with a trailing 1 per row when fitting an intercept.
    design: Vec<f64>,
    rows: usize,
    width: usize,
    n_features: usize,
    fit_intercept: bool,
    classes: Vec<i32>,
    /// Class index of each row (for two classes: 1 = the positive, larger label).
    labels: Vec<usize>,
    /// 1 for two classes (sigmoid), else the number of classes (softmax).
    outputs: usize,
    c: f64,
    dense_max_parameters: usize,
}

/// The objective at some θ and the model's probabilities there (`rows × outputs`).
pub(crate) struct Evaluation {
    objective: f64,
    probabilities: Vec<f64>,
}

pub(crate) struct Solution {
    pub theta: Vec<f64>,
    pub iterations: usize,
    pub converged: bool,
}

impl Problem {
    pub(crate) fn new(
        x: MatrixRef<'_>,
        y: &[i32],
        params: &LogisticRegressionParams,
        dense_max_parameters: usize,
    ) -> Result<Self> {
        params.validate()?;
        check_label_count(y.len(), x.rows())?;
        x.check_finite()?;
        let mut classes = y.to_vec();
        classes.sort_unstable();
        classes.dedup();
        if classes.len() < 2 {
            return Err(CoreError::invalid_argument(format!(
                "y has a single class ({}); logistic regression needs at least two",
                classes.first().copied().unwrap_or_default()
            )));
        }
        // Every label is in `classes` by construction, so the search always succeeds.
        let labels = y
            .iter()
            .map(|label| classes.binary_search(label).unwrap_or_default())
            .collect();
        let (rows, n_features) = (x.rows(), x.cols());
        let width = n_features + usize::from(params.fit_intercept);
        let outputs = if classes.len() == 2 { 1 } else { classes.len() };
        // Each iteration holds rows × outputs probabilities and outputs × width
        // parameters; labels that are really a continuous target (thousands of distinct
        // values) would make that unallocatable, so refuse them up front.
        let working_set = rows
            .checked_mul(outputs)
            .zip(outputs.checked_mul(width))
            .map(|(a, b)| a.max(b))
            .filter(|&size| size <= MAX_WORKING_SET);
        if working_set.is_none() {
            return Err(CoreError::invalid_argument(format!(
                "y has {} distinct labels: {rows} rows × {} classes is too large for \
                 logistic regression (are the labels a continuous target?)",
                classes.len(),
                classes.len()
            )));
        }
        let mut design = Vec::with_capacity(rows.saturating_mul(width));
        for row in 0..rows {
            x.extend_with_row(row, &mut design);
            if params.fit_intercept {
                design.push(1.0);
            }
        }
        Ok(Problem {
            design,
            rows,
            width,
            n_features,
            fit_intercept: params.fit_intercept,
            classes,
            labels,
            outputs,
            c: params.c,
            dense_max_parameters,
        })
    }

    fn parameters(&self) -> usize {
        self.outputs * self.width
    }

    fn design_rows(&self) -> std::slice::ChunksExact<'_, f64> {
        self.design.chunks_exact(self.width)
    }

    /// Whether the multinomial intercept-sum term is part of the objective.
    fn has_intercept_sum(&self) -> bool {
        self.outputs > 1 && self.fit_intercept
    }

    fn intercept_sum(&self, theta: &[f64]) -> f64 {
        if !self.has_intercept_sum() {
            return 0.0;
        }
        theta
            .chunks_exact(self.width)
            .map(|row| row[self.n_features])
            .sum()
    }

    pub(crate) fn evaluate(&self, theta: &[f64]) -> Evaluation {
        let mut penalty = 0.0;
        for row in theta.chunks_exact(self.width) {
            penalty += 0.5 * inner(&row[..self.n_features], &row[..self.n_features]);
        }
        let sum = self.intercept_sum(theta);
        penalty += 0.5 * sum * sum;

        let mut loss = 0.0;
        let mut probabilities = vec![0.0; self.rows * self.outputs];
        let outputs = probabilities.chunks_exact_mut(self.outputs);
        for ((row, &label), p) in self.design_rows().zip(&self.labels).zip(outputs) {
            if self.outputs == 1 {
                let z = dot(row, theta);
                let positive = if label == 1 { z } else { 0.0 };
                loss += softplus(z) - positive;
                p[0] = sigmoid(z);
            } else {
                for (pk, weights) in p.iter_mut().zip(theta.chunks_exact(self.width)) {
                    *pk = dot(row, weights);
                }
                let normaliser = log_sum_exp(p);
                loss += normaliser - p.get(label).copied().unwrap_or(0.0);
                for pk in p.iter_mut() {
                    *pk = (*pk - normaliser).exp();
                }
            }
        }
        Evaluation {
            objective: penalty + self.c * loss,
            probabilities,
        }
    }

    /// `pᵢₖ − [yᵢ = k]`: the derivative of row i's loss with respect to its score k.
    #[inline]
    fn residual(&self, probability: f64, label: usize, output: usize) -> f64 {
        let target = if self.outputs == 1 {
            label == 1
        } else {
            label == output
        };
        probability - f64::from(u8::from(target))
    }

    pub(crate) fn gradient(&self, theta: &[f64], evaluation: &Evaluation) -> Vec<f64> {
        let mut gradient = vec![0.0; theta.len()];
        let outputs = evaluation.probabilities.chunks_exact(self.outputs);
        for ((row, &label), p) in self.design_rows().zip(&self.labels).zip(outputs) {
            for (k, g) in gradient.chunks_exact_mut(self.width).enumerate() {
                let r = self.residual(p[k], label, k);
                add_scaled(g, self.c * r, row);
            }
        }
        let sum = self.intercept_sum(theta);
        for (g, w) in gradient
            .chunks_exact_mut(self.width)
            .zip(theta.chunks_exact(self.width))
        {
            add_scaled(&mut g[..self.n_features], 1.0, &w[..self.n_features]);
            if self.has_intercept_sum() {
                g[self.n_features] += sum;
            }
        }
        gradient
    }

    /// `∂²loss/∂zₖ∂zₗ` for one row: `pₖ(1 − pₖ)` for the sigmoid, `δₖₗpₖ − pₖpₗ` for softmax.
    #[inline]
    fn curvature(&self, p: &[f64], k: usize, l: usize) -> f64 {
        if self.outputs == 1 {
            p[0] * (1.0 - p[0])
        } else if k == l {
            p[k] * (1.0 - p[k])
        } else {
            -p[k] * p[l]
        }
    }

    /// The full Hessian, `parameters × parameters` row-major.
    ///
    /// Block (k, l) is `C · Xᵀ diag(w_kl) X` with `w_kl` the per-row curvatures. Rows are
    /// taken `GRAM_BLOCK` at a time and transposed, so every entry is a dot product over
    /// contiguous memory (which vectorises) rather than a scatter of short row updates;
    /// each block is symmetric in (j, j′), so only j′ ≥ j is accumulated.
    fn hessian(&self, evaluation: &Evaluation) -> Vec<f64> {
        const GRAM_BLOCK: usize = 256;
        let (dim, width, outputs) = (self.parameters(), self.width, self.outputs);
        let pairs: Vec<(usize, usize)> = (0..outputs)
            .flat_map(|k| (k..outputs).map(move |l| (k, l)))
            .collect();
        let mut hessian = vec![0.0; dim * dim];
        let mut columns = vec![0.0; width * GRAM_BLOCK];
        let mut weights = vec![0.0; pairs.len() * GRAM_BLOCK];
        let mut weighted = vec![0.0; GRAM_BLOCK];
        let blocks = self
            .design
            .chunks(width * GRAM_BLOCK)
            .zip(evaluation.probabilities.chunks(outputs * GRAM_BLOCK));
        for (design_block, probability_block) in blocks {
            let block_rows = design_block.len() / width;
            let rows = design_block
                .chunks_exact(width)
                .zip(probability_block.chunks_exact(outputs));
            for (i, (row, p)) in rows.enumerate() {
                for (j, &a) in row.iter().enumerate() {
                    columns[j * GRAM_BLOCK + i] = a;
                }
                for (pair, &(k, l)) in pairs.iter().enumerate() {
                    weights[pair * GRAM_BLOCK + i] = self.c * self.curvature(p, k, l);
                }
            }
            let column = |j: usize| &columns[j * GRAM_BLOCK..j * GRAM_BLOCK + block_rows];
            for (pair, &(k, l)) in pairs.iter().enumerate() {
                let w = &weights[pair * GRAM_BLOCK..pair * GRAM_BLOCK + block_rows];
                for j in 0..width {
                    for ((out, a), b) in weighted.iter_mut().zip(column(j)).zip(w) {
                        *out = a * b;
                    }
                    let weighted = &weighted[..block_rows];
                    let base = (k * width + j) * dim + l * width;
                    for j2 in j..width {
                        hessian[base + j2] += dot(weighted, column(j2));
                    }
                }
            }
        }
        for k in 0..self.outputs {
            for l in k..self.outputs {
                for j in 0..width {
                    for j2 in 0..j {
                        hessian[(k * width + j) * dim + l * width + j2] =
                            hessian[(k * width + j2) * dim + l * width + j];
                    }
                }
            }
        }
        // Blocks below the diagonal mirror those above.
        for k in 0..self.outputs {
            for l in k + 1..self.outputs {
                for j in 0..width {
                    for j2 in 0..width {
                        hessian[(l * width + j2) * dim + k * width + j] =
                            hessian[(k * width + j) * dim + l * width + j2];
                    }
                }
            }
        }
        for k in 0..self.outputs {
            for j in 0..self.n_features {
                hessian[(k * width + j) * dim + k * width + j] += 1.0;
            }
        }
        if self.has_intercept_sum() {
            for k in 0..self.outputs {
                for l in 0..self.outputs {
                    hessian[(k * width + self.n_features) * dim + l * width + self.n_features] +=
                        1.0;
                }
            }
        }
        hessian
    }

    /// `H · v` without forming H: one pass over the data.
    fn hessian_times(&self, evaluation: &Evaluation, v: &[f64]) -> Vec<f64> {
        let mut product = vec![0.0; v.len()];
        let mut directional = vec![0.0; self.outputs];
        let outputs = evaluation.probabilities.chunks_exact(self.outputs);
        for (row, p) in self.design_rows().zip(outputs) {
            for (u, weights) in directional.iter_mut().zip(v.chunks_exact(self.width)) {
                *u = dot(row, weights);
            }
            let mixed = inner(p, &directional);
            for (k, out) in product.chunks_exact_mut(self.width).enumerate() {
                let curvature = if self.outputs == 1 {
                    p[0] * (1.0 - p[0]) * directional[0]
                } else {
                    p[k] * (directional[k] - mixed)
                };
                add_scaled(out, self.c * curvature, row);
            }
        }
        let sum = self.intercept_sum(v);
        for (out, w) in product
            .chunks_exact_mut(self.width)
            .zip(v.chunks_exact(self.width))
        {
            add_scaled(&mut out[..self.n_features], 1.0, &w[..self.n_features]);
            if self.has_intercept_sum() {
                out[self.n_features] += sum;
            }
        }
        product
    }

    fn hessian_diagonal(&self, evaluation: &Evaluation) -> Vec<f64> {
        let mut diagonal = vec![0.0; self.parameters()];
        let outputs = evaluation.probabilities.chunks_exact(self.outputs);
        for (row, p) in self.design_rows().zip(outputs) {
            for (k, out) in diagonal.chunks_exact_mut(self.width).enumerate() {
                let weight = self.c * self.curvature(p, k, k);
                for (d, a) in out.iter_mut().zip(row) {
                    *d += weight * a * a;
                }
            }
        }
        for out in diagonal.chunks_exact_mut(self.width) {
            out[..self.n_features].iter_mut().for_each(|d| *d += 1.0);
            if self.has_intercept_sum() {
                out[self.n_features] += 1.0;
            }
        }
        diagonal
    }

    /// The Newton step: `H s = −g`, solved exactly (dense) or to relative residual
    /// `forcing` (conjugate gradients).
    fn newton_step(&self, evaluation: &Evaluation, gradient: &[f64], forcing: f64) -> Vec<f64> {
        let rhs: Vec<f64> = gradient.iter().map(|g| -g).collect();
        let dim = self.parameters();
        if dim > self.dense_max_parameters {
            return self.conjugate_gradient(evaluation, &rhs, forcing);
        }
        let mut hessian = self.hessian(evaluation);
        if let Some(step) = solve_spd(&hessian, dim, &rhs) {
            return step;
        }
        // Not numerically positive definite (probabilities saturated to 0 or 1 in f64):
        // Levenberg–Marquardt damping, raised until the factorisation succeeds.
        let diagonal: Vec<f64> = (0..dim).map(|i| hessian[i * dim + i]).collect();
        let mut damping = 1e-10;
        while damping <= 1e10 {
            for (i, d) in diagonal.iter().enumerate() {
                hessian[i * dim + i] = d * (1.0 + damping) + damping;
            }
            if let Some(step) = solve_spd(&hessian, dim, &rhs) {
                return step;
            }
            damping *= 100.0;
        }
        // Scaled steepest descent; the line search takes it from there.
        rhs.iter()
            .zip(&diagonal)
            .map(|(r, d)| r / (d.abs() + 1.0))
            .collect()
    }

    /// Jacobi-preconditioned conjugate gradients on `H s = rhs`, stopped at relative
    /// residual `forcing` or on non-positive curvature.
    fn conjugate_gradient(&self, evaluation: &Evaluation, rhs: &[f64], forcing: f64) -> Vec<f64> {
        let inverse_diagonal: Vec<f64> = self
            .hessian_diagonal(evaluation)
            .iter()
            .map(|&d| if d > 0.0 { 1.0 / d } else { 1.0 })
            .collect();
        let precondition = |r: &[f64]| -> Vec<f64> {
            r.iter()
                .zip(&inverse_diagonal)
                .map(|(a, b)| a * b)
                .collect()
        };
        let target = forcing * norm(rhs);
        let mut solution = vec![0.0; rhs.len()];
        let mut residual = rhs.to_vec();
        let mut preconditioned = precondition(&residual);
        let mut direction = preconditioned.clone();
        let mut residual_dot = inner(&residual, &preconditioned);
        let max_steps = (2 * rhs.len()).clamp(10, 2000);
        for _ in 0..max_steps {
            let h_direction = self.hessian_times(evaluation, &direction);
            let curvature = inner(&direction, &h_direction);
            if !(curvature > 0.0 && curvature.is_finite()) {
                break;
            }
            let alpha = residual_dot / curvature;
            add_scaled(&mut solution, alpha, &direction);
            add_scaled(&mut residual, -alpha, &h_direction);
            if norm(&residual) <= target {
                break;
            }
            preconditioned = precondition(&residual);
            let next_dot = inner(&residual, &preconditioned);
            let beta = next_dot / residual_dot;
            residual_dot = next_dot;
            for (d, z) in direction.iter_mut().zip(&preconditioned) {
                *d = z + beta * *d;
            }
        }
        if solution.iter().all(|&s| s == 0.0) {
            return precondition(rhs);
        }
        solution
    }

    /// Newton's method from θ = 0 with a backtracking line search. Stops after a full
    /// step with Newton decrement `λ² ≤ tol² · max(1, objective)` (converged), after
    /// `max_iter` iterations, or when no step along the Newton direction decreases the
    /// objective (not converged).
    pub(crate) fn solve(&self, max_iter: usize, tol: f64) -> Solution {
        let mut theta = vec![0.0; self.parameters()];
        let mut current = self.evaluate(&theta);
        let mut initial_gradient_norm = None;
        let mut iterations = 0;
        let mut converged = false;
        while iterations < max_iter {
            iterations += 1;
            let gradient = self.gradient(&theta, &current);
            let gradient_norm = norm(&gradient);
            if gradient_norm == 0.0 {
                converged = true;
                break;
            }
            let initial = *initial_gradient_norm.get_or_insert(gradient_norm);
            // Conjugate gradients solve to a residual of `forcing · ‖g‖`; shrinking it in
            // proportion to ‖g‖ keeps Newton's quadratic convergence.
            let forcing = (gradient_norm / initial).min(0.5);
            let mut step = self.newton_step(&current, &gradient, forcing);
            let mut slope = inner(&gradient, &step);
            if !(slope < 0.0 && slope.is_finite()) {
                step = gradient.iter().map(|g| -g).collect();
                slope = -gradient_norm * gradient_norm;
            }
            // The Newton decrement λ² = −gᵀΔ: twice the decrease the quadratic model
            // predicts, and invariant under rescaling of the features.
            let decrement = -slope;
            // Near the optimum the decrease falls below the rounding of the objective;
            // allow that much so the final, most accurate Newton steps are not refused.
            let noise = 16.0 * f64::EPSILON * current.objective.abs();
            let mut fraction = 1.0;
            let mut accepted = None;
            for _ in 0..MAX_STEP_HALVINGS {
                let mut candidate = theta.clone();
                add_scaled(&mut candidate, fraction, &step);
                let evaluation = self.evaluate(&candidate);
                if evaluation.objective <= current.objective + ARMIJO * fraction * slope + noise {
                    accepted = Some((candidate, evaluation));
                    break;
                }
                fraction *= 0.5;
            }
            let Some((candidate, evaluation)) = accepted else {
                break;
            };
            theta = candidate;
            current = evaluation;
            if fraction == 1.0 && decrement <= tol * tol * current.objective.abs().max(1.0) {
                converged = true;
                break;
            }
        }
        Solution {
            theta,
            iterations,
            converged,
        }
    }

    /// Round the solution to the stored f32 model. Multinomial intercepts are re-centred
    /// to an exactly zero mean (the objective already drives their sum to zero).
    fn into_fitted(self, solution: &Solution) -> FittedLogistic {
        let mut coefficients = Vec::with_capacity(self.outputs * self.n_features);
        let mut intercept = Vec::with_capacity(self.outputs);
        for row in solution.theta.chunks_exact(self.width) {
            coefficients.extend(row[..self.n_features].iter().map(|&w| w as f32));
            intercept.push(if self.fit_intercept {
                row[self.n_features]
            } else {
                0.0
            });
        }
        if self.outputs > 1 {
            let mean = intercept.iter().sum::<f64>() / intercept.len() as f64;
            intercept.iter_mut().for_each(|b| *b -= mean);
        }
        FittedLogistic::new(
            self.classes,
            self.n_features,
            coefficients,
            intercept.iter().map(|&b| b as f32).collect(),
            Some(FitReport {
                iterations: solution.iterations,
                converged: solution.converged,
            }),
        )
    }
}

#[cfg(test)]
mod tests;
