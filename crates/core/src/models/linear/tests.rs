use super::*;
use crate::dtype::DType;
use std::borrow::Cow;

fn matrix(data: &[f64], cols: usize) -> MatrixRef<'_> {
    MatrixRef::from_f64(data, data.len() / cols, cols).expect("valid test matrix")
}

fn fitted(fit_intercept: bool, x: &[f64], cols: usize, y: &[f64]) -> LinearRegression {
    let mut model = LinearRegression::new(fit_intercept);
    model.fit(matrix(x, cols), y).expect("fit");
    model
}

/// Rows of (x1, x2) with y = 2·x1 − 3·x2 + 0.5.
fn exact_problem() -> (Vec<f64>, Vec<f64>) {
    let x = vec![
        1.0, 2.0, //
        -0.5, 4.0, //
        3.0, 0.25, //
        2.5, -1.0, //
        0.0, 0.0, //
        -2.0, -3.5,
    ];
    let y = x.chunks(2).map(|r| 2.0 * r[0] - 3.0 * r[1] + 0.5).collect();
    (x, y)
}

#[test]
fn recovers_an_exact_linear_relation() {
    let (x, y) = exact_problem();
    let model = fitted(true, &x, 2, &y);
    let coefficients = model.coefficients();
    assert!((f64::from(coefficients[0]) - 2.0).abs() < 1e-10);
    assert!((f64::from(coefficients[1]) + 3.0).abs() < 1e-10);
    assert!((f64::from(model.intercept()) - 0.5).abs() < 1e-10);
    assert_eq!(model.rank(), Some(2));
    assert_eq!(model.n_features(), Some(2));
    assert!((model.score(matrix(&x, 2), &y).unwrap() - 1.0).abs() < 1e-12);
    let predictions = model.predict(matrix(&x, 2)).unwrap();
    for (p, t) in predictions.iter().zip(&y) {
        assert!((f64::from(*p) - t).abs() < 1e-6, "{p} vs {t}");
    }
}

#[test]
fn f32_and_f64_inputs_predict_alike() {
    let (x, y) = exact_problem();
    let model = fitted(true, &x, 2, &y);
    let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    let from_f32 = model
        .predict(MatrixRef::from_f32(&x32, 6, 2).unwrap())
        .unwrap();
    assert_eq!(from_f32, model.predict(matrix(&x, 2)).unwrap());
}

#[test]
fn prediction_accumulates_long_rows_exactly_enough() {
    // 37 features (not a multiple of the 8 accumulator lanes) against an f64 reference.
    let cols = 37;
    let rows = 50;
    let x: Vec<f64> = (0..rows * cols)
        .map(|i| ((i * 7919) % 1000) as f64 / 100.0 - 5.0)
        .collect();
    let truth: Vec<f64> = (0..cols).map(|j| (j as f64 - 18.0) / 7.0).collect();
    let y: Vec<f64> = x
        .chunks(cols)
        .map(|r| r.iter().zip(&truth).map(|(a, b)| a * b).sum::<f64>() + 1.25)
        .collect();
    let model = fitted(true, &x, cols, &y);
    let predictions = model.predict(matrix(&x, cols)).unwrap();
    for (row, p) in x.chunks(cols).zip(&predictions) {
        let reference: f64 = f64::from(model.intercept())
            + row
                .iter()
                .zip(model.coefficients())
                .map(|(a, c)| a * f64::from(*c))
                .sum::<f64>();
        assert!(
            (f64::from(*p) - reference).abs() <= 1e-6 * reference.abs().max(1.0),
            "{p} vs {reference}"
        );
    }
}

#[test]
fn without_intercept_fits_through_the_origin() {
    // 1-D closed form: β = Σxy / Σx², for data that has an offset the model must ignore.
    let x = [1.0, 2.0, 3.0, 4.0];
    let y = [3.0, 4.5, 7.5, 8.0];
    let model = fitted(false, &x, 1, &y);
    let expected =
        x.iter().zip(&y).map(|(a, b)| a * b).sum::<f64>() / x.iter().map(|a| a * a).sum::<f64>();
    assert!((f64::from(model.coefficients()[0]) - expected).abs() < 1e-6);
    assert_eq!(model.intercept(), 0.0);

    // An exact relation through the origin is recovered exactly.
    let (x, _) = exact_problem();
    let y: Vec<f64> = x.chunks(2).map(|r| 1.5 * r[0] + 0.25 * r[1]).collect();
    let model = fitted(false, &x, 2, &y);
    assert_eq!(model.coefficients(), &[1.5, 0.25]);
}

