//! Classical models: fitting, prediction and persistence.
//!
//! * [`LinearRegression`]: ordinary least squares by Householder QR with column pivoting
//!   (minimum-norm solution when the design is rank deficient).
//! * [`LogisticRegression`]: L2-penalised logistic regression with the objective of
//!   scikit-learn's `LogisticRegression(C=...)`, solved by Newton's method; sigmoid for two
//!   classes, multinomial softmax for three or more.
//!
//! Numerics run in f64; fitted coefficients are stored as f32, which is also what is
//! persisted. Inputs arrive as a borrowed row-major [`MatrixRef`] of f32 or f64, so a
//! JavaScript `Float32Array`/`Float64Array` is used without a copy.
//!
//! Persistence goes through [`TensorView`]s plus a string metadata map (the SafeTensors
//! `__metadata__`); the binary layouts are exactly those of the Rust crate `aprender`
//! (`coefficients` F32 `[n_features]`, `intercept` F32 `[1]`), so files move both ways.

#[cfg(feature = "fs")]
mod files;
mod linalg;
mod linear;
mod logistic;
mod persist;
#[cfg(feature = "fs")]
pub use files::ModelKind;

pub use linear::LinearRegression;
pub use logistic::{LogisticRegression, LogisticRegressionParams};

use crate::error::{CoreError, Result};
use crate::tensor::TensorView;
use std::collections::BTreeMap;

/// The elements of a [`MatrixRef`], borrowed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MatrixData<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
}

