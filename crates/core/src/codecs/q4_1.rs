//! Q4_1: blocks of 32 values, f16 scale `d`, f16 minimum `m`, 32 × 4 bits (element `j` in the
//! low nibble of byte `j`, element `j + 16` in its high nibble).
//!
//! Decoded as gguf-py does: `(d * q) + m`. Encoded as `quantize_row_q4_1_ref`: the block's
//! minimum and maximum by `<` / `>` from ±FLT_MAX (NaN never wins), `d = (max - min) / 15`,
//! `id = d != 0 ? 1/d : 0`, `q = min(15, (int8_t)((x - min) * id + 0.5))`.

use super::simd::{block_loop, fast_kernel};
use super::{add_nan_first, c_trunc_i32, f16_le, fp16_bits, Kernels, QK};

const BYTES: usize = 20;

#[inline(always)]
fn decode_block(b: &[u8; BYTES], out: &mut [f32; QK]) {
    let d = f16_le([b[0], b[1]]);
    let m = f16_le([b[2], b[3]]);
    for j in 0..QK / 2 {
        let q = b[4 + j];
        out[j] = add_nan_first(d * (q & 0x0F) as f32, m);
        out[j + QK / 2] = add_nan_first(d * (q >> 4) as f32, m);
    }
}

/// `MIN(15, (int8_t)(y))` stored to a `uint8_t`, as C on x86-64 computes it.
#[inline(always)]
fn nibble_c(y: f32) -> u8 {
    (c_trunc_i32(y) as i8).min(15) as u8
}

#[inline(always)]
fn encode_block(x: &[f32; QK], out: &mut [u8; BYTES]) {
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
    let d = (max - min) / 15.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    out[0..2].copy_from_slice(&fp16_bits(d).to_le_bytes());
    out[2..4].copy_from_slice(&fp16_bits(min).to_le_bytes());
    for j in 0..QK / 2 {
        let x0 = (x[j] - min) * id;
        let x1 = (x[j + QK / 2] - min) * id;
        out[4 + j] = nibble_c(x0 + 0.5) | (nibble_c(x1 + 0.5) << 4);
    }
}

block_loop!(decode_blocks, decode_block, u8, BYTES, f32, QK);
block_loop!(encode_blocks, encode_block, f32, QK, u8, BYTES);
fast_kernel!(decode_fast, decode_blocks, u8, f32);
fast_kernel!(encode_fast, encode_blocks, f32, u8);

pub(super) const DECODE: Kernels<u8, f32> = Kernels {
    reference: decode_blocks,
    fast: decode_fast,
};
pub(super) const ENCODE: Kernels<f32, u8> = Kernels {
    reference: encode_blocks,
    fast: encode_fast,
};
