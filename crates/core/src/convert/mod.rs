//! Conversion between formats, and inspection / validation of any weights file.
//!
//! Every input — a weights file of any registered format, a sharded index, a model
//! directory — is opened as one [`TensorSource`]: a list of tensor specs plus a way to fetch
//! one tensor at a time, so writers stream (a model is never held twice in memory) and
//! nothing here asks which format it is reading.

use crate::error::{CoreError, Result};
use crate::format::detect::Detected;
use crate::format::gguf::{self, export, GgmlType, GgufTensorSpec, GgufValue, Preset, TensorData};
use crate::format::mlx;
use crate::format::safetensors::{self as st, TensorSpec};
use crate::format::{self as formats, OpenOptions};
use crate::fsutil::WriteOptions;
use crate::models::AnyModel;
use crate::pretrained::adapter::LoraAdapter;
use crate::pretrained::ModelDir;
use crate::source::TensorSource;
use crate::tensor::TensorView;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

pub mod llamacpp;
pub mod merge;
pub mod metadata;
pub mod pytorch;

pub use metadata::{EditValue, MetadataEdit};

/// What `inputFormat` / `format` call a model directory (its weights have their own format).
pub const MODEL_DIR: &str = "model-dir";

/// One tensor of an input, as listed (GGUF types are shown by their ggml name).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TensorEntry {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<usize>,
    pub byte_length: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// What `inspect` reports of a file or directory.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FileReport {
    pub path: String,
    pub format: String,
    /// Bytes on disk of every file read (all shards for a sharded model).
    pub file_size: u64,
    pub files: Vec<String>,
    pub num_tensors: usize,
    pub num_parameters: u64,
    pub metadata: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Value>,
    pub tensors: Vec<TensorEntry>,
}

/// A problem `validate` found.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Problem {
    pub code: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensor: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ValidationReport {
    pub path: String,
    pub format: Option<String>,
    pub ok: bool,
    /// The first [`MAX_LISTED_PROBLEMS`] problems.
    pub errors: Vec<Problem>,
    /// How many more problems there were (a header can break a rule once per tensor, and
    /// hold millions of tensors).
    pub omitted_errors: usize,
}

/// The most problems a [`ValidationReport`] lists.
pub const MAX_LISTED_PROBLEMS: usize = 1000;

impl ValidationReport {
    fn of(path: String, format: Option<String>, problems: &[CoreError]) -> ValidationReport {
        ValidationReport {
            path,
            format,
            ok: problems.is_empty(),
            errors: problems
                .iter()
                .take(MAX_LISTED_PROBLEMS)
                .map(Problem::from)
                .collect(),
            omitted_errors: problems.len().saturating_sub(MAX_LISTED_PROBLEMS),
        }
    }
}

impl From<&CoreError> for Problem {
    fn from(e: &CoreError) -> Self {
        Problem {
            code: e.code().to_string(),
            message: e.to_string(),
            tensor: e.tensor().map(str::to_string),
        }
    }
}

/// What a conversion did.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConvertReport {
    pub input: String,
    pub output: String,
    pub input_format: String,
    pub output_format: String,
    pub tensors: usize,
    pub input_bytes: u64,
    pub output_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantization: Option<String>,
    /// The llama.cpp architecture a GGUF was written for (`general.architecture`), when the
    /// input was a model directory of one we know.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// What the user should know about the output (e.g. an architecture llama.cpp export
    /// does not know, so the GGUF holds the tensors under their own names).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Tensors not written because another name holds the same bytes (a PyTorch
    /// checkpoint's tied weights, written once as Hugging Face's convert.py does).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<pytorch::DroppedTensor>,
    /// The files written, relative to `output` when the output is a directory; for a split
    /// GGUF, the names of its files (beside where `output` would be).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<String>>,
}

/// What a conversion does besides converting (the options beyond the target and the
/// quantization).
#[derive(Debug, Clone, Default)]
pub struct ConvertSettings {
    /// Keys set or removed in the output's metadata, in order ([`metadata`]).
    pub metadata: Vec<MetadataEdit>,
    /// GGUF only: write a split set whose files each hold at most this many bytes of tensor
    /// data ([`gguf::split`]), named after `output` (`out.gguf` → `out-00001-of-0000N.gguf`).
    pub max_shard_bytes: Option<u64>,
}