#[test]
fn duplicate_column_gets_the_minimum_norm_split() {
    // y = 3t + 1 with the column t given twice: every (a, 3 − a) fits; the minimum-norm
    // one is (1.5, 1.5).
    let t = [0.0, 1.0, 2.0, 3.0, 5.0];
    let x: Vec<f64> = t.iter().flat_map(|&v| [v, v]).collect();
    let y: Vec<f64> = t.iter().map(|v| 3.0 * v + 1.0).collect();
    let model = fitted(true, &x, 2, &y);
    assert_eq!(model.rank(), Some(1));
    for c in model.coefficients() {
        assert!((f64::from(*c) - 1.5).abs() < 1e-6, "{c}");
    }
    assert!((f64::from(model.intercept()) - 1.0).abs() < 1e-6);
}

#[test]
fn collinear_columns_get_the_minimum_norm_solution() {
    // x3 = x1 + x2 and y = 2·x1 + 2·x2: the solutions are (2 − b, 2 − b, b); the norm
    // 2(2 − b)² + b² is smallest at b = 4/3, giving (2/3, 2/3, 4/3).
    let pairs = [[1.0, 0.0], [0.0, 1.0], [2.0, 1.0], [1.0, 3.0], [4.0, -1.0]];
    let x: Vec<f64> = pairs
        .iter()
        .flat_map(|p| [p[0], p[1], p[0] + p[1]])
        .collect();
    let y: Vec<f64> = pairs.iter().map(|p| 2.0 * p[0] + 2.0 * p[1]).collect();
    let model = fitted(false, &x, 3, &y);
    assert_eq!(model.rank(), Some(2));
    for (c, expected) in model
        .coefficients()
        .iter()
        .zip([2.0 / 3.0, 2.0 / 3.0, 4.0 / 3.0])
    {
        assert!((f64::from(*c) - expected).abs() < 1e-6, "{c} vs {expected}");
    }
}

#[test]
fn more_features_than_rows_and_constant_columns() {
    // One row: centred data is all zero, so every coefficient is 0 and the intercept is y.
    let model = fitted(true, &[1.0, 2.0, 3.0], 3, &[7.0]);
    assert_eq!(model.coefficients(), &[0.0, 0.0, 0.0]);
    assert_eq!(model.intercept(), 7.0);
    assert_eq!(model.rank(), Some(0));

    // A constant column carries no information: coefficient 0, not rounding noise.
    let x = [5.0, 1.0, 5.0, 2.0, 5.0, 3.0, 5.0, 4.0];
    let model = fitted(true, &x, 2, &[1.0, 3.0, 5.0, 7.0]);
    assert_eq!(model.coefficients()[0], 0.0);
    assert!((f64::from(model.coefficients()[1]) - 2.0).abs() < 1e-6);
    assert!((f64::from(model.intercept()) + 1.0).abs() < 1e-6);
}

#[test]
fn score_of_constant_targets_follows_scikit_learn() {
    let x = [1.0, 2.0, 3.0];
    let model = fitted(true, &x, 1, &[4.0, 4.0, 4.0]);
    assert_eq!(model.score(matrix(&x, 1), &[4.0, 4.0, 4.0]).unwrap(), 1.0);
    assert_eq!(model.score(matrix(&x, 1), &[5.0, 5.0, 5.0]).unwrap(), 0.0);
}

#[test]
fn invalid_arguments_are_reported() {
    let (x, y) = exact_problem();
    let mut model = LinearRegression::new(true);

    let e = model.fit(matrix(&x, 2), &y[..5]).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
    assert_eq!(e.detail(), "y has 5 values, but x has 6 rows");

    let mut bad_x = x.clone();
    bad_x[7] = f64::NAN;
    let e = model.fit(matrix(&bad_x, 2), &y).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
    assert_eq!(e.detail(), "x contains NaN at row 3, column 1");

    let mut bad_y = y.clone();
    bad_y[2] = f64::NEG_INFINITY;
    let e = model.fit(matrix(&x, 2), &bad_y).unwrap_err();
    assert_eq!(e.detail(), "y contains -Infinity at index 2");
    assert!(!model.is_fitted());

    model.fit(matrix(&x, 2), &y).unwrap();
    let e = model.predict(matrix(&x[..6], 3)).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
    assert_eq!(
        e.detail(),
        "x has 3 columns, but the model was fitted with 2 features"
    );
    let e = model
        .predict_into(matrix(&x, 2), &mut [0.0; 5])
        .unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");

    let mut infinite = x.clone();
    infinite[8] = f64::INFINITY;
    let e = model.predict(matrix(&infinite, 2)).unwrap_err();
    assert_eq!(e.detail(), "x contains Infinity at row 4, column 0");

    let e = model.score(matrix(&x[..2], 2), &y[..1]).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
    assert_eq!(e.detail(), "R² needs at least 2 rows; x has 1");
    let e = model.score(matrix(&x, 2), &y[..3]).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
}

