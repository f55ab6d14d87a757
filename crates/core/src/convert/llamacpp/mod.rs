//! From a Hugging Face model directory to the GGUF that llama.cpp's loader expects.
//!
//! [`recognize`] takes what a directory holds — `config.json`, the tokenizer files beside it
//! and the list of its tensors (name, dtype, shape; no data) — and, for an architecture we
//! know, returns an [`LlamaExport`]: the GGUF key/values (`general.*`, the architecture's
//! hyper-parameters, `tokenizer.ggml.*`, the chat template), and the tensor plan: for each
//! tensor of the output its llama.cpp name, shape, ggml type and where its data comes from
//! (a source tensor, possibly with a layout transform, or values generated here). The caller
//! streams the tensors one at a time through [`LlamaExport::load`].
//!
//! One module per architecture family, each a table: `bert` (and XLM-RoBERTa), `gemma`
//! (Gemma 1–3), `gpt2`, `granite`, `llama`, `mistral` (Mistral and Mixtral), `modernbert`,
//! `olmo2`, `phi3`, `qwen2`, `qwen3`, `qwen_moe` (Qwen2-MoE and Qwen3-MoE),
//! `smollm3`, `starcoder2`. What they
//! write follows llama.cpp's own converter (`convert_hf_to_gguf.py`, whose output the tests
//! compare against key by key and tensor by tensor) and its loader (`llama-model.cpp`, which
//! the tests run). Everything is checked before a byte is written: a config whose numbers
//! disagree with each other or with the tensors, a tensor missing from a layer or one that
//! llama.cpp has no place for, or a tokenizer file that does not parse is ERR_INVALID_MODEL
//! naming the field, tensor or file.

mod bert;
mod decoder;
mod gemma;
mod gpt2;
mod granite;
mod hparams;
mod llama;
pub mod lora;
mod mistral;
mod modernbert;
mod names;
mod olmo2;
mod phi3;
mod qwen2;
mod qwen3;
mod qwen_moe;
mod smollm3;
mod starcoder2;
pub(crate) mod vocab;

use crate::dtype::DType;
use crate::error::{CoreError, Result};
use crate::format::gguf::{self, GgmlType, GgufTensorSpec, GgufValue, QuantizationChoice};
use crate::pretrained::companion::ModelFiles;
use crate::tensor::TensorView;
use hparams::Hparams;
use serde_json::Value as Json;
use std::borrow::Cow;
use std::path::Path;

/// One tensor of the input, as listed (no data).
#[derive(Debug, Clone, PartialEq)]
pub struct TensorListing {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

/// What [`recognize`] makes of a directory.
#[derive(Debug)]
pub enum Recognition {
    /// An architecture we export for llama.cpp.
    Known(Box<LlamaExport>),
    /// A directory that is not a transformers checkpoint (no `architectures`, no
    /// `transformers_version`) of no architecture we know: the caller keeps the generic
    /// export and passes this warning on.
    Unknown(String),
}

/// The GGUF llama.cpp expects for a model: metadata and the tensor plan.
#[derive(Debug)]
pub struct LlamaExport {
    /// llama.cpp's architecture name (`general.architecture`).
    pub architecture: &'static str,
    /// Every key/value of the output, `general.architecture` first.
    pub metadata: Vec<(String, GgufValue)>,
    /// The output tensors, in the order they are written.
    pub tensors: Vec<ExportTensor>,
    /// Things the user should know (the conversion still succeeds).
    pub warnings: Vec<String>,
}

/// One tensor of the output.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportTensor {
    pub name: String,
    /// Row-major, outermost first.
    pub shape: Vec<usize>,
    pub ggml_type: GgmlType,
    pub origin: Origin,
}

/// Where an output tensor's values come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    /// A tensor of the input, by its name there, rearranged by `transform`.
    Source { name: String, transform: Transform },
    /// F32 values computed from the config (llama 3's rope frequency factors).
    Generated(Vec<f32>),
    /// Tensors of the input of one shape and dtype, stacked along a new outermost axis in
    /// this order (a layer's experts).
    Stack(Vec<String>),
}

