//! The files of a model directory beside its weights — `config.json`, the tokenizer's files,
//! chat templates, the companions a conversion copies — read only where they resolve inside
//! the directory.
//!
//! A model directory is often someone else's (downloaded, unpacked, shared), and any of its
//! files may be a symlink. One named `chat_template.jinja` that points at `/proc/self/environ`
//! or `~/.aws/credentials` would otherwise be embedded in a GGUF, or copied into a converted
//! directory, the one people upload. So every such file, after every symlink:
//!
//! - resolves inside the directory, or, for a snapshot of the Hugging Face cache
//!   (`models--org--name/snapshots/<commit>/`, whose files are relative symlinks into
//!   `../../blobs/`), inside its repository folder `models--org--name`; or is a blob of a
//!   Hugging Face cache (`…/models--org--name/blobs/<hash>`: `huggingface_hub` links a
//!   `local_dir` download's large files there);
//! - never resolves into `/proc`, `/sys` or `/dev` (but `/dev/shm`, a RAM disk), whatever the
//!   directory: those files claim to be regular and read without end, or read secrets;
//! - is a regular file, opened without following a symlink put in its place after the check
//!   (`O_NOFOLLOW` on the resolved path) and without blocking (a FIFO), and read with a cap.
//!
//! A file outside is ERR_UNSAFE_PATH naming where it leads; a FIFO, socket, device or
//! directory inside is ERR_INVALID_ARGUMENT (as for every reader, [`fsutil::open_regular`]);
//! a symlink to nothing is ERR_NOT_FOUND saying so. A file the caller can do without
//! ([`ModelFiles::open_optional`]) is skipped instead, with a warning the caller passes on
//! ([`ModelFiles::take_warnings`]).

use crate::error::{CoreError, ErrorKind, Result};
use crate::fsutil;
use std::cell::RefCell;
use std::fs::File;
use std::path::{Path, PathBuf};

/// The folders of the Hugging Face cache that hold one repository each.
const HUB_REPO_PREFIXES: [&str; 3] = ["models--", "datasets--", "spaces--"];

/// Where no file of a model is ever read from (`/dev/shm` excepted: see the module docs).
const SYSTEM_DIRS: [&str; 3] = ["/proc", "/sys", "/dev"];

/// The files of one model directory (see the module documentation).
#[derive(Debug)]
pub struct ModelFiles {
    dir: PathBuf,
    /// Where its files may resolve: the directory after symlinks, or the repository folder of
    /// a Hugging Face cache snapshot.
    root: PathBuf,
    /// Files skipped by [`ModelFiles::open_optional`], as warnings.
    skipped: RefCell<Vec<String>>,
}

/// An open file of a model directory.
#[derive(Debug)]
pub struct Opened {
    pub file: File,
    /// Its size when opened.
    pub len: u64,
    /// Its path in the directory (for messages).
    pub path: PathBuf,
}

impl Opened {
    /// The whole file, at most `cap` bytes (`too_large(bytes seen)` past it).
    pub fn read(self, cap: u64, too_large: impl FnOnce(u64) -> CoreError) -> Result<Vec<u8>> {
        if self.len > cap {
            return Err(too_large(self.len));
        }
        fsutil::read_capped(self.file, self.len, &self.path, cap, too_large)
    }
}

impl ModelFiles {
    /// The files of `dir` (which must exist).
    pub fn new(dir: &Path) -> Result<ModelFiles> {
        let real = std::fs::canonicalize(dir).map_err(|e| CoreError::io(e, dir))?;
        let root = hub_repo_of(&real).unwrap_or(real);
        Ok(ModelFiles {
            dir: dir.to_path_buf(),
            root,
            skipped: RefCell::default(),
        })
    }

    /// The directory, as given.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `name` (a relative path) in the directory, as given.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Whether the directory has an entry `name`, of any kind (a dangling symlink too): what
    /// tells a file that is absent from one that is there but refused.
    pub fn has(&self, name: &str) -> bool {
        std::fs::symlink_metadata(self.path(name)).is_ok()
    }

