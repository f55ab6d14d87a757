//! The streaming GGUF writer and the type policy for checkpoint conversion.
//!
//! The header lists every tensor with its data offset, so it is written first, from the
//! names, shapes and target types alone (sizes follow from shape and type). Tensor data is
//! then pulled one tensor at a time through a callback, converted or quantized in pieces of
//! 512K elements on every core, and written in order while later pieces are encoded: a model
//! never needs to be in memory twice.
//!
//! Files follow the rules of ggml's own reader (`gguf.cpp`) so llama.cpp tools accept them:
//! version 3, unique tensor names of 1 to 63 bytes without NUL (ggml cuts a name at its first
//! NUL: two names would read back as one), at most 4 dimensions, none of them empty,
//! rows a whole number of blocks, every offset a multiple of `general.alignment` (32 unless
//! given), tensors laid out in order with zero padding to the alignment after each one, the
//! last included, strings and arrays within ggml's limits, no arrays of arrays.

use super::export;
use super::{
    align_up, keys, GgmlType, DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VERSION, MAX_ALIGNMENT,
    MAX_ARRAY_ELEMENTS, MAX_DIMS, MAX_STRING_BYTES, MAX_TENSOR_NAME_BYTES, QUANTIZATION_VERSION,
};
use crate::cast;
use crate::codecs::presets::{self, Preset};
use crate::dtype::DType;
use crate::error::{CoreError, ErrorKind, Result};
#[cfg(feature = "fs")]
use crate::fsutil;
use crate::names::printable;
use crate::source::value::{encode_string, GgufArray, GgufValue};
use crate::tensor::{checked_numel, TensorView};
use std::collections::HashSet;
use std::io::Write;
#[cfg(feature = "fs")]
use std::path::Path;

/// Elements per piece when a tensor is converted: pieces are encoded on every core and
/// written in order while later ones are encoded ([`crate::parallel::encode_ordered`]).
/// 512K elements (2 MiB of F32) keep each thread's work in cache-friendly steps, below the
/// size at which `cast::to_f32` would start threads of its own, and the buffers small:
/// a window of `PIECE_WINDOW` pieces, at most 16 MiB of F32 output.
const PIECE_ELEMENTS: usize = 1 << 19;
/// Pieces that may be encoded ahead of the one being written.
const PIECE_WINDOW: usize = 8;
/// The spec's limit on key length.
const MAX_KEY_BYTES: usize = u16::MAX as usize;

/// The type a tensor of a classical model (`toGguf`: coefficient matrices and vectors, not
/// llama.cpp-named weights) of `shape` (outermost first) is stored as under `preset`:
///
/// * F32, F16 and BF16 apply to every tensor.
/// * Block presets give tensors of two or more dimensions the preset's main type (Q4_K for
///   Q4_K_M), falling back as llama-quantize does when a row is not a whole number of its
///   blocks (Q4_K → Q5_0, …, F16 when even 32 does not divide the row). Tensors of one
///   dimension or none (intercepts, binary models' coefficient vectors) are small and
///   precision-sensitive: they stay F32.
///
/// Conversions of checkpoints use llama-quantize's per-tensor rules instead
/// ([`super::export::plan_export`]).
pub fn choose_type(shape: &[usize], preset: Preset) -> GgmlType {
    let main = preset.default_type();
    if !main.is_quantized() {
        return main;
    }
    match shape.last() {
        Some(&row) if shape.len() >= 2 => presets::fallback(main, row),
        _ => GgmlType::F32,
    }
}

/// A tensor to be written: name, shape (outermost first) and the type it is stored as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgufTensorSpec {
    pub name: String,
    pub shape: Vec<usize>,
    pub ggml_type: GgmlType,
    /// The data comes as bytes already stored in `ggml_type` ([`TensorData::Stored`]: a
    /// GGUF input's tensor copied as it is), so any ggml type is accepted, encoder or not.
    pub copied: bool,
}

