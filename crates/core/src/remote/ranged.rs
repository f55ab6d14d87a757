//! What the readers of a file by ranges share (a zip checkpoint, `zip.rs`; a legacy PyTorch
//! checkpoint, `legacy.rs`): the bytes held so far, the ranges asked for next, and the file
//! once open, whose tensors are then fetched by their file ranges.

use super::Want;
use crate::error::{CoreError, Result};
use crate::format::numpy::NumpyFile;
use crate::format::pytorch::PyTorchFile;
use crate::source::TensorSource;
use std::ops::Range;
use std::sync::Arc;

/// The most ranges asked for in one step.
const RANGES_AT_ONCE: usize = 64;
/// Ranges closer than this are asked for as one (neighbouring headers of small members).
const MERGE_GAP: u64 = 16 << 10;

/// A file opened from its headers: tensors at their file ranges. Shared: a shard's file is
/// also one of its index's sources ([`Ranged::shared`]).
pub(super) enum Ranged {
    Numpy(Arc<NumpyFile>),
    PyTorch(Arc<PyTorchFile>),
}

impl Ranged {
    pub(super) fn source(&self) -> &dyn TensorSource {
        match self {
            Ranged::Numpy(f) => f.as_ref(),
            Ranged::PyTorch(f) => f.as_ref(),
        }
    }

    /// The file as a source of its own, for the sharded index it is a shard of.
    pub(super) fn shared(&self) -> Arc<dyn TensorSource> {
        match self {
            Ranged::Numpy(f) => f.clone(),
            Ranged::PyTorch(f) => f.clone(),
        }
    }

    /// Where the stored bytes of `name` lie in the file (a deflated member's compressed
    /// bytes), and whether they are what the local `fetch` gives as they are (a slice may then
    /// read its rows alone).
    pub(super) fn range(&self, name: &str) -> Result<(Range<u64>, bool)> {
        self.source().info(name)?;
        let range = match self {
            Ranged::Numpy(f) => f
                .data_range(name)
                .map(|(r, as_is)| (r.start as u64..r.end as u64, as_is)),
            Ranged::PyTorch(f) => f.file_range(name),
        };
        range.ok_or_else(|| CoreError::not_found("no such tensor in the file").with_tensor(name))
    }

    /// What the local `fetch` gives, from the bytes of [`Ranged::range`].
    pub(super) fn serve(&self, name: &str, stored: &[u8]) -> Result<Vec<u8>> {
        match self {
            Ranged::Numpy(f) => f.from_data(name, stored),
            Ranged::PyTorch(f) => f.from_range(name, stored),
        }
    }
}

/// What a file read by ranges needs next.
pub(super) enum RangedNext {
    Want(Vec<Want>),
    Open(Ranged),
}

/// Bytes of a file held, by start; none lies inside another, so ends grow with starts.
#[derive(Default)]
pub(super) struct Pieces(Vec<(u64, Vec<u8>)>);

impl Pieces {
    /// Hold `bytes`, the file's from `start`.
    pub(super) fn take(&mut self, start: u64, bytes: Vec<u8>) {
        let end = start + bytes.len() as u64;
        if bytes.is_empty() || self.held(start, end - start).is_some() {
            return;
        }
        self.0
            .retain(|(s, b)| !(*s >= start && s + b.len() as u64 <= end));
        let at = self.0.partition_point(|(s, _)| *s < start);
        self.0.insert(at, (start, bytes));
    }

    /// The file's bytes from `start` that a piece holds (empty when none does).
    pub(super) fn from(&self, start: u64) -> &[u8] {
        let at = self.0.partition_point(|(s, _)| *s <= start);
        let Some((s, bytes)) = at.checked_sub(1).map(|i| &self.0[i]) else {
            return &[];
        };
        usize::try_from(start - s)
            .ok()
            .and_then(|skip| bytes.get(skip..))
            .unwrap_or(&[])
    }

    /// `len` bytes from `start`, if held.
    pub(super) fn held(&self, start: u64, len: u64) -> Option<&[u8]> {
        let bytes = self.from(start);
        (bytes.len() as u64 >= len).then(|| &bytes[..len as usize])
    }
}

/// Ask for `ranges`, those close together as one, at most [`RANGES_AT_ONCE`].
pub(super) fn want(ranges: impl IntoIterator<Item = Range<u64>>) -> RangedNext {
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
    RangedNext::Want(
        merged
            .into_iter()
            .map(|r| Want::Range {
                start: r.start,
                end: r.end,
            })
            .collect(),
    )
}