    /// Open `name` (a relative path the caller has checked, [`crate::pretrained::safe_join`])
    /// for reading, `what` it should be naming it in errors: `None` when the directory has no
    /// such entry; an error when it has one that may not be read (see the module docs).
    pub fn open(&self, name: &str, what: &str) -> Result<Option<Opened>> {
        let path = self.path(name);
        match std::fs::symlink_metadata(&path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(CoreError::io(e, &path)),
        }
        let real = match std::fs::canonicalize(&path) {
            Ok(real) => real,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let target = std::fs::read_link(&path)
                    .map(|t| format!(" ({})", t.display()))
                    .unwrap_or_default();
                return Err(CoreError::not_found(format!(
                    "is a symlink to nothing{target}, not {what}"
                ))
                .with_path(&path));
            }
            Err(e) => return Err(CoreError::io(e, &path)),
        };
        self.check_inside(&real, what)
            .map_err(|e| e.with_path(&path))?;
        // Errors name the file as the directory has it, not where it resolved.
        let (file, meta) = fsutil::open_regular_no_follow(&real, what)
            .map_err(|e| CoreError::new(e.kind(), e.detail()).with_path(&path))?;
        Ok(Some(Opened {
            file,
            len: meta.len(),
            path,
        }))
    }

    /// [`open`](Self::open) for a file the caller needs: absent is ERR_NOT_FOUND.
    pub fn open_required(&self, name: &str, what: &str) -> Result<Opened> {
        self.open(name, what)?.ok_or_else(|| {
            CoreError::not_found(format!("no such file ({what})")).with_path(self.path(name))
        })
    }

    /// [`open`](Self::open) for a file the caller can do without: one that may not be read is
    /// skipped as if absent, with a warning ([`take_warnings`](Self::take_warnings)). Other
    /// failures (I/O) are errors.
    pub fn open_optional(&self, name: &str, what: &str) -> Result<Option<Opened>> {
        match self.open(name, what) {
            Err(e) if is_refusal(&e) => {
                let warning = format!("{e}: skipped");
                let mut skipped = self.skipped.borrow_mut();
                if !skipped.contains(&warning) {
                    skipped.push(warning);
                }
                Ok(None)
            }
            other => other,
        }
    }

    /// The warnings of the files [`open_optional`](Self::open_optional) skipped so far (each
    /// once), taken.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut self.skipped.borrow_mut())
    }

    /// ERR_UNSAFE_PATH unless `real` (a file's resolved path) may be read.
    fn check_inside(&self, real: &Path, what: &str) -> Result<()> {
        if is_system(real) {
            return Err(CoreError::unsafe_path(format!(
                "resolves to {}, not {what}: nothing in /proc, /sys or /dev is read as a file of \
                 a model",
                real.display()
            )));
        }
        if !real.starts_with(&self.root) && !is_hub_blob(real) {
            return Err(CoreError::unsafe_path(format!(
                "resolves to {}, outside the model directory {}: the files of a model directory \
                 are read only where they resolve inside it",
                real.display(),
                self.root.display()
            )));
        }
        Ok(())
    }
}

/// Whether [`ModelFiles::open`] refused the file (rather than failed to read it).
fn is_refusal(e: &CoreError) -> bool {
    matches!(
        e.kind(),
        ErrorKind::UnsafePath | ErrorKind::InvalidArgument | ErrorKind::NotFound
    )
}

/// The repository folder (`…/models--org--name`) of a resolved path inside one of its
/// snapshots (`…/models--org--name/snapshots/<commit>/…`).
fn hub_repo_of(real: &Path) -> Option<PathBuf> {
    real.ancestors()
        .zip(real.ancestors().skip(1))
        .find(|(snapshots, repo)| {
            snapshots.file_name().is_some_and(|n| n == "snapshots")
                && snapshots != &real
                && is_hub_repo(repo)
        })
        .map(|(_, repo)| repo.to_path_buf())
}