/// A layout change between the Hugging Face tensor and llama.cpp's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transform {
    Identity,
    /// The Q/K row permutation of llama-style rope: Hugging Face rotates the two halves of
    /// each head (`rotate_half`), llama.cpp rotates adjacent pairs, so within each of
    /// `heads` heads, row `j·(d/2) + i` moves to row `2i + j` (for weights and biases).
    RopeInterleave {
        heads: usize,
    },
    /// A matrix transposed: the source is `[cols, rows]` of the output's `[rows, cols]`.
    Transpose,
    /// Every value plus one (Gemma's norms scale by `1 + w`, llama.cpp's by the weight), in
    /// the converter's precision: F16 in F16, every other type in F32 (the output's dtype).
    AddOne,
    /// The source's first rows left out: the source has this many rows more than the output
    /// (RoBERTa's position embeddings, whose rows below `pad_token_id + 1` no position uses).
    SkipRows(usize),
}

impl LlamaExport {
    /// Write the export to `path` atomically, fetching each source tensor by name when its
    /// turn comes (one at a time: the model is never in memory twice).
    pub fn write<'a>(
        &self,
        path: &Path,
        options: crate::fsutil::WriteOptions<'_>,
        mut fetch: impl FnMut(&str) -> Result<TensorView<'a>>,
    ) -> Result<()> {
        let specs: Vec<GgufTensorSpec> = self
            .tensors
            .iter()
            .map(|t| GgufTensorSpec::new(&t.name, t.shape.clone(), t.ggml_type))
            .collect();
        crate::format::gguf::write_gguf_file(path, &self.metadata, &specs, options, |i, _| {
            self.load(&self.tensors[i], &mut fetch)
        })
    }

    /// The data of `tensor` to write, from `fetch(source name)` for source tensors.
    pub fn load<'a>(
        &self,
        tensor: &ExportTensor,
        mut fetch: impl FnMut(&str) -> Result<TensorView<'a>>,
    ) -> Result<TensorView<'a>> {
        match &tensor.origin {
            Origin::Generated(values) => {
                TensorView::from_f32(&tensor.name, tensor.shape.clone(), values)
            }
            Origin::Stack(names) => stack(tensor, names, fetch),
            Origin::Source { name, transform } => {
                let view = fetch(name)?;
                let source_shape: Vec<usize> = match transform {
                    Transform::Transpose => tensor.shape.iter().rev().copied().collect(),
                    Transform::SkipRows(n) => skip_rows_source_shape(&tensor.shape, *n),
                    _ => tensor.shape.clone(),
                };
                if view.shape != source_shape {
                    return Err(CoreError::invalid_model(format!(
                        "shape {:?} differs from the listed {:?}",
                        view.shape, tensor.shape
                    ))
                    .with_tensor(name));
                }
                let (dtype, data) = match transform {
                    Transform::Identity => (view.dtype, view.data),
                    Transform::RopeInterleave { heads } => (
                        view.dtype,
                        Cow::Owned(rope_interleave(
                            &view.data,
                            &view.shape,
                            view.dtype,
                            *heads,
                        )?),
                    ),
                    Transform::Transpose => (
                        view.dtype,
                        Cow::Owned(transpose(&view.data, &view.shape, view.dtype)?),
                    ),
                    Transform::AddOne => {
                        let (dtype, data) =
                            add_one(&view.data, view.dtype).map_err(|e| e.with_tensor(name))?;
                        (dtype, Cow::Owned(data))
                    }
                    Transform::SkipRows(n) => {
                        // The source has `n` rows more than the output (its shape was checked).
                        let rows = view.shape.first().copied().unwrap_or(0);
                        let skipped = view.data.len().checked_div(rows).unwrap_or(0) * n;
                        if skipped > view.data.len() {
                            return Err(CoreError::size_mismatch(format!(
                                "{} bytes for shape {:?}",
                                view.data.len(),
                                view.shape
                            ))
                            .with_tensor(name));
                        }
                        let data = match view.data {
                            Cow::Borrowed(b) => Cow::Borrowed(&b[skipped..]),
                            Cow::Owned(mut v) => {
                                v.drain(..skipped);
                                Cow::Owned(v)
                            }
                        };
                        (view.dtype, data)
                    }
                };
                Ok(TensorView {
                    name: tensor.name.clone(),
                    dtype,
                    shape: tensor.shape.clone(),
                    data,
                })
            }
        }
    }
}

