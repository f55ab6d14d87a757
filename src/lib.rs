//! The napi binding of safetensors-node: argument conversion, typed arrays, async tasks and
//! error mapping. Everything a Rust user would also want lives in `crates/core` (`stcore`).

#![deny(clippy::all)]

mod args;
mod convert;
mod error;
mod file;
mod gguf;
mod handle;
mod hub;
mod metadata;
mod model;
mod models;
mod remote;
mod tasks;
mod typed;
mod weights;
mod write;