impl MatrixData<'_> {
    pub fn len(&self) -> usize {
        match self {
            MatrixData::F32(values) => values.len(),
            MatrixData::F64(values) => values.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A borrowed, row-major `rows × cols` matrix of f32 or f64: one sample per row.
///
/// Construction checks the shape (non-empty, `data.len() == rows * cols`); finiteness is
/// checked where it matters: in full when fitting, and at prediction only for a row whose
/// score comes out non-finite (a NaN or ±Inf feature always makes the score non-finite),
/// so clean data pays nothing for the check.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatrixRef<'a> {
    data: MatrixData<'a>,
    rows: usize,
    cols: usize,
}

impl<'a> MatrixRef<'a> {
    /// Check and wrap `data` as a `rows × cols` row-major matrix. ERR_INVALID_ARGUMENT for
    /// 0 rows, 0 columns, or a data length other than `rows * cols`.
    pub fn new(data: MatrixData<'a>, rows: usize, cols: usize) -> Result<Self> {
        if rows == 0 || cols == 0 {
            return Err(CoreError::invalid_argument(format!(
                "x is empty ({rows} rows × {cols} columns); at least one row and one column are needed"
            )));
        }
        let expected = rows.checked_mul(cols).ok_or_else(|| {
            CoreError::invalid_argument(format!("x of {rows} rows × {cols} columns is too large"))
        })?;
        if data.len() != expected {
            return Err(CoreError::invalid_argument(format!(
                "x has {} values, but {rows} rows × {cols} columns need {expected}",
                data.len()
            )));
        }
        Ok(MatrixRef { data, rows, cols })
    }

    /// Shorthand for [`MatrixRef::new`] over f32 data.
    pub fn from_f32(data: &'a [f32], rows: usize, cols: usize) -> Result<Self> {
        MatrixRef::new(MatrixData::F32(data), rows, cols)
    }

    /// Shorthand for [`MatrixRef::new`] over f64 data.
    pub fn from_f64(data: &'a [f64], rows: usize, cols: usize) -> Result<Self> {
        MatrixRef::new(MatrixData::F64(data), rows, cols)
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    pub fn data(&self) -> MatrixData<'a> {
        self.data
    }

    /// Element `(row, col)` widened to f64; `None` out of bounds.
    pub fn get(&self, row: usize, col: usize) -> Option<f64> {
        if row >= self.rows || col >= self.cols {
            return None;
        }
        let index = row * self.cols + col;
        match self.data {
            MatrixData::F32(values) => values.get(index).map(|&v| f64::from(v)),
            MatrixData::F64(values) => values.get(index).copied(),
        }
    }

    /// ERR_INVALID_ARGUMENT naming the first NaN/±Inf element, if any.
    pub fn check_finite(&self) -> Result<()> {
        match self.data {
            MatrixData::F32(values) => check_finite_rows(values, self.cols, "x"),
            MatrixData::F64(values) => check_finite_rows(values, self.cols, "x"),
        }
    }

    /// ERR_INVALID_ARGUMENT unless the matrix has `n_features` columns.
    pub(crate) fn check_width(&self, n_features: usize) -> Result<()> {
        if self.cols != n_features {
            return Err(CoreError::invalid_argument(format!(
                "x has {} columns, but the model was fitted with {n_features} features",
                self.cols
            )));
        }
        Ok(())
    }

    /// Row `row` widened to f64 and appended to `out` (nothing when out of bounds).
    pub(crate) fn extend_with_row(&self, row: usize, out: &mut Vec<f64>) {
        let range = row * self.cols..(row + 1) * self.cols;
        match self.data {
            MatrixData::F32(values) => {
                if let Some(values) = values.get(range) {
                    out.extend(values.iter().map(|&v| f64::from(v)));
                }
            }
            MatrixData::F64(values) => {
                if let Some(values) = values.get(range) {
                    out.extend_from_slice(values);
                }
            }
        }
    }
}

/// A feature value: f32 or f64 (only these: [`dot_avx2`] relies on it), widened to f64 for
/// arithmetic.
pub(crate) trait Feature: Copy {
    /// f32 (else f64); the x86-64 kernels load by it.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    const IS_F32: bool;
    fn widen(self) -> f64;
}

impl Feature for f32 {
    const IS_F32: bool = true;
    #[inline(always)]
    fn widen(self) -> f64 {
        f64::from(self)
    }
}

impl Feature for f64 {
    const IS_F32: bool = false;
    #[inline(always)]
    fn widen(self) -> f64 {
        self
    }
}

fn check_finite_rows<T: Feature>(values: &[T], cols: usize, what: &str) -> Result<()> {
    match values.iter().position(|v| !v.widen().is_finite()) {
        None => Ok(()),
        Some(index) => {
            let value = values[index].widen();
            Err(CoreError::invalid_argument(format!(
                "{what} contains {} at row {}, column {}",
                describe_non_finite(value),
                index / cols.max(1),
                index % cols.max(1)
            )))
        }
    }
}

fn describe_non_finite(value: f64) -> &'static str {
    if value.is_nan() {
        "NaN"
    } else if value > 0.0 {
        "Infinity"
    } else {
        "-Infinity"
    }
}

/// The error for a row whose score came out non-finite: names the offending element, or,
/// when every feature is finite, says that the score overflowed.
pub(crate) fn non_finite_row_error<T: Feature>(row: &[T], row_index: usize) -> CoreError {
    match row.iter().position(|v| !v.widen().is_finite()) {
        Some(col) => CoreError::invalid_argument(format!(
            "x contains {} at row {row_index}, column {col}",
            describe_non_finite(row[col].widen())
        )),
        None => CoreError::invalid_argument(format!(
            "x row {row_index} is too large: its linear score overflows f64"
        )),
    }
}

/// ERR_INVALID_ARGUMENT unless `y` has one finite value per row of `x`.
pub(crate) fn check_targets(y: &[f64], rows: usize) -> Result<()> {
    check_label_count(y.len(), rows)?;
    match y.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(index) => Err(CoreError::invalid_argument(format!(
            "y contains {} at index {index}",
            describe_non_finite(y[index])
        ))),
    }
}

pub(crate) fn check_label_count(len: usize, rows: usize) -> Result<()> {
    if len != rows {
        return Err(CoreError::invalid_argument(format!(
            "y has {len} values, but x has {rows} rows"
        )));
    }
    Ok(())
}

/// Below this many input values per thread a prediction runs on fewer threads: a thread
/// costs tens of microseconds to start, about what 256K multiply-adds take.
const PARALLEL_MIN_VALUES: usize = 1 << 18;

