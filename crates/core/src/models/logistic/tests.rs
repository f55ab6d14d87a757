use super::kernels::{exp_non_positive, row_scores};
use super::solver::{sigmoid, Solution};
use super::*;
use crate::dtype::DType;
use crate::models::dot;
use std::borrow::Cow;

/// Deterministic pseudo-random numbers in [-1, 1) (a 64-bit LCG; the tests need spread,
/// not quality).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }
}

/// `rows × cols` features with overlapping classes: the label is the class whose
/// `true_weights` score is largest after noise. `labels` name the classes.
fn synthetic(rows: usize, cols: usize, labels: &[i32], seed: u64) -> (Vec<f64>, Vec<i32>) {
    let mut rng = Lcg(seed);
    let true_weights: Vec<f64> = (0..labels.len() * cols).map(|_| 2.0 * rng.next()).collect();
    let mut x = Vec::with_capacity(rows * cols);
    let mut y = Vec::with_capacity(rows);
    for _ in 0..rows {
        let row: Vec<f64> = (0..cols).map(|_| 3.0 * rng.next()).collect();
        let mut best = (f64::NEG_INFINITY, 0);
        for (k, w) in true_weights.chunks(cols).enumerate() {
            let score = row.iter().zip(w).map(|(a, b)| a * b).sum::<f64>() + 1.5 * rng.next();
            if score > best.0 {
                best = (score, k);
            }
        }
        x.extend_from_slice(&row);
        y.push(labels[best.1]);
    }
    (x, y)
}

fn max_abs(values: &[f64]) -> f64 {
    values.iter().fold(0.0, |m, v| m.max(v.abs()))
}

fn matrix(data: &[f64], cols: usize) -> MatrixRef<'_> {
    MatrixRef::from_f64(data, data.len() / cols, cols).expect("valid test matrix")
}

fn params(fit_intercept: bool, c: f64) -> LogisticRegressionParams {
    LogisticRegressionParams {
        fit_intercept,
        c,
        ..LogisticRegressionParams::default()
    }
}

/// Fit in f64 and return the problem, its solution and the max-abs gradient there.
fn solve(
    x: &[f64],
    cols: usize,
    y: &[i32],
    params: &LogisticRegressionParams,
    dense_max_parameters: usize,
) -> (Problem, Solution, f64) {
    let problem = Problem::new(matrix(x, cols), y, params, dense_max_parameters).unwrap();
    let solution = problem.solve(params.max_iter, params.tol);
    let evaluation = problem.evaluate(&solution.theta);
    let gradient = problem.gradient(&solution.theta, &evaluation);
    let gradient_max = max_abs(&gradient);
    (problem, solution, gradient_max)
}

#[test]
fn binary_fit_reaches_a_zero_gradient() {
    let (x, y) = synthetic(200, 4, &[0, 1], 7);
    for fit_intercept in [true, false] {
        for c in [0.01, 1.0, 100.0] {
            let (_, solution, gradient) = solve(&x, 4, &y, &params(fit_intercept, c), 256);
            assert!(solution.converged, "c={c}");
            assert!(
                gradient < 1e-6,
                "c={c} intercept={fit_intercept}: |g| = {gradient}"
            );
        }
    }
}

#[test]
fn multinomial_fit_reaches_a_zero_gradient_with_the_symmetric_solution() {
    let (x, y) = synthetic(300, 5, &[3, 7, 9, 11], 11);
    for fit_intercept in [true, false] {
        let (problem, solution, gradient) = solve(&x, 5, &y, &params(fit_intercept, 1.0), 256);
        assert!(solution.converged);
        assert!(gradient < 1e-6, "|g| = {gradient}");
        // The penalty makes each weight column sum to zero over the classes, and the
        // intercepts are the zero-sum ones.
        for j in 0..problem.width {
            let column_sum: f64 = solution.theta.chunks(problem.width).map(|w| w[j]).sum();
            assert!(column_sum.abs() < 1e-8, "column {j} sums to {column_sum}");
        }
    }
}

