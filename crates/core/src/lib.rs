//! safetensors-node-core: the pure-Rust engine behind the `safetensors-node` npm package.
//!
//! Nothing here knows about JavaScript. Data flows `bytes → detect → TensorSource (validated
//! once, at open) → fetch → cast → caller`; writers take `TensorView`s back. See
//! `docs/architecture.md` in the repository for the picture.

pub mod buffer;
pub mod cast;
pub mod codecs;
#[cfg(feature = "fs")]
pub mod convert;
pub mod cpu;
pub mod dtype;
pub mod error;
pub mod format;
pub mod fsutil;
pub mod memory;
pub mod models;
#[cfg(feature = "mmap")]
pub mod pages;
pub mod parallel;
pub mod pretrained;
pub mod source;
pub mod tensor;

pub use dtype::DType;
pub use error::{CoreError, ErrorKind, Result};
pub use format::{open, OpenOptions};
pub use source::{F32Decoder, Metadata, SourceTensor, TensorSource, WeightsFormat};
pub use tensor::TensorView;
