//! Differential tests of the classical models against scikit-learn and `aprender`.
//!
//! * scikit-learn: `tests/data/sklearn_reference.json`, produced by
//!   `scripts/sklearn_reference.py` from the CSVs in `shared/fixtures/datasets` (read here
//!   too, so both sides see identical bits).
//! * aprender: the two SafeTensors files it wrote, in `shared/fixtures/aprender`, with
//!   `expected.json` holding what aprender itself predicts.
//!
//! `shared/` sits beside the repository (CI clones it there), three levels above this
//! crate's manifest.

use serde_json::Value;
use stcore::models::{
    AnyModel, LinearRegression, LogisticRegression, LogisticRegressionParams, MatrixRef,
};
use stcore::{DType, TensorView};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn shared_fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures")
}

/// A CSV of numbers with a header row; the target is the last column.
struct Dataset {
    x: Vec<f64>,
    y: Vec<f64>,
    rows: usize,
    cols: usize,
}

impl Dataset {
    fn load(name: &str) -> Dataset {
        let path = shared_fixtures()
            .join("datasets")
            .join(format!("{name}.csv"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let mut x = Vec::new();
        let mut y = Vec::new();
        let mut cols = 0;
        for line in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
            let values: Vec<f64> = line
                .split(',')
                .map(|v| v.trim().parse().expect("numeric CSV field"))
                .collect();
            let (target, features) = values.split_last().expect("non-empty CSV row");
            cols = features.len();
            x.extend_from_slice(features);
            y.push(*target);
        }
        Dataset {
            rows: y.len(),
            x,
            y,
            cols,
        }
    }

    fn matrix(&self) -> MatrixRef<'_> {
        MatrixRef::from_f64(&self.x, self.rows, self.cols).unwrap()
    }

    fn first_rows(&self, n: usize) -> MatrixRef<'_> {
        MatrixRef::from_f64(&self.x[..n * self.cols], n, self.cols).unwrap()
    }

    fn labels(&self) -> Vec<i32> {
        self.y.iter().map(|&v| v as i32).collect()
    }
}

fn reference() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/sklearn_reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn numbers(value: &Value) -> Vec<f64> {
    match value {
        Value::Array(items) => items.iter().flat_map(numbers).collect(),
        other => vec![other.as_f64().expect("a number")],
    }
}

/// Largest `|got − want| / |want|` (per element).
fn max_relative_error(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / w.abs())
        .fold(0.0, f64::max)
}

/// Largest `|got − want|`, divided by `scale`.
fn max_scaled_error(got: &[f64], want: &[f64], scale: f64) -> f64 {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / scale)
        .fold(0.0, f64::max)
}

fn widen(values: &[f32]) -> Vec<f64> {
    values.iter().map(|&v| f64::from(v)).collect()
}

fn case<'a>(cases: &'a Value, name: &str) -> &'a Value {
    cases
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no reference case {name}"))
}

#[test]
fn linear_regression_matches_scikit_learn_on_diabetes() {
    let reference = reference();
    let first_rows = reference["first_rows"].as_u64().unwrap() as usize;
    let rescaled_column = reference["rescaled_column"].as_u64().unwrap() as usize;
    let rescale = reference["rescale"].as_f64().unwrap();
    let diabetes = Dataset::load("diabetes");
    let mut rescaled = Dataset::load("diabetes");
    rescaled
        .x
        .iter_mut()
        .skip(rescaled_column)
        .step_by(rescaled.cols)
        .for_each(|v| *v *= rescale);

    for (name, data, fit_intercept) in [
        ("diabetes", &diabetes, true),
        ("diabetes_no_intercept", &diabetes, false),
        ("diabetes_rescaled_column", &rescaled, true),
    ] {
        let expected = case(&reference["linear_regression"], name);
        let mut model = LinearRegression::new(fit_intercept);
        model.fit(data.matrix(), &data.y).unwrap();

        let coefficient_error =
            max_relative_error(&widen(model.coefficients()), &numbers(&expected["coef"]));
        let intercept_error = if fit_intercept {
            max_relative_error(
                &[f64::from(model.intercept())],
                &[expected["intercept"].as_f64().unwrap()],
            )
        } else {
            assert_eq!(model.intercept(), 0.0);
            0.0
        };
        let predictions = widen(&model.predict(data.first_rows(first_rows)).unwrap());
        let prediction_error =
            max_relative_error(&predictions, &numbers(&expected["predict_first_rows"]));
        let score = model.score(data.matrix(), &data.y).unwrap();
        let score_error = (score - expected["score"].as_f64().unwrap()).abs();
        println!(
            "{name}: coef rel {coefficient_error:.2e}, intercept rel {intercept_error:.2e}, \
             predict rel {prediction_error:.2e}, score abs {score_error:.2e}"
        );
        assert!(
            coefficient_error < 1e-4,
            "{name}: coefficients off by {coefficient_error}"
        );
        assert!(
            intercept_error < 1e-4,
            "{name}: intercept off by {intercept_error}"
        );
        assert!(
            prediction_error < 1e-4,
            "{name}: predictions off by {prediction_error}"
        );
        assert!(score_error < 1e-6, "{name}: score off by {score_error}");
        assert_eq!(
            model.rank(),
            Some(expected["rank"].as_u64().unwrap() as usize)
        );
    }

    // The rescaled fit is the plain fit in other units: its coefficient is 1e6 smaller.
    let mut plain = LinearRegression::new(true);
    plain.fit(diabetes.matrix(), &diabetes.y).unwrap();
    let mut scaled = LinearRegression::new(true);
    scaled.fit(rescaled.matrix(), &rescaled.y).unwrap();
    let mut unscaled: Vec<f64> = widen(scaled.coefficients());
    unscaled[rescaled_column] *= rescale;
    assert!(max_relative_error(&unscaled, &widen(plain.coefficients())) < 1e-6);
}

