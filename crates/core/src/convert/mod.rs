//! Conversion between formats, and inspection / validation of any weights file.
//!
//! Inputs: a SafeTensors file, a sharded `*.index.json`, a model directory, a GGUF file, or
//! a `weights.mlx` file. Each becomes a list of tensor specs plus a way to fetch one tensor
//! at a time ([`Input`]), so writers stream: a model is never held twice in memory.

use crate::dtype::DType;
use crate::error::{CoreError, Result};
use crate::format::gguf::{self, export, GgmlType, GgufFile, GgufTensorSpec, GgufValue, Preset};
use crate::format::mlx;
use crate::format::safetensors::{self as st, Backend, SafeTensors, TensorSpec};
use crate::fsutil::{self, Durability};
use crate::models::AnyModel;
use crate::pretrained::ModelDir;
use crate::tensor::{checked_numel, TensorView};
use serde::Serialize;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

pub mod llamacpp;

/// The kinds of input we recognise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    SafeTensors,
    ShardedIndex,
    ModelDir,
    Gguf,
    Mlx,
}

impl InputFormat {
    pub fn name(self) -> &'static str {
        match self {
            InputFormat::SafeTensors => "safetensors",
            InputFormat::ShardedIndex => "sharded-safetensors",
            InputFormat::ModelDir => "model-dir",
            InputFormat::Gguf => "gguf",
            InputFormat::Mlx => "mlx",
        }
    }

    /// Recognise a path: a directory is a model directory; a file starting with `GGUF` is
    /// GGUF; `*.index.json` is a sharded index; `*.mlx` (or other `*.json`) is MLX JSON;
    /// anything else is read as SafeTensors (which has no magic number).
    pub fn detect(path: &Path) -> Result<InputFormat> {
        let meta = std::fs::metadata(path).map_err(|e| CoreError::io(e, path))?;
        if meta.is_dir() {
            return Ok(InputFormat::ModelDir);
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut magic = [0u8; 4];
        let (file, _) = fsutil::open_regular(path, "a model file")?;
        use std::os::unix::fs::FileExt;
        if file.read_exact_at(&mut magic, 0).is_ok() && &magic == b"GGUF" {
            return Ok(InputFormat::Gguf);
        }
        Ok(if name.ends_with(".index.json") {
            InputFormat::ShardedIndex
        } else if name.ends_with(".mlx") || name.ends_with(".json") {
            InputFormat::Mlx
        } else {
            InputFormat::SafeTensors
        })
    }
}

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

/// An opened input: its tensors' specs and a way to fetch each one.
enum Opened {
    File(SafeTensors),
    Dir(ModelDir),
    Gguf(memmap2::Mmap),
    Mlx(mlx::MlxWeights),
}

struct Input {
    format: InputFormat,
    opened: Opened,
    size: u64,
}

impl Input {
    fn open(path: &Path) -> Result<Input> {
        let format = InputFormat::detect(path)?;
        let opened = match format {
            InputFormat::SafeTensors => Opened::File(SafeTensors::open(path, Backend::Mmap)?),
            InputFormat::ModelDir => Opened::Dir(ModelDir::open(path, &mut |_| {})?),
            InputFormat::ShardedIndex => Opened::Dir(ModelDir::open_index(path, &mut |_| {})?),
            InputFormat::Gguf => {
                let (file, _) = fsutil::open_regular(path, "a GGUF file")?;
                // SAFETY: a read-only mapping used only within this process's conversion;
                // the same SIGBUS caveat as any mmap applies if the file is truncated.
                let map =
                    unsafe { memmap2::Mmap::map(&file) }.map_err(|e| CoreError::io(e, path))?;
                GgufFile::parse(&map).map_err(|e| e.with_path(path))?;
                Opened::Gguf(map)
            }
            InputFormat::Mlx => Opened::Mlx(mlx::read_mlx(path)?),
        };
        let size = match &opened {
            Opened::File(f) => f.file_len(),
            Opened::Dir(d) => d
                .files()
                .iter()
                .map(|f| {
                    std::fs::metadata(d.dir().join(f))
                        .map(|m| m.len())
                        .unwrap_or(0)
                })
                .sum(),
            Opened::Gguf(m) => m.len() as u64,
            Opened::Mlx(_) => std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
        };
        Ok(Input {
            format,
            opened,
            size,
        })
    }

