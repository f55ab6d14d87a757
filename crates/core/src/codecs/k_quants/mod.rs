//! The K-quants: super-blocks of 256 values in 16 or 8 sub-blocks, each with its own 4-8 bit
//! scale (and minimum) quantized against one or two f16 super-scales.
//!
//! Decoders follow gguf-py's numpy code operation for operation (`dl * q - ml`,
//! `d * sc * q`, …); encoders follow ggml's `quantize_row_*_ref`, including its search for the
//! best scale (`make_qx_quants`, `make_q3_quants`, `make_qkx2_quants` below: our code, the
//! same arithmetic in the same order, so every rounding is the same).

mod lanes;
mod q2_k;
mod q3_k;
mod q4_k;
mod q5_k;
mod q6_k;

pub(super) use q2_k::{DECODE as Q2_K_DECODE, ENCODE as Q2_K_ENCODE};
pub(super) use q3_k::{DECODE as Q3_K_DECODE, ENCODE as Q3_K_ENCODE};
pub(super) use q4_k::{DECODE as Q4_K_DECODE, ENCODE as Q4_K_ENCODE};
pub(super) use q5_k::{DECODE as Q5_K_DECODE, ENCODE as Q5_K_ENCODE};
pub(super) use q6_k::{DECODE as Q6_K_DECODE, ENCODE as Q6_K_ENCODE};

use super::{add_nan_first, nearest_int};

/// ggml's `GROUP_MAX_EPS`: a group whose largest magnitude is below this is all zero.
const GROUP_MAX_EPS: f32 = 1e-15;

/// The weight of value `x` in the error that [`make_qx_quants`] minimises.
#[inline(always)]
fn qx_weight(rmse_type: i32, x: f32) -> f32 {
    match rmse_type {
        1 => x * x,
        2 => 1.0,
        3 => x.abs(),
        _ => x.abs().sqrt(),
    }
}

/// Symmetric quantization of `x` to `[-nmax, nmax - 1]` (stored in `l` offset by `nmax`),
/// returning the scale: ggml's `make_qx_quants` without importance weights. The scale is
/// `1 / iscale` for `rmse_type` 0, otherwise the least-squares scale of the best of 19
/// candidate `iscale`s around `-nmax / max`. (Per-element products are computed apart so
/// they vectorise; each sum still runs left to right, as in C.)
#[inline(always)]
pub(super) fn make_qx_quants<const N: usize>(
    nmax: i32,
    x: &[f32; N],
    l_out: &mut [i8; N],
    rmse_type: i32,
) -> f32 {
    let mut max = 0f32;
    let mut amax = 0f32;
    for &v in x {
        let ax = v.abs();
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        *l_out = [0; N];
        return 0.0;
    }
    let levels = |iscale: f32, out: &mut [f32; N]| {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = nearest_int(iscale * v).clamp(-nmax, nmax - 1) as f32;
        }
    };
    let store = |l: &[f32; N], out: &mut [i8; N]| {
        for (o, &v) in out.iter_mut().zip(l) {
            *o = (v as i32 + nmax) as i8;
        }
    };
    let mut iscale = -(nmax as f32) / max;
    let mut l = [0f32; N];
    levels(iscale, &mut l);
    store(&l, l_out);
    if rmse_type == 0 {
        return 1.0 / iscale;
    }
    let (rmse_type, return_early) = if rmse_type < 0 {
        (-rmse_type, true)
    } else {
        (rmse_type, false)
    };
    let mut w = [0f32; N];
    for (w, &v) in w.iter_mut().zip(x) {
        *w = qx_weight(rmse_type, v);
    }
    let sums = |l: &[f32; N]| {
        let mut wxl = [0f32; N];
        let mut wll = [0f32; N];
        for i in 0..N {
            wxl[i] = w[i] * x[i] * l[i];
            wll[i] = w[i] * l[i] * l[i];
        }
        let (mut sumlx, mut suml2) = (0f32, 0f32);
        for i in 0..N {
            sumlx += wxl[i];
            suml2 += wll[i];
        }
        (sumlx, suml2)
    };
    let (sumlx, suml2) = sums(&l);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    if return_early {
        return if suml2 > 0.0 {
            0.5 * (scale + 1.0 / iscale)
        } else {
            1.0 / iscale
        };
    }
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        levels(iscale, &mut l);
        let (sumlx, suml2) = sums(&l);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            store(&l, l_out);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// ggml's `make_q3_quants` with `do_rmse`: symmetric quantization to `[-nmax, nmax - 1]`
