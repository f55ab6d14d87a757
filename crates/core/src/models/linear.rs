//! Ordinary least squares.

use super::linalg::min_norm_least_squares;
use super::persist::{
    check_stated, check_zero_intercept, decode_f32, f32_tensor, require, shape_error, ModelConfig,
    StoredMetadata, COEFFICIENTS, INTERCEPT,
};
use super::{
    avx2_twin, check_targets, for_row_blocks, non_finite_row_error, Feature, MatrixData, MatrixRef,
};
use crate::error::{CoreError, Result};
use crate::tensor::TensorView;
use std::collections::BTreeMap;

pub(crate) const MODEL_TYPE: &str = "linear_regression";

/// Ordinary least squares, `y ≈ x · coefficients + intercept`, like scikit-learn's
/// `LinearRegression`.
///
/// Fitting works in f64 on a copy of the data: with `fit_intercept`, x and y are centred
/// first (as scikit-learn does) and the intercept recovered from the means; the least-squares
/// problem is solved by Householder QR with column pivoting, never the normal equations
/// (which square the condition number).
///
/// Rank-deficient designs (duplicate or collinear columns, more features than rows) get the
/// **minimum-norm** solution, the one scikit-learn's SVD-based `lstsq` returns: a complete
/// orthogonal decomposition built from the pivoted QR (see `linalg::min_norm_least_squares`).
/// The numerical rank counts pivots `|R[k][k]| > max(rows, cols) · ε · max_j ‖x_j‖`, with
/// `‖x_j‖` the norm of the raw (uncentred) column: columns that are constant, or that
/// centring cancels to rounding noise, count as absent and get coefficient 0. This cut-off
/// is far below scikit-learn 1.9's default (`tol=1e-6`, used as `lstsq`'s `cond`), so
/// features on very different scales (singular values spanning 1e-8) are still solved
/// exactly where scikit-learn's default would truncate them.
///
/// Coefficients are stored as f32 (the persisted form); prediction accumulates in f64.
#[derive(Debug, Clone, PartialEq)]
pub struct LinearRegression {
    fit_intercept: bool,
    fitted: Option<FittedLinear>,
}

#[derive(Debug, Clone, PartialEq)]
struct FittedLinear {
    coefficients: Vec<f32>,
    intercept: f32,
    /// The f32 coefficients widened once, so the prediction loop is f64 × f64.
    wide_coefficients: Vec<f64>,
    /// Numerical rank of the (centred) design at fit; unknown for a loaded model.
    rank: Option<usize>,
}

impl FittedLinear {
    fn new(coefficients: Vec<f32>, intercept: f32, rank: Option<usize>) -> Self {
        let wide_coefficients = coefficients.iter().map(|&c| f64::from(c)).collect();
        FittedLinear {
            coefficients,
            intercept,
            wide_coefficients,
            rank,
        }
    }
}

impl Default for LinearRegression {
    fn default() -> Self {
        LinearRegression::new(true)
    }
}

impl LinearRegression {
    pub fn new(fit_intercept: bool) -> Self {
        LinearRegression {
            fit_intercept,
            fitted: None,
        }
    }

    pub fn fit_intercept(&self) -> bool {
        self.fit_intercept
    }

    pub fn is_fitted(&self) -> bool {
        self.fitted.is_some()
    }

    /// The fitted coefficients, one per feature (empty before fitting).
    pub fn coefficients(&self) -> &[f32] {
        self.fitted
            .as_ref()
            .map_or(&[], |f| f.coefficients.as_slice())
    }

    /// The fitted intercept (0 before fitting or without `fit_intercept`).
    pub fn intercept(&self) -> f32 {
        self.fitted.as_ref().map_or(0.0, |f| f.intercept)
    }

    pub fn n_features(&self) -> Option<usize> {
        self.fitted.as_ref().map(|f| f.coefficients.len())
    }

    /// Numerical rank of the design at fit (`None` before fitting or for a loaded model).
    pub fn rank(&self) -> Option<usize> {
        self.fitted.as_ref().and_then(|f| f.rank)
    }

    fn fitted(&self) -> Result<&FittedLinear> {
        self.fitted.as_ref().ok_or_else(|| {
            CoreError::not_fitted("this LinearRegression is not fitted; call fit first")
        })
    }

