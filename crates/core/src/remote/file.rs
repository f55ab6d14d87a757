//! One file read by ranges: its replies checked and gathered, until its header (or the whole
//! file) is held and opened.

use super::legacy::LegacyRead;
use super::ranged::{Ranged, RangedNext};
use super::zip::ZipRead;
use super::WHOLE_FILE_MAX_BYTES;
use super::{FileRead, Held, Reply, Request, Want, GGUF_HEADER_MAX_BYTES};
use crate::error::{CoreError, ErrorKind, Result};
use crate::format::detect::{self, Detected, Head};
use crate::format::gguf::{self, GgufHeader, GgufSource};
use crate::format::numpy::{self, NumpyFile};
use crate::format::pytorch;
use crate::format::safetensors::SafeTensors;
use crate::format::{self};
use crate::source::{TensorSource, WeightsFormat};
use std::sync::Arc;

/// How a file is read.
enum Mode {
    /// A weights file, recognised by its bytes (or read as `hint`); `gguf_ranges`: a GGUF
    /// file is read by its header (otherwise whole: a shard of an index, which may not be an
    /// index itself).
    Weights {
        hint: Option<WeightsFormat>,
        gguf_ranges: bool,
    },
    /// A JSON file read whole, at most `cap` bytes (`what` names it in errors).
    Json { cap: u64, what: &'static str },
}

/// A file being read.
pub(super) struct FileOpen {
    /// Relative to the model directory (`""`: the origin).
    pub(super) file: String,
    pub(super) url: String,
    /// Asked for as [`Request::beside`](super::Request::beside).
    pub(super) beside: bool,
    mode: Mode,
    /// The file's first bytes, grown as the header needs.
    head: Vec<u8>,
    total: Option<u64>,
    /// A checkpoint read by ranges past its first bytes.
    reading: Option<Reading>,
}

/// A checkpoint read by ranges past its first bytes.
enum Reading {
    /// A zip (`.npz`, torch ≥ 1.6): its records.
    Zip(ZipRead),
    /// A legacy torch checkpoint: its pickles, then its storages' element counts.
    Legacy(LegacyRead),
}

/// What a file needs next, or what it is.
pub(super) enum Next {
    Want(Vec<Want>),
    /// A weights file, open.
    Open(Part),
    /// A JSON file's bytes.
    Bytes(Vec<u8>),
}

impl Next {
    /// The bytes wanted (a step that is not [`Next::Want`] wants none).
    pub(super) fn wants(self) -> Vec<Want> {
        match self {
            Next::Want(w) => w,
            _ => Vec::new(),
        }
    }
}

/// A weights file, open.
pub(super) enum Part {
    /// Read whole: the source serves every tensor.
    Whole(Box<dyn TensorSource>),
    /// The header only: tensors by their ranges.
    SafeTensors(Box<SafeTensors>),
    /// A GGUF file: its header only (`false`), or the whole file (`true`).
    Gguf(Box<GgufSource>, bool),
    /// A zip checkpoint's, a legacy torch checkpoint's or a `.npy`'s headers: tensors by
    /// their file ranges.
    Ranged(Box<Ranged>),
}

impl Part {
    /// How the tensors of `open` are read.
    pub(super) fn read(open: &FileOpen, data_start: Option<u64>) -> FileRead {
        FileRead {
            file: open.file.clone(),
            url: open.url.clone(),
            data_start,
            total: open.total(),
        }
    }

    pub(super) fn into_held(self, open: &FileOpen) -> Held {
        match self {
            Part::Gguf(source, whole) => Held::Gguf {
                source: Arc::from(source),
                reads: vec![Part::read(open, (!whole).then_some(0))],
            },
            Part::Whole(source) => Held::Source {
                source: Arc::from(source),
                read: Part::read(open, None),
            },
            Part::SafeTensors(source) => {
                let start = source.header().data_start() as u64;
                Held::Source {
                    source: Arc::new(*source),
                    read: Part::read(open, Some(start)),
                }
            }
            Part::Ranged(source) => Held::Ranged {
                source,
                read: Part::read(open, Some(0)),
            },
        }
    }
}

impl FileOpen {
    pub(super) fn weights(
        file: &str,
        url: &str,
        hint: Option<WeightsFormat>,
        gguf_ranges: bool,
    ) -> FileOpen {
        FileOpen::with_mode(file, url, Mode::Weights { hint, gguf_ranges })
    }

