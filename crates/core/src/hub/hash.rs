//! The two hashes the Hugging Face Hub names files by: the SHA-256 of an LFS file's bytes
//! (`X-Linked-Etag`, `lfs.sha256`) and the git blob id of a small file (`ETag`, `blobId`):
//! the SHA-1 of `"blob <size>\0"` followed by the bytes. A blob of the cache is named by one
//! of them, so its name says which (64 hex digits or 40).

use crate::error::{CoreError, Result};
use sha2::Digest;

/// Which hash names a blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashKind {
    /// SHA-256 of the bytes (LFS files).
    Sha256,
    /// SHA-1 of `"blob <size>\0" + bytes` (files git stores itself).
    GitBlob,
}

impl HashKind {
    /// The hash a blob name (an ETag without quotes) is: 64 lowercase hex digits are a
    /// SHA-256, 40 a git blob id; anything else names no blob.
    pub fn of_etag(etag: &str) -> Option<HashKind> {
        let hex = etag.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        match etag.len() {
            64 if hex => Some(HashKind::Sha256),
            40 if hex => Some(HashKind::GitBlob),
            _ => None,
        }
    }

    /// How reports name it.
    pub fn name(self) -> &'static str {
        match self {
            HashKind::Sha256 => "sha256",
            HashKind::GitBlob => "git-sha1",
        }
    }
}

/// An ETag as huggingface_hub normalizes it (`W/` and the quotes removed), checked to name a
/// blob: ERR_IO naming `what` otherwise (a server that does not behave as the Hub does).
pub fn blob_etag(raw: &str, what: &str) -> Result<(String, HashKind)> {
    let etag = raw.trim();
    let etag = etag.strip_prefix("W/").unwrap_or(etag).trim_matches('"');
    let etag = etag.to_ascii_lowercase();
    match HashKind::of_etag(&etag) {
        Some(kind) => Ok((etag, kind)),
        None => Err(CoreError::new(
            crate::error::ErrorKind::Io,
            format!(
                "{what} {:?} is neither a SHA-256 nor a git blob id (40 or 64 hex digits)",
                crate::names::printable(raw)
            ),
        )),
    }
}

/// A hash being computed over bytes fed in order.
#[derive(Clone)]
pub enum Hasher {
    Sha256(sha2::Sha256),
    /// SHA-1: git names blobs by it; nothing secret depends on it here.
    GitBlob(sha1::Sha1),
}

impl Hasher {
    /// A hash of `kind` over a file of `size` bytes (a git blob id starts with the size).
    pub fn new(kind: HashKind, size: u64) -> Hasher {
        match kind {
            HashKind::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
            HashKind::GitBlob => {
                let mut h = sha1::Sha1::new();
                h.update(format!("blob {size}\0").as_bytes());
                Hasher::GitBlob(h)
            }
        }
    }

    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::GitBlob(h) => h.update(bytes),
        }
    }

    /// The hash as lowercase hex.
    pub fn finish_hex(self) -> String {
        match self {
            Hasher::Sha256(h) => hex(&h.finalize()),
            Hasher::GitBlob(h) => hex(&h.finalize()),
        }
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Bytes read per call while hashing a file.
#[cfg(feature = "fs")]
pub const READ_CHUNK: usize = 1 << 20;

#[cfg(feature = "fs")]
/// Feed the next `len` bytes of `file` to `hasher`, [`READ_CHUNK`] bytes at a time: never
/// more, whatever the file would give (a file of `/proc` claims 0 bytes and reads without
/// end), and fewer is ERR_IO (the file shrank while it was read). `path` names it in errors.
pub fn hash_reader(
    file: &mut std::fs::File,
    len: u64,
    hasher: &mut Hasher,
    path: &std::path::Path,
) -> Result<()> {
    use std::io::Read;
    advise_sequential(file);
    let mut buf = vec![0u8; READ_CHUNK.min(usize::try_from(len).unwrap_or(READ_CHUNK))];
    let mut left = len;
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(buf.len()));
        let n = match file.read(&mut buf[..want]) {
            Ok(0) => {
                return Err(CoreError::new(
                    crate::error::ErrorKind::Io,
                    format!(
                        "the file ended {left} bytes before its {len} bytes (changed while it was read?)"
                    ),
                )
                .with_path(path))
            }
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CoreError::io(e, path)),
        };
        hasher.update(&buf[..n]);
        left -= n as u64;
    }
    Ok(())
}

#[cfg(feature = "fs")]
/// The hash of `kind` of the `len` bytes `file` holds (see [`hash_reader`]), as hex.
pub fn hash_file(
    file: &mut std::fs::File,
    len: u64,
    kind: HashKind,
    path: &std::path::Path,
) -> Result<String> {
    let mut hasher = Hasher::new(kind, len);
    hash_reader(file, len, &mut hasher, path)?;
    Ok(hasher.finish_hex())
}

#[cfg(feature = "fs")]
/// Tell the kernel the file is read once, front to back (a larger read-ahead).
fn advise_sequential(file: &std::fs::File) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::io::AsRawFd;
        // SAFETY: a valid open file descriptor; the call only sets read-ahead advice.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = file;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_blob_ids_and_sha256_as_the_hub_names_them() {
        // `git hash-object` of an empty file and of "hello\n".
        let git = |bytes: &[u8]| {
            let mut h = Hasher::new(HashKind::GitBlob, bytes.len() as u64);
            h.update(bytes);
            h.finish_hex()
        };
        assert_eq!(git(b""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
        assert_eq!(git(b"hello\n"), "ce013625030ba8dba906f756967f9e9ca394464a");
        let mut h = Hasher::new(HashKind::Sha256, 3);
        h.update(b"abc");
        assert_eq!(
            h.finish_hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn etags_are_normalized_and_checked() {
        let sha = "a".repeat(64);
        assert_eq!(
            blob_etag(&format!("\"{sha}\""), "X-Linked-Etag").unwrap(),
            (sha.clone(), HashKind::Sha256)
        );
        let git = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(
            blob_etag(&format!("W/\"{git}\""), "ETag").unwrap().1,
            HashKind::GitBlob
        );
        for bad in ["", "\"abc\"", "../../etc/passwd", &"g".repeat(64)] {
            let e = blob_etag(bad, "ETag").unwrap_err();
            assert_eq!(e.code(), "ERR_IO", "{bad}");
        }
    }
}