#[test]
fn one_feature_optimum_matches_an_independent_bisection() {
    // Without intercept the objective is 0.5·w² + C·Σ log(1 + exp(−sᵢ·w·xᵢ)), sᵢ = ±1;
    // its derivative w − C·Σ sᵢxᵢ·σ(−sᵢwxᵢ) is increasing, so bisection finds the root.
    let x = [0.5, -1.0, 2.0, 1.5, -0.3, 0.8, -2.2, 1.1];
    let y = [1, 0, 1, 0, 0, 1, 0, 1];
    let c = 2.0;
    let derivative = |w: f64| {
        w - c * x
            .iter()
            .zip(&y)
            .map(|(xi, &yi)| {
                let s = if yi == 1 { 1.0 } else { -1.0 };
                s * xi / (1.0 + (s * w * xi).exp())
            })
            .sum::<f64>()
    };
    let (mut low, mut high) = (-100.0, 100.0);
    for _ in 0..200 {
        let mid = 0.5 * (low + high);
        if derivative(mid) > 0.0 {
            high = mid;
        } else {
            low = mid;
        }
    }
    let mut model = LogisticRegression::new(params(false, c)).unwrap();
    model.fit(matrix(&x, 1), &y).unwrap();
    assert!((f64::from(model.coefficients()[0]) - low).abs() < 1e-6);
    assert_eq!(model.intercept(), &[0.0]);
}

#[test]
fn conjugate_gradient_path_agrees_with_the_dense_newton_path() {
    let (x, y) = synthetic(150, 6, &[0, 1], 3);
    let (_, dense, _) = solve(&x, 6, &y, &params(true, 1.0), 256);
    let (_, iterative, gradient) = solve(&x, 6, &y, &params(true, 1.0), 0);
    assert!(gradient < 1e-6, "|g| = {gradient}");
    for (a, b) in dense.theta.iter().zip(&iterative.theta) {
        assert!((a - b).abs() < 1e-7, "{a} vs {b}");
    }
    let (x, y) = synthetic(150, 4, &[0, 1, 2], 5);
    let (_, dense, _) = solve(&x, 4, &y, &params(true, 1.0), 256);
    let (_, iterative, gradient) = solve(&x, 4, &y, &params(true, 1.0), 0);
    assert!(gradient < 1e-6, "|g| = {gradient}");
    for (a, b) in dense.theta.iter().zip(&iterative.theta) {
        assert!((a - b).abs() < 1e-7, "{a} vs {b}");
    }
}

#[test]
fn separable_and_badly_scaled_data_still_converge() {
    // Perfectly separable: only the penalty keeps the optimum finite.
    let x = [-3.0, -2.0, -1.0, 1.0, 2.0, 3.0];
    let y = [0, 0, 0, 1, 1, 1];
    let (_, solution, gradient) = solve(&x, 1, &y, &params(true, 100.0), 256);
    assert!(solution.converged);
    assert!(gradient < 1e-6, "|g| = {gradient}");

    // One feature a million times larger than the others. Its raw gradient entry carries
    // that scale (a change of 1e-12 in its weight moves the scores by 1e-6), so measure
    // the gradient in feature-scale units: the same objective with that weight
    // reparametrised as u = 1e6·w, whose derivative is the raw one divided by 1e6.
    let (mut x, y) = synthetic(200, 3, &[0, 1], 13);
    x.iter_mut().skip(1).step_by(3).for_each(|v| *v *= 1e6);
    let problem = Problem::new(matrix(&x, 3), &y, &params(true, 1.0), 256).unwrap();
    let solution = problem.solve(100, 1e-4);
    assert!(solution.converged);
    let mut gradient = problem.gradient(&solution.theta, &problem.evaluate(&solution.theta));
    gradient[1] /= 1e6;
    assert!(max_abs(&gradient) < 1e-6, "|g| = {gradient:?}");
}

