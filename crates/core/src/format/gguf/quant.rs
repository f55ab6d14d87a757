//! Q8_0 and Q4_0 block quantization, bit-identical to ggml's reference quantizers.
//!
//! Both formats cut a row into blocks of 32 values and store one f16 scale `d` (little
//! endian) followed by the quantized values:
//!
//! * **Q8_0** (34 bytes): `amax = max|x|`, `d = amax / 127`, `id = d != 0 ? 1/d : 0`,
//!   `q = round(x * id)` (half away from zero) as `i8`. Decoded as `d * q`.
//! * **Q4_0** (18 bytes): `max` is the value of largest magnitude *with its sign* (the first
//!   one on ties), `d = max / -8`, `id = d != 0 ? 1/d : 0`, `q = min(15, trunc(x * id + 8.5))`;
//!   byte `j` holds element `j` in its low nibble and element `j + 16` in its high nibble.
//!   Decoded as `d * (q - 8)`.
//!
//! `id` is computed from the f32 `d`, *before* `d` is rounded (to nearest even) to f16; that is
//! what ggml does and what makes the bytes identical.
//!
//! Every function comes in a plain scalar reference (`*_ref`, one block at a time, written
//! like the formulas above) and a fast version (portable fixed-size block kernels, AVX2 + F16C
//! intrinsics picked at run time, and several threads for large inputs). Tests check the fast
//! versions against the references bit for bit, on edge blocks and random bit patterns.
//!
//! Non-finite inputs: NaN never wins the maximum (ggml's order-dependent `MAX` macro may let
//! one through; the result is garbage either way), and conversions that C leaves undefined
//! (an infinite `x * id` stored to an integer) saturate as Rust's `as` does. Both of our
//! versions agree on every input, finite or not.

use crate::error::{CoreError, Result};
use half::f16;
use std::sync::Mutex;

/// Elements per Q8_0 / Q4_0 block.
pub const QK: usize = 32;
/// Bytes of one Q8_0 block: f16 scale + 32 × i8.
pub const Q8_0_BLOCK_BYTES: usize = 2 + QK;
/// Bytes of one Q4_0 block: f16 scale + 32 × 4 bits.
pub const Q4_0_BLOCK_BYTES: usize = 2 + QK / 2;

/// Below this many blocks (512 Ki elements) a second thread costs more than it saves.
const PARALLEL_MIN_BLOCKS: usize = 1 << 14;

