//! File-system helpers shared by every reader and writer (the whole module is the `fs`
//! feature's).

use crate::error::{CoreError, Result};
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// 64 bits from the operating system's random source (`getrandom` on Linux), for names
/// nobody can predict. Elsewhere, and if the call fails, std's per-process random SipHash
/// keys stand in (seeded from the OS too).
pub fn random_u64() -> u64 {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let mut bytes = [0u8; 8];
        // SAFETY: writes at most 8 bytes into `bytes`.
        let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
        if n == 8 {
            return u64::from_ne_bytes(bytes);
        }
    }
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// `.NAME.PID.RANDOM.tmp` beside `path`: the PID says which process left a file behind, the
/// 64 random bits make the name unpredictable (see [`create_temp`]).
fn temp_path_for(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".to_string());
    path.with_file_name(format!(
        ".{name}.{}.{:016x}.tmp",
        std::process::id(),
        random_u64()
    ))
}

/// Create a new temporary file beside `path`, exclusively: `O_CREAT | O_EXCL | O_NOFOLLOW`,
/// so a file or symlink already at the name (planted there, or another writer's) is never
/// opened, truncated or followed; the name is drawn again instead. Mode 0666 before the
/// umask, as `File::create`.
pub fn create_temp(path: &Path) -> Result<(File, PathBuf)> {
    create_temp_named(path, || temp_path_for(path))
}

/// [`create_temp`] drawing its names from `next_name` (tests give it colliding ones).
fn create_temp_named(
    path: &Path,
    mut next_name: impl FnMut() -> PathBuf,
) -> Result<(File, PathBuf)> {
    let mut last = None;
    for _ in 0..16 {
        let tmp = next_name();
        let mut options = fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options
                .mode(0o666)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
        }
        match options.open(&tmp) {
            Ok(file) => return Ok((file, tmp)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(CoreError::io(e, path)),
        }
    }
    Err(CoreError::io(
        last.unwrap_or_else(|| std::io::Error::other("no free temporary name")),
        path,
    ))
}

/// Open a file for reading, refusing anything but a regular file (after symlinks): a
/// directory, FIFO, socket or device is ERR_INVALID_ARGUMENT naming `what` was expected.
/// The open itself is non-blocking, so a FIFO without a writer is refused instead of
/// blocking the calling thread forever (reads of a regular file ignore the flag).
pub fn open_regular(path: &Path, what: &str) -> Result<(File, fs::Metadata)> {
    open_regular_flags(path, what, 0)
}

/// [`open_regular`] of a path already resolved (no symlink in it): its last component is
/// opened with `O_NOFOLLOW`, so a symlink put in its place after the resolution is refused
/// (ERR_IO, `ELOOP`), never followed.
pub fn open_regular_no_follow(path: &Path, what: &str) -> Result<(File, fs::Metadata)> {
    #[cfg(unix)]
    return open_regular_flags(path, what, libc::O_NOFOLLOW);
    #[cfg(not(unix))]
    open_regular_flags(path, what, 0)
}

fn open_regular_flags(path: &Path, what: &str, flags: i32) -> Result<(File, fs::Metadata)> {
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | flags);
    }
    #[cfg(not(unix))]
    let _ = flags;
    let file = options.open(path).map_err(|e| CoreError::io(e, path))?;
    let meta = file.metadata().map_err(|e| CoreError::io(e, path))?;
    if meta.is_dir() {
        return Err(
            CoreError::invalid_argument(format!("is a directory, not {what}")).with_path(path),
        );
    }
    if !meta.is_file() {
        return Err(CoreError::invalid_argument(format!(
            "is not a regular file (a FIFO, socket or device), not {what}"
        ))
        .with_path(path));
    }
    Ok((file, meta))
}

/// The whole of a regular file (see [`open_regular`]).
pub fn read_regular(path: &Path, what: &str) -> Result<Vec<u8>> {
    use std::io::Read;
    let (mut file, meta) = open_regular(path, what)?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)
        .map_err(|e| CoreError::io(e, path))?;
    Ok(bytes)
}

/// The whole of a regular file (see [`open_regular`]) of at most `cap` bytes: reading stops
/// at `cap + 1` bytes with the error `too_large(bytes seen)`, whatever size the file
/// claims (files in /proc say 0, or nothing true).
pub fn read_regular_capped(
    path: &Path,
    what: &str,
    cap: u64,
    too_large: impl FnOnce(u64) -> CoreError,
) -> Result<Vec<u8>> {
    let (file, meta) = open_regular(path, what)?;
    read_capped(file, meta.len(), path, cap, too_large)
}

