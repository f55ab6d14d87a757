//! Q5_K (176 bytes per 256 values): f16 `d`, f16 `dmin`, `scales[12]` (as Q4_K), `qh[32]`
//! (fifth bits), `qs[128]` (low 4 bits, as Q4_K).
//!
//! Value `f` (sub-block `j = f / 32`): `(d * sc[j]) * q - (dmin * m[j])`, `q` the Q4_K
//! nibble plus 16 × bit `j` of `qh[f % 32]`.

use super::super::simd::{block_loop, fast_kernel};
use super::super::{f16_le, fp16_bits, Kernels, QK_K};
use super::{
    pack_scales_mins_k4, requantize_k4, scales_mins_k4, sub_block_scales_k4,
    sub_block_scales_k4_lanes, Qkx2,
};

const BYTES: usize = 176;

#[inline(always)]
fn decode_block(b: &[u8; BYTES], out: &mut [f32; QK_K]) {
    let d = f16_le([b[0], b[1]]);
    let dmin = f16_le([b[2], b[3]]);
    let mut s = [0u8; 12];
    s.copy_from_slice(&b[4..16]);
    let (sc, m) = scales_mins_k4(&s);
    let (qh, qs) = (&b[16..48], &b[48..]);
    for j in 0..8 {
        let dj = d * sc[j] as f32;
        let mj = dmin * m[j] as f32;
        let (chunk, shift) = (j / 2, 4 * (j % 2));
        for l in 0..32 {
            let low = (qs[32 * chunk + l] >> shift) & 0x0F;
            let high = (qh[l] >> j) & 1;
            let q = low | (high << 4);
            out[32 * j + l] = dj * q as f32 - mj;
        }
    }
}

const SEARCH: Qkx2 = Qkx2 {
    nmax: 31,
    rmin: -0.5,
    rdelta: 0.1,
    nstep: 15,
    use_mad: false,
};

/// One block; `LANES` picks the scale search done sub-block by sub-block (the reference) or
/// on all eight at once (the same results, several times faster).
#[inline(always)]
fn encode_block_with<const LANES: bool>(x: &[f32; QK_K], out: &mut [u8; BYTES]) {
    let mut l = [0u8; QK_K];
    let (scales, mins) = if LANES {
        sub_block_scales_k4_lanes(x, &SEARCH, &mut l)
    } else {
        sub_block_scales_k4(x, &SEARCH, &mut l)
    };
    let mut max_scale = 0f32;
    let mut max_min = 0f32;
    for j in 0..8 {
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let sb = pack_scales_mins_k4(&scales, &mins, inv_scale, inv_min);
    let d_bits = fp16_bits(max_scale / 63.0);
    let dmin_bits = fp16_bits(max_min / 63.0);
    let d = f16_le(d_bits.to_le_bytes());
    let dmin = f16_le(dmin_bits.to_le_bytes());
    requantize_k4(x, d, dmin, &sb, 31, &mut l);
    out[0..2].copy_from_slice(&d_bits.to_le_bytes());
    out[2..4].copy_from_slice(&dmin_bits.to_le_bytes());
    out[4..16].copy_from_slice(&sb);
    let mut qh = [0u8; 32];
    let mut ql = [0u8; 128];
    let (mut m1, mut m2) = (1u8, 2u8);
    for chunk in 0..4 {
        for j in 0..32 {
            let mut l1 = l[64 * chunk + j];
            if l1 > 15 {
                l1 -= 16;
                qh[j] |= m1;
            }
            let mut l2 = l[64 * chunk + j + 32];
            if l2 > 15 {
                l2 -= 16;
                qh[j] |= m2;
            }
            ql[32 * chunk + j] = l1 | (l2 << 4);
        }
        m1 = m1.wrapping_shl(2);
        m2 = m2.wrapping_shl(2);
    }
    out[16..48].copy_from_slice(&qh);
    out[48..].copy_from_slice(&ql);
}

block_loop!(decode_blocks, decode_block, u8, BYTES, f32, QK_K);
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
fast_kernel!(decode_fast, decode_blocks, u8, f32);
fast_kernel!(encode_fast, encode_blocks_lanes, f32, u8);

pub(in crate::codecs) const DECODE: Kernels<u8, f32> = Kernels {
    reference: decode_blocks,
    fast: decode_fast,
};
pub(in crate::codecs) const ENCODE: Kernels<f32, u8> = Kernels {
    reference: encode_blocks,
    fast: encode_fast,
};
