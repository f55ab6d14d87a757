//! IQ1_S and IQ1_M: groups of 8 values from a 2048-point grid with coordinates in
//! {-1, 0, 1}, shifted by ±1/8 and scaled: value `dl * (grid + delta)`.
//!
//! * **IQ1_S** (50 bytes: `d`, `qs[32]`, 8 × u16 `qh`): for sub-block `ib` (32 values), `qh`
//!   holds four 3-bit index extensions, a 3-bit scale `s` (bits 12..15) and the sign of
//!   `delta` (bit 15); `dl = d * (2s + 1)`.
//! * **IQ1_M** (56 bytes: `qs[32]`, `qh[16]`, 4 × u16 scales): the f16 `d` is spread over the
//!   top nibbles of the four scale words; each word also holds four 3-bit scales (one per 16
//!   values); each nibble of `qh` extends one index (3 bits) and signs its delta (bit 3).

use super::super::simd::{block_loop, fast_kernel};
use super::super::{f16_le, Kernels, QK_K};
use super::IQ1S_GRID;

const S_BYTES: usize = 50;
const M_BYTES: usize = 56;
/// ggml's `IQ1S_DELTA` / `IQ1M_DELTA`.
const DELTA: f32 = 0.125;

#[inline(always)]
fn group(out: &mut [f32], dl: f32, grid: &[f32; 8], delta: f32) {
    for j in 0..8 {
        out[j] = dl * (grid[j] + delta);
    }
}

#[inline(always)]
fn s_decode_block(b: &[u8; S_BYTES], out: &mut [f32; QK_K]) {
    let d = f16_le([b[0], b[1]]);
    let qs = &b[2..34];
    for ib in 0..8 {
        let qh = u16::from_le_bytes([b[34 + 2 * ib], b[35 + 2 * ib]]);
        let dl = d * (2 * ((qh >> 12) & 7) + 1) as f32;
        let delta = if qh & 0x8000 == 0 { DELTA } else { -DELTA };
        for l in 0..4 {
            let index = qs[4 * ib + l] as usize | ((((qh >> (3 * l)) & 7) as usize) << 8);
            group(&mut out[32 * ib + 8 * l..], dl, &IQ1S_GRID[index], delta);
        }
    }
}

#[inline(always)]
fn m_decode_block(b: &[u8; M_BYTES], out: &mut [f32; QK_K]) {
    let (qs, qh) = (&b[..32], &b[32..48]);
    let sc: [u16; 4] = std::array::from_fn(|w| u16::from_le_bytes([b[48 + 2 * w], b[49 + 2 * w]]));
    let d_bits =
        (sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000);
    let d = f16_le(d_bits.to_le_bytes());
    // Scale m (0..16) covers 16 values: word m / 4, bits 3 (m % 4).
    let mut dl = [0f32; 16];
    for (m, dl) in dl.iter_mut().enumerate() {
        let s = (sc[m / 4] >> (3 * (m % 4))) & 7;
        *dl = d * (2 * s + 1) as f32;
    }
    for k in 0..32 {
        let nibble = (qh[k / 2] >> (4 * (k % 2))) & 0x0F;
        let index = qs[k] as usize | (((nibble & 7) as usize) << 8);
        let delta = if nibble & 8 == 0 { DELTA } else { -DELTA };
        group(&mut out[8 * k..], dl[k / 2], &IQ1S_GRID[index], delta);
    }
}

block_loop!(s_decode, s_decode_block, u8, S_BYTES, f32, QK_K);
block_loop!(m_decode, m_decode_block, u8, M_BYTES, f32, QK_K);
fast_kernel!(s_decode_fast, s_decode, u8, f32);
fast_kernel!(m_decode_fast, m_decode, u8, f32);

pub(in crate::codecs) const IQ1_S_DECODE: Kernels<u8, f32> = Kernels {
    reference: s_decode,
    fast: s_decode_fast,
};
pub(in crate::codecs) const IQ1_M_DECODE: Kernels<u8, f32> = Kernels {
    reference: m_decode,
    fast: m_decode_fast,
};
