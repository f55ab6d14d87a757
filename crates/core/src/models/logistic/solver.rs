//! The fit: the objective, its gradient and Hessian, and Newton's method (dense Cholesky
//! steps for small problems, preconditioned conjugate gradients otherwise) with a
//! backtracking line search.

use super::{FitReport, FittedLogistic, LogisticRegressionParams};
use crate::error::{CoreError, Result};
use crate::models::linalg::{add_scaled, inner, norm, solve_spd};
use crate::models::{check_label_count, dot, MatrixRef};

/// Problems with at most this many parameters get a dense Hessian and a Cholesky solve per
/// Newton step; larger ones use Hessian-free preconditioned conjugate gradients, whose
/// memory stays linear in the parameter count.
pub(super) const DENSE_NEWTON_MAX_PARAMETERS: usize = 256;
/// Sufficient-decrease constant of the backtracking line search.
const ARMIJO: f64 = 1e-4;
const MAX_STEP_HALVINGS: usize = 60;
/// Largest number of f64 values (2 GiB) one solver iteration may hold per array.
const MAX_WORKING_SET: usize = 1 << 28;

pub(super) fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// `ln(1 + eᶻ)` without overflow or loss for large |z|.
pub(super) fn softplus(z: f64) -> f64 {
    z.max(0.0) + (-z.abs()).exp().ln_1p()
}

/// `ln Σ exp(s)`, shifted by the maximum so nothing overflows.
pub(super) fn log_sum_exp(scores: &[f64]) -> f64 {
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    max + scores.iter().map(|s| (s - max).exp()).sum::<f64>().ln()
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
    pub(super) design: Vec<f64>,
    pub(super) rows: usize,
    pub(super) width: usize,
    pub(super) n_features: usize,
    pub(super) fit_intercept: bool,
    pub(super) classes: Vec<i32>,
    /// Class index of each row (for two classes: 1 = the positive, larger label).
    pub(super) labels: Vec<usize>,
    /// 1 for two classes (sigmoid), else the number of classes (softmax).
    pub(super) outputs: usize,
    pub(super) c: f64,
    pub(super) dense_max_parameters: usize,
}

/// The objective at some θ and the model's probabilities there (`rows × outputs`).
pub(crate) struct Evaluation {
    pub(super) objective: f64,
    pub(super) probabilities: Vec<f64>,
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

    pub(super) fn parameters(&self) -> usize {
        self.outputs * self.width
    }

    pub(super) fn design_rows(&self) -> std::slice::ChunksExact<'_, f64> {
        self.design.chunks_exact(self.width)
    }

    /// Whether the multinomial intercept-sum term is part of the objective.
    pub(super) fn has_intercept_sum(&self) -> bool {
        self.outputs > 1 && self.fit_intercept
    }

    pub(super) fn intercept_sum(&self, theta: &[f64]) -> f64 {
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
    pub(super) fn residual(&self, probability: f64, label: usize, output: usize) -> f64 {
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
    pub(super) fn curvature(&self, p: &[f64], k: usize, l: usize) -> f64 {
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
    pub(super) fn hessian(&self, evaluation: &Evaluation) -> Vec<f64> {
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
    pub(super) fn hessian_times(&self, evaluation: &Evaluation, v: &[f64]) -> Vec<f64> {
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

    pub(super) fn hessian_diagonal(&self, evaluation: &Evaluation) -> Vec<f64> {
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
    pub(super) fn newton_step(
        &self,
        evaluation: &Evaluation,
        gradient: &[f64],
        forcing: f64,
    ) -> Vec<f64> {
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
    pub(super) fn conjugate_gradient(
        &self,
        evaluation: &Evaluation,
        rhs: &[f64],
        forcing: f64,
    ) -> Vec<f64> {
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
    pub(super) fn into_fitted(self, solution: &Solution) -> FittedLogistic {
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