    /// The report's view of the tensors (GGUF types by ggml name).
    fn entries(&self) -> Result<Vec<TensorEntry>> {
        let st_entry = |t: &st::TensorInfo, file: Option<String>| TensorEntry {
            name: t.name.clone(),
            dtype: t.dtype.name().to_string(),
            shape: t.shape.clone(),
            byte_length: t.byte_len() as u64,
            file,
        };
        Ok(match &self.opened {
            Opened::File(f) => f.tensors().iter().map(|t| st_entry(t, None)).collect(),
            Opened::Dir(d) => {
                let multi = d.files().len() > 1;
                d.tensor_names()
                    .map(|n| {
                        let info = d.info(n)?;
                        let file = d
                            .source(n)?
                            .path()
                            .and_then(|p| p.file_name())
                            .map(|f| f.to_string_lossy().into_owned());
                        Ok(st_entry(info, if multi { file } else { None }))
                    })
                    .collect::<Result<_>>()?
            }
            Opened::Gguf(map) => GgufFile::parse(map)?
                .tensors()
                .iter()
                .map(|t| TensorEntry {
                    name: t.name.clone(),
                    dtype: t.ggml_type.name().to_string(),
                    shape: t.shape.clone(),
                    byte_length: t.byte_len as u64,
                    file: None,
                })
                .collect(),
            Opened::Mlx(w) => w
                .tensors
                .iter()
                .map(|t| TensorEntry {
                    name: t.name.clone(),
                    dtype: t.dtype.name().to_string(),
                    shape: t.shape.clone(),
                    byte_length: t.data.len() as u64,
                    file: None,
                })
                .collect(),
        })
    }

    fn metadata_json(&self) -> Result<serde_json::Value> {
        let strings = |m: Option<&BTreeMap<String, String>>| {
            serde_json::to_value(m).unwrap_or(serde_json::Value::Null)
        };
        Ok(match &self.opened {
            Opened::File(f) => strings(f.metadata()),
            Opened::Dir(d) => strings(
                d.tensor_names()
                    .next()
                    .and_then(|n| d.source(n).ok())
                    .and_then(|s| s.metadata()),
            ),
            Opened::Gguf(map) => {
                let file = GgufFile::parse(map)?;
                let mut out = serde_json::Map::new();
                let mut budget = crate::format::gguf::JsonBudget::REPORT;
                for (k, v) in file.metadata() {
                    out.insert(k.clone(), v.to_json_within(&mut budget));
                }
                serde_json::Value::Object(out)
            }
            Opened::Mlx(w) => {
                let mut v = strings(w.metadata.as_ref());
                if let (serde_json::Value::Null, Some(version)) = (&v, &w.version) {
                    v = serde_json::json!({ "version": version });
                }
                v
            }
        })
    }

    fn files(&self, path: &Path) -> Vec<String> {
        match &self.opened {
            Opened::Dir(d) => d.files().to_vec(),
            _ => vec![path
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default()],
        }
    }

    /// SafeTensors specs of the tensors (GGUF quantized types decode to F32).
    fn specs(&self) -> Result<Vec<TensorSpec>> {
        let of_info = |t: &st::TensorInfo| TensorSpec {
            name: t.name.clone(),
            dtype: t.dtype,
            shape: t.shape.clone(),
            byte_len: t.byte_len(),
        };
        match &self.opened {
            Opened::File(f) => Ok(f.tensors().iter().map(of_info).collect()),
            Opened::Dir(d) => d.tensor_names().map(|n| d.info(n).map(of_info)).collect(),
            Opened::Gguf(map) => GgufFile::parse(map)?
                .tensors()
                .iter()
                .map(|t| {
                    TensorSpec::new(&t.name, gguf_decoded_dtype(t.ggml_type)?, t.shape.clone())
                })
                .collect(),
            Opened::Mlx(w) => Ok(w
                .tensors
                .iter()
                .map(|t| TensorSpec::new(&t.name, t.dtype, t.shape.clone()))
                .collect::<Result<_>>()?),
        }
    }

    /// Fetch one tensor (by name), borrowed where the input is mapped.
    fn fetch<'a>(&'a self, gguf: Option<&GgufFile<'a>>, name: &str) -> Result<TensorView<'a>> {
        match &self.opened {
            Opened::File(f) => f.view(name),
            Opened::Dir(d) => d.view(name),
            Opened::Gguf(_) => {
                let file = gguf.ok_or_else(|| CoreError::invalid_gguf("GGUF input not parsed"))?;
                let info = file
                    .tensor_info(name)
                    .ok_or_else(|| CoreError::not_found("no such tensor").with_tensor(name))?;
                // F16 and BF16 keep their bits; quantized types decode to F32.
                match info.ggml_type {
                    GgmlType::F16 | GgmlType::BF16 => TensorView::new(
                        name,
                        gguf_decoded_dtype(info.ggml_type)?,
                        info.shape.clone(),
                        Cow::Borrowed(file.raw(name)?),
                    ),
                    _ => file.tensor(name),
                }
            }
            Opened::Mlx(w) => w
                .tensors
                .iter()
                .find(|t| t.name == name)
                .map(|t| TensorView {
                    name: t.name.clone(),
                    dtype: t.dtype,
                    shape: t.shape.clone(),
                    data: Cow::Borrowed(t.data.as_ref()),
                })
                .ok_or_else(|| CoreError::not_found("no such tensor").with_tensor(name)),
        }
    }

