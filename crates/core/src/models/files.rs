//! Models as files: SafeTensors (aprender's layout), model directories, GGUF and ONNX.
//! The models themselves never touch files; this is the one place that does.

use super::{AnyModel, LinearRegression, LogisticRegression};
use crate::error::{CoreError, Result};
use crate::format::gguf::{self, GgufTensorSpec, GgufValue, Preset};
use crate::format::onnx;
use crate::format::safetensors::{self as st, Backend, SafeTensors};
use crate::fsutil::{self, WriteOptions};
use crate::pretrained::{self, SaveOptions};
use crate::source::TensorSource;
use crate::tensor::TensorView;
use std::collections::BTreeMap;
use std::path::Path;

/// Which class a caller asks a file to hold (aprender's files carry no metadata, so the
/// caller's class decides how they load).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    Linear,
    Logistic,
}

/// The tensors and metadata of a model file, as getters for `from_tensors`.
fn with_file<T>(path: &Path, f: impl FnOnce(&SafeTensors) -> Result<T>) -> Result<T> {
    let file = SafeTensors::open(path, Backend::Mmap)?;
    f(&file).map_err(|e| e.with_path(path))
}

impl AnyModel {
    /// Load a model saved by `save_safetensors` (or by aprender) as the class asked for.
    pub fn load_safetensors(path: &Path, kind: ModelKind) -> Result<AnyModel> {
        with_file(path, |file| {
            let get = |name: &str| file.view(name).ok();
            Ok(match kind {
                ModelKind::Linear => {
                    AnyModel::Linear(LinearRegression::from_tensors(&get, file.metadata())?)
                }
                ModelKind::Logistic => {
                    AnyModel::Logistic(LogisticRegression::from_tensors(&get, file.metadata())?)
                }
            })
        })
    }

    /// Write the model's tensors (aprender's layout) with `model_type`, `n_features`, … in
    /// `__metadata__`, plus the caller's own entries (which cannot override ours).
    pub fn save_safetensors(
        &self,
        path: &Path,
        user_metadata: Option<&BTreeMap<String, String>>,
        options: WriteOptions<'_>,
    ) -> Result<()> {
        let (tensors, metadata) = self.tensors_with_metadata(user_metadata)?;
        st::save_file(path, &tensors, Some(&metadata), options)
    }

    fn tensors_with_metadata(
        &self,
        user_metadata: Option<&BTreeMap<String, String>>,
    ) -> Result<(Vec<TensorView<'static>>, BTreeMap<String, String>)> {
        let (tensors, ours) = self.to_tensors()?;
        let mut metadata = user_metadata.cloned().unwrap_or_default();
        for (k, v) in &ours {
            if metadata.get(k).is_some_and(|user| user != v) {
                return Err(CoreError::invalid_argument(format!(
                    "metadata key '{k}' is reserved for the model (it is '{v}')"
                )));
            }
        }
        metadata.extend(ours);
        Ok((tensors, metadata))
    }

    /// Write `config.json` + `model.safetensors` to `dir` (progress is reported once, with
    /// the weight file's size, when the directory is written).
    pub fn save_dir(&self, dir: &Path, mut options: WriteOptions<'_>) -> Result<()> {
        let (tensors, metadata) = self.tensors_with_metadata(None)?;
        let save = SaveOptions {
            metadata: Some(metadata),
            durability: options.durability,
            ..Default::default()
        };
        let saved = pretrained::save_model_dir(dir, &self.config_json(), &tensors, None, &save)?;
        let written = saved
            .files
            .iter()
            .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
            .map(|m| m.len())
            .sum();
        options.report(written, written);
        Ok(())
    }

    /// The model a source holds: its `config.json` (a model directory) or its metadata names
    /// a model type we know, and its tensors are that model's.
    pub fn from_source(source: &dyn TensorSource) -> Result<AnyModel> {
        let empty = serde_json::json!({});
        let config = source.config().unwrap_or(&empty);
        let get = |name: &str| source.view(name).ok();
        let metadata = source.metadata();
        let model = AnyModel::from_config_and_tensors(config, &get, metadata.strings());
        match source.path() {
            Some(p) => model.map_err(|e| e.with_path(p)),
            None => model,
        }
    }

    /// A GGUF file of the model: architecture `linear_regression` / `logistic_regression`
    /// with `<arch>.n_features`, `<arch>.n_classes`, `<arch>.fit_intercept` and the class
    /// labels; tensors `coefficients`, `intercept` (and `classes` as I32 metadata, not a
    /// tensor). 2-D coefficient matrices take the preset's main type (with llama-quantize's
    /// fallbacks when their rows are not whole blocks); 1-D vectors stay F32 unless F16 or
    /// BF16 is asked (see `gguf::choose_type`).
    pub fn to_gguf(
        &self,
        path: &Path,
        quantization: Preset,
        options: WriteOptions<'_>,
    ) -> Result<()> {
        let (tensors, _) = self.to_tensors()?;
        let tensors: Vec<TensorView> = tensors
            .into_iter()
            .filter(|t| t.name != "classes")
            .collect();
        let arch = self.model_type();
        let specs: Vec<GgufTensorSpec> = tensors
            .iter()
            .map(|t| {
                GgufTensorSpec::new(
                    &t.name,
                    t.shape.clone(),
                    gguf::choose_type(&t.shape, quantization),
                )
            })
            .collect();
        let mut metadata = gguf::standard_metadata(arch, arch, &specs);
        let n_features = self.n_features().unwrap_or(0) as u64;
        metadata.push((format!("{arch}.n_features"), GgufValue::U64(n_features)));
        let config = self.config_json();
        if let Some(fit) = config.get("fit_intercept").and_then(|v| v.as_bool()) {
            metadata.push((format!("{arch}.fit_intercept"), GgufValue::Bool(fit)));
        }
        if let AnyModel::Logistic(m) = self {
            metadata.push((
                format!("{arch}.n_classes"),
                GgufValue::U64(m.classes().len() as u64),
            ));
            metadata.push((
                format!("{arch}.classes"),
                GgufValue::Array(gguf::GgufArray::I32(m.classes().to_vec())),
            ));
        }
        gguf::write_gguf_file(path, &metadata, &specs, options, |i, _| {
            Ok(tensors[i].clone())
        })
    }

    /// An ONNX model (IR 8, opset 17) computing `predict` (linear) or `predictProba`
    /// (logistic, plus a `label` output). Progress is reported once, with the file's size,
    /// when it is written.
    pub fn to_onnx(&self, path: &Path, mut options: WriteOptions<'_>) -> Result<()> {
        let bytes = match self {
            AnyModel::Linear(m) => {
                if !m.is_fitted() {
                    return Err(CoreError::not_fitted(
                        "fit or load the model before exporting it",
                    ));
                }
                onnx::linear_regression_model(m.coefficients(), m.intercept())?
            }
            AnyModel::Logistic(m) => {
                if !m.is_fitted() {
                    return Err(CoreError::not_fitted(
                        "fit or load the model before exporting it",
                    ));
                }
                let n_features = m.n_features().unwrap_or(0);
                onnx::logistic_regression_model(
                    m.coefficients(),
                    m.intercept(),
                    m.classes().len(),
                    n_features,
                    m.classes(),
                )?
            }
        };
        fsutil::write_atomic(path, options.durability, |out| {
            fsutil::write_all(out, &bytes, path)
        })
        .map_err(|e| e.with_path(path))?;
        options.report(bytes.len() as u64, bytes.len() as u64);
        Ok(())
    }
}
