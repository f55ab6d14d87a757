//! A sharded checkpoint: a JSON index (`{"weight_map": {tensor: shard}}`) and the shard
//! files beside it, served as one [`TensorSource`] made of a list of sources.
//!
//! Each shard is opened by what its bytes are (SafeTensors for `model.safetensors.index.json`;
//! any registered format otherwise), lazily mapped; the rules that tie shards to their index
//! are [`super::layout`]'s, shared with remote directories ([`ShardedSource::assemble`] serves
//! shards opened anywhere).

use super::layout::{self, ShardIndex, ShardListing};
use crate::error::{CoreError, Result};
#[cfg(feature = "fs")]
use crate::format::detect;
#[cfg(feature = "fs")]
use crate::memory::Backend;
use crate::memory::TensorBytes;
#[cfg(feature = "fs")]
use crate::source::OpenOptions;
use crate::source::{
    F32Decoder, Metadata, SourceFile, SourceTensor, TensorList, TensorSource, WeightsFormat,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The shards of an index, served as one source.
pub struct ShardedSource {
    format: WeightsFormat,
    /// The index file.
    path: PathBuf,
    files: Vec<SourceFile>,
    /// Shared: a remote directory also reads a shard's tensors by the shard's own ranges.
    shards: Vec<Arc<dyn TensorSource>>,
    tensors: TensorList,
    /// The shard of each tensor, in the order of `tensors`.
    shard_of: Vec<usize>,
}

impl ShardedSource {
    #[cfg(feature = "fs")]
    /// Open the index at `index_path` and every shard it names (relative to the index's
    /// directory). `progress(shard, bytes opened, bytes of all shards)` is called as each
    /// shard is opened.
    pub fn open(
        index_path: &Path,
        backend: Backend,
        progress: &mut dyn FnMut(&str, u64, u64),
    ) -> Result<ShardedSource> {
        let dir = index_path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let text = super::read_json_file(index_path, "a sharded index", layout::INDEX_MAX_BYTES)?;
        let index = layout::parse_index(&text).map_err(|e| e.with_path(index_path))?;
        let paths: Vec<PathBuf> = index
            .shards
            .iter()
            .map(|name| super::safe_join(dir, name).map_err(|e| e.with_path(index_path)))
            .collect::<Result<_>>()?;
        let mut sizes = Vec::with_capacity(paths.len());
        for p in &paths {
            let size = std::fs::metadata(p).map(|m| m.len()).map_err(|e| {
                let e = CoreError::io(e, p);
                if e.code() == "ERR_NOT_FOUND" {
                    layout::shard_missing().with_path(p)
                } else {
                    e
                }
            })?;
            sizes.push(size);
        }
        let total: u64 = sizes.iter().sum();
        let mut loaded = 0u64;
        let mut shards: Vec<Arc<dyn TensorSource>> = Vec::with_capacity(paths.len());
        for ((name, path), size) in index.shards.iter().zip(&paths).zip(&sizes) {
            let opened = crate::format::detect_file(path).and_then(|detected| {
                // A shard holds tensors. One that is itself an index would be opened as
                // one, naming shards in turn: an index naming itself recursed until the
                // stack overflowed (the shard_index fuzz target).
                if detected == detect::Detected::Format(WeightsFormat::ShardedSafeTensors) {
                    return Err(CoreError::invalid_model(
                        "this shard is itself a sharded index, not a file of tensors",
                    ));
                }
                crate::format::open_detected(
                    path,
                    detected,
                    &mut OpenOptions::with_backend(backend),
                )
            });
            let shard = opened.map_err(|e| {
                if e.kind() == crate::error::ErrorKind::UnknownFormat {
                    // Not a damaged shard: one of a format this build does not read.
                    return e;
                }
                let at = e
                    .path()
                    .map(PathBuf::from)
                    .unwrap_or_else(|| path.to_path_buf());
                layout::shard_failed(name, e.code(), e.detail(), e.tensor()).with_path(at)
            })?;
            loaded += size;
            progress(name, loaded, total);
            shards.push(Arc::from(shard));
        }
        let files = index
            .shards
            .iter()
            .zip(&sizes)
            .map(|(name, &bytes)| SourceFile {
                name: name.clone(),
                bytes,
            })
            .collect();
        ShardedSource::assemble(index_path, dir, &index, files, shards)
    }

    /// The source of `shards` (opened in [`ShardIndex::shards`] order, `files` their names
    /// and sizes), checked against `index` ([`layout::assemble`]); errors name the shard
    /// concerned as a path under `dir`.
    pub fn assemble(
        index_path: &Path,
        dir: &Path,
        index: &ShardIndex,
        files: Vec<SourceFile>,
        shards: Vec<Arc<dyn TensorSource>>,
    ) -> Result<ShardedSource> {
        let listings: Vec<ShardListing> = shards
            .iter()
            .map(|s| ShardListing {
                tensors: s.tensors().iter().map(|t| t.name.as_str()).collect(),
            })
            .collect();
        let order = layout::assemble(index, &listings)
            .map_err(|(e, shard)| e.with_path(dir.join(shard)))?;
        let shard_of: Vec<usize> = order.iter().map(|&(_, i)| i).collect();
        let listed: Vec<SourceTensor> = order
            .iter()
            .filter_map(|&(name, i)| shards[i].tensor(name).cloned())
            .collect();
        let tensors = TensorList::new(listed, |n| {
            CoreError::invalid_model("tensor listed twice").with_tensor(n)
        })?;
        let mut formats = shards.iter().map(|s| s.format());
        let format = match formats.next() {
            None | Some(WeightsFormat::SafeTensors) => WeightsFormat::ShardedSafeTensors,
            Some(f) => f,
        };
        if shards.iter().any(|s| {
            let f = s.format();
            f != format
                && !(f == WeightsFormat::SafeTensors && format == WeightsFormat::ShardedSafeTensors)
        }) {
            return Err(CoreError::invalid_model(
                "the shards of one index must all be of one format",
            )
            .with_path(index_path));
        }
        drop(listings);
        Ok(ShardedSource {
            format,
            path: index_path.to_path_buf(),
            files,
            shards,
            tensors,
            shard_of,
        })
    }

    /// Which shard holds `name`, by its place in the order the shards were opened.
    pub fn shard_of(&self, name: &str) -> Option<usize> {
        self.tensors.position(name).map(|i| self.shard_of[i])
    }

    fn shard(&self, name: &str) -> Result<&dyn TensorSource> {
        match self.shard_of(name) {
            Some(i) => Ok(self.shards[i].as_ref()),
            None => Err(CoreError::not_found("no such tensor in the model")
                .with_tensor(name)
                .with_path(&self.path)),
        }
    }

    /// The shards, in the order they were opened.
    pub fn shards(&self) -> &[Arc<dyn TensorSource>] {
        &self.shards
    }
}

impl TensorSource for ShardedSource {
    fn format(&self) -> WeightsFormat {
        self.format
    }
    fn list(&self) -> &TensorList {
        &self.tensors
    }
    /// The metadata of the shard holding the first tensor (shards usually repeat theirs).
    fn metadata(&self) -> Metadata<'_> {
        match self.shard_of.first() {
            Some(&i) => self.shards[i].metadata(),
            None => Metadata::None,
        }
    }
    fn fetch(&self, name: &str) -> Result<TensorBytes<'_>> {
        self.shard(name)?.fetch(name)
    }
    fn fetch_raw(&self, name: &str) -> Result<TensorBytes<'_>> {
        self.shard(name)?.fetch_raw(name)
    }
    fn f32_decoder(&self, name: &str) -> Result<Option<F32Decoder<'_>>> {
        self.shard(name)?.f32_decoder(name)
    }
    fn fetch_spans(&self, name: &str, spans: &[(usize, usize)]) -> Result<Option<Vec<u8>>> {
        self.shard(name)?.fetch_spans(name, spans)
    }
    fn stored_range(&self, name: &str) -> Option<(u64, u64)> {
        self.shard(name).ok()?.stored_range(name)
    }
    fn path(&self) -> Option<&Path> {
        Some(&self.path)
    }
    fn files(&self) -> Vec<SourceFile> {
        self.files.clone()
    }
    fn file_of(&self, name: &str) -> Option<&str> {
        self.files
            .get(self.shard_of(name)?)
            .map(|f| f.name.as_str())
    }
    fn release(&self, name: &str) {
        if let Ok(shard) = self.shard(name) {
            shard.release(name)
        }
    }
    /// Each shard's (a storage lives in one file).
    fn tied_tensors(&self) -> Vec<(String, String)> {
        self.shards.iter().flat_map(|s| s.tied_tensors()).collect()
    }
}
