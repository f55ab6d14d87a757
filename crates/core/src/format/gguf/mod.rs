//! GGUF, the file format of ggml and llama.cpp: reader, streaming writer, and the Q8_0/Q4_0
//! quantizers.
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

mod quant;
mod read;
mod value;
mod write;

pub use quant::{
    dequantize_q4_0, dequantize_q4_0_ref, dequantize_q8_0, dequantize_q8_0_ref, quantize_q4_0,
    quantize_q4_0_ref, quantize_q8_0, quantize_q8_0_ref, Q4_0_BLOCK_BYTES, Q8_0_BLOCK_BYTES, QK,
};
pub use read::{GgufFile, GgufTensorInfo};
pub use value::{GgufArray, GgufValue, GgufValueType};
pub use write::{
    choose_type, standard_metadata, write_gguf, write_gguf_file, write_gguf_file_with,
    GgufTensorSpec, Quantization,
};

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
/// ggml's `GGML_MAX_DIMS`.
pub const MAX_DIMS: usize = 4;
/// Value of `general.quantization_version` for the Q8_0/Q4_0 block layouts written here.
pub const QUANTIZATION_VERSION: u32 = 2;

/// Metadata keys with a meaning to this module.
pub mod keys {
    pub const ARCHITECTURE: &str = "general.architecture";
    pub const NAME: &str = "general.name";
    pub const ALIGNMENT: &str = "general.alignment";
    pub const QUANTIZATION_VERSION: &str = "general.quantization_version";
}

/// A ggml tensor type: its id in the file, block size (elements) and block bytes.
///
/// Every type ggml defines is known, so files from llama.cpp list and expose their raw bytes;
/// [`GgufFile::tensor`] decodes F32, F16, BF16, Q8_0, Q4_0 and the plain integer/F64 types.
/// The writer produces F32, F16, Q8_0 and Q4_0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GgmlType(u32);

/// (id, name, elements per block, bytes per block), from ggml's type traits. Ids 4, 5, 31–33
/// and 36–38 were removed from ggml and are rejected, as ggml's reader does.
const GGML_TYPES: [(u32, &str, usize, usize); 34] = [
    (0, "F32", 1, 4),
    (1, "F16", 1, 2),
    (2, "Q4_0", 32, 18),
    (3, "Q4_1", 32, 20),
    (6, "Q5_0", 32, 22),
    (7, "Q5_1", 32, 24),
    (8, "Q8_0", 32, 34),
    (9, "Q8_1", 32, 36),
    (10, "Q2_K", 256, 84),
    (11, "Q3_K", 256, 110),
    (12, "Q4_K", 256, 144),
    (13, "Q5_K", 256, 176),
    (14, "Q6_K", 256, 210),
    (15, "Q8_K", 256, 292),
    (16, "IQ2_XXS", 256, 66),
    (17, "IQ2_XS", 256, 74),
    (18, "IQ3_XXS", 256, 98),
    (19, "IQ1_S", 256, 50),
    (20, "IQ4_NL", 32, 18),
    (21, "IQ3_S", 256, 110),
    (22, "IQ2_S", 256, 82),
    (23, "IQ4_XS", 256, 136),
    (24, "I8", 1, 1),
    (25, "I16", 1, 2),
    (26, "I32", 1, 4),
    (27, "I64", 1, 8),
    (28, "F64", 1, 8),
    (29, "IQ1_M", 256, 56),
    (30, "BF16", 1, 2),
    (34, "TQ1_0", 256, 54),
    (35, "TQ2_0", 256, 66),
    (39, "MXFP4", 32, 17),
    (40, "NVFP4", 64, 36),
    (41, "Q1_0", 128, 18),
];

impl GgmlType {
    pub const F32: GgmlType = GgmlType(0);
    pub const F16: GgmlType = GgmlType(1);
    pub const Q4_0: GgmlType = GgmlType(2);
    pub const Q8_0: GgmlType = GgmlType(8);
    pub const BF16: GgmlType = GgmlType(30);

    fn traits(self) -> (&'static str, usize, usize) {
        GGML_TYPES
            .iter()
            .find(|t| t.0 == self.0)
            .map_or(("UNKNOWN", 1, 0), |t| (t.1, t.2, t.3))
    }

    /// The type with this id, if ggml defines it.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        GGML_TYPES.iter().any(|t| t.0 == id).then_some(GgmlType(id))
    }

    /// The type with this name (as ggml spells it, case-insensitive: "q8_0", "BF16").
    pub fn from_name(name: &str) -> Option<GgmlType> {
        GGML_TYPES
            .iter()
            .find(|t| t.1.eq_ignore_ascii_case(name))
            .map(|t| GgmlType(t.0))
    }

    pub fn id(self) -> u32 {
        self.0
    }

    pub fn name(self) -> &'static str {
        self.traits().0
    }

    /// Elements per block (1 for plain types).
    pub fn block_size(self) -> usize {
        self.traits().1
    }

    /// Bytes per block.
    pub fn type_size(self) -> usize {
        self.traits().2
    }

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
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `value` rounded up to a multiple of `alignment` (a power of two), `None` on overflow.
fn align_up(value: u64, alignment: u64) -> Option<u64> {
    let mask = alignment.checked_sub(1)?;
    value.checked_add(mask).map(|v| v & !mask)
}

#[cfg(test)]
mod tests;
