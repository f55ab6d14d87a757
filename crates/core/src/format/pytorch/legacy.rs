//! The legacy layout of `torch.save` (before torch 1.6, or `_use_new_zipfile_serialization=False`):
//! the magic-number, protocol-version and sys-info pickles, the object's pickle (each storage
//! a persistent id `('storage', type, key, location, numel, view)`), the pickle of the storage
//! keys in file order, then per key an 8-byte little-endian element count and the storage's
//! bytes. Every storage's place follows from the pickles alone; the counts only confirm it.
//! Parsed here once for a file held whole and for one read by ranges (which fetches the counts
//! [`LegacyHead::unread_counts`] names, then opens with the same checks).

use super::pickle::{self, Limits, Object, PersistentIds, Unpickled, Value};
use super::{Container, PyTorchFile, Storage, StoredBytes};
use crate::error::{CoreError, Result};
use crate::format::safetensors::Memory;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The legacy format's first pickle (`torch.serialization.MAGIC_NUMBER`).
pub(super) const LEGACY_MAGIC: [u8; 10] =
    [0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19];
const LEGACY_PROTOCOL_VERSION: i64 = 1001;
/// Bytes of the element count before each storage.
const COUNT_BYTES: u64 = 8;

/// An element count's 8 bytes at a file offset, where they are held (`None`: not read yet).
pub type CountAt<'a> = dyn Fn(u64) -> Option<[u8; 8]> + 'a;

/// Whether `bytes` start with the legacy format's magic-number pickle.
pub fn looks_like_legacy(bytes: &[u8]) -> bool {
    // PROTO n, an optional FRAME, then LONG1 of the 10-byte magic.
    let mut at = match bytes {
        [0x80, 2..=5, ..] => 2,
        _ => return false,
    };
    if bytes.get(at) == Some(&0x95) {
        at += 9;
    }
    bytes.get(at..at + 2) == Some(&[0x8a, 0x0a])
        && bytes.get(at + 2..at + 12) == Some(&LEGACY_MAGIC)
}

/// A legacy checkpoint's pickles, parsed: its tensors and storages, and where its storages
/// start in the file.
pub struct LegacyHead {
    un: Unpickled,
    /// The storage keys in the order their bytes follow.
    keys: Vec<String>,
    /// Where the first storage's element count lies: just past the key list's pickle.
    data_start: u64,
}

/// Where a legacy checkpoint's storages lie, as far as the counts held let it be checked.
enum Placed {
    Checked {
        storages: Vec<Storage>,
        /// The storage of each of the pickle's storage declarations.
        decl_storage: Vec<usize>,
    },
    /// The offsets of counts not read yet, each checked before the first problem found (or
    /// the end): once they are read, the checks run again.
    Unread(Vec<u64>),
}

impl LegacyHead {
    /// Parse the pickles at the start of `bytes`: the whole file, or its first bytes, in which
    /// case a pickle they cut is ERR_INCOMPLETE_FILE (read more and parse again).
    pub fn parse(bytes: &[u8]) -> Result<LegacyHead> {
        let small = Limits {
            max_depth: 16,
            max_stack: 1 << 12,
            max_memo: 1 << 12,
            max_objects: 1 << 12,
        };
        let magic = pickle::unpickle(bytes, 0, PersistentIds::Refused, small)?;
        if !matches!(&magic.root, Value::BigInt(b) if **b == LEGACY_MAGIC) {
            return Err(CoreError::invalid_header(
                "legacy checkpoint: wrong magic number",
            ));
        }
        let version = pickle::unpickle(bytes, magic.end, PersistentIds::Refused, small)?;
        if version.root != Value::Int(LEGACY_PROTOCOL_VERSION) {
            return Err(CoreError::invalid_header(match version.root {
                Value::Int(v) => format!(
                    "legacy checkpoint: protocol version {v}, not {LEGACY_PROTOCOL_VERSION}"
                ),
                _ => format!(
                    "legacy checkpoint: the protocol version is not an integer (torch writes {LEGACY_PROTOCOL_VERSION})"
                ),
            }));
        }
        let sys_info = pickle::unpickle(bytes, version.end, PersistentIds::Refused, small)?;
        let un = pickle::unpickle(
            bytes,
            sys_info.end,
            PersistentIds::Legacy,
            Limits::default(),
        )?;
        let list = pickle::unpickle(bytes, un.end, PersistentIds::Refused, Limits::default())?;
        let no_list = || CoreError::invalid_header("legacy checkpoint: no storage key list");
        let items = match &list.root {
            Value::Obj(id) => match list.object(*id) {
                Object::List(items) => items,
                _ => return Err(no_list()),
            },
            _ => return Err(no_list()),
        };
        let keys = items
            .iter()
            .map(|k| match k {
                Value::Str(s) => Ok(s.to_string()),
                _ => Err(CoreError::invalid_header(
                    "legacy checkpoint: a storage key is not a string",
                )),
            })
            .collect::<Result<_>>()?;
        Ok(LegacyHead {
            un,
            keys,
            data_start: list.end as u64,
        })
    }

