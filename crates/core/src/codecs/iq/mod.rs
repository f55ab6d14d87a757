//! The "i-quants" (IQ1_S … IQ4_XS): values taken from fixed grids of lattice points (or, for
//! IQ4, a non-linear table), with a sign mask and per-sub-block scales.
//!
//! Decoders only (ggml's IQ quantizers need an importance matrix to be useful and llama.cpp
//! refuses most of them without one). Each follows gguf-py's numpy code:
//! `(db * grid) * sign` for IQ2/IQ3, `dl * (grid + delta)` for IQ1, `dl * kvalue` for IQ4.

mod grids;
mod iq1;
mod iq2;
mod iq3;
mod iq4;

pub(super) use iq1::{IQ1_M_DECODE, IQ1_S_DECODE};
pub(super) use iq2::{IQ2_S_DECODE, IQ2_XS_DECODE, IQ2_XXS_DECODE};
pub(super) use iq3::{IQ3_S_DECODE, IQ3_XXS_DECODE};
pub(super) use iq4::{IQ4_NL_DECODE, IQ4_XS_DECODE};

/// Expand a packed grid (see `grids.rs`) into its values, at compile time.
const fn unpack<const N: usize, const K: usize, const V: usize>(
    packed: &[u16; N],
    values: &[i8; V],
    bits: u32,
) -> [[f32; K]; N] {
    let mut out = [[0f32; K]; N];
    let mask = (1u16 << bits) - 1;
    let mut i = 0;
    while i < N {
        let mut k = 0;
        while k < K {
            let index = (packed[i] >> (bits * k as u32)) & mask;
            out[i][k] = values[index as usize] as f32;
            k += 1;
        }
        i += 1;
    }
    out
}

static IQ2XXS_GRID: [[f32; 8]; 256] = unpack(
    &grids::IQ2XXS_PACKED,
    &grids::IQ2XXS_VALUES,
    grids::IQ2XXS_BITS,
);
static IQ2XS_GRID: [[f32; 8]; 512] = unpack(
    &grids::IQ2XS_PACKED,
    &grids::IQ2XS_VALUES,
    grids::IQ2XS_BITS,
);
static IQ2S_GRID: [[f32; 8]; 1024] =
    unpack(&grids::IQ2S_PACKED, &grids::IQ2S_VALUES, grids::IQ2S_BITS);
static IQ3XXS_GRID: [[f32; 4]; 256] = unpack(
    &grids::IQ3XXS_PACKED,
    &grids::IQ3XXS_VALUES,
    grids::IQ3XXS_BITS,
);
static IQ3S_GRID: [[f32; 4]; 512] =
    unpack(&grids::IQ3S_PACKED, &grids::IQ3S_VALUES, grids::IQ3S_BITS);
static IQ1S_GRID: [[f32; 8]; 2048] =
    unpack(&grids::IQ1S_PACKED, &grids::IQ1S_VALUES, grids::IQ1S_BITS);

/// ggml's `ksigns_iq2xs`: the 7 stored sign bits of a group of 8, completed with an eighth
/// bit that makes the number of minus signs even.
const fn ksign(i: u32) -> u8 {
    (i | ((i.count_ones() & 1) << 7)) as u8
}

/// `x * ±1.0`, the sign from bit `j` of a sign byte (set: negative), as the multiplication
/// numpy performs: a NaN keeps its sign. (Rust's compiler may turn a multiplication by ±1
/// into a sign flip, which would flip a NaN's sign too.)
#[inline(always)]
fn times_sign(x: f32, bits: u8, j: usize) -> f32 {
    if x.is_nan() || (bits >> j) & 1 == 0 {
        x
    } else {
        -x
    }
}
