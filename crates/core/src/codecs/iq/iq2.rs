//! IQ2_XXS, IQ2_XS and IQ2_S: groups of 8 values from a grid of points with coordinates in
//! {8, 25, 43}, each group with 8 sign bits, and a 4-bit scale per 32 (XXS) or 16 values:
//! `db = d * (0.5 + s) * 0.25`, value `(db * grid) * sign`.
//!
//! * **IQ2_XXS** (66 bytes: `d`, 8 × (u32 grid indices, u32 signs/scale)): for sub-block
//!   `ib`, bytes of the first word index the 256-point grid; the second holds four 7-bit sign
//!   indices into `ksigns` and the scale in its top 4 bits.
//! * **IQ2_XS** (74 bytes: `d`, 32 × u16, 8 scale bytes): each u16 is a 9-bit index into the
//!   512-point grid and a 7-bit sign index; scale nibble `g` covers groups `2g, 2g + 1`.
//! * **IQ2_S** (82 bytes: `d`, `qs[32]`, `signs[32]`, `qh[8]`, 8 scale bytes): 10-bit indices
//!   into the 1024-point grid (`qs[k]` plus 2 bits of `qh[k / 4]`), explicit sign bytes.

use super::super::simd::{block_loop, fast_kernel};
use super::super::{f16_le, Kernels, QK_K};
use super::{ksign, times_sign, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID};

const XXS_BYTES: usize = 66;
const XS_BYTES: usize = 74;
const S_BYTES: usize = 82;

#[inline(always)]
fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// Group `k` (8 values) of a block: `(db * grid[j]) * sign(j)`.
#[inline(always)]
fn group(out: &mut [f32], db: f32, grid: &[f32; 8], signs: u8) {
    for j in 0..8 {
        out[j] = times_sign(db * grid[j], signs, j);
    }
}

#[inline(always)]
fn xxs_decode_block(b: &[u8; XXS_BYTES], out: &mut [f32; QK_K]) {
    let d = f16_le([b[0], b[1]]);
    for ib in 0..8 {
        let grid_bytes = &b[2 + 8 * ib..6 + 8 * ib];
        let aux = u32_at(b, 6 + 8 * ib);
        let db = d * (0.5 + (aux >> 28) as f32) * 0.25;
        for l in 0..4 {
            let signs = ksign((aux >> (7 * l)) & 127);
            let grid = &IQ2XXS_GRID[grid_bytes[l] as usize];
            group(&mut out[32 * ib + 8 * l..], db, grid, signs);
        }
    }
}

/// The 16 scales of IQ2_XS / IQ2_S (one per 16 values): `d * (0.5 + s) * 0.25`.
#[inline(always)]
fn scales16(d: f32, scales: &[u8]) -> [f32; 16] {
    let mut db = [0f32; 16];
    for (g, db) in db.iter_mut().enumerate() {
        let s = (scales[g / 2] >> (4 * (g % 2))) & 0x0F;
        *db = d * (0.5 + s as f32) * 0.25;
    }
    db
}

#[inline(always)]
fn xs_decode_block(b: &[u8; XS_BYTES], out: &mut [f32; QK_K]) {
    let d = f16_le([b[0], b[1]]);
    let db = scales16(d, &b[66..74]);
    for k in 0..32 {
        let q = u16::from_le_bytes([b[2 + 2 * k], b[3 + 2 * k]]);
        let grid = &IQ2XS_GRID[(q & 511) as usize];
        group(&mut out[8 * k..], db[k / 2], grid, ksign((q >> 9) as u32));
    }
}

#[inline(always)]
fn s_decode_block(b: &[u8; S_BYTES], out: &mut [f32; QK_K]) {
    let d = f16_le([b[0], b[1]]);
    let (qs, signs, qh) = (&b[2..34], &b[34..66], &b[66..74]);
    let db = scales16(d, &b[74..82]);
    for k in 0..32 {
        let high = ((qh[k / 4] >> (2 * (k % 4))) & 3) as usize;
        let grid = &IQ2S_GRID[qs[k] as usize | (high << 8)];
        group(&mut out[8 * k..], db[k / 2], grid, signs[k]);
    }
}

block_loop!(xxs_decode, xxs_decode_block, u8, XXS_BYTES, f32, QK_K);
block_loop!(xs_decode, xs_decode_block, u8, XS_BYTES, f32, QK_K);
block_loop!(s_decode, s_decode_block, u8, S_BYTES, f32, QK_K);
fast_kernel!(xxs_decode_fast, xxs_decode, u8, f32);
fast_kernel!(xs_decode_fast, xs_decode, u8, f32);
fast_kernel!(s_decode_fast, s_decode, u8, f32);

pub(in crate::codecs) const IQ2_XXS_DECODE: Kernels<u8, f32> = Kernels {
    reference: xxs_decode,
    fast: xxs_decode_fast,
};
pub(in crate::codecs) const IQ2_XS_DECODE: Kernels<u8, f32> = Kernels {
    reference: xs_decode,
    fast: xs_decode_fast,
};
pub(in crate::codecs) const IQ2_S_DECODE: Kernels<u8, f32> = Kernels {
    reference: s_decode,
    fast: s_decode_fast,
};
