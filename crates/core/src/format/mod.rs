//! Readers and writers of the file formats, all speaking [`crate::TensorView`].

pub mod gguf;
pub mod mlx;
pub mod numpy;
pub mod onnx;
pub mod pytorch;
pub mod safetensors;
pub mod strided;
pub mod zip;
