//! Readers and writers of the single-file formats, and the one table that registers them.
//!
//! Every readable format is a module exporting a [`TensorSource`] and one [`Registration`]
//! (its name and description, how its bytes are recognised, how a file is read); [`FORMATS`]
//! lists them in the order they are tried. Adding a format is its module, its variant of
//! [`WeightsFormat`] (the compiler then points at [`registration`]) and one line in
//! [`FORMATS`]. A sharded index is registered here too ([`SHARDED_INDEX`]: recognised by its
//! bytes), but its tensors are in the files it names, which the model-directory layer opens.

pub mod detect;
pub mod gguf;
pub mod mlx;
pub mod numpy;
pub mod onnx;
pub mod pytorch;
pub mod safetensors;
pub mod strided;
pub mod zip;

use crate::error::{CoreError, Result};
pub use crate::source::OpenOptions;
use crate::source::{TensorSource, WeightsFormat, WholeFile};
use detect::{Detected, Head};
#[cfg(feature = "fs")]
use std::path::Path;

#[cfg(feature = "fs")]
/// Opens a file of one format.
pub type OpenFn = fn(&Path, &mut OpenOptions<'_>) -> Result<Box<dyn TensorSource>>;
/// Reads a whole file of one format held in memory.
pub type FromBytesFn = fn(Vec<u8>) -> Result<Box<dyn TensorSource>>;
#[cfg(feature = "fs")]
/// Every problem of a file, not only the first (what `validate` lists).
pub type ProblemsFn = fn(&Path) -> Vec<CoreError>;

/// One format: what it is called, how it is recognised and how it is read.
pub struct Registration {
    pub format: WeightsFormat,
    /// The name JavaScript sees (`'safetensors'`, `'sharded-safetensors'`, `'gguf'`, …):
    /// `WeightsFile.format`, `options.format`, `types/header.d.ts`'s `WeightsFormat`.
    pub name: &'static str,
    /// What a file of this format is, for messages ("a GGUF file").
    pub describe: &'static str,
    /// The prefix under which string metadata of this format is kept when it is written to
    /// another format that namespaces keys (GGUF: `safetensors.format`).
    pub metadata_namespace: &'static str,
    /// Whether a file's first bytes are this format.
    pub sniff: fn(&Head) -> bool,
    pub reader: Reader,
}

/// How a file of a format is read.
pub enum Reader {
    /// The file holds the tensors.
    File(FileReader),
    /// The file names other files that hold the tensors (a sharded index): opened with them,
    /// as a model's layout, never from its bytes alone.
    Index,
}

/// How a file that holds its tensors is read.
pub struct FileReader {
    /// Open a file of this format; `None` while the format is recognised but not read.
    #[cfg(feature = "fs")]
    pub open: Option<OpenFn>,
    /// Read a whole file held in memory, where the format can.
    pub from_bytes: Option<FromBytesFn>,
    /// Every problem of a file, not only the first (what `validate` lists); formats without
    /// one report the error that opening gives.
    #[cfg(feature = "fs")]
    pub problems: Option<ProblemsFn>,
}

impl FileReader {
    /// The reader of a format read whole from one file ([`WholeFile`]).
    pub const fn whole<S: WholeFile>() -> FileReader {
        FileReader {
            #[cfg(feature = "fs")]
            open: Some(crate::source::open_whole::<S>),
            from_bytes: Some(crate::source::whole_from_bytes::<S>),
            #[cfg(feature = "fs")]
            problems: None,
        }
    }
}

impl Registration {
    #[cfg(feature = "fs")]
    /// How a file that holds its tensors is opened (none for an index, or a format not read).
    pub fn open(&self) -> Option<OpenFn> {
        match &self.reader {
            Reader::File(r) => r.open,
            Reader::Index => None,
        }
    }

    /// How a whole file held in memory is read, where it can be.
    pub fn from_bytes(&self) -> Option<FromBytesFn> {
        match &self.reader {
            Reader::File(r) => r.from_bytes,
            Reader::Index => None,
        }
    }

    #[cfg(feature = "fs")]
    /// Every problem of a file, where the format lists them.
    pub fn problems(&self) -> Option<ProblemsFn> {
        match &self.reader {
            Reader::File(r) => r.problems,
            Reader::Index => None,
        }
    }

    /// Whether a file of this format names the files that hold its tensors.
    pub fn is_index(&self) -> bool {
        matches!(self.reader, Reader::Index)
    }

    /// Whether this build reads the format: from a file (an index, with the files it names;
    /// without the `fs` feature, from bytes in memory).
    pub fn reads(&self) -> bool {
        #[cfg(feature = "fs")]
        return self.open().is_some() || self.is_index();
        #[cfg(not(feature = "fs"))]
        return self.from_bytes().is_some();
    }
}

/// A sharded checkpoint's index (`{"weight_map": {tensor: file}}`): recognised by its bytes,
/// opened with the shards it names.
pub const SHARDED_INDEX: Registration = Registration {
    format: WeightsFormat::ShardedSafeTensors,
    name: "sharded-safetensors",
    describe: "a sharded checkpoint index",
    metadata_namespace: "safetensors",
    sniff: detect::is_sharded_index,
    reader: Reader::Index,
};

/// The formats, in the order their recognisers are tried. Unrecognised bytes are read as
/// SafeTensors (see [`detect`]).
pub static FORMATS: &[Registration] = &[
    safetensors::FORMAT,
    gguf::source::FORMAT,
    numpy::FORMAT,
    pytorch::FORMAT,
    SHARDED_INDEX,
    mlx::FORMAT,
];

/// The registration of `format`.
pub fn registration(format: WeightsFormat) -> &'static Registration {
    match format {
        WeightsFormat::SafeTensors => &safetensors::FORMAT,
        WeightsFormat::ShardedSafeTensors => &SHARDED_INDEX,
        WeightsFormat::Gguf => &gguf::source::FORMAT,
        WeightsFormat::PyTorch => &pytorch::FORMAT,
        WeightsFormat::NumPy => &numpy::FORMAT,
        WeightsFormat::Mlx => &mlx::FORMAT,
    }
}