fn check_lengths(src_len: usize, src_unit: usize, dst_len: usize, dst_unit: usize) -> Result<()> {
    if !src_len.is_multiple_of(src_unit)
        || !dst_len.is_multiple_of(dst_unit)
        || src_len / src_unit != dst_len / dst_unit
    {
        return Err(CoreError::invalid_argument(format!(
            "{src_len} source units (blocks of {src_unit}) do not match {dst_len} destination \
             units (blocks of {dst_unit})"
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Reference versions: one block at a time, written as the formulas read.

fn q8_0_block_ref(x: &[f32], out: &mut [u8]) {
    let mut amax = 0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
        }
    }
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let (scale, qs) = out.split_at_mut(2);
    scale.copy_from_slice(&f16::from_f32(d).to_bits().to_le_bytes());
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = (v * id).round() as i8 as u8;
    }
}

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
    scale.copy_from_slice(&f16::from_f32(d).to_bits().to_le_bytes());
    let (low, high) = x.split_at(QK / 2);
    for ((q, &x0), &x1) in qs.iter_mut().zip(low).zip(high) {
        let xi0 = ((x0 * id + 8.5) as i8).min(15) as u8;
        let xi1 = ((x1 * id + 8.5) as i8).min(15) as u8;
        *q = xi0 | (xi1 << 4);
    }
}

/// Quantize `src` (a multiple of 32 values) into Q8_0 blocks in `dst`
/// (`src.len() / 32 * 34` bytes), one block at a time, exactly as ggml's reference does.
pub fn quantize_q8_0_ref(src: &[f32], dst: &mut [u8]) -> Result<()> {
    check_lengths(src.len(), QK, dst.len(), Q8_0_BLOCK_BYTES)?;
    for (x, out) in src
        .chunks_exact(QK)
        .zip(dst.chunks_exact_mut(Q8_0_BLOCK_BYTES))
    {
        q8_0_block_ref(x, out);
    }
    Ok(())
}

/// Quantize `src` (a multiple of 32 values) into Q4_0 blocks in `dst`
/// (`src.len() / 32 * 18` bytes), one block at a time, exactly as ggml's reference does.
pub fn quantize_q4_0_ref(src: &[f32], dst: &mut [u8]) -> Result<()> {
    check_lengths(src.len(), QK, dst.len(), Q4_0_BLOCK_BYTES)?;
    for (x, out) in src
        .chunks_exact(QK)
        .zip(dst.chunks_exact_mut(Q4_0_BLOCK_BYTES))
    {
        q4_0_block_ref(x, out);
    }
    Ok(())
}

fn dequant_q8_0_block_ref(block: &[u8], out: &mut [f32]) {
    let d = f16::from_bits(u16::from_le_bytes([block[0], block[1]])).to_f32();
    for (o, &q) in out.iter_mut().zip(&block[2..]) {
        *o = (q as i8) as f32 * d;
    }
}

fn dequant_q4_0_block_ref(block: &[u8], out: &mut [f32]) {
    let d = f16::from_bits(u16::from_le_bytes([block[0], block[1]])).to_f32();
    let (low, high) = out.split_at_mut(QK / 2);
    for ((&q, lo), hi) in block[2..].iter().zip(low).zip(high) {
        *lo = ((q & 0x0F) as i32 - 8) as f32 * d;
        *hi = ((q >> 4) as i32 - 8) as f32 * d;
    }
}

/// Decode Q8_0 blocks (`src.len()` a multiple of 34) into `src.len() / 34 * 32` values.
pub fn dequantize_q8_0_ref(src: &[u8], dst: &mut [f32]) -> Result<()> {
    check_lengths(dst.len(), QK, src.len(), Q8_0_BLOCK_BYTES)?;
    for (block, out) in src
        .chunks_exact(Q8_0_BLOCK_BYTES)
        .zip(dst.chunks_exact_mut(QK))
    {
        dequant_q8_0_block_ref(block, out);
    }
    Ok(())
}

/// Decode Q4_0 blocks (`src.len()` a multiple of 18) into `src.len() / 18 * 32` values.
pub fn dequantize_q4_0_ref(src: &[u8], dst: &mut [f32]) -> Result<()> {
    check_lengths(dst.len(), QK, src.len(), Q4_0_BLOCK_BYTES)?;
    for (block, out) in src
        .chunks_exact(Q4_0_BLOCK_BYTES)
        .zip(dst.chunks_exact_mut(QK))
    {
        dequant_q4_0_block_ref(block, out);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Fast versions. The block kernels work on fixed-size arrays with 8 independent lanes for
// the maximum, so the compiler vectorises them without reordering anything that changes
// the result (a maximum is exact in any order). They are `inline(always)` so that the AVX2
// wrappers below get their own vectorised copy.

/// `round(y) as i8` (half away from zero, saturating, NaN → 0) in operations that vectorise
/// (`roundf` does not, nor does the saturating `as`). Clamping first keeps the truncation in
/// range and commutes with rounding at integer bounds. The fractional part `y - trunc(y)` is
/// exact for |y| < 2^23.
#[inline(always)]
fn round_to_i8(y: f32) -> i8 {
    let y = clamp_or_zero(y, -128.0, 127.0);
    let t = trunc_small(y);
    let frac = y - t as f32;
    (t + (frac >= 0.5) as i32 - (frac <= -0.5) as i32) as i8
}

/// `(y as i8).min(15) as u8` in operations that vectorise: capping at 15 before truncating
/// gives the same integer (truncation is monotonic and 15 is whole).
#[inline(always)]
fn nibble(y: f32) -> u8 {
    trunc_small(clamp_or_zero(y, -128.0, 15.0)) as i8 as u8
}

/// `y` clamped to `[lo, hi]`, NaN becoming 0: two compares and selects per vector.
#[inline(always)]
fn clamp_or_zero(y: f32, lo: f32, hi: f32) -> f32 {
    let y = if y > hi { hi } else { y };
    let y = if y < lo { lo } else { y };
    // The comparisons above let NaN through.
    if y.is_nan() {
        0.0
    } else {
        y
    }
}

/// Truncation toward zero of a value already clamped by [`clamp_or_zero`] to a small range:
/// one `cvttps2dq` per vector, where the saturating `as` is scalarised.
#[inline(always)]
fn trunc_small(y: f32) -> i32 {
    debug_assert!(y.abs() <= 128.0);
    // SAFETY: callers pass finite values within [-128, 127], inside i32's range.
    unsafe { y.to_int_unchecked::<i32>() }
}

/// `d` as f16 bits, rounded to nearest even: the same as `f16::from_f32`, but in plain Rust
/// that inlines into the block loops (that one calls out, per block, to a runtime-dispatched
/// F16C routine, spilling the vector registers around the call).
#[inline(always)]
fn f16_bits(d: f32) -> u16 {
    f16::from_f32_const(d).to_bits()
}

#[inline(always)]
fn abs_max(x: &[f32; QK]) -> f32 {
    let mut lanes = [0f32; 8];
    for chunk in x.chunks_exact(8) {
        for (m, &v) in lanes.iter_mut().zip(chunk) {
            // `max` returns the other operand when one is NaN: NaN never becomes the maximum,
            // as with the reference's `>`. Unlike that compare-and-select, it compiles to
            // packed maxima.
            *m = m.max(v.abs());
        }
    }
    lanes.into_iter().fold(0f32, f32::max)
}

#[inline(always)]
fn q8_0_block_fast(x: &[f32; QK], out: &mut [u8; Q8_0_BLOCK_BYTES]) {
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

/// `1 / d`, or 0 for a zero scale (an all-zero block), as the reference computes it.
#[inline(always)]
fn inverse_or_zero(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// A Q4_0 block's scale `d` and its inverse, from the block's largest magnitude `amax` and
/// the mask of the elements with |x| == amax (asked for only when amax > 0). The reference
/// keeps the first value reaching the maximum magnitude, sign included — the lowest set bit
/// of the mask — and an all-zero (or all-NaN) block keeps its initial +0.0.
#[inline(always)]
fn q4_0_scale(x: &[f32; QK], amax: f32, at_max: impl FnOnce() -> u32) -> (f32, f32) {
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
fn dequant_q8_0_block_fast(block: &[u8; Q8_0_BLOCK_BYTES], out: &mut [f32; QK]) {
    let d = f16::from_bits(u16::from_le_bytes([block[0], block[1]])).to_f32();
    for (o, &q) in out.iter_mut().zip(&block[2..]) {
        *o = (q as i8) as f32 * d;
    }
}

#[inline(always)]
fn dequant_q4_0_block_fast(block: &[u8; Q4_0_BLOCK_BYTES], out: &mut [f32; QK]) {
    let d = f16::from_bits(u16::from_le_bytes([block[0], block[1]])).to_f32();
    for j in 0..QK / 2 {
        let q = block[2 + j];
        out[j] = ((q & 0x0F) as i32 - 8) as f32 * d;
        out[j + QK / 2] = ((q >> 4) as i32 - 8) as f32 * d;
    }
}

/// Runs a block kernel over every (source block, destination block) pair.
macro_rules! block_loop {
    ($name:ident, $kernel:ident, $s:ty, $sn:expr, $d:ty, $dn:expr) => {
        #[inline(always)]
        fn $name(src: &[$s], dst: &mut [$d]) {
            for (s, d) in src.chunks_exact($sn).zip(dst.chunks_exact_mut($dn)) {
                // chunks_exact guarantees the sizes; the conversions cannot fail.
                if let (Ok(s), Ok(d)) = (<&[$s; $sn]>::try_from(s), <&mut [$d; $dn]>::try_from(d)) {
                    $kernel(s, d);
                }
            }
        }
    };
}
block_loop!(q8_0_loop, q8_0_block_fast, f32, QK, u8, Q8_0_BLOCK_BYTES);
block_loop!(q4_0_loop, q4_0_block_fast, f32, QK, u8, Q4_0_BLOCK_BYTES);
block_loop!(
    dq8_0_loop,
    dequant_q8_0_block_fast,
    u8,
    Q8_0_BLOCK_BYTES,
    f32,
    QK
);
block_loop!(
    dq4_0_loop,
    dequant_q4_0_block_fast,
    u8,
    Q4_0_BLOCK_BYTES,
    f32,
    QK
);

/// Which compiled copy of the block loops to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// Baseline target features (SSE2 on x86-64).
    Portable,
    /// AVX2 + F16C kernels; chosen only when the CPU has both.
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Kernel {
    pub(crate) fn best() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("f16c")
        {
            return Kernel::Avx2;
        }
        Kernel::Portable
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    //! AVX2 (+ F16C) versions of the block loops. Callers must have checked that the CPU has
    //! both ([`Kernel::best`](super::Kernel::best)).
    //!
    //! The quantizers are written in intrinsics: LLVM kept the portable kernels' maximum
    //! (`f32::max`, whose NaN rule is not `maxps`'s) and the Q4_0 first-index search scalar,
    //! one element at a time, and that loop, not memory, set the speed (profiled: 55% of the
    //! Q8_0 time on the scalar loads feeding `vmaxss`). Each step below computes exactly what
    //! the reference computes, so the bytes stay identical:
    //!
    //! * `maxps(a, b)` returns `b` when either is NaN, so `maxps(|x|, acc)` with a NaN-free
    //!   accumulator skips NaN as the reference's `>` does; a maximum is exact in any order.
    //! * The first index of the maximum magnitude is the lowest bit of the movemask of
    //!   `|x| == amax` (as the portable kernel computes it, one lane at a time).
    //! * Multiplies and adds stay separate (no FMA): the reference rounds after each.
    //! * Rounding half away from zero is `t = trunc(y)` plus the sign of `y - t` where
    //!   `|y - t| >= 0.5` (exact for the clamped range), as in `round_to_i8`.
    //! * The f16 scale is `vcvtps2ph` with round-to-nearest-even: IEEE conversion, the same
    //!   bits as `f16::from_f32` for every non-NaN value (the scale is never NaN).
    use super::{inverse_or_zero, q4_0_scale, Q4_0_BLOCK_BYTES, Q8_0_BLOCK_BYTES, QK};
    use std::arch::x86_64::*;

    macro_rules! avx2_copy {
        ($name:ident, $inner:path, $s:ty, $d:ty) => {
            /// # Safety
            /// The CPU must support AVX2.
            #[target_feature(enable = "avx2")]
            pub(super) unsafe fn $name(src: &[$s], dst: &mut [$d]) {
                $inner(src, dst)
            }
        };
    }
    avx2_copy!(dq8_0, super::dq8_0_loop, u8, f32);
    avx2_copy!(dq4_0, super::dq4_0_loop, u8, f32);

    /// The 32 values of a block as four vectors.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn load_block(x: &[f32; QK]) -> [__m256; 4] {
        let p = x.as_ptr();
        // SAFETY: `x` holds 32 floats; the loads are unaligned and stay within them.
        unsafe {
            [
                _mm256_loadu_ps(p),
                _mm256_loadu_ps(p.add(8)),
                _mm256_loadu_ps(p.add(16)),
                _mm256_loadu_ps(p.add(24)),
            ]
        }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn abs(v: __m256) -> __m256 {
        _mm256_andnot_ps(_mm256_set1_ps(-0.0), v)
    }

    /// The largest |x| of the block, NaN never winning, and the four |x| vectors.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn abs_max(v: &[__m256; 4]) -> (f32, [__m256; 4]) {
        let a = [abs(v[0]), abs(v[1]), abs(v[2]), abs(v[3])];
        let zero = _mm256_setzero_ps();
        let m01 = _mm256_max_ps(a[1], _mm256_max_ps(a[0], zero));
        let m23 = _mm256_max_ps(a[3], _mm256_max_ps(a[2], zero));
        let m = _mm256_max_ps(m01, m23);
        let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        let m = _mm_max_ss(m, _mm_shuffle_ps::<1>(m, m));
        (_mm_cvtss_f32(m), a)
    }

    /// NaN lanes become 0, the rest are clamped to `[lo, hi]`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn clamp_or_zero(y: __m256, lo: f32, hi: f32) -> __m256 {
        let y = _mm256_and_ps(y, _mm256_cmp_ps::<_CMP_ORD_Q>(y, y));
        _mm256_max_ps(_mm256_min_ps(y, _mm256_set1_ps(hi)), _mm256_set1_ps(lo))
    }

    /// `round(y) as i8` (half away from zero, saturating, NaN → 0) per lane, as i32.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn round_to_i8(y: __m256) -> __m256i {
        let y = clamp_or_zero(y, -128.0, 127.0);
        let t = _mm256_cvttps_epi32(y);
        let frac = _mm256_sub_ps(y, _mm256_cvtepi32_ps(t));
        // Compare masks are all ones (-1) where true.
        let up = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GE_OQ>(frac, _mm256_set1_ps(0.5)));
        let down = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_LE_OQ>(frac, _mm256_set1_ps(-0.5)));
        _mm256_add_epi32(_mm256_sub_epi32(t, up), down)
    }

    /// Four vectors of i32 in `[-128, 127]` as 32 bytes, in order.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn pack_bytes(q: [__m256i; 4]) -> __m256i {
        // The packs work within 128-bit lanes: the result holds four-byte groups in the
        // order q0 q1 q2 q3 (low halves), then the high halves; the permute restores order.
        let ab = _mm256_packs_epi32(q[0], q[1]);
        let cd = _mm256_packs_epi32(q[2], q[3]);
        let bytes = _mm256_packs_epi16(ab, cd);
        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    fn f16_bits(d: f32) -> [u8; 2] {
        let h = _mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(d));
        (_mm_extract_epi16::<0>(h) as u16).to_le_bytes()
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    fn q8_0_block(x: &[f32; QK], out: &mut [u8; Q8_0_BLOCK_BYTES]) {
        let v = load_block(x);
        let (amax, _) = abs_max(&v);
        let d = amax / 127.0;
        let id = _mm256_set1_ps(inverse_or_zero(d));
        let q = v.map(|v| round_to_i8(_mm256_mul_ps(v, id)));
        out[..2].copy_from_slice(&f16_bits(d));
        // SAFETY: `out` holds 34 bytes; the unaligned store writes bytes 2..34.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().add(2).cast(), pack_bytes(q)) };
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    fn q4_0_block(x: &[f32; QK], out: &mut [u8; Q4_0_BLOCK_BYTES]) {
        let v = load_block(x);
        let (amax, a) = abs_max(&v);
        let (d, id) = q4_0_scale(x, amax, || {
            let at = _mm256_set1_ps(amax);
            let mut mask = 0u32;
            for (k, a) in a.iter().enumerate() {
                let eq = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(*a, at)) as u32;
                mask |= eq << (8 * k);
            }
            mask
        });
        let id = _mm256_set1_ps(id);
        let half = _mm256_set1_ps(8.5);
        let n = v.map(|v| {
            let y = clamp_or_zero(_mm256_add_ps(_mm256_mul_ps(v, id), half), -128.0, 15.0);
            _mm256_cvttps_epi32(y)
        });
        // Bytes 0..16 hold elements 0..16, bytes 16..32 elements 16..32; as in the
        // reference, byte j = n[j] | n[j + 16] << 4 on whole bytes (u8 shift drops bits).
        let bytes = pack_bytes(n);
        let low = _mm256_castsi256_si128(bytes);
        let high = _mm256_extracti128_si256::<1>(bytes);
        let high = _mm_and_si128(_mm_slli_epi16::<4>(high), _mm_set1_epi8(0xF0u8 as i8));
        out[..2].copy_from_slice(&f16_bits(d));
        // SAFETY: `out` holds 18 bytes; the unaligned store writes bytes 2..18.
        unsafe { _mm_storeu_si128(out.as_mut_ptr().add(2).cast(), _mm_or_si128(low, high)) };
    }

    /// How far ahead (in f32 elements, 2 KiB) the quantizers prefetch their input. The
    /// hardware prefetchers stop at 4 KiB page boundaries, and a file mapping is made of
    /// 4 KiB pages: every page started cold. Prefetching 16 blocks ahead took `convert` of
    /// 64M F32 elements from 45.6 to 33.0 ms (Q4_0) and 50.9 to 38.1 ms (Q8_0) on 2 cores;
    /// 1 and 8 KiB ahead were slower. A prefetch is a hint: an address past the end of the
    /// input is never read and cannot fault.
    const PF: usize = 512;
    macro_rules! quant_loop {
        ($name:ident, $block:ident, $bytes:expr) => {
            /// # Safety
            /// The CPU must support AVX2 and F16C.
            #[target_feature(enable = "avx2,f16c")]
            pub(super) unsafe fn $name(src: &[f32], dst: &mut [u8]) {
                for (s, d) in src.chunks_exact(QK).zip(dst.chunks_exact_mut($bytes)) {
                    _mm_prefetch::<_MM_HINT_T0>(s.as_ptr().wrapping_add(PF).cast());
                    _mm_prefetch::<_MM_HINT_T0>(s.as_ptr().wrapping_add(PF + 16).cast());
                    // chunks_exact guarantees the sizes; the conversions cannot fail.
                    if let (Ok(s), Ok(d)) = (s.try_into(), d.try_into()) {
                        $block(s, d);
                    }
                }
            }
        };
    }
    quant_loop!(q8_0, q8_0_block, Q8_0_BLOCK_BYTES);
    quant_loop!(q4_0, q4_0_block, Q4_0_BLOCK_BYTES);
}

#[derive(Clone, Copy)]
enum Op {
    Q8_0,
    Q4_0,
    DeQ8_0,
    DeQ4_0,
}

fn run_quant(kernel: Kernel, op: Op, src: &[f32], dst: &mut [u8]) {
    match kernel {
        Kernel::Portable => match op {
            Op::Q4_0 => q4_0_loop(src, dst),
            _ => q8_0_loop(src, dst),
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Kernel::Avx2` is only constructed where AVX2 and F16C were detected.
        Kernel::Avx2 => unsafe {
            match op {
                Op::Q4_0 => avx2::q4_0(src, dst),
                _ => avx2::q8_0(src, dst),
            }
        },
    }
}

fn run_dequant(kernel: Kernel, op: Op, src: &[u8], dst: &mut [f32]) {
    match kernel {
        Kernel::Portable => match op {
            Op::DeQ4_0 => dq4_0_loop(src, dst),
            _ => dq8_0_loop(src, dst),
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Kernel::Avx2` is only constructed where AVX2 and F16C were detected.
        Kernel::Avx2 => unsafe {
            match op {
                Op::DeQ4_0 => avx2::dq4_0(src, dst),
                _ => avx2::dq8_0(src, dst),
            }
        },
    }
}

/// Split the blocks over threads and run `work` on each (source, destination) share. Runs on
/// the calling thread when the input is small, and takes a share back if its thread cannot
/// be spawned, so the work is always done.
fn split_blocks<S: Sync, D: Send>(
    src: &[S],
    src_per_block: usize,
    dst: &mut [D],
    dst_per_block: usize,
    work: &(dyn Fn(&[S], &mut [D]) + Sync),
) {
    let n_blocks = dst.len() / dst_per_block;
    let threads = crate::parallel::default_threads();
    if n_blocks < PARALLEL_MIN_BLOCKS || threads < 2 {
        work(src, dst);
        return;
    }
    let per_thread = n_blocks.div_ceil(threads);
    type Share<'a, S, D> = Mutex<Option<(&'a [S], &'a mut [D])>>;
    let shares: Vec<Share<S, D>> = src
        .chunks(per_thread * src_per_block)
        .zip(dst.chunks_mut(per_thread * dst_per_block))
        .map(|pair| Mutex::new(Some(pair)))
        .collect();
    // Whoever takes a share first does it: its thread, or this one if the spawn failed.
    let run = |share: &Share<S, D>| {
        let taken = share.lock().ok().and_then(|mut slot| slot.take());
        if let Some((s, d)) = taken {
            work(s, d);
        }
    };
    std::thread::scope(|scope| {
        if let Some((first, rest)) = shares.split_first() {
            for share in rest {
                if std::thread::Builder::new()
                    .spawn_scoped(scope, move || run(share))
                    .is_err()
                {
                    run(share);
                }
            }
            run(first);
        }
    });
}

pub(crate) fn quantize_q8_0_with(kernel: Kernel, src: &[f32], dst: &mut [u8]) -> Result<()> {
    check_lengths(src.len(), QK, dst.len(), Q8_0_BLOCK_BYTES)?;
    split_blocks(src, QK, dst, Q8_0_BLOCK_BYTES, &|s, d| {
        run_quant(kernel, Op::Q8_0, s, d)
    });
    Ok(())
}

pub(crate) fn quantize_q4_0_with(kernel: Kernel, src: &[f32], dst: &mut [u8]) -> Result<()> {
    check_lengths(src.len(), QK, dst.len(), Q4_0_BLOCK_BYTES)?;
    split_blocks(src, QK, dst, Q4_0_BLOCK_BYTES, &|s, d| {
        run_quant(kernel, Op::Q4_0, s, d)
    });
    Ok(())
}

pub(crate) fn dequantize_q8_0_with(kernel: Kernel, src: &[u8], dst: &mut [f32]) -> Result<()> {
    check_lengths(dst.len(), QK, src.len(), Q8_0_BLOCK_BYTES)?;
    split_blocks(src, Q8_0_BLOCK_BYTES, dst, QK, &|s, d| {
        run_dequant(kernel, Op::DeQ8_0, s, d)
    });
    Ok(())
}

pub(crate) fn dequantize_q4_0_with(kernel: Kernel, src: &[u8], dst: &mut [f32]) -> Result<()> {
    check_lengths(dst.len(), QK, src.len(), Q4_0_BLOCK_BYTES)?;
    split_blocks(src, Q4_0_BLOCK_BYTES, dst, QK, &|s, d| {
        run_dequant(kernel, Op::DeQ4_0, s, d)
    });
    Ok(())
}

/// [`quantize_q8_0`] on the calling thread only, for callers that parallelise themselves.
pub(crate) fn quantize_q8_0_here(src: &[f32], dst: &mut [u8]) -> Result<()> {
    check_lengths(src.len(), QK, dst.len(), Q8_0_BLOCK_BYTES)?;
    run_quant(Kernel::best(), Op::Q8_0, src, dst);
    Ok(())
}

/// [`quantize_q4_0`] on the calling thread only, for callers that parallelise themselves.
pub(crate) fn quantize_q4_0_here(src: &[f32], dst: &mut [u8]) -> Result<()> {
    check_lengths(src.len(), QK, dst.len(), Q4_0_BLOCK_BYTES)?;
    run_quant(Kernel::best(), Op::Q4_0, src, dst);
    Ok(())
}

/// Fast Q8_0 quantization, bit-identical to [`quantize_q8_0_ref`].
pub fn quantize_q8_0(src: &[f32], dst: &mut [u8]) -> Result<()> {
    quantize_q8_0_with(Kernel::best(), src, dst)
}

/// Fast Q4_0 quantization, bit-identical to [`quantize_q4_0_ref`].
pub fn quantize_q4_0(src: &[f32], dst: &mut [u8]) -> Result<()> {
    quantize_q4_0_with(Kernel::best(), src, dst)
}

/// Fast Q8_0 decoding, bit-identical to [`dequantize_q8_0_ref`].
pub fn dequantize_q8_0(src: &[u8], dst: &mut [f32]) -> Result<()> {
    dequantize_q8_0_with(Kernel::best(), src, dst)
}

/// Fast Q4_0 decoding, bit-identical to [`dequantize_q4_0_ref`].
pub fn dequantize_q4_0(src: &[u8], dst: &mut [f32]) -> Result<()> {
    dequantize_q4_0_with(Kernel::best(), src, dst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_to_i8_matches_round_then_saturate() {
        let reference = |y: f32| y.round() as i8;
        let check = |y: f32| assert_eq!(round_to_i8(y), reference(y), "y = {y:e}");
        for special in [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            -0.0,
            0.0,
        ] {
            check(special);
        }
        // Every half-integer and its neighbours, then a dense sweep of [0, 130] both signs.
        for k in -300..300 {
            let half = k as f32 + 0.5;
            for y in [
                half,
                f32::from_bits(half.to_bits() + 1),
                f32::from_bits(half.to_bits() - 1),
            ] {
                check(y);
            }
        }
        for y in [
            15.0f32,
            15.9,
            16.0,
            16.5,
            -0.5,
            -1.0,
            -128.5,
            -1e9,
            1e9,
            f32::NAN,
        ] {
            assert_eq!(nibble(y), (y as i8).min(15) as u8, "y = {y:e}");
        }
        let top = 130f32.to_bits();
        for b in (0..top).step_by(997) {
            check(f32::from_bits(b));
            check(-f32::from_bits(b));
        }
    }
}