/// [`Origin::Stack`]: fetch each part in turn and append its bytes, so one part at a time is
/// held beside the output (the output is `tensor.shape`, checked against every part).
fn stack<'a>(
    tensor: &ExportTensor,
    names: &[String],
    mut fetch: impl FnMut(&str) -> Result<TensorView<'a>>,
) -> Result<TensorView<'a>> {
    let part_shape = tensor.shape.get(1..).unwrap_or_default();
    if tensor.shape.first() != Some(&names.len()) {
        return Err(CoreError::invalid_model(format!(
            "{} parts cannot stack into shape {:?}",
            names.len(),
            tensor.shape
        ))
        .with_tensor(&tensor.name));
    }
    let mut data: Vec<u8> = Vec::new();
    let mut dtype = None;
    for name in names {
        let view = fetch(name)?;
        if view.shape != part_shape || dtype.is_some_and(|d| d != view.dtype) {
            return Err(CoreError::invalid_model(format!(
                "{} {:?} cannot stack with the other parts of {} ({} {part_shape:?})",
                view.dtype,
                view.shape,
                tensor.name,
                dtype.unwrap_or(view.dtype)
            ))
            .with_tensor(name));
        }
        if dtype.is_none() {
            let len = (view.data.len() as u64).saturating_mul(names.len() as u64);
            data = crate::memory::reserve(len, "stacked experts")
                .map_err(|e| e.with_tensor(&tensor.name))?;
        }
        dtype = Some(view.dtype);
        data.extend_from_slice(&view.data);
    }
    Ok(TensorView {
        name: tensor.name.clone(),
        dtype: dtype.unwrap_or(DType::F32),
        shape: tensor.shape.clone(),
        data: Cow::Owned(data),
    })
}

/// The shape of the source of a [`Transform::SkipRows`] output of `shape`.
pub(crate) fn skip_rows_source_shape(shape: &[usize], n: usize) -> Vec<usize> {
    let mut source = shape.to_vec();
    if let Some(rows) = source.first_mut() {
        *rows += n;
    }
    source
}

/// Apply [`Transform::RopeInterleave`] to row-major bytes (any dtype: rows move whole).
pub fn rope_interleave(
    data: &[u8],
    shape: &[usize],
    dtype: DType,
    heads: usize,
) -> Result<Vec<u8>> {
    let rows = shape.first().copied().unwrap_or(1);
    let row_elems: usize = shape.iter().skip(1).product();
    let elem = dtype
        .size()
        .ok_or_else(|| CoreError::unsupported_dtype(format!("{dtype} rows cannot be permuted")))?;
    let row_bytes = row_elems * elem;
    if heads == 0 || !rows.is_multiple_of(heads * 2) || data.len() != rows * row_bytes {
        return Err(CoreError::invalid_model(format!(
            "{rows} rows cannot be split into {heads} rope heads of an even size"
        )));
    }
    let head_dim = rows / heads;
    let half = head_dim / 2;
    let mut out = vec![0u8; data.len()];
    for h in 0..heads {
        for i in 0..half {
            for j in 0..2 {
                let src = h * head_dim + j * half + i;
                let dst = h * head_dim + 2 * i + j;
                out[dst * row_bytes..(dst + 1) * row_bytes]
                    .copy_from_slice(&data[src * row_bytes..(src + 1) * row_bytes]);
            }
        }
    }
    Ok(out)
}

