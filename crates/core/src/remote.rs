//! Opening a weights file known only by byte ranges (sans-IO): a state machine that says
//! which bytes it needs next and is fed them, so that any driver (Node's `fetch`, a browser's,
//! a test's closure) reads a remote file with the parsers local files use. No file system,
//! no threads: it builds without the `fs` feature.
//!
//! The driver is a loop:
//!
//! ```text
//! let mut opener = Opener::new("https://host/model.safetensors", None);
//! loop {
//!     match opener.step()? {
//!         Step::Fetch(requests) => for r in requests { opener.reply(r.id, get(&r)?)? },
//!         Step::Ready(file) => break file,
//!     }
//! }
//! ```
//!
//! The requests of one [`Step::Fetch`] are independent (a driver may make them
//! concurrently); every one is answered before the next [`Opener::step`]. Everything a reply
//! says is untrusted: its length must be the one asked for (a range may only be cut by the
//! end of the file), the file's length may not change between replies, and no number the
//! file holds sizes an allocation before the bytes it describes were checked against the
//! file's length and the format's caps.
//!
//! A single file is recognised by its first bytes exactly as a local file
//! ([`detect::sniff`], or the format hint): SafeTensors and GGUF are read by their headers
//! (a first range of [`FIRST_RANGE_BYTES`], then the rest of the header if it is longer);
//! `.npz` and PyTorch zip checkpoints are read by their zip headers (`zip.rs`: the end
//! records, the central directory, each member's local header, an `.npz` array's `.npy`
//! header — inflated from the member's first compressed bytes where it is deflated — a
//! checkpoint's `byteorder` and `data.pkl`), a `.npy` by its header, a legacy PyTorch
//! checkpoint by its pickles (`legacy.rs`: its first bytes doubled until they parse, at most
//! [`LEGACY_PICKLES_MAX_BYTES`], then the element count before each storage), their tensors
//! by their file ranges (a deflated member's compressed bytes, inflated when served); a file
//! that the first range holds whole, and the files read whole (weights.mlx, a GGUF shard of
//! an index) up to [`WHOLE_FILE_MAX_BYTES`], are opened by
//! [`format::open_bytes`], as a file held in memory.
//!
//! A model directory ([`Opener::directory`], or [`Opener::any`] of a file that does not
//! exist) is opened as a local `pretrained::ModelDir` is: `config.json` (whole, at most
//! [`layout::CONFIG_MAX_BYTES`]), then the first weight file of [`layout::DISCOVERY`] that
//! exists (a [`Reply::NotFound`] moves on to the next), or a sharded index (whole, at most
//! [`layout::INDEX_MAX_BYTES`]) with every shard it names opened as a single file (the
//! shards' requests go together, [`FILES_AT_ONCE`] at a time) and checked against the index by
//! [`ShardedSource::assemble`]: the same errors, codes and messages; each tensor is then read
//! as the shard holding it is (by its header, its ranges, or whole). Files of a directory are
//! named relative to it and located by [`layout::shard_url`] (percent-encoded, so they stay
//! under its URL).
//!
//! What [`Step::Ready`] gives, [`RemoteFile`], lists the tensors (its [`RemoteFile::source`]
//! is a [`TensorSource`] whose `tensors`, `metadata`, `info` and `stored_range` are the
//! local reader's). Where [`RemoteFile::holds`] a tensor (its file was read whole), the
//! source also serves it (`fetch`, `f32_decoder`, `select`). Otherwise the driver fetches the
//! tensor's [`RemoteFile::spans`] and hands the bytes, concatenated in span order, to
//! [`RemoteFile::serve`], which gives what `fetch` / `f32_decoder` give locally. A
//! directory's companion files (tokenizers, templates: [`RemoteFile::companions`]) are
//! fetched by the driver when it needs them, each whole and at most
//! [`layout::COMPANION_MAX_BYTES`].

use crate::error::{CoreError, ErrorKind, Result};
use crate::format::gguf::split::{self, SplitInfo};
use crate::format::gguf::{GgufSource, Served};
use crate::memory::{Memory, TensorBytes};
use crate::pretrained::layout::{self, Layout, ShardIndex};
use crate::pretrained::sharded::ShardedSource;
use crate::slice::{SliceArg, SlicePlan};
use crate::source::{SourceFile, TensorSource, WeightsFormat};
use std::path::Path;
use std::sync::Arc;

mod file;
mod legacy;
mod ranged;
mod zip;
use file::{FileOpen, Next, Part};

/// The first range asked of a file: the recognisers' head and, for most files, the whole
/// SafeTensors or GGUF header.
pub const FIRST_RANGE_BYTES: u64 = 100 << 10;
/// The most a GGUF header may take (a large vocabulary is tens of MiB).
pub const GGUF_HEADER_MAX_BYTES: u64 = 256 << 20;
/// The most a legacy PyTorch checkpoint's pickles may take, read by ranges (about 120 bytes
/// per tensor: half a million tensors).
pub const LEGACY_PICKLES_MAX_BYTES: u64 = 64 << 20;
/// The most files of a split GGUF set or a sharded index asked for at once: a header or an
/// index naming thousands of files that do not exist costs a few requests, not one per file.
pub const FILES_AT_ONCE: usize = 16;
/// The most a file read whole may take (weights.mlx, a GGUF shard of an index).
pub const WHOLE_FILE_MAX_BYTES: u64 = 1 << 30;

