//! Q4_0: blocks of 32 values, an f16 scale `d` and 32 × 4 bits.
//!
//! ggml's reference (`quantize_row_q4_0_ref`): `max` is the value of largest magnitude
//! *with its sign* (the first one on ties), `d = max / -8`, `id = d != 0 ? 1/d : 0`,
//! `q = min(15, trunc(x * id + 8.5))`; byte `j` holds element `j` in its low nibble and
//! element `j + 16` in its high nibble. Decoded as `d * (q - 8)`. As for Q8_0, `id` comes
//! from the f32 `d` before it is rounded to f16, and conversions C leaves undefined give what
//! x86-64 gives (0).

#[cfg(target_arch = "x86_64")]
use super::simd;
use super::simd::{abs_max, block_loop, f16_bits, inverse_or_zero, nibble, Kernel};
use super::{c_trunc_i32, f16_le, fp16_bits, GgmlType, Kernels, Q4_0_BLOCK_BYTES, QK};
use crate::error::Result;

fn q4_0_block_ref(x: &[f32], out: &mut [u8]) {
    let mut amax = 0f32;
    let mut max = 0f32;
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    let d = max / -8.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let (scale, qs) = out.split_at_mut(2);
    scale.copy_from_slice(&fp16_bits(d).to_le_bytes());
    let (low, high) = x.split_at(QK / 2);
    for ((q, &x0), &x1) in qs.iter_mut().zip(low).zip(high) {
        let xi0 = (c_trunc_i32(x0 * id + 8.5) as i8).min(15) as u8;
        let xi1 = (c_trunc_i32(x1 * id + 8.5) as i8).min(15) as u8;
        *q = xi0 | (xi1 << 4);
    }
}

fn dequant_q4_0_block_ref(block: &[u8], out: &mut [f32]) {
    let d = f16_le([block[0], block[1]]);
    let (low, high) = out.split_at_mut(QK / 2);
    for ((&q, lo), hi) in block[2..].iter().zip(low).zip(high) {
        *lo = ((q & 0x0F) as i32 - 8) as f32 * d;
        *hi = ((q >> 4) as i32 - 8) as f32 * d;
    }
}

fn encode_ref(src: &[f32], dst: &mut [u8]) {
    for (x, out) in src
        .chunks_exact(QK)
        .zip(dst.chunks_exact_mut(Q4_0_BLOCK_BYTES))
    {
        q4_0_block_ref(x, out);
    }
}

fn decode_ref(src: &[u8], dst: &mut [f32]) {
    for (block, out) in src
        .chunks_exact(Q4_0_BLOCK_BYTES)
        .zip(dst.chunks_exact_mut(QK))
    {
        dequant_q4_0_block_ref(block, out);
    }
}

/// A Q4_0 block's scale `d` and its inverse, from the block's largest magnitude `amax` and
/// the mask of the elements with |x| == amax (asked for only when amax > 0). The reference
/// keeps the first value reaching the maximum magnitude, sign included — the lowest set bit
/// of the mask — and an all-zero (or all-NaN) block keeps its initial +0.0.
#[inline(always)]
pub(super) fn q4_0_scale(x: &[f32; QK], amax: f32, at_max: impl FnOnce() -> u32) -> (f32, f32) {
    let max = if amax > 0.0 {
        x.get(at_max().trailing_zeros() as usize)
            .copied()
            .unwrap_or(0.0)
    } else {
        0.0
    };
    let d = max / -8.0;
    (d, inverse_or_zero(d))
}

#[inline(always)]
fn q4_0_block_fast(x: &[f32; QK], out: &mut [u8; Q4_0_BLOCK_BYTES]) {
    let amax = abs_max(x);
    let (d, id) = q4_0_scale(x, amax, || {
        let mut at_max = 0u32;
        for (j, &v) in x.iter().enumerate() {
            at_max |= u32::from(v.abs() == amax) << j;
        }
        at_max
    });
    let mut nibbles = [0u8; QK];
    for (n, &v) in nibbles.iter_mut().zip(x) {
        *n = nibble(v * id + 8.5);
    }
    let mut qs = [0u8; QK / 2];
    for (j, q) in qs.iter_mut().enumerate() {
        *q = nibbles[j] | (nibbles[j + QK / 2] << 4);
    }
    out[..2].copy_from_slice(&f16_bits(d).to_le_bytes());
    out[2..].copy_from_slice(&qs);
}