/// Whether `dir` is named as a repository folder of the Hugging Face cache.
fn is_hub_repo(dir: &Path) -> bool {
    dir.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| HUB_REPO_PREFIXES.iter().any(|p| n.starts_with(p)))
}

/// Whether `real` is a blob of a Hugging Face cache: `…/models--org--name/blobs/<name>`.
fn is_hub_blob(real: &Path) -> bool {
    let blobs = real.parent();
    blobs.is_some_and(|b| b.file_name().is_some_and(|n| n == "blobs"))
        && blobs.and_then(Path::parent).is_some_and(is_hub_repo)
}

/// Whether `real` is in `/proc`, `/sys` or `/dev` (`/dev/shm` is a RAM disk of regular files).
fn is_system(real: &Path) -> bool {
    SYSTEM_DIRS.iter().any(|d| real.starts_with(d)) && !real.starts_with("/dev/shm")
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn read(files: &ModelFiles, name: &str) -> Result<Option<Vec<u8>>> {
        files
            .open(name, "a test file")?
            .map(|f| f.read(1 << 20, |n| CoreError::invalid_model(format!("{n} bytes"))))
            .transpose()
    }

    fn refused(files: &ModelFiles, name: &str, code: &str, says: &str) {
        let e = read(files, name).unwrap_err();
        assert_eq!(e.code(), code, "{name}: {e}");
        assert!(e.detail().contains(says), "{name}: {e}");
        // Named as the directory has it.
        assert_eq!(
            e.path(),
            Some(files.path(name).display().to_string().as_str())
        );
    }

    /// A FIFO at `path` (no process ever opens it for writing).
    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn files_resolving_outside_or_into_the_system_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("model");
        fs::create_dir_all(dir.join("sub")).unwrap();
        fs::write(dir.join("config.json"), b"{}").unwrap();
        fs::write(tmp.path().join("secret"), b"AWS_SECRET_ACCESS_KEY=x").unwrap();
        symlink("config.json", dir.join("inner")).unwrap();
        symlink("../config.json", dir.join("sub/up")).unwrap();
        symlink(tmp.path().join("secret"), dir.join("secret.json")).unwrap();
        symlink("../secret", dir.join("relative.json")).unwrap();
        symlink("/proc/self/environ", dir.join("environ.jinja")).unwrap();
        symlink("/proc/self/pagemap", dir.join("pagemap.json")).unwrap();
        symlink("/dev/zero", dir.join("zero.json")).unwrap();
        symlink("/sys/kernel/mm", dir.join("sys.json")).unwrap();
        symlink("missing", dir.join("dangling.json")).unwrap();
        mkfifo(&dir.join("fifo.json"));
        let files = ModelFiles::new(&dir).unwrap();
        assert_eq!(read(&files, "config.json").unwrap().unwrap(), b"{}");
        assert_eq!(read(&files, "inner").unwrap().unwrap(), b"{}");
        assert_eq!(read(&files, "sub/up").unwrap().unwrap(), b"{}");
        assert!(read(&files, "absent.json").unwrap().is_none());
        assert!(!files.has("absent.json") && files.has("dangling.json"));
        for name in ["secret.json", "relative.json"] {
            refused(
                &files,
                name,
                "ERR_UNSAFE_PATH",
                "outside the model directory",
            );
        }
        for name in ["environ.jinja", "pagemap.json", "zero.json", "sys.json"] {
            refused(
                &files,
                name,
                "ERR_UNSAFE_PATH",
                "nothing in /proc, /sys or /dev",
            );
        }
        refused(
            &files,
            "fifo.json",
            "ERR_INVALID_ARGUMENT",
            "is not a regular file",
        );
        refused(&files, "sub", "ERR_INVALID_ARGUMENT", "is a directory");
        refused(
            &files,
            "dangling.json",
            "ERR_NOT_FOUND",
            "is a symlink to nothing (missing)",
        );
        let e = files.open_required("absent.json", "x").unwrap_err();
        assert_eq!(e.code(), "ERR_NOT_FOUND");
        // The same directory through a symlink to it: the same rules.
        symlink(&dir, tmp.path().join("alias")).unwrap();
        let alias = ModelFiles::new(&tmp.path().join("alias")).unwrap();
        assert_eq!(read(&alias, "inner").unwrap().unwrap(), b"{}");
        refused(&alias, "secret.json", "ERR_UNSAFE_PATH", "outside");
    }

    #[test]
    fn optional_files_that_may_not_be_read_are_skipped_with_one_warning_each() {
        let tmp = tempfile::tempdir().unwrap();
        symlink("/proc/self/environ", tmp.path().join("chat_template.jinja")).unwrap();
        let files = ModelFiles::new(tmp.path()).unwrap();
        for _ in 0..2 {
            assert!(files
                .open_optional("chat_template.jinja", "a chat template")
                .unwrap()
                .is_none());
        }
        assert!(files.open_optional("absent", "x").unwrap().is_none());
        let warnings = files.take_warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("chat_template.jinja"), "{warnings:?}");
        assert!(warnings[0].contains("/proc/self/environ") || warnings[0].contains("/proc/"));
        assert!(warnings[0].ends_with("skipped"), "{warnings:?}");
        assert!(files.take_warnings().is_empty());
    }

    /// `models--org--name/snapshots/<commit>/` links into `../../blobs/`, which is inside its
    /// repository folder; a `local_dir` download links into some cache's `blobs/`.
    #[test]
    fn hugging_face_cache_blobs_are_inside() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("hub/models--org--name");
        let snapshot = repo.join("snapshots/0123abcd");
        fs::create_dir_all(snapshot.join("1_Pooling")).unwrap();
        fs::create_dir_all(repo.join("blobs")).unwrap();
        fs::write(repo.join("blobs/aa11"), b"tokenizer").unwrap();
        symlink("../../blobs/aa11", snapshot.join("tokenizer.json")).unwrap();
        symlink(
            "../../../blobs/aa11",
            snapshot.join("1_Pooling/config.json"),
        )
        .unwrap();
        let other = tmp.path().join("hub/models--other--model/blobs");
        fs::create_dir_all(&other).unwrap();
        fs::write(other.join("bb22"), b"other").unwrap();
        fs::write(tmp.path().join("hub/secret"), b"x").unwrap();
        symlink("../../../secret", snapshot.join("secret.json")).unwrap();
        let files = ModelFiles::new(&snapshot).unwrap();
        assert_eq!(
            read(&files, "tokenizer.json").unwrap().unwrap(),
            b"tokenizer"
        );
        assert_eq!(
            read(&files, "1_Pooling/config.json").unwrap().unwrap(),
            b"tokenizer"
        );
        refused(&files, "secret.json", "ERR_UNSAFE_PATH", "outside");
        // A local directory some of whose files link into a cache's blobs.
        let local = tmp.path().join("local");
        fs::create_dir_all(&local).unwrap();
        symlink(other.join("bb22"), local.join("tokenizer.json")).unwrap();
        symlink(tmp.path().join("hub/secret"), local.join("secret.json")).unwrap();
        let files = ModelFiles::new(&local).unwrap();
        assert_eq!(read(&files, "tokenizer.json").unwrap().unwrap(), b"other");
        refused(&files, "secret.json", "ERR_UNSAFE_PATH", "outside");
        // The root of a snapshot is its repository, not the whole cache.
        assert_eq!(hub_repo_of(&snapshot.join("sub")), Some(repo.clone()));
        assert_eq!(hub_repo_of(&repo.join("snapshots")), None);
        assert_eq!(hub_repo_of(&local), None);
    }

    #[test]
    fn a_file_over_its_cap_is_refused_before_it_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        let big = fs::File::create(tmp.path().join("big")).unwrap();
        big.set_len(1 << 40).unwrap();
        let files = ModelFiles::new(tmp.path()).unwrap();
        let e = read(&files, "big").unwrap_err();
        assert_eq!(e.detail(), "1099511627776 bytes");
    }
}
