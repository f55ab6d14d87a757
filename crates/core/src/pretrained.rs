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
//! format it came from.

#[cfg(feature = "fs")]
pub mod companion;
pub mod hub;
pub mod layout;

use crate::error::Result;
use crate::source::WeightsFormat;
use std::path::{Path, PathBuf};
// Reading and writing model directories (the `fs` feature).
#[cfg(feature = "fs")]
use crate::error::CoreError;
#[cfg(feature = "fs")]
use crate::format::sharded::ShardedSource;
#[cfg(feature = "fs")]
use crate::format::OpenOptions;
#[cfg(feature = "fs")]
use crate::format::{mlx, safetensors as st};
#[cfg(feature = "fs")]
use crate::fsutil;
#[cfg(feature = "fs")]
use crate::memory::{Backend, TensorBytes};
#[cfg(feature = "fs")]
use crate::source::{F32Decoder, Metadata, SourceFile, TensorList, TensorSource};
#[cfg(feature = "fs")]
use crate::tensor::TensorView;
#[cfg(feature = "fs")]
use layout::Layout;
#[cfg(feature = "fs")]
use std::collections::BTreeMap;

pub use layout::{
    CONFIG_FILE, CONFIG_MAX_BYTES, CONFIG_SAVE_ID_KEY, INDEX_FILE, INDEX_MAX_BYTES, SAVE_ID_KEY,
};
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
    /// The weight files, relative to the directory (the name discovery found, even when the
    /// file was a save's pending copy of it).
    files: Vec<String>,
    /// The save (see [`save_model_dir`]) the weights say they belong to.
    save_id: Option<String>,
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
/// How often [`ModelDir::open`] tries a directory written by [`save_model_dir`] whose files
/// disagree (a save under way), waiting 2, 4, … 32 ms in between.
const OPEN_ATTEMPTS: u32 = 6;

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
/// Take [`CONFIG_SAVE_ID_KEY`] out of a config: the save it belongs to.
fn take_config_save_id(config: &mut serde_json::Value) -> Option<String> {
    match config.as_object_mut()?.remove(CONFIG_SAVE_ID_KEY)? {
        serde_json::Value::String(id) => Some(id),
        _ => None,
    }
}