/// Output formats of [`convert`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    SafeTensors,
    Gguf,
    Onnx,
    Mlx,
}

impl Target {
    pub fn parse(name: &str) -> Result<Target> {
        Ok(match name {
            "safetensors" => Target::SafeTensors,
            "gguf" => Target::Gguf,
            "onnx" => Target::Onnx,
            "mlx" => Target::Mlx,
            other => {
                return Err(CoreError::invalid_argument(format!(
                    "options.to must be 'gguf', 'onnx', 'safetensors' or 'mlx', not '{other}'"
                )))
            }
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Target::SafeTensors => "safetensors",
            Target::Gguf => "gguf",
            Target::Onnx => "onnx",
            Target::Mlx => "mlx",
        }
    }
}

// ---------------------------------------------------------------------------------------
// Inputs.

/// An opened input, and what to call its kind in reports.
struct Input {
    source: Box<dyn TensorSource>,
    kind: &'static str,
}

impl Input {
    /// The model directory `base` with the PEFT adapter `adapter` merged in.
    fn merged(base: &Path, adapter: &Path, lora_scale: f64) -> Result<Input> {
        if !std::fs::metadata(base)
            .map_err(|e| CoreError::io(e, base))?
            .is_dir()
        {
            return Err(CoreError::invalid_argument(
                "options.lora merges an adapter into a model directory (config.json and weights), \
                 and this is a file",
            )
            .with_path(base));
        }
        let dir = ModelDir::open(base, &mut |_| {})?;
        let adapter = LoraAdapter::open(adapter)?;
        Ok(Input {
            source: Box::new(merge::Merged::new(Box::new(dir), adapter, lora_scale)?),
            kind: MODEL_DIR,
        })
    }

