//! Saving a model directory in the layout transformers' `save_pretrained` writes, built
//! beside the target and swapped in whole.
//!
//! What a save writes: `config.json`; the weights as `model.safetensors`, or as
//! `model-0000k-of-0000n.safetensors` with `model.safetensors.index.json` past
//! [`SaveOptions::max_shard_bytes`] (or `weights.mlx`); `{"format": "pt"}` in every SafeTensors
//! file's metadata beside the caller's own; and the tokenizer, generation and processor files
//! ([`COMPANION_FILES`]) of the model's own directory, read as every file of a model directory
//! is ([`ModelFiles`]: inside it, regular, capped; one that may not be read is left out with a
//! warning). What else the target directory held is kept (files hard-linked, links recreated,
//! folders rebuilt), except weight files of any layout, which the new ones replace.
//!
//! The directory is the unit, for a process killed at any point and for a reader running
//! beside the save. Everything is written into a new directory next to the target
//! (`.NAME.<id>.saving`), which then takes the target's place in one step: an exchange of the
//! two names (`renameat2(RENAME_EXCHANGE)` on Linux 3.15+, `renamex_np(RENAME_SWAP)` on macOS),
//! after which the old directory, now under the temporary name, is removed. A reader sees the
//! complete old directory or the complete new one; one that opened some files of each (the
//! swap came between two of its opens) sees the directory change under it and reads it again
//! ([`super::ModelDir::open`]). A save killed before the swap leaves the old directory as it
//! was (and its temporary directory, which a later save of the same target removes); killed
//! after it, the new one; saves of one target at the same time each swap in their own
//! directory, the last one staying. Where the exchange is not available (other systems, file systems
//! that refuse it), the old directory is renamed away and the new one renamed into place: two
//! renames, between which the target does not exist for an instant, and a save killed right
//! there leaves it under `.NAME.<id>.replaced`.

use super::companion::ModelFiles;
use super::layout::{COMPANION_FILES, COMPANION_MAX_BYTES, CONFIG_FILE, INDEX_FILE};
use super::{MLX_FILE, SINGLE_FILES};
use crate::error::{CoreError, Result};
use crate::format::{mlx, safetensors as st};
use crate::fsutil;
use crate::tensor::TensorView;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// How [`save_model_dir`] lays out the weights.
#[derive(Debug, Clone, Default)]
pub struct SaveOptions {
    /// Write `weights.mlx` instead of SafeTensors.
    pub mlx: bool,
    /// Split SafeTensors weights into shards of at most this many data bytes (a tensor
    /// larger than that gets a shard of its own).
    pub max_shard_bytes: Option<u64>,
    /// `__metadata__` for the SafeTensors files (`format` is `pt` unless given here).
    pub metadata: Option<BTreeMap<String, String>>,
    /// Whether each file, and the directory, is fsynced before the swap (see
    /// [`fsutil::Durability`]).
    pub durability: fsutil::Durability,
}

impl SaveOptions {
    /// The options of each file the save writes.
    fn write(&self) -> fsutil::WriteOptions<'static> {
        fsutil::WriteOptions::with_durability(self.durability)
    }
}

/// What a save wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Saved {
    /// The weight files, relative to the directory.
    pub files: Vec<String>,
    /// The companion files copied from the model's directory.
    pub companions: Vec<String>,
    /// Companion files left out, and why.
    pub warnings: Vec<String>,
}

/// Write `config`, `tensors` and the companion files of `source` (the model's own directory,
/// if it has one) as the model directory `dir` (see the module documentation).
pub fn save_model_dir(
    dir: &Path,
    config: &serde_json::Value,
    tensors: &[TensorView<'_>],
    source: Option<&Path>,
    options: &SaveOptions,
) -> Result<Saved> {
    let target = resolve_target(dir, options.durability)?;
    let parent = target.parent().unwrap_or(Path::new("/")).to_path_buf();
    let name = target
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| CoreError::invalid_argument("not a directory name").with_path(dir))?
        .to_string();
    remove_leftovers(&parent, &name);
    let id = format!("{:016x}", fsutil::random_u64());
    let staging = Staging::create(parent.join(format!(".{name}.{id}.saving")))?;
    let staging = staging.path.as_path();
    let result = (|| {
        let mut saved = write_contents(staging, config, tensors, options)?;
        if let Some(source) = source {
            copy_companions(source, staging, &mut saved, options)?;
        }
        if target.is_dir() {
            let mut keep: Vec<&str> = vec![CONFIG_FILE];
            keep.extend(saved.files.iter().map(String::as_str));
            keep.extend(saved.companions.iter().map(String::as_str));
            carry_over(&target, staging, &keep)?;
        }
        if options.durability == fsutil::Durability::Sync {
            fsutil::sync_dir(staging)?;
        }
        swap_in(staging, &target, &parent, &name, &id)?;
        if options.durability == fsutil::Durability::Sync {
            fsutil::sync_dir(&parent)?;
        }
        Ok(saved)
    })();
    // A failed save leaves nothing of its own; after a swap the old directory is here.
    let _ = std::fs::remove_dir_all(staging);
    result
}

