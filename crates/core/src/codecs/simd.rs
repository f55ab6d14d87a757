//! What the block codecs share: the choice of compiled kernel (portable or AVX2), the
//! vectorisable scalar helpers of the Q8_0/Q4_0 kernels, and their AVX2 versions.
//!
//! The portable helpers work on fixed-size arrays with 8 independent lanes for the maximum,
//! so the compiler vectorises them without reordering anything that changes the result (a
//! maximum is exact in any order). They are `inline(always)` so that the AVX2 wrappers get
//! their own vectorised copy.

use super::QK;
use half::f16;

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
        if crate::cpu::has_avx2_f16c() {
            return Kernel::Avx2;
        }
        Kernel::Portable
    }
}

/// Defines `$name(src, dst)`: `$inner` (an `#[inline(always)]` block loop) run from a copy
/// compiled for AVX2 when the CPU has it, from the baseline copy otherwise. The two copies
/// compute the same operations in the same order (Rust never fuses a multiply and an add),
/// so they give the same bits; only the instructions differ.
macro_rules! fast_kernel {
    ($name:ident, $inner:path, $s:ty, $d:ty) => {
        fn $name(src: &[$s], dst: &mut [$d]) {
            #[cfg(target_arch = "x86_64")]
            if $crate::codecs::simd::Kernel::best() != $crate::codecs::simd::Kernel::Portable {
                /// # Safety
                /// The CPU must support AVX2.
                #[target_feature(enable = "avx2")]
                unsafe fn avx2(src: &[$s], dst: &mut [$d]) {
                    $inner(src, dst)
                }
                // SAFETY: `Kernel::best` found AVX2 (and F16C) on this CPU.
                unsafe { avx2(src, dst) };
                return;
            }
            $inner(src, dst)
        }
    };
}
pub(crate) use fast_kernel;

/// Defines `$name(src, dst)`, running `$block` (a function of fixed-size arrays) over every
/// (source block, destination block) pair.
macro_rules! block_loop {
    ($name:ident, $block:path, $s:ty, $sn:expr, $d:ty, $dn:expr) => {
        #[inline(always)]
        pub(super) fn $name(src: &[$s], dst: &mut [$d]) {
            for (s, d) in src.chunks_exact($sn).zip(dst.chunks_exact_mut($dn)) {
                // chunks_exact guarantees the sizes; the conversions cannot fail.
                if let (Ok(s), Ok(d)) = (<&[$s; $sn]>::try_from(s), <&mut [$d; $dn]>::try_from(d)) {
                    $block(s, d);
                }
            }
        }
    };
}
pub(crate) use block_loop;

/// C's `(int8_t) roundf(y)` on x86-64 (half away from zero; NaN, ±Inf and |y| ≥ 2^31 give
/// 0, as `cvttss2si` does), in operations that vectorise (`roundf` does not). Values in
/// [128, 2^31), which the quantizers never produce (|x · id| ≤ 127.5 whenever `id` is
/// finite), are clamped. Clamping first keeps the truncation in range and commutes with
/// rounding at integer bounds. The fractional part `y - trunc(y)` is exact for |y| < 2^23.
#[inline(always)]
pub(super) fn round_to_i8(y: f32) -> i8 {
    let y = clamp_or_zero(y, -128.0, 127.0);
    let t = trunc_small(y);
    let frac = y - t as f32;
    (t + (frac >= 0.5) as i32 - (frac <= -0.5) as i32) as i8
}

/// C's `MIN(15, (int8_t) y)` on x86-64 (non-finite and huge values give 0), in operations
/// that vectorise: capping at 15 before truncating gives the same integer (truncation is
/// monotonic and 15 is whole).
#[inline(always)]
pub(super) fn nibble(y: f32) -> u8 {
    trunc_small(clamp_or_zero(y, -128.0, 15.0)) as i8 as u8
}

/// `y` clamped to `[lo, hi]`; NaN, ±Inf and |y| ≥ 2^31 become 0 (what x86-64 makes of a
/// float it cannot convert to a 32-bit integer, truncated to a byte).
#[inline(always)]
pub(super) fn clamp_or_zero(y: f32, lo: f32, hi: f32) -> f32 {
    if y.abs() >= 2147483648.0 || y.is_nan() {
        return 0.0;
    }
    let y = if y > hi { hi } else { y };
    if y < lo {
        lo
    } else {
        y
    }
}

/// Truncation toward zero of a value already clamped by [`clamp_or_zero`] to a small range:
/// one `cvttps2dq` per vector, where the saturating `as` is scalarised.
#[inline(always)]
pub(super) fn trunc_small(y: f32) -> i32 {
    debug_assert!(y.abs() <= 128.0);
    // SAFETY: callers pass finite values within [-128, 127], inside i32's range.
    unsafe { y.to_int_unchecked::<i32>() }
}