/// The rest of an open `file` (of `len` bytes by its `stat`, named `path` in errors), at most
/// `cap` bytes: see [`read_regular_capped`].
pub fn read_capped(
    mut file: File,
    len: u64,
    path: &Path,
    cap: u64,
    too_large: impl FnOnce(u64) -> CoreError,
) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::with_capacity(usize::try_from(len.min(cap)).unwrap_or(0));
    // Whole 64 KiB reads: some /proc files refuse reads that are not a multiple of 8.
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => return Ok(bytes),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CoreError::io(e, path)),
        };
        if (bytes.len() + n) as u64 > cap {
            return Err(too_large((bytes.len() + n) as u64));
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
}

/// How far a finished write is pushed before a writer returns.
///
/// Every write is atomic either way (temporary file, then rename): a crashed or killed
/// process leaves the complete old file or the complete new one, never a torn one. The
/// default does not `fsync`, like `fs.writeFileSync`, Python's `safetensors` `save_file`,
/// `torch.save` and `numpy.save`: `fsync` costs what the disk costs (often more than the
/// write) and most checkpoints can be written again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Rename without `fsync`. After a power cut or an OS crash the file system may hold the
    /// old file, the new one, or (depending on the file system) an empty file.
    #[default]
    RenameOnly,
    /// `fsync` the temporary file before the rename, and the directory after it: once the
    /// call returns, the new file survives a power cut or an OS crash, and at no moment can
    /// its name point at data not yet on disk.
    Sync,
}

/// How a writer writes: the one options value every writer of the core takes (`save_file`,
/// `save_streaming`, `write_gguf_file`, `save_mlx`, `convert`, the models' `save_*` and
/// `to_*`). The default is what the writers did without options: atomic, no `fsync`, no
/// progress reports.
#[derive(Default)]
pub struct WriteOptions<'p> {
    pub durability: Durability,
    /// Called with (bytes done, bytes in all) as the output is written: after each tensor by
    /// the writers that stream tensors (`save_streaming`, `save_file`: tensor data bytes;
    /// `write_gguf_file`: the GGUF data bytes of each tensor; `convert`: input tensor
    /// bytes, from `(0, total)` on), and once, when the output is complete, by the writers
    /// that write it in one piece.
    pub progress: Option<&'p mut dyn FnMut(u64, u64)>,
}

impl WriteOptions<'_> {
    /// The options with `durability` and no progress reports.
    pub fn with_durability(durability: Durability) -> WriteOptions<'static> {
        WriteOptions {
            durability,
            progress: None,
        }
    }

    /// The default options, reporting progress to `progress`.
    pub fn with_progress(progress: &mut dyn FnMut(u64, u64)) -> WriteOptions<'_> {
        WriteOptions {
            durability: Durability::default(),
            progress: Some(progress),
        }
    }

    /// Report progress, if anyone listens.
    pub fn report(&mut self, done: u64, total: u64) {
        if let Some(p) = self.progress.as_mut() {
            p(done, total)
        }
    }
}

impl std::fmt::Debug for WriteOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteOptions")
            .field("durability", &self.durability)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// Write a file atomically: the bytes go to a temporary file in the same directory, which is
/// then renamed over `path`. Readers (and existing memory maps of the old file) see either
/// the complete old file or the complete new one, never a torn one; on any error the
/// temporary file is removed and `path` is untouched. `durability` says whether the file
/// and the rename are fsynced (see [`Durability`]).
pub fn write_atomic<F>(path: &Path, durability: Durability, write: F) -> Result<()>
where
    F: FnOnce(&mut dyn Write) -> Result<()>,
{
    write_atomic_sized(path, durability, 0, write)
}

