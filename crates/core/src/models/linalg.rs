//! The little dense linear algebra the models need, in f64: Householder QR (with and
//! without column pivoting), the minimum-norm least-squares solve built on it, and a
//! Jacobi-scaled Cholesky solve for Newton steps.
//!
//! Matrices are column-major `Vec<f64>` (`a[row + col * rows]`): Householder reflections
//! work down columns, so every inner loop runs over contiguous memory.

/// Householder reflectors of a QR factorisation, kept in the factorised matrix: column `k`
/// holds `v_k` in rows `k..rows` (its own scale), `beta[k] = 2 / (v_kᵀ v_k)` (0 for an
/// identity reflection), and `r_diag[k]` the diagonal of R (the strict upper triangle of R
/// is in the matrix above the diagonal).
struct Householder {
    rows: usize,
    a: Vec<f64>,
    beta: Vec<f64>,
    r_diag: Vec<f64>,
}

impl Householder {
    /// Factorise the column-major `rows × cols` matrix `a` (rows ≥ cols is not required;
    /// `min(rows, cols)` reflectors are built). With `pivot`, the remaining column of
    /// largest norm is moved forward at every step, so `|R[k][k]|` is non-increasing and
    /// a rank can be read off the diagonal; `permutation[k]` is the original index of
    /// factorised column `k`.
    fn factorise(mut a: Vec<f64>, rows: usize, cols: usize, pivot: bool) -> (Self, Vec<usize>) {
        let steps = rows.min(cols);
        let mut permutation: Vec<usize> = (0..cols).collect();
        let mut beta = vec![0.0; steps];
        let mut r_diag = vec![0.0; steps];
        for k in 0..steps {
            if pivot {
                // Norms are recomputed rather than downdated: downdating cancels badly
                // exactly when columns are nearly dependent, which is when pivots matter.
                let trailing_norm = |col: usize| squared_norm(&a[k + col * rows..(col + 1) * rows]);
                let mut best = k;
                let mut best_norm = trailing_norm(k);
                for col in k + 1..cols {
                    let norm = trailing_norm(col);
                    if norm > best_norm {
                        best = col;
                        best_norm = norm;
                    }
                }
                if best != k {
                    swap_columns(&mut a, rows, k, best);
                    permutation.swap(k, best);
                }
            }
            let (head, tail) = a.split_at_mut((k + 1) * rows);
            let v = &mut head[k * rows + k..];
            let norm = squared_norm(v).sqrt();
            if norm == 0.0 {
                continue;
            }
            // alpha takes the sign opposite to v[0] so that v[0] - alpha does not cancel.
            let alpha = if v[0] > 0.0 { -norm } else { norm };
            v[0] -= alpha;
            let v_norm_sq = squared_norm(v);
            if v_norm_sq == 0.0 {
                r_diag[k] = alpha;
                continue;
            }
            let b = 2.0 / v_norm_sq;
            beta[k] = b;
            r_diag[k] = alpha;
            for col in tail.chunks_exact_mut(rows) {
                reflect(v, b, &mut col[k..]);
            }
        }
        (
            Householder {
                rows,
                a,
                beta,
                r_diag,
            },
            permutation,
        )
    }

    fn steps(&self) -> usize {
        self.beta.len()
    }

    fn reflector(&self, k: usize) -> &[f64] {
        &self.a[k * self.rows + k..(k + 1) * self.rows]
    }

    /// `R[i][j]` for `i < j` (strict upper triangle) or `i == j`.
    fn r(&self, i: usize, j: usize) -> f64 {
        if i == j {
            self.r_diag[i]
        } else {
            self.a[i + j * self.rows]
        }
    }

    /// `b ← Qᵀ b` for `b` of length `rows`.
    fn apply_qt(&self, b: &mut [f64]) {
        for k in 0..self.steps() {
            reflect(self.reflector(k), self.beta[k], &mut b[k..]);
        }
    }

    /// `b ← Q b` for `b` of length `rows`.
    fn apply_q(&self, b: &mut [f64]) {
        for k in (0..self.steps()).rev() {
            reflect(self.reflector(k), self.beta[k], &mut b[k..]);
        }
    }
}

/// `x ← (I - beta v vᵀ) x`.
#[inline]
fn reflect(v: &[f64], beta: f64, x: &mut [f64]) {
    if beta == 0.0 {
        return;
    }
    let scale = beta * inner(v, x);
    for (xi, vi) in x.iter_mut().zip(v) {
        *xi -= scale * vi;
    }
}