/// A tensor's data as a writer's `load` callback hands it over.
pub enum TensorData<'d> {
    /// Values, converted to the spec's type as [`write_gguf`] says.
    View(TensorView<'d>),
    /// Bytes already in the spec's type, written as they are (for specs made with
    /// [`GgufTensorSpec::copied`]).
    Stored(std::borrow::Cow<'d, [u8]>),
}

impl GgufTensorSpec {
    pub fn new(name: impl Into<String>, shape: Vec<usize>, ggml_type: GgmlType) -> Self {
        GgufTensorSpec {
            name: name.into(),
            shape,
            ggml_type,
            copied: false,
        }
    }

    /// A tensor whose stored bytes (of `ggml_type`) are copied as they are.
    pub fn copied(name: impl Into<String>, shape: Vec<usize>, ggml_type: GgmlType) -> Self {
        GgufTensorSpec {
            copied: true,
            ..GgufTensorSpec::new(name, shape, ggml_type)
        }
    }

    /// Check the spec against what the writer (and ggml's reader) accept, and return the
    /// tensor's size in bytes. Errors are ERR_INVALID_ARGUMENT naming the tensor.
    pub fn byte_len(&self) -> Result<usize> {
        let fail = |msg: String| Err(CoreError::invalid_argument(msg).with_tensor(&self.name));
        if !self.copied && !writable(self.ggml_type) {
            return fail(format!(
                "GGUF type {} cannot be written; the types written are {}",
                self.ggml_type,
                writable_names().join(", ")
            ));
        }
        if self.name.is_empty() || self.name.len() > MAX_TENSOR_NAME_BYTES {
            return fail(format!(
                "GGUF tensor names must have 1 to {MAX_TENSOR_NAME_BYTES} bytes (ggml's limit), \
                 this one has {}",
                self.name.len()
            ));
        }
        if self.name.contains('\0') {
            return fail(
                "GGUF tensor names cannot hold a NUL byte: ggml's reader cuts the name there"
                    .to_string(),
            );
        }
        if self.shape.len() > MAX_DIMS {
            return fail(format!(
                "GGUF tensors have at most {MAX_DIMS} dimensions, shape {:?} has {}",
                self.shape,
                self.shape.len()
            ));
        }
        if self.shape.contains(&0) && !self.copied {
            // ggml's reader divides by the outer dimensions while checking sizes (a copied
            // tensor is written as its input held it).
            return fail(format!(
                "shape {:?} has an empty dimension, which ggml's reader cannot load",
                self.shape
            ));
        }
        let numel = match checked_numel(&self.shape) {
            Some(n) if n as u64 <= i64::MAX as u64 => n,
            _ => return fail(format!("shape {:?} has too many elements", self.shape)),
        };
        let row = self.shape.last().copied().unwrap_or(1);
        if !row.is_multiple_of(self.ggml_type.block_size()) {
            return fail(format!(
                "{} stores rows in blocks of {}, but the innermost dimension is {row}, which no \
                 whole number of blocks fills (choose a type whose blocks divide it, or F16)",
                self.ggml_type,
                self.ggml_type.block_size()
            ));
        }
        match self.ggml_type.byte_len(numel) {
            Some(n) => Ok(n),
            None => fail(format!("shape {:?} overflows the size", self.shape)),
        }
    }
}

/// The metadata every written model starts with: `general.architecture`, `general.name`,
/// `general.alignment` (UINT32 32) and, when any tensor is block-quantized,
/// `general.quantization_version` (UINT32 2). Append model-specific keys after these.
pub fn standard_metadata(
    architecture: &str,
    name: &str,
    tensors: &[GgufTensorSpec],
) -> Vec<(String, GgufValue)> {
    let mut metadata = vec![
        (
            keys::ARCHITECTURE.to_string(),
            GgufValue::from(architecture),
        ),
        (keys::NAME.to_string(), GgufValue::from(name)),
        (
            keys::ALIGNMENT.to_string(),
            GgufValue::U32(DEFAULT_ALIGNMENT as u32),
        ),
    ];
    if tensors.iter().any(|t| t.ggml_type.is_quantized()) {
        metadata.push((
            keys::QUANTIZATION_VERSION.to_string(),
            GgufValue::U32(QUANTIZATION_VERSION),
        ));
    }
    metadata
}

/// Validate the metadata and return the alignment it implies.
fn check_metadata(metadata: &[(String, GgufValue)], shard: Shard) -> Result<usize> {
    let mut seen = HashSet::new();
    for (key, value) in metadata {
        let fail = |msg: String| {
            Err(CoreError::invalid_argument(format!(
                "metadata '{}': {msg}",
                printable(key)
            )))
        };
        if key.is_empty() || key.len() > MAX_KEY_BYTES {
            return fail(format!("keys must have 1 to {MAX_KEY_BYTES} bytes"));
        }
        if !seen.insert(key.as_str()) {
            return fail("duplicate key".to_string());
        }
        match value {
            GgufValue::Array(a) if a.len() as u64 > MAX_ARRAY_ELEMENTS => {
                return fail(format!("arrays hold at most {MAX_ARRAY_ELEMENTS} elements"));
            }
            _ => {}
        }
        let too_long = |s: &String| s.len() as u64 > MAX_STRING_BYTES;
        let long_string = match value {
            GgufValue::String(s) => too_long(s),
            GgufValue::Array(GgufArray::String(v)) => v.iter().any(too_long),
            _ => false,
        };
        if long_string {
            return fail(format!("strings hold at most {MAX_STRING_BYTES} bytes"));
        }
    }
    match metadata.iter().find(|(k, _)| k == keys::ARCHITECTURE) {
        Some((_, GgufValue::String(_))) => {}
        None if shard == Shard::Later => {}
        _ => {
            return Err(CoreError::invalid_argument(format!(
                "metadata must contain '{}' as a string",
                keys::ARCHITECTURE
            )))
        }
    }
    match metadata.iter().find(|(k, _)| k == keys::ALIGNMENT) {
        None => Ok(DEFAULT_ALIGNMENT),
        Some((_, GgufValue::U32(a))) if a.is_power_of_two() && *a as usize <= MAX_ALIGNMENT => {
            Ok(*a as usize)
        }
        Some(_) => Err(CoreError::invalid_argument(format!(
            "'{}' must be a UINT32 power of two of at most {MAX_ALIGNMENT}",
            keys::ALIGNMENT
        ))),
    }
}

fn io_error(err: std::io::Error) -> CoreError {
    CoreError::new(ErrorKind::Io, err.to_string())
}

/// Counts what goes out, so padding and the final size need no `seek`.
struct Counting<'w> {
    out: &'w mut dyn Write,
    written: u64,
}

