//! Q5_0 and Q5_1: blocks of 32 values with 5-bit quants: the low 4 bits as in Q4_0/Q4_1
//! (element `j` in the low nibble of byte `j`, element `j + 16` in the high nibble), the
//! fifth bits in a little-endian u32 `qh` (bit `j` for element `j`).
//!
//! * **Q5_0** (22 bytes: `d`, `qh`, 16 bytes): decoded as gguf-py does, `d * (q - 16)`;
//!   encoded as `quantize_row_q5_0_ref`: the first value of largest magnitude `max` (sign
//!   kept), `d = max / -16`, `q = min(31, (int8_t)(x * id + 16.5))`.
//! * **Q5_1** (24 bytes: `d`, `m`, `qh`, 16 bytes): decoded as `(d * q) + m`; encoded as
//!   `quantize_row_q5_1_ref`: minimum and maximum, `d = (max - min) / 31`,
//!   `q = (uint8_t)((x - min) * id + 0.5)`.
//!
//! Float-to-integer conversions that C leaves undefined give what x86-64 gives
//! ([`c_trunc_i32`]).

use super::simd::{block_loop, fast_kernel};
use super::{add_nan_first, c_trunc_i32, f16_le, fp16_bits, Kernels, QK};

const Q5_0_BYTES: usize = 22;
const Q5_1_BYTES: usize = 24;

/// The 32 five-bit quants of `qh` (4 bytes) and `qs` (16 bytes).
#[inline(always)]
fn quants(qh: [u8; 4], qs: &[u8]) -> [u8; QK] {
    let qh = u32::from_le_bytes(qh);
    let mut q = [0u8; QK];
    for j in 0..QK / 2 {
        let hi0 = ((qh >> j) & 1) as u8;
        let hi1 = ((qh >> (j + QK / 2)) & 1) as u8;
        q[j] = (qs[j] & 0x0F) | (hi0 << 4);
        q[j + QK / 2] = (qs[j] >> 4) | (hi1 << 4);
    }
    q
}

/// The 32 quants packed as `qh` (fifth bits) and 16 bytes of nibbles, as ggml packs them.
#[inline(always)]
fn pack(q: &[u8; QK], out: &mut [u8]) {
    let mut qh = 0u32;
    for j in 0..QK / 2 {
        let (xi0, xi1) = (q[j], q[j + QK / 2]);
        out[4 + j] = (xi0 & 0x0F) | ((xi1 & 0x0F) << 4);
        qh |= (((xi0 & 0x10) >> 4) as u32) << j;
        qh |= (((xi1 & 0x10) >> 4) as u32) << (j + QK / 2);
    }
    out[..4].copy_from_slice(&qh.to_le_bytes());
}

#[inline(always)]
fn q5_0_decode_block(b: &[u8; Q5_0_BYTES], out: &mut [f32; QK]) {
    let d = f16_le([b[0], b[1]]);
    let q = quants([b[2], b[3], b[4], b[5]], &b[6..]);
    for (o, &q) in out.iter_mut().zip(&q) {
        *o = d * (q as i8 - 16) as f32;
    }
}

#[inline(always)]
fn q5_1_decode_block(b: &[u8; Q5_1_BYTES], out: &mut [f32; QK]) {
    let d = f16_le([b[0], b[1]]);
    let m = f16_le([b[2], b[3]]);
    let q = quants([b[4], b[5], b[6], b[7]], &b[8..]);
    for (o, &q) in out.iter_mut().zip(&q) {
        *o = add_nan_first(d * q as f32, m);
    }
}

#[inline(always)]
fn q5_0_encode_block(x: &[f32; QK], out: &mut [u8; Q5_0_BYTES]) {
    let mut amax = 0f32;
    let mut max = 0f32;
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    let d = max / -16.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    out[..2].copy_from_slice(&fp16_bits(d).to_le_bytes());
    let mut q = [0u8; QK];
    for (q, &v) in q.iter_mut().zip(x) {
        *q = (c_trunc_i32(v * id + 16.5) as i8).min(31) as u8;
    }
    pack(&q, &mut out[2..]);
}

#[inline(always)]
fn q5_1_encode_block(x: &[f32; QK], out: &mut [u8; Q5_1_BYTES]) {
    let mut min = f32::MAX;
    let mut max = -f32::MAX;
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    let d = (max - min) / 31.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    out[0..2].copy_from_slice(&fp16_bits(d).to_le_bytes());
    out[2..4].copy_from_slice(&fp16_bits(min).to_le_bytes());
    let mut q = [0u8; QK];
    for (q, &v) in q.iter_mut().zip(x) {
        *q = c_trunc_i32((v - min) * id + 0.5) as u8;
    }
    pack(&q, &mut out[4..]);
}

block_loop!(q5_0_decode, q5_0_decode_block, u8, Q5_0_BYTES, f32, QK);
block_loop!(q5_1_decode, q5_1_decode_block, u8, Q5_1_BYTES, f32, QK);
block_loop!(q5_0_encode, q5_0_encode_block, f32, QK, u8, Q5_0_BYTES);
block_loop!(q5_1_encode, q5_1_encode_block, f32, QK, u8, Q5_1_BYTES);
fast_kernel!(q5_0_decode_fast, q5_0_decode, u8, f32);
fast_kernel!(q5_1_decode_fast, q5_1_decode, u8, f32);
fast_kernel!(q5_0_encode_fast, q5_0_encode, f32, u8);
fast_kernel!(q5_1_encode_fast, q5_1_encode, f32, u8);

pub(super) const Q5_0_DECODE: Kernels<u8, f32> = Kernels {
    reference: q5_0_decode,
    fast: q5_0_decode_fast,
};
pub(super) const Q5_1_DECODE: Kernels<u8, f32> = Kernels {
    reference: q5_1_decode,
    fast: q5_1_decode_fast,
};
pub(super) const Q5_0_ENCODE: Kernels<f32, u8> = Kernels {
    reference: q5_0_encode,
    fast: q5_0_encode_fast,
};
pub(super) const Q5_1_ENCODE: Kernels<f32, u8> = Kernels {
    reference: q5_1_encode,
    fast: q5_1_encode_fast,
};