    /// Fit to `x` (`rows × n_features`) and `y` (`rows` targets). Replaces any earlier fit.
    /// ERR_INVALID_ARGUMENT for y of the wrong length or NaN/±Inf in x or y.
    pub fn fit(&mut self, x: MatrixRef<'_>, y: &[f64]) -> Result<()> {
        let (rows, cols) = (x.rows(), x.cols());
        check_targets(y, rows)?;
        x.check_finite()?;

        // Column-major copy: QR works down columns.
        let mut design = vec![0.0; rows * cols];
        let mut row_values = Vec::with_capacity(cols);
        for row in 0..rows {
            row_values.clear();
            x.extend_with_row(row, &mut row_values);
            for (col, &value) in row_values.iter().enumerate() {
                design[row + col * rows] = value;
            }
        }
        let largest_column_norm = design
            .chunks_exact(rows)
            .map(|column| column.iter().map(|v| v * v).sum::<f64>().sqrt())
            .fold(0.0, f64::max);

        let mut column_means = vec![0.0; cols];
        let mut target = y.to_vec();
        let mut target_mean = 0.0;
        if self.fit_intercept {
            for (column, mean) in design.chunks_exact_mut(rows).zip(column_means.iter_mut()) {
                *mean = column.iter().sum::<f64>() / rows as f64;
                column.iter_mut().for_each(|v| *v -= *mean);
            }
            target_mean = y.iter().sum::<f64>() / rows as f64;
            target.iter_mut().for_each(|v| *v -= target_mean);
        }

        let rank_tolerance = rows.max(cols) as f64 * f64::EPSILON * largest_column_norm;
        let solution = min_norm_least_squares(design, rows, cols, &target, rank_tolerance);
        let intercept = if self.fit_intercept {
            target_mean
                - column_means
                    .iter()
                    .zip(&solution.solution)
                    .map(|(m, c)| m * c)
                    .sum::<f64>()
        } else {
            0.0
        };
        let coefficients = solution.solution.iter().map(|&c| c as f32).collect();
        self.fitted = Some(FittedLinear::new(
            coefficients,
            intercept as f32,
            Some(solution.rank),
        ));
        Ok(())
    }

    /// Predictions for every row of `x`.
    pub fn predict(&self, x: MatrixRef<'_>) -> Result<Vec<f32>> {
        let mut out = vec![0.0; x.rows()];
        self.predict_into(x, &mut out)?;
        Ok(out)
    }

    /// Predictions written into `out` (`rows` values), without allocating: the hot path.
    /// ERR_INVALID_ARGUMENT for the wrong width, the wrong `out` length, or a NaN/±Inf
    /// feature (named by row and column).
    pub fn predict_into(&self, x: MatrixRef<'_>, out: &mut [f32]) -> Result<()> {
        let fitted = self.fitted()?;
        x.check_width(fitted.coefficients.len())?;
        if out.len() != x.rows() {
            return Err(CoreError::invalid_argument(format!(
                "the output has room for {} predictions, but x has {} rows",
                out.len(),
                x.rows()
            )));
        }
        let intercept = f64::from(fitted.intercept);
        let coefficients = &fitted.wide_coefficients;
        let cols = coefficients.len();
        match x.data() {
            MatrixData::F32(values) => for_row_blocks(values, cols, out, 1, |first, x, out| {
                predict_rows_best(x, coefficients, intercept, first, out)
            }),
            MatrixData::F64(values) => for_row_blocks(values, cols, out, 1, |first, x, out| {
                predict_rows_best(x, coefficients, intercept, first, out)
            }),
        }
    }

    /// The coefficient of determination R² of the predictions for `x` against `y`, as
    /// scikit-learn computes it (a constant `y` scores 1 if predicted exactly, else 0).
    /// Needs at least 2 rows.
    pub fn score(&self, x: MatrixRef<'_>, y: &[f64]) -> Result<f64> {
        self.fitted()?;
        check_targets(y, x.rows())?;
        if x.rows() < 2 {
            return Err(CoreError::invalid_argument(
                "R² needs at least 2 rows; x has 1",
            ));
        }
        let predictions = self.predict(x)?;
        let mean = y.iter().sum::<f64>() / y.len() as f64;
        let residual: f64 = y
            .iter()
            .zip(&predictions)
            .map(|(t, p)| (t - f64::from(*p)).powi(2))
            .sum();
        let total: f64 = y.iter().map(|t| (t - mean).powi(2)).sum();
        Ok(if total != 0.0 {
            1.0 - residual / total
        } else if residual == 0.0 {
            1.0
        } else {
            0.0
        })
    }

