//! Writing into the Hugging Face cache exactly as huggingface_hub does (its
//! `file_download.py`), so that it, `Model.loadPretrained` and every other reader of the
//! cache find what a download put there:
//!
//! ```text
//! <cache>/models--org--name/blobs/<etag>                  the bytes, renamed into place once checked
//!                          /blobs/<etag>.incomplete       a download under way (resumed from its length)
//!                          /snapshots/<commit>/<path>     a relative symlink: ../../blobs/<etag>
//!                          /refs/<revision>               the commit, 40 hex digits, no newline
//! <cache>/.locks/models--org--name/<etag>.lock            held (flock) while a blob downloads
//! ```
//!
//! A blob lands only after its hash was checked against its name; a symlink only once its
//! blob is there (never dangling); a ref only once its snapshot is complete. Each is made
//! under a temporary name and renamed into place, so a crash leaves the old state or the new,
//! and a download killed half-way leaves nothing but its `.incomplete` file.

use super::hash::{hash_reader, HashKind, Hasher};
use crate::error::{CoreError, ErrorKind, Result};
use crate::fsutil::{self, Durability};
use crate::pretrained::hub::{check_model_id, check_revision, is_commit_hash, repo_folder};
use crate::pretrained::layout::check_shard_name;
use std::fs::{self, File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// One model's folder of the cache.
#[derive(Debug, Clone)]
pub struct RepoCache {
    cache: PathBuf,
    repo: PathBuf,
    id: String,
    folder: String,
}

/// ERR_INVALID_ARGUMENT unless `etag` names a blob (40 or 64 lowercase hex digits).
fn blob_kind(etag: &str) -> Result<HashKind> {
    HashKind::of_etag(etag).ok_or_else(|| {
        CoreError::invalid_argument(format!(
            "{:?} names no blob (40 or 64 lowercase hex digits)",
            crate::names::printable(etag)
        ))
    })
}

impl RepoCache {
    /// The folder of model `id` (checked) in the cache at `cache`.
    pub fn new(cache: &Path, id: &str) -> Result<RepoCache> {
        check_model_id(id)?;
        let folder = repo_folder(id);
        Ok(RepoCache {
            cache: cache.to_path_buf(),
            repo: cache.join(&folder),
            id: id.to_string(),
            folder,
        })
    }

    /// `<cache>/models--org--name`.
    pub fn dir(&self) -> &Path {
        &self.repo
    }

    pub fn blob_path(&self, etag: &str) -> Result<PathBuf> {
        blob_kind(etag)?;
        Ok(self.repo.join("blobs").join(etag))
    }

    /// `snapshots/<commit>` (the commit checked).
    pub fn snapshot_dir(&self, commit: &str) -> Result<PathBuf> {
        if !is_commit_hash(commit) {
            return Err(CoreError::invalid_argument(format!(
                "{:?} is not a commit hash",
                crate::names::printable(commit)
            )));
        }
        Ok(self.repo.join("snapshots").join(commit))
    }

    /// Whether blob `etag` is there: a regular file (not followed through a symlink) of
    /// `size` bytes when the size is known. A file of another size is a damaged blob, which a
    /// download replaces.
    pub fn has_blob(&self, etag: &str, size: Option<u64>) -> Result<bool> {
        let path = self.blob_path(etag)?;
        Ok(match fs::symlink_metadata(&path) {
            Ok(m) => m.is_file() && size.is_none_or(|s| s == m.len()),
            Err(_) => false,
        })
    }

    /// The commit `revision` names in `refs/`, if the cache has it and its snapshot directory
    /// exists (a commit hash names itself).
    pub fn cached_commit(&self, revision: &str) -> Result<Option<String>> {
        check_revision(revision)?;
        let found = crate::pretrained::hub::find_cached(&self.cache, &self.id, revision)?;
        Ok(found
            .commit
            .filter(|c| self.repo.join("snapshots").join(c).is_dir()))
    }

    /// Point `snapshots/<commit>/<path>` at blob `etag` (which must be there), with a
    /// relative symlink as huggingface_hub makes them (`../../blobs/<etag>`, one `../` more
    /// per directory of `path`). A link already pointing there is left; anything else at the
    /// name is replaced, atomically. The directories on the way are created, and each one
    /// that exists must be a real directory (a symlink planted there could lead the link
    /// anywhere).
    pub fn link(&self, commit: &str, path: &str, etag: &str) -> Result<PathBuf> {
        check_shard_name(path)?;
        let blob = self.blob_path(etag)?;
        if !fs::symlink_metadata(&blob).is_ok_and(|m| m.is_file()) {
            return Err(CoreError::not_found(format!(
                "blob {etag} is not in the cache: a file is linked only once its blob is there"
            ))
            .with_path(&blob));
        }
        let snapshot = self.snapshot_dir(commit)?;
        let parts: Vec<&str> = path.split('/').collect();
        let mut dir = snapshot.clone();
        self.real_dirs(&snapshot)?;
        for part in &parts[..parts.len() - 1] {
            dir.push(part);
            make_real_dir(&dir)?;
        }
        let pointer = dir.join(parts[parts.len() - 1]);
        let target: PathBuf = std::iter::repeat_n("..", parts.len() + 1)
            .collect::<PathBuf>()
            .join("blobs")
            .join(etag);
        if fs::read_link(&pointer).is_ok_and(|t| t == target) {
            return Ok(pointer);
        }
        let tmp = dir.join(format!(
            ".{}.{}.{:016x}.tmp",
            parts[parts.len() - 1],
            std::process::id(),
            fsutil::random_u64()
        ));
        symlink(&target, &tmp).map_err(|e| CoreError::io(e, &tmp))?;
        if let Err(e) = fs::rename(&tmp, &pointer) {
            let _ = fs::remove_file(&tmp);
            return Err(CoreError::io(e, &pointer));
        }
        Ok(pointer)
    }

    /// `refs/<revision>` ← `commit` (atomically; nothing when the revision is the commit,
    /// as huggingface_hub does).
    pub fn write_ref(&self, revision: &str, commit: &str) -> Result<()> {
        check_revision(revision)?;
        self.snapshot_dir(commit)?;
        if revision == commit {
            return Ok(());
        }
        let path = revision
            .split('/')
            .fold(self.repo.join("refs"), |p, part| p.join(part));
        if let Some(parent) = path.parent() {
            self.real_dirs(parent)?;
        }
        fsutil::write_atomic(&path, Durability::RenameOnly, |w| {
            fsutil::write_all(w, commit.as_bytes(), &path)
        })
    }

    /// Create `dir` (under the repository folder) and every directory on the way; each one
    /// that already exists must be a directory itself, not a symlink to one.
    fn real_dirs(&self, dir: &Path) -> Result<()> {
        let rel = dir.strip_prefix(&self.cache).map_err(|_| {
            CoreError::invalid_argument("a cache path outside the cache").with_path(dir)
        })?;
        let mut at = self.cache.clone();
        fs::create_dir_all(&at).map_err(|e| CoreError::io(e, &at))?;
        for part in rel.components() {
            at.push(part);
            make_real_dir(&at)?;
        }
        Ok(())
    }

    /// Start (or resume) writing blob `etag` of `size` bytes. `None` when another download
    /// (this process's or another's, huggingface_hub's included: the same lock file) holds
    /// the blob's lock: the caller waits and asks again (the blob may be there by then).
    pub fn open_blob(&self, etag: &str, size: u64) -> Result<Option<BlobWriter>> {
        let kind = blob_kind(etag)?;
        let blob = self.blob_path(etag)?;
        self.real_dirs(&self.repo.join("blobs"))?;
        let locks = self.cache.join(".locks").join(&self.folder);
        self.real_dirs(&locks)?;
        let Some(lock) = Lock::try_acquire(&locks.join(format!("{etag}.lock")))? else {
            return Ok(None);
        };
        let incomplete = self.repo.join("blobs").join(format!("{etag}.incomplete"));
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
        }
        let mut file = options
            .open(&incomplete)
            .map_err(|e| CoreError::io(e, &incomplete))?;
        let meta = file.metadata().map_err(|e| CoreError::io(e, &incomplete))?;
        if !meta.is_file() {
            return Err(CoreError::invalid_argument("is not a regular file").with_path(&incomplete));
        }
        let mut hasher = Hasher::new(kind, size);
        // What an earlier download left is the blob's start (the name is its hash): hashed
        // again here, then continued. More bytes than the blob has is no such start.
        let mut have = meta.len();
        if have > size {
            file.set_len(0).map_err(|e| CoreError::io(e, &incomplete))?;
            have = 0;
        }
        if have > 0 {
            file.seek(SeekFrom::Start(0))
                .map_err(|e| CoreError::io(e, &incomplete))?;
            hash_reader(&mut file, have, &mut hasher, &incomplete)?;
        }
        Ok(Some(BlobWriter {
            file,
            incomplete,
            blob,
            etag: etag.to_string(),
            size,
            written: have,
            resumed: have,
            hasher,
            _lock: lock,
        }))
    }
}