#[cfg(feature = "fs")]
impl ModelDir {
    /// Discover, open and validate a model directory. `progress` is called once per weight
    /// file (and more often while a large weights.mlx is parsed). A directory written by
    /// [`save_model_dir`] whose config and weights belong to different saves is tried again a
    /// few times (a save beside us finishes within milliseconds), then refused.
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
        let mut attempt = 0;
        loop {
            match ModelDir::open_once(dir, backend, progress) {
                Ok(model) => return Ok(model),
                Err((e, ours))
                    if ours
                        && attempt + 1 < OPEN_ATTEMPTS
                        && matches!(
                            e.code(),
                            "ERR_INVALID_MODEL" | "ERR_NOT_FOUND" | "ERR_NO_WEIGHTS"
                        ) =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(2 << attempt));
                    attempt += 1;
                }
                Err((e, _)) => return Err(e),
            }
        }
    }

    /// One attempt of [`ModelDir::open`]; the error says whether the directory's config was
    /// written by [`save_model_dir`] (so a save may be under way).
    fn open_once(
        dir: &Path,
        backend: Backend,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> std::result::Result<ModelDir, (CoreError, bool)> {
        let mut config = ModelDir::read_config(dir).map_err(|e| (e, false))?;
        let config_save = take_config_save_id(&mut config);
        let ours = config_save.is_some();
        ModelDir::discover(dir, config, config_save.as_deref(), backend, progress)
            .map_err(|e| (e, ours))
    }

    fn read_config(dir: &Path) -> Result<serde_json::Value> {
        let meta = std::fs::metadata(dir).map_err(|e| CoreError::io(e, dir))?;
        if !meta.is_dir() {
            return Err(CoreError::invalid_argument("not a directory").with_path(dir));
        }
        // Read only where it resolves inside the directory (its values reach the caller and
        // the files a conversion writes).
        let config = companion::ModelFiles::new(dir)?.open_required(CONFIG_FILE, CONFIG_FILE)?;
        let config_path = config.path.clone();
        let text = config.read(
            CONFIG_MAX_BYTES,
            too_large(&config_path, CONFIG_FILE, CONFIG_MAX_BYTES),
        )?;
        layout::parse_config(&text).map_err(|e| e.with_path(&config_path))
    }

    /// Find the weights and open them: the first of [`layout::DISCOVERY`] that exists. When
    /// the config names its save (see [`save_model_dir`]), the first that belongs to that
    /// save, looking also at the save's files not yet renamed into place
    /// (`.NAME.<id>.pending`, complete before the config was renamed): a save killed between
    /// its renames, or seen by a reader between them, loads whole. Weights without a save id
    /// are taken as they are (written by another tool: the owner's choice).
    fn discover(
        dir: &Path,
        config: serde_json::Value,
        config_save: Option<&str>,
        backend: Backend,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<ModelDir> {
        let mut other_save: Option<ModelDir> = None;
        for candidate in layout::DISCOVERY {
            let mut paths = vec![dir.join(candidate.file)];
            if let Some(save) = config_save {
                paths.push(pending_path(dir, candidate.file, save));
            }
            for path in paths {
                if !path.is_file() {
                    continue;
                }
                let model = ModelDir::open_layout(
                    dir,
                    config.clone(),
                    candidate,
                    &path,
                    backend,
                    progress,
                )?;
                match (config_save, model.save_id.as_deref()) {
                    (Some(wanted), Some(found)) if wanted != found => {
                        other_save.get_or_insert(model);
                    }
                    _ => return Ok(model),
                }
            }
        }
        if let (Some(model), Some(config_save)) = (other_save, config_save) {
            let what = format!("the weights ({})", model.files.last().map_or("", |f| f));
            let found = model.save_id.unwrap_or_default();
            return Err(layout::save_mismatch(
                &what,
                &found,
                &format!("config.json is from save {config_save}"),
            )
            .with_path(dir.join(CONFIG_FILE)));
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
        let (weights, files, save_id): (Box<dyn TensorSource>, Vec<String>, Option<String>) =
            match candidate.layout {
                Layout::File => {
                    let detected = crate::format::detect_file(path)?;
                    let mut report = |done, total| {
                        progress(LoadProgress {
                            file: name.clone(),
                            loaded_bytes: done,
                            total_bytes: total,
                        })
                    };
                    let mut options = OpenOptions {
                        backend,
                        progress: Some(&mut report),
                    };
                    let source = crate::format::open_detected(path, detected, &mut options)?;
                    let save_id = source
                        .metadata()
                        .get_str(layout::SAVE_ID_KEY)
                        .map(str::to_string);
                    (source, vec![name.clone()], save_id)
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
                    let save_id = source.save_id().map(str::to_string);
                    (Box::new(source), files, save_id)
                }
            };
        Ok(ModelDir {
            dir: dir.to_path_buf(),
            config,
            weights,
            files,
            save_id,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// config.json, as written (less the save id [`save_model_dir`] adds).
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

    /// Write this model to `dir` (see [`save_model_dir`]).
    #[cfg(feature = "fs")]
    pub fn save(&self, dir: &Path, options: &SaveOptions) -> Result<Vec<String>> {
        save_model_dir(dir, &self.config, &self.views()?, options)
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

#[cfg(feature = "fs")]
/// How [`save_model_dir`] lays out the weights.
#[derive(Debug, Clone, Default)]
pub struct SaveOptions {
    /// Write `weights.mlx` instead of SafeTensors.
    pub mlx: bool,
    /// Split SafeTensors weights into shards of at most this many data bytes (a tensor
    /// larger than that gets a shard of its own).
    pub max_shard_bytes: Option<u64>,
    /// `__metadata__` for the SafeTensors files.
    pub metadata: Option<BTreeMap<String, String>>,
    /// Whether each file is fsynced before its rename (see [`fsutil::Durability`]).
    pub durability: fsutil::Durability,
}

#[cfg(feature = "fs")]
impl SaveOptions {
    /// The options of each file the save writes.
    fn write(&self) -> fsutil::WriteOptions<'static> {
        fsutil::WriteOptions::with_durability(self.durability)
    }
}

#[cfg(feature = "fs")]
/// Write `config.json` and the weights to `dir` (created if missing). Returns the weight
/// files written.
///
/// The directory is the unit, for a process killed at any point and for a reader running
/// beside the save: it loads as the complete old model or the complete new one, or fails
/// with ERR_INVALID_MODEL saying a save was under way — never a mix. How:
///
/// 1. Every file of the save carries one random save id: in each weight file's
///    `__metadata__` and the index's `metadata` ([`SAVE_ID_KEY`]), and in `config.json`
///    ([`CONFIG_SAVE_ID_KEY`]). The loader refuses weights and config of different saves
///    (and shards of a save other than the index's).
/// 2. Shards get names of their own (`model-00001-of-00003-<save id>.safetensors`), written
///    before anything refers to them, so the old index keeps its old, untouched shards.
/// 3. The file discovery finds (the single weight file, the index or `weights.mlx`) and
///    `config.json` are first written whole under temporary names, then renamed into place
///    one right after the other; then the weight files of other layouts that discovery
///    would pick first are removed, then every other stale weight file. Only a crash inside
///    that handful of syscalls leaves old and new side by side, which the ids reveal.
pub fn save_model_dir(
    dir: &Path,
    config: &serde_json::Value,
    tensors: &[TensorView<'_>],
    options: &SaveOptions,
) -> Result<Vec<String>> {
    fsutil::create_dir_all(dir, options.durability)?;
    let save_id = format!("{:016x}", fsutil::random_u64());
    let mut metadata = options.metadata.clone().unwrap_or_default();
    metadata.insert(SAVE_ID_KEY.to_string(), save_id.clone());
    // Files renamed into place by `commit`, in order, once everything is written.
    let mut pending: Vec<Pending> = Vec::new();
    let result = (|| {
        let written: Vec<String> = if options.mlx {
            let p = Pending::new(dir, MLX_FILE, &save_id);
            mlx::save_mlx(&p.tmp, tensors, Some(&metadata), options.write())?;
            pending.push(p);
            vec![MLX_FILE.to_string()]
        } else {
            let total: u64 = tensors.iter().map(|t| t.data.len() as u64).sum();
            match options.max_shard_bytes {
                Some(max) if total > max => {
                    let (files, index) =
                        save_shards(dir, tensors, max, &metadata, &save_id, options)?;
                    let p = Pending::new(dir, INDEX_FILE, &save_id);
                    fsutil::write_atomic(&p.tmp, options.durability, |out| {
                        fsutil::write_all(out, index.as_bytes(), &p.path)
                    })?;
                    pending.push(p);
                    files
                }
                _ => {
                    let p = Pending::new(dir, SINGLE_FILES[0], &save_id);
                    st::save_file(&p.tmp, tensors, Some(&metadata), options.write())?;
                    pending.push(p);
                    vec![SINGLE_FILES[0].to_string()]
                }
            }
        };
        let mut config = config.clone();
        if let Some(object) = config.as_object_mut() {
            object.insert(CONFIG_SAVE_ID_KEY.to_string(), save_id.clone().into());
        }
        let text = serde_json::to_string_pretty(&config)
            .map_err(|e| CoreError::invalid_argument(e.to_string()))?;
        let p = Pending::new(dir, CONFIG_FILE, &save_id);
        fsutil::write_atomic(&p.tmp, options.durability, |out| {
            fsutil::write_all(out, text.as_bytes(), &p.path)
        })?;
        // config.json goes in first: discovery's file right after it is the commit.
        pending.insert(0, p);
        for p in pending.drain(..) {
            p.commit()?;
        }
        remove_stale_weights(dir, &written)?;
        if options.durability == fsutil::Durability::Sync {
            // The renames, and the removals: a stale weight file that came back could
            // shadow the new ones.
            fsutil::sync_dir(dir)?;
        }
        Ok(written)
    })();
    // A failed save leaves no temporary files of its own (the old model stays as it was).
    for p in pending {
        let _ = std::fs::remove_file(&p.tmp);
    }
    result
}

#[cfg(feature = "fs")]
/// Where a save with id `save_id` writes `name` before renaming it into place.
fn pending_path(dir: &Path, name: &str, save_id: &str) -> PathBuf {
    dir.join(format!(".{name}.{save_id}{PENDING_SUFFIX}"))
}

#[cfg(feature = "fs")]
/// A file of a save written whole under a temporary name (`.NAME.<save id>.pending`),
/// renamed to `NAME` by [`Pending::commit`].
struct Pending {
    tmp: PathBuf,
    path: PathBuf,
}

#[cfg(feature = "fs")]
const PENDING_SUFFIX: &str = ".pending";

#[cfg(feature = "fs")]
impl Pending {
    fn new(dir: &Path, name: &str, save_id: &str) -> Pending {
        Pending {
            tmp: pending_path(dir, name, save_id),
            path: dir.join(name),
        }
    }

    fn commit(&self) -> Result<()> {
        std::fs::rename(&self.tmp, &self.path).map_err(|e| CoreError::io(e, &self.path))
    }
}

#[cfg(feature = "fs")]
/// Write the shards (each atomically, under names of this save) and return their names,
/// plus the index text (written by the caller).
fn save_shards(
    dir: &Path,
    tensors: &[TensorView<'_>],
    max: u64,
    metadata: &BTreeMap<String, String>,
    save_id: &str,
    options: &SaveOptions,
) -> Result<(Vec<String>, String)> {
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
    let mut files = Vec::with_capacity(count);
    let mut total_size = 0u64;
    for (i, group) in groups.into_iter().enumerate() {
        let name = format!("model-{:05}-of-{:05}-{save_id}.safetensors", i + 1, count);
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
        "metadata": { "total_size": total_size, SAVE_ID_KEY: save_id },
        "weight_map": weight_map,
    });
    let text = serde_json::to_string_pretty(&index)
        .map_err(|e| CoreError::invalid_argument(e.to_string()))?;
    let mut all = files;
    all.push(INDEX_FILE.to_string());
    Ok((all, text))
}

#[cfg(feature = "fs")]
/// Whether `name` is a weight file of some layout (or a shard of any save).
fn is_weight_file(name: &str) -> bool {
    SINGLE_FILES.contains(&name)
        || name == INDEX_FILE
        || name == MLX_FILE
        || (name.starts_with("model-") && name.contains("-of-") && name.ends_with(".safetensors"))
}

#[cfg(feature = "fs")]
/// Remove weight files of other layouts and shards not in the new index — first those that
/// discovery would pick before the new weights, so they stop shadowing them at once — and
/// the `.pending` files of interrupted saves.
fn remove_stale_weights(dir: &Path, written: &[String]) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| CoreError::io(e, dir))?;
    let mut stale: Vec<(usize, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pending = name.starts_with('.') && name.ends_with(PENDING_SUFFIX);
        if pending || (is_weight_file(&name) && !written.contains(&name)) {
            let rank = DISCOVERY_ORDER
                .iter()
                .position(|d| *d == name)
                .unwrap_or(DISCOVERY_ORDER.len());
            stale.push((rank, entry.path()));
        }
    }
    stale.sort();
    for (_, path) in &stale {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            // Gone already (another process cleaned up): what we wanted.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(CoreError::io(e, path)),
        }
    }
    Ok(())
}

#[cfg(feature = "fs")]
/// The names discovery looks for, first match first.
const DISCOVERY_ORDER: [&str; 4] = [
    layout::DISCOVERY[0].file,
    layout::DISCOVERY[1].file,
    layout::DISCOVERY[2].file,
    layout::DISCOVERY[3].file,
];

#[cfg(all(test, feature = "fs"))]
mod tests;
