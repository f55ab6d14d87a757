//! The ternary types TQ1_0 and TQ2_0: 256 values in {-1, 0, 1} times an f16 scale `d`.
//!
//! * **TQ1_0** (54 bytes: `qs[48]`, `qh[4]`, `d`): five ternary digits per byte, stored as
//!   `ceil(v * 256 / 243)`; digit `p` of byte `b` is `((b * 3^p mod 256) * 3) >> 8`. Values
//!   0..160 are digit `i / 32` of `qs[i % 32]`, 160..240 digit `(i - 160) / 16` of
//!   `qs[32 + i % 16]`, 240..256 digit `(i - 240) / 4` of `qh[i % 4]`.
//! * **TQ2_0** (66 bytes: `qs[64]`, `d`): 2-bit digits laid out as Q2_K's quants.
//!
//! Decoded as gguf-py: `d * (digit - 1)`.

use super::simd::{block_loop, fast_kernel};
use super::{f16_le, Kernels, QK_K};

const TQ1_0_BYTES: usize = 54;
const TQ2_0_BYTES: usize = 66;

#[inline(always)]
fn ternary_digit(byte: u8, pow3: u8) -> f32 {
    let v = byte.wrapping_mul(pow3);
    ((((v as u16) * 3) >> 8) as i8 - 1) as f32
}

#[inline(always)]
fn tq1_0_decode_block(b: &[u8; TQ1_0_BYTES], out: &mut [f32; QK_K]) {
    const POW3: [u8; 5] = [1, 3, 9, 27, 81];
    let d = f16_le([b[52], b[53]]);
    let (qs, qh) = (&b[..48], &b[48..52]);
    for (p, &pow) in POW3.iter().enumerate() {
        for l in 0..32 {
            out[32 * p + l] = d * ternary_digit(qs[l], pow);
        }
        for l in 0..16 {
            out[160 + 16 * p + l] = d * ternary_digit(qs[32 + l], pow);
        }
    }
    for (p, &pow) in POW3[..4].iter().enumerate() {
        for l in 0..4 {
            out[240 + 4 * p + l] = d * ternary_digit(qh[l], pow);
        }
    }
}

#[inline(always)]
fn tq2_0_decode_block(b: &[u8; TQ2_0_BYTES], out: &mut [f32; QK_K]) {
    let d = f16_le([b[64], b[65]]);
    for (f, o) in out.iter_mut().enumerate() {
        let (h, s, l) = (f / 128, (f % 128) / 32, f % 32);
        let q = ((b[32 * h + l] >> (2 * s)) & 3) as i8 - 1;
        *o = d * q as f32;
    }
}

block_loop!(tq1_0_decode, tq1_0_decode_block, u8, TQ1_0_BYTES, f32, QK_K);
block_loop!(tq2_0_decode, tq2_0_decode_block, u8, TQ2_0_BYTES, f32, QK_K);
fast_kernel!(tq1_0_decode_fast, tq1_0_decode, u8, f32);
fast_kernel!(tq2_0_decode_fast, tq2_0_decode, u8, f32);

pub(super) const TQ1_0_DECODE: Kernels<u8, f32> = Kernels {
    reference: tq1_0_decode,
    fast: tq1_0_decode_fast,
};
pub(super) const TQ2_0_DECODE: Kernels<u8, f32> = Kernels {
    reference: tq2_0_decode,
    fast: tq2_0_decode_fast,
};
