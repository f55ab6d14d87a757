//! Pretrained model directories: `config.json` plus weights in one of the layouts people
//! ship (first match wins; the rules are [`layout`]'s, shared with remote directories):
//!
//! 1. `weights.safetensors`
//! 2. `model.safetensors`
//! 3. `model.safetensors.index.json` — Hugging Face shards, `{"metadata": {...},
//!    "weight_map": {tensor: shard}}`; every shard is mapped lazily.
//! 4. `pytorch_model.bin` — a PyTorch checkpoint, read without executing its pickle
//!    ([`crate::format::pytorch`]).
//! 5. `pytorch_model.bin.index.json` — PyTorch shards, the same index format.
//! 6. `weights.mlx` — MLX-Node's JSON fallback (parsed once, held in memory).
//!
//! Each weight file is opened by what its bytes are (see [`crate::format::detect`]), and
//! the directory is then one more [`TensorSource`], so callers never care which layout or
//! format it came from. [`open`] opens any path: a weights file, a sharded index with its
//! shards ([`sharded`]), or a model directory.

#[cfg(feature = "fs")]
pub mod adapter;
#[cfg(feature = "fs")]
pub mod companion;
pub mod hub;
pub mod layout;
#[cfg(feature = "fs")]
pub mod save;
pub mod sharded;
#[cfg(feature = "fs")]
pub use save::{save_model_dir, SaveOptions, Saved};

use crate::error::Result;
use crate::source::WeightsFormat;
use std::path::{Path, PathBuf};
// Reading and writing model directories (the `fs` feature).
#[cfg(feature = "fs")]
use crate::error::CoreError;
#[cfg(feature = "fs")]
use crate::format::detect::Detected;
#[cfg(feature = "fs")]
use crate::fsutil;
#[cfg(feature = "fs")]
use crate::memory::{Backend, TensorBytes};
#[cfg(feature = "fs")]
use crate::source::OpenOptions;
#[cfg(feature = "fs")]
use crate::source::{F32Decoder, Metadata, SourceFile, TensorList, TensorSource};
#[cfg(feature = "fs")]
use crate::tensor::TensorView;
#[cfg(feature = "fs")]
use layout::Layout;
#[cfg(feature = "fs")]
use sharded::ShardedSource;

pub use layout::{CONFIG_FILE, CONFIG_MAX_BYTES, INDEX_FILE, INDEX_MAX_BYTES};
/// The single-file SafeTensors layouts, in discovery order.
pub const SINGLE_FILES: [&str; 2] = ["weights.safetensors", "model.safetensors"];
pub const MLX_FILE: &str = "weights.mlx";

/// Which format the weights came in (the name `Model.format` always had).
pub type WeightFormat = WeightsFormat;

/// Progress of loading: called as each weight file is opened or parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadProgress {
    /// The file, relative to the model directory.
    pub file: String,
    pub loaded_bytes: u64,
    pub total_bytes: u64,
}

#[cfg(feature = "fs")]
/// A loaded model directory: its config and the source of its weights.
pub struct ModelDir {
    dir: PathBuf,
    config: serde_json::Value,
    weights: Box<dyn TensorSource>,
    /// The weight files, relative to the directory.
    files: Vec<String>,
}

/// Resolve `name` (a file name as written in an index) inside `dir`, by its spelling alone
/// ([`layout::check_shard_name`], the rule remote directories follow too): ERR_UNSAFE_PATH
/// for anything but a plain relative path.
///
/// Symlinks in the directory are followed: they are the directory owner's choice, not the
/// index's (the Hugging Face cache links every file of `snapshots/<rev>/` into `blobs/`),
/// as Python's loaders do.
pub fn safe_join(dir: &Path, name: &str) -> Result<PathBuf> {
    layout::check_shard_name(name).map_err(|e| e.with_path(dir))?;
    Ok(dir.join(name))
}