    /// A model directory, or a file of whatever format its bytes are.
    fn open(path: &Path) -> Result<Input> {
        if std::fs::metadata(path)
            .map_err(|e| CoreError::io(e, path))?
            .is_dir()
        {
            let dir = ModelDir::open(path, &mut |_| {})?;
            return Ok(Input {
                source: Box::new(dir),
                kind: MODEL_DIR,
            });
        }
        let source = crate::pretrained::open(path, None, &mut OpenOptions::default())?;
        let kind = source.format().name();
        Ok(Input { source, kind })
    }
}

/// The classical model a source holds: `config.json` or file metadata naming
/// `linear_regression` / `logistic_regression`.
fn model_of(source: &dyn TensorSource) -> Result<AnyModel> {
    let named = source.config().and_then(|c| c.get("model_type")).is_some()
        || source.metadata().get_str("model_type").is_some();
    if !named {
        return Err(CoreError::invalid_model(
            "ONNX export needs a linear_regression or logistic_regression model (a SafeTensors file or model directory saved by this package)",
        ));
    }
    AnyModel::from_source(source)
}

// ---------------------------------------------------------------------------------------
// inspect / validate.

/// Describe a weights file (any registered format), sharded index or model directory.
pub fn inspect(path: &Path) -> Result<FileReport> {
    let input = Input::open(path)?;
    let s = input.source.as_ref();
    let files = s.files();
    let multi = files.len() > 1;
    let tensors: Vec<TensorEntry> = s
        .tensors()
        .iter()
        .map(|t| TensorEntry {
            name: t.name.clone(),
            dtype: t.stored.to_string(),
            shape: t.shape.clone(),
            byte_length: t.stored_len,
            file: if multi {
                s.file_of(&t.name).map(str::to_string)
            } else {
                None
            },
        })
        .collect();
    Ok(FileReport {
        path: path.display().to_string(),
        format: s.format().name().to_string(),
        file_size: files.iter().map(|f| f.bytes).sum(),
        files: files.into_iter().map(|f| f.name).collect(),
        num_tensors: tensors.len(),
        num_parameters: s.num_parameters(),
        metadata: s.metadata().to_json(),
        config: s.config().cloned(),
        tensors,
    })
}

/// Every problem found in a file or directory (not only the first).
pub fn validate(path: &Path) -> ValidationReport {
    let (format, mut problems) = match std::fs::metadata(path) {
        Err(e) => (None, vec![CoreError::io(e, path)]),
        Ok(meta) if meta.is_dir() => (
            Some(MODEL_DIR),
            match ModelDir::open(path, &mut |_| {}) {
                Ok(_) => Vec::new(),
                // A weight file that fails: list all of its problems, where its format can.
                Err(e) => match e.path().map(Path::new).filter(|p| p.is_file()) {
                    Some(file) => match file_problems(file) {
                        (_, list) if !list.is_empty() && list[0].code() != "ERR_UNKNOWN_FORMAT" => {
                            list
                        }
                        _ => vec![e],
                    },
                    None => vec![e],
                },
            },
        ),
        Ok(_) => file_problems(path),
    };
    problems.dedup();
    ValidationReport::of(
        path.display().to_string(),
        format.map(str::to_string),
        &problems,
    )
}

/// The format of a file (when its bytes show one) and its problems.
fn file_problems(path: &Path) -> (Option<&'static str>, Vec<CoreError>) {
    let detected = match formats::detect_file(path) {
        Ok(d) => d,
        Err(e) => return (None, vec![e]),
    };
    let format = match detected {
        Detected::Format(f) => Some(f.name()),
        Detected::Foreign(_) => None,
    };
    let problems = match detected {
        Detected::Format(f) => formats::registration(f).problems().map(|p| p(path)),
        Detected::Foreign(_) => None,
    };
    let problems = problems.unwrap_or_else(|| {
        crate::pretrained::open_detected(path, detected, &mut OpenOptions::default())
            .err()
            .into_iter()
            .collect()
    });
    (format, problems)
}

/// The report of [`validate`] for a file already open: its header was validated at open, so
/// what is left to check is whether the file on disk changed since (one `stat`; see
/// [`st::SafeTensors::changes_since_open`]).
pub fn validate_open(file: &st::SafeTensors) -> ValidationReport {
    let problems = file.changes_since_open();
    ValidationReport::of(
        file.path()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        Some(file.format().name().to_string()),
        &problems,
    )
}

// ---------------------------------------------------------------------------------------
// convert.

/// Convert `input` to `output` in the `to` format. `quantization` applies to GGUF: a
/// llama-quantize preset choosing each tensor's type (see [`gguf::plan_export`]); without
/// one every tensor keeps its type. The output is written atomically (see
/// [`WriteOptions`]); progress `(done, total)` counts input tensor bytes, from `(0, total)`
/// to `(total, total)`.
pub fn convert(
    input_path: &Path,
    output: &Path,
    to: Target,
    quantization: Option<Preset>,
    options: WriteOptions<'_>,
) -> Result<ConvertReport> {
    convert_with(
        input_path,
        output,
        to,
        quantization,
        &ConvertSettings::default(),
        &LoraOptions::default(),
        options,
    )
}

/// A PEFT LoRA adapter in a conversion.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoraOptions<'a> {
    /// The input is an adapter directory and this its base model's directory: the output is
    /// the adapter as a llama.cpp GGUF LoRA ([`llamacpp::lora`]).
    pub base: Option<&'a Path>,
    /// The input is a base model directory and this an adapter to merge into it: the output
    /// is the merged model ([`merge::Merged`]).
    pub lora: Option<&'a Path>,
    /// A multiplier of the adapter's scaling when merging (1 by default).
    pub lora_scale: Option<f64>,
}

