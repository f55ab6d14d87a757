//! Readers and writers of the file formats, and the one table that registers them.
//!
//! Every readable format is a module exporting a [`TensorSource`] and one [`Registration`]
//! (how its bytes are recognised, how a file is opened); [`FORMATS`] lists them in the order
//! they are tried. Adding a format is its module plus one line here.

pub mod detect;
pub mod gguf;
pub mod mlx;
pub mod numpy;
pub mod onnx;
pub mod pytorch;
pub mod safetensors;
pub mod sharded;
pub mod strided;
pub mod zip;

use crate::error::{CoreError, Result};
use crate::memory::Backend;
use crate::source::{TensorSource, WeightsFormat};
use detect::{Detected, Head};
#[cfg(feature = "fs")]
use std::path::Path;

/// How [`open`] opens a file.
#[derive(Default)]
pub struct OpenOptions<'p> {
    pub backend: Backend,
    /// Called with (bytes done, bytes in all) while a file is read (at least once per file;
    /// more often while a large document is parsed).
    pub progress: Option<&'p mut dyn FnMut(u64, u64)>,
}

impl OpenOptions<'_> {
    pub fn with_backend(backend: Backend) -> OpenOptions<'static> {
        OpenOptions {
            backend,
            progress: None,
        }
    }

    /// Report progress, if anyone listens.
    pub fn report(&mut self, done: u64, total: u64) {
        if let Some(p) = self.progress.as_mut() {
            p(done, total)
        }
    }
}

#[cfg(feature = "fs")]
/// Opens a file of one format.
pub type OpenFn = fn(&Path, &mut OpenOptions<'_>) -> Result<Box<dyn TensorSource>>;
/// Reads a whole file of one format held in memory.
pub type FromBytesFn = fn(Vec<u8>) -> Result<Box<dyn TensorSource>>;

/// One format: how it is recognised and opened.
pub struct Registration {
    pub format: WeightsFormat,
    /// Whether a file's first bytes are this format.
    pub sniff: fn(&Head) -> bool,
    /// Open a file of this format; `None` while the format is recognised but not read.
    #[cfg(feature = "fs")]
    pub open: Option<OpenFn>,
    /// Read a whole file held in memory (remote files fetched whole), where the format can.
    pub from_bytes: Option<FromBytesFn>,
    /// Every problem of a file, not only the first (what `validate` lists); formats without
    /// one report the error that opening gives.
    #[cfg(feature = "fs")]
    pub problems: Option<fn(&Path) -> Vec<CoreError>>,
}

impl Registration {
    /// The entry of a format read whole from one file ([`crate::source::WholeFile`]).
    pub const fn whole_file<S: crate::source::WholeFile>(
        format: WeightsFormat,
        sniff: fn(&Head) -> bool,
    ) -> Registration {
        Registration {
            format,
            sniff,
            #[cfg(feature = "fs")]
            open: Some(crate::source::open_whole::<S>),
            from_bytes: Some(crate::source::whole_from_bytes::<S>),
            #[cfg(feature = "fs")]
            problems: None,
        }
    }

    /// Whether this build reads the format: from a file (without the `fs` feature, from
    /// bytes in memory).
    pub fn reads(&self) -> bool {
        #[cfg(feature = "fs")]
        return self.open.is_some();
        #[cfg(not(feature = "fs"))]
        return self.from_bytes.is_some();
    }
}

/// The formats, in the order their recognisers are tried. Unrecognised bytes are read as
/// SafeTensors (see [`detect`]).
pub static FORMATS: &[Registration] = &[
    safetensors::FORMAT,
    gguf::source::FORMAT,
    numpy::FORMAT,
    pytorch::FORMAT,
    sharded::FORMAT,
    mlx::FORMAT,
];

/// The registration of `format`.
pub fn registration(format: WeightsFormat) -> &'static Registration {
    FORMATS
        .iter()
        .find(|r| r.format == format)
        .unwrap_or(&safetensors::FORMAT)
}

/// The formats this build reads, for messages ("safetensors, gguf, …").
pub fn readable_list() -> String {
    let names: Vec<&str> = FORMATS
        .iter()
        .filter(|r| r.reads())
        .map(|r| r.format.name())
        .collect();
    format!("it reads {}", names.join(", "))
}

#[cfg(feature = "fs")]
/// What the file at `path` is, by its bytes.
pub fn detect_file(path: &Path) -> Result<Detected> {
    Ok(detect::sniff(&Head::read_path(path)?))
}

#[cfg(feature = "fs")]
/// Open a weights file by what its bytes are (or as `format`, when given), or a model
/// directory (`config.json` plus weights, see [`crate::pretrained`]).
pub fn open(
    path: &Path,
    format: Option<WeightsFormat>,
    options: &mut OpenOptions<'_>,
) -> Result<Box<dyn TensorSource>> {
    let meta = std::fs::metadata(path).map_err(|e| CoreError::io(e, path))?;
    if meta.is_dir() {
        let dir = crate::pretrained::ModelDir::open_with(path, options)?;
        if let Some(f) = format.filter(|f| *f != dir.format()) {
            return Err(CoreError::invalid_argument(format!(
                "a model directory holding {} weights, not {}",
                dir.format(),
                f.name()
            ))
            .with_path(path));
        }
        return Ok(Box::new(dir));
    }
    let detected = match format {
        Some(f) => Detected::Format(f),
        None => detect_file(path)?,
    };
    open_detected(path, detected, options)
}

#[cfg(feature = "fs")]
/// Open a file known to be `detected`.
pub fn open_detected(
    path: &Path,
    detected: Detected,
    options: &mut OpenOptions<'_>,
) -> Result<Box<dyn TensorSource>> {
    match detected {
        Detected::Format(f) => match registration(f).open {
            Some(open) => open(path, options),
            None => Err(detect::unknown_format(detected, None).with_path(path)),
        },
        Detected::Foreign(_) => Err(detect::unknown_format(detected, None).with_path(path)),
    }
}

/// Read a whole file held in memory by what its bytes are (or as `format`).
pub fn open_bytes(bytes: Vec<u8>, format: Option<WeightsFormat>) -> Result<Box<dyn TensorSource>> {
    let detected = match format {
        Some(f) => Detected::Format(f),
        None => detect::sniff(&Head::of(&bytes)),
    };
    match detected {
        Detected::Format(f) => match registration(f).from_bytes {
            Some(read) => read(bytes),
            None if registration(f).reads() => Err(CoreError::invalid_argument(format!(
                "{} cannot be read from bytes alone",
                f.describe()
            ))),
            None => Err(detect::unknown_format(detected, None)),
        },
        Detected::Foreign(_) => Err(detect::unknown_format(detected, None)),
    }
}