/// Make `dir` unless it exists; an existing entry must be a directory, not followed.
fn make_real_dir(dir: &Path) -> Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(CoreError::unsafe_path(
            "is in the cache's layout but is not a directory (a symlink or a file): it is not \
             written through",
        )
        .with_path(dir)),
        Err(_) => match fs::create_dir(dir) {
            Ok(()) => Ok(()),
            // Made by a concurrent download in between.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => make_real_dir(dir),
            Err(e) => Err(CoreError::io(e, dir)),
        },
    }
}

#[cfg(unix)]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

#[cfg(windows)]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::windows::fs::symlink_file(target, link)
}

/// An exclusive advisory lock (`flock`), the one huggingface_hub's `filelock` takes on the
/// same file: held until dropped.
struct Lock {
    _file: File,
}

impl Lock {
    /// The lock on `path`, or `None` when someone else holds it.
    fn try_acquire(path: &Path) -> Result<Option<Lock>> {
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options
                .mode(0o644)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
        }
        let file = options.open(path).map_err(|e| CoreError::io(e, path))?;
        #[cfg(unix)]
        {
            use std::os::unix::io::AsRawFd;
            // SAFETY: a valid open file descriptor; flock only sets an advisory lock on it.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let e = std::io::Error::last_os_error();
                return if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                    Ok(None)
                } else {
                    Err(CoreError::io(e, path))
                };
            }
        }
        Ok(Some(Lock { _file: file }))
    }
}

