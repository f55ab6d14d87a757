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
use crate::format::safetensors::{self as st, Backend, SafeTensors, TensorBytes, TensorInfo};
use crate::fsutil;
use crate::tensor::TensorView;
use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};

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
}

/// The sharded index file.
#[derive(serde::Deserialize)]
struct ShardIndex {
    #[serde(default)]
    #[allow(dead_code)]
    metadata: Option<serde_json::Value>,
    weight_map: BTreeMap<String, String>,
}

/// Resolve `name` (as written in an index) inside `dir`, refusing anything that could
/// escape it: absolute paths, `..`, and symlinks that lead outside.
pub fn safe_join(dir: &Path, name: &str) -> Result<PathBuf> {
    let rel = Path::new(name);
    let unsafe_path = || {
        CoreError::unsafe_path(format!(
            "'{name}' is not a plain path inside the model directory"
        ))
        .with_path(dir)
    };
    if name.is_empty()
        || rel.is_absolute()
        || name.contains('\\')
        || name.contains('\0')
        || rel.components().any(|c| !matches!(c, Component::Normal(_)))
    {
        return Err(unsafe_path());
    }
    let joined = dir.join(rel);
    // A symlink may still point elsewhere: compare canonical forms when the file exists.
    if let (Ok(real), Ok(base)) = (joined.canonicalize(), dir.canonicalize()) {
        if !real.starts_with(&base) {
            return Err(unsafe_path());
        }
    }
    Ok(joined)
}

fn file_size(path: &Path) -> Result<u64> {
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|e| CoreError::io(e, path))
}

impl ModelDir {
    /// Discover, open and validate a model directory. `progress` is called once per weight
    /// file (and more often while a large weights.mlx is parsed).
    pub fn open(dir: &Path, progress: &mut dyn FnMut(LoadProgress)) -> Result<ModelDir> {
        let meta = std::fs::metadata(dir).map_err(|e| CoreError::io(e, dir))?;
        if !meta.is_dir() {
            return Err(CoreError::invalid_argument("not a directory").with_path(dir));
        }
        let config_path = dir.join(CONFIG_FILE);
        let config_text = fsutil::read_regular(&config_path, "config.json")?;
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

        for name in SINGLE_FILES {
            let path = dir.join(name);
            if path.is_file() {
                let total = file_size(&path)?;
                let source = SafeTensors::open(&path, Backend::Mmap)?;
                progress(LoadProgress {
                    file: name.to_string(),
                    loaded_bytes: total,
                    total_bytes: total,
                });
                return ModelDir::assemble(
                    dir,
                    config,
                    WeightFormat::SafeTensors,
                    vec![name.to_string()],
                    vec![source],
                );
            }
        }
        let index_path = dir.join(INDEX_FILE);
        if index_path.is_file() {
            return ModelDir::open_sharded(dir, config, &index_path, progress);
        }
        let mlx_path = dir.join(MLX_FILE);
        if mlx_path.is_file() {
            let weights = mlx::read_mlx_with_progress(&mlx_path, &mut |loaded, total| {
                progress(LoadProgress {
                    file: MLX_FILE.to_string(),
                    loaded_bytes: loaded,
                    total_bytes: total,
                })
            })?;
            // Serve MLX tensors through the same engine: an in-memory SafeTensors buffer.
            let bytes = st::serialize(&weights.tensors, weights.metadata.as_ref())
                .map_err(|e| e.with_path(&mlx_path))?;
            drop(weights);
            let source = SafeTensors::from_bytes(bytes).map_err(|e| e.with_path(&mlx_path))?;
            return ModelDir::assemble(
                dir,
                config,
                WeightFormat::Mlx,
                vec![MLX_FILE.to_string()],
                vec![source],
            );
        }
        Err(CoreError::no_weights(format!(
            "no weight file found; looked for {}, {}, {} and {}",
            SINGLE_FILES[0], SINGLE_FILES[1], INDEX_FILE, MLX_FILE
        ))
        .with_path(dir))
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
        let text = fsutil::read_regular(index_path, "a sharded index")?;
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
        )
    }

    fn assemble(
        dir: &Path,
        config: serde_json::Value,
        format: WeightFormat,
        files: Vec<String>,
        sources: Vec<SafeTensors>,
    ) -> Result<ModelDir> {
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

/// Write `config.json` and the weights to `dir` (created if missing), each file atomically.
/// Returns the weight files written. Weight files of the other layouts that would take
/// precedence in discovery (or be mistaken for this model's) are removed afterwards, so the
/// directory loads back as exactly what was saved.
pub fn save_model_dir(
    dir: &Path,
    config: &serde_json::Value,
    tensors: &[TensorView<'_>],
    options: &SaveOptions,
) -> Result<Vec<String>> {
    fsutil::create_dir_all_with(dir, options.durability)?;
    let written: Vec<String> = if options.mlx {
        mlx::save_mlx_with(
            &dir.join(MLX_FILE),
            options.durability,
            tensors,
            options.metadata.as_ref(),
        )?;
        vec![MLX_FILE.to_string()]
    } else {
        let total: u64 = tensors.iter().map(|t| t.data.len() as u64).sum();
        match options.max_shard_bytes {
            Some(max) if total > max => save_shards(dir, tensors, max, options)?,
            _ => {
                st::save_file_with(
                    &dir.join(SINGLE_FILES[0]),
                    tensors,
                    options.metadata.as_ref(),
                    options.durability,
                )?;
                vec![SINGLE_FILES[0].to_string()]
            }
        }
    };
    let config_path = dir.join(CONFIG_FILE);
    let text = serde_json::to_string_pretty(config)
        .map_err(|e| CoreError::invalid_argument(e.to_string()))?;
    fsutil::write_atomic_with(&config_path, options.durability, |out| {
        fsutil::write_all(out, text.as_bytes(), &config_path)
    })?;
    if remove_stale_weights(dir, &written)? && options.durability == fsutil::Durability::Sync {
        // The removals too: a stale weight file that came back could shadow the new ones.
        fsutil::sync_dir(dir)?;
    }
    Ok(written)
}

fn save_shards(
    dir: &Path,
    tensors: &[TensorView<'_>],
    max: u64,
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
    let mut files = Vec::with_capacity(count);
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
        st::save_file_with(
            &dir.join(&name),
            &views,
            options.metadata.as_ref(),
            options.durability,
        )?;
        files.push(name);
    }
    let index = serde_json::json!({
        "metadata": { "total_size": total_size },
        "weight_map": weight_map,
    });
    let path = dir.join(INDEX_FILE);
    let text = serde_json::to_string_pretty(&index)
        .map_err(|e| CoreError::invalid_argument(e.to_string()))?;
    fsutil::write_atomic_with(&path, options.durability, |out| {
        fsutil::write_all(out, text.as_bytes(), &path)
    })?;
    let mut all = files;
    all.push(INDEX_FILE.to_string());
    Ok(all)
}

/// Remove weight files of other layouts, and shards not in the new index.
/// Whether anything was removed.
fn remove_stale_weights(dir: &Path, written: &[String]) -> Result<bool> {
    let entries = std::fs::read_dir(dir).map_err(|e| CoreError::io(e, dir))?;
    let mut removed = false;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_weight = SINGLE_FILES.contains(&name.as_str())
            || name == INDEX_FILE
            || name == MLX_FILE
            || (name.starts_with("model-")
                && name.contains("-of-")
                && name.ends_with(".safetensors"));
        if is_weight && !written.contains(&name) {
            std::fs::remove_file(entry.path()).map_err(|e| CoreError::io(e, entry.path()))?;
            removed = true;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests;
