//! The scale searches of [`super::make_qkx2_quants`] and [`super::make_qx_quants`], run on
//! `L` sub-blocks at once: lane `k` of every array is sub-block `k`.
//!
//! Each search is a chain of sums that must be added in C's order (float addition is not
//! associative), so one sub-block's search is bound by the latency of its additions. The
//! sub-blocks of a block are independent, though: done side by side, lane `k` performs
//! exactly the operations of the one-sub-block version, in the same order, and the vector
//! units do `L` of them per instruction. Branches become per-lane selects with the same
//! conditions (comparisons false on NaN, as in C); work a lane would have skipped is done
//! and discarded. The one-sub-block versions stay the reference; the tests check both
//! against each other and against ggml.

use super::super::nearest_int;
use super::{qx_weight, Qkx2, GROUP_MAX_EPS};

/// `f(k)` for every lane.
#[inline(always)]
fn lanes<const L: usize>(f: impl FnMut(usize) -> f32) -> [f32; L] {
    std::array::from_fn(f)
}

/// [`super::make_qkx2_quants`] on `L` sub-blocks of `N` values: `xt[i][k]` is value `i` of
/// sub-block `k`. Returns each sub-block's `(scale, -min)`.
#[inline(always)]
pub(super) fn make_qkx2_quants_lanes<const N: usize, const L: usize>(
    p: &Qkx2,
    xt: &[[f32; L]; N],
    wt: &[[f32; L]; N],
    lt: &mut [[u8; L]; N],
) -> ([f32; L], [f32; L]) {
    let mut min = xt[0];
    let mut max = xt[0];
    let mut sum_w = wt[0];
    let mut sum_x: [f32; L] = lanes(|k| sum_w[k] * xt[0][k]);
    for i in 1..N {
        for k in 0..L {
            let v = xt[i][k];
            if v < min[k] {
                min[k] = v;
            }
            if v > max[k] {
                max[k] = v;
            }
            let w = wt[i][k];
            sum_w[k] += w;
            sum_x[k] += w * v;
        }
    }
    for m in min.iter_mut() {
        if *m > 0.0 {
            *m = 0.0;
        }
    }
    // Sub-blocks whose values are all equal take the early exit (fixed up at the end).
    let flat: [bool; L] = std::array::from_fn(|k| max[k] == min[k]);
    let flat_min = min;
    let nmax = p.nmax;
    let iscale: [f32; L] = lanes(|k| nmax as f32 / (max[k] - min[k]));
    let mut scale: [f32; L] = lanes(|k| 1.0 / iscale[k]);
    let mut lv = [[0f32; L]; N];
    qkx2_levels(&iscale, &min, xt, nmax, &mut lv);
    let mut best_error = qkx2_error(&scale, &min, &lv, xt, wt, p.use_mad);
    for (o, l) in lt.iter_mut().zip(&lv) {
        for k in 0..L {
            o[k] = l[k] as u8;
        }
    }
    if p.nstep >= 1 {
        let mut laux = [[0f32; L]; N];
        for is in 0..=p.nstep {
            let iscale: [f32; L] =
                lanes(|k| (p.rmin + p.rdelta * is as f32 + nmax as f32) / (max[k] - min[k]));
            qkx2_levels(&iscale, &min, xt, nmax, &mut laux);
            let (mut sum_l, mut sum_l2, mut sum_xl) = ([0f32; L], [0f32; L], [0f32; L]);
            for i in 0..N {
                for k in 0..L {
                    let w = wt[i][k];
                    let l = laux[i][k];
                    sum_l[k] += w * l;
                    sum_l2[k] += w * l * l;
                    sum_xl[k] += w * l * xt[i][k];
                }
            }
            let mut this_scale = [0f32; L];
            let mut this_min = [0f32; L];
            let mut positive = [false; L];
            for k in 0..L {
                let d = sum_w[k] * sum_l2[k] - sum_l[k] * sum_l[k];
                positive[k] = d > 0.0;
                this_scale[k] = (sum_w[k] * sum_xl[k] - sum_x[k] * sum_l[k]) / d;
                this_min[k] = (sum_l2[k] * sum_x[k] - sum_l[k] * sum_xl[k]) / d;
                if this_min[k] > 0.0 {
                    this_min[k] = 0.0;
                    this_scale[k] = sum_xl[k] / sum_l2[k];
                }
            }
            let cur_error = qkx2_error(&this_scale, &this_min, &laux, xt, wt, p.use_mad);
            let better: [bool; L] =
                std::array::from_fn(|k| positive[k] && cur_error[k] < best_error[k]);
            for (o, l) in lt.iter_mut().zip(&laux) {
                for k in 0..L {
                    if better[k] {
                        o[k] = l[k] as u8;
                    }
                }
            }
            for k in 0..L {
                if better[k] {
                    best_error[k] = cur_error[k];
                    scale[k] = this_scale[k];
                    min[k] = this_min[k];
                }
            }
        }
    }
    for k in 0..L {
        if flat[k] {
            scale[k] = 0.0;
            min[k] = flat_min[k];
            for o in lt.iter_mut() {
                o[k] = 0;
            }
        }
    }
    (scale, lanes(|k| -min[k]))
}

