use super::*;
use std::borrow::Cow;

#[test]
fn matrix_ref_checks_its_shape() {
    let data = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let x = MatrixRef::from_f32(&data, 2, 3).unwrap();
    assert_eq!((x.rows(), x.cols()), (2, 3));
    assert_eq!(x.get(1, 0), Some(4.0));
    assert_eq!(x.get(2, 0), None);
    assert_eq!(x.get(0, 3), None);

    let e = MatrixRef::from_f32(&data, 4, 2).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
    assert_eq!(e.detail(), "x has 6 values, but 4 rows × 2 columns need 8");
    let e = MatrixRef::from_f64(&[], 0, 3).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
    assert_eq!(
        e.detail(),
        "x is empty (0 rows × 3 columns); at least one row and one column are needed"
    );
    assert!(MatrixRef::from_f64(&[], 3, 0).is_err());
    let e = MatrixRef::from_f64(&[1.0], usize::MAX, 2).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");

    let e = MatrixRef::from_f32(&[1.0, f32::NAN], 1, 2)
        .unwrap()
        .check_finite()
        .unwrap_err();
    assert_eq!(e.detail(), "x contains NaN at row 0, column 1");
}

#[test]
fn matrix_from_rows_rejects_ragged_and_empty_input() {
    let (data, rows, cols) = matrix_from_rows(&[vec![1.0, 2.0], vec![3.0, 4.0]]).unwrap();
    assert_eq!((data, rows, cols), (vec![1.0, 2.0, 3.0, 4.0], 2, 2));

    let e = matrix_from_rows(&[vec![1.0, 2.0], vec![3.0, 4.0], vec![5.0]]).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
    assert_eq!(e.detail(), "x row 2 has 1 values, but row 0 has 2");
    let e = matrix_from_rows(&[]).unwrap_err();
    assert_eq!(e.detail(), "x has no rows");
    let e = matrix_from_rows(&[vec![]]).unwrap_err();
    assert_eq!(e.detail(), "x row 0 is empty");
}

