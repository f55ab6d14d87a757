//! Pretrained model directories: `config.json` plus weights in one of the layouts people
//! ship (first match wins):
//!
//! 1. `weights.safetensors`
//! 2. `model.safetensors`
//! 3. `model.safetensors.index.json` — Hugging Face shards, `{"metadata": {...},
//!    "weight_map": {tensor: shard}}`; every shard is mapped lazily.
//! 4. `weights.mlx` — MLX-Node's JSON fallback (parsed once, held in memory).
//!
//! Every tensor is then served from a [`SafeTensors`] source, so callers never care which
//! layout it came from.

use crate::error::{CoreError, Result};
use crate::format::mlx;
use crate::format::safetensors::{
    self as st, Backend, Memory, SafeTensors, TensorBytes, TensorInfo,
};
use crate::fsutil;
use crate::tensor::TensorView;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

pub const CONFIG_FILE: &str = "config.json";
pub const SINGLE_FILES: [&str; 2] = ["weights.safetensors", "model.safetensors"];
pub const INDEX_FILE: &str = "model.safetensors.index.json";
pub const MLX_FILE: &str = "weights.mlx";

/// Which layout the weights came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightFormat {
    SafeTensors,
    ShardedSafeTensors,
    Mlx,
}

impl WeightFormat {
    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::SafeTensors => "safetensors",
            WeightFormat::ShardedSafeTensors => "sharded-safetensors",
            WeightFormat::Mlx => "mlx",
        }
    }
}

/// Progress of loading: called as each weight file is opened or parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadProgress {
    /// The file, relative to the model directory.
    pub file: String,
    pub loaded_bytes: u64,
    pub total_bytes: u64,
}

/// A loaded model directory.
pub struct ModelDir {
    dir: PathBuf,
    config: serde_json::Value,
    format: WeightFormat,
    files: Vec<String>,
    sources: Vec<SafeTensors>,
    /// Tensor name → (source index), in serving order.
    order: Vec<(String, usize)>,
    lookup: HashMap<String, usize>,
    /// The save (see [`save_model_dir`]) the weights say they belong to.
    save_id: Option<String>,
}

/// The sharded index file.
#[derive(serde::Deserialize)]
struct ShardIndex {
    #[serde(default)]
    metadata: Option<serde_json::Value>,
    weight_map: BTreeMap<String, String>,
}

/// Resolve `name` (a file name as written in an index) inside `dir`, by its spelling alone:
/// it must be a relative path of plain names separated by single `/` — not empty, not
/// absolute, no `..`, no `.` or empty components (`a/./b`, `a//b`, a trailing `/`), no
/// backslash or NUL, no `C:` / `scheme:` first name — or it is ERR_UNSAFE_PATH. The same rule applies to
/// remote directories (lib/remote.js), so one index means the same files everywhere.
///
/// Symlinks in the directory are followed: they are the directory owner's choice, not the
/// index's (the Hugging Face cache links every file of `snapshots/<rev>/` into `blobs/`),
/// as Python's loaders do.
pub fn safe_join(dir: &Path, name: &str) -> Result<PathBuf> {
    let unsafe_path = || {
        CoreError::unsafe_path(format!(
            "'{name}' is not a plain relative path inside the model directory"
        ))
        .with_path(dir)
    };
    let plain = |part: &str| {
        !part.is_empty() && part != "." && part != ".." && !part.contains(['\\', '\0'])
    };
    // `C:x` (a drive) or `scheme:x` (a URL, for remote directories) as the first name.
    let first = name.split('/').next().unwrap_or("");
    let scheme = first.split_once(':').is_some_and(|(s, _)| {
        s.starts_with(|c: char| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    });
    if scheme || !name.split('/').all(plain) || Path::new(name).is_absolute() {
        return Err(unsafe_path());
    }
    Ok(dir.join(name))
}

fn file_size(path: &Path) -> Result<u64> {
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|e| CoreError::io(e, path))
}

/// The most of `config.json` read (ERR_INVALID_MODEL past it): real ones are a few KiB.
pub const CONFIG_MAX_BYTES: u64 = 16 << 20;
/// The most of a sharded index read (ERR_INVALID_MODEL past it): the largest public ones
/// (~90,000 tensors) are under 10 MiB.
pub const INDEX_MAX_BYTES: u64 = 64 << 20;
/// How often [`ModelDir::open`] tries a directory written by [`save_model_dir`] whose files
/// disagree (a save under way), waiting 2, 4, … 32 ms in between.
const OPEN_ATTEMPTS: u32 = 6;