#[cfg(feature = "fs")]
/// Open a weights file by what its bytes are (or as `format`, when given), a sharded index
/// with its shards, or a model directory (`config.json` plus weights, see [`ModelDir`]).
pub fn open(
    path: &Path,
    format: Option<WeightsFormat>,
    options: &mut OpenOptions<'_>,
) -> Result<Box<dyn TensorSource>> {
    let meta = std::fs::metadata(path).map_err(|e| CoreError::io(e, path))?;
    if meta.is_dir() {
        let dir = ModelDir::open_with(path, options)?;
        if let Some(f) = format.filter(|f| *f != dir.format()) {
            return Err(CoreError::invalid_argument(format!(
                "a model directory holding {} weights, not {}",
                dir.format(),
                f.name()
            ))
            .with_path(path));
        }
        return Ok(Box::new(dir));
    }
    let detected = match format {
        Some(f) => Detected::Format(f),
        None => crate::format::detect_file(path)?,
    };
    open_detected(path, detected, options)
}

#[cfg(feature = "fs")]
/// Open a file known to be `detected`: a weights file through its format's registration, a
/// sharded index with the shards it names.
pub fn open_detected(
    path: &Path,
    detected: Detected,
    options: &mut OpenOptions<'_>,
) -> Result<Box<dyn TensorSource>> {
    match detected {
        Detected::Format(f) if crate::format::registration(f).is_index() => {
            let backend = options.backend;
            let source = ShardedSource::open(path, backend, &mut |_, done, total| {
                options.report(done, total)
            })?;
            Ok(Box::new(source))
        }
        _ => crate::format::open_detected(path, detected, options),
    }
}

#[cfg(feature = "fs")]
/// [`open_detected`], reporting its progress as the model file `name`'s.
fn open_reporting(
    path: &Path,
    detected: Detected,
    name: &str,
    backend: Backend,
    progress: &mut dyn FnMut(LoadProgress),
) -> Result<Box<dyn TensorSource>> {
    let mut report = |done, total| {
        progress(LoadProgress {
            file: name.to_string(),
            loaded_bytes: done,
            total_bytes: total,
        })
    };
    let mut options = OpenOptions {
        backend,
        progress: Some(&mut report),
    };
    open_detected(path, detected, &mut options)
}

#[cfg(feature = "fs")]
/// How often [`ModelDir::open`] reads a directory that a save replaced while it was read,
/// waiting 2, 4, … 32 ms in between.
const OPEN_ATTEMPTS: u32 = 6;

#[cfg(all(feature = "fs", unix))]
/// Which directory `dir` names now, to see a save swap it: device, inode and the inode's
/// change time. The inode number alone is not enough: a save removes the directory it swapped
/// out, and the next save's new directory can be given the freed number, so a reader that
/// read `config.json` before two swaps and the weights after them would see "the same"
/// directory; the change time of the new inode differs.
fn dir_identity(dir: &Path) -> Option<(u64, u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir)
        .ok()
        .map(|m| (m.dev(), m.ino(), m.ctime(), m.ctime_nsec()))
}

#[cfg(all(feature = "fs", not(unix)))]
/// Directories are not told apart here: a reader beside a save relies on the swap alone.
fn dir_identity(_dir: &Path) -> Option<(u64, u64, i64, i64)> {
    None
}

#[cfg(feature = "fs")]
/// A JSON file of a model directory, read with a hard cap (a file can say it is regular and
/// have no real size, as `/proc/self/pagemap` behind a symlink does).
pub(crate) fn read_json_file(path: &Path, what: &str, cap: u64) -> Result<Vec<u8>> {
    fsutil::read_regular_capped(path, what, cap, too_large(path, what, cap))
}

#[cfg(feature = "fs")]
/// ERR_INVALID_MODEL for a JSON file of `n` bytes or more, over its `cap`.
fn too_large<'a>(path: &'a Path, what: &'a str, cap: u64) -> impl FnOnce(u64) -> CoreError + 'a {
    move |n| {
        CoreError::invalid_model(format!(
            "{what} is larger than {} MiB ({n} bytes or more), the most read",
            cap >> 20
        ))
        .with_path(path)
    }
}

#[cfg(feature = "fs")]
impl ModelDir {
    /// Discover, open and validate a model directory. `progress` is called once per weight
    /// file (and more often while a large weights.mlx is parsed). A directory that a save
    /// replaced while it was read is read again.
    pub fn open(dir: &Path, progress: &mut dyn FnMut(LoadProgress)) -> Result<ModelDir> {
        ModelDir::open_backend(dir, Backend::Mmap, progress)
    }

