//! IQ3_XXS and IQ3_S: groups of 8 values made of two points of a 4-dimensional grid, with 8
//! sign bits per group.
//!
//! * **IQ3_XXS** (98 bytes: `d`, `qs[64]` grid indices, 8 × u32): the u32 of sub-block `ib`
//!   (32 values) holds four 7-bit sign indices into `ksigns` and a 4-bit scale `s` on top;
//!   `db = d * (0.5 + s) * 0.5`, value `(db * grid) * sign`.
//! * **IQ3_S** (110 bytes: `d`, `qs[64]`, `qh[8]`, `signs[32]`, `scales[4]`): 9-bit indices
//!   (`qs[k]` plus bit `k % 8` of `qh[k / 8]`) into a 512-point grid, explicit sign bytes,
//!   `db = d * (1 + 2s)` per 32 values.

use super::super::simd::{block_loop, fast_kernel};
use super::super::{f16_le, Kernels, QK_K};
use super::{ksign, times_sign, IQ3S_GRID, IQ3XXS_GRID};

const XXS_BYTES: usize = 98;
const S_BYTES: usize = 110;

/// 8 values from two grid points: `(db * grid) * sign`.
#[inline(always)]
fn group(out: &mut [f32], db: f32, g0: &[f32; 4], g1: &[f32; 4], signs: u8) {
    for j in 0..4 {
        out[j] = times_sign(db * g0[j], signs, j);
        out[j + 4] = times_sign(db * g1[j], signs, j + 4);
    }
}

#[inline(always)]
fn xxs_decode_block(b: &[u8; XXS_BYTES], out: &mut [f32; QK_K]) {
    let d = f16_le([b[0], b[1]]);
    let qs = &b[2..66];
    for ib in 0..8 {
        let o = 66 + 4 * ib;
        let aux = u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
        for l in 0..4 {
            let signs = ksign((aux >> (7 * l)) & 127);
            let g0 = &IQ3XXS_GRID[qs[8 * ib + 2 * l] as usize];
            let g1 = &IQ3XXS_GRID[qs[8 * ib + 2 * l + 1] as usize];
            group(&mut out[32 * ib + 8 * l..], db, g0, g1, signs);
        }
    }
}

#[inline(always)]
fn s_decode_block(b: &[u8; S_BYTES], out: &mut [f32; QK_K]) {
    let d = f16_le([b[0], b[1]]);
    let (qs, qh, signs, scales) = (&b[2..66], &b[66..74], &b[74..106], &b[106..110]);
    let index = |k: usize| qs[k] as usize | ((((qh[k / 8] >> (k % 8)) & 1) as usize) << 8);
    for ib in 0..8 {
        let s = (scales[ib / 2] >> (4 * (ib % 2))) & 0x0F;
        let db = d * (1 + 2 * s as u32) as f32;
        for l in 0..4 {
            let k = 8 * ib + 2 * l;
            let (g0, g1) = (&IQ3S_GRID[index(k)], &IQ3S_GRID[index(k + 1)]);
            group(&mut out[32 * ib + 8 * l..], db, g0, g1, signs[4 * ib + l]);
        }
    }
}

block_loop!(xxs_decode, xxs_decode_block, u8, XXS_BYTES, f32, QK_K);
block_loop!(s_decode, s_decode_block, u8, S_BYTES, f32, QK_K);
fast_kernel!(xxs_decode_fast, xxs_decode, u8, f32);
fast_kernel!(s_decode_fast, s_decode, u8, f32);

pub(in crate::codecs) const IQ3_XXS_DECODE: Kernels<u8, f32> = Kernels {
    reference: xxs_decode,
    fast: xxs_decode_fast,
};
pub(in crate::codecs) const IQ3_S_DECODE: Kernels<u8, f32> = Kernels {
    reference: s_decode,
    fast: s_decode_fast,
};