/// The first range asked of a file: [`FIRST_RANGE_BYTES`] (a test's own, so that small
/// files are read by ranges).
fn first_range() -> u64 {
    #[cfg(test)]
    return tests::FIRST_RANGE.with(|c| c.get());
    #[cfg(not(test))]
    FIRST_RANGE_BYTES
}

/// Identifies a request in its reply.
pub type RequestId = u64;

/// Bytes the opener needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub id: RequestId,
    /// The file, relative to the model directory; `""` is the origin itself.
    pub file: String,
    /// Where the file is: the origin, or [`layout::shard_url`] of `file` under the directory.
    pub url: String,
    /// `file` lies beside the origin, in the origin's URL directory (a later file of a split
    /// GGUF set), not under a model directory.
    pub beside: bool,
    pub want: Want,
}

/// Which bytes of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// `[start, end)`; a reply may be shorter only where the file ends before `end`. A reply
    /// to the first range of a file may instead be the whole file (a server that ignores
    /// ranges), which is then read as a file in memory.
    Range { start: u64, end: u64 },
    /// The whole file, refused past `cap` bytes (a JSON file, whose length is unknown).
    Whole { cap: u64 },
}

/// The answer to a request.
#[derive(Debug)]
pub enum Reply {
    /// The bytes asked for, and the file's total length when the reply says it (HTTP's
    /// `Content-Range: bytes a-b/total`; the first reply of a range must).
    Bytes { bytes: Vec<u8>, total: Option<u64> },
    /// The file does not exist (HTTP 404).
    NotFound,
    /// The request failed (a network error, a status other than 404): the open fails with it.
    Error(CoreError),
}

/// What the opener wants next.
pub enum Step {
    /// Make these requests (independent of each other) and reply to each.
    Fetch(Vec<Request>),
    /// The file is open.
    Ready(Box<RemoteFile>),
}

/// Where stored bytes lie: `len` bytes from `start` of `file` (relative to the model
/// directory, `""` the origin), at `url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub file: String,
    pub url: String,
    pub start: u64,
    pub len: u64,
}

/// How the tensors of one file are read.
#[derive(Debug, Clone)]
struct FileRead {
    file: String,
    url: String,
    /// Where its data section starts, for a file opened by its header; `None` for a file read
    /// whole (the source serves its tensors).
    data_start: Option<u64>,
    /// The file's length.
    total: u64,
}

/// A model directory's own facts.
struct DirInfo {
    /// Its URL, ending in `/`.
    base: String,
    config: serde_json::Value,
    /// The weight files, relative to the directory.
    files: Vec<String>,
}

enum Held {
    /// A file read whole, or a SafeTensors file read by its header.
    Source {
        source: Arc<dyn TensorSource>,
        read: FileRead,
    },
    /// A GGUF file: its header (`data_start` is `Some(0)`: tensors at their file offsets),
    /// or the whole file; or the files of a split set, their headers, in order
    /// ([`GgufSource::file_index`]).
    Gguf {
        source: Arc<GgufSource>,
        reads: Vec<FileRead>,
    },
    /// A zip checkpoint (`.npz`, PyTorch), a legacy PyTorch checkpoint or a `.npy` read by
    /// its headers: tensors at their file ranges.
    Ranged {
        source: Box<ranged::Ranged>,
        read: FileRead,
    },
    /// The shards of an index, listed and checked by `source` (made of the shards' own
    /// sources), each held as it was read (never `Sharded`), in the order `source` opened
    /// them: a tensor is read as its shard is ([`ShardedSource::shard_of`]).
    Sharded {
        source: Arc<ShardedSource>,
        shards: Vec<Held>,
    },
}

/// How the file holding a tensor is read.
enum Read<'a> {
    /// Served by the source (read whole), or at `data_start` plus its stored range.
    Source(&'a dyn TensorSource, &'a FileRead),
    Gguf(&'a GgufSource, &'a FileRead),
    Ranged(&'a ranged::Ranged, &'a FileRead),
}

impl Read<'_> {
    fn file(&self) -> &FileRead {
        match self {
            Read::Source(_, read) | Read::Gguf(_, read) | Read::Ranged(_, read) => read,
        }
    }
}

impl Held {
    fn source(&self) -> &dyn TensorSource {
        match self {
            Held::Source { source, .. } => source.as_ref(),
            Held::Gguf { source, .. } => source.as_ref(),
            Held::Ranged { source, .. } => source.source(),
            Held::Sharded { source, .. } => source.as_ref(),
        }
    }