    /// The persisted form: tensors `coefficients` F32 `[n_features]` and `intercept` F32
    /// `[1]` (the layout of the `aprender` crate), and metadata `model_type`,
    /// `n_features`, `fit_intercept`.
    pub fn to_tensors(&self) -> Result<(Vec<TensorView<'static>>, BTreeMap<String, String>)> {
        let fitted = self.fitted()?;
        let n_features = fitted.coefficients.len();
        let tensors = vec![
            f32_tensor(COEFFICIENTS, vec![n_features], &fitted.coefficients)?,
            f32_tensor(INTERCEPT, vec![1], &[fitted.intercept])?,
        ];
        let metadata = BTreeMap::from([
            ("model_type".to_owned(), MODEL_TYPE.to_owned()),
            ("n_features".to_owned(), n_features.to_string()),
            ("fit_intercept".to_owned(), self.fit_intercept.to_string()),
        ]);
        Ok((tensors, metadata))
    }

    /// Load from tensors as [`LinearRegression::to_tensors`] (or `aprender`) writes them.
    /// Without metadata, `fit_intercept` is taken as true (the stored intercept is used
    /// either way). ERR_INVALID_MODEL, naming the tensor, for a missing tensor, another
    /// dtype than F32, a wrong shape or a non-finite value; ERR_INVALID_MODEL also for
    /// metadata naming another model type or contradicting the tensors.
    pub fn from_tensors<'t>(
        get: &dyn Fn(&str) -> Option<TensorView<'t>>,
        metadata: Option<&BTreeMap<String, String>>,
    ) -> Result<Self> {
        let stated = StoredMetadata::parse(metadata, MODEL_TYPE)?;
        let coefficients_view = require(get, COEFFICIENTS)?;
        let coefficients = decode_f32(&coefficients_view, COEFFICIENTS)?;
        if coefficients_view.shape.len() != 1 || coefficients.is_empty() {
            return Err(shape_error(
                COEFFICIENTS,
                &coefficients_view.shape,
                "[n_features] with n_features ≥ 1",
            ));
        }
        let intercept_view = require(get, INTERCEPT)?;
        let intercept = decode_f32(&intercept_view, INTERCEPT)?;
        if intercept_view.shape != [1] {
            return Err(shape_error(INTERCEPT, &intercept_view.shape, "[1]"));
        }
        check_stated(
            "the file metadata",
            "n_features",
            stated.n_features,
            coefficients.len(),
        )?;
        let fit_intercept = stated.fit_intercept.unwrap_or(true);
        if !fit_intercept {
            check_zero_intercept("the file metadata", &intercept)?;
        }
        Ok(LinearRegression {
            fit_intercept,
            fitted: Some(FittedLinear::new(coefficients, intercept[0], None)),
        })
    }

    /// `{"model_type": "linear_regression", "n_features": n | null, "fit_intercept": bool}`.
    pub fn config_json(&self) -> serde_json::Value {
        serde_json::json!({
            "model_type": MODEL_TYPE,
            "n_features": self.n_features(),
            "fit_intercept": self.fit_intercept,
        })
    }

    /// Apply a parsed `config_json` to a loaded model, checking it against the tensors.
    pub(crate) fn with_config(mut self, config: &ModelConfig) -> Result<Self> {
        check_stated(
            "the model config",
            "n_features",
            config.n_features,
            self.n_features().unwrap_or(0),
        )?;
        if let Some(fit_intercept) = config.fit_intercept {
            if !fit_intercept {
                check_zero_intercept("the model config", &[self.intercept()])?;
            }
            self.fit_intercept = fit_intercept;
        }
        Ok(self)
    }
}

avx2_twin!(
    predict_rows_best,
    predict_rows_avx2,
    predict_rows,
    (values: &[T], coefficients: &[f64], intercept: f64, first_row: usize, out: &mut [f32]),
    Result<()>
);

#[inline(always)]
fn predict_rows<T: Feature>(
    values: &[T],
    coefficients: &[f64],
    intercept: f64,
    first_row: usize,
    out: &mut [f32],
    dot: impl Fn(&[T], &[f64]) -> f64,
) -> Result<()> {
    for (row_index, (row, slot)) in values
        .chunks_exact(coefficients.len())
        .zip(out.iter_mut())
        .enumerate()
    {
        let score = intercept + dot(row, coefficients);
        if !score.is_finite() {
            return Err(non_finite_row_error(row, first_row + row_index));
        }
        *slot = score as f32;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
