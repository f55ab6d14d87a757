//! ggml's tensor types and their codecs, in one table keyed by type.
//!
//! [`GgmlType`] lists every type ggml defines (`ggml.h`'s `enum ggml_type`); its
//! [`codec`](GgmlType::codec) is the type's row in the table below: id, name, elements per
//! block, bytes per block, the SafeTensors dtype with the same bytes (plain types), a decoder
//! to f32 and an encoder from f32 where we have them. A type without a decoder or encoder is
//! an explicit ERR_UNSUPPORTED_DTYPE from [`decode`] / [`encode`]: nothing routes one type
//! into another's code. Adding a type is one line in the table and one module.
//!
//! Every decoder is bit-exact with `gguf.quants.dequantize` of gguf-py 0.19, whose numpy code
//! fixes the order of the float operations (`d * sc * q - dm`, …); each module mirrors it.
//! Every encoder is byte-exact with ggml's reference quantizer (`quantize_row_*_ref` in
//! `ggml-quants.c`) on every input, finite or not: comparisons and roundings are the C ones,
//! and where C converts an out-of-range float to an integer we do what x86-64 does
//! ([`c_trunc_i32`]). The tests compare both against the peers themselves.
//!
//! Each codec has a plain reference (one block at a time, written as the formulas read) and a
//! fast version: for most types the same block code compiled for AVX2 and chosen at run
//! time, for Q8_0/Q4_0 hand-written kernels. Large inputs are split over threads.

mod iq;
mod k_quants;
mod mxfp4;
mod nvfp4;
mod plain;
pub mod presets;
mod q4_0;
mod q4_1;
mod q5;
mod q8_0;
mod simd;
mod tq;

use crate::dtype::DType;
use crate::error::{CoreError, Result};

pub use presets::{plan_types, Preset, QuantizationChoice, TensorPlan, TypePlanModel};
pub use q4_0::{dequantize_q4_0, dequantize_q4_0_ref, quantize_q4_0, quantize_q4_0_ref};
pub use q8_0::{dequantize_q8_0, dequantize_q8_0_ref, quantize_q8_0, quantize_q8_0_ref};

/// Elements per Q8_0 / Q4_0 block (and every other 32-element block).
pub const QK: usize = 32;
/// Elements per K-quant / IQ super-block.
pub const QK_K: usize = 256;
/// Bytes of one Q8_0 block: f16 scale + 32 × i8.
pub const Q8_0_BLOCK_BYTES: usize = 2 + QK;
/// Bytes of one Q4_0 block: f16 scale + 32 × 4 bits.
pub const Q4_0_BLOCK_BYTES: usize = 2 + QK / 2;

/// A conversion between blocks and f32 values: `(source, destination)` of whole blocks.
pub type Kernel<S, D> = fn(&[S], &mut [D]);

/// The two implementations of one conversion; both give identical bits on every input.
#[derive(Clone, Copy)]
pub struct Kernels<S: 'static, D: 'static> {
    /// One block at a time, written as the format's formulas read: the specification.
    pub reference: Kernel<S, D>,
    /// The same results, faster (vector instructions chosen at run time).
    pub fast: Kernel<S, D>,
}

/// One row of the codec table.
pub struct Codec {
    pub ty: GgmlType,
    /// The type's number in GGUF files.
    pub id: u32,
    /// ggml's name for it ("Q4_K").
    pub name: &'static str,
    /// Elements per block (1 for plain types).
    pub block: usize,
    /// Bytes per block.
    pub bytes: usize,
    /// The SafeTensors dtype with exactly these bytes (plain types), which is how the type
    /// converts: integers stay integers.
    pub native: Option<DType>,
    /// Blocks → f32.
    pub decode: Option<Kernels<u8, f32>>,
    /// f32 → blocks.
    pub encode: Option<Kernels<f32, u8>>,
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Codec")
            .field("name", &self.name)
            .field("id", &self.id)
            .field("block", &self.block)
            .field("bytes", &self.bytes)
            .field("native", &self.native)
            .field("decode", &self.decode.is_some())
            .field("encode", &self.encode.is_some())
            .finish()
    }
}

/// The codec table. Each row: type = id, elements per block x bytes per block, the dtype
/// with the same bytes, decoder, encoder. Ids 4, 5, 31–33 and 36–38 were removed from ggml
/// and are refused, as ggml's reader does.
macro_rules! codec_table {
    ($( $ty:ident = $id:literal, $block:literal x $bytes:literal,
        native: $native:expr, decode: $decode:expr, encode: $encode:expr; )*) => {
        /// A ggml tensor type. Variant names are ggml's.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum GgmlType { $( $ty, )* }

        impl GgmlType {
            /// Every type, in table order.
            pub const ALL: &'static [GgmlType] = &[$( GgmlType::$ty, )*];

            /// The type's row of the codec table.
            pub fn codec(self) -> &'static Codec {
                match self {
                    $( GgmlType::$ty => {
                        static CODEC: Codec = Codec {
                            ty: GgmlType::$ty,
                            id: $id,
                            name: stringify!($ty),
                            block: $block,
                            bytes: $bytes,
                            native: $native,
                            decode: $decode,
                            encode: $encode,
                        };
                        &CODEC
                    } )*
                }
            }
        }
    };
}