    /// The source, shared (a shard's, for its index's source).
    fn shared(&self) -> Arc<dyn TensorSource> {
        match self {
            Held::Source { source, .. } => source.clone(),
            Held::Gguf { source, .. } => source.clone(),
            Held::Ranged { source, .. } => source.shared(),
            Held::Sharded { source, .. } => source.clone(),
        }
    }

    fn byte_length(&self) -> u64 {
        match self {
            Held::Source { read, .. } | Held::Ranged { read, .. } => read.total,
            Held::Gguf { reads, .. } => reads.iter().map(|r| r.total).sum(),
            Held::Sharded { shards, .. } => shards.iter().map(Held::byte_length).sum(),
        }
    }

    fn is_whole(&self) -> bool {
        match self {
            Held::Source { read, .. } => read.data_start.is_none(),
            Held::Gguf { reads, .. } => reads.iter().all(|r| r.data_start.is_none()),
            Held::Ranged { .. } => false,
            Held::Sharded { shards, .. } => shards.iter().all(Held::is_whole),
        }
    }

    /// The file holding `name` (a listed tensor), and how it is read; errors name `origin`.
    fn read_of(&self, name: &str, origin: &str) -> Result<Read<'_>> {
        match self {
            Held::Source { source, read } => Ok(Read::Source(source.as_ref(), read)),
            Held::Gguf { source, reads } => source
                .file_index(name)
                .and_then(|i| reads.get(i))
                .map(|read| Read::Gguf(source, read))
                .ok_or_else(|| {
                    CoreError::invalid_model("no file of the split GGUF holds this tensor")
                        .with_tensor(name)
                        .with_path(origin)
                }),
            Held::Ranged { source, read } => Ok(Read::Ranged(source, read)),
            Held::Sharded { source, shards } => source
                .shard_of(name)
                .and_then(|i| shards.get(i))
                .ok_or_else(|| {
                    CoreError::invalid_model("no shard holds this tensor")
                        .with_tensor(name)
                        .with_path(origin)
                })?
                .read_of(name, origin),
        }
    }
}

/// An open remote file or model directory: its tensors listed, and how each one's bytes are
/// read.
pub struct RemoteFile {
    origin: String,
    dir: Option<DirInfo>,
    held: Held,
}

impl RemoteFile {
    /// The file or directory as the caller named it.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The tensors, metadata and descriptions, as the local reader gives them.
    pub fn source(&self) -> &dyn TensorSource {
        self.held.source()
    }

    /// The GGUF header of a GGUF file read by ranges (shared: a binding's `GgufFile` view).
    pub fn gguf(&self) -> Option<&Arc<GgufSource>> {
        match &self.held {
            Held::Gguf { source, .. } => Some(source),
            Held::Source { .. } | Held::Ranged { .. } | Held::Sharded { .. } => None,
        }
    }

    /// A model directory's `config.json` (`None` for a single file).
    pub fn config(&self) -> Option<&serde_json::Value> {
        self.dir.as_ref().map(|d| &d.config)
    }

    /// A model directory's URL, ending in `/` (`None` for a single file).
    pub fn base(&self) -> Option<&str> {
        self.dir.as_ref().map(|d| d.base.as_str())
    }

    /// A model directory's weight files, relative to it (empty for a single file).
    pub fn files(&self) -> Vec<String> {
        self.dir
            .as_ref()
            .map(|d| d.files.clone())
            .unwrap_or_default()
    }

    /// The companion files a conversion copies ([`layout::COMPANION_FILES`]), each with its
    /// URL under the directory: the driver fetches each whole (at most
    /// [`layout::COMPANION_MAX_BYTES`]) and skips those that do not exist. Empty for a file.
    pub fn companions(&self) -> Result<Vec<(String, String)>> {
        let Some(dir) = &self.dir else {
            return Ok(Vec::new());
        };
        layout::COMPANION_FILES
            .iter()
            .map(|f| Ok((f.to_string(), layout::shard_url(&dir.base, f)?)))
            .collect()
    }

    /// The length of the weight files together.
    pub fn byte_length(&self) -> u64 {
        self.held.byte_length()
    }

    /// Whether every file was read whole ([`RemoteFile::source`] serves every tensor).
    pub fn is_whole(&self) -> bool {
        self.held.is_whole()
    }

    /// Whether the tensor's file was read whole: [`RemoteFile::source`] serves it, and there
    /// is nothing to fetch. ERR_NOT_FOUND for a tensor that does not exist.
    pub fn holds(&self, name: &str) -> Result<bool> {
        Ok(self.read_of(name)?.file().data_start.is_none())
    }