/// A blob being downloaded: its bytes appended to `<etag>.incomplete` and hashed as they
/// come; renamed to `<etag>` by [`BlobWriter::finish`] only if the hash is its name.
pub struct BlobWriter {
    file: File,
    incomplete: PathBuf,
    blob: PathBuf,
    etag: String,
    size: u64,
    written: u64,
    resumed: u64,
    hasher: Hasher,
    _lock: Lock,
}

impl BlobWriter {
    /// Bytes the `.incomplete` file held when the writer opened (checked as the blob's start
    /// when it finishes): the download continues from there.
    pub fn resumed(&self) -> u64 {
        self.resumed
    }

    /// Bytes of the blob written so far (resumed ones included).
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Append `bytes`; more than the blob's size is ERR_IO and nothing is written.
    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        if self.written + bytes.len() as u64 > self.size {
            return Err(CoreError::new(
                ErrorKind::Io,
                format!(
                    "the server sent more than the {} bytes of the file announced",
                    self.size
                ),
            )
            .with_path(&self.incomplete));
        }
        self.file
            .write_all(bytes)
            .map_err(|e| CoreError::io(e, &self.incomplete))?;
        self.hasher.update(bytes);
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Check the whole blob against its name and rename it into place; its path. A blob of
    /// the wrong size is ERR_INCOMPLETE_FILE (the `.incomplete` file is kept, to resume); one
    /// whose hash is not its name is ERR_HASH_MISMATCH and the `.incomplete` file is removed
    /// (its bytes are not the blob's: resuming from them would fail again).
    pub fn finish(self) -> Result<PathBuf> {
        if self.written != self.size {
            return Err(CoreError::incomplete_file(format!(
                "{} of the {} bytes of the file were written",
                self.written, self.size
            ))
            .with_path(&self.incomplete));
        }
        let actual = self.hasher.clone().finish_hex();
        if actual != self.etag {
            let _ = fs::remove_file(&self.incomplete);
            return Err(CoreError::new(
                ErrorKind::HashMismatch,
                format!(
                    "the downloaded bytes hash to {actual}, not to {} as the Hub published: \
                     nothing was put in the cache",
                    self.etag
                ),
            )
            .with_path(&self.blob));
        }
        fs::rename(&self.incomplete, &self.blob).map_err(|e| CoreError::io(e, &self.blob))?;
        Ok(self.blob)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::hash::hex;
    use sha2::Digest;

    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

    fn sha256(bytes: &[u8]) -> String {
        hex(&sha2::Sha256::digest(bytes))
    }

    #[test]
    fn blobs_land_checked_and_resume_from_their_incomplete_file() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = RepoCache::new(tmp.path(), "org/name").unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let etag = sha256(&data);
        let mut w = repo.open_blob(&etag, data.len() as u64).unwrap().unwrap();
        assert_eq!(w.resumed(), 0);
        // The lock is held: a second writer waits.
        assert!(repo.open_blob(&etag, data.len() as u64).unwrap().is_none());
        w.write(&data[..40_000]).unwrap();
        drop(w); // interrupted: the .incomplete file stays, the lock goes
        assert!(!repo.has_blob(&etag, None).unwrap());
        let mut w = repo.open_blob(&etag, data.len() as u64).unwrap().unwrap();
        assert_eq!(w.resumed(), 40_000);
        assert_eq!(
            w.write(&vec![0; 60_001]).unwrap_err().code(),
            "ERR_IO",
            "past the size"
        );
        w.write(&data[40_000..]).unwrap();
        let blob = w.finish().unwrap();
        assert_eq!(fs::read(&blob).unwrap(), data);
        assert!(repo.has_blob(&etag, Some(100_000)).unwrap());
        assert!(!repo.has_blob(&etag, Some(99_999)).unwrap());
        let link = repo
            .link(COMMIT, "sub/dir/model.safetensors", &etag)
            .unwrap();
        assert_eq!(
            fs::read_link(&link).unwrap(),
            PathBuf::from(format!("../../../../blobs/{etag}"))
        );
        assert_eq!(fs::read(&link).unwrap(), data);
        // Again: left as it is; replaced when it pointed elsewhere.
        repo.link(COMMIT, "sub/dir/model.safetensors", &etag)
            .unwrap();
        let top = repo.link(COMMIT, "model.safetensors", &etag).unwrap();
        assert_eq!(
            fs::read_link(&top).unwrap(),
            PathBuf::from(format!("../../blobs/{etag}"))
        );
        repo.write_ref("main", COMMIT).unwrap();
        repo.write_ref("refs/pr/1", COMMIT).unwrap();
        assert_eq!(
            fs::read_to_string(repo.dir().join("refs/main")).unwrap(),
            COMMIT
        );
        assert_eq!(
            fs::read_to_string(repo.dir().join("refs/refs/pr/1")).unwrap(),
            COMMIT
        );
        assert_eq!(repo.cached_commit("main").unwrap().as_deref(), Some(COMMIT));
        assert_eq!(repo.cached_commit("v2").unwrap(), None);
    }

