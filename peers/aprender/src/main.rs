//! Load a model file with aprender and print its predictions for the given rows, one line of
//! space-separated values (`{:?}` of f32: the shortest text that reads back to the same bits).
//!
//!     aprender-peer linear|logistic FILE COLS v0 v1 ...    (rows in row-major order)
//!
//! `linear`: `LinearRegression::load_safetensors` + `predict`; `logistic`:
//! `LogisticRegression::load_safetensors` + `predict_proba` (the probability of class 1).
use aprender::classification::LogisticRegression;
use aprender::linear_model::LinearRegression;
use aprender::traits::Estimator;
use aprender::Matrix;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!("usage: aprender-peer linear|logistic FILE COLS v0 v1 ...");
        return ExitCode::from(2);
    }
    let (kind, path) = (&args[1], &args[2]);
    let cols: usize = args[3].parse().expect("COLS");
    let values: Vec<f32> = args[4..].iter().map(|v| v.parse().expect("a number")).collect();
    let x = Matrix::from_vec(values.len() / cols, cols, values).expect("a whole number of rows");
    let out: Vec<f32> = match kind.as_str() {
        "linear" => match LinearRegression::load_safetensors(path) {
            Ok(m) => m.predict(&x).as_slice().to_vec(),
            Err(e) => {
                eprintln!("aprender could not load {path}: {e}");
                return ExitCode::from(1);
            }
        },
        _ => match LogisticRegression::load_safetensors(path) {
            Ok(m) => m.predict_proba(&x).as_slice().to_vec(),
            Err(e) => {
                eprintln!("aprender could not load {path}: {e}");
                return ExitCode::from(1);
            }
        },
    };
    let text: Vec<String> = out.iter().map(|v| format!("{v:?}")).collect();
    println!("{}", text.join(" "));
    ExitCode::SUCCESS
}