    /// The file holding `name`, and how it is read.
    fn read_of(&self, name: &str) -> Result<Read<'_>> {
        self.source().info(name)?;
        self.held.read_of(name, &self.origin)
    }

    /// The stored bytes of `name`, where they lie (one span).
    pub fn spans(&self, name: &str) -> Result<Vec<Span>> {
        let read = self.read_of(name)?;
        let (start, end) = match &read {
            Read::Gguf(source, file) => {
                data_start(file, name)?;
                let t = source.info(name)?;
                let start = source.file_offset(name).unwrap_or_default();
                (start, start + t.stored_len)
            }
            Read::Source(source, file) => {
                let data = data_start(file, name)?;
                let (a, b) = source.stored_range(name).unwrap_or_default();
                (data + a, data + b)
            }
            Read::Ranged(source, _) => {
                let (range, _) = source.range(name)?;
                (range.start, range.end)
            }
        };
        Ok(vec![span(read.file(), start, end - start)])
    }

    /// The stored bytes a slice along the leading dimensions needs (SafeTensors: see
    /// [`TensorSource::select`]), and the slice's shape. The bytes of the spans,
    /// concatenated in order, are the slice's bytes.
    pub fn slice_spans(&self, name: &str, ranges: &[SliceArg]) -> Result<(Vec<usize>, Vec<Span>)> {
        match self.read_of(name)? {
            Read::Source(source, read) => {
                let data = data_start(read, name)?;
                let t = source.info(name)?;
                let plan = SlicePlan::new(t.dtype, &t.shape, ranges)
                    .map_err(|e| e.with_tensor(name).with_path(&read.url))?;
                let at = data + source.stored_range(name).unwrap_or_default().0;
                let spans = plan
                    .spans
                    .iter()
                    .map(|&(s, n)| span(read, at + s as u64, n as u64))
                    .collect();
                Ok((plan.shape, spans))
            }
            Read::Ranged(source, read) => {
                let t = source.source().info(name)?;
                let (range, as_is) = source.range(name)?;
                let plan = SlicePlan::new(t.dtype, &t.shape, ranges)
                    .map_err(|e| e.with_tensor(name).with_path(&read.url))?;
                if !as_is {
                    // Not its elements in row-major little-endian order (strided, big-endian,
                    // Fortran order): its whole range, which `serve_slice` arranges and cuts.
                    let whole = span(read, range.start, range.end - range.start);
                    return Ok((plan.shape, vec![whole]));
                }
                let spans = (plan.spans.iter())
                    .map(|&(s, n)| span(read, range.start + s as u64, n as u64))
                    .collect();
                Ok((plan.shape, spans))
            }
            Read::Gguf(_, read) => Err(CoreError::invalid_argument(
                "a GGUF tensor is read whole: fetch its spans and serve them",
            )
            .with_tensor(name)
            .with_path(&read.url)),
        }
    }

    /// A slice's shape and its elements (row-major, little-endian), from the bytes of
    /// [`RemoteFile::slice_spans`] concatenated: checked to be exactly what they cover.
    pub fn serve_slice(
        &self,
        name: &str,
        ranges: &[SliceArg],
        stored: Vec<u8>,
    ) -> Result<(Vec<usize>, Vec<u8>)> {
        let (shape, spans) = self.slice_spans(name, ranges)?;
        let asked: u64 = spans.iter().map(|s| s.len).sum();
        if stored.len() as u64 != asked {
            return Err(CoreError::invalid_argument(format!(
                "{} bytes given for a slice of shape {shape:?} that reads {asked}",
                stored.len()
            ))
            .with_tensor(name));
        }
        let whole = match self.read_of(name)? {
            Read::Ranged(source, _) => !source.range(name)?.1,
            Read::Source(..) | Read::Gguf(..) => false,
        };
        if !whole {
            return Ok((shape, stored));
        }
        // The tensor's whole range: its elements as `fetch` gives them, then the slice's runs.
        let Served::Bytes(dense) = self.serve(name, stored)? else {
            return Err(CoreError::invalid_argument("a zip member serves bytes").with_tensor(name));
        };
        let t = self.source().info(name)?;
        let plan = SlicePlan::new(t.dtype, &t.shape, ranges).map_err(|e| e.with_tensor(name))?;
        let dense = dense.as_slice();
        let len: usize = plan.spans.iter().map(|&(_, n)| n).sum();
        let mut out =
            crate::memory::reserve(len as u64, "a slice").map_err(|e| e.with_tensor(name))?;
        for &(start, n) in &plan.spans {
            out.extend_from_slice(&dense[start..start + n]);
        }
        Ok((plan.shape, out))
    }

    /// What `fetch` (plain types) or `f32_decoder` (GGUF block types) give locally, from the
    /// bytes of [`RemoteFile::spans`] concatenated: checked to be exactly the stored length.
    pub fn serve(&self, name: &str, stored: Vec<u8>) -> Result<Served> {
        match self.read_of(name)? {
            Read::Gguf(source, read) => {
                data_start(read, name)?;
                source.serve_stored(name, stored)
            }
            Read::Source(source, read) => {
                data_start(read, name)?;
                let t = source.info(name)?;
                if stored.len() as u64 != t.stored_len {
                    return Err(CoreError::invalid_argument(format!(
                        "{} bytes given for a tensor of {} stored bytes",
                        stored.len(),
                        t.stored_len
                    ))
                    .with_tensor(name)
                    .with_path(&read.url));
                }
                Ok(Served::Bytes(TensorBytes::Owned(stored)))
            }
            Read::Ranged(source, read) => {
                let (range, _) = source.range(name)?;
                if stored.len() as u64 != range.end - range.start {
                    return Err(CoreError::invalid_argument(format!(
                        "{} bytes given for a tensor that reads {} stored bytes",
                        stored.len(),
                        range.end - range.start
                    ))
                    .with_tensor(name)
                    .with_path(&read.url));
                }
                let bytes = source
                    .serve(name, &stored)
                    .map_err(|e| e.with_path(&read.url))?;
                Ok(Served::Bytes(TensorBytes::Owned(bytes)))
            }
        }
    }
}

