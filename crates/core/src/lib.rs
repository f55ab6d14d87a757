//! safetensors-node-core: the pure-Rust engine behind the `safetensors-node` npm package.
//!
//! Nothing here knows about JavaScript. Data flows `file → Source → Header (validated once)
//! → TensorView → cast → caller`; writers take `TensorView`s back. See `DESIGN.md` in the
//! repository for the picture.

pub mod buffer;
pub mod cast;
pub mod codecs;
pub mod convert;
pub mod dtype;
pub mod error;
pub mod format;
pub mod fsutil;
pub mod models;
pub mod pages;
pub mod parallel;
pub mod pretrained;
pub mod tensor;

pub use dtype::DType;
pub use error::{CoreError, ErrorKind, Result};
pub use tensor::TensorView;
