//! `weights.mlx` as a [`TensorSource`].

#[cfg(feature = "fs")]
use super::read_mlx_with_progress;
use super::{parse_mlx, MlxWeights};
use crate::error::{CoreError, Result};
use crate::memory::{Memory, TensorBytes};
use crate::source::{
    self, Metadata, SourceFile, SourceTensor, TensorList, TensorSource, WeightsFormat,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

// ---------------------------------------------------------------------------------------
// As a tensor source.

/// weights.mlx's entry in the format registry.
pub const FORMAT: crate::format::Registration = crate::format::Registration {
    format: WeightsFormat::Mlx,
    name: "mlx",
    describe: "an MLX weights file (weights.mlx)",
    metadata_namespace: "mlx",
    sniff: crate::format::detect::is_mlx,
    reader: crate::format::Reader::File(crate::format::FileReader {
        #[cfg(feature = "fs")]
        open: Some(|path, options| Ok(Box::new(MlxSource::open(path, options)?))),
        from_bytes: Some(|bytes| Ok(Box::new(MlxSource::new(parse_mlx(&bytes)?)?))),
        #[cfg(feature = "fs")]
        problems: None,
    }),
};

/// A parsed `weights.mlx`: every tensor decoded once, at open, into its own buffer, served
/// from there (views in JS, no copy per fetch).
pub struct MlxSource {
    path: Option<std::path::PathBuf>,
    file_len: u64,
    metadata: Option<BTreeMap<String, String>>,
    /// `{"version": …}` for a file with a version and no metadata (what `inspect` shows).
    version_only: Option<serde_json::Value>,
    tensors: TensorList,
    data: Vec<Arc<Memory>>,
}

impl MlxSource {
    #[cfg(feature = "fs")]
    /// Read and parse a file, reporting `(bytes parsed, file size)` as it goes.
    pub fn open(path: &Path, options: &mut crate::source::OpenOptions<'_>) -> Result<MlxSource> {
        let weights = read_mlx_with_progress(path, &mut |done, total| options.report(done, total))?;
        let file_len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let mut source = MlxSource::new(weights).map_err(|e| e.with_path(path))?;
        source.path = Some(path.to_path_buf());
        source.file_len = file_len;
        Ok(source)
    }

    /// Serve parsed weights (e.g. from [`parse_mlx`]).
    pub fn new(weights: MlxWeights) -> Result<MlxSource> {
        let version_only = match (&weights.metadata, &weights.version) {
            (None, Some(v)) => Some(serde_json::json!({ "version": v })),
            _ => None,
        };
        let mut data = Vec::with_capacity(weights.tensors.len());
        let mut listed = Vec::with_capacity(weights.tensors.len());
        for t in weights.tensors {
            listed.push(SourceTensor {
                stored: std::borrow::Cow::Borrowed(t.dtype.name()),
                stored_len: t.data.len() as u64,
                name: t.name,
                dtype: t.dtype,
                shape: t.shape,
            });
            data.push(Arc::new(Memory::Owned(t.data.into_owned())));
        }
        let tensors = TensorList::new(listed, |n| {
            CoreError::invalid_mlx("duplicate tensor name").with_tensor(n)
        })?;
        Ok(MlxSource {
            path: None,
            file_len: 0,
            metadata: weights.metadata,
            version_only,
            tensors,
            data,
        })
    }
}

impl TensorSource for MlxSource {
    fn format(&self) -> WeightsFormat {
        WeightsFormat::Mlx
    }
    fn list(&self) -> &TensorList {
        &self.tensors
    }
    fn metadata(&self) -> Metadata<'_> {
        match (&self.metadata, &self.version_only) {
            (Some(m), _) => Metadata::Strings(m),
            (None, Some(v)) => Metadata::Json(v),
            (None, None) => Metadata::None,
        }
    }
    fn fetch(&self, name: &str) -> Result<TensorBytes<'_>> {
        let i = self.tensors.position(name).ok_or_else(|| {
            let e = CoreError::not_found("no such tensor in the file").with_tensor(name);
            match &self.path {
                Some(p) => e.with_path(p),
                None => e,
            }
        })?;
        let memory = &self.data[i];
        TensorBytes::shared(memory, 0, memory.len())
    }
    fn fetch_raw(&self, name: &str) -> Result<TensorBytes<'_>> {
        self.fetch(name)
    }
    fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
    fn files(&self) -> Vec<SourceFile> {
        source::single_file(self.path.as_deref(), self.file_len)
    }
}