#[test]
fn labels_map_to_sorted_classes_and_predictions_use_them() {
    let (x, y01) = synthetic(120, 3, &[0, 1], 17);
    let y: Vec<i32> = y01.iter().map(|&v| if v == 1 { 1 } else { -1 }).collect();
    let mut model = LogisticRegression::default();
    model.fit(matrix(&x, 3), &y).unwrap();
    assert_eq!(model.classes(), &[-1, 1]);
    assert_eq!(model.coefficients().len(), 3);
    assert_eq!(model.intercept().len(), 1);
    assert_eq!(model.converged(), Some(true));
    assert!(model.n_iter().unwrap() <= 20);

    let probabilities = model.predict_proba(matrix(&x, 3)).unwrap();
    let labels = model.predict(matrix(&x, 3)).unwrap();
    for (pair, label) in probabilities.chunks(2).zip(&labels) {
        assert!((pair[0] + pair[1] - 1.0).abs() < 1e-6);
        assert_eq!(*label, if pair[1] > pair[0] { 1 } else { -1 });
    }
    let accuracy = model.score(matrix(&x, 3), &y).unwrap();
    let expected = labels.iter().zip(&y).filter(|(a, b)| a == b).count() as f64 / 120.0;
    assert_eq!(accuracy, expected);
    assert!(accuracy > 0.8, "{accuracy}");

    let (x, y) = synthetic(150, 3, &[9, 3, 7], 19);
    let mut model = LogisticRegression::default();
    model.fit(matrix(&x, 3), &y).unwrap();
    assert_eq!(model.classes(), &[3, 7, 9]);
    assert_eq!(model.coefficients().len(), 9);
    let intercept_sum: f32 = model.intercept().iter().sum();
    assert!(intercept_sum.abs() < 1e-5);
    let probabilities = model.predict_proba(matrix(&x, 3)).unwrap();
    let labels = model.predict(matrix(&x, 3)).unwrap();
    for (row, label) in probabilities.chunks(3).zip(&labels) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        let best = (0..3).fold(0, |b, k| if row[k] > row[b] { k } else { b });
        assert_eq!(*label, [3, 7, 9][best]);
    }
}

#[test]
fn invalid_arguments_are_reported() {
    let (x, y) = synthetic(20, 2, &[0, 1], 23);
    let mut model = LogisticRegression::default();

    let e = model.fit(matrix(&x, 2), &[4; 20]).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
    assert_eq!(
        e.detail(),
        "y has a single class (4); logistic regression needs at least two"
    );
    let e = model.fit(matrix(&x, 2), &y[..19]).unwrap_err();
    assert_eq!(e.detail(), "y has 19 values, but x has 20 rows");
    let mut bad = x.clone();
    bad[5] = f64::INFINITY;
    let e = model.fit(matrix(&bad, 2), &y).unwrap_err();
    assert_eq!(e.detail(), "x contains Infinity at row 2, column 1");
    assert!(!model.is_fitted());

    for (c, tol, max_iter) in [
        (0.0, 1e-4, 100),
        (f64::NAN, 1e-4, 100),
        (1.0, -1.0, 100),
        (1.0, 1e-4, 0),
    ] {
        let e = LogisticRegression::new(LogisticRegressionParams {
            fit_intercept: true,
            c,
            max_iter,
            tol,
        })
        .unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
    }

    model.fit(matrix(&x, 2), &y).unwrap();
    let e = model.predict_proba(matrix(&x[..18], 3)).unwrap_err();
    assert_eq!(
        e.detail(),
        "x has 3 columns, but the model was fitted with 2 features"
    );
    let e = model
        .predict_proba_into(matrix(&x, 2), &mut [0.0; 20])
        .unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
    let e = model.predict_into(matrix(&x, 2), &mut [0; 21]).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
    let e = model.predict(matrix(&bad, 2)).unwrap_err();
    assert_eq!(e.detail(), "x contains Infinity at row 2, column 1");
    let e = model.score(matrix(&x, 2), &y[..3]).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
}

