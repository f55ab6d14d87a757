//! Q3_K (110 bytes per 256 values): `hmask[32]` (third bits), `qs[64]` (low 2 bits),
//! `scales[12]` (16 six-bit signed scales), f16 `d`.
//!
//! Value `f` (sub-block `j = f / 16`): `(d * sc[j]) * q` with `q = low - 4 * (1 - high)`,
//! `low` from `qs` as in Q2_K, `high` = bit `f / 32` of `hmask[f % 32]`; scale `k` is
//! `((scales[k % 8] >> 4 * (k / 8)) & 15) | ((scales[8 + k % 4] >> 2 * (k / 4)) & 3) << 4`,
//! minus 32.

use super::super::simd::{block_loop, fast_kernel};
use super::super::{f16_le, fp16_bits, nearest_int, Kernels, QK_K};
use super::make_q3_quants;
use super::q2_k::pack_2bit;

const BYTES: usize = 110;

/// The 16 signed 6-bit scales, as gguf-py unpacks them.
#[inline(always)]
fn unpack_scales(s: &[u8]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for (k, o) in out.iter_mut().enumerate() {
        let low = (s[k % 8] >> (4 * (k / 8))) & 0x0F;
        let high = (s[8 + k % 4] >> (2 * (k / 4))) & 0x03;
        *o = (low | (high << 4)) as i8 - 32;
    }
    out
}

#[inline(always)]
fn decode_block(b: &[u8; BYTES], out: &mut [f32; QK_K]) {
    let (hmask, qs, scales) = (&b[..32], &b[32..96], &b[96..108]);
    let d = f16_le([b[108], b[109]]);
    let sc = unpack_scales(scales);
    // Values 128h + 32s + l: bits 2s..2s+2 of qs[32h + l], high bit 4h + s of hmask[l],
    // sub-block 8h + 2s + l / 16.
    for h in 0..2 {
        for s in 0..4 {
            for half in 0..2 {
                let dl = d * sc[8 * h + 2 * s + half] as f32;
                let o = 128 * h + 32 * s + 16 * half;
                for l in 0..16 {
                    let i = 16 * half + l;
                    let low = ((qs[32 * h + i] >> (2 * s)) & 3) as i8;
                    let high = ((hmask[i] >> (4 * h + s)) & 1) ^ 1;
                    let q = low - (high << 2) as i8;
                    out[o + l] = dl * q as f32;
                }
            }
        }
    }
}

#[inline(always)]
fn encode_block(x: &[f32; QK_K], out: &mut [u8; BYTES]) {
    let mut l = [0i8; QK_K];
    let mut scales = [0f32; 16];
    let mut max_scale = 0f32;
    let mut amax = 0f32;
    for j in 0..16 {
        scales[j] = make_q3_quants(4, &x[16 * j..16 * j + 16], &mut l[16 * j..16 * j + 16]);
        let scale = scales[j].abs();
        if scale > amax {
            amax = scale;
            max_scale = scales[j];
        }
    }
    let mut sb = [0u8; 12];
    let d_bits = if max_scale != 0.0 {
        let iscale = -32.0 / max_scale;
        for (j, &scale) in scales.iter().enumerate() {
            let q = nearest_int(iscale * scale) as i8;
            let q = (q.clamp(-32, 31) + 32) as u8;
            if j < 8 {
                sb[j] = q & 0xF;
            } else {
                sb[j - 8] |= (q & 0xF) << 4;
            }
            sb[j % 4 + 8] |= (q >> 4) << (2 * (j / 4));
        }
        fp16_bits(1.0 / iscale)
    } else {
        fp16_bits(0.0)
    };
    let d = f16_le(d_bits.to_le_bytes());
    for j in 0..16 {
        let low = if j < 8 { sb[j] & 0xF } else { sb[j - 8] >> 4 };
        let sc = (low | (((sb[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) as i32 - 32;
        let dj = d * sc as f32;
        if dj == 0.0 {
            continue;
        }
        for ii in 0..16 {
            let q = nearest_int(x[16 * j + ii] / dj).clamp(-4, 3);
            l[16 * j + ii] = (q + 4) as i8;
        }
    }
    // High bits: the first 32 values in bit 0 of hmask[0..32], the next 32 in bit 1, ...
    let mut hmask = [0u8; 32];
    let mut low = [0u8; QK_K];
    for j in 0..QK_K {
        let mut q = l[j];
        if q > 3 {
            hmask[j % 32] |= 1 << (j / 32);
            q -= 4;
        }
        low[j] = q as u8;
    }
    out[..32].copy_from_slice(&hmask);
    pack_2bit(&low, &mut out[32..96]);
    out[96..108].copy_from_slice(&sb);
    out[108..110].copy_from_slice(&d_bits.to_le_bytes());
}

block_loop!(decode_blocks, decode_block, u8, BYTES, f32, QK_K);
block_loop!(encode_blocks, encode_block, f32, QK_K, u8, BYTES);
fast_kernel!(decode_fast, decode_blocks, u8, f32);
fast_kernel!(encode_fast, encode_blocks, f32, u8);

pub(in crate::codecs) const DECODE: Kernels<u8, f32> = Kernels {
    reference: decode_blocks,
    fast: decode_fast,
};
pub(in crate::codecs) const ENCODE: Kernels<f32, u8> = Kernels {
    reference: encode_blocks,
    fast: encode_fast,
};