/// A format's facts are its registration's.
impl WeightsFormat {
    /// The name JavaScript sees ([`Registration::name`]).
    pub fn name(self) -> &'static str {
        registration(self).name
    }

    pub fn from_name(name: &str) -> Option<WeightsFormat> {
        FORMATS.iter().find(|r| r.name == name).map(|r| r.format)
    }

    /// What a file of this format is, for messages ([`Registration::describe`]).
    pub fn describe(self) -> &'static str {
        registration(self).describe
    }

    /// [`Registration::metadata_namespace`].
    pub fn metadata_namespace(self) -> &'static str {
        registration(self).metadata_namespace
    }
}

impl std::fmt::Display for WeightsFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The formats this build reads, for messages ("safetensors, gguf, …").
pub fn readable_list() -> String {
    let names: Vec<&str> = FORMATS
        .iter()
        .filter(|r| r.reads())
        .map(|r| r.name)
        .collect();
    format!("it reads {}", names.join(", "))
}

#[cfg(feature = "fs")]
/// What the file at `path` is, by its bytes.
pub fn detect_file(path: &Path) -> Result<Detected> {
    Ok(detect::sniff(&Head::read_path(path)?))
}

#[cfg(feature = "fs")]
/// Open a file that holds its tensors, known to be `detected` (an index, which names other
/// files, is opened with them: see the model-directory layer's `open`).
pub fn open_detected(
    path: &Path,
    detected: Detected,
    options: &mut OpenOptions<'_>,
) -> Result<Box<dyn TensorSource>> {
    match detected {
        Detected::Format(f) if registration(f).is_index() => Err(CoreError::invalid_argument(
            format!("{} is opened with the files it names", f.describe()),
        )
        .with_path(path)),
        Detected::Format(f) => match registration(f).open() {
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
        Detected::Format(f) => match registration(f).from_bytes() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_is_registered_once_under_its_own_name() {
        for f in WeightsFormat::ALL {
            assert_eq!(registration(f).format, f);
            assert_eq!(WeightsFormat::from_name(f.name()), Some(f));
            assert_eq!(FORMATS.iter().filter(|r| r.format == f).count(), 1, "{f}");
        }
        assert_eq!(FORMATS.len(), WeightsFormat::ALL.len());
        assert_eq!(WeightsFormat::from_name("onnx"), None);
        assert_eq!(WeightsFormat::Gguf.describe(), "a GGUF file");
        assert_eq!(
            WeightsFormat::ShardedSafeTensors.metadata_namespace(),
            "safetensors"
        );
    }
}