codec_table! {
    F32     =  0,   1 x   4, native: Some(DType::F32),  decode: Some(plain::F32_DECODE), encode: Some(plain::F32_ENCODE);
    F16     =  1,   1 x   2, native: Some(DType::F16),  decode: Some(plain::F16_DECODE), encode: Some(plain::F16_ENCODE);
    Q4_0    =  2,  32 x  18, native: None, decode: Some(q4_0::DECODE),   encode: Some(q4_0::ENCODE);
    Q4_1    =  3,  32 x  20, native: None, decode: Some(q4_1::DECODE),   encode: Some(q4_1::ENCODE);
    Q5_0    =  6,  32 x  22, native: None, decode: Some(q5::Q5_0_DECODE), encode: Some(q5::Q5_0_ENCODE);
    Q5_1    =  7,  32 x  24, native: None, decode: Some(q5::Q5_1_DECODE), encode: Some(q5::Q5_1_ENCODE);
    Q8_0    =  8,  32 x  34, native: None, decode: Some(q8_0::DECODE),   encode: Some(q8_0::ENCODE);
    Q8_1    =  9,  32 x  36, native: None, decode: None, encode: None;
    Q2_K    = 10, 256 x  84, native: None, decode: Some(k_quants::Q2_K_DECODE), encode: Some(k_quants::Q2_K_ENCODE);
    Q3_K    = 11, 256 x 110, native: None, decode: Some(k_quants::Q3_K_DECODE), encode: Some(k_quants::Q3_K_ENCODE);
    Q4_K    = 12, 256 x 144, native: None, decode: Some(k_quants::Q4_K_DECODE), encode: Some(k_quants::Q4_K_ENCODE);
    Q5_K    = 13, 256 x 176, native: None, decode: Some(k_quants::Q5_K_DECODE), encode: Some(k_quants::Q5_K_ENCODE);
    Q6_K    = 14, 256 x 210, native: None, decode: Some(k_quants::Q6_K_DECODE), encode: Some(k_quants::Q6_K_ENCODE);
    Q8_K    = 15, 256 x 292, native: None, decode: None, encode: None;
    IQ2_XXS = 16, 256 x  66, native: None, decode: Some(iq::IQ2_XXS_DECODE), encode: None;
    IQ2_XS  = 17, 256 x  74, native: None, decode: Some(iq::IQ2_XS_DECODE), encode: None;
    IQ3_XXS = 18, 256 x  98, native: None, decode: Some(iq::IQ3_XXS_DECODE), encode: None;
    IQ1_S   = 19, 256 x  50, native: None, decode: Some(iq::IQ1_S_DECODE), encode: None;
    IQ4_NL  = 20,  32 x  18, native: None, decode: Some(iq::IQ4_NL_DECODE), encode: None;
    IQ3_S   = 21, 256 x 110, native: None, decode: Some(iq::IQ3_S_DECODE), encode: None;
    IQ2_S   = 22, 256 x  82, native: None, decode: Some(iq::IQ2_S_DECODE), encode: None;
    IQ4_XS  = 23, 256 x 136, native: None, decode: Some(iq::IQ4_XS_DECODE), encode: None;
    I8      = 24,   1 x   1, native: Some(DType::I8),  decode: None, encode: None;
    I16     = 25,   1 x   2, native: Some(DType::I16), decode: None, encode: None;
    I32     = 26,   1 x   4, native: Some(DType::I32), decode: None, encode: None;
    I64     = 27,   1 x   8, native: Some(DType::I64), decode: None, encode: None;
    F64     = 28,   1 x   8, native: Some(DType::F64), decode: None, encode: None;
    IQ1_M   = 29, 256 x  56, native: None, decode: Some(iq::IQ1_M_DECODE), encode: None;
    BF16    = 30,   1 x   2, native: Some(DType::BF16), decode: Some(plain::BF16_DECODE), encode: Some(plain::BF16_ENCODE);
    TQ1_0   = 34, 256 x  54, native: None, decode: Some(tq::TQ1_0_DECODE), encode: None;
    TQ2_0   = 35, 256 x  66, native: None, decode: Some(tq::TQ2_0_DECODE), encode: None;
    MXFP4   = 39,  32 x  17, native: None, decode: Some(mxfp4::DECODE), encode: None;
    NVFP4   = 40,  64 x  36, native: None, decode: Some(nvfp4::DECODE), encode: None;
    Q1_0    = 41, 128 x  18, native: None, decode: None, encode: None;
    Q2_0    = 42,  64 x  18, native: None, decode: None, encode: None;
}

