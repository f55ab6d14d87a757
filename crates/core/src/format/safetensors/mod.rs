//! The SafeTensors format: header validation, lazy reading, slicing and the writer.
//!
//! Validation follows Hugging Face's reference implementation (safetensors 0.8) rule by rule;
//! each rule maps to one error kind:
//!
//! | rule | kind |
//! |---|---|
//! | fewer than 8 bytes | `HeaderTooSmall` |
//! | header length over 100,000,000 | `HeaderTooLarge` |
//! | header runs past the file, is not UTF-8, not a header JSON, unknown dtype, duplicate name | `InvalidHeader` |
//! | offsets (sorted) not contiguous from 0, or end before start | `InvalidOffsets` |
//! | byte range ≠ shape × dtype size, or sizes overflow | `SizeMismatch` |
//! | data section not exactly covered | `IncompleteFile` |
//!
//! The header is parsed and validated once, at open; afterwards every tensor access is a
//! bounds-checked slice of a validated range.
mod header;
mod storage;
mod write;

#[cfg(feature = "mmap")]
pub use crate::memory::Mapping;
pub use crate::memory::{Backend, Memory, TensorBytes};
pub use crate::slice::{SliceArg, SlicePlan};
pub use header::*;
pub use storage::*;
pub use write::*;

#[cfg(test)]
mod tests;