    pub(super) fn json(file: &str, url: &str, cap: u64, what: &'static str) -> FileOpen {
        FileOpen::with_mode(file, url, Mode::Json { cap, what })
    }

    fn with_mode(file: &str, url: &str, mode: Mode) -> FileOpen {
        FileOpen {
            file: file.to_string(),
            url: url.to_string(),
            beside: false,
            mode,
            head: Vec::new(),
            total: None,
            reading: None,
        }
    }

    /// The file's length (known once a reply said it).
    pub(super) fn total(&self) -> u64 {
        self.total.unwrap_or_default()
    }

    /// Whether `reply` says the file does not exist (before any of its bytes came).
    pub(super) fn is_missing(&self, reply: &Reply) -> bool {
        matches!(reply, Reply::NotFound) && self.total.is_none()
    }

    /// Take the reply to `request`, checked against what was asked and what earlier replies
    /// said.
    pub(super) fn take(&mut self, request: &Request, reply: Reply) -> Result<()> {
        let bytes = self
            .checked(request, reply)
            .map_err(|e| e.with_path(&self.url))?;
        match (&mut self.reading, request.want) {
            (Some(Reading::Zip(zip)), Want::Range { start, .. }) => zip.take(start, bytes),
            (Some(Reading::Legacy(legacy)), Want::Range { start, .. }) => legacy.take(start, bytes),
            _ => self.head.extend_from_slice(&bytes),
        }
        Ok(())
    }

    /// What the file needs next, or the file open.
    pub(super) fn next(&mut self) -> Result<Next> {
        self.advance().map_err(|e| e.with_path(&self.url))
    }