impl Counting<'_> {
    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes).map_err(io_error)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn pad_to(&mut self, alignment: u64) -> Result<()> {
        let target = align_up(self.written, alignment)
            .ok_or_else(|| CoreError::invalid_argument("file size overflows"))?;
        let zeros = [0u8; 64];
        while self.written < target {
            let n = ((target - self.written) as usize).min(zeros.len());
            self.write(&zeros[..n])?;
        }
        Ok(())
    }
}

/// Write a GGUF file to `out`: the header for `metadata` and `tensors`, then each tensor's
/// data, obtained by calling `load(index, spec)` once per tensor, in order. The loaded view
/// must have the spec's shape; a tensor whose dtype is the spec's plain type (F32, F16,
/// BF16, F64, I8–I64) is copied as it is, a floating-point one is converted to the spec's
/// type in chunks (F16 by round to nearest even, refusing values beyond its range; block
/// types by ggml's reference quantizers), and integers are never converted. `metadata` must
/// hold `general.architecture` (see [`standard_metadata`]). Returns the bytes written.
pub fn write_gguf<'d, F>(
    out: &mut dyn Write,
    metadata: &[(String, GgufValue)],
    tensors: &[GgufTensorSpec],
    mut load: F,
) -> Result<u64>
where
    F: FnMut(usize, &GgufTensorSpec) -> Result<TensorView<'d>>,
{
    write_gguf_data(out, metadata, tensors, Shard::Whole, |i, spec| {
        load(i, spec).map(TensorData::View)
    })
}

/// Which file of a set [`write_gguf_data`] writes: a whole model, or a shard of a split
/// set after the first (whose metadata holds only the `split.*` keys, so it has no
/// `general.architecture`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shard {
    Whole,
    Later,
}

