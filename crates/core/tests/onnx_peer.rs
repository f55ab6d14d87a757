//! The exported ONNX models against the official checker (full_check) and ONNX Runtime,
//! through `scripts/check_onnx.py`. Ignored by default: they need the project's Python
//! environment. Run with `cargo test -p safetensors-node-core --test onnx_peer -- --ignored`.

use stcore::format::onnx::{linear_regression_model, logistic_regression_model};
use std::path::PathBuf;
use std::process::Command;

fn repo_root() -> PathBuf {
    std::env::var_os("STCORE_REPO_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

fn python() -> PathBuf {
    std::env::var_os("STCORE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv/bin/python"))
}

/// Write the model, check and run it on `rows`; returns the script's JSON.
fn check_and_run(model: &[u8], rows: &[Vec<f32>]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.onnx");
    std::fs::write(&path, model).unwrap();
    let out = Command::new(python())
        .arg(repo_root().join("scripts/check_onnx.py"))
        .arg(&path)
        .arg("--input")
        .arg(serde_json::to_string(rows).unwrap())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}{}", String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "{json}");
    assert_eq!(json["checker"], "ok");
    assert_eq!(json["ir_version"], 8);
    assert_eq!(json["opsets"][""], 17);
    json
}

fn rows() -> Vec<Vec<f32>> {
    vec![
        vec![0.5, -1.0, 2.0],
        vec![0.0, 0.0, 0.0],
        vec![-3.0, 1.5, 0.25],
        vec![10.0, -7.0, 1.0],
        vec![1e-3, 2e3, -0.5],
    ]
}

fn floats(v: &serde_json::Value) -> Vec<Vec<f64>> {
    serde_json::from_value(v.clone()).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

#[test]
#[ignore = "needs the Python environment with onnx and onnxruntime"]
fn linear_regression_passes_checker_and_onnxruntime() {
    let coef = [0.5f32, -2.0, 1.25];
    let json = check_and_run(&linear_regression_model(&coef, 0.75).unwrap(), &rows());
    assert_eq!(json["inputs"][0]["shape"], serde_json::json!(["N", 3]));
    assert_eq!(json["outputs"][0]["shape"], serde_json::json!(["N", 1]));
    let y = floats(&json["results"]["variable"]);
    for (row, out) in rows().iter().zip(&y) {
        let want: f64 = row
            .iter()
            .zip(&coef)
            .map(|(a, b)| *a as f64 * *b as f64)
            .sum::<f64>()
            + 0.75;
        assert!(close(out[0], want), "{} vs {want}", out[0]);
    }
}

#[test]
#[ignore = "needs the Python environment with onnx and onnxruntime"]
fn logistic_regressions_pass_checker_and_onnxruntime() {
    // Binary, with a row at z = 0 exactly (0.5 · 0.5 - 0.25).
    let coef = [0.5f32, -2.0, 1.25];
    let mut data = rows();
    data.push(vec![0.5, 0.0, 0.0]);
    let json = check_and_run(
        &logistic_regression_model(&coef, &[-0.25], 2, 3, &[3, 7]).unwrap(),
        &data,
    );
    assert_eq!(json["outputs"][0]["type"], "INT64");
    assert_eq!(json["outputs"][0]["shape"], serde_json::json!(["N"]));
    let p = floats(&json["results"]["probabilities"]);
    let labels: Vec<i64> = serde_json::from_value(json["results"]["label"].clone()).unwrap();
    for (r, row) in data.iter().enumerate() {
        let z: f64 = row
            .iter()
            .zip(&coef)
            .map(|(a, b)| *a as f64 * *b as f64)
            .sum::<f64>()
            - 0.25;
        let sig = 1.0 / (1.0 + (-z).exp());
        assert!(
            close(p[r][1], sig) && close(p[r][0], 1.0 - sig),
            "row {r}: {:?} vs {sig}",
            p[r]
        );
        assert_eq!(labels[r], if z > 0.0 { 7 } else { 3 }, "row {r}");
    }

    // Multiclass, coef_ layout [classes, features].
    let coef = [0.5f32, -2.0, 1.25, -1.0, 0.0, 0.5, 0.25, 1.0, -0.75];
    let intercepts = [0.1f32, -0.2, 0.3];
    let classes = [-1, 0, 5];
    let json = check_and_run(
        &logistic_regression_model(&coef, &intercepts, 3, 3, &classes).unwrap(),
        &rows(),
    );
    let p = floats(&json["results"]["probabilities"]);
    let labels: Vec<i64> = serde_json::from_value(json["results"]["label"].clone()).unwrap();
    for (r, row) in rows().iter().enumerate() {
        let logits: Vec<f64> = (0..3)
            .map(|c| {
                (0..3)
                    .map(|f| row[f] as f64 * coef[c * 3 + f] as f64)
                    .sum::<f64>()
                    + intercepts[c] as f64
            })
            .collect();
        let max = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
        let s: f64 = e.iter().sum();
        for c in 0..3 {
            assert!(
                close(p[r][c], e[c] / s),
                "row {r} class {c}: {} vs {}",
                p[r][c],
                e[c] / s
            );
        }
        let best = (0..3).fold(0, |b, c| if logits[c] > logits[b] { c } else { b });
        assert_eq!(labels[r], classes[best] as i64);
    }
}
