//! A zip checkpoint (`.npz`, `torch.save`'s zip) read by ranges: the end records (the last
//! [`END_RECORDS_MAX_BYTES`]), the central directory (at most [`CENTRAL_MAX_BYTES`]), every
//! member's local header (an `.npz` member's with its `.npy` header), then a PyTorch
//! checkpoint's `byteorder` and `data.pkl` (whole, capped as locally). Each is checked by the
//! local reader's own parsing ([`crate::format::zip`], [`NumpyFile::from_zip_heads`],
//! [`PyTorchFile::from_zip_members`]); tensors are then fetched by their file ranges. An
//! archive with a deflated member is read whole (capped), as a file in memory.

use super::Want;
use crate::error::{CoreError, Result};
use crate::format::numpy::{self, NumpyFile};
use crate::format::pytorch::PyTorchFile;
use crate::format::zip::{self, Central, Directory, Method, ZipArchive, END_RECORDS_MAX_BYTES};
use crate::source::{TensorSource, WeightsFormat};
use std::ops::Range;

/// The most bytes of a central directory read by ranges (each member takes about a hundred).
pub const CENTRAL_MAX_BYTES: u64 = 64 << 20;
/// The most ranges asked for in one step.
const RANGES_AT_ONCE: usize = 64;
/// Ranges closer than this are asked for as one (neighbouring headers of small members).
const MERGE_GAP: u64 = 16 << 10;
/// The bytes of an `.npz` member's `.npy` header asked for before its length is known
/// (numpy writes 128, or a multiple of 64).
const NPY_HEADER_GUESS: u64 = 128;

/// A zip checkpoint opened from its headers.
pub(super) enum Ranged {
    Numpy(NumpyFile),
    PyTorch(PyTorchFile),
}

impl Ranged {
    pub(super) fn source(&self) -> &dyn TensorSource {
        match self {
            Ranged::Numpy(f) => f,
            Ranged::PyTorch(f) => f,
        }
    }

    /// Where the stored bytes of `name` lie in the file, and whether they are what the local
    /// `fetch` gives as they are (a slice may then read its rows alone).
    pub(super) fn range(&self, name: &str) -> Result<(Range<u64>, bool)> {
        self.source().info(name)?;
        let range = match self {
            Ranged::Numpy(f) => f
                .data_range(name)
                .map(|(r, as_is)| (r.start as u64..r.end as u64, as_is)),
            Ranged::PyTorch(f) => f.file_range(name),
        };
        range.ok_or_else(|| {
            CoreError::invalid_argument("a deflated member is read whole").with_tensor(name)
        })
    }

    /// What the local `fetch` gives, from the bytes of [`Ranged::range`].
    pub(super) fn serve(&self, name: &str, stored: &[u8]) -> Result<Vec<u8>> {
        match self {
            Ranged::Numpy(f) => f.from_data(name, stored),
            Ranged::PyTorch(f) => f.from_range(name, stored),
        }
    }
}

/// What the archive needs next.
pub(super) enum ZipNext {
    Want(Vec<Want>),
    /// A deflated member: read the file whole.
    Whole,
    Open(Ranged),
}

/// A zip being read by ranges.
pub(super) struct ZipRead {
    format: WeightsFormat,
    total: u64,
    /// Bytes held, by start; none lies inside another, so ends grow with starts.
    pieces: Vec<(u64, Vec<u8>)>,
}

impl ZipRead {
    /// A zip of `total` bytes whose first bytes are `head`, read as `format` (NumPy or
    /// PyTorch).
    pub(super) fn new(format: WeightsFormat, total: u64, head: Vec<u8>) -> ZipRead {
        let mut read = ZipRead {
            format,
            total,
            pieces: Vec::new(),
        };
        read.take(0, head);
        read
    }

    /// Hold `bytes`, the file's from `start`.
    pub(super) fn take(&mut self, start: u64, bytes: Vec<u8>) {
        let end = start + bytes.len() as u64;
        if bytes.is_empty() || self.held(start, end - start).is_some() {
            return;
        }
        self.pieces
            .retain(|(s, b)| !(*s >= start && s + b.len() as u64 <= end));
        let at = self.pieces.partition_point(|(s, _)| *s < start);
        self.pieces.insert(at, (start, bytes));
    }

    /// The file's bytes from `start` that a piece holds (empty when none does).
    fn from(&self, start: u64) -> &[u8] {
        let at = self.pieces.partition_point(|(s, _)| *s <= start);
        let Some((s, bytes)) = at.checked_sub(1).map(|i| &self.pieces[i]) else {
            return &[];
        };
        usize::try_from(start - s)
            .ok()
            .and_then(|skip| bytes.get(skip..))
            .unwrap_or(&[])
    }