#[inline(always)]
fn dequant_q4_0_block_fast(block: &[u8; Q4_0_BLOCK_BYTES], out: &mut [f32; QK]) {
    let d = f16_le([block[0], block[1]]);
    for j in 0..QK / 2 {
        let q = block[2 + j];
        out[j] = ((q & 0x0F) as i32 - 8) as f32 * d;
        out[j + QK / 2] = ((q >> 4) as i32 - 8) as f32 * d;
    }
}

block_loop!(q4_0_loop, q4_0_block_fast, f32, QK, u8, Q4_0_BLOCK_BYTES);
block_loop!(
    dq4_0_loop,
    dequant_q4_0_block_fast,
    u8,
    Q4_0_BLOCK_BYTES,
    f32,
    QK
);

fn quantize_with_kernel(kernel: Kernel, src: &[f32], dst: &mut [u8]) {
    match kernel {
        Kernel::Portable => q4_0_loop(src, dst),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Kernel::Avx2` is only constructed where AVX2 and F16C were detected.
        Kernel::Avx2 => unsafe { simd::avx2::q4_0(src, dst) },
    }
}

fn dequantize_with_kernel(kernel: Kernel, src: &[u8], dst: &mut [f32]) {
    match kernel {
        Kernel::Portable => dq4_0_loop(src, dst),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Kernel::Avx2` is only constructed where AVX2 and F16C were detected.
        Kernel::Avx2 => unsafe { simd::avx2::dq4_0(src, dst) },
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
pub(crate) fn quantize_q4_0_with(kernel: Kernel, src: &[f32], dst: &mut [u8]) -> Result<()> {
    check_blocks(GgmlType::Q4_0, dst.len(), src.len())?;
    split_blocks(src, QK, dst, Q4_0_BLOCK_BYTES, &|s, d| {
        quantize_with_kernel(kernel, s, d)
    })
}

#[cfg(test)]
/// Decode with the given compiled kernel on several threads (tests compare kernels).
pub(crate) fn dequantize_q4_0_with(kernel: Kernel, src: &[u8], dst: &mut [f32]) -> Result<()> {
    check_blocks(GgmlType::Q4_0, src.len(), dst.len())?;
    split_blocks(src, Q4_0_BLOCK_BYTES, dst, QK, &|s, d| {
        dequantize_with_kernel(kernel, s, d)
    })
}

/// Quantize `src` (a multiple of 32 values) into Q4_0 blocks in `dst`
/// (`src.len() / 32 * 18` bytes), one block at a time, exactly as ggml's reference does.
pub fn quantize_q4_0_ref(src: &[f32], dst: &mut [u8]) -> Result<()> {
    super::encode_ref(GgmlType::Q4_0, src, dst)
}

/// Decode Q4_0 blocks (`src.len()` a multiple of 18) into `src.len() / 18 * 32` values.
pub fn dequantize_q4_0_ref(src: &[u8], dst: &mut [f32]) -> Result<()> {
    super::decode_ref(GgmlType::Q4_0, src, dst)
}

/// Fast Q4_0 quantization, bit-identical to [`quantize_q4_0_ref`].
pub fn quantize_q4_0(src: &[f32], dst: &mut [u8]) -> Result<()> {
    super::encode(GgmlType::Q4_0, src, dst)
}

/// Fast Q4_0 decoding, bit-identical to [`dequantize_q4_0_ref`].
pub fn dequantize_q4_0(src: &[u8], dst: &mut [f32]) -> Result<()> {
    super::decode(GgmlType::Q4_0, src, dst)
}