/// [`Transform::AddOne`]: the values plus one, and their dtype. The converter adds in torch
/// after widening every type but F16 and F32 to F32; F16 adds in F32 and rounds back.
pub fn add_one(data: &[u8], dtype: DType) -> Result<(DType, Vec<u8>)> {
    let mut values = crate::cast::to_f32_vec(dtype, data)?;
    for v in &mut values {
        *v += 1.0;
    }
    let out = if dtype == DType::F16 {
        DType::F16
    } else {
        DType::F32
    };
    Ok((out, crate::cast::encode_f32(&values, out)?))
}

/// [`Transform::Transpose`] of a row-major matrix of `shape` (any dtype: elements move whole).
pub fn transpose(data: &[u8], shape: &[usize], dtype: DType) -> Result<Vec<u8>> {
    let elem = dtype.size().ok_or_else(|| {
        CoreError::unsupported_dtype(format!("{dtype} matrices cannot be transposed"))
    })?;
    let (rows, cols) = match shape {
        [r, c] => (*r, *c),
        _ => {
            return Err(CoreError::invalid_model(format!(
                "shape {shape:?} is not a matrix and cannot be transposed"
            )))
        }
    };
    if data.len() != rows * cols * elem {
        return Err(CoreError::size_mismatch(format!(
            "{} bytes for a {dtype} matrix of shape {shape:?}",
            data.len()
        )));
    }
    let mut out = crate::memory::reserve(data.len() as u64, "a transposed matrix")?;
    out.resize(data.len(), 0);
    for r in 0..rows {
        for c in 0..cols {
            let (src, dst) = ((r * cols + c) * elem, (c * rows + r) * elem);
            out[dst..dst + elem].copy_from_slice(&data[src..src + elem]);
        }
    }
    Ok(out)
}

/// The input handed to an architecture.
pub(crate) struct ModelInput<'a> {
    /// The directory's files beside the weights (tokenizer, templates, pooling).
    pub files: &'a ModelFiles,
    pub hparams: Hparams,
    pub tensors: &'a [TensorListing],
}

/// An architecture: the Hugging Face class names (`config.json`'s `architectures`) and
/// `model_type` it handles, and the function that plans its export.
pub(crate) struct Architecture {
    pub hf_classes: &'static [&'static str],
    pub model_type: &'static str,
    pub plan: fn(&ModelInput) -> Result<LlamaExport>,
}

/// Every architecture we export, one line each.
const ARCHITECTURES: &[&Architecture] = &[
    &bert::ARCH,
    &bert::XLM_ROBERTA,
    &gemma::GEMMA,
    &gemma::GEMMA2,
    &gemma::GEMMA3,
    &gemma::GEMMA3_CONDITIONAL,
    &gpt2::ARCH,
    &granite::ARCH,
    &llama::ARCH,
    &mistral::ARCH,
    &mistral::MIXTRAL,
    &modernbert::ARCH,
    &olmo2::ARCH,
    &phi3::ARCH,
    &qwen2::ARCH,
    &qwen3::ARCH,
    &qwen_moe::QWEN2_MOE,
    &qwen_moe::QWEN3_MOE,
    &smollm3::ARCH,
    &starcoder2::ARCH,
];

/// Recognise the model in `dir` (its parsed `config.json` and tensor listing) and plan its
/// llama.cpp export: the converter's types, then, with a preset, llama-quantize's.
pub fn recognize(
    dir: &Path,
    config: &Json,
    tensors: &[TensorListing],
    quantization: QuantizationChoice,
) -> Result<Recognition> {
    let hparams = Hparams::new(config)?;
    let arch = match find_architecture(&hparams) {
        Ok(arch) => arch,
        Err(what) => {
            let known: Vec<&str> = ARCHITECTURES
                .iter()
                .flat_map(|a| a.hf_classes.iter().copied())
                .collect();
            // A transformers checkpoint (save_pretrained writes both fields) of another
            // architecture would make a GGUF llama.cpp refuses: refused before anything is
            // written. Other directories (this package's models, hand-made configs) keep the
            // generic export.
            if hparams.get("architectures").is_some()
                || hparams.get("transformers_version").is_some()
            {
                return Err(CoreError::invalid_model(format!(
                    "the llama.cpp export does not support {what}; it supports {}",
                    known.join(", ")
                ))
                .with_path(dir.join("config.json")));
            }
            return Ok(Recognition::Unknown(format!(
                "llama.cpp export does not know {what} (it knows {}): wrote the tensors under their \
                 Hugging Face names without hyper-parameters or tokenizer, which llama.cpp cannot run",
                known.join(", ")
            )));
        }
    };
    let files = ModelFiles::new(dir)?;
    let input = ModelInput {
        files: &files,
        hparams,
        tensors,
    };
    let mut export = (arch.plan)(&input).map_err(|e| e.with_path(dir))?;
    quantize_plan(&mut export, quantization).map_err(|e| e.with_path(dir))?;
    export.warnings.extend(files.take_warnings());
    Ok(Recognition::Known(Box::new(export)))
}