/// (stored offset by `nmax`), then up to 5 rounds of moving single values to a better level
/// under an x²-weighted error. Returns the least-squares scale.
pub(super) fn make_q3_quants(nmax: i32, x: &[f32], l_out: &mut [i8]) -> f32 {
    let mut max = 0f32;
    let mut amax = 0f32;
    for &v in x {
        let ax = v.abs();
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l_out.iter_mut().for_each(|l| *l = 0);
        return 0.0;
    }
    let clamp = |l: i32| l.clamp(-nmax, nmax - 1);
    let iscale = -(nmax as f32) / max;
    let mut sumlx = 0f32;
    let mut suml2 = 0f32;
    for (o, &v) in l_out.iter_mut().zip(x) {
        let l = clamp(nearest_int(iscale * v));
        *o = l as i8;
        let w = v * v;
        sumlx += w * v * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    for _ in 0..5 {
        let mut n_changed = 0;
        for (o, &v) in l_out.iter_mut().zip(x) {
            let w = v * v;
            let li = *o as f32;
            let mut slx = sumlx - w * v * li;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * li * li;
                let new_l = clamp(nearest_int(v * sl2 / slx));
                if new_l != *o as i32 {
                    slx += w * v * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *o = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed += 1;
                    }
                }
            }
        }
        if n_changed == 0 {
            break;
        }
    }
    for o in l_out.iter_mut() {
        *o = (*o as i32 + nmax) as i8;
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// The parameters of ggml's `make_qkx2_quants` search.
pub(super) struct Qkx2 {
    pub nmax: i32,
    pub rmin: f32,
    pub rdelta: f32,
    pub nstep: i32,
    pub use_mad: bool,
}

/// Asymmetric quantization of `x` to `[0, nmax]` with a scale and a minimum, searching
/// `nstep + 1` candidate scales for the smallest weighted error: ggml's `make_qkx2_quants`.
/// Returns `(scale, -min)`.
///
/// The arithmetic is ggml's, in its order; the loops are split so that the per-element work
/// (quantizing, the error terms) vectorises while each sum is still accumulated element by
/// element, left to right, as in C (float addition is not associative).
#[inline(always)]
pub(super) fn make_qkx2_quants<const N: usize>(
    p: &Qkx2,
    x: &[f32; N],
    weights: &[f32; N],
    l_out: &mut [u8; N],
) -> (f32, f32) {
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..N {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        *l_out = [0; N];
        return (0.0, -min);
    }
    let nmax = p.nmax;
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut levels = [0f32; N];
    quantize_levels(iscale, x, min, nmax, &mut levels);
    let mut best_error = weighted_error(scale, min, &levels, x, weights, p.use_mad);
    for (o, &l) in l_out.iter_mut().zip(&levels) {
        *o = l as u8;
    }
    if p.nstep < 1 {
        return (scale, -min);
    }
    for is in 0..=p.nstep {
        iscale = (p.rmin + p.rdelta * is as f32 + nmax as f32) / (max - min);
        let mut laux = [0f32; N];
        quantize_levels(iscale, x, min, nmax, &mut laux);
        // Products first (they vectorise), then the three sums in ggml's order.
        let mut wl = [0f32; N];
        let mut wll = [0f32; N];
        let mut wlx = [0f32; N];
        for i in 0..N {
            wl[i] = weights[i] * laux[i];
            wll[i] = wl[i] * laux[i];
            wlx[i] = wl[i] * x[i];
        }
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0f32, 0f32, 0f32);
        for i in 0..N {
            sum_l += wl[i];
            sum_l2 += wll[i];
            sum_xl += wlx[i];
        }
        let d = sum_w * sum_l2 - sum_l * sum_l;
        if d > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / d;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / d;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let cur_error = weighted_error(this_scale, this_min, &laux, x, weights, p.use_mad);
            if cur_error < best_error {
                for (o, &l) in l_out.iter_mut().zip(&laux) {
                    *o = l as u8;
                }
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// `clamp(nearest_int(iscale * (x - min)), 0, nmax)` for every value, as floats.
#[inline(always)]
fn quantize_levels<const N: usize>(
    iscale: f32,
    x: &[f32; N],
    min: f32,
    nmax: i32,
    out: &mut [f32; N],
) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = nearest_int(iscale * (v - min)).clamp(0, nmax) as f32;
    }
}

/// `Σ w · err(scale · l + min - x)`, `err` the absolute value or the square, summed left to
/// right as ggml does.
#[inline(always)]
fn weighted_error<const N: usize>(
    scale: f32,
    min: f32,
    levels: &[f32; N],
    x: &[f32; N],
    weights: &[f32; N],
    use_mad: bool,
) -> f32 {
    let mut terms = [0f32; N];
    for i in 0..N {
        let diff = scale * levels[i] + min - x[i];
        let diff = if use_mad { diff.abs() } else { diff * diff };
        terms[i] = weights[i] * diff;
    }
    let mut sum = 0f32;
    for t in terms {
        sum += t;
    }
    sum
}

/// The `N` values of `a` from `start` as an array (`start + N` is within `a` at every call).
#[inline(always)]
pub(super) fn sub_array<const N: usize, T>(a: &[T], start: usize) -> &[T; N] {
    a[start..start + N].try_into().expect("in range")
}

/// [`sub_array`], mutable.
#[inline(always)]
pub(super) fn sub_array_mut<const N: usize, T>(a: &mut [T], start: usize) -> &mut [T; N] {
    (&mut a[start..start + N]).try_into().expect("in range")
}

/// The 6-bit scale and minimum of sub-block `j` of a Q4_K / Q5_K block's 12 scale bytes
/// (ggml's `get_scale_min_k4`).
#[inline(always)]
pub(super) fn scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// The eight 6-bit scales and minimums packed in 12 bytes, as gguf-py's `get_scale_min`
/// unpacks them (the same bits as [`scale_min_k4`]).
#[inline(always)]
pub(super) fn scales_mins_k4(s: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..4 {
        let (d, m, md) = (s[j], s[j + 4], s[j + 8]);
        sc[j] = d & 0x3F;
        sc[j + 4] = (md & 0x0F) | ((d >> 2) & 0x30);
        mn[j] = m & 0x3F;
        mn[j + 4] = (md >> 4) | ((m >> 2) & 0x30);
    }
    (sc, mn)
}

/// Pack 8 six-bit scales and minimums into 12 bytes, as `quantize_row_q4_K_ref` does
/// (values above 63 are capped first, after ggml's conversion of `nearest_int` to u8).
#[inline(always)]
pub(super) fn pack_scales_mins_k4(
    scales: &[f32; 8],
    mins: &[f32; 8],
    inv_scale: f32,
    inv_min: f32,
) -> [u8; 12] {
    let mut out = [0u8; 12];
    for j in 0..8 {
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            out[j] = ls;
            out[j + 4] = lm;
        } else {
            out[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            out[j - 4] |= (ls >> 4) << 6;
            out[j] |= (lm >> 4) << 6;
        }
    }
    out
}

/// The scales and minimums of the 8 sub-blocks of 32 values, found as Q4_K and Q5_K do:
/// weights `sqrt(mean(x²)) + |x|`, then [`make_qkx2_quants`] per sub-block.
#[inline(always)]
pub(super) fn sub_block_scales_k4(
    x: &[f32; 256],
    p: &Qkx2,
    l: &mut [u8; 256],
) -> ([f32; 8], [f32; 8]) {
    let mut scales = [0f32; 8];
    let mut mins = [0f32; 8];
    let mut weights = [0f32; 32];
    for j in 0..8 {
        let xs: &[f32; 32] = sub_array(x, 32 * j);
        let mut sum_x2 = 0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        for (w, &v) in weights.iter_mut().zip(xs) {
            *w = av_x + v.abs();
        }
        let (scale, min) = make_qkx2_quants(p, xs, &weights, sub_array_mut(l, 32 * j));
        scales[j] = scale;
        mins[j] = min;
    }
    (scales, mins)
}

/// [`sub_block_scales_k4`] with the 8 searches side by side (see [`lanes`]): the same results.
#[inline(always)]
pub(super) fn sub_block_scales_k4_lanes(
    x: &[f32; 256],
    p: &Qkx2,
    l: &mut [u8; 256],
) -> ([f32; 8], [f32; 8]) {
    let xt: [[f32; 8]; 32] = lanes::transpose_in(x);
    let mut sum_x2 = [0f32; 8];
    for row in &xt {
        for k in 0..8 {
            sum_x2[k] += row[k] * row[k];
        }
    }
    let av_x: [f32; 8] = std::array::from_fn(|k| (sum_x2[k] / 32.0).sqrt());
    let wt: [[f32; 8]; 32] =
        std::array::from_fn(|i| std::array::from_fn(|k| av_x[k] + xt[i][k].abs()));
    let mut lt = [[0u8; 8]; 32];
    let (scales, mins) = lanes::make_qkx2_quants_lanes(p, &xt, &wt, &mut lt);
    lanes::transpose_out(&lt, l);
    (scales, mins)
}

/// Requantize each sub-block of 32 to `[0, nmax]` against the stored f16 super-scales and
/// 6-bit sub-scales, as Q4_K and Q5_K do after rounding their scales (sub-blocks whose scale
/// came out zero keep their first quantization).
#[inline(always)]
pub(super) fn requantize_k4(
    x: &[f32; 256],
    d: f32,
    dmin: f32,
    scales: &[u8; 12],
    nmax: i32,
    l: &mut [u8; 256],
) {
    for j in 0..8 {
        let (sc, m) = scale_min_k4(j, scales);
        let dj = d * sc as f32;
        if dj == 0.0 {
            continue;
        }
        let dm = dmin * m as f32;
        for ii in 0..32 {
            let y = add_nan_first(x[32 * j + ii], dm) / dj;
            l[32 * j + ii] = nearest_int(y).clamp(0, nmax) as u8;
        }
    }
}