/// [`write_gguf`] with `load` giving either values ([`TensorData::View`]) or, for specs
/// made with [`GgufTensorSpec::copied`], stored bytes ([`TensorData::Stored`]).
pub(crate) fn write_gguf_data<'d, F>(
    out: &mut dyn Write,
    metadata: &[(String, GgufValue)],
    tensors: &[GgufTensorSpec],
    shard: Shard,
    mut load: F,
) -> Result<u64>
where
    F: FnMut(usize, &GgufTensorSpec) -> Result<TensorData<'d>>,
{
    let alignment = check_metadata(metadata, shard)?;
    let mut names = HashSet::new();
    let mut sizes = Vec::with_capacity(tensors.len());
    for spec in tensors {
        if !names.insert(spec.name.as_str()) {
            return Err(
                CoreError::invalid_argument("duplicate tensor name").with_tensor(&spec.name)
            );
        }
        sizes.push(spec.byte_len()?);
    }

    // The tensor infos first (their checks fail before a byte is written); the key/values
    // then go out one at a time, so that the header is never held whole beside them (a
    // vocabulary's tokens and merges are the largest values of a file).
    let mut infos = Vec::new();
    let mut offset = 0u64;
    for (spec, &size) in tensors.iter().zip(&sizes) {
        encode_string(&spec.name, &mut infos);
        // A scalar is written as one dimension of 1, as ggml itself represents it.
        let ne: Vec<u64> = if spec.shape.is_empty() {
            vec![1]
        } else {
            spec.shape.iter().rev().map(|&d| d as u64).collect()
        };
        infos.extend_from_slice(&(ne.len() as u32).to_le_bytes());
        for d in ne {
            infos.extend_from_slice(&d.to_le_bytes());
        }
        infos.extend_from_slice(&spec.ggml_type.id().to_le_bytes());
        infos.extend_from_slice(&offset.to_le_bytes());
        offset = (size as u64)
            .checked_add(offset)
            .and_then(|end| align_up(end, alignment as u64))
            .ok_or_else(|| CoreError::invalid_argument("total tensor size overflows"))?;
    }

    let mut out = Counting { out, written: 0 };
    let mut header = Vec::new();
    header.extend_from_slice(&GGUF_MAGIC);
    header.extend_from_slice(&GGUF_VERSION.to_le_bytes());
    header.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    header.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
    out.write(&header)?;
    for (key, value) in metadata {
        header.clear();
        encode_string(key, &mut header);
        header.extend_from_slice(&value.value_type().id().to_le_bytes());
        value.encode_payload(&mut header);
        out.write(&header)?;
    }
    drop(header);
    out.write(&infos)?;
    drop(infos);
    out.pad_to(alignment as u64)?;
    for (i, (spec, &size)) in tensors.iter().zip(&sizes).enumerate() {
        let data = load(i, spec).map_err(|e| e.with_tensor(&spec.name))?;
        let before = out.written;
        match (data, spec.copied) {
            (TensorData::View(view), false) => {
                if view.shape != spec.shape {
                    return Err(CoreError::invalid_argument(format!(
                        "loaded shape {:?} differs from the announced {:?}",
                        view.shape, spec.shape
                    ))
                    .with_tensor(&spec.name));
                }
                write_tensor_data(&mut out, &view, spec.ggml_type)
                    .map_err(|e| e.with_tensor(&spec.name))?;
            }
            // The length is checked below, as a converted tensor's is.
            (TensorData::Stored(bytes), true) => out.write(&bytes)?,
            _ => {
                return Err(CoreError::new(
                    ErrorKind::Internal,
                    "a copied tensor needs its stored bytes, any other its values",
                )
                .with_tensor(&spec.name))
            }
        }
        if out.written - before != size as u64 {
            return Err(CoreError::invalid_argument(format!(
                "wrote {} bytes where the header announced {size}",
                out.written - before
            ))
            .with_tensor(&spec.name));
        }
        out.pad_to(alignment as u64)?;
    }
    Ok(out.written)
}

#[cfg(feature = "fs")]
/// [`write_gguf`] to a file, atomically (see [`fsutil::write_atomic`] and
/// [`fsutil::WriteOptions`]); progress is reported after each tensor is written, in GGUF
/// data bytes (padding not counted).
pub fn write_gguf_file<'d, F>(
    path: &Path,
    metadata: &[(String, GgufValue)],
    tensors: &[GgufTensorSpec],
    options: fsutil::WriteOptions<'_>,
    mut load: F,
) -> Result<()>
where
    F: FnMut(usize, &GgufTensorSpec) -> Result<TensorView<'d>>,
{
    write_gguf_file_data(path, metadata, tensors, Shard::Whole, options, |i, spec| {
        load(i, spec).map(TensorData::View)
    })
}

#[cfg(feature = "fs")]
/// [`write_gguf_file`] of [`TensorData`] (see [`write_gguf_data`]).
pub(crate) fn write_gguf_file_data<'d, F>(
    path: &Path,
    metadata: &[(String, GgufValue)],
    tensors: &[GgufTensorSpec],
    shard: Shard,
    mut options: fsutil::WriteOptions<'_>,
    mut load: F,
) -> Result<()>
where
    F: FnMut(usize, &GgufTensorSpec) -> Result<TensorData<'d>>,
{
    // A lower bound of the size: the tensor data without header or padding (an invalid
    // spec counts 0 here and is reported by write_gguf).
    let sizes: Vec<u64> = tensors
        .iter()
        .map(|t| t.byte_len().map_or(0, |n| n as u64))
        .collect();
    let data_len = sizes.iter().copied().fold(0u64, u64::saturating_add);
    fsutil::write_atomic_sized(path, options.durability, data_len, |w| {
        // write_gguf asks for tensor i once tensor i - 1 is written.
        let mut done = 0u64;
        let mut previous: Option<usize> = None;
        write_gguf_data(w, metadata, tensors, shard, |i, spec| {
            if let Some(p) = previous.replace(i) {
                done = done.saturating_add(sizes[p]);
                options.report(done, data_len);
            }
            load(i, spec)
        })?;
        if let Some(p) = previous {
            options.report(done.saturating_add(sizes[p]), data_len);
        }
        Ok(())
    })
    .map_err(|e| e.with_path(path))
}