/// A JSON file of a model directory, read with a hard cap (a file can say it is regular and
/// have no real size, as `/proc/self/pagemap` behind a symlink does).
fn read_json_file(path: &Path, what: &str, cap: u64) -> Result<Vec<u8>> {
    fsutil::read_regular_capped(path, what, cap, |n| {
        CoreError::invalid_model(format!(
            "{what} is larger than {} MiB ({n} bytes or more), the most read",
            cap >> 20
        ))
        .with_path(path)
    })
}

/// Take [`CONFIG_SAVE_ID_KEY`] out of a config: the save it belongs to.
fn take_config_save_id(config: &mut serde_json::Value) -> Option<String> {
    match config.as_object_mut()?.remove(CONFIG_SAVE_ID_KEY)? {
        serde_json::Value::String(id) => Some(id),
        _ => None,
    }
}

fn save_mismatch(what: &str, theirs: &str, ours: &str) -> CoreError {
    CoreError::invalid_model(format!(
        "{what} is from save {theirs} but {ours}: a save into this directory is under way or \
         was interrupted (load it again, or save the model again)"
    ))
}

impl ModelDir {
    /// Discover, open and validate a model directory. `progress` is called once per weight
    /// file (and more often while a large weights.mlx is parsed). A directory written by
    /// [`save_model_dir`] whose config and weights belong to different saves is tried again a
    /// few times (a save beside us finishes within milliseconds), then refused.
    pub fn open(dir: &Path, progress: &mut dyn FnMut(LoadProgress)) -> Result<ModelDir> {
        let mut attempt = 0;
        loop {
            match ModelDir::open_once(dir, progress) {
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
        progress: &mut dyn FnMut(LoadProgress),
    ) -> std::result::Result<ModelDir, (CoreError, bool)> {
        let mut config = ModelDir::read_config(dir).map_err(|e| (e, false))?;
        let config_save = take_config_save_id(&mut config);
        let ours = config_save.is_some();
        ModelDir::discover(dir, config, config_save.as_deref(), progress).map_err(|e| (e, ours))
    }

    fn read_config(dir: &Path) -> Result<serde_json::Value> {
        let meta = std::fs::metadata(dir).map_err(|e| CoreError::io(e, dir))?;
        if !meta.is_dir() {
            return Err(CoreError::invalid_argument("not a directory").with_path(dir));
        }
        let config_path = dir.join(CONFIG_FILE);
        let config_text = read_json_file(&config_path, CONFIG_FILE, CONFIG_MAX_BYTES)?;
        let config: serde_json::Value = serde_json::from_slice(&config_text).map_err(|e| {
            CoreError::invalid_model(format!("config.json is not valid JSON: {e}"))
                .with_path(&config_path)
        })?;
        if !config.is_object() {
            return Err(
                CoreError::invalid_model("config.json must hold a JSON object")
                    .with_path(&config_path),
            );
        }
        Ok(config)
    }

    /// Find the weights and open them: the first of [`DISCOVERY_ORDER`] that exists. When
    /// the config names its save (see [`save_model_dir`]), the first that belongs to that
    /// save, looking also at the save's files not yet renamed into place
    /// (`.NAME.<id>.pending`, complete before the config was renamed): a save killed between
    /// its renames, or seen by a reader between them, loads whole. Weights without a save id
    /// are taken as they are (written by another tool: the owner's choice).
    fn discover(
        dir: &Path,
        config: serde_json::Value,
        config_save: Option<&str>,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<ModelDir> {
        let mut other_save: Option<ModelDir> = None;
        for name in DISCOVERY_ORDER {
            let mut paths = vec![dir.join(name)];
            if let Some(save) = config_save {
                paths.push(Pending::new(dir, name, save).tmp);
            }
            for path in paths {
                if !path.is_file() {
                    continue;
                }
                let model = ModelDir::open_layout(dir, config.clone(), name, &path, progress)?;
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
            return Err(save_mismatch(
                &what,
                &found,
                &format!("config.json is from save {config_save}"),
            )
            .with_path(dir.join(CONFIG_FILE)));
        }
        Err(CoreError::no_weights(format!(
            "no weight file found; looked for {}, {}, {} and {}",
            SINGLE_FILES[0], SINGLE_FILES[1], INDEX_FILE, MLX_FILE
        ))
        .with_path(dir))
    }

    /// Open the weights of the layout `name` (one of [`DISCOVERY_ORDER`]) stored at `path`.
    fn open_layout(
        dir: &Path,
        config: serde_json::Value,
        name: &str,
        path: &Path,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<ModelDir> {
        if name == INDEX_FILE {
            return ModelDir::open_sharded(dir, config, path, progress);
        }
        if name == MLX_FILE {
            let weights = mlx::read_mlx_with_progress(path, &mut |loaded, total| {
                progress(LoadProgress {
                    file: MLX_FILE.to_string(),
                    loaded_bytes: loaded,
                    total_bytes: total,
                })
            })?;
            // Serve MLX tensors through the same engine: an in-memory SafeTensors buffer.
            let bytes = st::serialize(&weights.tensors, weights.metadata.as_ref())
                .map_err(|e| e.with_path(path))?;
            drop(weights);
            let source = SafeTensors::from_bytes(bytes).map_err(|e| e.with_path(path))?;
            return ModelDir::assemble(
                dir,
                config,
                WeightFormat::Mlx,
                vec![MLX_FILE.to_string()],
                vec![source],
                None,
            );
        }
        let total = file_size(path)?;
        let source = SafeTensors::open(path, Backend::Mmap)?;
        progress(LoadProgress {
            file: name.to_string(),
            loaded_bytes: total,
            total_bytes: total,
        });
        ModelDir::assemble(
            dir,
            config,
            WeightFormat::SafeTensors,
            vec![name.to_string()],
            vec![source],
            None,
        )
    }

    /// Open the shards of a `*.index.json` on its own (no config.json needed): for
    /// inspection and conversion of a sharded checkpoint.
    pub fn open_index(
        index_path: &Path,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<ModelDir> {
        let dir = index_path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        ModelDir::open_sharded(dir, serde_json::json!({}), index_path, progress)
    }

    fn open_sharded(
        dir: &Path,
        config: serde_json::Value,
        index_path: &Path,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<ModelDir> {
        let text = read_json_file(index_path, "a sharded index", INDEX_MAX_BYTES)?;
        let index: ShardIndex = serde_json::from_slice(&text).map_err(|e| {
            CoreError::invalid_model(format!(
                "not a valid sharded index ({{\"weight_map\": {{tensor: file}}}}): {e}"
            ))
            .with_path(index_path)
        })?;
        // Shards in file-name order (model-00001-of-…, model-00002-of-…), each once.
        let shard_names: std::collections::BTreeSet<&String> = index.weight_map.values().collect();
        let pairs: Vec<(String, PathBuf)> = shard_names
            .into_iter()
            .map(|name| {
                Ok((
                    name.clone(),
                    safe_join(dir, name).map_err(|e| e.with_path(index_path))?,
                ))
            })
            .collect::<Result<_>>()?;
        let mut total = 0u64;
        for (_, p) in &pairs {
            total += file_size(p).map_err(|e| {
                if e.code() == "ERR_NOT_FOUND" {
                    CoreError::invalid_model(format!("shard listed in {INDEX_FILE} is missing"))
                        .with_path(p)
                } else {
                    e
                }
            })?;
        }
        let mut loaded = 0u64;
        let mut sources = Vec::with_capacity(pairs.len());
        for (name, path) in &pairs {
            let source = SafeTensors::open(path, Backend::Mmap).map_err(|e| {
                let shard = e.path().unwrap_or_default().to_string();
                let mut err = CoreError::invalid_model(format!(
                    "shard '{name}' failed validation: [{}] {}",
                    e.code(),
                    e.detail()
                ))
                .with_path(if shard.is_empty() {
                    path.display().to_string()
                } else {
                    shard
                });
                if let Some(t) = e.tensor() {
                    err = err.with_tensor(t);
                }
                err
            })?;
            loaded += source.file_len();
            progress(LoadProgress {
                file: name.clone(),
                loaded_bytes: loaded,
                total_bytes: total,
            });
            sources.push(source);
        }
        let files: Vec<String> = pairs.iter().map(|(n, _)| n.clone()).collect();
        // Shards of another save than the index's (see `save_model_dir`) are never mixed in.
        let index_save = index
            .metadata
            .as_ref()
            .and_then(|m| m.get(SAVE_ID_KEY))
            .and_then(|v| v.as_str())
            .map(str::to_string);
        if let Some(index_save) = &index_save {
            for (name, source) in files.iter().zip(&sources) {
                if let Some(shard_save) = source.metadata().and_then(|m| m.get(SAVE_ID_KEY)) {
                    if shard_save != index_save {
                        return Err(save_mismatch(
                            &format!("shard '{name}'"),
                            shard_save,
                            &format!("{INDEX_FILE} is from save {index_save}"),
                        )
                        .with_path(dir.join(name)));
                    }
                }
            }
        }
        // Every tensor the index lists must be in the shard it names.
        for (tensor, file) in &index.weight_map {
            let i = files.iter().position(|f| f == file).unwrap_or(usize::MAX);
            if sources
                .get(i)
                .is_none_or(|s| s.header().get(tensor).is_none())
            {
                return Err(CoreError::invalid_model(format!(
                    "{INDEX_FILE} places this tensor in '{file}', which does not hold it"
                ))
                .with_tensor(tensor)
                .with_path(dir.join(file)));
            }
        }
        // Tensors in a shard but absent from the index are served too (as loaders do).
        ModelDir::assemble(
            dir,
            config,
            WeightFormat::ShardedSafeTensors,
            files,
            sources,
            index_save,
        )
    }

    /// A model of `sources`; `save_id` is the index's, or else the one weight file's.
    fn assemble(
        dir: &Path,
        config: serde_json::Value,
        format: WeightFormat,
        files: Vec<String>,
        sources: Vec<SafeTensors>,
        save_id: Option<String>,
    ) -> Result<ModelDir> {
        let save_id = save_id.or_else(|| match &sources[..] {
            [one] => one.metadata()?.get(SAVE_ID_KEY).cloned(),
            _ => None,
        });
        let mut order = Vec::new();
        let mut lookup = HashMap::new();
        for (i, source) in sources.iter().enumerate() {
            for t in source.tensors() {
                if let Some(&prev) = lookup.get(&t.name) {
                    return Err(CoreError::invalid_model(format!(
                        "tensor is stored in two shards: '{}' and '{}'",
                        files[prev], files[i]
                    ))
                    .with_tensor(&t.name)
                    .with_path(dir.join(&files[i])));
                }
                lookup.insert(t.name.clone(), i);
                order.push((t.name.clone(), i));
            }
        }
        Ok(ModelDir {
            dir: dir.to_path_buf(),
            config,
            format,
            files,
            sources,
            order,
            lookup,
            save_id,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn config(&self) -> &serde_json::Value {
        &self.config
    }
    pub fn format(&self) -> WeightFormat {
        self.format
    }
    /// Weight files used, relative to the directory.
    pub fn files(&self) -> &[String] {
        &self.files
    }
    pub fn tensor_names(&self) -> impl Iterator<Item = &str> {
        self.order.iter().map(|(n, _)| n.as_str())
    }
    pub fn num_parameters(&self) -> u64 {
        self.sources
            .iter()
            .map(|s| s.header().num_parameters())
            .sum()
    }

    /// The source holding `name`, or ERR_NOT_FOUND.
    pub fn source(&self, name: &str) -> Result<&SafeTensors> {
        self.lookup
            .get(name)
            .and_then(|&i| self.sources.get(i))
            .ok_or_else(|| {
                CoreError::not_found("no such tensor in the model")
                    .with_tensor(name)
                    .with_path(&self.dir)
            })
    }

    pub fn info(&self, name: &str) -> Result<&TensorInfo> {
        self.source(name)?.info(name)
    }

    pub fn bytes(&self, name: &str) -> Result<(&TensorInfo, TensorBytes<'_>)> {
        let source = self.source(name)?;
        let info = source.info(name)?;
        Ok((info, source.bytes(info)?))
    }

    pub fn view(&self, name: &str) -> Result<TensorView<'_>> {
        self.source(name)?.view(name)
    }

    /// Drop this process's resident pages of tensor `name` when its file is mapped (see
    /// [`crate::buffer::release_pages`]): for a conversion that opened the directory itself
    /// and is done with the tensor, so its RSS holds one tensor, not the whole mapped model.
    /// No view of the tensor may have been written to (none is handed to JS from here).
    pub fn release(&self, name: &str) {
        let Ok((_, bytes)) = self.bytes(name) else {
            return;
        };
        if let TensorBytes::Shared { memory, start, len } = bytes {
            if let Memory::Mapped(_) = memory.as_ref() {
                crate::buffer::release_pages(&memory[start..start + len]);
            }
        }
    }

    /// Every tensor, borrowed from the mapped files.
    pub fn views(&self) -> Result<Vec<TensorView<'_>>> {
        self.order.iter().map(|(n, _)| self.view(n)).collect()
    }

    /// Write this model to `dir` (see [`save_model_dir`]).
    pub fn save(&self, dir: &Path, options: &SaveOptions) -> Result<Vec<String>> {
        save_model_dir(dir, &self.config, &self.views()?, options)
    }
}

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

/// The `__metadata__` key (and index `metadata` key) naming the save a weight file belongs
/// to, and the `config.json` key naming the save that config belongs to (underscored, as
/// Hugging Face's own bookkeeping keys are; [`ModelDir::config`] leaves it out).
pub const SAVE_ID_KEY: &str = "safetensors_node_save_id";
pub const CONFIG_SAVE_ID_KEY: &str = "_safetensors_node_save_id";

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
    fsutil::create_dir_all_with(dir, options.durability)?;
    let save_id = format!("{:016x}", fsutil::random_u64());
    let mut metadata = options.metadata.clone().unwrap_or_default();
    metadata.insert(SAVE_ID_KEY.to_string(), save_id.clone());
    // Files renamed into place by `commit`, in order, once everything is written.
    let mut pending: Vec<Pending> = Vec::new();
    let result = (|| {
        let written: Vec<String> = if options.mlx {
            let p = Pending::new(dir, MLX_FILE, &save_id);
            mlx::save_mlx_with(&p.tmp, options.durability, tensors, Some(&metadata))?;
            pending.push(p);
            vec![MLX_FILE.to_string()]
        } else {
            let total: u64 = tensors.iter().map(|t| t.data.len() as u64).sum();
            match options.max_shard_bytes {
                Some(max) if total > max => {
                    let (files, index) =
                        save_shards(dir, tensors, max, &metadata, &save_id, options)?;
                    let p = Pending::new(dir, INDEX_FILE, &save_id);
                    fsutil::write_atomic_with(&p.tmp, options.durability, |out| {
                        fsutil::write_all(out, index.as_bytes(), &p.path)
                    })?;
                    pending.push(p);
                    files
                }
                _ => {
                    let p = Pending::new(dir, SINGLE_FILES[0], &save_id);
                    st::save_file_with(&p.tmp, tensors, Some(&metadata), options.durability)?;
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
        fsutil::write_atomic_with(&p.tmp, options.durability, |out| {
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

/// A file of a save written whole under a temporary name (`.NAME.<save id>.pending`),
/// renamed to `NAME` by [`Pending::commit`].
struct Pending {
    tmp: PathBuf,
    path: PathBuf,
}

const PENDING_SUFFIX: &str = ".pending";

impl Pending {
    fn new(dir: &Path, name: &str, save_id: &str) -> Pending {
        Pending {
            tmp: dir.join(format!(".{name}.{save_id}{PENDING_SUFFIX}")),
            path: dir.join(name),
        }
    }

    fn commit(&self) -> Result<()> {
        std::fs::rename(&self.tmp, &self.path).map_err(|e| CoreError::io(e, &self.path))
    }
}

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
        st::save_file_with(&dir.join(&name), &views, Some(metadata), options.durability)?;
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

/// Whether `name` is a weight file of some layout (or a shard of any save).
fn is_weight_file(name: &str) -> bool {
    SINGLE_FILES.contains(&name)
        || name == INDEX_FILE
        || name == MLX_FILE
        || (name.starts_with("model-") && name.contains("-of-") && name.ends_with(".safetensors"))
}

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

/// The names discovery looks for, first match first.
const DISCOVERY_ORDER: [&str; 4] = [SINGLE_FILES[0], SINGLE_FILES[1], INDEX_FILE, MLX_FILE];

#[cfg(test)]
mod tests;
