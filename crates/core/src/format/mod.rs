//! Readers and writers of the file formats, all speaking [`crate::TensorView`].

pub mod gguf;
pub mod mlx;
pub mod onnx;
pub mod safetensors;