    /// `len` bytes from `start`, if held.
    fn held(&self, start: u64, len: u64) -> Option<&[u8]> {
        let bytes = self.from(start);
        (bytes.len() as u64 >= len).then(|| &bytes[..len as usize])
    }

    /// What the archive needs next, or it open.
    pub(super) fn next(&mut self) -> Result<ZipNext> {
        let tail_start = self.total.saturating_sub(END_RECORDS_MAX_BYTES);
        let Some(tail) = self.held(tail_start, self.total - tail_start) else {
            return Ok(want(Some(tail_start..self.total)));
        };
        let dir = Directory::read(tail, tail_start)?;
        let cd = dir.range()?;
        if cd.end - cd.start > CENTRAL_MAX_BYTES {
            return Err(CoreError::header_too_large(format!(
                "zip: a central directory of {} bytes, more than the {} MiB read by ranges",
                cd.end - cd.start,
                CENTRAL_MAX_BYTES >> 20
            )));
        }
        let Some(cd_bytes) = self.held(cd.start, cd.end - cd.start) else {
            return Ok(want(Some(cd)));
        };
        let centrals = zip::central_records(cd_bytes, &dir)?;
        if centrals.iter().any(|c| c.entry().method == Method::Deflate) {
            return Ok(ZipNext::Whole);
        }
        let npz = self.format == WeightsFormat::NumPy;
        let wants = (centrals.iter())
            .filter_map(|c| {
                let need = self.local_need(c, npz, cd.start);
                let h = c.header_start();
                ((self.from(h).len() as u64) < need).then(|| h..h + need)
            })
            .collect::<Vec<_>>();
        if !wants.is_empty() {
            return Ok(want(wants));
        }
        let entries = (centrals.into_iter())
            .map(|c| {
                let local = self.from(c.header_start());
                c.with_local(local, cd.start)
            })
            .collect::<Result<Vec<_>>>()?;
        let zip = ZipArchive::from_entries(entries)?;
        if npz {
            let head = |e: &zip::ZipEntry| {
                let n = e.compressed_len.min(12 + numpy::MAX_HEADER_LEN as u64);
                let held = self.from(e.data_start);
                Ok(held[..held.len().min(n as usize)].to_vec())
            };
            return Ok(ZipNext::Open(Ranged::Numpy(NumpyFile::from_zip_heads(
                &zip, &head,
            )?)));
        }
        let members = PyTorchFile::zip_members(&zip)?;
        let wants = (members.iter())
            .filter(|(e, limit)| e.compressed_len <= *limit)
            .filter(|(e, _)| self.held(e.data_start, e.compressed_len).is_none())
            .map(|(e, _)| e.data_start..e.data_start + e.compressed_len)
            .collect::<Vec<_>>();
        if !wants.is_empty() {
            return Ok(want(wants));
        }
        let read =
            |e: &zip::ZipEntry, limit: u64| e.read_at(self.from(e.data_start), e.data_start, limit);
        let file = PyTorchFile::from_zip_members(&zip, &read)?;
        Ok(ZipNext::Open(Ranged::PyTorch(file)))
    }

    /// The bytes from a member's local header on that its checks need: the header and, for
    /// an `.npz` array, its `.npy` header; never past the directory at `cd_start`.
    fn local_need(&self, c: &Central, npz: bool, cd_start: u64) -> u64 {
        let held = self.from(c.header_start());
        let local = c.local_len(held);
        let mut need = local;
        if npz && c.entry().name.ends_with(".npy") {
            let npy = usize::try_from(local)
                .ok()
                .and_then(|l| held.get(l..))
                .and_then(|npy| numpy::header_span(npy).ok().flatten());
            let npy = npy.map_or(NPY_HEADER_GUESS, |n| n as u64);
            need += npy.min(c.entry().compressed_len);
        }
        need.min(cd_start - c.header_start())
    }
}

/// Ask for `ranges`, those close together as one, at most [`RANGES_AT_ONCE`].
fn want(ranges: impl IntoIterator<Item = Range<u64>>) -> ZipNext {
    let mut ranges: Vec<Range<u64>> = ranges.into_iter().collect();
    ranges.sort_unstable_by_key(|r| r.start);
    let mut merged: Vec<Range<u64>> = Vec::new();
    for r in ranges {
        let full = merged.len() == RANGES_AT_ONCE;
        match merged.last_mut() {
            Some(last) if r.start <= last.end.saturating_add(MERGE_GAP) => {
                last.end = last.end.max(r.end)
            }
            _ if full => break,
            _ => merged.push(r),
        }
    }
    ZipNext::Want(
        merged
            .into_iter()
            .map(|r| Want::Range {
                start: r.start,
                end: r.end,
            })
            .collect(),
    )
}