/// [`convert`] with [`ConvertSettings`] — metadata edits (every target but ONNX, which has
/// no metadata) and, for GGUF, a split output — and a LoRA adapter converted to GGUF against
/// its base, or merged into the input (see [`LoraOptions`]).
pub fn convert_with(
    input_path: &Path,
    output: &Path,
    to: Target,
    quantization: Option<Preset>,
    settings: &ConvertSettings,
    lora: &LoraOptions<'_>,
    options: WriteOptions<'_>,
) -> Result<ConvertReport> {
    if let Some(base) = lora.base {
        if !settings.metadata.is_empty() || settings.max_shard_bytes.is_some() {
            return Err(CoreError::invalid_argument(
                "options.metadata and options.maxShardBytes do not apply to a LoRA adapter \
                 (options.base)",
            ));
        }
        if lora.lora.is_some() || lora.lora_scale.is_some() {
            return Err(CoreError::invalid_argument(
                "options.base (the base model of an adapter given as input) and options.lora / \
                 options.loraScale (an adapter merged into the input) exclude each other",
            ));
        }
        if to != Target::Gguf {
            return Err(CoreError::invalid_argument(
                "options.base (converting a LoRA adapter) applies only to: 'gguf' (to merge \
                 an adapter into its base model, convert the base with options.lora)",
            ));
        }
        return adapter_to_gguf(input_path, base, output, quantization, options);
    }
    if lora.lora_scale.is_some() && lora.lora.is_none() {
        return Err(CoreError::invalid_argument(
            "options.loraScale applies only with options.lora",
        ));
    }
    let WriteOptions {
        durability,
        progress: mut listener,
    } = options;
    let mut progress = |done: u64, total: u64| {
        if let Some(p) = listener.as_mut() {
            p(done, total)
        }
    };
    if quantization.is_some() && to != Target::Gguf {
        return Err(CoreError::invalid_argument(
            "options.quantization applies only to: 'gguf'",
        ));
    }
    if settings.max_shard_bytes.is_some() && to != Target::Gguf {
        return Err(CoreError::invalid_argument(
            "options.maxShardBytes applies only to: 'gguf'",
        ));
    }
    if !settings.metadata.is_empty() && to == Target::Onnx {
        return Err(CoreError::invalid_argument(
            "options.metadata applies to 'gguf', 'safetensors' and 'mlx' (ONNX output has no \
             metadata)",
        ));
    }
    let edits = &settings.metadata[..];
    let input = match lora.lora {
        Some(adapter) => Input::merged(input_path, adapter, lora.lora_scale.unwrap_or(1.0))?,
        None => Input::open(input_path)?,
    };
    let merging = lora.lora.is_some();
    if merging && to == Target::SafeTensors && !edits.is_empty() {
        return Err(CoreError::invalid_argument(
            "options.metadata does not apply to a LoRA merged into SafeTensors yet",
        ));
    }
    let s = input.source.as_ref();
    let specs: Vec<TensorSpec> = s
        .tensors()
        .iter()
        .map(|t| TensorSpec::new(&t.name, t.dtype, t.shape.clone()))
        .collect::<Result<_>>()?;
    let total: u64 = specs.iter().map(|s| s.byte_len as u64).sum();
    let metadata = s.metadata();
    let mut done = 0u64;
    let mut warnings = Vec::new();
    let mut architecture = None;
    let mut written_tensors = specs.len();
    let mut dropped = Vec::new();
    let mut output_files = None;
    let mut output_bytes = None;
    progress(0, total);
    match to {
        Target::SafeTensors if merging => {
            let mut behind = ReleaseBehind::new(s);
            output_files = Some(merge::save_dir(
                s,
                output,
                &specs,
                durability,
                &mut |name, len| {
                    behind.next(name);
                    done += len;
                    progress(done, total);
                },
            )?);
        }
        Target::SafeTensors if pytorch::applies(s) => {
            let written =
                pytorch::to_safetensors(input_path, s, output, durability, edits, &mut |done| {
                    progress(done, total)
                })?;
            progress(total, total);
            written_tensors = written.tensors;
            dropped = written.dropped;
            output_files = written.files;
            warnings = written.warnings;
        }
        Target::SafeTensors => {
            let mut kept = metadata.as_safetensors_metadata(st::MAX_HEADER_SIZE)?;
            if !edits.is_empty() {
                metadata::apply_strings(kept.get_or_insert_with(BTreeMap::new), edits);
            }
            let mut behind = ReleaseBehind::new(s);
            st::save_streaming(
                output,
                &specs,
                kept.as_ref(),
                WriteOptions::with_durability(durability),
                &mut |i| {
                    behind.next(&specs[i].name);
                    let bytes = s.fetch(&specs[i].name)?;
                    done += specs[i].byte_len as u64;
                    progress(done, total);
                    Ok(bytes.into_cow())
                },
            )?;
        }
        Target::Gguf => {
            let choice = match quantization {
                Some(p) => gguf::QuantizationChoice::Preset(p),
                None => gguf::QuantizationChoice::Keep,
            };
            // A model directory of an architecture llama.cpp runs: its own export.
            let recognized = match (input.kind, s.path(), s.config()) {
                (MODEL_DIR, Some(dir), Some(config)) => {
                    let listing: Vec<llamacpp::TensorListing> = specs
                        .iter()
                        .map(|s| llamacpp::TensorListing {
                            name: s.name.clone(),
                            dtype: s.dtype,
                            shape: s.shape.clone(),
                        })
                        .collect();
                    Some(llamacpp::recognize(dir, config, &listing, choice)?)
                }
                _ => None,
            };
            if let Some(llamacpp::Recognition::Unknown(w)) = &recognized {
                warnings.push(w.clone());
            }
            if let Some(llamacpp::Recognition::Known(mut export)) = recognized {
                metadata::apply_gguf(&mut export.metadata, edits)?;
                let sizes: BTreeMap<&str, u64> = specs
                    .iter()
                    .map(|s| (s.name.as_str(), s.byte_len as u64))
                    .collect();
                let gspecs: Vec<GgufTensorSpec> = export
                    .tensors
                    .iter()
                    .map(|t| GgufTensorSpec::new(&t.name, t.shape.clone(), t.ggml_type))
                    .collect();
                let mut behind = ReleaseBehind::new(s);
                let written = write_gguf_output(
                    output,
                    &export.metadata,
                    &gspecs,
                    settings.max_shard_bytes,
                    durability,
                    |i, _| {
                        let view = export.load(&export.tensors[i], |name| {
                            behind.next(name);
                            let view = s.view(name)?;
                            done += sizes.get(name).copied().unwrap_or(0);
                            progress(done, total);
                            Ok(view)
                        })?;
                        Ok(TensorData::View(view))
                    },
                )?;
                (output_files, output_bytes) = written;
                progress(total, total);
                warnings.extend(export.warnings.iter().cloned());
                architecture = Some(export.architecture.to_string());
                written_tensors = export.tensors.len();
            } else {
                let gguf_pairs = metadata.gguf_pairs();
                let model = match (s.config(), gguf_pairs) {
                    (Some(config), _) => export::model_from_hf_config(config),
                    (None, Some(pairs)) => export::model_from_gguf_metadata(pairs),
                    (None, None) => Default::default(),
                };
                let exports: Vec<gguf::ExportTensor> = specs
                    .iter()
                    .map(|s| gguf::ExportTensor {
                        name: &s.name,
                        shape: &s.shape,
                        dtype: s.dtype,
                        gguf_input: gguf_pairs.is_some(),
                    })
                    .collect();
                let mut types = gguf::plan_export(choice, &model, &exports)?;
                // A GGUF input's tensors keep their stored type without a preset, and are
                // copied as stored wherever their type stays (as llama-quantize copies them).
                let stored: Vec<Option<GgmlType>> = s
                    .tensors()
                    .iter()
                    .map(|t| gguf_pairs.and(GgmlType::from_name(&t.stored)))
                    .collect();
                if quantization.is_none() {
                    for (ty, st) in types.iter_mut().zip(&stored) {
                        *ty = st.unwrap_or(*ty);
                    }
                }
                let gspecs: Vec<GgufTensorSpec> = specs
                    .iter()
                    .zip(types)
                    .zip(&stored)
                    .map(|((s, ty), st)| match st {
                        Some(st) if *st == ty => {
                            GgufTensorSpec::copied(&s.name, s.shape.clone(), ty)
                        }
                        _ => GgufTensorSpec::new(&s.name, s.shape.clone(), ty),
                    })
                    .collect();
                let mut gguf_metadata = gguf_export_metadata(s, input_path, quantization, &gspecs);
                metadata::apply_gguf(&mut gguf_metadata, edits)?;
                let mut behind = ReleaseBehind::new(s);
                (output_files, output_bytes) = write_gguf_output(
                    output,
                    &gguf_metadata,
                    &gspecs,
                    settings.max_shard_bytes,
                    durability,
                    |i, spec| {
                        behind.next(&spec.name);
                        let data = if spec.copied {
                            TensorData::Stored(s.fetch_raw(&spec.name)?.into_cow())
                        } else {
                            TensorData::View(s.view(&spec.name)?)
                        };
                        done += specs[i].byte_len as u64;
                        progress(done, total);
                        Ok(data)
                    },
                )?;
            }
        }
        Target::Mlx => {
            let views: Vec<TensorView> = specs
                .iter()
                .map(|t| s.view(&t.name))
                .collect::<Result<_>>()?;
            let mut strings = metadata.strings().cloned();
            if !edits.is_empty() {
                metadata::apply_strings(strings.get_or_insert_with(BTreeMap::new), edits);
            }
            mlx::save_mlx(
                output,
                &views,
                strings.as_ref(),
                WriteOptions::with_durability(durability),
            )?;
            progress(total, total);
        }
        Target::Onnx => {
            model_of(s)?.to_onnx(output, WriteOptions::with_durability(durability))?;
            progress(total, total);
        }
    }
    let output_bytes = match (output_bytes, &output_files) {
        (Some(bytes), _) => bytes,
        (None, Some(files)) => files
            .iter()
            .filter_map(|f| std::fs::metadata(output.join(f)).ok())
            .map(|m| m.len())
            .sum(),
        (None, None) => std::fs::metadata(output).map(|m| m.len()).unwrap_or(0),
    };
    Ok(ConvertReport {
        input: input_path.display().to_string(),
        output: output.display().to_string(),
        input_format: input.kind.to_string(),
        output_format: to.name().to_string(),
        tensors: written_tensors,
        input_bytes: s.file_size(),
        output_bytes,
        quantization: quantization.map(|p| p.name().to_string()),
        architecture,
        warnings,
        dropped,
        files: output_files,
    })
}

