//! Q2_K (84 bytes per 256 values): `scales[16]` (low nibble: scale, high nibble: minimum of
//! each sub-block of 16), `qs[64]` (2-bit quants), f16 `d`, f16 `dmin`.
//!
//! Value `f` (sub-block `j = f / 16`): `dl * q - ml` with `dl = d * (scales[j] & 15)`,
//! `ml = dmin * (scales[j] >> 4)`; its quant is bits `2s..2s+2` of `qs[32h + l]` where
//! `f = 128h + 32s + l`.

use super::super::simd::{block_loop, fast_kernel};
use super::super::{add_nan_first, f16_le, fp16_bits, nearest_int, Kernels, QK_K};
use super::{lanes, make_qkx2_quants, sub_array, sub_array_mut, Qkx2};

const BYTES: usize = 84;

#[inline(always)]
fn decode_block(b: &[u8; BYTES], out: &mut [f32; QK_K]) {
    let d = f16_le([b[80], b[81]]);
    let dmin = f16_le([b[82], b[83]]);
    let (scales, qs) = (&b[..16], &b[16..80]);
    // Values 128h + 32s + l: bits 2s..2s+2 of qs[32h + l], sub-block 8h + 2s + l / 16.
    for h in 0..2 {
        for s in 0..4 {
            for half in 0..2 {
                let sc = scales[8 * h + 2 * s + half];
                let dl = d * (sc & 0xF) as f32;
                let ml = dmin * (sc >> 4) as f32;
                let o = 128 * h + 32 * s + 16 * half;
                for l in 0..16 {
                    let q = (qs[32 * h + 16 * half + l] >> (2 * s)) & 3;
                    out[o + l] = dl * q as f32 - ml;
                }
            }
        }
    }
}

/// [`decode_block`] arranged for the vector units (the fast kernel): the same operations on
/// the same values, so the same bits. The scales and minimums are multiplied out once per
/// block, and each group of 16 quant bytes is widened to 32-bit lanes once and shifted there
/// for its four sub-blocks (x86 has no byte shifts: written on bytes, the compiler assembles
/// the shifted bytes one insert at a time).
#[inline(always)]
fn decode_block_lanes(b: &[u8; BYTES], out: &mut [f32; QK_K]) {
    let d = f16_le([b[80], b[81]]);
    let dmin = f16_le([b[82], b[83]]);
    let scales: &[u8; 16] = sub_array(b, 0);
    let qs: &[u8; 64] = sub_array(b, 16);
    let dl: [f32; 16] = std::array::from_fn(|j| d * (scales[j] & 0xF) as f32);
    let ml: [f32; 16] = std::array::from_fn(|j| dmin * (scales[j] >> 4) as f32);
    for h in 0..2 {
        for half in 0..2 {
            let bytes: &[u8; 16] = sub_array(qs, 32 * h + 16 * half);
            let q: [u32; 16] = bytes.map(u32::from);
            for s in 0..4 {
                let j = 8 * h + 2 * s + half;
                let (dj, mj) = (dl[j], ml[j]);
                let o: &mut [f32; 16] = sub_array_mut(out, 128 * h + 32 * s + 16 * half);
                for (v, &q) in o.iter_mut().zip(&q) {
                    *v = dj * ((q >> (2 * s)) & 3) as f32 - mj;
                }
            }
        }
    }
}

/// Pack 2-bit quants: byte `32h + l` holds values `128h + l + 32s` in bits `2s..2s+2`.
#[inline(always)]
pub(super) fn pack_2bit(l: &[u8; QK_K], qs: &mut [u8]) {
    for h in 0..2 {
        for i in 0..32 {
            let j = 128 * h + i;
            qs[32 * h + i] = l[j] | (l[j + 32] << 2) | (l[j + 64] << 4) | (l[j + 96] << 6);
        }
    }
}

const SEARCH: Qkx2 = Qkx2 {
    nmax: 3,
    rmin: -0.5,
    rdelta: 0.1,
    nstep: 15,
    use_mad: true,
};