/// Where the data of `read` starts; an error for a file read whole.
fn data_start(read: &FileRead, name: &str) -> Result<u64> {
    read.data_start.ok_or_else(|| {
        CoreError::invalid_argument("the file was read whole: its source serves the tensor")
            .with_tensor(name)
            .with_path(&read.url)
    })
}

fn span(read: &FileRead, start: u64, len: u64) -> Span {
    Span {
        file: read.file.clone(),
        url: read.url.clone(),
        start,
        len,
    }
}

/// Where the opener stands.
enum Stage {
    /// The origin as a single file; `fallback`: a missing one is read as a directory.
    File {
        open: FileOpen,
        fallback: bool,
    },
    /// `config.json` asked; `missing` is the error when it does not exist either.
    Config {
        open: FileOpen,
        missing: Option<CoreError>,
    },
    /// Candidate `at` of [`layout::DISCOVERY`] (a file, or an index) asked.
    Candidate {
        at: usize,
        config: serde_json::Value,
        open: FileOpen,
    },
    /// The shards of the index of candidate `at`, in [`ShardIndex::shards`] order.
    Shards {
        at: usize,
        config: serde_json::Value,
        index: ShardIndex,
        shards: Vec<Shard>,
    },
    /// The later files of the split GGUF set whose first file is the origin.
    GgufSet(Box<GgufSet>),
    Done,
}

struct Shard {
    open: FileOpen,
    part: Option<Part>,
}

/// A split GGUF set being opened: its first file's header, and the other files.
struct GgufSet {
    first: GgufSource,
    read: FileRead,
    split: SplitInfo,
    /// Files 2.. of the set, in order.
    shards: Vec<Shard>,
}

/// Opens a file or a model directory by byte ranges (see the module documentation).
pub struct Opener {
    origin: String,
    /// The model directory's URL (ending in `/`) that its files are named under.
    base: String,
    hint: Option<WeightsFormat>,
    /// A GGUF file opened as a model ([`Opener::model`]).
    gguf_model: bool,
    next_id: RequestId,
    /// Requests made and not yet answered.
    pending: Vec<Request>,
    /// Replies received since the last step, by request.
    replies: Vec<(Request, Reply)>,
    stage: Stage,
}

impl Opener {
    /// An opener of the single file at `origin` (named in errors), read as `hint` when
    /// given, else recognised by its bytes.
    pub fn new(origin: &str, hint: Option<WeightsFormat>) -> Opener {
        let open = FileOpen::weights("", origin, hint, true);
        let stage = Stage::File {
            open,
            fallback: false,
        };
        Opener::with_stage(origin, hint, stage)
    }

    /// [`Opener::new`], except that where the file does not exist, `origin` is read as a
    /// model directory (a URL written without its trailing `/`), as a local path may be
    /// either; a URL ending in `/` is a directory. When the directory's `config.json` does
    /// not exist either, the error is the file's.
    pub fn any(origin: &str, hint: Option<WeightsFormat>) -> Opener {
        let mut opener = Opener::new(origin, hint);
        opener.stage = if origin.ends_with('/') {
            opener.config_stage(None)
        } else {
            Stage::File {
                open: FileOpen::weights("", origin, hint, true),
                fallback: true,
            }
        };
        opener
    }

    /// An opener of the model directory at `origin` (`config.json` and weights, as
    /// `pretrained::ModelDir` reads a local one).
    pub fn directory(origin: &str) -> Opener {
        let mut opener = Opener::with_stage(origin, None, Stage::Done);
        opener.stage = opener.config_stage(None);
        opener
    }

    /// An opener of a model: the directory at `origin` (named with its trailing `/`), or,
    /// where `origin` names a `.gguf` file, that GGUF (a split set's first file opens the set)
    /// as a model, as `pretrained::ModelDir` opens a local one: its directory the URL's,
    /// `config` empty (GGUF holds its configuration in its key/values), `files` the set's.
    pub fn model(origin: &str) -> Opener {
        let path = origin.split(['?', '#']).next().unwrap_or_default();
        if !path.to_ascii_lowercase().ends_with(".gguf") {
            return match origin.ends_with('/') {
                true => Opener::directory(origin),
                false => Opener::directory(&format!("{origin}/")),
            };
        }
        let mut opener = Opener::new(origin, Some(WeightsFormat::Gguf));
        opener.gguf_model = true;
        opener
    }