/// The files written and their bytes in all, for a split output (`None` for one file).
type Written = (Option<Vec<String>>, Option<u64>);

/// Write a GGUF output: one file at `output`, or with `max_shard_bytes` a split set named
/// after it ([`gguf::write_gguf_split`]).
fn write_gguf_output<'d>(
    output: &Path,
    metadata: &[(String, GgufValue)],
    specs: &[GgufTensorSpec],
    max_shard_bytes: Option<u64>,
    durability: crate::fsutil::Durability,
    load: impl FnMut(usize, &GgufTensorSpec) -> Result<TensorData<'d>>,
) -> Result<Written> {
    let Some(max) = max_shard_bytes else {
        gguf::write::write_gguf_file_data(
            output,
            metadata,
            specs,
            gguf::write::Shard::Whole,
            WriteOptions::with_durability(durability),
            load,
        )?;
        return Ok((None, None));
    };
    let paths = gguf::write_gguf_split(output, metadata, specs, max, durability, load)?;
    let bytes = paths
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    let names = paths
        .iter()
        .map(|p| {
            p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            )
        })
        .collect();
    Ok((Some(names), Some(bytes)))
}

/// The PEFT adapter directory `adapter_dir` as a llama.cpp GGUF LoRA for the base model in
/// `base_dir` (its config.json and tensor listing: its weights are not read).
fn adapter_to_gguf(
    adapter_dir: &Path,
    base_dir: &Path,
    output: &Path,
    quantization: Option<Preset>,
    options: WriteOptions<'_>,
) -> Result<ConvertReport> {
    let WriteOptions {
        durability,
        progress: mut listener,
    } = options;
    let adapter = LoraAdapter::open(adapter_dir)?;
    let base = ModelDir::open(base_dir, &mut |_| {})?;
    let listing: Vec<llamacpp::TensorListing> = base
        .tensors()
        .iter()
        .map(|t| llamacpp::TensorListing {
            name: t.name.clone(),
            dtype: t.dtype,
            shape: t.shape.clone(),
        })
        .collect();
    let config = base.config().clone();
    let choice = match quantization {
        Some(p) => gguf::QuantizationChoice::Preset(p),
        None => gguf::QuantizationChoice::Keep,
    };
    let export = llamacpp::lora::plan(&adapter, &config, &listing, choice).map_err(|e| {
        if e.path().is_none() {
            e.with_path(adapter_dir)
        } else {
            e
        }
    })?;
    let s = adapter.source.as_ref();
    let total: u64 = s.tensors().iter().map(|t| t.stored_len).sum();
    let mut done = 0u64;
    let mut progress = |done: u64| {
        if let Some(p) = listener.as_mut() {
            p(done, total)
        }
    };
    progress(0);
    let mut behind = ReleaseBehind::new(s);
    export.write(output, WriteOptions::with_durability(durability), |name| {
        behind.next(name);
        let view = s.view(name)?;
        done += s.tensor(name).map_or(0, |t| t.stored_len);
        progress(done);
        Ok(view)
    })?;
    drop(behind);
    progress(total);
    Ok(ConvertReport {
        input: adapter_dir.display().to_string(),
        output: output.display().to_string(),
        input_format: "lora-adapter".to_string(),
        output_format: Target::Gguf.name().to_string(),
        tensors: export.tensors.len(),
        input_bytes: s.file_size(),
        output_bytes: std::fs::metadata(output).map(|m| m.len()).unwrap_or(0),
        quantization: quantization.map(|p| p.name().to_string()),
        architecture: Some(export.architecture.to_string()),
        warnings: export.warnings.clone(),
        dropped: Vec::new(),
        files: None,
    })
}