/// Whether the writer can store type `ty`: the types with an encoder, and the plain types
/// whose bytes it copies (integers and F64, from tensors of that very dtype).
fn writable(ty: GgmlType) -> bool {
    ty.can_encode() || ty.codec().native.is_some()
}

fn writable_names() -> Vec<&'static str> {
    GgmlType::ALL
        .iter()
        .filter(|t| writable(**t))
        .map(|t| t.name())
        .collect()
}

/// Convert `view` to `ty` chunk by chunk and write it.
fn write_tensor_data(out: &mut Counting<'_>, view: &TensorView<'_>, ty: GgmlType) -> Result<()> {
    let src = view.dtype;
    let codec = ty.codec();
    // Same type: the bytes are already right.
    if codec.native == Some(src) {
        return out.write(&view.data);
    }
    if codec.encode.is_none() {
        // Integers (and F64) are stored as they are, never cast.
        return Err(CoreError::unsupported_dtype(format!(
            "a {src} tensor cannot be stored as {ty} (only a {ty} tensor can)"
        )));
    }
    let float = src == DType::F32 || src == DType::F64 || src.upcasts_to_f32();
    if !float {
        return Err(CoreError::unsupported_dtype(format!(
            "{src} cannot be converted to {ty}: only floating-point tensors are converted"
        )));
    }
    let elem = src
        .size()
        .ok_or_else(|| CoreError::unsupported_dtype(format!("{src} packs below a byte")))?;
    let data: &[u8] = &view.data;
    let piece_bytes = PIECE_ELEMENTS * elem;
    crate::parallel::encode_ordered(
        data.len().div_ceil(piece_bytes),
        crate::parallel::default_threads(),
        PIECE_WINDOW,
        |i, staging, encoded| {
            let start = i * piece_bytes;
            let piece = data.get(start..data.len().min(start + piece_bytes));
            let piece = Piece {
                bytes: piece.unwrap_or_default(),
                first: i * PIECE_ELEMENTS,
                src,
                elem,
            };
            encode_piece(&piece, ty, staging, encoded)
        },
        |bytes| out.write(bytes),
    )
}

/// One piece of a tensor: `bytes` hold elements `first..` of dtype `src` (`elem` bytes each).
struct Piece<'a> {
    bytes: &'a [u8],
    first: usize,
    src: DType,
    elem: usize,
}

/// Convert one piece of a tensor to `ty`, into `encoded`.
fn encode_piece(
    piece: &Piece<'_>,
    ty: GgmlType,
    staging: &mut Vec<f32>,
    encoded: &mut Vec<u8>,
) -> Result<()> {
    let (bytes, src) = (piece.bytes, piece.src);
    // Map the piece's pages of the input in one call rather than one fault per 16 pages as
    // the kernels walk it.
    crate::buffer::populate_read(bytes);
    if src == DType::F64 && matches!(ty, GgmlType::F16 | GgmlType::BF16) {
        // Straight from f64, avoiding a double rounding through f32.
        let values = cast::elements::<f64>(bytes);
        if ty == GgmlType::F16 {
            let wide: Vec<f32> = values.iter().map(|&v| v as f32).collect();
            export::check_f16_range(&wide, piece.first)?;
        }
        *encoded = cast::encode_f64(
            &values,
            if ty == GgmlType::F16 {
                DType::F16
            } else {
                DType::BF16
            },
        )?;
        return Ok(());
    }
    let floats: &[f32] = match cast::aligned_elements::<f32>(bytes) {
        Some(f) if src == DType::F32 => f,
        _ => {
            staging.resize(bytes.len() / piece.elem, 0.0);
            cast::to_f32(src, bytes, staging)?;
            staging
        }
    };
    match ty {
        GgmlType::F32 => {
            encoded.clear();
            encoded.extend_from_slice(cast::element_bytes(floats));
        }
        GgmlType::F16 => {
            export::check_f16_range(floats, piece.first)?;
            cast::encode_f16_into(floats, encoded);
        }
        ty => {
            encoded.resize(floats.len() / ty.block_size() * ty.type_size(), 0);
            crate::codecs::encode_here(ty, floats, encoded)?;
        }
    }
    Ok(())
}
