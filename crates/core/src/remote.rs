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
//! a file that the first range holds whole, and the formats read whole (NumPy, PyTorch,
//! weights.mlx), are read whole up to [`WHOLE_FILE_MAX_BYTES`] and opened by
//! [`format::open_bytes`], as a file held in memory.
//!
//! What [`Step::Ready`] gives, [`RemoteFile`], lists the tensors (its [`RemoteFile::source`]
//! is a [`TensorSource`] whose `tensors`, `metadata`, `info` and `stored_range` are the
//! local reader's). Where [`RemoteFile::is_whole`], the source also serves every tensor
//! (`fetch`, `f32_decoder`, `select`). Otherwise the driver fetches a tensor's
//! [`RemoteFile::spans`] and hands the bytes, concatenated in span order, to
//! [`RemoteFile::serve`], which gives what `fetch` / `f32_decoder` give locally.

use crate::error::{CoreError, ErrorKind, Result};
use crate::format::detect::{self, Detected, Head};
use crate::format::gguf::{self, GgufHeader, GgufSource, Served};
use crate::format::safetensors::SafeTensors;
use crate::format::{self};
use crate::memory::TensorBytes;
use crate::slice::SliceArg;
use crate::source::{TensorSource, WeightsFormat};

/// The first range asked of a file: the recognisers' head and, for most files, the whole
/// SafeTensors or GGUF header.
pub const FIRST_RANGE_BYTES: u64 = 100 << 10;
/// The most a GGUF header may take (a large vocabulary is tens of MiB).
pub const GGUF_HEADER_MAX_BYTES: u64 = 256 << 20;
/// The most a file read whole may take (NumPy, PyTorch, weights.mlx).
pub const WHOLE_FILE_MAX_BYTES: u64 = 1 << 30;

/// Identifies a request in its reply.
pub type RequestId = u64;

/// Bytes the opener needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub id: RequestId,
    /// The file, relative to the base; `""` is the file the opener was made for.
    pub file: String,
    pub want: Want,
}

/// Which bytes of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// `[start, end)`; a reply may be shorter only where the file ends before `end`.
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

/// Where stored bytes lie: `len` bytes from `start` of `file` (relative to the base, `""`
/// the file itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub file: String,
    pub start: u64,
    pub len: u64,
}

/// An open remote file: its tensors listed, and how each one's bytes are read.
pub struct RemoteFile {
    origin: String,
    held: Held,
}

enum Held {
    /// Read whole: the source serves every tensor.
    Whole(Box<dyn TensorSource>),
    /// The header only: tensors by their ranges.
    SafeTensors(SafeTensors),
    Gguf(GgufSource),
}

impl RemoteFile {
    /// The tensors, metadata and descriptions, as the local reader gives them.
    pub fn source(&self) -> &dyn TensorSource {
        match &self.held {
            Held::Whole(s) => s.as_ref(),
            Held::SafeTensors(s) => s,
            Held::Gguf(s) => s,
        }
    }

    /// Whether the file was read whole ([`RemoteFile::source`] serves its tensors; there is
    /// nothing more to fetch).
    pub fn is_whole(&self) -> bool {
        matches!(self.held, Held::Whole(_))
    }

    /// The stored bytes of `name`, where they lie (one span for SafeTensors and GGUF).
    pub fn spans(&self, name: &str) -> Result<Vec<Span>> {
        let (start, end) = match &self.held {
            Held::Whole(_) => return Err(self.read_whole(name)),
            Held::SafeTensors(s) => s.file_range(&s.info(name)?),
            Held::Gguf(s) => {
                let t = s.info(name)?;
                let start = s.file_offset(name).unwrap_or_default();
                (start, start + t.stored_len)
            }
        };
        Ok(vec![self.span(start, end - start)])
    }

