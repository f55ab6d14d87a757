//! Q8_0: blocks of 32 values, an f16 scale `d` (little endian) and 32 × i8.
//!
//! ggml's reference (`quantize_row_q8_0_ref`): `amax = max|x|`, `d = amax / 127`,
//! `id = d != 0 ? 1/d : 0`, `q = round(x * id)` (half away from zero) as `i8`; `id` is
//! computed from the f32 `d`, *before* `d` is rounded (to nearest even) to f16, which is what
//! makes the bytes identical. Decoded as `q * d`.
//!
//! NaN follows ggml's order-dependent `MAX` macro (the fast kernels hand blocks with a NaN
//! to the reference). Conversions C leaves undefined (an infinite `x * id`, when
//! a block's scale is so small that its inverse overflows, stored to an integer) give what
//! x86-64 gives: 0. Both of our versions agree on every input, finite or not.

#[cfg(target_arch = "x86_64")]
use super::simd;
use super::simd::{abs_max, block_loop, f16_bits, inverse_or_zero, round_to_i8, Kernel};
use super::{c_trunc_i32, f16_le, fp16_bits, GgmlType, Kernels, Q8_0_BLOCK_BYTES, QK};
use crate::error::Result;

/// One block as ggml's reference computes it, NaN included: `MAX(amax, |v|)` is
/// `amax > |v| ? amax : |v|`, so a NaN makes the maximum NaN until the next number replaces
/// it, and a NaN scale is stored as ggml stores it (0x7E00).
fn q8_0_block_ref(x: &[f32], out: &mut [u8]) {
    let mut amax = 0f32;
    for &v in x {
        amax = if amax > v.abs() { amax } else { v.abs() };
    }
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let (scale, qs) = out.split_at_mut(2);
    scale.copy_from_slice(&fp16_bits(d).to_le_bytes());
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = c_trunc_i32((v * id).round()) as i8 as u8;
    }
}

fn dequant_q8_0_block_ref(block: &[u8], out: &mut [f32]) {
    let d = f16_le([block[0], block[1]]);
    for (o, &q) in out.iter_mut().zip(&block[2..]) {
        *o = (q as i8) as f32 * d;
    }
}

fn encode_ref(src: &[f32], dst: &mut [u8]) {
    for (x, out) in src
        .chunks_exact(QK)
        .zip(dst.chunks_exact_mut(Q8_0_BLOCK_BYTES))
    {
        q8_0_block_ref(x, out);
    }
}

fn decode_ref(src: &[u8], dst: &mut [f32]) {
    for (block, out) in src
        .chunks_exact(Q8_0_BLOCK_BYTES)
        .zip(dst.chunks_exact_mut(QK))
    {
        dequant_q8_0_block_ref(block, out);
    }
}

/// [`q8_0_block_ref`] for the fast kernels' blocks that hold a NaN.
#[inline(never)]
pub(super) fn q8_0_block_c(x: &[f32; QK], out: &mut [u8; Q8_0_BLOCK_BYTES]) {
    q8_0_block_ref(x, out)
}

#[inline(always)]
fn q8_0_block_fast(x: &[f32; QK], out: &mut [u8; Q8_0_BLOCK_BYTES]) {
    if x.iter().fold(false, |nan, v| nan | v.is_nan()) {
        return q8_0_block_c(x, out);
    }
    let amax = abs_max(x);
    let d = amax / 127.0;
    let id = inverse_or_zero(d);
    let mut qs = [0u8; QK];
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = round_to_i8(v * id) as u8;
    }
    out[..2].copy_from_slice(&f16_bits(d).to_le_bytes());
    out[2..].copy_from_slice(&qs);
}

#[inline(always)]
fn dequant_q8_0_block_fast(block: &[u8; Q8_0_BLOCK_BYTES], out: &mut [f32; QK]) {
    let d = f16_le([block[0], block[1]]);
    for (o, &q) in out.iter_mut().zip(&block[2..]) {
        *o = (q as i8) as f32 * d;
    }
}