/// Run `f(first_row, rows, out_rows)` over contiguous blocks of rows — one block per core
/// when the input is large, else one block on the calling thread (see
/// [`crate::parallel::for_chunks`]). `values` holds `cols` values per row and `out`
/// `out_width` per row. Of several failing blocks, the error of the first is returned.
pub(crate) fn for_row_blocks<T: Sync, O: Send>(
    values: &[T],
    cols: usize,
    out: &mut [O],
    out_width: usize,
    f: impl Fn(usize, &[T], &mut [O]) -> Result<()> + Sync,
) -> Result<()> {
    let split = crate::parallel::Split::new(cols, out_width)
        .min_units_per_thread(PARALLEL_MIN_VALUES.div_ceil(cols.max(1)));
    crate::parallel::for_chunks(split, values, out, f)
}

/// `$best`: the `#[inline(always)]` row loop `$inner` (whose last parameter is the dot
/// product to use) run through `$twin`, a copy compiled with AVX2 and given [`dot_avx2`],
/// when the CPU has AVX2 ([`crate::cpu::has_avx2`]); else the portable loop with [`dot`].
macro_rules! avx2_twin {
    ($vis:vis $best:ident, $twin:ident, $inner:ident, ($($arg:ident: $ty:ty),*), $out:ty) => {
        /// # Safety
        /// The CPU must support AVX2 ([`crate::cpu::has_avx2`]).
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        unsafe fn $twin<T: Feature>($($arg: $ty),*) -> $out {
            $inner($($arg,)* |row: &[T], c: &[f64]| {
                // SAFETY: we run only where AVX2 is present (this function's contract).
                unsafe { crate::models::dot_avx2(row, c) }
            })
        }

        #[doc = concat!("[`", stringify!($inner), "`] through its AVX2 copy when the CPU has AVX2.")]
        $vis fn $best<T: Feature>($($arg: $ty),*) -> $out {
            #[cfg(target_arch = "x86_64")]
            if crate::cpu::has_avx2() {
                // SAFETY: AVX2 was detected.
                return unsafe { $twin($($arg),*) };
            }
            $inner($($arg,)* crate::models::dot)
        }
    };
}
pub(crate) use avx2_twin;

/// How far ahead of the element being read `dot_avx2` prefetches. The hardware prefetchers
/// stop at 4 KiB page boundaries, and a JS typed array's memory is made of 4 KiB pages:
/// without the hint each page of the input starts cold. A
/// prefetch is only a hint: an address past the input is never read.
#[cfg(target_arch = "x86_64")]
const PREFETCH_BYTES: usize = 2048;

/// [`dot`] with AVX2 intrinsics, for the row loops' AVX2 copies: the same eight lanes (two
/// vectors of four), the same separately rounded multiply and add per lane, the same final
/// combination — so bit-identical to `dot`, on any input (auto-vectorisation of `dot` is not
/// stable from build to build).
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn dot_avx2<T: Feature>(row: &[T], coefficients: &[f64]) -> f64 {
    use std::arch::x86_64::*;
    let n = row.len().min(coefficients.len());
    let full = n / 8 * 8;
    let (mut lo, mut hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    let c = coefficients.as_ptr();
    let mut i = 0;
    // SAFETY: every load reads 8 elements at i < full ≤ n from slices of at least n
    // elements; T is f32 exactly when IS_F32 (Feature is implemented for f32 and f64 only).
    unsafe {
        while i < full {
            _mm_prefetch::<_MM_HINT_T0>(
                row.as_ptr()
                    .cast::<i8>()
                    .wrapping_add(i * std::mem::size_of::<T>() + PREFETCH_BYTES),
            );
            let (x_lo, x_hi) = if T::IS_F32 {
                let v = _mm256_loadu_ps(row.as_ptr().cast::<f32>().add(i));
                (
                    _mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                    _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v)),
                )
            } else {
                let x = row.as_ptr().cast::<f64>().add(i);
                (_mm256_loadu_pd(x), _mm256_loadu_pd(x.add(4)))
            };
            lo = _mm256_add_pd(lo, _mm256_mul_pd(x_lo, _mm256_loadu_pd(c.add(i))));
            hi = _mm256_add_pd(hi, _mm256_mul_pd(x_hi, _mm256_loadu_pd(c.add(i + 4))));
            i += 8;
        }
    }
    let mut lanes = [0f64; 8];
    // SAFETY: `lanes` holds 8 f64: two unaligned stores of 4.
    unsafe {
        _mm256_storeu_pd(lanes.as_mut_ptr(), lo);
        _mm256_storeu_pd(lanes.as_mut_ptr().add(4), hi);
    }
    let tail: f64 = row[full..n]
        .iter()
        .zip(&coefficients[full..n])
        .map(|(&x, &c)| x.widen() * c)
        .sum();
    let [a, b, c, d, e, f, g, h] = lanes;
    ((a + b) + (c + d)) + ((e + f) + (g + h)) + tail
}