/// [`write_atomic`] for a file of at least `min_len` bytes, which are reserved on disk
/// before writing (`fallocate` with `FALLOC_FL_KEEP_SIZE` on Linux: the size still grows
/// only as bytes are written, and nothing is reserved past what the writer writes if
/// `min_len` is a true lower bound). Reserving the extents at once spares the file system a
/// block reservation per page as the writes fill the page cache. Advisory: where it is not
/// supported, nothing changes.
pub fn write_atomic_sized<F>(
    path: &Path,
    durability: Durability,
    min_len: u64,
    write: F,
) -> Result<()>
where
    F: FnOnce(&mut dyn Write) -> Result<()>,
{
    if path.file_name().is_none() {
        return Err(CoreError::invalid_argument("not a file path").with_path(path));
    }
    refuse_non_file_destination(path)?;
    let (file, tmp) = create_temp(path)?;
    let result = (|| {
        preallocate(&file, min_len);
        let mut out = BufWriter::with_capacity(1 << 20, file);
        write(&mut out)?;
        let file = out
            .into_inner()
            .map_err(|e| CoreError::io(e.into_error(), path))?;
        if durability == Durability::Sync {
            file.sync_all().map_err(|e| CoreError::io(e, path))?;
        }
        drop(file);
        fs::rename(&tmp, path).map_err(|e| CoreError::io(e, path))?;
        if durability == Durability::Sync {
            sync_parent_dir(path)?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// The rename would replace whatever `path` names: refuse to replace a directory (the
/// rename would fail with a bare EISDIR) or a FIFO, socket or device (run as root,
/// `saveFile('/dev/null', …)` would put a regular file in place of the device).
fn refuse_non_file_destination(path: &Path) -> Result<()> {
    match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(CoreError::invalid_argument(
            "is a directory: writers need a file path",
        )
        .with_path(path)),
        Ok(meta) if !meta.is_file() => Err(CoreError::invalid_argument(
            "is not a regular file (a FIFO, socket or device): writers replace files by \
             renaming a new one into place, and will not replace this",
        )
        .with_path(path)),
        _ => Ok(()),
    }
}

/// Reserve `len` bytes of `file` on disk without changing its size (see
/// [`write_atomic_sized`]). Errors (a file system without `fallocate`, a full disk) are
/// ignored: the writes that follow report their own.
fn preallocate(file: &File, len: u64) {
    #[cfg(target_os = "linux")]
    if len > 0 {
        use std::os::unix::io::AsRawFd;
        let len = libc::off_t::try_from(len).unwrap_or(libc::off_t::MAX);
        // SAFETY: a valid open file descriptor; the call only reserves blocks.
        unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 0, len) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, len);
}

/// `fs::create_dir_all`; with [`Durability::Sync`], each directory it creates is also
/// fsynced into its parent, top-down, so that the new directory survives a power cut with
/// the files later written into it.
pub fn create_dir_all(dir: &Path, durability: Durability) -> Result<()> {
    if fs::metadata(dir).is_ok_and(|m| !m.is_dir()) {
        return Err(CoreError::invalid_argument("exists and is not a directory").with_path(dir));
    }
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .collect();
    fs::create_dir_all(dir).map_err(|e| CoreError::io(e, dir))?;
    if durability == Durability::Sync {
        for created in missing.iter().rev() {
            sync_parent_dir(created)?;
        }
    }
    Ok(())
}

/// `fsync` the directory holding `path`, so that a rename into it is on disk. Directories
/// cannot be opened as files on Windows, where the rename is journaled by NTFS itself.
fn sync_parent_dir(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    sync_dir(dir)
}

/// `fsync` a directory, so that the entries created, renamed or removed in it are on disk
/// (nothing on Windows, see [`sync_parent_dir`]).
pub fn sync_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| CoreError::io(e, dir))?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// A writer counting the bytes written through it (for the progress reports of writers
/// that do not know their output's size beforehand).
pub struct Counted<'w> {
    inner: &'w mut dyn Write,
    written: u64,
}

