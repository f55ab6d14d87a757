//! GGUF, the file format of ggml and llama.cpp: reader and streaming writer. The tensor
//! types and their codecs are in [`crate::codecs`].
//!
//! Layout (all little endian; version 3, also read: version 2):
//!
//! ```text
//! "GGUF" | version u32 | tensor_count u64 | kv_count u64
//! kv_count × (key: string, value_type u32, value)
//! tensor_count × (name: string, n_dims u32, ne[n_dims] u64, ggml_type u32, offset u64)
//! zero padding to `general.alignment` (default 32)
//! data section: each tensor at its offset (relative to the section, a multiple of the
//! alignment), zero padded to the alignment after each tensor, including the last
//! ```
//!
//! A string is a u64 byte length then UTF-8 bytes; an array is an element type u32, a u64
//! count, then the elements. Dimensions are in ggml's order, innermost first (`ne[0]` is the
//! row length), so a row-major shape `[rows, cols]` is stored as `ne = [cols, rows]`. Every
//! shape in this module's API is outermost first, like the rest of the crate.

pub mod export;
mod read;
pub mod source;
pub mod split;
pub(crate) mod write;

pub use crate::codecs::presets::{Preset, QuantizationChoice, TensorPlan, TypePlanModel};
pub use crate::codecs::{
    dequantize_q4_0, dequantize_q4_0_ref, dequantize_q8_0, dequantize_q8_0_ref, quantize_q4_0,
    quantize_q4_0_ref, quantize_q8_0, quantize_q8_0_ref, GgmlType, Q4_0_BLOCK_BYTES,
    Q8_0_BLOCK_BYTES, QK,
};
pub use crate::source::value::{GgufArray, GgufValue, GgufValueType, JsonBudget};
pub use export::{plan_export, plan_preset, ExportTensor};
pub use read::{parse_header, GgufFile, GgufHeader, GgufParts, GgufTensorInfo};
pub use source::{GgufSource, Served};
#[cfg(feature = "fs")]
pub use split::write_gguf_split;
#[cfg(feature = "fs")]
pub use write::write_gguf_file;
pub use write::{choose_type, standard_metadata, write_gguf, GgufTensorSpec, TensorData};

/// The four bytes every GGUF file starts with.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// The version this crate writes.
pub const GGUF_VERSION: u32 = 3;
/// Alignment of the data section and of every tensor when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: usize = 32;
/// ggml's reader refuses larger alignments (they only inflate padding).
pub const MAX_ALIGNMENT: usize = 1 << 20;
/// ggml's `GGUF_MAX_STRING_LENGTH`: longer strings are refused by its reader, and by ours.
pub const MAX_STRING_BYTES: u64 = 64 * 1024 * 1024;
/// ggml's `GGUF_MAX_ARRAY_ELEMENTS`.
pub const MAX_ARRAY_ELEMENTS: u64 = 64 * 1024 * 1024;
/// The longest tensor name ggml reads: its `GGML_MAX_NAME` (64) counts the terminating NUL.
pub const MAX_TENSOR_NAME_BYTES: usize = 63;
/// ggml's `GGML_MAX_DIMS`.
pub const MAX_DIMS: usize = 4;
/// Value of `general.quantization_version` for the block layouts written here (ggml's
/// `GGML_QNT_VERSION`).
pub const QUANTIZATION_VERSION: u32 = 2;

/// Metadata keys with a meaning to this module.
pub mod keys {
    pub const ARCHITECTURE: &str = "general.architecture";
    pub const NAME: &str = "general.name";
    pub const ALIGNMENT: &str = "general.alignment";
    pub const QUANTIZATION_VERSION: &str = "general.quantization_version";
}

/// `value` rounded up to a multiple of `alignment` (a power of two), `None` on overflow.
fn align_up(value: u64, alignment: u64) -> Option<u64> {
    let mask = alignment.checked_sub(1)?;
    value.checked_add(mask).map(|v| v & !mask)
}

#[cfg(test)]
mod tests;