#[inline(always)]
fn qkx2_levels<const N: usize, const L: usize>(
    iscale: &[f32; L],
    min: &[f32; L],
    xt: &[[f32; L]; N],
    nmax: i32,
    out: &mut [[f32; L]; N],
) {
    for (o, x) in out.iter_mut().zip(xt) {
        for k in 0..L {
            o[k] = nearest_int(iscale[k] * (x[k] - min[k])).clamp(0, nmax) as f32;
        }
    }
}

#[inline(always)]
fn qkx2_error<const N: usize, const L: usize>(
    scale: &[f32; L],
    min: &[f32; L],
    lv: &[[f32; L]; N],
    xt: &[[f32; L]; N],
    wt: &[[f32; L]; N],
    use_mad: bool,
) -> [f32; L] {
    let mut sum = [0f32; L];
    for i in 0..N {
        for k in 0..L {
            let diff = scale[k] * lv[i][k] + min[k] - xt[i][k];
            let diff = if use_mad { diff.abs() } else { diff * diff };
            sum[k] += wt[i][k] * diff;
        }
    }
    sum
}

/// [`super::make_qx_quants`] with `rmse_type` 1 on `L` sub-blocks of `N` values: `xt[i][k]`
/// is value `i` of sub-block `k`. Returns each sub-block's scale.
#[inline(always)]
pub(super) fn make_qx_quants_lanes<const N: usize, const L: usize>(
    nmax: i32,
    xt: &[[f32; L]; N],
    lt: &mut [[i8; L]; N],
) -> [f32; L] {
    let mut max = [0f32; L];
    let mut amax = [0f32; L];
    for x in xt {
        for k in 0..L {
            let ax = x[k].abs();
            if ax > amax[k] {
                amax[k] = ax;
                max[k] = x[k];
            }
        }
    }
    let zero: [bool; L] = std::array::from_fn(|k| amax[k] < GROUP_MAX_EPS);
    let mut w = [[0f32; L]; N];
    for (w, x) in w.iter_mut().zip(xt) {
        for k in 0..L {
            w[k] = qx_weight(1, x[k]);
        }
    }
    let mut l = [[0f32; L]; N];
    let iscale: [f32; L] = lanes(|k| -(nmax as f32) / max[k]);
    qx_levels(&iscale, xt, nmax, &mut l);
    qx_store(&l, lt, &[true; L], nmax);
    let (sumlx, suml2) = qx_sums(&l, xt, &w);
    let mut scale: [f32; L] = lanes(|k| {
        if suml2[k] != 0.0 {
            sumlx[k] / suml2[k]
        } else {
            0.0
        }
    });
    let mut best: [f32; L] = lanes(|k| scale[k] * sumlx[k]);
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        let iscale: [f32; L] = lanes(|k| -(nmax as f32 + 0.1 * is as f32) / max[k]);
        qx_levels(&iscale, xt, nmax, &mut l);
        let (sumlx, suml2) = qx_sums(&l, xt, &w);
        let better: [bool; L] =
            std::array::from_fn(|k| suml2[k] > 0.0 && sumlx[k] * sumlx[k] > best[k] * suml2[k]);
        qx_store(&l, lt, &better, nmax);
        for k in 0..L {
            if better[k] {
                scale[k] = sumlx[k] / suml2[k];
                best[k] = scale[k] * sumlx[k];
            }
        }
    }
    for k in 0..L {
        if zero[k] {
            scale[k] = 0.0;
            for o in lt.iter_mut() {
                o[k] = 0;
            }
        }
    }
    scale
}

#[inline(always)]
fn qx_levels<const N: usize, const L: usize>(
    iscale: &[f32; L],
    xt: &[[f32; L]; N],
    nmax: i32,
    out: &mut [[f32; L]; N],
) {
    for (o, x) in out.iter_mut().zip(xt) {
        for k in 0..L {
            o[k] = nearest_int(iscale[k] * x[k]).clamp(-nmax, nmax - 1) as f32;
        }
    }
}

#[inline(always)]
fn qx_sums<const N: usize, const L: usize>(
    l: &[[f32; L]; N],
    xt: &[[f32; L]; N],
    w: &[[f32; L]; N],
) -> ([f32; L], [f32; L]) {
    let (mut sumlx, mut suml2) = ([0f32; L], [0f32; L]);
    for i in 0..N {
        for k in 0..L {
            sumlx[k] += w[i][k] * xt[i][k] * l[i][k];
            suml2[k] += w[i][k] * l[i][k] * l[i][k];
        }
    }
    (sumlx, suml2)
}

#[inline(always)]
fn qx_store<const N: usize, const L: usize>(
    l: &[[f32; L]; N],
    lt: &mut [[i8; L]; N],
    mask: &[bool; L],
    nmax: i32,
) {
    for (o, l) in lt.iter_mut().zip(l) {
        for k in 0..L {
            if mask[k] {
                o[k] = (l[k] as i32 + nmax) as i8;
            }
        }
    }
}

/// `x[k * N + i]` as `xt[i][k]`.
#[inline(always)]
pub(super) fn transpose_in<const N: usize, const L: usize>(x: &[f32]) -> [[f32; L]; N] {
    std::array::from_fn(|i| std::array::from_fn(|k| x[k * N + i]))
}

/// `lt[i][k]` into `out[k * N + i]`.
#[inline(always)]
pub(super) fn transpose_out<T: Copy, const N: usize, const L: usize>(
    lt: &[[T; L]; N],
    out: &mut [T],
) {
    for (i, row) in lt.iter().enumerate() {
        for (k, &v) in row.iter().enumerate() {
            out[k * N + i] = v;
        }
    }
}