#[test]
fn a_continuous_target_is_refused_before_allocating_for_it() {
    // 17,000 distinct labels: 17,000 rows × 17,000 classes of probabilities per iteration.
    let rows: i32 = 17_000;
    let x: Vec<f64> = (0..rows).map(f64::from).collect();
    let y: Vec<i32> = (0..rows).collect();
    let e = LogisticRegression::default()
        .fit(matrix(&x, 1), &y)
        .unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
    assert!(
        e.detail().starts_with("y has 17000 distinct labels"),
        "{}",
        e.detail()
    );
}

#[test]
fn running_out_of_iterations_is_reported_not_an_error() {
    let (x, y) = synthetic(100, 3, &[0, 1], 37);
    let mut model = LogisticRegression::new(LogisticRegressionParams {
        max_iter: 1,
        ..LogisticRegressionParams::default()
    })
    .unwrap();
    model.fit(matrix(&x, 3), &y).unwrap();
    assert_eq!(model.n_iter(), Some(1));
    assert_eq!(model.converged(), Some(false));
    assert!(model.predict(matrix(&x, 3)).is_ok());
}

#[test]
fn unfitted_model_refuses_to_predict_score_or_save() {
    let model = LogisticRegression::default();
    let x = [1.0, 2.0];
    for e in [
        model.predict(matrix(&x, 1)).unwrap_err(),
        model.predict_proba(matrix(&x, 1)).unwrap_err(),
        model.score(matrix(&x, 1), &[0, 1]).unwrap_err(),
        model.to_tensors().unwrap_err(),
    ] {
        assert_eq!(e.code(), "ERR_NOT_FITTED");
    }
    assert_eq!(model.classes(), &[] as &[i32]);
    assert_eq!(model.n_iter(), None);
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

fn assert_round_trip(model: &LogisticRegression) -> Vec<TensorView<'static>> {
    let (tensors, metadata) = model.to_tensors().unwrap();
    let loaded = LogisticRegression::from_tensors(&lookup(&tensors), Some(&metadata)).unwrap();
    let bits = |values: &[f32]| -> Vec<u32> { values.iter().map(|v| v.to_bits()).collect() };
    assert_eq!(bits(loaded.coefficients()), bits(model.coefficients()));
    assert_eq!(bits(loaded.intercept()), bits(model.intercept()));
    assert_eq!(loaded.classes(), model.classes());
    assert_eq!(loaded.params().fit_intercept, model.params().fit_intercept);
    assert_eq!(loaded.to_tensors().unwrap(), (tensors.clone(), metadata));
    tensors
}

#[test]
fn round_trip_through_tensors_is_bit_exact() {
    let (x, y) = synthetic(80, 3, &[0, 1], 29);
    let mut model = LogisticRegression::default();
    model.fit(matrix(&x, 3), &y).unwrap();
    let tensors = assert_round_trip(&model);
    // Labels 0/1: exactly aprender's layout, no classes tensor.
    let names: Vec<&str> = tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["coefficients", "intercept"]);
    assert_eq!(tensors[0].shape, vec![3]);
    assert_eq!(tensors[1].shape, vec![1]);

    let y_signed: Vec<i32> = y.iter().map(|&v| 2 * v - 1).collect();
    model.fit(matrix(&x, 3), &y_signed).unwrap();
    let tensors = assert_round_trip(&model);
    assert_eq!(tensors[2].name, "classes");
    assert_eq!(tensors[2].dtype, DType::I32);
    assert_eq!(
        tensors[2].data.as_ref(),
        [-1i32, 1].map(i32::to_le_bytes).concat()
    );

    let (x, y) = synthetic(90, 2, &[5, 6, 8], 31);
    let mut model = LogisticRegression::new(params(false, 0.5)).unwrap();
    model.fit(matrix(&x, 2), &y).unwrap();
    let tensors = assert_round_trip(&model);
    assert_eq!(tensors[0].shape, vec![3, 2]);
    assert_eq!(tensors[1].shape, vec![3]);
    assert_eq!(tensors[2].shape, vec![3]);
}

fn binary_tensors() -> Vec<TensorView<'static>> {
    vec![
        TensorView::from_f32("coefficients", vec![2], &[1.0, -1.0]).unwrap(),
        TensorView::from_f32("intercept", vec![1], &[0.5]).unwrap(),
    ]
}

