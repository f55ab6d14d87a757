//! Prediction kernels: a row's scores, probabilities (tiled so that the exponentials
//! vectorise) and labels, each with an AVX2 copy.

use super::FittedLogistic;
use crate::error::Result;
use crate::models::{avx2_twin, non_finite_row_error, Feature};

/// Linear scores of one row, one per output, into `scores`.
#[inline(always)]
pub(super) fn row_scores<T: Feature>(
    fitted: &FittedLogistic,
    row: &[T],
    scores: &mut [f64],
    dot: &impl Fn(&[T], &[f64]) -> f64,
) {
    let weights = fitted.wide_coefficients.chunks_exact(fitted.n_features);
    for ((score, w), b) in scores.iter_mut().zip(weights).zip(&fitted.wide_intercept) {
        *score = b + dot(row, w);
    }
}

avx2_twin!(
    pub(super) probabilities_of_rows_best,
    probabilities_of_rows_avx2,
    probabilities_of_rows,
    (fitted: &FittedLogistic, values: &[T], first_row: usize, out: &mut [f32]),
    Result<()>
);
avx2_twin!(
    pub(super) labels_of_rows_best,
    labels_of_rows_avx2,
    labels_of_rows,
    (fitted: &FittedLogistic, values: &[T], first_row: usize, out: &mut [i32]),
    Result<()>
);

/// Rows whose scores are computed before their exponentials are taken: the exponentials of a
/// tile then run as one loop over contiguous values, which the compiler vectorises.
const TILE_ROWS: usize = 64;

#[inline(always)]
fn probabilities_of_rows<T: Feature>(
    fitted: &FittedLogistic,
    values: &[T],
    first_row: usize,
    out: &mut [f32],
    dot: impl Fn(&[T], &[f64]) -> f64,
) -> Result<()> {
    let (cols, outputs, classes) = (
        fitted.n_features,
        fitted.wide_intercept.len(),
        fitted.classes.len(),
    );
    let mut scores = vec![0.0; TILE_ROWS * outputs];
    let tiles = values
        .chunks(TILE_ROWS * cols)
        .zip(out.chunks_mut(TILE_ROWS * classes));
    for (tile_index, (x, probabilities)) in tiles.enumerate() {
        let rows = x.len() / cols;
        let scores = &mut scores[..rows * outputs];
        for (r, (row, s)) in x
            .chunks_exact(cols)
            .zip(scores.chunks_exact_mut(outputs))
            .enumerate()
        {
            row_scores(fitted, row, s, &dot);
            if s.iter().any(|v| !v.is_finite()) {
                let row_index = first_row + tile_index * TILE_ROWS + r;
                return Err(non_finite_row_error(row, row_index));
            }
        }
        if outputs == 1 {
            // σ(z) and σ(−z) from one exponential, e = exp(−|z|) ≤ 1: the larger is
            // 1/(1+e), the smaller e/(1+e), each to full relative precision (1 − p would
            // lose the small one).
            let mut e = [0.0f64; TILE_ROWS];
            for (e, z) in e.iter_mut().zip(scores.iter()) {
                *e = exp_non_positive(-z.abs());
            }
            for ((pair, e), z) in probabilities.chunks_exact_mut(2).zip(&e).zip(scores.iter()) {
                let (big, small) = ((1.0 / (1.0 + e)) as f32, (e / (1.0 + e)) as f32);
                let (p0, p1) = if *z >= 0.0 {
                    (small, big)
                } else {
                    (big, small)
                };
                pair[0] = p0;
                pair[1] = p1;
            }
        } else {
            // Softmax shifted by each row's maximum, so every exponent is ≤ 0.
            for s in scores.chunks_exact_mut(outputs) {
                let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                for v in s.iter_mut() {
                    *v -= max;
                }
            }
            for v in scores.iter_mut() {
                *v = exp_non_positive(*v);
            }
            for (s, p) in scores
                .chunks_exact(outputs)
                .zip(probabilities.chunks_exact_mut(classes))
            {
                let inverse = 1.0 / s.iter().sum::<f64>();
                for (slot, e) in p.iter_mut().zip(s) {
                    *slot = (e * inverse) as f32;
                }
            }
        }
    }
    Ok(())
}

/// `eˣ` for `x ≤ 0` (0 below −708, where it would be subnormal; a probability stored as f32
/// is 0 there anyway), written without calls or branches so that a loop of them vectorises.
/// `x = k·ln 2 + r` with `|r| ≤ ln 2 / 2` (ln 2 split in two parts, so `r` is exact to f64
/// precision), `eʳ` by its Taylor polynomial to degree 13 (truncation error < 1e-17), and
/// `2ᵏ` built in the exponent bits. Relative error < 1e-15 (tested against libm), against
/// the 6e-8 of the f32 results.
#[inline(always)]
pub(crate) fn exp_non_positive(x: f64) -> f64 {
    const LOG2_E: f64 = std::f64::consts::LOG2_E;
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    let x = x.max(-708.0);
    let k = (x * LOG2_E).round();
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let mut p = 1.0 / 6_227_020_800.0;
    for c in [
        1.0 / 479_001_600.0,
        1.0 / 39_916_800.0,
        1.0 / 3_628_800.0,
        1.0 / 362_880.0,
        1.0 / 40_320.0,
        1.0 / 5_040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ] {
        p = p * r + c;
    }
    // 2^k: k + 1023 is an integer in [2, 1023]; adding 2^52 puts it in the low mantissa bits,
    // and shifting those bits left by 52 makes it the exponent field.
    let biased = (k + 1023.0 + 4_503_599_627_370_496.0).to_bits();
    p * f64::from_bits(biased << 52)
}

#[inline(always)]
fn labels_of_rows<T: Feature>(
    fitted: &FittedLogistic,
    values: &[T],
    first_row: usize,
    out: &mut [i32],
    dot: impl Fn(&[T], &[f64]) -> f64,
) -> Result<()> {
    let mut scores = vec![0.0; fitted.wide_intercept.len()];
    let rows = values.chunks_exact(fitted.n_features);
    for (row_index, (row, label)) in rows.zip(out.iter_mut()).enumerate() {
        row_scores(fitted, row, &mut scores, &dot);
        if scores.iter().any(|s| !s.is_finite()) {
            return Err(non_finite_row_error(row, first_row + row_index));
        }
        let class_index = if let [score] = scores.as_slice() {
            usize::from(*score > 0.0)
        } else {
            // First maximum wins, like numpy's argmax.
            let mut best = 0;
            for (k, s) in scores.iter().enumerate() {
                if *s > scores[best] {
                    best = k;
                }
            }
            best
        };
        *label = fitted.classes.get(class_index).copied().unwrap_or_default();
    }
    Ok(())
}