    #[test]
    fn a_wrong_hash_lands_nothing_and_a_missing_blob_is_never_linked() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = RepoCache::new(tmp.path(), "org/name").unwrap();
        let etag = sha256(b"the real bytes");
        let mut w = repo.open_blob(&etag, 14).unwrap().unwrap();
        w.write(b"the fake bytes").unwrap();
        let e = w.finish().unwrap_err();
        assert_eq!(e.code(), "ERR_HASH_MISMATCH");
        assert!(e.detail().contains("nothing was put in the cache"), "{e}");
        let blobs: Vec<_> = fs::read_dir(repo.dir().join("blobs")).unwrap().collect();
        assert!(
            blobs.is_empty(),
            "neither the blob nor its .incomplete file"
        );
        let short = repo.open_blob(&etag, 14).unwrap().unwrap();
        assert_eq!(short.finish().unwrap_err().code(), "ERR_INCOMPLETE_FILE");
        let e = repo.link(COMMIT, "model.safetensors", &etag).unwrap_err();
        assert_eq!(e.code(), "ERR_NOT_FOUND");
        assert!(!repo
            .snapshot_dir(COMMIT)
            .unwrap()
            .join("model.safetensors")
            .exists());
        // Names that would leave the cache, and a symlinked directory on the way.
        assert_eq!(
            repo.link(COMMIT, "../x", &etag).unwrap_err().code(),
            "ERR_UNSAFE_PATH"
        );
        assert_eq!(
            repo.blob_path("../../x").unwrap_err().code(),
            "ERR_INVALID_ARGUMENT"
        );
        assert_eq!(
            repo.write_ref("../x", COMMIT).unwrap_err().code(),
            "ERR_INVALID_ARGUMENT"
        );
        #[cfg(unix)]
        {
            let data = b"x";
            let etag = sha256(data);
            let mut w = repo.open_blob(&etag, 1).unwrap().unwrap();
            w.write(data).unwrap();
            w.finish().unwrap();
            let elsewhere = tmp.path().join("elsewhere");
            fs::create_dir(&elsewhere).unwrap();
            fs::create_dir_all(repo.snapshot_dir(COMMIT).unwrap()).unwrap();
            std::os::unix::fs::symlink(&elsewhere, repo.snapshot_dir(COMMIT).unwrap().join("sub"))
                .unwrap();
            let e = repo.link(COMMIT, "sub/file", &etag).unwrap_err();
            assert_eq!(e.code(), "ERR_UNSAFE_PATH");
            assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
        }
    }
}