fn multiclass_tensors() -> Vec<TensorView<'static>> {
    vec![
        TensorView::from_f32(
            "coefficients",
            vec![3, 2],
            &[1.0, -1.0, 0.0, 2.0, -1.0, -1.0],
        )
        .unwrap(),
        TensorView::from_f32("intercept", vec![3], &[0.5, 0.0, -0.5]).unwrap(),
        TensorView::new(
            "classes",
            DType::I32,
            vec![3],
            [1i32, 2, 3].map(i32::to_le_bytes).concat(),
        )
        .unwrap(),
    ]
}

fn load(tensors: &[TensorView<'static>], metadata: &[(&str, &str)]) -> Result<LogisticRegression> {
    let metadata: BTreeMap<String, String> = metadata
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    LogisticRegression::from_tensors(&lookup(tensors), Some(&metadata))
}

#[test]
fn loads_binary_models_without_classes_as_zero_one() {
    let model = LogisticRegression::from_tensors(&lookup(&binary_tensors()), None).unwrap();
    assert_eq!(model.classes(), &[0, 1]);
    let probabilities = model
        .predict_proba(matrix(&[1.0, 1.0, 0.0, 3.0], 2))
        .unwrap();
    let p = 1.0 / (1.0 + (-0.5f64).exp());
    assert!((f64::from(probabilities[1]) - p).abs() < 1e-7);
    assert!((f64::from(probabilities[0]) - (1.0 - p)).abs() < 1e-7);
    assert_eq!(
        model.predict(matrix(&[1.0, 1.0, 0.0, 3.0], 2)).unwrap(),
        vec![1, 0]
    );
}

#[test]
fn malformed_models_are_invalid_model_errors_naming_the_tensor() {
    let multiclass = load(&multiclass_tensors(), &[]).unwrap();
    assert_eq!(multiclass.classes(), &[1, 2, 3]);

    let mut missing_classes = multiclass_tensors();
    missing_classes.pop();
    let e = load(&missing_classes, &[]).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    assert_eq!(e.tensor(), Some("classes"));

    let mut unsorted = multiclass_tensors();
    unsorted[2] = TensorView::new(
        "classes",
        DType::I32,
        vec![3],
        [1i32, 3, 2].map(i32::to_le_bytes).concat(),
    )
    .unwrap();
    let e = load(&unsorted, &[]).unwrap_err();
    assert_eq!(e.tensor(), Some("classes"));
    assert_eq!(e.detail(), "labels [1, 3, 2] are not strictly ascending");

    let mut float_classes = multiclass_tensors();
    float_classes[2] = TensorView::from_f32("classes", vec![3], &[1.0, 2.0, 3.0]).unwrap();
    assert_eq!(
        load(&float_classes, &[]).unwrap_err().tensor(),
        Some("classes")
    );

    let mut wrong_intercept = multiclass_tensors();
    wrong_intercept[1] = TensorView::from_f32("intercept", vec![1], &[0.5]).unwrap();
    let e = load(&wrong_intercept, &[]).unwrap_err();
    assert_eq!(e.tensor(), Some("intercept"));
    assert_eq!(e.detail(), "shape [1], expected [3]");

    let two_rows = vec![
        TensorView::from_f32("coefficients", vec![2, 2], &[1.0, -1.0, 0.0, 2.0]).unwrap(),
        TensorView::from_f32("intercept", vec![2], &[0.5, 0.0]).unwrap(),
    ];
    assert_eq!(
        load(&two_rows, &[]).unwrap_err().tensor(),
        Some("coefficients")
    );

    let mut binary_three_classes = binary_tensors();
    binary_three_classes.push(
        TensorView::new(
            "classes",
            DType::I32,
            vec![3],
            [1i32, 2, 3].map(i32::to_le_bytes).concat(),
        )
        .unwrap(),
    );
    assert_eq!(
        load(&binary_three_classes, &[]).unwrap_err().tensor(),
        Some("classes")
    );

    let mut infinite = binary_tensors();
    infinite[1] = TensorView::from_f32("intercept", vec![1], &[f32::INFINITY]).unwrap();
    assert_eq!(
        load(&infinite, &[]).unwrap_err().tensor(),
        Some("intercept")
    );

    let e = load(&binary_tensors(), &[("model_type", "linear_regression")]).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    let e = load(&binary_tensors(), &[("n_classes", "3")]).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    let e = load(&multiclass_tensors(), &[("n_features", "3")]).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    let e = load(&binary_tensors(), &[("fit_intercept", "false")]).unwrap_err();
    assert_eq!(e.tensor(), Some("intercept"));

    let e = LogisticRegression::from_tensors(&|_| None, None).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    assert_eq!(e.tensor(), Some("coefficients"));
}

/// Large batches are split over threads (`for_row_blocks`): the probabilities and labels must
/// equal those of one row at a time, the binary pair from one exponential must be within one
/// f32 ulp of two separate sigmoids, and a bad value in a late block must be reported at its
/// true row.
#[test]
fn large_batches_split_over_threads_match_row_by_row() {
    for labels in [&[3, 7][..], &[-1, 0, 5][..]] {
        let (x, y) = synthetic(400, 8, labels, 11);
        let mut model = LogisticRegression::new(params(true, 1.0)).unwrap();
        model.fit(matrix(&x, 8), &y).unwrap();
        // 80,000 rows × 8 = 640K values: enough for two blocks on two cores.
        let big: Vec<f64> = x.iter().cycle().take(80_000 * 8).copied().collect();
        let batch = model.predict_proba(matrix(&big, 8)).unwrap();
        let batch_labels = model.predict(matrix(&big, 8)).unwrap();
        let k = labels.len();
        for (i, row) in big.chunks_exact(8).enumerate().step_by(997) {
            let one = model.predict_proba(matrix(row, 8)).unwrap();
            assert_eq!(&batch[i * k..(i + 1) * k], one.as_slice(), "row {i}");
            assert_eq!(batch_labels[i], model.predict(matrix(row, 8)).unwrap()[0]);
            if k == 2 {
                let fitted = model.fitted().unwrap();
                let mut z = [0.0];
                row_scores(fitted, row, &mut z, &dot);
                let want = [sigmoid(-z[0]) as f32, sigmoid(z[0]) as f32];
                for (got, want) in one.iter().zip(want) {
                    assert!(ulps(*got, want) <= 1, "{got} vs {want}");
                }
            }
        }
        let mut bad = big.clone();
        bad[79_123 * 8 + 5] = f64::NAN;
        let err = model.predict_proba(matrix(&bad, 8)).unwrap_err();
        assert!(err.to_string().contains("row 79123, column 5"), "{err}");
        let err = model.predict(matrix(&bad, 8)).unwrap_err();
        assert!(err.to_string().contains("row 79123, column 5"), "{err}");
    }
}

fn ulps(a: f32, b: f32) -> u32 {
    (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
}

/// The vectorisable exponential against the C library's, over its whole domain.
#[test]
fn exp_non_positive_matches_libm() {
    let mut worst = 0.0f64;
    let mut x = 0.0f64;
    while x > -708.0 {
        for v in [x, x - 1e-3, x * 0.999_999_9] {
            let (got, want) = (exp_non_positive(v), v.exp());
            worst = worst.max(((got - want) / want).abs());
        }
        x -= 0.0137;
    }
    assert!(worst < 1e-15, "worst relative error {worst:e}");
    assert_eq!(exp_non_positive(0.0), 1.0);
    assert_eq!(exp_non_positive(-1e-300), 1.0);
    // Clamped at −708: tiny, positive, never NaN or a division by zero downstream.
    let floor = (-708.0f64).exp();
    for v in [-708.0, -800.0, f64::NEG_INFINITY] {
        assert!(((exp_non_positive(v) - floor) / floor).abs() < 1e-15, "{v}");
    }
}