    fn advance(&mut self) -> Result<Next> {
        let (hint, gguf_ranges) = match self.mode {
            Mode::Json { cap, .. } => {
                return Ok(match self.total {
                    None => Next::Want(vec![Want::Whole { cap }]),
                    Some(_) => Next::Bytes(std::mem::take(&mut self.head)),
                })
            }
            Mode::Weights { hint, gguf_ranges } => (hint, gguf_ranges),
        };
        let Some(total) = self.total else {
            return Ok(Next::Want(vec![Want::Range {
                start: 0,
                end: super::first_range(),
            }]));
        };
        let have = self.head.len() as u64;
        let mut head = Head::of(&self.head);
        head.file_len = total;
        let detected = match hint {
            Some(f) => Detected::Format(f),
            None => detect::sniff(&head),
        };
        if !gguf_ranges && detected == Detected::Format(WeightsFormat::ShardedSafeTensors) {
            // A shard holds tensors: one that is itself an index would name shards in turn.
            return Err(CoreError::invalid_model(
                "this shard is itself a sharded index, not a file of tensors",
            ));
        }
        if have == total {
            return self.whole(detected, hint, gguf_ranges);
        }
        let ranged_format = match detected {
            Detected::Format(f @ (WeightsFormat::NumPy | WeightsFormat::PyTorch)) => Some(f),
            _ => None,
        };
        if let Some(f) = ranged_format {
            // Their readers give file ranges as `usize`: a build that cannot address the whole
            // file (32-bit WebAssembly past 4 GiB) refuses it rather than wrap an offset.
            let len = usize::try_from(total).map_err(|_| {
                CoreError::invalid_argument(format!(
                    "a {total}-byte file, more than this build addresses"
                ))
            })?;
            if f == WeightsFormat::NumPy && numpy::looks_like_npy(&self.head) {
                return match numpy::header_span(&self.head)? {
                    Some(end) if end as u64 <= have => {
                        let file = NumpyFile::from_npy_header(&self.head, len)?;
                        Ok(Next::Open(Part::Ranged(Box::new(Ranged::Numpy(
                            file.into(),
                        )))))
                    }
                    end => {
                        let end = end.map_or(numpy::HEAD_BYTES as u64, |e| e as u64);
                        Ok(Next::Want(vec![Want::Range {
                            start: have,
                            end: end.min(total),
                        }]))
                    }
                };
            }
            if self.reading.is_none() {
                if format::zip::looks_like_zip(&self.head) {
                    let zip = ZipRead::new(f, total, self.head.clone());
                    self.reading = Some(Reading::Zip(zip));
                } else if f == WeightsFormat::PyTorch && pytorch::looks_like_legacy(&self.head) {
                    let legacy = LegacyRead::new(total, self.head.clone());
                    self.reading = Some(Reading::Legacy(legacy));
                }
            }
            let next = match &mut self.reading {
                Some(Reading::Zip(zip)) => Some(zip.next()?),
                Some(Reading::Legacy(legacy)) => Some(legacy.next()?),
                None => None,
            };
            match next {
                Some(RangedNext::Want(wants)) => return Ok(Next::Want(wants)),
                Some(RangedNext::Open(file)) => {
                    return Ok(Next::Open(Part::Ranged(Box::new(file))))
                }
                None => {}
            }
        }
        match detected {
            Detected::Format(WeightsFormat::SafeTensors) => {
                match SafeTensors::header_end(&self.head, total) {
                    Some(end) if end > have => {
                        Ok(Next::Want(vec![Want::Range { start: have, end }]))
                    }
                    _ => Ok(Next::Open(Part::SafeTensors(Box::new(
                        SafeTensors::from_header(&self.head, total, &self.url)?,
                    )))),
                }
            }
            Detected::Format(WeightsFormat::Gguf) if gguf_ranges => {
                let misread =
                    |e| detect::explain_misread(e, WeightsFormat::Gguf, &|| Ok(head.clone()));
                match gguf::parse_header(&self.head, total).map_err(misread)? {
                    GgufHeader::Parsed(parts) => Ok(Next::Open(Part::Gguf(
                        Box::new(GgufSource::from_header(parts, total)?),
                        false,
                    ))),
                    GgufHeader::NeedBytes(n) => {
                        // Doubling keeps a large vocabulary to a few requests.
                        let end = total.min((n as u64).max(have * 2));
                        if end > GGUF_HEADER_MAX_BYTES {
                            return Err(CoreError::invalid_gguf(format!(
                                "the header runs past {} MiB, the most read by ranges",
                                GGUF_HEADER_MAX_BYTES >> 20
                            )));
                        }
                        Ok(Next::Want(vec![Want::Range { start: have, end }]))
                    }
                }
            }
            Detected::Format(f) if format::registration(f).from_bytes().is_some() => {
                if total > WHOLE_FILE_MAX_BYTES {
                    let name = self.url.rsplit('/').next().unwrap_or_default();
                    let message = format!(
                        "{name} is larger than {} MiB ({total} bytes or more), the most read \
                         whole: {} is read whole",
                        WHOLE_FILE_MAX_BYTES >> 20,
                        f.describe()
                    );
                    return Err(match f {
                        WeightsFormat::Mlx => CoreError::invalid_mlx(message),
                        _ => CoreError::invalid_argument(message),
                    });
                }
                Ok(Next::Want(vec![Want::Range {
                    start: have,
                    end: total,
                }]))
            }
            _ => self.whole(detected, hint, gguf_ranges),
        }
    }

    /// Open the bytes held, the whole file, as a file in memory.
    /// A single GGUF file keeps its header's source (what only GGUF's header has).
    fn whole(
        &mut self,
        detected: Detected,
        hint: Option<WeightsFormat>,
        gguf: bool,
    ) -> Result<Next> {
        let bytes = std::mem::take(&mut self.head);
        if gguf && detected == Detected::Format(WeightsFormat::Gguf) {
            return Ok(Next::Open(Part::Gguf(
                Box::new(GgufSource::from_bytes(bytes)?),
                true,
            )));
        }
        Ok(Next::Open(Part::Whole(format::open_bytes(bytes, hint)?)))
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
            // The whole file, sent for its first range by a server that ignores ranges.
            Want::Range { start: 0, .. } if self.head.is_empty() && bytes.len() as u64 == total => {
                total
            }
            Want::Range { start, end } => end.min(total).saturating_sub(start),
            Want::Whole { cap } if total > cap => {
                let what = match self.mode {
                    Mode::Json { what, .. } => what,
                    Mode::Weights { .. } => "the file",
                };
                return Err(CoreError::invalid_model(format!(
                    "{what} is larger than {} MiB ({total} bytes or more), the most read",
                    cap >> 20
                )));
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