    /// The classical model this input holds, if any (config.json or file metadata naming
    /// `linear_regression` / `logistic_regression`).
    fn model(&self) -> Result<AnyModel> {
        match &self.opened {
            Opened::Dir(d) => AnyModel::from_model_dir(d),
            Opened::File(f) => {
                let get = |name: &str| f.view(name).ok();
                AnyModel::from_config_and_tensors(&serde_json::json!({}), &get, f.metadata())
            }
            _ => Err(CoreError::invalid_model(
                "ONNX export needs a linear_regression or logistic_regression model (a SafeTensors file or model directory saved by this package)",
            )),
        }
    }
}

/// The SafeTensors dtype a GGUF tensor becomes: plain types keep theirs (integers stay
/// integers), block types decode to F32; a type without a decoder is ERR_UNSUPPORTED_DTYPE.
fn gguf_decoded_dtype(t: GgmlType) -> Result<DType> {
    t.decoded_dtype()
}

// ---------------------------------------------------------------------------------------
// inspect / validate.

/// Describe a SafeTensors file, sharded index, GGUF file, weights.mlx or model directory.
pub fn inspect(path: &Path) -> Result<FileReport> {
    let input = Input::open(path)?;
    let tensors = input.entries()?;
    let num_parameters = tensors
        .iter()
        .map(|t| checked_numel(&t.shape).unwrap_or(0) as u64)
        .sum();
    let (format, config) = match &input.opened {
        Opened::Dir(d) if input.format == InputFormat::ModelDir => {
            (d.format().name().to_string(), Some(d.config().clone()))
        }
        _ => (input.format.name().to_string(), None),
    };
    Ok(FileReport {
        path: path.display().to_string(),
        format,
        file_size: input.size,
        files: input.files(path),
        num_tensors: tensors.len(),
        num_parameters,
        metadata: input.metadata_json()?,
        config,
        tensors,
    })
}

/// Every problem found in a file or directory (not only the first).
pub fn validate(path: &Path) -> ValidationReport {
    let format = InputFormat::detect(path).ok();
    let mut problems: Vec<CoreError> = match format {
        None => vec![InputFormat::detect(path)
            .err()
            .unwrap_or_else(|| CoreError::not_found("not found"))],
        Some(InputFormat::SafeTensors) => st::validate_file(path),
        Some(kind @ (InputFormat::ModelDir | InputFormat::ShardedIndex)) => {
            let opened = if kind == InputFormat::ModelDir {
                ModelDir::open(path, &mut |_| {})
            } else {
                ModelDir::open_index(path, &mut |_| {})
            };
            match opened {
                Ok(_) => Vec::new(),
                Err(e) => {
                    // A shard that fails validation: list all of its problems.
                    let shard = e.path().map(Path::new).filter(|p| {
                        p.is_file() && p.extension().is_some_and(|x| x == "safetensors")
                    });
                    match shard.map(st::validate_file) {
                        Some(list) if !list.is_empty() => list,
                        _ => vec![e],
                    }
                }
            }
        }
        Some(_) => match Input::open(path) {
            Ok(_) => Vec::new(),
            Err(e) => vec![e],
        },
    };
    problems.dedup();
    ValidationReport::of(
        path.display().to_string(),
        format.map(|f| f.name().to_string()),
        &problems,
    )
}

/// The report of [`validate`] for a file already open: its header was validated at open, so
/// what is left to check is whether the file on disk changed since (one `stat`; see
/// [`SafeTensors::changes_since_open`]).
pub fn validate_open(file: &st::SafeTensors) -> ValidationReport {
    let problems = file.changes_since_open();
    ValidationReport::of(
        file.path()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        Some(InputFormat::SafeTensors.name().to_string()),
        &problems,
    )
}

// ---------------------------------------------------------------------------------------
// convert.