impl GgmlType {
    /// The type with this id, if ggml defines it.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        GgmlType::ALL.iter().copied().find(|t| t.id() == id)
    }

    /// The type with this name (as ggml spells it, case-insensitive: "q8_0", "BF16").
    pub fn from_name(name: &str) -> Option<GgmlType> {
        GgmlType::ALL
            .iter()
            .copied()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }

    pub fn id(self) -> u32 {
        self.codec().id
    }

    pub fn name(self) -> &'static str {
        self.codec().name
    }

    /// Elements per block (1 for plain types).
    pub fn block_size(self) -> usize {
        self.codec().block
    }

    /// Bytes per block.
    pub fn type_size(self) -> usize {
        self.codec().bytes
    }

    /// Stored in blocks of several elements with shared scales.
    pub fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// Bytes taken by `numel` elements; `None` on overflow or when `numel` is not a whole
    /// number of blocks.
    pub fn byte_len(self, numel: usize) -> Option<usize> {
        let block = self.block_size();
        if !numel.is_multiple_of(block) {
            return None;
        }
        (numel / block).checked_mul(self.type_size())
    }

    /// The SafeTensors dtype a tensor of this type converts to: its own bytes for plain
    /// types (integers stay integers), F32 for the types we decode.
    pub fn decoded_dtype(self) -> Result<DType> {
        let codec = self.codec();
        match (codec.native, codec.decode) {
            (Some(dtype), _) => Ok(dtype),
            (None, Some(_)) => Ok(DType::F32),
            (None, None) => Err(unsupported_decode(self)),
        }
    }

    /// Whether [`encode`] can write this type.
    pub fn can_encode(self) -> bool {
        self.codec().encode.is_some()
    }

    /// Whether [`decode`] can read this type.
    pub fn can_decode(self) -> bool {
        self.codec().decode.is_some()
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

fn unsupported_decode(ty: GgmlType) -> CoreError {
    CoreError::unsupported_dtype(format!(
        "GGUF type {ty} cannot be decoded (gguf-py has no dequantizer for it either); read its \
         raw bytes instead"
    ))
}

fn unsupported_encode(ty: GgmlType) -> CoreError {
    CoreError::unsupported_dtype(format!(
        "GGUF type {ty} cannot be written; the types written are {}",
        encodable_names().join(", ")
    ))
}

/// The names of the types [`encode`] writes, in table order.
pub fn encodable_names() -> Vec<&'static str> {
    GgmlType::ALL
        .iter()
        .filter(|t| t.can_encode())
        .map(|t| t.name())
        .collect()
}

/// `src` must hold whole blocks, and `dst` exactly as many blocks.
fn check_blocks(ty: GgmlType, bytes: usize, values: usize) -> Result<usize> {
    let codec = ty.codec();
    if !values.is_multiple_of(codec.block)
        || !bytes.is_multiple_of(codec.bytes)
        || values / codec.block != bytes / codec.bytes
    {
        return Err(CoreError::invalid_argument(format!(
            "{bytes} bytes of {ty} (blocks of {} bytes) do not hold {values} values (blocks of \
             {})",
            codec.bytes, codec.block
        )));
    }
    Ok(values / codec.block)
}

/// Decode `src` (whole blocks of `ty`) into `dst` (as many values), bit-exact with gguf-py,
/// on several threads when large.
pub fn decode(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    let kernels = ty.codec().decode.ok_or_else(|| unsupported_decode(ty))?;
    check_blocks(ty, src.len(), dst.len())?;
    split_blocks(src, ty.type_size(), dst, ty.block_size(), &kernels.fast)
}

/// [`decode`] on this thread only (the fast kernel, no split over threads): for timing a
/// decoder alone.
pub fn decode_here(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    let kernels = ty.codec().decode.ok_or_else(|| unsupported_decode(ty))?;
    check_blocks(ty, src.len(), dst.len())?;
    (kernels.fast)(src, dst);
    Ok(())
}

/// [`decode`] with the plain reference kernel, one block at a time on this thread.
pub fn decode_ref(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    let kernels = ty.codec().decode.ok_or_else(|| unsupported_decode(ty))?;
    check_blocks(ty, src.len(), dst.len())?;
    (kernels.reference)(src, dst);
    Ok(())
}