impl<'w> Counted<'w> {
    pub fn new(inner: &'w mut dyn Write) -> Counted<'w> {
        Counted { inner, written: 0 }
    }

    /// The bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }
}

impl Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// `write_all` with the error mapped to the destination path.
pub fn write_all(out: &mut dyn Write, bytes: &[u8], path: &Path) -> Result<()> {
    out.write_all(bytes).map_err(|e| CoreError::io(e, path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn replaces_whole_file_and_cleans_up_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.bin");
        write_atomic(&p, Durability::RenameOnly, |w| {
            w.write_all(b"old").unwrap();
            Ok(())
        })
        .unwrap();
        let err = write_atomic(&p, Durability::RenameOnly, |w| {
            w.write_all(b"partial").unwrap();
            Err(CoreError::invalid_argument("boom"))
        })
        .unwrap_err();
        assert_eq!(err.code(), "ERR_INVALID_ARGUMENT");
        assert_eq!(fs::read(&p).unwrap(), b"old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn durable_writes_replace_the_file_too() {
        assert_eq!(Durability::default(), Durability::RenameOnly);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.bin");
        for bytes in [&b"first"[..], b"second"] {
            write_atomic(&p, Durability::Sync, |w| {
                w.write_all(bytes).unwrap();
                Ok(())
            })
            .unwrap();
            assert_eq!(fs::read(&p).unwrap(), bytes);
        }
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    /// A FIFO at `path` (no process ever opens it for writing).
    #[cfg(unix)]
    fn mkfifo(path: &Path) -> PathBuf {
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        path.to_path_buf()
    }

    #[cfg(unix)]
    #[test]
    fn open_regular_refuses_directories_fifos_and_devices_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = mkfifo(&dir.path().join("fifo"));
        for (path, says) in [
            (dir.path(), "is a directory, not a test file"),
            (fifo.as_path(), "is not a regular file"),
            (Path::new("/dev/null"), "is not a regular file"),
        ] {
            // Without a writer, a blocking open of the FIFO would never return.
            let err = open_regular(path, "a test file").unwrap_err();
            assert_eq!(err.code(), "ERR_INVALID_ARGUMENT");
            assert!(err.to_string().contains(says), "{err}");
            assert_eq!(err.path(), Some(path.display().to_string().as_str()));
        }
        let file = dir.path().join("f.bin");
        fs::write(&file, b"bytes").unwrap();
        assert_eq!(read_regular(&file, "a test file").unwrap(), b"bytes");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_regular(&link, "a test file").unwrap(), b"bytes");
        assert_eq!(
            read_regular(&dir.path().join("missing"), "x")
                .unwrap_err()
                .code(),
            "ERR_NOT_FOUND"
        );
    }

    #[cfg(unix)]
    #[test]
    fn writers_refuse_to_replace_directories_fifos_and_devices() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let fifo = mkfifo(&dir.path().join("out.fifo"));
        let sub = dir.path().join("sub");
        fs::create_dir(&sub).unwrap();
        for path in [fifo.as_path(), sub.as_path(), Path::new("/dev/null")] {
            let err = write_atomic(path, Durability::Sync, |w| {
                w.write_all(b"x").unwrap();
                Ok(())
            })
            .unwrap_err();
            assert_eq!(err.code(), "ERR_INVALID_ARGUMENT", "{err}");
        }
        assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
        assert!(fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        let mut left: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, ["out.fifo", "sub"]);
        // A directory to create where a file is: refused the same way.
        let file = dir.path().join("f");
        fs::write(&file, b"x").unwrap();
        let err = create_dir_all(&file, Durability::RenameOnly).unwrap_err();
        assert_eq!(err.code(), "ERR_INVALID_ARGUMENT");
    }

    #[test]
    fn durable_create_dir_all_creates_nested_and_existing_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b/c");
        for durability in [Durability::Sync, Durability::RenameOnly, Durability::Sync] {
            create_dir_all(&nested, durability).unwrap();
            assert!(nested.is_dir());
        }
        // A file in the way is an error naming the path, not a panic.
        let file = dir.path().join("f");
        fs::write(&file, b"x").unwrap();
        let err = create_dir_all(&file.join("d"), Durability::Sync).unwrap_err();
        assert_eq!(err.code(), "ERR_IO");
    }

