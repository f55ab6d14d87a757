//! The plain float types: F32, F16 and BF16 (one element per "block").
//!
//! gguf-py's `dequantize` reads F32 as is, widens F16 with numpy's `astype(np.float32)`
//! (exact; NaN payloads kept, signalling NaNs not made quiet, unlike the F16C instruction)
//! and BF16 by shifting its bits into the top half of an f32.
//! Encoding: F16 rounds to nearest even (`cast::encode_f16_into`); BF16 is ggml's
//! `ggml_compute_fp32_to_bf16` (round to nearest even on the bits, NaN made quiet).

use super::simd::fast_kernel;
use super::{f16_le, Kernels};
use crate::cast;

fn f32_decode(src: &[u8], dst: &mut [f32]) {
    for (o, b) in dst.iter_mut().zip(src.chunks_exact(4)) {
        *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
}

fn f32_encode(src: &[f32], dst: &mut [u8]) {
    for (o, &v) in dst.chunks_exact_mut(4).zip(src) {
        o.copy_from_slice(&v.to_le_bytes());
    }
}

#[inline(always)]
fn f16_decode_loop(src: &[u8], dst: &mut [f32]) {
    for (o, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
        *o = f16_le([b[0], b[1]]);
    }
}

fast_kernel!(f16_decode, f16_decode_loop, u8, f32);

fn f16_encode_fast(src: &[f32], dst: &mut [u8]) {
    let mut bytes = Vec::new();
    cast::encode_f16_into(src, &mut bytes);
    dst.copy_from_slice(&bytes);
}

fn bf16_decode(src: &[u8], dst: &mut [f32]) {
    for (o, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
        *o = f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16);
    }
}

/// ggml's `ggml_compute_fp32_to_bf16`.
#[inline(always)]
pub(crate) fn bf16_bits(x: f32) -> u16 {
    let u = x.to_bits();
    if u & 0x7FFF_FFFF > 0x7F80_0000 {
        // NaN: keep the top bits, force quiet.
        return ((u >> 16) | 64) as u16;
    }
    ((u as u64 + (0x7FFF + ((u >> 16) & 1)) as u64) >> 16) as u16
}

fn bf16_encode(src: &[f32], dst: &mut [u8]) {
    for (o, &v) in dst.chunks_exact_mut(2).zip(src) {
        o.copy_from_slice(&bf16_bits(v).to_le_bytes());
    }
}

pub(super) const F32_DECODE: Kernels<u8, f32> = Kernels {
    reference: f32_decode,
    fast: f32_decode,
};
pub(super) const F32_ENCODE: Kernels<f32, u8> = Kernels {
    reference: f32_encode,
    fast: f32_encode,
};
pub(super) const F16_DECODE: Kernels<u8, f32> = Kernels {
    reference: f16_decode_loop,
    fast: f16_decode,
};
pub(super) const F16_ENCODE: Kernels<f32, u8> = Kernels {
    reference: f16_encode_fast,
    fast: f16_encode_fast,
};
pub(super) const BF16_DECODE: Kernels<u8, f32> = Kernels {
    reference: bf16_decode,
    fast: bf16_decode,
};
pub(super) const BF16_ENCODE: Kernels<f32, u8> = Kernels {
    reference: bf16_encode,
    fast: bf16_encode,
};