/// The architecture of a config, as the converter finds it (by the first class name, or
/// without one by model_type), or what to call the config in a message when none is known.
fn find_architecture(hparams: &Hparams) -> std::result::Result<&'static Architecture, String> {
    let classes: Vec<&str> = match hparams.get("architectures") {
        Some(Json::Array(a)) => a.iter().filter_map(Json::as_str).collect(),
        _ => Vec::new(),
    };
    let model_type = hparams.string("model_type");
    // The converter goes by the first class name; without one, by model_type.
    let arch = match classes.first() {
        Some(class) => ARCHITECTURES.iter().find(|a| a.hf_classes.contains(class)),
        None => ARCHITECTURES
            .iter()
            .find(|a| Some(a.model_type) == model_type),
    };
    arch.copied()
        .ok_or_else(|| match (classes.first(), model_type) {
            (Some(class), _) => format!("architecture '{class}'"),
            (None, Some(t)) => format!("model_type '{t}'"),
            (None, None) => "a config.json without 'architectures' or 'model_type'".to_string(),
        })
}

/// Apply `quantization` to an export whose tensors have the converter's types, as
/// llama-quantize would on the converter's file (the model's numbers from the export's own
/// `{arch}.*` keys), and set `general.file_type` to match.
fn quantize_plan(export: &mut LlamaExport, quantization: QuantizationChoice) -> Result<()> {
    let file_type = match quantization {
        QuantizationChoice::Keep => {
            let types: Vec<(GgmlType, &[usize])> = export
                .tensors
                .iter()
                .map(|t| (t.ggml_type, t.shape.as_slice()))
                .collect();
            gguf::export::file_type_of_kept(&types)
        }
        QuantizationChoice::Preset(preset) => {
            let model = gguf::export::model_from_gguf_metadata(&export.metadata);
            let plans: Vec<gguf::TensorPlan> = export
                .tensors
                .iter()
                .map(|t| gguf::TensorPlan {
                    name: &t.name,
                    shape: &t.shape,
                    current: t.ggml_type,
                })
                .collect();
            let types = gguf::plan_preset(preset, &model, &plans)?;
            for (t, ty) in export.tensors.iter_mut().zip(types) {
                t.ggml_type = ty;
            }
            preset.file_type()
        }
    };
    for (k, v) in export.metadata.iter_mut() {
        if k == "general.file_type" {
            *v = GgufValue::U32(file_type);
        }
    }
    Ok(())
}

/// The ggml type of an output tensor as llama.cpp's converter writes it, before any
/// quantization preset: tensors of one dimension, norms, biases, position and token-type
/// embeddings F32; everything else in its source's type (integers stay integers; a dtype
/// GGUF cannot hold is ERR_UNSUPPORTED_DTYPE).
pub(crate) fn output_type(name: &str, shape: &[usize], source: DType) -> Result<GgmlType> {
    let always_f32 = shape.len() <= 1
        || name.ends_with("_norm.weight")
        || !name.ends_with(".weight")
        || name == "position_embd.weight"
        || name == "token_types.weight"
        || name.ends_with(".ffn_gate_inp.weight")
        || name.ends_with(".ffn_gate_inp_shexp.weight");
    let base = gguf::export::base_type(source).map_err(|e| e.with_tensor(name))?;
    let float = !matches!(
        base,
        GgmlType::I8 | GgmlType::I16 | GgmlType::I32 | GgmlType::I64
    );
    Ok(if always_f32 && float {
        GgmlType::F32
    } else {
        base
    })
}

