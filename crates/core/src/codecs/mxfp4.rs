//! MXFP4 (17 bytes per 32 values): an E8M0 exponent `e` and 32 E2M1 codes (element `j` in the
//! low nibble of byte `j`, element `j + 16` in its high nibble).
//!
//! Decoded as gguf-py: `d * kvalue[code]` with the E2M1 values doubled
//! (`0, 1, 2, 3, 4, 6, 8, 12` and negatives) and `d = 2^(e - 128)` built from its bits
//! (`ggml_e8m0_to_fp32_half`; subnormal for `e < 2`).

use super::simd::{block_loop, fast_kernel};
use super::{Kernels, QK};

const BYTES: usize = 17;

/// The E2M1 values, doubled (ggml's `kvalues_mxfp4`; shared with NVFP4).
pub(super) const KVALUES: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// Half of the E8M0 scale `2^(e - 127)`, exactly.
#[inline(always)]
pub(super) fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        ((e - 1) as u32) << 23
    };
    f32::from_bits(bits)
}

#[inline(always)]
fn decode_block(b: &[u8; BYTES], out: &mut [f32; QK]) {
    let d = e8m0_half(b[0]);
    for j in 0..QK / 2 {
        let q = b[1 + j];
        out[j] = d * KVALUES[(q & 0x0F) as usize] as f32;
        out[j + QK / 2] = d * KVALUES[(q >> 4) as usize] as f32;
    }
}

block_loop!(decode_blocks, decode_block, u8, BYTES, f32, QK);
fast_kernel!(decode_fast, decode_blocks, u8, f32);

pub(super) const DECODE: Kernels<u8, f32> = Kernels {
    reference: decode_blocks,
    fast: decode_fast,
};