    fn with_stage(origin: &str, hint: Option<WeightsFormat>, stage: Stage) -> Opener {
        let base = if origin.ends_with('/') {
            origin.to_string()
        } else {
            format!("{origin}/")
        };
        Opener {
            origin: origin.to_string(),
            base,
            hint,
            gguf_model: false,
            next_id: 0,
            pending: Vec::new(),
            replies: Vec::new(),
            stage,
        }
    }

    /// Read the rest of a directory under `base` (ending in `/`) instead: a driver that
    /// learns, from `config.json`'s reply, the immutable address of the version it read (the
    /// Hugging Face Hub's commit) pins the weights to it.
    pub fn rebase(&mut self, base: &str) -> Result<()> {
        if !base.ends_with('/') {
            return Err(CoreError::invalid_argument("a base URL must end in '/'"));
        }
        self.base = base.to_string();
        Ok(())
    }

    /// The next step: requests to make, or the open file. Every request of the previous
    /// step must have been answered.
    pub fn step(&mut self) -> Result<Step> {
        if matches!(self.stage, Stage::Done) {
            return Err(CoreError::invalid_argument("this opener has finished"));
        }
        if !self.pending.is_empty() {
            return Err(CoreError::invalid_argument(format!(
                "{} requests are not answered yet",
                self.pending.len()
            )));
        }
        let stage = std::mem::replace(&mut self.stage, Stage::Done);
        let replies = std::mem::take(&mut self.replies);
        match self.advance(stage, replies) {
            Ok(Step::Ready(mut file)) if self.gguf_model => {
                // The first file is read from its header alone, without a name of its own.
                let (base, first) = beside(&self.origin).unwrap_or_default();
                let later = file.source().files().into_iter().map(|f| f.name);
                let files = std::iter::once(first.clone())
                    .chain(later.filter(|f| *f != first))
                    .collect();
                file.dir = Some(DirInfo {
                    base,
                    config: serde_json::Value::Object(Default::default()),
                    files,
                });
                Ok(Step::Ready(file))
            }
            step => step.map_err(|e| e.with_path(&self.origin)),
        }
    }

    /// Answer request `id`.
    pub fn reply(&mut self, id: RequestId, reply: Reply) -> Result<()> {
        let at = self
            .pending
            .iter()
            .position(|r| r.id == id)
            .ok_or_else(|| {
                CoreError::invalid_argument(format!("no request {id} is waiting for a reply"))
            })?;
        let request = self.pending.swap_remove(at);
        self.replies.push((request, reply));
        Ok(())
    }

    fn config_stage(&self, missing: Option<CoreError>) -> Stage {
        let file = layout::CONFIG_FILE;
        let url = layout::shard_url(&self.base, file).unwrap_or_else(|_| self.base.clone() + file);
        Stage::Config {
            open: FileOpen::json(file, &url, layout::CONFIG_MAX_BYTES, file),
            missing,
        }
    }