/// The export tensors of `mapped`, in order, each from its source tensor: a transposed
/// (`Conv1D`) weight with [`Transform::Transpose`], any other with `transform(m)`.
pub(crate) fn source_tensors(
    mapped: &[names::Mapped],
    listing: &[TensorListing],
    transform: impl Fn(&names::Mapped) -> Transform,
) -> Result<Vec<ExportTensor>> {
    mapped
        .iter()
        .map(|m| {
            Ok(ExportTensor {
                ggml_type: output_type(&m.gguf, &m.shape, source_dtype(listing, &m.source))?,
                name: m.gguf.clone(),
                shape: m.shape.clone(),
                origin: Origin::Source {
                    name: m.source.clone(),
                    transform: if m.transposed {
                        Transform::Transpose
                    } else {
                        transform(m)
                    },
                },
            })
        })
        .collect()
}

/// The key/values every export starts with, in the converter's order: `general.*` and the
/// model's sizes under `{arch}.`.
pub(crate) struct Header {
    pub arch: &'static str,
    pub block_count: usize,
    pub context: usize,
    pub embd: usize,
    pub ff: usize,
    pub n_head: usize,
}

impl Header {
    pub fn write(&self, md: &mut Metadata, input: &ModelInput, tensors: &[ExportTensor]) {
        let k = |s: &str| format!("{}.{s}", self.arch);
        md.set("general.architecture", self.arch);
        md.set("general.type", "model");
        md.set(
            "general.name",
            decoder::model_name(input.files.dir(), &input.hparams),
        );
        md.set("general.size_label", decoder::size_label_of(tensors));
        md.set(k("block_count"), GgufValue::U32(self.block_count as u32));
        md.set(k("context_length"), GgufValue::U32(self.context as u32));
        md.set(k("embedding_length"), GgufValue::U32(self.embd as u32));
        md.set(k("feed_forward_length"), GgufValue::U32(self.ff as u32));
        md.set(
            k("attention.head_count"),
            GgufValue::U32(self.n_head as u32),
        );
    }
}

/// The dtype of source tensor `name` in the listing (F32 if it is not listed: it cannot be,
/// the architectures map listed tensors only).
pub(crate) fn source_dtype(tensors: &[TensorListing], name: &str) -> DType {
    tensors
        .iter()
        .find(|t| t.name == name)
        .map_or(DType::F32, |t| t.dtype)
}

/// `general.size_label` as gguf-py writes it: the parameter count with two significant
/// digits and K/M/B/T.
pub(crate) fn size_label(params: u64) -> String {
    let p = params as f64;
    let (scaled, suffix) = if p > 1e12 {
        (p * 1e-12, "T")
    } else if p > 1e9 {
        (p * 1e-9, "B")
    } else if p > 1e6 {
        (p * 1e-6, "M")
    } else {
        (p * 1e-3, "K")
    };
    // Python's round() is half-to-even, and `len(str(...).lstrip('0'))` counts digits.
    let rounded = scaled.round_ties_even() as u64;
    let digits = rounded.to_string().trim_start_matches('0').len();
    let decimals = 2usize.saturating_sub(digits);
    format!("{scaled:.decimals$}{suffix}")
}

/// An ordered key/value list where setting a key again replaces its value (as gguf-py's
/// writer does).
#[derive(Debug, Default)]
pub(crate) struct Metadata(Vec<(String, GgufValue)>);

impl Metadata {
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<GgufValue>) {
        let key = key.into();
        let value = value.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }
    pub fn into_vec(self) -> Vec<(String, GgufValue)> {
        self.0
    }
}

#[cfg(test)]
mod tests;