/// The target as an absolute path: the directory a link at `dir` points to, or `dir` under
/// its (created) parent.
fn resolve_target(dir: &Path, durability: fsutil::Durability) -> Result<PathBuf> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => std::fs::canonicalize(dir).map_err(|e| CoreError::io(e, dir)),
        Ok(_) => Err(CoreError::invalid_argument("exists and is not a directory").with_path(dir)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let name = dir.file_name().ok_or_else(|| {
                CoreError::invalid_argument("not a directory name").with_path(dir)
            })?;
            let parent = match dir.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            fsutil::create_dir_all(parent, durability)?;
            let parent = std::fs::canonicalize(parent).map_err(|e| CoreError::io(e, parent))?;
            Ok(parent.join(name))
        }
        Err(e) => Err(CoreError::io(e, dir)),
    }
}

/// Remove the temporary directories of earlier saves of `name` that did not finish: those no
/// save holds locked (see [`Staging`]) and untouched for a while (a save that has just made
/// its directory takes the lock a moment later).
fn remove_leftovers(parent: &Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let prefix = format!(".{name}.");
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(rest) = file.to_str().and_then(|f| f.strip_prefix(&prefix)) else {
            continue;
        };
        let id = rest
            .strip_suffix(".saving")
            .or_else(|| rest.strip_suffix(".replaced"));
        if !id.is_some_and(|id| id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit())) {
            continue;
        }
        let idle = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= LEFTOVER_AGE);
        if idle && Staging::unlocked(&entry.path()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// How long a temporary directory of a save stays untouched before another save removes it.
const LEFTOVER_AGE: std::time::Duration = std::time::Duration::from_secs(10);

/// The new directory a save writes, locked for as long as the save runs (an advisory lock on
/// the directory, which the system drops when the process ends however it ends), so that
/// another save of the same target never takes it for a leftover.
pub(crate) struct Staging {
    path: PathBuf,
    #[cfg(unix)]
    _lock: std::fs::File,
}

impl Staging {
    pub(crate) fn create(path: PathBuf) -> Result<Staging> {
        std::fs::create_dir(&path).map_err(|e| CoreError::io(e, &path))?;
        #[cfg(unix)]
        {
            let lock = std::fs::File::open(&path).map_err(|e| CoreError::io(e, &path))?;
            // SAFETY: flock on a descriptor we own.
            unsafe { libc::flock(std::os::unix::io::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) };
            Ok(Staging { path, _lock: lock })
        }
        #[cfg(not(unix))]
        Ok(Staging { path })
    }

    /// Whether no save holds the directory at `path`.
    fn unlocked(path: &Path) -> bool {
        #[cfg(unix)]
        {
            let Ok(dir) = std::fs::File::open(path) else {
                return false;
            };
            // SAFETY: flock on a descriptor we own; the lock goes with it.
            let fd = std::os::unix::io::AsRawFd::as_raw_fd(&dir);
            unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) == 0 }
        }
        #[cfg(not(unix))]
        {
            let _ = path;
            true
        }
    }
}