/// `Σ aᵢ·bᵢ`, in order.
pub(crate) fn inner(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `Σ vᵢ²`.
fn squared_norm(values: &[f64]) -> f64 {
    inner(values, values)
}

/// The Euclidean norm.
pub(crate) fn norm(a: &[f64]) -> f64 {
    inner(a, a).sqrt()
}

/// `y += alpha · x`.
#[inline]
pub(crate) fn add_scaled(y: &mut [f64], alpha: f64, x: &[f64]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += alpha * xi;
    }
}

fn swap_columns(a: &mut [f64], rows: usize, i: usize, j: usize) {
    let (low, high) = (i.min(j), i.max(j));
    let (left, right) = a.split_at_mut(high * rows);
    left[low * rows..(low + 1) * rows].swap_with_slice(&mut right[..rows]);
}

/// The solution of a least-squares problem and the numerical rank it was solved with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LeastSquares {
    pub solution: Vec<f64>,
    pub rank: usize,
}

/// Minimum-norm least squares: the `β` of smallest ‖β‖ among those minimising
/// ‖A β − b‖, for the column-major `rows × cols` matrix `a`.
///
/// Method (a complete orthogonal decomposition, no SVD): Householder QR with column
/// pivoting `A P = Q R`; the numerical rank `r` is the number of diagonal entries with
/// `|R[k][k]| > rank_tolerance`; the first `r` rows of R, `W = [R11 R12]`, are then
/// factorised from the right by a second QR, `Wᵀ = Z T`, so `W = Tᵀ Zᵀ` and the minimum-norm
/// solution of `W z = (Qᵀ b)[..r]` is `z = Z [T⁻ᵀ (Qᵀ b)[..r]; 0]`; finally `β = P z`.
/// With full column rank this is plain back substitution on R.
pub(crate) fn min_norm_least_squares(
    a: Vec<f64>,
    rows: usize,
    cols: usize,
    b: &[f64],
    rank_tolerance: f64,
) -> LeastSquares {
    let (qr, permutation) = Householder::factorise(a, rows, cols, true);
    let mut qtb = b.to_vec();
    qr.apply_qt(&mut qtb);
    let rank = qr
        .r_diag
        .iter()
        .take_while(|d| d.abs() > rank_tolerance)
        .count();
    let mut z = vec![0.0; cols];
    if rank == cols {
        // Full column rank: back substitution R z = (Qᵀ b)[..cols].
        for i in (0..cols).rev() {
            let mut sum = qtb[i];
            for (j, zj) in z.iter().enumerate().skip(i + 1) {
                sum -= qr.r(i, j) * zj;
            }
            z[i] = sum / qr.r_diag[i];
        }
    } else if rank > 0 {
        // Wᵀ (cols × rank), column-major: column i of Wᵀ is row i of R.
        let mut w_transposed = vec![0.0; cols * rank];
        for i in 0..rank {
            for j in i..cols {
                w_transposed[j + i * cols] = qr.r(i, j);
            }
        }
        let (lq, _) = Householder::factorise(w_transposed, cols, rank, false);
        // Forward substitution Tᵀ u = (Qᵀ b)[..rank], T upper triangular.
        let mut u = vec![0.0; cols];
        for i in 0..rank {
            let mut sum = qtb[i];
            for (j, uj) in u.iter().enumerate().take(i) {
                sum -= lq.r(j, i) * uj;
            }
            // T is non-singular in exact arithmetic (W has full row rank); the guard
            // only keeps a pathological rounding from producing an infinity.
            u[i] = if lq.r_diag[i] == 0.0 {
                0.0
            } else {
                sum / lq.r_diag[i]
            };
        }
        lq.apply_q(&mut u);
        z = u;
    }
    let mut solution = vec![0.0; cols];
    for (k, &original) in permutation.iter().enumerate() {
        solution[original] = z[k];
    }
    LeastSquares { solution, rank }
}

