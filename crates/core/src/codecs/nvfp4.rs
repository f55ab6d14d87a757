//! NVFP4 (36 bytes per 64 values): four UE4M3 scales `d[4]`, one per sub-block of 16, then
//! 32 bytes of E2M1 codes (sub-block `s` in bytes `8s..8s+8`: element `j` in the low nibble
//! of byte `8s + j`, element `j + 8` in its high nibble).
//!
//! Decoded as gguf-py: `scale * kvalue[code]` with the doubled E2M1 values of MXFP4 and the
//! scale halved to match them: `man * 2^-9` (exponent 0) or `(1 + man / 8) * 2^(exp - 7)`,
//! times 0.5; the codes 0x00 and 0x7F (NaN in E4M3) give 0; bit 7 is ignored.

use super::mxfp4::KVALUES;
use super::simd::{block_loop, fast_kernel};
use super::Kernels;

const BLOCK: usize = 64;
const BYTES: usize = 36;

/// A UE4M3 scale, halved: every step is exact, as in gguf-py.
#[inline(always)]
fn ue4m3_half(x: u8) -> f32 {
    if x == 0 || x == 0x7F {
        return 0.0;
    }
    let exp = ((x >> 3) & 0x0F) as i32;
    let man = (x & 0x07) as f32;
    let raw = if exp == 0 {
        man * (1.0 / 512.0)
    } else {
        (1.0 + man / 8.0) * f32::from_bits(((exp - 7 + 127) as u32) << 23)
    };
    raw * 0.5
}

#[inline(always)]
fn decode_block(b: &[u8; BYTES], out: &mut [f32; BLOCK]) {
    for s in 0..4 {
        let d = ue4m3_half(b[s]);
        for j in 0..8 {
            let q = b[4 + 8 * s + j];
            out[16 * s + j] = d * KVALUES[(q & 0x0F) as usize] as f32;
            out[16 * s + j + 8] = d * KVALUES[(q >> 4) as usize] as f32;
        }
    }
}

block_loop!(decode_blocks, decode_block, u8, BYTES, f32, BLOCK);
fast_kernel!(decode_fast, decode_blocks, u8, f32);

pub(super) const DECODE: Kernels<u8, f32> = Kernels {
    reference: decode_blocks,
    fast: decode_fast,
};