/// Encode `src` (whole blocks of values) into `dst` (as many blocks of `ty`), byte-exact with
/// ggml's reference quantizer, on several threads when large.
pub fn encode(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    let kernels = ty.codec().encode.ok_or_else(|| unsupported_encode(ty))?;
    check_blocks(ty, dst.len(), src.len())?;
    split_blocks(src, ty.block_size(), dst, ty.type_size(), &kernels.fast)
}

/// [`encode`] on the calling thread only, for callers that parallelise themselves.
pub fn encode_here(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    let kernels = ty.codec().encode.ok_or_else(|| unsupported_encode(ty))?;
    check_blocks(ty, dst.len(), src.len())?;
    (kernels.fast)(src, dst);
    Ok(())
}

/// [`encode`] with the plain reference kernel, one block at a time on this thread.
pub fn encode_ref(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    let kernels = ty.codec().encode.ok_or_else(|| unsupported_encode(ty))?;
    check_blocks(ty, dst.len(), src.len())?;
    (kernels.reference)(src, dst);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Scalar helpers shared by the codecs.

/// An f16 (little-endian bytes) as f32: exact, NaN payloads kept (signalling NaNs stay
/// signalling), as numpy's `astype(np.float32)` converts.
#[inline(always)]
pub(crate) fn f16_le(b: [u8; 2]) -> f32 {
    f16_bits_to_f32(u16::from_le_bytes(b))
}

/// See [`f16_le`]. Branch-free, so loops of it vectorise.
#[inline(always)]
pub(crate) fn f16_bits_to_f32(h: u16) -> f32 {
    let h = h as u32;
    let sign = (h & 0x8000) << 16;
    let em = h & 0x7FFF;
    let normal = (em << 13) + (112 << 23);
    let inf_nan = (em << 13) | 0x7F80_0000;
    // Zero or subnormal: em * 2^-24, exact in f32.
    let subnormal = (em as f32 * f32::from_bits(0x3380_0000)).to_bits();
    let bits = if em >= 0x7C00 {
        inf_nan
    } else if em < 0x0400 {
        subnormal
    } else {
        normal
    };
    f32::from_bits(sign | bits)
}

/// `a + b` where a NaN `a` wins over a NaN `b` (made quiet), as numpy's loops compute
/// `(d * q) + m`. Plain `+` leaves the choice to the compiler, which may swap the operands.
#[inline(always)]
pub(crate) fn add_nan_first(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        f32::from_bits(a.to_bits() | 0x0040_0000)
    } else {
        a + b
    }
}

/// ggml's `GGML_FP32_TO_FP16`: round to nearest even; NaN becomes the quiet NaN 0x7E00
/// (sign kept).
#[inline(always)]
pub(crate) fn fp16_bits(x: f32) -> u16 {
    if x.is_nan() {
        ((x.to_bits() >> 16) as u16 & 0x8000) | 0x7E00
    } else {
        half::f16::from_f32_const(x).to_bits()
    }
}

/// What x86-64's `cvttss2si` gives for a float converted to a 32-bit integer in C: the value
/// truncated toward zero, or `i32::MIN` when it is NaN or out of range (C leaves that case
/// undefined; this is what ggml's quantizers do on the machines we compare against).
#[inline(always)]
pub(crate) fn c_trunc_i32(x: f32) -> i32 {
    if (-2147483648.0..2147483648.0).contains(&x) {
        x as i32
    } else {
        i32::MIN
    }
}

/// ggml's `nearest_int`: round to nearest, ties to even, by adding 1.5 × 2^23 and reading
/// the mantissa. Defined on every input (huge, infinite and NaN values give garbage, the same
/// garbage as ggml's).
#[inline(always)]
pub(crate) fn nearest_int(x: f32) -> i32 {
    let v = x + 12582912.0;
    (v.to_bits() & 0x007F_FFFF) as i32 - 0x0040_0000
}

// ---------------------------------------------------------------------------------------
// Threads.

/// Below this many values per thread a second thread costs more than it saves.
const PARALLEL_MIN_VALUES: usize = 1 << 18;

/// Split the blocks over threads ([`crate::parallel::for_chunks`]) and run `work` on each
/// (source, destination) share; on the calling thread when the input is small.
fn split_blocks<S: Sync, D: Send>(
    src: &[S],
    src_per_block: usize,
    dst: &mut [D],
    dst_per_block: usize,
    work: &(dyn Fn(&[S], &mut [D]) + Sync),
) -> Result<()> {
    let values_per_block = src_per_block.max(dst_per_block).max(1);
    let split = crate::parallel::Split::new(src_per_block, dst_per_block)
        .min_units_per_thread(PARALLEL_MIN_VALUES.div_ceil(values_per_block));
    crate::parallel::for_chunks(split, src, dst, |_, s, d| {
        work(s, d);
        Ok(())
    })
}

#[cfg(test)]
mod tests;