    /// The stored bytes a slice along the leading dimensions needs (SafeTensors: see
    /// [`TensorSource::select`]), and the slice's shape. The bytes of the spans,
    /// concatenated in order, are the slice's bytes.
    pub fn slice_spans(&self, name: &str, ranges: &[SliceArg]) -> Result<(Vec<usize>, Vec<Span>)> {
        match &self.held {
            Held::SafeTensors(s) => {
                let (shape, spans) = s.slice_spans(name, ranges)?;
                let spans = spans.into_iter().map(|(a, n)| self.span(a, n)).collect();
                Ok((shape, spans))
            }
            Held::Whole(_) => Err(self.read_whole(name)),
            Held::Gguf(_) => Err(CoreError::invalid_argument(
                "a GGUF tensor is read whole: fetch its spans and serve them",
            )
            .with_tensor(name)
            .with_path(&self.origin)),
        }
    }

    /// What `fetch` (plain types) or `f32_decoder` (GGUF block types) give locally, from the
    /// bytes of [`RemoteFile::spans`] concatenated: checked to be exactly the stored length.
    pub fn serve(&self, name: &str, stored: Vec<u8>) -> Result<Served> {
        match &self.held {
            Held::Whole(_) => Err(self.read_whole(name)),
            Held::Gguf(s) => s.serve_stored(name, stored),
            Held::SafeTensors(s) => {
                let t = TensorSource::info(s, name)?;
                if stored.len() as u64 != t.stored_len {
                    return Err(CoreError::invalid_argument(format!(
                        "{} bytes given for a tensor of {} stored bytes",
                        stored.len(),
                        t.stored_len
                    ))
                    .with_tensor(name)
                    .with_path(&self.origin));
                }
                Ok(Served::Bytes(TensorBytes::Owned(stored)))
            }
        }
    }

    fn span(&self, start: u64, len: u64) -> Span {
        Span {
            file: String::new(),
            start,
            len,
        }
    }

    fn read_whole(&self, name: &str) -> CoreError {
        CoreError::invalid_argument("the file was read whole: its source serves the tensor")
            .with_tensor(name)
            .with_path(&self.origin)
    }
}

/// Opens one file by byte ranges (see the module documentation).
pub struct Opener {
    origin: String,
    hint: Option<WeightsFormat>,
    next_id: RequestId,
    /// Requests made and not yet answered.
    pending: Vec<Request>,
    /// Replies received since the last step, by request.
    replies: Vec<(Request, Reply)>,
    /// The file's first bytes, grown as the header needs.
    head: Vec<u8>,
    total: Option<u64>,
    done: bool,
}

impl Opener {
    /// An opener of the file at `origin` (named in errors), read as `hint` when given, else
    /// recognised by its bytes.
    pub fn new(origin: &str, hint: Option<WeightsFormat>) -> Opener {
        Opener {
            origin: origin.to_string(),
            hint,
            next_id: 0,
            pending: Vec::new(),
            replies: Vec::new(),
            head: Vec::new(),
            total: None,
            done: false,
        }
    }