#[test]
fn an_overflowing_score_is_an_error_not_a_silent_infinity() {
    let model = fitted(false, &[1.0, 2.0], 1, &[2.0, 4.0]);
    let e = model.predict(matrix(&[f64::MAX], 1)).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
    assert_eq!(
        e.detail(),
        "x row 0 is too large: its linear score overflows f64"
    );
}

#[test]
fn unfitted_model_refuses_to_predict_score_or_save() {
    let model = LinearRegression::new(true);
    let x = [1.0, 2.0];
    assert!(!model.is_fitted());
    assert_eq!(model.coefficients(), &[] as &[f32]);
    assert_eq!(model.n_features(), None);
    for e in [
        model.predict(matrix(&x, 1)).unwrap_err(),
        model.score(matrix(&x, 1), &[1.0, 2.0]).unwrap_err(),
        model.to_tensors().unwrap_err(),
    ] {
        assert_eq!(e.code(), "ERR_NOT_FITTED");
    }
    assert_eq!(model.config_json()["n_features"], serde_json::Value::Null);
}

fn lookup<'a>(tensors: &'a [TensorView<'static>]) -> impl Fn(&str) -> Option<TensorView<'a>> {
    move |name| {
        tensors.iter().find(|t| t.name == name).map(|t| TensorView {
            name: t.name.clone(),
            dtype: t.dtype,
            shape: t.shape.clone(),
            data: Cow::Borrowed(&t.data[..]),
        })
    }
}

#[test]
fn round_trip_through_tensors_is_bit_exact() {
    let (x, y) = exact_problem();
    let noisy: Vec<f64> = y
        .iter()
        .enumerate()
        .map(|(i, v)| v + 0.1 * (i as f64).sin())
        .collect();
    for fit_intercept in [true, false] {
        let model = fitted(fit_intercept, &x, 2, &noisy);
        let (tensors, metadata) = model.to_tensors().unwrap();
        assert_eq!(tensors[0].name, "coefficients");
        assert_eq!(tensors[0].shape, vec![2]);
        assert_eq!(tensors[1].name, "intercept");
        assert_eq!(tensors[1].shape, vec![1]);
        assert_eq!(metadata["model_type"], "linear_regression");
        assert_eq!(metadata["n_features"], "2");
        assert_eq!(metadata["fit_intercept"], fit_intercept.to_string());

        let loaded = LinearRegression::from_tensors(&lookup(&tensors), Some(&metadata)).unwrap();
        let bits = |m: &LinearRegression| -> Vec<u32> {
            m.coefficients().iter().map(|c| c.to_bits()).collect()
        };
        assert_eq!(bits(&loaded), bits(&model));
        assert_eq!(loaded.intercept().to_bits(), model.intercept().to_bits());
        assert_eq!(loaded.fit_intercept(), fit_intercept);
        assert_eq!(loaded.to_tensors().unwrap(), (tensors, metadata));
        assert_eq!(loaded.config_json(), model.config_json());
    }
}

#[test]
fn loads_unaligned_little_endian_bytes_without_metadata() {
    // The values sit one byte into the buffer, as they may in a mapped file.
    let mut buffer = vec![0u8];
    for v in [1.5f32, -2.0] {
        buffer.extend_from_slice(&v.to_le_bytes());
    }
    buffer.extend_from_slice(&0.25f32.to_le_bytes());
    let get = |name: &str| match name {
        "coefficients" => TensorView::new(name, DType::F32, vec![2], &buffer[1..9]).ok(),
        "intercept" => TensorView::new(name, DType::F32, vec![1], &buffer[9..13]).ok(),
        _ => None,
    };
    let model = LinearRegression::from_tensors(&get, None).unwrap();
    assert_eq!(model.coefficients(), &[1.5, -2.0]);
    assert_eq!(model.intercept(), 0.25);
    assert!(model.fit_intercept());
    let predictions = model.predict(matrix(&[1.0, 1.0, 2.0, 0.5], 2)).unwrap();
    assert_eq!(predictions, vec![-0.25, 2.25]);
}

fn good_tensors() -> Vec<TensorView<'static>> {
    vec![
        TensorView::from_f32("coefficients", vec![2], &[1.0, 2.0]).unwrap(),
        TensorView::from_f32("intercept", vec![1], &[0.5]).unwrap(),
    ]
}