    /// Requests for what each of `opens` needs next; `stage` waits for their replies.
    fn fetch<'a>(&mut self, opens: impl IntoIterator<Item = (&'a FileOpen, Want)>) -> Vec<Request> {
        let mut requests = Vec::new();
        for (open, want) in opens {
            let request = Request {
                id: self.next_id,
                file: open.file.clone(),
                url: open.url.clone(),
                beside: open.beside,
                want,
            };
            self.next_id += 1;
            self.pending.push(request.clone());
            requests.push(request);
        }
        requests
    }

    /// Wait in `stage` for the replies to `requests`.
    fn wait(&mut self, stage: Stage, requests: Vec<Request>) -> Result<Step> {
        self.stage = stage;
        Ok(Step::Fetch(requests))
    }

    fn advance(&mut self, stage: Stage, replies: Vec<(Request, Reply)>) -> Result<Step> {
        match stage {
            Stage::File { mut open, fallback } => {
                for (request, reply) in replies {
                    if fallback && open.is_missing(&reply) {
                        let missing = CoreError::not_found("the file does not exist");
                        let stage = self.config_stage(Some(missing));
                        return self.advance(stage, Vec::new());
                    }
                    open.take(&request, reply)?;
                }
                match open.next()? {
                    Next::Open(Part::Gguf(source, whole)) => {
                        match split::split_info(&source.header().metadata)? {
                            Some(split) => self.gguf_set(&open, *source, split),
                            None => Ok(Step::Ready(Box::new(RemoteFile {
                                origin: self.origin.clone(),
                                dir: None,
                                held: Part::Gguf(source, whole).into_held(&open),
                            }))),
                        }
                    }
                    Next::Open(part) => Ok(Step::Ready(Box::new(RemoteFile {
                        origin: self.origin.clone(),
                        dir: None,
                        held: part.into_held(&open),
                    }))),
                    next => {
                        let wants = next.wants();
                        let requests = self.fetch(wants.into_iter().map(|w| (&open, w)));
                        self.wait(Stage::File { open, fallback }, requests)
                    }
                }
            }
            Stage::Config { mut open, missing } => {
                for (request, reply) in replies {
                    if open.is_missing(&reply) {
                        return Err(missing.unwrap_or_else(|| {
                            CoreError::not_found(format!("no such file ({})", layout::CONFIG_FILE))
                                .with_path(&open.url)
                        }));
                    }
                    open.take(&request, reply)?;
                }
                match open.next()? {
                    Next::Bytes(bytes) => {
                        let config =
                            layout::parse_config(&bytes).map_err(|e| e.with_path(&open.url))?;
                        self.candidate(0, config)
                    }
                    next => {
                        let wants = next.wants();
                        let requests = self.fetch(wants.into_iter().map(|w| (&open, w)));
                        self.wait(Stage::Config { open, missing }, requests)
                    }
                }
            }
            Stage::Candidate {
                at,
                config,
                mut open,
            } => {
                for (request, reply) in replies {
                    if open.is_missing(&reply) {
                        return self.candidate(at + 1, config);
                    }
                    open.take(&request, reply)?;
                }
                match open.next()? {
                    Next::Want(wants) => {
                        let requests = self.fetch(wants.into_iter().map(|w| (&open, w)));
                        self.wait(Stage::Candidate { at, config, open }, requests)
                    }
                    Next::Open(part) => {
                        let files = vec![open.file.clone()];
                        let held = part.into_held(&open);
                        self.directory_ready(config, files, held)
                    }
                    Next::Bytes(bytes) => {
                        let index =
                            layout::parse_index(&bytes).map_err(|e| e.with_path(&open.url))?;
                        let mut shards = Vec::with_capacity(index.shards.len());
                        for name in &index.shards {
                            let url = layout::shard_url(&self.base, name)
                                .map_err(|e| e.with_path(&open.url))?;
                            shards.push(Shard {
                                open: FileOpen::weights(name, &url, None, false),
                                part: None,
                            });
                        }
                        self.shards(at, config, index, shards)
                    }
                }
            }
            Stage::Shards {
                at,
                config,
                index,
                mut shards,
            } => {
                for (request, reply) in replies {
                    let Some(shard) = index
                        .position(&request.file)
                        .and_then(|i| shards.get_mut(i))
                    else {
                        continue;
                    };
                    if shard.open.is_missing(&reply) {
                        return Err(layout::shard_missing().with_path(&shard.open.url));
                    }
                    let taken = shard.open.take(&request, reply);
                    taken.map_err(|e| shard_failed(&shard.open, e))?;
                }
                self.shards(at, config, index, shards)
            }
            Stage::GgufSet(mut set) => {
                for (request, reply) in replies {
                    let Some((i, shard)) = (set.shards.iter_mut().enumerate())
                        .find(|(_, s)| s.open.file == request.file)
                    else {
                        continue;
                    };
                    if shard.open.is_missing(&reply) {
                        let missing = split::file_missing(i + 1, set.split);
                        return Err(missing.with_path(&shard.open.url));
                    }
                    shard.open.take(&request, reply)?;
                }
                self.gguf_set_next(set)
            }
            Stage::Done => Err(CoreError::invalid_argument("this opener has finished")),
        }
    }

    /// Open candidate `at` of [`layout::DISCOVERY`], or the next ones.
    fn candidate(&mut self, at: usize, config: serde_json::Value) -> Result<Step> {
        let Some(candidate) = layout::DISCOVERY.get(at) else {
            return Err(layout::no_weights().with_path(&self.base));
        };
        let url = layout::shard_url(&self.base, candidate.file)?;
        let open = match candidate.layout {
            Layout::File => FileOpen::weights(candidate.file, &url, None, true),
            Layout::Sharded => FileOpen::json(
                candidate.file,
                &url,
                layout::INDEX_MAX_BYTES,
                "a sharded index",
            ),
        };
        self.advance(Stage::Candidate { at, config, open }, Vec::new())
    }

    /// Ask for what the shards still opening need; once every one is open, the model.
    fn shards(
        &mut self,
        at: usize,
        config: serde_json::Value,
        index: ShardIndex,
        mut shards: Vec<Shard>,
    ) -> Result<Step> {
        let requests = self.shard_requests(&mut shards, shard_failed, FILES_AT_ONCE)?;
        if !requests.is_empty() {
            let stage = Stage::Shards {
                at,
                config,
                index,
                shards,
            };
            return self.wait(stage, requests);
        }
        let index_url = layout::shard_url(&self.base, layout::DISCOVERY[at].file)?;
        let mut files = Vec::with_capacity(shards.len());
        let mut sources = Vec::with_capacity(shards.len());
        let mut held = Vec::with_capacity(shards.len());
        for Shard { open, part } in shards {
            let Some(part) = part else { continue };
            files.push(SourceFile {
                name: open.file.clone(),
                bytes: open.total(),
            });
            let shard = part.into_held(&open);
            sources.push(shard.shared());
            held.push(shard);
        }
        let dir = self.base.trim_end_matches('/');
        let sharded = ShardedSource::assemble(
            Path::new(&index_url),
            Path::new(dir),
            &index,
            files,
            sources,
        )?;
        let held = Held::Sharded {
            source: Arc::new(sharded),
            shards: held,
        };
        self.directory_ready(config, index.shards, held)
    }

    /// Requests for what the `shards` still opening need, at most `at_once` of them (`fail`
    /// gives a shard's error); none once every one is open.
    fn shard_requests(
        &mut self,
        shards: &mut [Shard],
        fail: fn(&FileOpen, CoreError) -> CoreError,
        at_once: usize,
    ) -> Result<Vec<Request>> {
        let mut wants = Vec::new();
        let mut asked = 0;
        for (i, shard) in shards.iter_mut().enumerate() {
            if shard.part.is_some() || asked == at_once {
                continue;
            }
            match shard.open.next().map_err(|e| fail(&shard.open, e))? {
                Next::Open(part) => shard.part = Some(part),
                next => {
                    asked += 1;
                    wants.extend(next.wants().into_iter().map(|w| (i, w)));
                }
            }
        }
        Ok(self.fetch(wants.iter().map(|&(i, want)| (&shards[i].open, want))))
    }

    /// Start opening the split GGUF set whose first file, `open`, holds `first`: its other
    /// files, named as llama.cpp names them, beside it (the same URL directory).
    fn gguf_set(&mut self, open: &FileOpen, first: GgufSource, split: SplitInfo) -> Result<Step> {
        let (dir, name) = beside(&open.url).ok_or_else(|| {
            CoreError::invalid_gguf(
                "a split GGUF is opened by the http(s) URL of its first file, whose later files \
                 lie beside it",
            )
        })?;
        let names = split::other_files(Path::new(&name), split)?;
        let mut shards = Vec::with_capacity(names.len());
        for name in names {
            let name = name.to_string_lossy().into_owned();
            let url = layout::shard_url(&dir, &name)?;
            let mut shard = FileOpen::weights(&name, &url, Some(WeightsFormat::Gguf), true);
            shard.beside = true;
            shards.push(Shard {
                open: shard,
                part: None,
            });
        }
        let first = GgufSource::from_header(first.into_header(), open.total())?;
        let read = Part::read(open, Some(0));
        let set = GgufSet {
            first,
            read,
            split,
            shards,
        };
        self.gguf_set_next(Box::new(set))
    }

    /// Ask for what the files of the set still opening need; once every one is open, the
    /// set as one file (checked as the local reader checks it).
    fn gguf_set_next(&mut self, mut set: Box<GgufSet>) -> Result<Step> {
        let requests = self.shard_requests(&mut set.shards, |_, e| e, FILES_AT_ONCE)?;
        if !requests.is_empty() {
            return self.wait(Stage::GgufSet(set), requests);
        }
        let GgufSet {
            mut first,
            read,
            split,
            shards,
        } = *set;
        let mut reads = vec![read];
        for (i, Shard { open, part }) in shards.into_iter().enumerate() {
            let Some(Part::Gguf(source, _)) = part else {
                return Err(CoreError::invalid_gguf("not a GGUF file").with_path(&open.url));
            };
            let empty = Arc::new(Memory::Owned(Vec::new()));
            let url = std::path::PathBuf::from(&open.url);
            first.join_shard(split, i + 1, url, empty, open.total(), source.into_header())?;
            reads.push(Part::read(&open, Some(0)));
        }
        first.joined(split)?;
        Ok(Step::Ready(Box::new(RemoteFile {
            origin: self.origin.clone(),
            dir: None,
            held: Held::Gguf {
                source: Arc::new(first),
                reads,
            },
        })))
    }

    /// The open directory, whose weights are `held` (from `files`).
    fn directory_ready(
        &mut self,
        config: serde_json::Value,
        files: Vec<String>,
        held: Held,
    ) -> Result<Step> {
        let file = RemoteFile {
            origin: self.origin.clone(),
            dir: Some(DirInfo {
                base: self.base.clone(),
                config,
                files,
            }),
            held,
        };
        let format = file.source().format();
        if let Some(f) = self.hint.filter(|&f| f != format) {
            return Err(CoreError::invalid_argument(format!(
                "a model directory holding {format} weights, not {}",
                f.name()
            )));
        }
        Ok(Step::Ready(Box::new(file)))
    }
}

/// The URL directory of the file at `url` (ending in '/') and the file's name there
/// (percent-decoded); `None` for a URL without either.
fn beside(url: &str) -> Option<(String, String)> {
    let path = url.split(['?', '#']).next()?;
    let slash = path.rfind('/')?;
    let name = percent_decoded(&path[slash + 1..])?;
    (!name.is_empty()).then(|| (path[..=slash].to_string(), name))
}

/// `text` with its `%XX` escapes decoded; `None` when they are malformed or not UTF-8.
fn percent_decoded(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The error of a shard that failed to open, as a local directory gives it.
fn shard_failed(open: &FileOpen, e: CoreError) -> CoreError {
    if e.kind() == ErrorKind::UnknownFormat {
        // Not a damaged shard: one of a format this build does not read.
        return e;
    }
    let at = e.path().unwrap_or(&open.url).to_string();
    layout::shard_failed(&open.file, e.code(), e.detail(), e.tensor()).with_path(at)
}

#[cfg(test)]
mod tests;