    /// The next step: requests to make, or the open file. Every request of the previous
    /// step must have been answered.
    pub fn step(&mut self) -> Result<Step> {
        if self.done {
            return Err(CoreError::invalid_argument("this opener has finished"));
        }
        if !self.pending.is_empty() {
            return Err(CoreError::invalid_argument(format!(
                "{} requests are not answered yet",
                self.pending.len()
            )));
        }
        let step = self.advance().map_err(|e| e.with_path(&self.origin));
        if !matches!(step, Ok(Step::Fetch(_))) {
            self.done = true;
        }
        step
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

    fn request(&mut self, want: Want) -> Step {
        let request = Request {
            id: self.next_id,
            file: String::new(),
            want,
        };
        self.next_id += 1;
        self.pending.push(request.clone());
        Step::Fetch(vec![request])
    }

    fn advance(&mut self) -> Result<Step> {
        for (request, reply) in std::mem::take(&mut self.replies) {
            let bytes = self.checked(&request, reply)?;
            self.head.extend_from_slice(&bytes);
        }
        let Some(total) = self.total else {
            return Ok(self.request(Want::Range {
                start: 0,
                end: FIRST_RANGE_BYTES,
            }));
        };
        let have = self.head.len() as u64;
        if have == total {
            return self.whole();
        }
        let mut head = Head::of(&self.head);
        head.file_len = total;
        let detected = match self.hint {
            Some(f) => Detected::Format(f),
            None => detect::sniff(&head),
        };
        match detected {
            Detected::Format(WeightsFormat::SafeTensors) => {
                match SafeTensors::header_end(&self.head, total) {
                    Some(end) if end > have => Ok(self.request(Want::Range { start: have, end })),
                    _ => Ok(Step::Ready(Box::new(RemoteFile {
                        origin: self.origin.clone(),
                        held: Held::SafeTensors(SafeTensors::from_header(
                            &self.head,
                            total,
                            &self.origin,
                        )?),
                    }))),
                }
            }
            Detected::Format(WeightsFormat::Gguf) => {
                let misread =
                    |e| detect::explain_misread(e, WeightsFormat::Gguf, &|| Ok(head.clone()));
                match gguf::parse_header(&self.head, total).map_err(misread)? {
                    GgufHeader::Parsed(parts) => Ok(Step::Ready(Box::new(RemoteFile {
                        origin: self.origin.clone(),
                        held: Held::Gguf(GgufSource::from_header(parts, total)?),
                    }))),
                    GgufHeader::NeedBytes(n) => {
                        // Doubling keeps a large vocabulary to a few requests.
                        let end = total.min((n as u64).max(have * 2));
                        if end > GGUF_HEADER_MAX_BYTES {
                            return Err(CoreError::invalid_gguf(format!(
                                "the header runs past {} MiB, the most read by ranges",
                                GGUF_HEADER_MAX_BYTES >> 20
                            )));
                        }
                        Ok(self.request(Want::Range { start: have, end }))
                    }
                }
            }
            Detected::Format(f) if format::registration(f).from_bytes().is_some() => {
                if total > WHOLE_FILE_MAX_BYTES {
                    return Err(CoreError::invalid_argument(format!(
                        "{} of {total} bytes is read whole, and the most read so is {} MiB",
                        f.describe(),
                        WHOLE_FILE_MAX_BYTES >> 20
                    )));
                }
                Ok(self.request(Want::Range {
                    start: have,
                    end: total,
                }))
            }
            _ => self.whole(),
        }
    }

    /// Open the bytes held, the whole file, as a file in memory.
    fn whole(&mut self) -> Result<Step> {
        let bytes = std::mem::take(&mut self.head);
        let source = format::open_bytes(bytes, self.hint)?;
        Ok(Step::Ready(Box::new(RemoteFile {
            origin: self.origin.clone(),
            held: Held::Whole(source),
        })))
    }

    /// The bytes of a reply, checked against what was asked and what earlier replies said.
    fn checked(&mut self, request: &Request, reply: Reply) -> Result<Vec<u8>> {
        let (bytes, said) = match reply {
            Reply::Bytes { bytes, total } => (bytes, total),
            Reply::NotFound => {
                return Err(CoreError::not_found("the file does not exist"));
            }
            Reply::Error(e) => return Err(e),
        };
        let lie = |what: String| CoreError::new(ErrorKind::Io, what);
        let total = match (self.total, said) {
            (Some(known), Some(t)) if t != known => {
                return Err(lie(format!(
                    "the file's length changed from {known} to {t} bytes while it was read"
                )))
            }
            (Some(known), _) => known,
            (None, Some(t)) => t,
            (None, None) => match request.want {
                Want::Whole { .. } => bytes.len() as u64,
                Want::Range { .. } => {
                    return Err(lie("the reply did not say the file's length".into()))
                }
            },
        };
        self.total = Some(total);
        let expected = match request.want {
            Want::Range { start, end } => end.min(total).saturating_sub(start),
            Want::Whole { cap } if total > cap => {
                return Err(CoreError::invalid_argument(format!(
                    "the file is {total} bytes, over the {cap} read whole"
                )))
            }
            Want::Whole { .. } => total,
        };
        if bytes.len() as u64 != expected {
            return Err(lie(format!(
                "{} bytes came for a request of {expected} (a file of {total} bytes)",
                bytes.len()
            )));
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests;
