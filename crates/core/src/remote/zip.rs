//! A zip checkpoint (`.npz`, `torch.save`'s zip) read by ranges: the end records (the last
//! [`END_RECORDS_MAX_BYTES`]), the central directory (at most [`CENTRAL_MAX_BYTES`]), every
//! member's local header (an `.npz` member's with its `.npy` header), then a PyTorch
//! checkpoint's `byteorder` and `data.pkl` (whole, capped as locally). Each is checked by the
//! local reader's own parsing ([`crate::format::zip`], [`NumpyFile::from_zip_heads`],
//! [`PyTorchFile::from_zip_members`]); tensors are then fetched by their file ranges. A
//! deflated `.npz` member's `.npy` header is inflated from the first of its compressed bytes
//! (as many as the local reader inflates at open); a deflated member's tensor is fetched as
//! its compressed bytes and inflated, bounded by the size the directory declares.

use super::ranged::{want, Pieces, Ranged, RangedNext};
use crate::error::{CoreError, Result};
use crate::format::numpy::{self, NumpyFile};
use crate::format::pytorch::PyTorchFile;
use crate::format::zip::{self, Central, Directory, Method, ZipArchive, END_RECORDS_MAX_BYTES};
use crate::source::WeightsFormat;

/// The most bytes of a central directory read by ranges (each member takes about a hundred).
pub const CENTRAL_MAX_BYTES: u64 = 64 << 20;
/// The bytes of an `.npz` member's `.npy` header asked for before its length is known
/// (numpy writes 128, or a multiple of 64).
const NPY_HEADER_GUESS: u64 = 128;
/// The compressed bytes of a deflated `.npz` member asked for first, to inflate its first
/// [`numpy::HEAD_BYTES`] (the `.npy` header and what the local reader inflates with it);
/// doubled while they do not suffice.
const DEFLATED_HEAD_GUESS: u64 = 16 << 10;

/// A zip being read by ranges.
pub(super) struct ZipRead {
    format: WeightsFormat,
    total: u64,
    pieces: Pieces,
}

impl ZipRead {
    /// A zip of `total` bytes whose first bytes are `head`, read as `format` (NumPy or
    /// PyTorch).
    pub(super) fn new(format: WeightsFormat, total: u64, head: Vec<u8>) -> ZipRead {
        let mut read = ZipRead {
            format,
            total,
            pieces: Pieces::default(),
        };
        read.take(0, head);
        read
    }

    /// Hold `bytes`, the file's from `start`.
    pub(super) fn take(&mut self, start: u64, bytes: Vec<u8>) {
        self.pieces.take(start, bytes)
    }

    /// What the archive needs next, or it open.
    pub(super) fn next(&mut self) -> Result<RangedNext> {
        let tail_start = self.total.saturating_sub(END_RECORDS_MAX_BYTES);
        let Some(tail) = self.pieces.held(tail_start, self.total - tail_start) else {
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
        let Some(cd_bytes) = self.pieces.held(cd.start, cd.end - cd.start) else {
            return Ok(want(Some(cd)));
        };
        let centrals = zip::central_records(cd_bytes, &dir)?;
        let npz = self.format == WeightsFormat::NumPy;
        let wants = (centrals.iter())
            .filter_map(|c| {
                let need = self.local_need(c, npz, cd.start);
                let h = c.header_start();
                ((self.pieces.from(h).len() as u64) < need).then(|| h..h + need)
            })
            .collect::<Vec<_>>();
        if !wants.is_empty() {
            return Ok(want(wants));
        }
        let entries = (centrals.into_iter())
            .map(|c| {
                let local = self.pieces.from(c.header_start());
                c.with_local(local, cd.start)
            })
            .collect::<Result<Vec<_>>>()?;
        let zip = ZipArchive::from_entries(entries)?;
        if npz {
            return self.npz(&zip);
        }
        let members = PyTorchFile::zip_members(&zip)?;
        let wants = (members.iter())
            .filter(|(e, limit)| e.compressed_len <= *limit)
            .filter(|(e, _)| self.pieces.held(e.data_start, e.compressed_len).is_none())
            .map(|(e, _)| e.data_start..e.data_start + e.compressed_len)
            .collect::<Vec<_>>();
        if !wants.is_empty() {
            return Ok(want(wants));
        }
        let read = |e: &zip::ZipEntry, limit: u64| {
            e.read_at(self.pieces.from(e.data_start), e.data_start, limit)
        };
        let file = PyTorchFile::from_zip_members(&zip, &read)?;
        Ok(RangedNext::Open(Ranged::PyTorch(file.into())))
    }

    /// An `.npz` from its members' first bytes: a stored member's `.npy` header as held, a
    /// deflated one's first [`numpy::HEAD_BYTES`] inflated from its first compressed bytes
    /// (more of them asked for, doubling, while they do not suffice).
    fn npz(&self, zip: &ZipArchive) -> Result<RangedNext> {
        let held = |e: &zip::ZipEntry| {
            let held = self.pieces.from(e.data_start);
            &held[..held
                .len()
                .min(usize::try_from(e.compressed_len).unwrap_or(usize::MAX))]
        };
        let short = (zip.entries().iter())
            .filter(|e| e.method == Method::Deflate && e.name.ends_with(".npy"))
            .filter(|e| matches!(e.prefix_of(held(e), numpy::HEAD_BYTES), Ok(None)))
            .map(|e| {
                let more = (held(e).len() as u64 * 2).max(DEFLATED_HEAD_GUESS);
                e.data_start..e.data_start + more.min(e.compressed_len)
            })
            .collect::<Vec<_>>();
        if !short.is_empty() {
            return Ok(want(short));
        }
        let head = |e: &zip::ZipEntry| match e.method {
            Method::Stored => {
                let n = e.compressed_len.min(numpy::HEAD_BYTES as u64);
                let held = self.pieces.from(e.data_start);
                Ok(held[..held.len().min(n as usize)].to_vec())
            }
            Method::Deflate => (e.prefix_of(held(e), numpy::HEAD_BYTES)?)
                .ok_or_else(|| CoreError::incomplete_file("zip: a member's first bytes not read")),
        };
        let file = NumpyFile::from_zip_heads(zip, &head)?;
        Ok(RangedNext::Open(Ranged::Numpy(file.into())))
    }

    /// The bytes from a member's local header on that its checks need: the header and, for
    /// an `.npz` array, its `.npy` header (stored) or the first of its compressed bytes
    /// (deflated); never past the directory at `cd_start`.
    fn local_need(&self, c: &Central, npz: bool, cd_start: u64) -> u64 {
        let held = self.pieces.from(c.header_start());
        let local = c.local_len(held);
        let mut need = local;
        let entry = c.entry();
        if npz && entry.name.ends_with(".npy") {
            let first = match entry.method {
                Method::Stored => {
                    let npy = usize::try_from(local)
                        .ok()
                        .and_then(|l| held.get(l..))
                        .and_then(|npy| numpy::header_span(npy).ok().flatten());
                    npy.map_or(NPY_HEADER_GUESS, |n| n as u64)
                }
                Method::Deflate => DEFLATED_HEAD_GUESS,
            };
            need += first.min(entry.compressed_len);
        }
        need.min(cd_start - c.header_start())
    }
}