/// Write the weights and `config.json` into `dir`.
fn write_contents(
    dir: &Path,
    config: &serde_json::Value,
    tensors: &[TensorView<'_>],
    options: &SaveOptions,
) -> Result<Saved> {
    let mut metadata = options.metadata.clone().unwrap_or_default();
    metadata
        .entry("format".to_string())
        .or_insert_with(|| "pt".to_string());
    let files = if options.mlx {
        mlx::save_mlx(
            &dir.join(MLX_FILE),
            tensors,
            Some(&metadata),
            options.write(),
        )?;
        vec![MLX_FILE.to_string()]
    } else {
        let total: u64 = tensors.iter().map(|t| t.data.len() as u64).sum();
        match options.max_shard_bytes {
            Some(max) if total > max => save_shards(dir, tensors, max, &metadata, options)?,
            _ => {
                let name = SINGLE_FILES[1];
                st::save_file(&dir.join(name), tensors, Some(&metadata), options.write())?;
                vec![name.to_string()]
            }
        }
    };
    let mut text = serde_json::to_string_pretty(config)
        .map_err(|e| CoreError::invalid_argument(e.to_string()))?;
    text.push('\n');
    let path = dir.join(CONFIG_FILE);
    fsutil::write_atomic(&path, options.durability, |out| {
        fsutil::write_all(out, text.as_bytes(), &path)
    })?;
    Ok(Saved {
        files,
        ..Saved::default()
    })
}

/// Write the shards and their index into `dir`; return their names, the index last.
fn save_shards(
    dir: &Path,
    tensors: &[TensorView<'_>],
    max: u64,
    metadata: &BTreeMap<String, String>,
    options: &SaveOptions,
) -> Result<Vec<String>> {
    // Group in the reference writer's order (dtype descending, then name), greedily.
    let mut sorted: Vec<&TensorView> = tensors.iter().collect();
    sorted.sort_by(|a, b| b.dtype.cmp(&a.dtype).then_with(|| a.name.cmp(&b.name)));
    let mut groups: Vec<Vec<&TensorView>> = Vec::new();
    let mut size = 0u64;
    for t in sorted {
        let n = t.data.len() as u64;
        match groups.last_mut() {
            Some(g) if size + n <= max => {
                g.push(t);
                size += n;
            }
            _ => {
                groups.push(vec![t]);
                size = n;
            }
        }
    }
    let count = groups.len();
    let mut weight_map = BTreeMap::new();
    let mut files = Vec::with_capacity(count + 1);
    let mut total_size = 0u64;
    for (i, group) in groups.into_iter().enumerate() {
        let name = format!("model-{:05}-of-{:05}.safetensors", i + 1, count);
        let views: Vec<TensorView> = group
            .iter()
            .map(|t| TensorView {
                name: t.name.clone(),
                dtype: t.dtype,
                shape: t.shape.clone(),
                data: std::borrow::Cow::Borrowed(t.data.as_ref()),
            })
            .collect();
        for t in &views {
            weight_map.insert(t.name.clone(), name.clone());
            total_size += t.data.len() as u64;
        }
        st::save_file(&dir.join(&name), &views, Some(metadata), options.write())?;
        files.push(name);
    }
    let index = serde_json::json!({
        "metadata": { "total_size": total_size },
        "weight_map": weight_map,
    });
    let mut text = serde_json::to_string_pretty(&index)
        .map_err(|e| CoreError::invalid_argument(e.to_string()))?;
    text.push('\n');
    let path = dir.join(INDEX_FILE);
    fsutil::write_atomic(&path, options.durability, |out| {
        fsutil::write_all(out, text.as_bytes(), &path)
    })?;
    files.push(INDEX_FILE.to_string());
    Ok(files)
}

/// Copy the companion files of the model directory `source` into `dir`.
pub(crate) fn copy_companions(
    source: &Path,
    dir: &Path,
    saved: &mut Saved,
    options: &SaveOptions,
) -> Result<()> {
    let files = ModelFiles::new(source)?;
    for name in COMPANION_FILES {
        let Some(opened) = files.open_optional(name, "a file of the model")? else {
            continue;
        };
        let path = opened.path.clone();
        let bytes = opened.read(COMPANION_MAX_BYTES, |n| {
            CoreError::invalid_model(format!(
                "is larger than {} MiB ({n} bytes or more), the most a save copies",
                COMPANION_MAX_BYTES >> 20
            ))
            .with_path(&path)
        })?;
        let out = dir.join(name);
        if let Some(parent) = out.parent().filter(|p| *p != dir) {
            std::fs::create_dir_all(parent).map_err(|e| CoreError::io(e, parent))?;
        }
        fsutil::write_atomic(&out, options.durability, |w| {
            fsutil::write_all(w, &bytes, &out)
        })?;
        saved.companions.push(name.to_string());
    }
    saved.warnings.extend(files.take_warnings());
    Ok(())
}

/// Whether `name` is a weight file of some layout: what a save replaces rather than keeps.
fn is_weight_file(name: &str) -> bool {
    let shard = |stem: &str, ext: &str| {
        name.strip_prefix(stem)
            .and_then(|rest| rest.strip_suffix(ext))
            .is_some_and(|mid| mid.contains("-of-"))
    };
    SINGLE_FILES.contains(&name)
        || name == INDEX_FILE
        || name == MLX_FILE
        || name == "pytorch_model.bin"
        || name == "pytorch_model.bin.index.json"
        || shard("model-", ".safetensors")
        || shard("pytorch_model-", ".bin")
        // The files of an interrupted save of an earlier version (`.NAME.<id>.pending`).
        || (name.starts_with('.') && name.ends_with(".pending"))
}

/// Bring what the old directory `from` holds, besides weight files and the names in `skip`,
/// into the new directory `to`: files as hard links (copies where links cannot be made),
/// symlinks as they were, folders rebuilt the same way.
fn carry_over(from: &Path, to: &Path, skip: &[&str]) -> Result<()> {
    for entry in std::fs::read_dir(from).map_err(|e| CoreError::io(e, from))? {
        let entry = entry.map_err(|e| CoreError::io(e, from))?;
        let name = entry.file_name();
        if name
            .to_str()
            .is_some_and(|n| skip.contains(&n) || is_weight_file(n))
        {
            continue;
        }
        carry_entry(&entry.path(), &to.join(&name))?;
    }
    Ok(())
}

/// [`carry_over`] of one entry.
fn carry_entry(old: &Path, new: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(old).map_err(|e| CoreError::io(e, old))?;
    let kind = meta.file_type();
    if kind.is_symlink() {
        let target = std::fs::read_link(old).map_err(|e| CoreError::io(e, old))?;
        symlink(&target, new).map_err(|e| CoreError::io(e, new))
    } else if kind.is_dir() {
        std::fs::create_dir(new).map_err(|e| CoreError::io(e, new))?;
        for entry in std::fs::read_dir(old).map_err(|e| CoreError::io(e, old))? {
            let entry = entry.map_err(|e| CoreError::io(e, old))?;
            carry_entry(&entry.path(), &new.join(entry.file_name()))?;
        }
        Ok(())
    } else if kind.is_file() {
        match std::fs::hard_link(old, new) {
            Ok(()) => Ok(()),
            Err(_) => std::fs::copy(old, new)
                .map(|_| ())
                .map_err(|e| CoreError::io(e, new)),
        }
    } else {
        // A FIFO, socket or device in a model directory is not the save's to recreate.
        Ok(())
    }
}

#[cfg(unix)]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

#[cfg(windows)]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    let resolved = link.parent().map(|p| p.join(target));
    if resolved.is_some_and(|r| r.is_dir()) {
        std::os::windows::fs::symlink_dir(target, link)
    } else {
        std::os::windows::fs::symlink_file(target, link)
    }
}

/// Put the complete directory `staging` in the place of `target` (see the module docs).
fn swap_in(staging: &Path, target: &Path, parent: &Path, name: &str, id: &str) -> Result<()> {
    let rename =
        |from: &Path, to: &Path| std::fs::rename(from, to).map_err(|e| CoreError::io(e, to));
    if !target.exists() {
        return rename(staging, target);
    }
    match exchange(staging, target) {
        Ok(()) => Ok(()),
        Err(e) if exchange_unsupported(&e) => {
            let replaced = parent.join(format!(".{name}.{id}.replaced"));
            rename(target, &replaced)?;
            rename(staging, target)?;
            let _ = std::fs::remove_dir_all(&replaced);
            Ok(())
        }
        Err(e) => Err(CoreError::io(e, target)),
    }
}

/// Whether the exchange failed because this system or file system does not offer it.
fn exchange_unsupported(e: &std::io::Error) -> bool {
    #[cfg(unix)]
    if matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::ENOSYS | libc::ENOTSUP)
    ) {
        return true;
    }
    e.kind() == std::io::ErrorKind::Unsupported
}

/// Exchange the names `a` and `b` atomically.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let a = std::ffi::CString::new(a.as_os_str().as_bytes())?;
    let b = std::ffi::CString::new(b.as_os_str().as_bytes())?;
    // The system call itself: glibc's wrapper is newer than the oldest glibc we link against.
    // SAFETY: two valid NUL-terminated paths; the kernel reads nothing else.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Exchange the names `a` and `b` atomically.
#[cfg(any(target_os = "macos", target_os = "ios"))]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let a = std::ffi::CString::new(a.as_os_str().as_bytes())?;
    let b = std::ffi::CString::new(b.as_os_str().as_bytes())?;
    // SAFETY: two valid NUL-terminated paths.
    let r = unsafe { libc::renamex_np(a.as_ptr(), b.as_ptr(), libc::RENAME_SWAP) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// No atomic exchange here: the two renames of [`swap_in`].
#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "ios"
)))]
fn exchange(_a: &Path, _b: &Path) -> std::io::Result<()> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}