fn load_error(
    tensors: Vec<TensorView<'static>>,
    metadata: &[(&str, &str)],
) -> crate::error::CoreError {
    let metadata: BTreeMap<String, String> = metadata
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    LinearRegression::from_tensors(&lookup(&tensors), Some(&metadata)).unwrap_err()
}

#[test]
fn malformed_models_are_invalid_model_errors_naming_the_tensor() {
    let mut missing = good_tensors();
    missing.remove(1);
    let e = load_error(missing, &[]);
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    assert_eq!(e.tensor(), Some("intercept"));

    let mut wrong_dtype = good_tensors();
    wrong_dtype[0] = TensorView::new("coefficients", DType::I32, vec![2], vec![0u8; 8]).unwrap();
    let e = load_error(wrong_dtype, &[]);
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    assert_eq!(e.tensor(), Some("coefficients"));
    assert_eq!(e.detail(), "expected dtype F32, found I32");

    let mut wrong_shape = good_tensors();
    wrong_shape[0] = TensorView::from_f32("coefficients", vec![1, 2], &[1.0, 2.0]).unwrap();
    let e = load_error(wrong_shape, &[]);
    assert_eq!(e.tensor(), Some("coefficients"));

    let mut wrong_intercept = good_tensors();
    wrong_intercept[1] = TensorView::from_f32("intercept", vec![2], &[1.0, 2.0]).unwrap();
    let e = load_error(wrong_intercept, &[]);
    assert_eq!(e.tensor(), Some("intercept"));
    assert_eq!(e.detail(), "shape [2], expected [1]");

    let mut empty = good_tensors();
    empty[0] = TensorView::from_f32("coefficients", vec![0], &[]).unwrap();
    assert_eq!(load_error(empty, &[]).tensor(), Some("coefficients"));

    let mut not_finite = good_tensors();
    not_finite[0] = TensorView::from_f32("coefficients", vec![2], &[1.0, f32::NAN]).unwrap();
    let e = load_error(not_finite, &[]);
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    assert_eq!(e.tensor(), Some("coefficients"));

    // Bytes that do not match the shape (the fields are public, so this can be built).
    let mut short = good_tensors();
    short[0].data = Cow::Owned(vec![0u8; 4]);
    assert_eq!(load_error(short, &[]).tensor(), Some("coefficients"));

    let e = load_error(good_tensors(), &[("model_type", "logistic_regression")]);
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    assert_eq!(
        e.detail(),
        "the file holds a 'logistic_regression' model, not a 'linear_regression'"
    );
    let e = load_error(good_tensors(), &[("n_features", "3")]);
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    let e = load_error(good_tensors(), &[("n_features", "two")]);
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    let e = load_error(good_tensors(), &[("fit_intercept", "yes")]);
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    let e = load_error(good_tensors(), &[("fit_intercept", "false")]);
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    assert_eq!(e.tensor(), Some("intercept"));
}

/// Large batches are split over threads: the same predictions as one row at a time, and a
/// bad value in a late block reported at its true row.
#[test]
fn large_batches_split_over_threads_match_row_by_row() {
    let (x, y) = exact_problem();
    let model = fitted(true, &x, 2, &y);
    let big: Vec<f64> = (0..1_200_000u64)
        .map(|i| ((i * 7919) % 1000) as f64 / 100.0)
        .collect();
    let batch = model.predict(matrix(&big, 2)).unwrap();
    for (i, row) in big.chunks_exact(2).enumerate().step_by(1009) {
        assert_eq!(
            batch[i],
            model.predict(matrix(row, 2)).unwrap()[0],
            "row {i}"
        );
    }
    let mut bad = big.clone();
    bad[590_000 * 2 + 1] = f64::INFINITY;
    let err = model.predict(matrix(&bad, 2)).unwrap_err();
    assert!(err.to_string().contains("row 590000, column 1"), "{err}");
}