/// Convert `input` to `output` in the `to` format. `quantization` applies to GGUF: a
/// llama-quantize preset choosing each tensor's type (see [`gguf::plan_export`]); without
/// one every tensor keeps its type. `progress(done, total)` counts
/// input tensor bytes. The output is written atomically, without `fsync` (see
/// [`convert_with`]).
pub fn convert(
    input_path: &Path,
    output: &Path,
    to: Target,
    quantization: Option<Preset>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ConvertReport> {
    convert_with(
        input_path,
        output,
        to,
        quantization,
        Durability::default(),
        progress,
    )
}

/// [`convert`] with the [`Durability`] asked for.
pub fn convert_with(
    input_path: &Path,
    output: &Path,
    to: Target,
    quantization: Option<Preset>,
    durability: Durability,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ConvertReport> {
    if quantization.is_some() && to != Target::Gguf {
        return Err(CoreError::invalid_argument(
            "options.quantization applies only to: 'gguf'",
        ));
    }
    let input = Input::open(input_path)?;
    let specs = input.specs()?;
    let total: u64 = specs.iter().map(|s| s.byte_len as u64).sum();
    let parsed_gguf = match &input.opened {
        Opened::Gguf(map) => Some(GgufFile::parse(map)?),
        _ => None,
    };
    let gguf_ref = parsed_gguf.as_ref();
    let mut done = 0u64;
    let mut warnings = Vec::new();
    let mut architecture = None;
    let mut written_tensors = specs.len();
    progress(0, total);
    match to {
        Target::SafeTensors => {
            let metadata = match (&input.opened, gguf_ref) {
                (Opened::File(f), _) => f.metadata().cloned(),
                (Opened::Dir(d), _) => dir_metadata(d),
                (Opened::Mlx(w), _) => w.metadata.clone(),
                (Opened::Gguf(_), Some(file)) => Some(export::metadata_as_strings(file.metadata())),
                (Opened::Gguf(_), None) => None,
            };
            st::save_streaming_with(output, &specs, metadata.as_ref(), durability, &mut |i| {
                let view = input.fetch(gguf_ref, &specs[i].name)?;
                done += specs[i].byte_len as u64;
                progress(done, total);
                Ok(view.data)
            })?;
        }
        Target::Gguf => {
            let choice = match quantization {
                Some(p) => gguf::QuantizationChoice::Preset(p),
                None => gguf::QuantizationChoice::Keep,
            };
            // A model directory of an architecture llama.cpp runs: its own export.
            let recognized = match &input.opened {
                Opened::Dir(d) if input.format == InputFormat::ModelDir => {
                    let listing: Vec<llamacpp::TensorListing> = specs
                        .iter()
                        .map(|s| llamacpp::TensorListing {
                            name: s.name.clone(),
                            dtype: s.dtype,
                            shape: s.shape.clone(),
                        })
                        .collect();
                    Some(llamacpp::recognize(d.dir(), d.config(), &listing, choice)?)
                }
                _ => None,
            };
            if let Some(llamacpp::Recognition::Unknown(w)) = &recognized {
                warnings.push(w.clone());
            }
            if let Some(llamacpp::Recognition::Known(export)) = recognized {
                let sizes: BTreeMap<&str, u64> = specs
                    .iter()
                    .map(|s| (s.name.as_str(), s.byte_len as u64))
                    .collect();
                // The writer asks for each tensor after the previous one is written: its
                // pages of the mapped input are released then, so the process holds one
                // tensor of the input at a time (not the whole model, as a mapping would).
                let release = |name: &str| {
                    if let Opened::Dir(d) = &input.opened {
                        d.release(name);
                    }
                };
                let mut previous: Option<String> = None;
                export.write(output, durability, |name| {
                    if let Some(p) = previous.replace(name.to_string()) {
                        release(&p);
                    }
                    let view = input.fetch(gguf_ref, name)?;
                    done += sizes.get(name).copied().unwrap_or(0);
                    progress(done, total);
                    Ok(view)
                })?;
                if let Some(p) = previous {
                    release(&p);
                }
                progress(total, total);
                warnings.extend(export.warnings.iter().cloned());
                architecture = Some(export.architecture.to_string());
                written_tensors = export.tensors.len();
            } else {
                let model = match (&input.opened, gguf_ref) {
                    (Opened::Dir(d), _) => export::model_from_hf_config(d.config()),
                    (_, Some(file)) => export::model_from_gguf_metadata(file.metadata()),
                    _ => Default::default(),
                };
                let exports: Vec<gguf::ExportTensor> = specs
                    .iter()
                    .map(|s| gguf::ExportTensor {
                        name: &s.name,
                        shape: &s.shape,
                        dtype: s.dtype,
                        gguf_input: gguf_ref.is_some(),
                    })
                    .collect();
                let types = gguf::plan_export(choice, &model, &exports)?;
                let gspecs: Vec<GgufTensorSpec> = specs
                    .iter()
                    .zip(types)
                    .map(|(s, ty)| GgufTensorSpec::new(&s.name, s.shape.clone(), ty))
                    .collect();
                let metadata =
                    gguf_export_metadata(&input, gguf_ref, input_path, quantization, &gspecs);
                gguf::write_gguf_file_with(output, durability, &metadata, &gspecs, |i, spec| {
                    let view = input.fetch(gguf_ref, &spec.name)?;
                    done += specs[i].byte_len as u64;
                    progress(done, total);
                    Ok(view)
                })?;
            }
        }
        Target::Mlx => {
            let views: Vec<TensorView> = specs
                .iter()
                .map(|s| input.fetch(gguf_ref, &s.name))
                .collect::<Result<_>>()?;
            let metadata = match &input.opened {
                Opened::File(f) => f.metadata().cloned(),
                Opened::Mlx(w) => w.metadata.clone(),
                _ => None,
            };
            mlx::save_mlx_with(output, durability, &views, metadata.as_ref())?;
            progress(total, total);
        }
        Target::Onnx => {
            input.model()?.to_onnx_with(output, durability)?;
            progress(total, total);
        }
    }
    let output_bytes = std::fs::metadata(output).map(|m| m.len()).unwrap_or(0);
    Ok(ConvertReport {
        input: input_path.display().to_string(),
        output: output.display().to_string(),
        input_format: input.format.name().to_string(),
        output_format: to.name().to_string(),
        tensors: written_tensors,
        input_bytes: input.size,
        output_bytes,
        quantization: quantization.map(|p| p.name().to_string()),
        architecture,
        warnings,
    })
}

/// The `__metadata__` of a model directory's first weight file.
fn dir_metadata(d: &ModelDir) -> Option<BTreeMap<String, String>> {
    d.tensor_names()
        .next()
        .and_then(|n| d.source(n).ok())
        .and_then(|s| s.metadata().cloned())
}

/// The metadata of a GGUF export: the standard keys, then the input's own — a GGUF input's
/// key/values (but those describing its layout), a SafeTensors file's or model directory's
/// `__metadata__` as `safetensors.*` strings — and, for a preset, `general.file_type` and
/// `general.quantization_version` as llama-quantize writes them.
fn gguf_export_metadata(
    input: &Input,
    gguf_input: Option<&GgufFile<'_>>,
    input_path: &Path,
    preset: Option<Preset>,
    gspecs: &[GgufTensorSpec],
) -> Vec<(String, GgufValue)> {
    let architecture = match (&input.opened, gguf_input) {
        (Opened::Dir(d), _) => d
            .config()
            .get("model_type")
            .and_then(|v| v.as_str())
            .map(str::to_string),
        (Opened::File(f), _) => f.metadata().and_then(|m| m.get("model_type").cloned()),
        (_, Some(file)) => file.architecture().map(str::to_string),
        _ => None,
    }
    .unwrap_or_else(|| "unknown".to_string());
    let name = gguf_input
        .and_then(|f| f.get(gguf::keys::NAME))
        .and_then(GgufValue::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| {
            input_path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
    let mut metadata = gguf::standard_metadata(&architecture, &name, gspecs);
    if let Some(file) = gguf_input {
        for (k, v) in file.metadata() {
            if !export::is_layout_key(k) && !metadata.iter().any(|(m, _)| m == k) {
                metadata.push((k.clone(), v.clone()));
            }
        }
    }
    let strings = match &input.opened {
        Opened::File(f) => f.metadata().cloned(),
        Opened::Dir(d) => dir_metadata(d),
        _ => None,
    };
    for (k, v) in strings.into_iter().flatten() {
        metadata.push((format!("safetensors.{k}"), GgufValue::String(v)));
    }
    if let Some(p) = preset {
        // As llama-quantize writes them, whether or not a tensor ended up quantized.
        if !metadata
            .iter()
            .any(|(k, _)| k == gguf::keys::QUANTIZATION_VERSION)
        {
            metadata.push((
                gguf::keys::QUANTIZATION_VERSION.to_string(),
                GgufValue::U32(gguf::QUANTIZATION_VERSION),
            ));
        }
        metadata.push((export::FILE_TYPE.to_string(), export::file_type_value(p)));
    }
    metadata
}

#[cfg(test)]
mod tests;