#[test]
fn dot_matches_a_plain_sum_for_every_tail_length() {
    for len in 0..30 {
        let row: Vec<f32> = (0..len).map(|i| i as f32 * 0.5 - 3.0).collect();
        let coefficients: Vec<f64> = (0..len).map(|i| 1.0 / (i as f64 + 1.0)).collect();
        let plain: f64 = row
            .iter()
            .zip(&coefficients)
            .map(|(a, b)| f64::from(*a) * b)
            .sum();
        assert!(
            (dot(&row, &coefficients) - plain).abs() < 1e-12,
            "len {len}"
        );
    }
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
fn any_model_round_trips_through_config_and_tensors() {
    let x = [0.0, 1.0, 1.0, 0.0, 2.0, 1.0, 3.0, 3.0, -1.0, 0.5];
    let mut linear = LinearRegression::new(true);
    linear
        .fit(
            MatrixRef::from_f64(&x, 5, 2).unwrap(),
            &[1.0, 2.0, 4.0, 7.5, -1.0],
        )
        .unwrap();
    let mut logistic = LogisticRegression::new(LogisticRegressionParams {
        c: 0.5,
        ..LogisticRegressionParams::default()
    })
    .unwrap();
    logistic
        .fit(MatrixRef::from_f64(&x, 5, 2).unwrap(), &[2, 4, 4, 6, 2])
        .unwrap();

    for model in [AnyModel::from(linear), AnyModel::from(logistic)] {
        let (tensors, metadata) = model.to_tensors().unwrap();
        let config = model.config_json();
        let loaded =
            AnyModel::from_config_and_tensors(&config, &lookup(&tensors), Some(&metadata)).unwrap();
        assert_eq!(loaded.model_type(), model.model_type());
        assert_eq!(loaded.config_json(), config);
        let input = MatrixRef::from_f64(&x, 5, 2).unwrap();
        let predictions = loaded.predict(input).unwrap();
        assert_eq!(predictions, model.predict(input).unwrap());
        assert_eq!(predictions.len(), 5 * model.output_width());
        let mut out = vec![0.0; predictions.len()];
        loaded.predict_into(input, &mut out).unwrap();
        assert_eq!(out, predictions);
        // Without metadata the config alone says which class it is.
        let loaded = AnyModel::from_config_and_tensors(&config, &lookup(&tensors), None).unwrap();
        assert_eq!(loaded.to_tensors().unwrap().0, tensors);
    }
}

#[test]
fn any_model_reports_what_it_predicts() {
    let tensors = vec![
        TensorView::from_f32("coefficients", vec![2], &[1.0, -1.0]).unwrap(),
        TensorView::from_f32("intercept", vec![1], &[0.0]).unwrap(),
    ];
    let config = serde_json::json!({"model_type": "logistic_regression"});
    let model = AnyModel::from_config_and_tensors(&config, &lookup(&tensors), None).unwrap();
    assert_eq!(model.output_width(), 2);
    let probabilities = model
        .predict(MatrixRef::from_f32(&[2.0, 2.0], 1, 2).unwrap())
        .unwrap();
    assert_eq!(probabilities, vec![0.5, 0.5]);
    assert_eq!(model.n_features(), Some(2));
    assert!(model.is_fitted());

    let config = serde_json::json!({"model_type": "linear_regression"});
    let model = AnyModel::from_config_and_tensors(&config, &lookup(&tensors), None).unwrap();
    assert_eq!(model.output_width(), 1);
    assert_eq!(
        model
            .predict(MatrixRef::from_f32(&[3.0, 2.0], 1, 2).unwrap())
            .unwrap(),
        vec![1.0]
    );
}

#[test]
fn any_model_rejects_unknown_or_contradictory_configs() {
    let tensors = vec![
        TensorView::from_f32("coefficients", vec![2], &[1.0, -1.0]).unwrap(),
        TensorView::from_f32("intercept", vec![1], &[0.25]).unwrap(),
    ];
    let get = lookup(&tensors);
    let cases = [
        serde_json::json!({"model_type": "random_forest"}),
        serde_json::json!({}),
        serde_json::json!([1, 2]),
        serde_json::json!({"model_type": 3}),
        serde_json::json!({"model_type": "linear_regression", "n_features": 3}),
        serde_json::json!({"model_type": "linear_regression", "fit_intercept": false}),
        serde_json::json!({"model_type": "logistic_regression", "classes": [0, 2]}),
        serde_json::json!({"model_type": "logistic_regression", "n_classes": 3}),
        serde_json::json!({"model_type": "logistic_regression", "c": -1.0}),
        serde_json::json!({"model_type": "logistic_regression", "max_iter": "many"}),
    ];
    for config in cases {
        let e = AnyModel::from_config_and_tensors(&config, &get, None).unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_MODEL", "{config}");
    }
    let e = AnyModel::from_config_and_tensors(
        &serde_json::json!({"model_type": "random_forest"}),
        &get,
        None,
    )
    .unwrap_err();
    assert_eq!(
        e.detail(),
        "unknown model_type 'random_forest'; expected 'linear_regression' or 'logistic_regression'"
    );

    // The metadata's model_type is used when the config has none, and must agree with it.
    let metadata = BTreeMap::from([("model_type".to_owned(), "linear_regression".to_owned())]);
    let model =
        AnyModel::from_config_and_tensors(&serde_json::json!({}), &get, Some(&metadata)).unwrap();
    assert_eq!(model.model_type(), "linear_regression");
    let e = AnyModel::from_config_and_tensors(
        &serde_json::json!({"model_type": "logistic_regression"}),
        &get,
        Some(&metadata),
    )
    .unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_MODEL");

    // Hyperparameters from the config are applied.
    let model = AnyModel::from_config_and_tensors(
        &serde_json::json!({"model_type": "logistic_regression", "c": 0.25, "max_iter": 7, "classes": [0, 1]}),
        &get,
        None,
    )
    .unwrap();
    let AnyModel::Logistic(logistic) = model else {
        panic!("expected a logistic model");
    };
    assert_eq!(logistic.params().c, 0.25);
    assert_eq!(logistic.params().max_iter, 7);
}

/// The AVX2 dot product of the row loops is bit-identical to the portable one, for f32 and
/// f64 rows, every length from 0 to 70 (every tail), values of wildly different scales.
#[cfg(target_arch = "x86_64")]
#[test]
fn avx2_dot_is_bit_identical_to_the_portable_one() {
    if !crate::cpu::has_avx2() {
        return;
    }
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let unit = (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
        unit * 10f64.powi((state % 17) as i32 - 8)
    };
    for len in 0..=70 {
        for _ in 0..50 {
            let c: Vec<f64> = (0..len).map(|_| next()).collect();
            let x64: Vec<f64> = (0..len).map(|_| next()).collect();
            let x32: Vec<f32> = x64.iter().map(|&v| v as f32).collect();
            // SAFETY: AVX2 was detected above.
            let (a64, a32) = unsafe { (dot_avx2(&x64, &c), dot_avx2(&x32, &c)) };
            assert_eq!(a64.to_bits(), dot(&x64, &c).to_bits(), "f64, len {len}");
            assert_eq!(a32.to_bits(), dot(&x32, &c).to_bits(), "f32, len {len}");
        }
    }
}
