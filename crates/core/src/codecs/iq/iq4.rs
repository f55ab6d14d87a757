//! IQ4_NL and IQ4_XS: 4-bit codes into a fixed non-linear table of 16 values
//! (`kvalues_iq4nl`), value `dl * kvalue`.
//!
//! * **IQ4_NL** (18 bytes per 32 values: `d`, 16 bytes of codes as Q4_0's): `dl = d`.
//! * **IQ4_XS** (136 bytes per 256: `d`, u16 `scales_h`, `scales_l[4]`, `qs[128]`): sub-block
//!   `ib` (32 values, codes in bytes `16ib..16ib+16` as IQ4_NL's) has the 6-bit scale
//!   `(low nibble ib of scales_l) | (bits 2ib..2ib+2 of scales_h) << 4`, minus 32;
//!   `dl = d * scale`.

use super::super::simd::{block_loop, fast_kernel};
use super::super::{f16_le, Kernels, QK, QK_K};

const NL_BYTES: usize = 18;
const XS_BYTES: usize = 136;

/// ggml's `kvalues_iq4nl`.
const KVALUES: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// 32 values from 16 bytes of codes.
#[inline(always)]
fn codes(out: &mut [f32], dl: f32, qs: &[u8]) {
    for j in 0..16 {
        out[j] = dl * KVALUES[(qs[j] & 0x0F) as usize] as f32;
        out[j + 16] = dl * KVALUES[(qs[j] >> 4) as usize] as f32;
    }
}

#[inline(always)]
fn nl_decode_block(b: &[u8; NL_BYTES], out: &mut [f32; QK]) {
    codes(out, f16_le([b[0], b[1]]), &b[2..]);
}

#[inline(always)]
fn xs_decode_block(b: &[u8; XS_BYTES], out: &mut [f32; QK_K]) {
    let d = f16_le([b[0], b[1]]);
    let scales_h = u16::from_le_bytes([b[2], b[3]]);
    let (scales_l, qs) = (&b[4..8], &b[8..]);
    for ib in 0..8 {
        let low = (scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0F;
        let high = ((scales_h >> (2 * ib)) & 3) as u8;
        let scale = (low | (high << 4)) as i8 - 32;
        codes(&mut out[32 * ib..], d * scale as f32, &qs[16 * ib..]);
    }
}

block_loop!(nl_decode, nl_decode_block, u8, NL_BYTES, f32, QK);
block_loop!(xs_decode, xs_decode_block, u8, XS_BYTES, f32, QK_K);
fast_kernel!(nl_decode_fast, nl_decode, u8, f32);
fast_kernel!(xs_decode_fast, xs_decode, u8, f32);

pub(in crate::codecs) const IQ4_NL_DECODE: Kernels<u8, f32> = Kernels {
    reference: nl_decode,
    fast: nl_decode_fast,
};
pub(in crate::codecs) const IQ4_XS_DECODE: Kernels<u8, f32> = Kernels {
    reference: xs_decode,
    fast: xs_decode_fast,
};