    /// [`open`](Self::open) for the format registry: progress without file names.
    pub fn open_with(dir: &Path, options: &mut OpenOptions<'_>) -> Result<ModelDir> {
        let backend = options.backend;
        ModelDir::open_backend(dir, backend, &mut |p| {
            options.report(p.loaded_bytes, p.total_bytes)
        })
    }

    /// [`open`](Self::open), reaching the files through `backend`.
    pub fn open_backend(
        dir: &Path,
        backend: Backend,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<ModelDir> {
        if std::fs::metadata(dir).is_ok_and(|m| m.is_file()) {
            return ModelDir::open_gguf(dir, backend, progress);
        }
        let mut attempt = 0;
        loop {
            // A save swaps in a whole new directory (see [`save`]): a reader whose opens came
            // on both sides of the swap may hold files of both (or miss the ones the save
            // removed with the old directory), so it reads again.
            let before = dir_identity(dir);
            let result = ModelDir::read_config(dir)
                .and_then(|config| ModelDir::discover(dir, config, backend, progress));
            let replaced = before.is_some() && dir_identity(dir) != before;
            if !replaced {
                return result;
            }
            if attempt + 1 >= OPEN_ATTEMPTS {
                return Err(CoreError::invalid_model(
                    "the directory was replaced while it was read, every time it was read \
                     (saves one after another?)",
                )
                .with_path(dir));
            }
            std::thread::sleep(std::time::Duration::from_millis(2 << attempt));
            attempt += 1;
        }
    }

    /// A GGUF file (the first of a split set opens the set) as a model: GGUF holds its
    /// configuration in its key/values, so `config` is empty and the key/values are the
    /// weights' metadata; the directory is the file's. Any other file is not a model.
    fn open_gguf(
        path: &Path,
        backend: Backend,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<ModelDir> {
        let detected = crate::format::detect_file(path)?;
        if detected != Detected::Format(WeightsFormat::Gguf) {
            return Err(CoreError::invalid_argument(
                "not a directory: a model is a directory or a GGUF file (open a single \
                 weights file with openWeights)",
            )
            .with_path(path));
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let weights = open_reporting(path, detected, &name, backend, progress)?;
        let files = weights.files().into_iter().map(|f| f.name).collect();
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Ok(ModelDir {
            dir,
            config: serde_json::Value::Object(Default::default()),
            weights,
            files,
        })
    }

    fn read_config(dir: &Path) -> Result<serde_json::Value> {
        let meta = std::fs::metadata(dir).map_err(|e| CoreError::io(e, dir))?;
        if !meta.is_dir() {
            return Err(CoreError::invalid_argument("not a directory").with_path(dir));
        }
        // Read only where it resolves inside the directory (its values reach the caller and
        // the files a conversion writes).
        let files = companion::ModelFiles::new(dir)?;
        if adapter::is_adapter_dir(&files) {
            return Err(adapter::not_a_model(dir));
        }
        let config = files.open_required(CONFIG_FILE, CONFIG_FILE)?;
        let config_path = config.path.clone();
        let text = config.read(
            CONFIG_MAX_BYTES,
            too_large(&config_path, CONFIG_FILE, CONFIG_MAX_BYTES),
        )?;
        layout::parse_config(&text).map_err(|e| e.with_path(&config_path))
    }

    /// Find the weights and open them: the first of [`layout::DISCOVERY`] that exists.
    fn discover(
        dir: &Path,
        config: serde_json::Value,
        backend: Backend,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<ModelDir> {
        for candidate in layout::DISCOVERY {
            let path = dir.join(candidate.file);
            if path.is_file() {
                return ModelDir::open_layout(dir, config, candidate, &path, backend, progress);
            }
        }
        Err(layout::no_weights().with_path(dir))
    }

    /// Open the weights of `candidate` (one of [`layout::DISCOVERY`]) stored at `path`.
    fn open_layout(
        dir: &Path,
        config: serde_json::Value,
        candidate: layout::Candidate,
        path: &Path,
        backend: Backend,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<ModelDir> {
        let name = candidate.file.to_string();
        let (weights, files): (Box<dyn TensorSource>, Vec<String>) = match candidate.layout {
            Layout::File => {
                let detected = crate::format::detect_file(path)?;
                let source = open_reporting(path, detected, &name, backend, progress)?;
                (source, vec![name.clone()])
            }
            Layout::Sharded => {
                let source = ShardedSource::open(path, backend, &mut |shard, done, total| {
                    progress(LoadProgress {
                        file: shard.to_string(),
                        loaded_bytes: done,
                        total_bytes: total,
                    })
                })?;
                let files = source.files().into_iter().map(|f| f.name).collect();
                (Box::new(source), files)
            }
        };
        Ok(ModelDir {
            dir: dir.to_path_buf(),
            config,
            weights,
            files,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// config.json, as written.
    pub fn config(&self) -> &serde_json::Value {
        &self.config
    }
    /// Weight files used, relative to the directory.
    pub fn files(&self) -> &[String] {
        &self.files
    }
    pub fn tensor_names(&self) -> impl Iterator<Item = &str> {
        self.weights.tensors().iter().map(|t| t.name.as_str())
    }
    /// The source the weights are served from (one file, or the shards of an index).
    pub fn weights(&self) -> &dyn TensorSource {
        self.weights.as_ref()
    }

    /// Every tensor, borrowed from the mapped files where they can be.
    pub fn views(&self) -> Result<Vec<TensorView<'_>>> {
        self.weights
            .tensors()
            .iter()
            .map(|t| self.view(&t.name))
            .collect()
    }

    /// Write this model to `dir`, with the tokenizer and other companion files of its own
    /// directory (see [`save_model_dir`]).
    #[cfg(feature = "fs")]
    pub fn save(&self, dir: &Path, options: &SaveOptions) -> Result<Saved> {
        if self.weights.format() == WeightsFormat::Gguf {
            return Err(CoreError::invalid_argument(
                "a model read from a GGUF file is saved by converting it: convert(gguf, dir, \
                 { to: 'safetensors' })",
            )
            .with_path(&self.dir));
        }
        save_model_dir(dir, &self.config, &self.views()?, Some(&self.dir), options)
    }
}

#[cfg(feature = "fs")]
impl TensorSource for ModelDir {
    fn format(&self) -> WeightsFormat {
        self.weights.format()
    }
    fn list(&self) -> &TensorList {
        self.weights.list()
    }
    fn metadata(&self) -> Metadata<'_> {
        self.weights.metadata()
    }
    fn fetch(&self, name: &str) -> Result<TensorBytes<'_>> {
        self.info(name)?;
        self.weights.fetch(name)
    }
    fn fetch_raw(&self, name: &str) -> Result<TensorBytes<'_>> {
        self.info(name)?;
        self.weights.fetch_raw(name)
    }
    fn f32_decoder(&self, name: &str) -> Result<Option<F32Decoder<'_>>> {
        self.info(name)?;
        self.weights.f32_decoder(name)
    }
    fn fetch_spans(&self, name: &str, spans: &[(usize, usize)]) -> Result<Option<Vec<u8>>> {
        self.info(name)?;
        self.weights.fetch_spans(name, spans)
    }
    fn stored_range(&self, name: &str) -> Option<(u64, u64)> {
        self.weights.stored_range(name)
    }
    fn path(&self) -> Option<&Path> {
        Some(&self.dir)
    }
    fn files(&self) -> Vec<SourceFile> {
        match &self.files[..] {
            // The name discovery found (the source's own path may be a save's pending copy).
            [one] if self.weights.files().len() == 1 => vec![SourceFile {
                name: one.clone(),
                bytes: self.weights.file_size(),
            }],
            _ => self.weights.files(),
        }
    }
    fn file_of(&self, name: &str) -> Option<&str> {
        self.weights.file_of(name)
    }
    fn config(&self) -> Option<&serde_json::Value> {
        Some(&self.config)
    }
    fn release(&self, name: &str) {
        self.weights.release(name)
    }
    fn tied_tensors(&self) -> Vec<(String, String)> {
        self.weights.tied_tensors()
    }
}

#[cfg(all(test, feature = "fs"))]
mod tests;
