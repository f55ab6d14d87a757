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
    GitBlob(Sha1),
}

impl Hasher {
    /// A hash of `kind` over a file of `size` bytes (a git blob id starts with the size).
    pub fn new(kind: HashKind, size: u64) -> Hasher {
        match kind {
            HashKind::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
            HashKind::GitBlob => {
                let mut h = Sha1::new();
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
            Hasher::GitBlob(h) => hex(&h.finish()),
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

/// SHA-1 (FIPS 180-4), for git blob ids only: the Hub names small files by it. Not used for
/// anything secret.
#[derive(Clone)]
pub struct Sha1 {
    state: [u32; 5],
    block: [u8; 64],
    filled: usize,
    length: u64,
}

impl Default for Sha1 {
    fn default() -> Self {
        Sha1::new()
    }
}

impl Sha1 {
    pub fn new() -> Sha1 {
        Sha1 {
            state: [
                0x6745_2301,
                0xefcd_ab89,
                0x98ba_dcfe,
                0x1032_5476,
                0xc3d2_e1f0,
            ],
            block: [0; 64],
            filled: 0,
            length: 0,
        }
    }

    pub fn update(&mut self, mut bytes: &[u8]) {
        self.length = self.length.wrapping_add(bytes.len() as u64);
        if self.filled > 0 {
            let take = (64 - self.filled).min(bytes.len());
            self.block[self.filled..self.filled + take].copy_from_slice(&bytes[..take]);
            self.filled += take;
            bytes = &bytes[take..];
            if self.filled < 64 {
                return;
            }
            let block = self.block;
            self.compress(&block);
            self.filled = 0;
        }
        let mut blocks = bytes.chunks_exact(64);
        for block in &mut blocks {
            self.compress(block.try_into().unwrap_or(&[0; 64]));
        }
        let rest = blocks.remainder();
        self.block[..rest.len()].copy_from_slice(rest);
        self.filled = rest.len();
    }

    pub fn finish(mut self) -> [u8; 20] {
        let bits = self.length.wrapping_mul(8);
        let mut pad = vec![0x80u8];
        let after = (self.filled + 1) % 64;
        pad.resize(1 + if after <= 56 { 56 - after } else { 120 - after }, 0);
        pad.extend_from_slice(&bits.to_be_bytes());
        let length = self.length;
        self.update(&pad);
        self.length = length;
        let mut out = [0u8; 20];
        for (o, s) in out.chunks_exact_mut(4).zip(self.state) {
            o.copy_from_slice(&s.to_be_bytes());
        }
        out
    }

    fn compress(&mut self, block: &[u8; 64]) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = self.state;
        for (i, &wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5a82_7999),
                20..=39 => (b ^ c ^ d, 0x6ed9_eba1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8f1b_bcdc),
                _ => (b ^ c ^ d, 0xca62_c1d6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (s, v) in self.state.iter_mut().zip([a, b, c, d, e]) {
            *s = s.wrapping_add(v);
        }
    }
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

    fn sha1_hex(bytes: &[u8]) -> String {
        let mut h = Sha1::new();
        h.update(bytes);
        hex(&h.finish())
    }

    #[test]
    fn sha1_matches_the_standard_vectors_in_any_split() {
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(sha1_hex(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        let long = b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        assert_eq!(sha1_hex(long), "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
        let million = vec![b'a'; 1_000_000];
        assert_eq!(
            sha1_hex(&million),
            "34aa973cd4c4daa4f61eeb2bdbad27316534016f"
        );
        for split in [1, 55, 56, 63, 64, 65, 127] {
            let mut h = Sha1::new();
            for part in million[..1000].chunks(split) {
                h.update(part);
            }
            assert_eq!(
                hex(&h.finish()),
                sha1_hex(&million[..1000]),
                "split {split}"
            );
        }
    }

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