/// Gives back the input's mapped pages one tensor behind a streaming writer.
///
/// The writers (SafeTensors, GGUF, llama.cpp export) ask for each tensor after the previous
/// one is written and its view dropped: its pages of the mapped input are released then
/// ([`TensorSource::release`]), and the last tensor's when this is dropped, so a conversion
/// holds about one tensor of the input at a time, not the whole mapped model. The input was
/// opened by the conversion itself, so no view of it was handed to JS.
struct ReleaseBehind<'s> {
    source: &'s dyn TensorSource,
    previous: Option<String>,
}

impl<'s> ReleaseBehind<'s> {
    fn new(source: &'s dyn TensorSource) -> Self {
        ReleaseBehind {
            source,
            previous: None,
        }
    }

    /// The writer asks for `name`: it is done with the tensor it asked for before.
    fn next(&mut self, name: &str) {
        if let Some(p) = self.previous.replace(name.to_string()) {
            self.source.release(&p);
        }
    }
}

impl Drop for ReleaseBehind<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.previous.take() {
            self.source.release(&p);
        }
    }
}

/// The metadata of a GGUF export. A GGUF input's key/values are kept as they are, in order
/// (but the `split.*` keys of a split input, which describe its files); other inputs get the
/// standard keys, then their string metadata (a SafeTensors file's or model directory's
/// `__metadata__`, weights.mlx's `metadata`) as `<format>.*` strings (`safetensors.format`).
/// With a preset, `general.file_type` and `general.quantization_version` are set as
/// llama-quantize sets them.
fn gguf_export_metadata(
    s: &dyn TensorSource,
    input_path: &Path,
    preset: Option<Preset>,
    gspecs: &[GgufTensorSpec],
) -> Vec<(String, GgufValue)> {
    let source_metadata = s.metadata();
    let architecture = s
        .config()
        .and_then(|c| c.get("model_type"))
        .and_then(|v| v.as_str())
        .or_else(|| source_metadata.get_str("model_type"))
        .or_else(|| source_metadata.get_str(gguf::keys::ARCHITECTURE))
        .unwrap_or("unknown")
        .to_string();
    let name = source_metadata
        .get_str(gguf::keys::NAME)
        .map(str::to_string)
        .unwrap_or_else(|| {
            input_path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
    let standard = gguf::standard_metadata(&architecture, &name, gspecs);
    let mut metadata = match source_metadata.gguf_pairs() {
        Some(pairs) => {
            let mut kept: Vec<(String, GgufValue)> = pairs
                .iter()
                .filter(|(k, _)| !gguf::split::is_split_key(k))
                .cloned()
                .collect();
            // What every reader needs and a hand-made input may lack.
            if !kept.iter().any(|(k, _)| k == gguf::keys::ARCHITECTURE) {
                kept.insert(0, standard[0].clone());
            }
            kept
        }
        None => {
            let mut metadata = standard;
            let namespace = s.format().metadata_namespace();
            for (k, v) in source_metadata.strings().into_iter().flatten() {
                metadata.push((format!("{namespace}.{k}"), GgufValue::String(v.clone())));
            }
            metadata
        }
    };
    if let Some(p) = preset {
        // As llama-quantize writes them, whether or not a tensor ended up quantized.
        for (key, value) in [
            (
                gguf::keys::QUANTIZATION_VERSION,
                GgufValue::U32(gguf::QUANTIZATION_VERSION),
            ),
            (export::FILE_TYPE, export::file_type_value(p)),
        ] {
            match metadata.iter_mut().find(|(k, _)| k == key) {
                Some((_, v)) => *v = value,
                None => metadata.push((key.to_string(), value)),
            }
        }
    }
    metadata
}

#[cfg(test)]
mod tests;