/// `Σ row[j] · coefficients[j]` in f64.
///
/// Eight independent accumulators over contiguous chunks: floating-point addition is not
/// associative, so the compiler only vectorises a reduction whose lanes are spelt out.
#[inline(always)]
pub(crate) fn dot<T: Feature>(row: &[T], coefficients: &[f64]) -> f64 {
    const LANES: usize = 8;
    let mut lanes = [0.0f64; LANES];
    let row_chunks = row.chunks_exact(LANES);
    let coefficient_chunks = coefficients.chunks_exact(LANES);
    let tail: f64 = row_chunks
        .remainder()
        .iter()
        .zip(coefficient_chunks.remainder())
        .map(|(&x, &c)| x.widen() * c)
        .sum();
    for (xs, cs) in row_chunks.zip(coefficient_chunks) {
        // Fixed-size arrays: the compiler sees eight independent lanes and no bounds.
        let (Ok(xs), Ok(cs)) = (<&[T; LANES]>::try_from(xs), <&[f64; LANES]>::try_from(cs)) else {
            continue;
        };
        for lane in 0..LANES {
            lanes[lane] += xs[lane].widen() * cs[lane];
        }
    }
    let [a, b, c, d, e, f, g, h] = lanes;
    ((a + b) + (c + d)) + ((e + f) + (g + h)) + tail
}

/// Turn `number[][]`-style rows into a row-major buffer: `(data, rows, cols)`.
/// ERR_INVALID_ARGUMENT for no rows, an empty first row, or a row whose length differs
/// from the first (naming its index).
pub fn matrix_from_rows(rows: &[Vec<f64>]) -> Result<(Vec<f64>, usize, usize)> {
    let first = rows
        .first()
        .ok_or_else(|| CoreError::invalid_argument("x has no rows"))?;
    let cols = first.len();
    if cols == 0 {
        return Err(CoreError::invalid_argument("x row 0 is empty"));
    }
    let mut data = Vec::with_capacity(rows.len().saturating_mul(cols));
    for (index, row) in rows.iter().enumerate() {
        if row.len() != cols {
            return Err(CoreError::invalid_argument(format!(
                "x row {index} has {} values, but row 0 has {cols}",
                row.len()
            )));
        }
        data.extend_from_slice(row);
    }
    Ok((data, rows.len(), cols))
}

/// Either model, for code that loads a model without knowing its class in advance.
#[derive(Debug, Clone, PartialEq)]
pub enum AnyModel {
    Linear(LinearRegression),
    Logistic(LogisticRegression),
}