/// One block; `LANES` picks the scale search done sub-block by sub-block (the reference) or
/// on all sixteen at once (the same results, faster).
#[inline(always)]
fn encode_block_with<const LANES: bool>(x: &[f32; QK_K], out: &mut [u8; BYTES]) {
    const Q4SCALE: f32 = 15.0;
    let mut l = [0u8; QK_K];
    let mut scales = [0f32; 16];
    let mut mins = [0f32; 16];
    if LANES {
        let xt: [[f32; 16]; 16] = lanes::transpose_in(x);
        let wt: [[f32; 16]; 16] = std::array::from_fn(|i| xt[i].map(f32::abs));
        let mut lt = [[0u8; 16]; 16];
        (scales, mins) = lanes::make_qkx2_quants_lanes(&SEARCH, &xt, &wt, &mut lt);
        lanes::transpose_out(&lt, &mut l);
    } else {
        let mut weights = [0f32; 16];
        for j in 0..16 {
            let xs: &[f32; 16] = sub_array(x, 16 * j);
            for (w, &v) in weights.iter_mut().zip(xs) {
                *w = v.abs();
            }
            let (scale, min) =
                make_qkx2_quants(&SEARCH, xs, &weights, sub_array_mut(&mut l, 16 * j));
            scales[j] = scale;
            mins[j] = min;
        }
    }
    let mut max_scale = 0f32;
    let mut max_min = 0f32;
    for j in 0..16 {
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    let mut sc = [0u8; 16];
    let d_bits = if max_scale > 0.0 {
        let iscale = Q4SCALE / max_scale;
        for (s, &scale) in sc.iter_mut().zip(&scales) {
            *s = nearest_int(iscale * scale) as u8;
        }
        fp16_bits(max_scale / Q4SCALE)
    } else {
        fp16_bits(0.0)
    };
    let dmin_bits = if max_min > 0.0 {
        let iscale = Q4SCALE / max_min;
        for (s, &min) in sc.iter_mut().zip(&mins) {
            *s = (*s as i32 | nearest_int(iscale * min).wrapping_shl(4)) as u8;
        }
        fp16_bits(max_min / Q4SCALE)
    } else {
        fp16_bits(0.0)
    };
    let d = f16_le(d_bits.to_le_bytes());
    let dmin = f16_le(dmin_bits.to_le_bytes());
    for j in 0..16 {
        let dj = d * (sc[j] & 0xF) as f32;
        if dj == 0.0 {
            continue;
        }
        let dm = dmin * (sc[j] >> 4) as f32;
        for ii in 0..16 {
            // x + dm: a NaN x wins over a NaN dm (C's operand order; `+` alone may swap).
            let y = add_nan_first(x[16 * j + ii], dm) / dj;
            l[16 * j + ii] = nearest_int(y).clamp(0, 3) as u8;
        }
    }
    out[..16].copy_from_slice(&sc);
    pack_2bit(&l, &mut out[16..80]);
    out[80..82].copy_from_slice(&d_bits.to_le_bytes());
    out[82..84].copy_from_slice(&dmin_bits.to_le_bytes());
}

block_loop!(decode_blocks, decode_block, u8, BYTES, f32, QK_K);
block_loop!(
    decode_blocks_lanes,
    decode_block_lanes,
    u8,
    BYTES,
    f32,
    QK_K
);
/// The reference, compiled once: the reference kernel and the fast one's NaN blocks run
/// this same code.
#[inline(never)]
fn encode_block(x: &[f32; QK_K], out: &mut [u8; BYTES]) {
    encode_block_with::<false>(x, out)
}

/// A block holding a NaN takes the reference: when two NaNs meet in a sum, which one's
/// payload survives is an operand-order detail of the compiled code, and payloads reach the
/// bytes (through `nearest_int`). Without NaN inputs every NaN the arithmetic makes is the
/// same default NaN, so the side-by-side search gives the reference's bytes.
#[inline(always)]
fn encode_block_lanes(x: &[f32; QK_K], out: &mut [u8; BYTES]) {
    if x.iter().fold(false, |nan, v| nan | v.is_nan()) {
        encode_block(x, out)
    } else {
        encode_block_with::<true>(x, out)
    }
}

block_loop!(encode_blocks, encode_block, f32, QK_K, u8, BYTES);
block_loop!(
    encode_blocks_lanes,
    encode_block_lanes,
    f32,
    QK_K,
    u8,
    BYTES
);
fast_kernel!(decode_fast, decode_blocks_lanes, u8, f32);
fast_kernel!(encode_fast, encode_blocks_lanes, f32, u8);

pub(in crate::codecs) const DECODE: Kernels<u8, f32> = Kernels {
    reference: decode_blocks,
    fast: decode_fast,
};
pub(in crate::codecs) const ENCODE: Kernels<f32, u8> = Kernels {
    reference: encode_blocks,
    fast: encode_fast,
};
