"""Produce crates/core/tests/data/sklearn_reference.json, the scikit-learn oracle for
crates/core/tests/models_sklearn.rs.

How it was run (from the repository root, with shared/ checked out beside it):

    python -m venv .venv && .venv/bin/pip install scikit-learn numpy
    .venv/bin/python scripts/sklearn_reference.py

Versions used for the committed JSON: scikit-learn 1.9.1, numpy 2.4.6, Python 3.11
(also recorded in the JSON itself under "versions").

Data: the CSVs in ../shared/fixtures/datasets (header row, target in the last column):
diabetes (regression, 442 x 10), breast_cancer (binary, 569 x 30), wine (3 classes,
178 x 13). The Rust test reads the same files, so both sides see identical bits.

Cases:
* LinearRegression on diabetes, with and without intercept, and a variant with column
  RESCALED_COLUMN multiplied by RESCALE. scikit-learn >= 1.9 passes `tol` (default 1e-6)
  to scipy.linalg.lstsq as `cond`, which truncates the rescaled problem (its singular
  values span ~1e-8) to rank 4 and returns a far-from-optimal answer; the rescaled case
  therefore uses tol=1e-15, i.e. the true least-squares solution, which our QR solver
  returns.
* LogisticRegression (lbfgs, C=1.0 and one C=0.1 case, max_iter=100000, tol=1e-12) on
  breast_cancer (binary) and wine (multinomial), on the raw, unscaled features. lbfgs
  stops on its ftol before reaching the optimum on this badly scaled data, so each case
  also stores the "newton-cholesky" solution and the max-abs gradient of the objective
  0.5*||W||^2 + C*sum(log-loss) at both, so a reader can see which one is closer to the
  true optimum.

For every case: coef_, intercept_, predict / predict_proba of the first 10 rows, and
score() on the whole data set.
"""

import json
import pathlib
import platform

import numpy as np
import sklearn
from sklearn.linear_model import LinearRegression, LogisticRegression

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATASETS = ROOT.parent / "shared" / "fixtures" / "datasets"
OUT = ROOT / "crates" / "core" / "tests" / "data" / "sklearn_reference.json"
FIRST_ROWS = 10
RESCALED_COLUMN = 2
RESCALE = 1e6


def load(name):
    data = np.loadtxt(DATASETS / f"{name}.csv", delimiter=",", skiprows=1)
    return data[:, :-1], data[:, -1]


def linear_case(name, x, y, **params):
    model = LinearRegression(**params).fit(x, y)
    return {
        "name": name,
        "dataset": "diabetes",
        "params": params,
        "coef": model.coef_.tolist(),
        "intercept": float(model.intercept_),
        "rank": int(model.rank_),
        "predict_first_rows": model.predict(x[:FIRST_ROWS]).tolist(),
        "score": float(model.score(x, y)),
    }


def logistic_gradient_max_abs(coef, intercept, x, y, classes, c, fit_intercept):
    """Max-abs gradient of 0.5*||W||^2 + C*sum(log-loss) at (coef, intercept)."""
    coef = np.atleast_2d(coef)
    scores = x @ coef.T + intercept
    if len(classes) == 2:
        positive = (y == classes[1]).astype(float)
        probability = 1.0 / (1.0 + np.exp(-scores[:, 0]))
        residual = (probability - positive)[:, None]
    else:
        scores -= scores.max(axis=1, keepdims=True)
        probability = np.exp(scores)
        probability /= probability.sum(axis=1, keepdims=True)
        residual = probability - (y[:, None] == classes[None, :]).astype(float)
    grad_coef = coef + c * residual.T @ x
    parts = [np.abs(grad_coef).max()]
    if fit_intercept:
        parts.append(np.abs(c * residual.sum(axis=0)).max())
    return float(max(parts))


def logistic_case(name, dataset, x, y, c):
    y = y.astype(int)
    result = {"name": name, "dataset": dataset}
    for solver in ["lbfgs", "newton-cholesky"]:
        params = {"C": c, "max_iter": 100000, "tol": 1e-12, "solver": solver}
        model = LogisticRegression(**params).fit(x, y)
        coef = model.coef_[0] if len(model.classes_) == 2 else model.coef_
        entry = {
            "params": params,
            "n_iter": int(model.n_iter_.max()),
            "classes": model.classes_.tolist(),
            "coef": coef.tolist(),
            "intercept": model.intercept_.tolist(),
            "predict_first_rows": model.predict(x[:FIRST_ROWS]).tolist(),
            "predict_proba_first_rows": model.predict_proba(x[:FIRST_ROWS]).tolist(),
            "score": float(model.score(x, y)),
            "gradient_max_abs": logistic_gradient_max_abs(
                model.coef_, model.intercept_, x, y, model.classes_, c, True
            ),
        }
        result[solver.replace("-", "_")] = entry
    return result


def main():
    x, y = load("diabetes")
    rescaled = x.copy()
    rescaled[:, RESCALED_COLUMN] *= RESCALE
    linear = [
        linear_case("diabetes", x, y),
        linear_case("diabetes_no_intercept", x, y, fit_intercept=False),
        linear_case("diabetes_rescaled_column", rescaled, y, tol=1e-15),
    ]
    x_bc, y_bc = load("breast_cancer")
    x_wine, y_wine = load("wine")
    logistic = [
        logistic_case("breast_cancer", "breast_cancer", x_bc, y_bc, 1.0),
        logistic_case("breast_cancer_c0.1", "breast_cancer", x_bc, y_bc, 0.1),
        logistic_case("wine", "wine", x_wine, y_wine, 1.0),
    ]
    document = {
        "generator": "scripts/sklearn_reference.py",
        "versions": {
            "scikit-learn": sklearn.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
        "first_rows": FIRST_ROWS,
        "rescaled_column": RESCALED_COLUMN,
        "rescale": RESCALE,
        "linear_regression": linear,
        "logistic_regression": logistic,
    }
    OUT.write_text(json.dumps(document, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