/// `d` as f16 bits, rounded to nearest even: the same as `f16::from_f32`, but in plain Rust
/// that inlines into the block loops (that one calls out, per block, to a runtime-dispatched
/// F16C routine, spilling the vector registers around the call).
#[inline(always)]
pub(super) fn f16_bits(d: f32) -> u16 {
    f16::from_f32_const(d).to_bits()
}

#[inline(always)]
pub(super) fn abs_max(x: &[f32; QK]) -> f32 {
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

/// `1 / d`, or 0 for a zero scale (an all-zero block), as the reference computes it.
#[inline(always)]
pub(super) fn inverse_or_zero(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2 {
    //! AVX2 (+ F16C) versions of the block loops. Callers must have checked that the CPU has
    //! both ([`Kernel::best`](super::Kernel::best)).
    //!
    //! The quantizers are written in intrinsics: LLVM kept the portable kernels' maximum
    //! (`f32::max`, whose NaN rule is not `maxps`'s) and the Q4_0 first-index search scalar,
    //! one element at a time, and that loop, not memory, set the speed. Each step below computes exactly what the reference computes, so the
    //! bytes stay identical:
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
    use super::super::q4_0::q4_0_scale;
    use super::super::{Q4_0_BLOCK_BYTES, Q8_0_BLOCK_BYTES, QK};
    use super::inverse_or_zero;
    use std::arch::x86_64::*;

    macro_rules! avx2_copy {
        ($name:ident, $inner:path, $s:ty, $d:ty) => {
            /// # Safety
            /// The CPU must support AVX2.
            #[target_feature(enable = "avx2")]
            pub(in crate::codecs) unsafe fn $name(src: &[$s], dst: &mut [$d]) {
                $inner(src, dst)
            }
        };
    }
    avx2_copy!(dq8_0, super::super::q8_0::dq8_0_loop, u8, f32);
    avx2_copy!(dq4_0, super::super::q4_0::dq4_0_loop, u8, f32);

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

    /// Lanes that are NaN, infinite or of magnitude ≥ 2^31 become 0, the rest are clamped to
    /// `[lo, hi]` (as the portable `clamp_or_zero`).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn clamp_or_zero(y: __m256, lo: f32, hi: f32) -> __m256 {
        let in_range = _mm256_cmp_ps::<_CMP_LT_OQ>(abs(y), _mm256_set1_ps(2147483648.0));
        let y = _mm256_and_ps(y, in_range);
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
        let nan = v.iter().fold(0, |m, &v| {
            m | _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_UNORD_Q>(v, v))
        });
        if nan != 0 {
            // ggml's maximum is order-dependent with NaN: do it its way.
            return super::super::q8_0::q8_0_block_c(x, out);
        }
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
    /// 4 KiB pages: every page starts cold. 16 blocks ahead measured best. A prefetch is a hint: an address past the end of the input is never read
    /// and cannot fault.
    const PF: usize = 512;
    macro_rules! quant_loop {
        ($name:ident, $block:ident, $bytes:expr) => {
            /// # Safety
            /// The CPU must support AVX2 and F16C.
            #[target_feature(enable = "avx2,f16c")]
            pub(in crate::codecs) unsafe fn $name(src: &[f32], dst: &mut [u8]) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_to_i8_and_nibble_are_cs_conversions() {
        use super::super::c_trunc_i32;
        // Where the helpers clamp instead of wrapping like C: results outside i8 (never
        // reached by the quantizers, whose |x * id| stays below 127.5 and x * id + 8.5 in (0, 17)).
        let finite_i32 = |y: f32| y.abs() < 2147483648.0;
        let check = |y: f32| {
            if !(finite_i32(y) && !(-128.5 < y && y < 127.5)) {
                let c = c_trunc_i32(y.round()) as i8;
                assert_eq!(round_to_i8(y), c, "y = {y:e}");
            }
            let y4 = y + 8.5;
            if !(finite_i32(y4) && !(-129.0 < y4 && y4 < 128.0)) {
                let c = (c_trunc_i32(y4) as i8).min(15) as u8;
                assert_eq!(nibble(y4), c, "y = {y4:e}");
            }
        };
        for special in [
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            -f32::MAX,
            2147483648.0,
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
        let top = 130f32.to_bits();
        for b in (0..top).step_by(997) {
            check(f32::from_bits(b));
            check(-f32::from_bits(b));
        }
    }
}