    /// The offsets of the element counts (8 bytes each) that `count` does not hold and that
    /// opening a file of `file_len` bytes must check: empty when [`LegacyHead::open`] can
    /// run. A problem found before any count is missing is the error `open` gives.
    pub fn unread_counts(&self, file_len: u64, count: &CountAt<'_>) -> Result<Vec<u64>> {
        Ok(match self.place(file_len, count)? {
            Placed::Checked { .. } => Vec::new(),
            Placed::Unread(at) => at,
        })
    }

    /// The checkpoint of `file_len` bytes, every storage checked to lie in the file and its
    /// element count (`count`) to be the pickle's; `memory` holds the file, or nothing for a
    /// file read by ranges (its tensors are then served by [`PyTorchFile::file_range`]).
    pub fn open(
        self,
        memory: Arc<Memory>,
        file_len: u64,
        count: &CountAt<'_>,
    ) -> Result<PyTorchFile> {
        match self.place(file_len, count)? {
            Placed::Checked {
                storages,
                decl_storage,
            } => PyTorchFile::assemble(
                memory,
                Container::Legacy,
                false,
                self.un,
                storages,
                decl_storage,
            ),
            Placed::Unread(_) => Err(CoreError::invalid_argument(
                "legacy checkpoint: opened before its storages' element counts were read",
            )),
        }
    }

    fn place(&self, file_len: u64, count: &CountAt<'_>) -> Result<Placed> {
        let mut storages = Vec::with_capacity(self.keys.len().min(self.un.storages.len()));
        let mut unread = Vec::new();
        let laid = self.lay_out(file_len, count, &mut storages, &mut unread);
        if !unread.is_empty() {
            return Ok(Placed::Unread(unread));
        }
        laid?;
        let index: HashMap<&str, usize> = (storages.iter().enumerate())
            .map(|(i, s)| (s.key.as_str(), i))
            .collect();
        let decl_storage = (self.un.storages.iter())
            .map(|d| {
                index.get(d.key.as_str()).copied().ok_or_else(|| {
                    CoreError::invalid_header(format!(
                        "legacy checkpoint: storage '{}' is used but not stored",
                        d.key
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Placed::Checked {
            storages,
            decl_storage,
        })
    }

    /// Each listed key's storage, in file order: an element count (checked against the
    /// pickle's where `count` holds it, its offset put in `unread` otherwise), then the bytes
    /// (always little-endian: torch converted on big-endian hosts); the first problem ends it.
    fn lay_out(
        &self,
        file_len: u64,
        count: &CountAt<'_>,
        storages: &mut Vec<Storage>,
        unread: &mut Vec<u64>,
    ) -> Result<()> {
        // Each declared stored storage: elements and bytes per element (from the pickle).
        let declared: HashMap<&str, (u64, u64)> = (self.un.storages.iter())
            .map(|d| (d.key.as_str(), (d.numel, d.elem.size())))
            .collect();
        let mut seen = HashSet::new();
        let mut at = self.data_start;
        for key in &self.keys {
            let &(numel, es) = declared.get(key.as_str()).ok_or_else(|| {
                CoreError::invalid_header(format!(
                    "legacy checkpoint: storage '{key}' is listed but no tensor uses it"
                ))
            })?;
            if at.checked_add(COUNT_BYTES).is_none_or(|e| e > file_len) {
                return Err(CoreError::incomplete_file(format!(
                    "legacy checkpoint: storage '{key}' is missing (file truncated)"
                )));
            }
            match count(at).map(i64::from_le_bytes) {
                Some(n) if n < 0 || n as u64 != numel => {
                    return Err(CoreError::size_mismatch(format!(
                        "legacy checkpoint: storage '{key}' should hold {numel} elements, the file says {n}"
                    )))
                }
                Some(_) => {}
                None => unread.push(at),
            }
            let len = numel.saturating_mul(es);
            let start = at + COUNT_BYTES;
            let end = start.checked_add(len).filter(|&e| e <= file_len);
            let end = end.ok_or_else(|| {
                CoreError::incomplete_file(format!(
                    "legacy checkpoint: storage '{key}' ({len} bytes) runs past the end of the file"
                ))
            })?;
            if !seen.insert(key.as_str()) {
                return Err(CoreError::invalid_header(format!(
                    "legacy checkpoint: storage '{key}' is listed twice"
                )));
            }
            let offset = |v: u64| {
                usize::try_from(v).map_err(|_| {
                    CoreError::size_mismatch(format!(
                        "legacy checkpoint: storage '{key}' lies past what this machine addresses"
                    ))
                })
            };
            storages.push(Storage {
                key: key.clone(),
                bytes: StoredBytes::Mapped(offset(start)?..offset(end)?),
                len,
            });
            at = end;
        }
        Ok(())
    }
}