/// Solve `H x = g` for the symmetric positive definite `dim × dim` matrix `h` (full,
/// row-major or column-major alike). The system is first scaled to unit diagonal
/// (Jacobi), which makes the Cholesky factorisation insensitive to the wildly different
/// feature scales of raw data. `None` if `h` is not numerically positive definite.
pub(crate) fn solve_spd(h: &[f64], dim: usize, g: &[f64]) -> Option<Vec<f64>> {
    let mut scale = Vec::with_capacity(dim);
    for i in 0..dim {
        let d = h[i * dim + i];
        if !(d > 0.0 && d.is_finite()) {
            return None;
        }
        scale.push(1.0 / d.sqrt());
    }
    // Lower-triangular factor L (row-major) of the scaled matrix S H S = L Lᵀ.
    let mut l = vec![0.0; dim * dim];
    for i in 0..dim {
        for j in 0..=i {
            let mut sum = h[i * dim + j] * scale[i] * scale[j];
            let (row_i, row_j) = (&l[i * dim..i * dim + j], &l[j * dim..j * dim + j]);
            sum -= row_i.iter().zip(row_j).map(|(a, b)| a * b).sum::<f64>();
            if i == j {
                if !(sum > 0.0 && sum.is_finite()) {
                    return None;
                }
                l[i * dim + i] = sum.sqrt();
            } else {
                l[i * dim + j] = sum / l[j * dim + j];
            }
        }
    }
    // Forward then backward substitution on the scaled right-hand side S g.
    let mut y: Vec<f64> = g.iter().zip(&scale).map(|(gi, si)| gi * si).collect();
    for i in 0..dim {
        let sum: f64 = (0..i).map(|j| l[i * dim + j] * y[j]).sum();
        y[i] = (y[i] - sum) / l[i * dim + i];
    }
    for i in (0..dim).rev() {
        let sum: f64 = (i + 1..dim).map(|j| l[j * dim + i] * y[j]).sum();
        y[i] = (y[i] - sum) / l[i * dim + i];
    }
    Some(y.iter().zip(&scale).map(|(yi, si)| yi * si).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column_major(rows: &[&[f64]]) -> (Vec<f64>, usize, usize) {
        let (m, n) = (rows.len(), rows[0].len());
        let mut a = vec![0.0; m * n];
        for (i, row) in rows.iter().enumerate() {
            for (j, v) in row.iter().enumerate() {
                a[i + j * m] = *v;
            }
        }
        (a, m, n)
    }

    #[test]
    fn full_rank_least_squares_matches_the_exact_solution() {
        // y = 1·a − 2·b + 3·c exactly.
        let rows: [&[f64]; 5] = [
            &[1.0, 0.0, 2.0],
            &[0.0, 1.0, 1.0],
            &[3.0, 1.0, 0.0],
            &[1.0, 4.0, 1.0],
            &[2.0, 2.0, 5.0],
        ];
        let y: Vec<f64> = rows
            .iter()
            .map(|r| r[0] - 2.0 * r[1] + 3.0 * r[2])
            .collect();
        let (a, m, n) = column_major(&rows);
        let fit = min_norm_least_squares(a, m, n, &y, 1e-12);
        assert_eq!(fit.rank, 3);
        for (got, want) in fit.solution.iter().zip([1.0, -2.0, 3.0]) {
            assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        }
    }

    #[test]
    fn underdetermined_system_gets_the_minimum_norm_solution() {
        // One equation a + 2b = 5: minimum-norm solution is (1, 2).
        let (a, m, n) = column_major(&[&[1.0, 2.0]]);
        let fit = min_norm_least_squares(a, m, n, &[5.0], 1e-12);
        assert_eq!(fit.rank, 1);
        assert!((fit.solution[0] - 1.0).abs() < 1e-12);
        assert!((fit.solution[1] - 2.0).abs() < 1e-12);
    }

    #[test]
    fn zero_matrix_has_rank_zero_and_zero_solution() {
        let fit = min_norm_least_squares(vec![0.0; 6], 3, 2, &[1.0, 2.0, 3.0], 1e-12);
        assert_eq!(fit.rank, 0);
        assert_eq!(fit.solution, vec![0.0, 0.0]);
    }

    #[test]
    fn spd_solve_handles_badly_scaled_systems() {
        // diag(1e8, 1e-4) with a coupling term; exact solution of H x = g checked by residual.
        let h = [1e8, 10.0, 10.0, 1e-4 + 2e-6];
        let g = [3.0, -1.0];
        let x = solve_spd(&h, 2, &g).expect("positive definite");
        let residual = [
            h[0] * x[0] + h[1] * x[1] - g[0],
            h[2] * x[0] + h[3] * x[1] - g[1],
        ];
        assert!(
            residual[0].abs() < 1e-8 && residual[1].abs() < 1e-8,
            "{residual:?}"
        );
        assert!(solve_spd(&[1.0, 2.0, 2.0, 1.0], 2, &g).is_none());
        assert!(solve_spd(&[0.0, 0.0, 0.0, 1.0], 2, &g).is_none());
    }
}
