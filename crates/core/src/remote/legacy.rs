//! A legacy PyTorch checkpoint (`torch.save` before 1.6) read by ranges: its first bytes,
//! doubled until its pickles parse (at most [`LEGACY_PICKLES_MAX_BYTES`]), then the 8-byte
//! element count before each storage, whose place the pickles give; every check is the local
//! reader's ([`LegacyHead`]), so a file opens, or fails, as it does locally. Tensors are then
//! fetched by their file ranges.

use super::ranged::{want, Pieces, Ranged, RangedNext};
use super::{Want, LEGACY_PICKLES_MAX_BYTES};
use crate::error::{CoreError, ErrorKind, Result};
use crate::format::pytorch::LegacyHead;
use crate::memory::Memory;
use std::sync::Arc;

/// A legacy checkpoint being read by ranges.
pub(super) struct LegacyRead {
    total: u64,
    /// The file's first bytes, grown until the pickles parse.
    head: Vec<u8>,
    /// The pickles, once they parsed.
    parsed: Option<LegacyHead>,
    /// Element counts read past `head`.
    counts: Pieces,
}

impl LegacyRead {
    /// A legacy checkpoint of `total` bytes whose first bytes are `head`.
    pub(super) fn new(total: u64, head: Vec<u8>) -> LegacyRead {
        LegacyRead {
            total,
            head,
            parsed: None,
            counts: Pieces::default(),
        }
    }

    /// Hold `bytes`, the file's from `start`: more of the head, or element counts.
    pub(super) fn take(&mut self, start: u64, bytes: Vec<u8>) {
        if self.parsed.is_none() && start == self.head.len() as u64 {
            self.head.extend_from_slice(&bytes);
        } else {
            self.counts.take(start, bytes);
        }
    }

    /// What the checkpoint needs next, or it open.
    pub(super) fn next(&mut self) -> Result<RangedNext> {
        if self.parsed.is_none() {
            let have = self.head.len() as u64;
            match LegacyHead::parse(&self.head) {
                Ok(head) => self.parsed = Some(head),
                // Cut by the end of the bytes held, not of the file: read twice as many.
                Err(e) if e.kind() == ErrorKind::IncompleteFile && have < self.total => {
                    if have >= LEGACY_PICKLES_MAX_BYTES {
                        return Err(CoreError::header_too_large(format!(
                            "legacy checkpoint: the pickles run past {} MiB, the most read by \
                             ranges",
                            LEGACY_PICKLES_MAX_BYTES >> 20
                        )));
                    }
                    let end = (have * 2).min(LEGACY_PICKLES_MAX_BYTES).min(self.total);
                    return Ok(RangedNext::Want(vec![Want::Range { start: have, end }]));
                }
                Err(e) => return Err(e),
            }
        }
        let Some(head) = self.parsed.take() else {
            return Err(CoreError::invalid_argument("legacy checkpoint: no pickles"));
        };
        let unread = head.unread_counts(self.total, &|at| self.count(at))?;
        if !unread.is_empty() {
            self.parsed = Some(head);
            return Ok(want(unread.into_iter().map(|at| at..at + 8)));
        }
        let empty = Arc::new(Memory::Owned(Vec::new()));
        let file = head.open(empty, self.total, &|at| self.count(at))?;
        Ok(RangedNext::Open(Ranged::PyTorch(file.into())))
    }

    /// The 8 bytes at `at`, where held.
    fn count(&self, at: u64) -> Option<[u8; 8]> {
        let from_head = usize::try_from(at)
            .ok()
            .and_then(|at| self.head.get(at..at.checked_add(8)?));
        from_head
            .or_else(|| self.counts.held(at, 8))
            .and_then(|b| b.try_into().ok())
    }
}