impl AnyModel {
    /// Rebuild a model from its `config_json` and its tensors. The class comes from
    /// `config.model_type`, else from the metadata's `model_type`; an unknown or missing
    /// one is ERR_INVALID_MODEL. Everything the config states (`n_features`,
    /// `fit_intercept`, `n_classes`, `classes`, logistic hyperparameters) must agree with
    /// the tensors.
    pub fn from_config_and_tensors<'t>(
        config: &serde_json::Value,
        get: &dyn Fn(&str) -> Option<TensorView<'t>>,
        metadata: Option<&BTreeMap<String, String>>,
    ) -> Result<AnyModel> {
        let config = persist::ModelConfig::parse(config)?;
        let model_type = match (
            &config.model_type,
            metadata.and_then(|m| m.get("model_type")),
        ) {
            (Some(from_config), _) => from_config.clone(),
            (None, Some(from_metadata)) => from_metadata.clone(),
            (None, None) => {
                return Err(CoreError::invalid_model(
                    "the model config has no model_type (and the file metadata none either)",
                ))
            }
        };
        match model_type.as_str() {
            linear::MODEL_TYPE => {
                let model = LinearRegression::from_tensors(get, metadata)?;
                Ok(AnyModel::Linear(model.with_config(&config)?))
            }
            logistic::MODEL_TYPE => {
                let model = LogisticRegression::from_tensors(get, metadata)?;
                Ok(AnyModel::Logistic(model.with_config(&config)?))
            }
            other => Err(CoreError::invalid_model(format!(
                "unknown model_type '{other}'; expected '{}' or '{}'",
                linear::MODEL_TYPE,
                logistic::MODEL_TYPE
            ))),
        }
    }

    /// `linear_regression` or `logistic_regression`.
    pub fn model_type(&self) -> &'static str {
        match self {
            AnyModel::Linear(_) => linear::MODEL_TYPE,
            AnyModel::Logistic(_) => logistic::MODEL_TYPE,
        }
    }

    /// Number of f32 values [`AnyModel::predict`] returns per row: 1 for linear
    /// regression, the number of classes for logistic regression (0 when not fitted).
    pub fn output_width(&self) -> usize {
        match self {
            AnyModel::Linear(_) => 1,
            AnyModel::Logistic(model) => model.classes().len(),
        }
    }

    /// The model's numeric output, row-major: linear regression → the predictions
    /// (`rows` values); logistic regression → the class probabilities (`rows × n_classes`,
    /// columns in the order of `classes()`, two columns for a binary model). Labels are
    /// deliberately not returned here: probabilities carry strictly more information and
    /// keep the output f32 for both classes of model.
    pub fn predict(&self, x: MatrixRef<'_>) -> Result<Vec<f32>> {
        match self {
            AnyModel::Linear(model) => model.predict(x),
            AnyModel::Logistic(model) => model.predict_proba(x),
        }
    }

    /// [`AnyModel::predict`] into `out` (`rows × output_width()` values).
    pub fn predict_into(&self, x: MatrixRef<'_>, out: &mut [f32]) -> Result<()> {
        match self {
            AnyModel::Linear(model) => model.predict_into(x, out),
            AnyModel::Logistic(model) => model.predict_proba_into(x, out),
        }
    }

    pub fn n_features(&self) -> Option<usize> {
        match self {
            AnyModel::Linear(model) => model.n_features(),
            AnyModel::Logistic(model) => model.n_features(),
        }
    }

    pub fn is_fitted(&self) -> bool {
        match self {
            AnyModel::Linear(model) => model.is_fitted(),
            AnyModel::Logistic(model) => model.is_fitted(),
        }
    }

    pub fn to_tensors(&self) -> Result<(Vec<TensorView<'static>>, BTreeMap<String, String>)> {
        match self {
            AnyModel::Linear(model) => model.to_tensors(),
            AnyModel::Logistic(model) => model.to_tensors(),
        }
    }

    pub fn config_json(&self) -> serde_json::Value {
        match self {
            AnyModel::Linear(model) => model.config_json(),
            AnyModel::Logistic(model) => model.config_json(),
        }
    }
}

impl From<LinearRegression> for AnyModel {
    fn from(model: LinearRegression) -> Self {
        AnyModel::Linear(model)
    }
}

impl From<LogisticRegression> for AnyModel {
    fn from(model: LogisticRegression) -> Self {
        AnyModel::Logistic(model)
    }
}

#[cfg(test)]
mod tests;