block_loop!(q8_0_loop, q8_0_block_fast, f32, QK, u8, Q8_0_BLOCK_BYTES);
block_loop!(
    dq8_0_loop,
    dequant_q8_0_block_fast,
    u8,
    Q8_0_BLOCK_BYTES,
    f32,
    QK
);

fn quantize_with_kernel(kernel: Kernel, src: &[f32], dst: &mut [u8]) {
    match kernel {
        Kernel::Portable => q8_0_loop(src, dst),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Kernel::Avx2` is only constructed where AVX2 and F16C were detected.
        Kernel::Avx2 => unsafe { simd::avx2::q8_0(src, dst) },
    }
}

fn dequantize_with_kernel(kernel: Kernel, src: &[u8], dst: &mut [f32]) {
    match kernel {
        Kernel::Portable => dq8_0_loop(src, dst),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Kernel::Avx2` is only constructed where AVX2 and F16C were detected.
        Kernel::Avx2 => unsafe { simd::avx2::dq8_0(src, dst) },
    }
}

fn encode_fast(src: &[f32], dst: &mut [u8]) {
    quantize_with_kernel(Kernel::best(), src, dst)
}

fn decode_fast(src: &[u8], dst: &mut [f32]) {
    dequantize_with_kernel(Kernel::best(), src, dst)
}

pub(super) const ENCODE: Kernels<f32, u8> = Kernels {
    reference: encode_ref,
    fast: encode_fast,
};
pub(super) const DECODE: Kernels<u8, f32> = Kernels {
    reference: decode_ref,
    fast: decode_fast,
};

#[cfg(test)]
use super::{check_blocks, split_blocks};

#[cfg(test)]
/// Quantize with the given compiled kernel on several threads (tests compare kernels).
pub(crate) fn quantize_q8_0_with(kernel: Kernel, src: &[f32], dst: &mut [u8]) -> Result<()> {
    check_blocks(GgmlType::Q8_0, dst.len(), src.len())?;
    split_blocks(src, QK, dst, Q8_0_BLOCK_BYTES, &|s, d| {
        quantize_with_kernel(kernel, s, d)
    })
}

#[cfg(test)]
/// Decode with the given compiled kernel on several threads (tests compare kernels).
pub(crate) fn dequantize_q8_0_with(kernel: Kernel, src: &[u8], dst: &mut [f32]) -> Result<()> {
    check_blocks(GgmlType::Q8_0, src.len(), dst.len())?;
    split_blocks(src, Q8_0_BLOCK_BYTES, dst, QK, &|s, d| {
        dequantize_with_kernel(kernel, s, d)
    })
}

/// Quantize `src` (a multiple of 32 values) into Q8_0 blocks in `dst`
/// (`src.len() / 32 * 34` bytes), one block at a time, exactly as ggml's reference does.
pub fn quantize_q8_0_ref(src: &[f32], dst: &mut [u8]) -> Result<()> {
    super::encode_ref(GgmlType::Q8_0, src, dst)
}

/// Decode Q8_0 blocks (`src.len()` a multiple of 34) into `src.len() / 34 * 32` values.
pub fn dequantize_q8_0_ref(src: &[u8], dst: &mut [f32]) -> Result<()> {
    super::decode_ref(GgmlType::Q8_0, src, dst)
}

/// Fast Q8_0 quantization, bit-identical to [`quantize_q8_0_ref`].
pub fn quantize_q8_0(src: &[f32], dst: &mut [u8]) -> Result<()> {
    super::encode(GgmlType::Q8_0, src, dst)
}

/// Fast Q8_0 decoding, bit-identical to [`dequantize_q8_0_ref`].
pub fn dequantize_q8_0(src: &[u8], dst: &mut [f32]) -> Result<()> {
    super::decode(GgmlType::Q8_0, src, dst)
}