/// Tolerances per reference solver: the brief's against lbfgs (which stops short of the
/// optimum on this raw data), tight ones against newton-cholesky (at the optimum to 1e-11).
const SOLVERS: [(&str, f64, f64); 2] = [("lbfgs", 1e-3, 1e-4), ("newton_cholesky", 1e-5, 1e-6)];

fn check_logistic_case(name: &str, dataset: &str, c: f64) {
    let reference = reference();
    let first_rows = reference["first_rows"].as_u64().unwrap() as usize;
    let expected_case = case(&reference["logistic_regression"], name);
    assert_eq!(expected_case["dataset"], dataset);
    let data = Dataset::load(dataset);
    let y = data.labels();
    let mut model = LogisticRegression::new(LogisticRegressionParams {
        c,
        ..LogisticRegressionParams::default()
    })
    .unwrap();
    model.fit(data.matrix(), &y).unwrap();
    assert_eq!(model.converged(), Some(true), "{name}");

    for (solver, coefficient_tolerance, probability_tolerance) in SOLVERS {
        let expected = &expected_case[solver];
        assert_eq!(expected["params"]["C"].as_f64(), Some(c));
        let classes: Vec<i32> = numbers(&expected["classes"])
            .iter()
            .map(|&v| v as i32)
            .collect();
        assert_eq!(model.classes(), classes.as_slice());

        let want_coefficients = numbers(&expected["coef"]);
        let want_intercept = numbers(&expected["intercept"]);
        let coefficient_scale = want_coefficients.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let intercept_scale = want_intercept.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let coefficient_error = max_scaled_error(
            &widen(model.coefficients()),
            &want_coefficients,
            coefficient_scale,
        );
        let intercept_error =
            max_scaled_error(&widen(model.intercept()), &want_intercept, intercept_scale);

        let probabilities = widen(&model.predict_proba(data.first_rows(first_rows)).unwrap());
        let probability_error = max_scaled_error(
            &probabilities,
            &numbers(&expected["predict_proba_first_rows"]),
            1.0,
        );
        let labels: Vec<f64> = model
            .predict(data.first_rows(first_rows))
            .unwrap()
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        assert_eq!(labels, numbers(&expected["predict_first_rows"]), "{name}");
        let score = model.score(data.matrix(), &y).unwrap();
        println!(
            "{name} vs {solver}: coef {coefficient_error:.2e} (of max |coef|), intercept \
             {intercept_error:.2e} (of max |intercept|), proba abs {probability_error:.2e}, \
             score {score} vs {}, {} Newton iterations",
            expected["score"],
            model.n_iter().unwrap_or_default()
        );
        assert!(
            coefficient_error < coefficient_tolerance,
            "{name} vs {solver}: coefficients off by {coefficient_error}"
        );
        assert!(
            intercept_error < coefficient_tolerance,
            "{name} vs {solver}: intercept off by {intercept_error}"
        );
        assert!(
            probability_error < probability_tolerance,
            "{name} vs {solver}: probabilities off by {probability_error}"
        );
        let want_score = expected["score"].as_f64().unwrap();
        assert!(
            (score - want_score).abs() < 1e-12,
            "{name}: score {score} vs {want_score}"
        );
    }
}

#[test]
fn binary_logistic_regression_matches_scikit_learn_on_breast_cancer() {
    check_logistic_case("breast_cancer", "breast_cancer", 1.0);
    check_logistic_case("breast_cancer_c0.1", "breast_cancer", 0.1);
}

#[test]
fn multinomial_logistic_regression_matches_scikit_learn_on_wine() {
    check_logistic_case("wine", "wine", 1.0);
}