    #[test]
    fn preallocation_never_changes_the_size_or_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.bin");
        // A reservation larger than what is written (a caller's bound that was too high).
        write_atomic_sized(&p, Durability::RenameOnly, 1 << 20, |w| {
            w.write_all(b"five!").unwrap();
            Ok(())
        })
        .unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"five!");
        let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        write_atomic_sized(&p, Durability::Sync, big.len() as u64, |w| {
            w.write_all(&big).unwrap();
            Ok(())
        })
        .unwrap();
        assert!(fs::read(&p).unwrap() == big);
    }

    /// The names the old writer used (`.NAME.PID.N.tmp`, N from a process-wide counter):
    /// predictable, so planted symlinks at all of them would have caught its next write.
    #[cfg(unix)]
    #[test]
    fn symlinks_planted_at_temporary_names_are_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        let dest = dir.path().join("out.bin");
        for n in 0..2000 {
            let name = format!(".out.bin.{}.{n}.tmp", std::process::id());
            std::os::unix::fs::symlink(&victim, dir.path().join(name)).unwrap();
        }
        // Every name the writer could draw is taken by a symlink here: it must draw again.
        let mut planted = (0..3).map(|n| {
            let p = dir
                .path()
                .join(format!(".out.bin.{}.{n}.tmp", std::process::id()));
            assert!(fs::symlink_metadata(&p).unwrap().file_type().is_symlink());
            p
        });
        let (file, tmp) = create_temp_named(&dest, || {
            planted.next().unwrap_or_else(|| temp_path_for(&dest))
        })
        .unwrap();
        drop(file);
        assert!(fs::symlink_metadata(&tmp).unwrap().file_type().is_file());
        fs::remove_file(&tmp).unwrap();
        for _ in 0..20 {
            write_atomic(&dest, Durability::RenameOnly, |w| {
                w.write_all(b"new data").unwrap();
                Ok(())
            })
            .unwrap();
        }
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert!(fs::symlink_metadata(&dest).unwrap().file_type().is_file());
        assert_eq!(fs::read(&dest).unwrap(), b"new data");
        // Only the planted links, the victim and the destination are left.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2002);
    }

    #[test]
    fn a_name_taken_by_anything_is_drawn_again_and_never_opened() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("d.bin");
        let taken: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!(".t{i}"))).collect();
        fs::write(&taken[0], b"another writer's file").unwrap();
        fs::create_dir(&taken[1]).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink("/nonexistent/dangling", &taken[2]).unwrap();
        #[cfg(not(unix))]
        fs::write(&taken[2], b"x").unwrap();
        let free = dir.path().join(".free");
        let mut names = taken.iter().cloned().chain([free.clone()]);
        let (_, tmp) = create_temp_named(&dest, || names.next().unwrap()).unwrap();
        assert_eq!(tmp, free);
        assert_eq!(fs::read(&taken[0]).unwrap(), b"another writer's file");
        // Sixteen collisions in a row: an error, not an endless loop.
        let err = create_temp_named(&dest, || taken[0].clone()).unwrap_err();
        assert_eq!(err.code(), "ERR_IO");
    }

    #[test]
    fn temporary_names_are_unpredictable() {
        let dest = Path::new("/x/model.safetensors");
        let names: std::collections::HashSet<_> = (0..1000).map(|_| temp_path_for(dest)).collect();
        assert_eq!(names.len(), 1000);
        let one = temp_path_for(dest)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let prefix = format!(".model.safetensors.{}.", std::process::id());
        assert!(one.starts_with(&prefix) && one.ends_with(".tmp"), "{one}");
        assert_eq!(one.len(), prefix.len() + 16 + 4, "{one}");
    }

    /// Two writers of one destination whose temporary names collide (two processes with the
    /// same PID in containers sharing a volume drew the same `.NAME.PID.N.tmp` before): each
    /// must write its own temporary file, so the destination is always one complete version.
    #[test]
    fn writers_with_colliding_names_never_tear_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("shared.bin");
        let version = |w: u8| vec![w; 256 * 1024];
        std::thread::scope(|scope| {
            for w in [b'a', b'b'] {
                let dest = dest.clone();
                scope.spawn(move || {
                    for n in 0..100 {
                        // Both writers draw the same first name each round.
                        let colliding = dest.with_file_name(format!(".shared.bin.1.{n}.tmp"));
                        let mut first = Some(colliding);
                        let (file, tmp) = create_temp_named(&dest, || {
                            first.take().unwrap_or_else(|| temp_path_for(&dest))
                        })
                        .unwrap();
                        let mut out = BufWriter::new(file);
                        for chunk in version(w).chunks(4096) {
                            out.write_all(chunk).unwrap();
                        }
                        drop(out.into_inner().unwrap());
                        fs::rename(&tmp, &dest).unwrap();
                    }
                });
            }
            scope.spawn(|| {
                for _ in 0..300 {
                    if let Ok(bytes) = fs::read(&dest) {
                        assert!(
                            bytes == version(b'a') || bytes == version(b'b'),
                            "a torn file of {} bytes",
                            bytes.len()
                        );
                    }
                }
            });
        });
        let bytes = fs::read(&dest).unwrap();
        assert!(bytes == version(b'a') || bytes == version(b'b'));
    }

    #[test]
    fn missing_directory_is_not_found() {
        let e = write_atomic(
            Path::new("/nonexistent-dir-xyz/a.bin"),
            Durability::RenameOnly,
            |_| Ok(()),
        )
        .unwrap_err();
        assert_eq!(e.code(), "ERR_NOT_FOUND");
    }
}
