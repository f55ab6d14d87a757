//! Q6_K (210 bytes per 256 values): `ql[128]` (low 4 bits), `qh[64]` (high 2 bits),
//! `scales[16]` (i8, one per sub-block of 16), f16 `d`.
//!
//! Value `f = 128c + r` (sub-block `j = f / 16`): `(d * scales[j]) * (q - 32)` where the
//! low bits are nibble `r / 64` of `ql[64c + r % 64]` and the high bits are bits
//! `2 (r / 32)..+2` of `qh[32c + r % 32]`.

use super::super::simd::{block_loop, fast_kernel};
use super::super::{f16_le, fp16_bits, nearest_int, Kernels, QK_K};
use super::{lanes, make_qx_quants, sub_array, sub_array_mut, GROUP_MAX_EPS};

const BYTES: usize = 210;

#[inline(always)]
fn decode_block(b: &[u8; BYTES], out: &mut [f32; QK_K]) {
    let (ql, qh, scales) = (&b[..128], &b[128..192], &b[192..208]);
    let d = f16_le([b[208], b[209]]);
    // Values 128c + 32s + l: nibble s / 2 of ql[64c + 32(s % 2) + l], bits 2s..2s+2 of
    // qh[32c + l], sub-block 8c + 2s + l / 16.
    for c in 0..2 {
        for s in 0..4 {
            for half in 0..2 {
                let dl = d * (scales[8 * c + 2 * s + half] as i8) as f32;
                let o = 128 * c + 32 * s + 16 * half;
                for l in 0..16 {
                    let i = 16 * half + l;
                    let low = (ql[64 * c + 32 * (s % 2) + i] >> (4 * (s / 2))) & 0x0F;
                    let high = (qh[32 * c + i] >> (2 * s)) & 0x03;
                    let q = (low | (high << 4)) as i8 - 32;
                    out[o + l] = dl * q as f32;
                }
            }
        }
    }
}

/// One block; `LANES` picks the scale search done sub-block by sub-block (the reference) or
/// on all sixteen at once (the same results, faster).
#[inline(always)]
fn encode_block_with<const LANES: bool>(x: &[f32; QK_K], out: &mut [u8; BYTES]) {
    let mut l = [0i8; QK_K];
    let mut scales = [0f32; 16];
    if LANES {
        let xt: [[f32; 16]; 16] = lanes::transpose_in(x);
        let mut lt = [[0i8; 16]; 16];
        scales = lanes::make_qx_quants_lanes(32, &xt, &mut lt);
        lanes::transpose_out(&lt, &mut l);
    } else {
        for (ib, s) in scales.iter_mut().enumerate() {
            *s = make_qx_quants::<16>(32, sub_array(x, 16 * ib), sub_array_mut(&mut l, 16 * ib), 1);
        }
    }
    let mut max_scale = 0f32;
    let mut max_abs_scale = 0f32;
    for &scale in &scales {
        let abs_scale = scale.abs();
        if abs_scale > max_abs_scale {
            max_abs_scale = abs_scale;
            max_scale = scale;
        }
    }
    if max_abs_scale < GROUP_MAX_EPS {
        out.fill(0);
        return;
    }
    let iscale = -128.0 / max_scale;
    let d_bits = fp16_bits(1.0 / iscale);
    let mut sc = [0i8; 16];
    for (s, &scale) in sc.iter_mut().zip(&scales) {
        *s = nearest_int(iscale * scale).min(127) as i8;
    }
    let d = f16_le(d_bits.to_le_bytes());
    for j in 0..16 {
        let dj = d * sc[j] as f32;
        if dj == 0.0 {
            continue;
        }
        for ii in 0..16 {
            let q = nearest_int(x[16 * j + ii] / dj).clamp(-32, 31);
            l[16 * j + ii] = (q + 32) as i8;
        }
    }
    let l = l.map(|v| v as u8);
    let (ql, rest) = out.split_at_mut(128);
    let (qh, rest) = rest.split_at_mut(64);
    for c in 0..2 {
        for i in 0..32 {
            let j = 128 * c + i;
            let (q1, q2, q3, q4) = (l[j], l[j + 32], l[j + 64], l[j + 96]);
            ql[64 * c + i] = (q1 & 0xF) | ((q3 & 0xF) << 4);
            ql[64 * c + i + 32] = (q2 & 0xF) | ((q4 & 0xF) << 4);
            qh[32 * c + i] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
        }
    }
    for (o, &s) in rest[..16].iter_mut().zip(&sc) {
        *o = s as u8;
    }
    rest[16..18].copy_from_slice(&d_bits.to_le_bytes());
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