#[test]
fn fitted_models_round_trip_bit_exactly() {
    let data = Dataset::load("wine");
    let mut logistic = LogisticRegression::default();
    logistic.fit(data.matrix(), &data.labels()).unwrap();
    let mut linear = LinearRegression::new(true);
    linear.fit(data.matrix(), &data.y).unwrap();
    for model in [AnyModel::from(logistic), AnyModel::from(linear)] {
        let (tensors, metadata) = model.to_tensors().unwrap();
        let get = |name: &str| {
            tensors.iter().find(|t| t.name == name).map(|t| TensorView {
                name: t.name.clone(),
                dtype: t.dtype,
                shape: t.shape.clone(),
                data: Cow::Borrowed(&t.data[..]),
            })
        };
        let loaded =
            AnyModel::from_config_and_tensors(&model.config_json(), &get, Some(&metadata)).unwrap();
        assert_eq!(loaded.to_tensors().unwrap(), (tensors.clone(), metadata));
        assert_eq!(
            loaded.predict(data.matrix()).unwrap(),
            model.predict(data.matrix()).unwrap()
        );
    }
}

/// A SafeTensors file read the simple way: 8-byte little-endian header length, the JSON
/// header, then the data section. Enough for aprender's two small fixtures.
struct SafeTensorsFile {
    header: serde_json::Map<String, Value>,
    data: Vec<u8>,
}

impl SafeTensorsFile {
    fn read(name: &str) -> SafeTensorsFile {
        let bytes = std::fs::read(shared_fixtures().join("aprender").join(name)).unwrap();
        let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header: Value = serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
        SafeTensorsFile {
            header: header.as_object().unwrap().clone(),
            data: bytes[8 + header_len..].to_vec(),
        }
    }

    fn metadata(&self) -> Option<BTreeMap<String, String>> {
        self.header.get("__metadata__").map(|m| {
            m.as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect()
        })
    }

    fn view(&self, name: &str) -> Option<TensorView<'_>> {
        let entry = self.header.get(name)?;
        let dtype = match entry["dtype"].as_str()? {
            "F32" => DType::F32,
            "I32" => DType::I32,
            other => panic!("unexpected dtype {other}"),
        };
        let shape: Vec<usize> = numbers(&entry["shape"])
            .iter()
            .map(|&d| d as usize)
            .collect();
        let offsets = numbers(&entry["data_offsets"]);
        let (start, end) = (offsets[0] as usize, offsets[1] as usize);
        TensorView::new(name, dtype, shape, &self.data[start..end]).ok()
    }
}

fn close(got: &[f64], want: &[f64]) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| (g - w).abs() <= 1e-6 * w.abs().max(1.0))
}

#[test]
fn aprender_files_load_and_predict_as_aprender_does() {
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(shared_fixtures().join("aprender/expected.json")).unwrap(),
    )
    .unwrap();
    let rows: Vec<Vec<f64>> = expected["x"]
        .as_array()
        .unwrap()
        .iter()
        .map(numbers)
        .collect();
    let (x, n_rows, n_cols) = stcore::models::matrix_from_rows(&rows).unwrap();
    let x = MatrixRef::from_f64(&x, n_rows, n_cols).unwrap();

    let file = SafeTensorsFile::read("linreg.safetensors");
    assert!(file.metadata().is_none());
    let linear =
        LinearRegression::from_tensors(&|n| file.view(n), file.metadata().as_ref()).unwrap();
    let want = &expected["linreg.safetensors"];
    // expected.json prints the f32 values in their shortest form: compare as f32.
    let as_f32 = |v: &Value| -> Vec<f32> { numbers(v).iter().map(|&x| x as f32).collect() };
    assert_eq!(
        linear.coefficients(),
        as_f32(&want["coefficients"]).as_slice()
    );
    assert_eq!(
        linear.intercept(),
        want["intercept"].as_f64().unwrap() as f32
    );
    let predictions = widen(&linear.predict(x).unwrap());
    assert!(
        close(&predictions, &numbers(&want["predict"])),
        "{predictions:?}"
    );
    // Written back, it is aprender's layout byte for byte.
    let (tensors, _) = linear.to_tensors().unwrap();
    for tensor in &tensors {
        assert_eq!(Some(tensor), file.view(&tensor.name).as_ref());
    }

    let file = SafeTensorsFile::read("logreg.safetensors");
    let logistic =
        LogisticRegression::from_tensors(&|n| file.view(n), file.metadata().as_ref()).unwrap();
    let want = &expected["logreg.safetensors"];
    assert_eq!(logistic.classes(), &[0, 1]);
    let probabilities = logistic.predict_proba(x).unwrap();
    let positive: Vec<f64> = probabilities.chunks(2).map(|p| f64::from(p[1])).collect();
    assert!(
        close(&positive, &numbers(&want["predict_proba"])),
        "{positive:?}"
    );
    let labels: Vec<f64> = logistic
        .predict(x)
        .unwrap()
        .iter()
        .map(|&l| f64::from(l))
        .collect();
    assert_eq!(labels, numbers(&want["predict"]));
    let (tensors, _) = logistic.to_tensors().unwrap();
    assert_eq!(tensors.len(), 2, "a 0/1 model adds no classes tensor");
    for tensor in &tensors {
        assert_eq!(Some(tensor), file.view(&tensor.name).as_ref());
    }
}
