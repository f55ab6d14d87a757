//! safetensors-node-core: the pure-Rust engine behind the `safetensors-node` npm package.
//!
//! Nothing here knows about JavaScript. Data flows `bytes → detect → TensorSource (validated
//! once, at open) → fetch → cast → caller`; writers take `TensorView`s back. See
//! `docs/architecture.md` in the repository for the picture.

// Without the `fs` feature nothing here may touch the file system: clippy refuses every
// item of `std::fs` (and the `Path` methods that stat) listed in clippy.toml, so the
// no-default-features clippy run of .ci/run proves the seam. (Allowed elsewhere by
// Cargo.toml's `[lints]`: with `fs` they are the point, and tests read fixtures.)
#![cfg_attr(
    not(feature = "fs"),
    deny(clippy::disallowed_types, clippy::disallowed_methods)
)]

pub mod buffer;
pub mod cast;
pub mod codecs;
#[cfg(feature = "fs")]
pub mod convert;
pub mod cpu;
#[cfg(feature = "fs")]
pub mod diff;
pub mod dtype;
pub mod error;
pub mod format;
#[cfg(feature = "fs")]
pub mod fsutil;
pub mod hub;
pub mod memory;
pub mod models;
pub mod names;
#[cfg(feature = "mmap")]
pub mod pages;
pub mod parallel;
pub mod pretrained;
pub mod read_as;
pub mod remote;
pub mod slice;
pub mod source;
pub mod tensor;
#[cfg(feature = "fs")]
pub mod verify;

pub use dtype::DType;
pub use error::{CoreError, ErrorKind, Result};
#[cfg(feature = "fs")]
pub use pretrained::open;
pub use source::{
    F32Decoder, Metadata, OpenOptions, Selected, Selection, SourceTensor, TensorSource,
    WeightsFormat,
};
pub use tensor::TensorView;
