//! Two weight sources compared tensor by tensor, whatever their formats (a GGUF Q4_K_M
//! against the SafeTensors it came from, a fine-tune against its base, a `.bin` against its
//! SafeTensors conversion).
//!
//! Tensors are paired by name, or, when one side is a llama.cpp GGUF of the other (a model
//! directory whose `config.json` names an architecture llama.cpp's converter knows), through
//! that converter's name map ([`crate::convert::llamacpp::recognize`]), Q and K rows put back
//! in the Hugging Face order where llama.cpp permutes them. For each pair: the shapes and
//! types, and, when the shapes agree, each side's values as F32 (as `getTensor(name, { as:
//! 'F32' })` gives them) compared in f64: max |Δ|, mean |Δ|, ‖Δ‖/‖A‖, the cosine similarity
//! and whether the values are bit-identical. Then the same per layer (the name up to its first
//! number: `model.layers.3`, `blk.3`) and for everything.
//!
//! Memory stays bounded by the largest pair, never a model: pairs are read one at a time
//! (small pairs, several at once, one per thread), each side converted into a buffer of its
//! own, the sums taken on every core in chunks.

use crate::buffer;
use crate::cast;
use crate::convert::llamacpp::{self, Origin, Recognition, TensorListing, Transform};
use crate::error::{CoreError, Result};
use crate::format::gguf::QuantizationChoice;
use crate::format::OpenOptions;
use crate::memory::{Backend, TensorBytes};
use crate::parallel::{for_chunks, Split};
use crate::pretrained::companion::ModelFiles;
use crate::pretrained::layout::{parse_config, CONFIG_FILE, CONFIG_MAX_BYTES};
use crate::source::{SourceTensor, TensorSource, WeightsFormat};
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

/// Pairs whose two sides together hold at most this many F32 bytes are compared several at
/// a time, one per thread; larger ones one at a time, their sums on every thread.
const SMALL_PAIR_BYTES: usize = 8 << 20;

/// How tensors are paired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NameMap {
    /// By name, or through llama.cpp's map when one side is a llama.cpp GGUF of the other.
    #[default]
    Auto,
    /// By name only.
    Direct,
    /// Through llama.cpp's map (an error when it cannot be made).
    LlamaCpp,
}

impl NameMap {
    pub fn parse(name: &str) -> Result<NameMap> {
        match name {
            "auto" => Ok(NameMap::Auto),
            "direct" => Ok(NameMap::Direct),
            "llama.cpp" => Ok(NameMap::LlamaCpp),
            other => Err(CoreError::invalid_argument(format!(
                "options.names must be 'auto', 'direct' or 'llama.cpp', not {:?}",
                crate::names::printable(other)
            ))),
        }
    }
}

/// One tensor of either side, and how it compares.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TensorDiff {
    /// Its name in A (in B when it is only in B).
    pub name: String,
    /// Its name in B, when a name map pairs it under another name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name_b: Option<String>,
    /// `'common'`, `'only-a'` or `'only-b'`.
    pub status: &'static str,
    /// The layer it belongs to (its name up to the first number), or null.
    pub layer: Option<String>,
    pub shape_a: Option<Vec<usize>>,
    pub shape_b: Option<Vec<usize>>,
    /// The stored type (`'BF16'`, `'Q4_K'`, …).
    pub dtype_a: Option<String>,
    pub dtype_b: Option<String>,
    pub shape_changed: bool,
    pub dtype_changed: bool,
    /// Every value the same, bit for bit (null when the shapes differ or it could not be read).
    pub identical: Option<bool>,
    /// Elements compared.
    pub numel: Option<u64>,
    /// max |a − b|.
    pub max_abs: Option<f64>,
    /// Σ|a − b| / n.
    pub mean_abs: Option<f64>,
    /// ‖a − b‖ / ‖a‖ (null when ‖a‖ = 0 and a ≠ b).
    pub rel_error: Option<f64>,
    /// a·b / (‖a‖ ‖b‖) (null when either is all zeros).
    pub cosine: Option<f64>,
    /// Why a pair of the same shape was not compared (a type without an F32 form).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Totals over a set of tensors (a layer, or everything).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    /// Tensors in both, compared.
    pub compared: usize,
    pub only_a: usize,
    pub only_b: usize,
    pub shape_changed: usize,
    pub dtype_changed: usize,
    /// Compared tensors that are bit-identical.
    pub identical: usize,
    /// Elements compared.
    pub numel: u64,
    pub max_abs: Option<f64>,
    /// Σ|Δ| / Σn over the compared tensors.
    pub mean_abs: Option<f64>,
    /// sqrt(Σ‖Δ‖²) / sqrt(Σ‖a‖²) over the compared tensors.
    pub rel_error: Option<f64>,
    /// The lowest cosine similarity of a compared tensor.
    pub min_cosine: Option<f64>,
}

/// A layer's totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LayerDiff {
    /// The name prefix up to the layer number; null for the tensors outside the layers.
    pub layer: Option<String>,
    #[serde(flatten)]
    pub totals: Totals,
}

/// What [`diff`] finds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffReport {
    pub a: String,
    pub b: String,
    pub format_a: &'static str,
    pub format_b: &'static str,
    /// `'direct'` or `'llama.cpp'`.
    pub name_map: &'static str,
    /// A's tensors in A's order, then those only in B in B's order.
    pub tensors: Vec<TensorDiff>,
    /// In the order their first tensor appears; the tensors outside the layers last.
    pub layers: Vec<LayerDiff>,
    pub summary: Totals,
    /// Things to know (a name map that could not be made).
    pub warnings: Vec<String>,
}

/// Compare the weights at `a` and `b` (files or model directories of any format the package
/// reads), tensors paired as `names` says.
pub fn diff(a: &Path, b: &Path, names: NameMap) -> Result<DiffReport> {
    let open = |p: &Path| crate::open(p, None, &mut OpenOptions::with_backend(Backend::Mmap));
    let (sa, sb) = (open(a)?, open(b)?);
    let mut warnings = Vec::new();
    let mapped = match names {
        NameMap::Direct => None,
        NameMap::LlamaCpp => Some(llama_map(a, sa.as_ref(), b, sb.as_ref())?),
        NameMap::Auto if wants_llama_map(sa.as_ref(), sb.as_ref()) => {
            match llama_map(a, sa.as_ref(), b, sb.as_ref()) {
                Ok(map) => Some(map),
                Err(e) => {
                    warnings.push(format!(
                        "tensors paired by name: llama.cpp's name map could not be made ({e})"
                    ));
                    None
                }
            }
        }
        NameMap::Auto => None,
    };
    let name_map = if mapped.is_some() {
        "llama.cpp"
    } else {
        "direct"
    };
    let pairs = pair(sa.as_ref(), sb.as_ref(), mapped.as_ref());
    let compared = compare_all(sa.as_ref(), sb.as_ref(), &pairs)?;
    let (layers, summary) = summarize(&compared);
    let tensors = compared.into_iter().map(|(t, _)| t).collect();
    Ok(DiffReport {
        a: a.display().to_string(),
        b: b.display().to_string(),
        format_a: sa.format().name(),
        format_b: sb.format().name(),
        name_map,
        tensors,
        layers,
        summary,
        warnings,
    })
}

/// Whether names alone look wrong: one side a GGUF that names an architecture, the other
/// not a GGUF, and fewer than half of the GGUF's tensors found by name in the other.
fn wants_llama_map(a: &dyn TensorSource, b: &dyn TensorSource) -> bool {
    let (gguf, other) = match (a.format(), b.format()) {
        (WeightsFormat::Gguf, f) if f != WeightsFormat::Gguf => (a, b),
        (f, WeightsFormat::Gguf) if f != WeightsFormat::Gguf => (b, a),
        _ => return false,
    };
    let named = gguf.metadata().get_str("general.architecture").is_some();
    let found = gguf
        .tensors()
        .iter()
        .filter(|t| other.tensor(&t.name).is_some())
        .count();
    named && found * 2 < gguf.tensors().len()
}

/// One pairing of llama.cpp's map: the Hugging Face side's name, the GGUF's, and the layout
/// change between them.
struct Mapped {
    hf: String,
    gguf: String,
    transform: Transform,
}

/// Which side is which, and the map.
struct LlamaMap {
    /// Whether A is the Hugging Face side.
    hf_is_a: bool,
    entries: Vec<Mapped>,
}

/// llama.cpp's converter's plan for the Hugging Face side (a model directory, or a weights
/// file beside its `config.json`): GGUF name → its source tensor.
fn llama_map(a: &Path, sa: &dyn TensorSource, b: &Path, sb: &dyn TensorSource) -> Result<LlamaMap> {
    let (ga, gb) = (
        sa.format() == WeightsFormat::Gguf,
        sb.format() == WeightsFormat::Gguf,
    );
    if ga == gb {
        return Err(CoreError::invalid_argument(
            "llama.cpp's name map pairs a GGUF with a Hugging Face model: exactly one side must \
             be a GGUF",
        ));
    }
    let (hf_is_a, hf_path, hf) = if gb { (true, a, sa) } else { (false, b, sb) };
    let dir = if hf_path.is_dir() {
        hf_path
    } else {
        hf_path.parent().unwrap_or(Path::new("."))
    };
    let files = ModelFiles::new(dir)?;
    let config = files
        .open_required(CONFIG_FILE, "the model's config.json")?
        .read(CONFIG_MAX_BYTES, |n| {
            CoreError::invalid_model(format!(
                "config.json is larger than {CONFIG_MAX_BYTES} bytes ({n})"
            ))
        })?;
    let config = parse_config(&config).map_err(|e| e.with_path(dir.join(CONFIG_FILE)))?;
    let listing: Vec<TensorListing> = hf
        .tensors()
        .iter()
        .map(|t| TensorListing {
            name: t.name.clone(),
            dtype: t.dtype,
            shape: t.shape.clone(),
        })
        .collect();
    match llamacpp::recognize(dir, &config, &listing, QuantizationChoice::Keep)? {
        Recognition::Unknown(why) => Err(CoreError::invalid_model(why)),
        Recognition::Known(export) => Ok(LlamaMap {
            hf_is_a,
            entries: export
                .tensors
                .into_iter()
                .filter_map(|t| match t.origin {
                    Origin::Source { name, transform } => Some(Mapped {
                        hf: name,
                        gguf: t.name,
                        transform,
                    }),
                    // Generated tensors have no Hugging Face side; a stack of experts has
                    // several, which are listed on their own sides.
                    Origin::Generated(_) | Origin::Stack(_) => None,
                })
                .collect(),
        }),
    }
}

/// A tensor of A, of B, or of both, and the layout change to apply to A's values.
#[derive(Debug, Clone)]
struct Pair {
    a: Option<usize>,
    b: Option<usize>,
    /// Applied to the Hugging Face side's values (`on_a`: that side is A).
    transform: Transform,
    on_a: bool,
}

/// The pairs, in A's order, then B's tensors left over in B's order.
fn pair(a: &dyn TensorSource, b: &dyn TensorSource, map: Option<&LlamaMap>) -> Vec<Pair> {
    let index = |s: &dyn TensorSource| -> HashMap<String, usize> {
        s.tensors()
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect()
    };
    let ib = index(b);
    // A's name → (B's name, transform).
    let partner: HashMap<&str, (&str, Transform)> = match map {
        None => a
            .tensors()
            .iter()
            .map(|t| (t.name.as_str(), (t.name.as_str(), Transform::Identity)))
            .collect(),
        Some(m) => m
            .entries
            .iter()
            .map(|e| {
                let (an, bn) = if m.hf_is_a {
                    (&e.hf, &e.gguf)
                } else {
                    (&e.gguf, &e.hf)
                };
                (an.as_str(), (bn.as_str(), e.transform))
            })
            .collect(),
    };
    let on_a = map.is_none_or(|m| m.hf_is_a);
    let mut used_b = vec![false; b.tensors().len()];
    let mut pairs = Vec::with_capacity(a.tensors().len() + b.tensors().len());
    for (i, t) in a.tensors().iter().enumerate() {
        let found = partner
            .get(t.name.as_str())
            .and_then(|&(bn, tr)| ib.get(bn).map(|&j| (j, tr)))
            .filter(|&(j, _)| !used_b[j]);
        match found {
            Some((j, transform)) => {
                used_b[j] = true;
                pairs.push(Pair {
                    a: Some(i),
                    b: Some(j),
                    transform,
                    on_a,
                });
            }
            None => pairs.push(Pair {
                a: Some(i),
                b: None,
                transform: Transform::Identity,
                on_a,
            }),
        }
    }
    for (j, used) in used_b.iter().enumerate() {
        if !used {
            pairs.push(Pair {
                a: None,
                b: Some(j),
                transform: Transform::Identity,
                on_a,
            });
        }
    }
    pairs
}

/// The type a tensor's values are stored as, comparable across formats: a GGUF block type
/// by its ggml name, anything else by the dtype it is read as (a PyTorch `torch.bfloat16`
/// and a SafeTensors `BF16` are the same).
fn type_of(source: &dyn TensorSource, t: &SourceTensor) -> String {
    if source.format() == WeightsFormat::Gguf && crate::DType::from_name(&t.stored).is_none() {
        t.stored.to_string()
    } else {
        t.dtype.name().to_string()
    }
}

/// Compare every pair: the small ones several at a time, the large ones one at a time.
fn compare_all(
    a: &dyn TensorSource,
    b: &dyn TensorSource,
    pairs: &[Pair],
) -> Result<Vec<Compared>> {
    let f32_bytes = |p: &Pair| -> usize {
        let n = |s: &dyn TensorSource, i: Option<usize>| i.map_or(0, |i| s.tensors()[i].numel());
        (n(a, p.a) + n(b, p.b)).saturating_mul(4)
    };
    let mut out: Vec<Option<Compared>> = vec![None; pairs.len()];
    let small: Vec<usize> = (0..pairs.len())
        .filter(|&i| f32_bytes(&pairs[i]) <= SMALL_PAIR_BYTES)
        .collect();
    let mut small_out: Vec<Option<Compared>> = vec![None; small.len()];
    let split = Split::new(1, 1).min_units_per_thread(1);
    for_chunks(split, &small, &mut small_out, |_, idx, dst| {
        for (&i, slot) in idx.iter().zip(dst.iter_mut()) {
            *slot = Some(compare(a, b, &pairs[i])?);
        }
        Ok(())
    })?;
    for (&i, d) in small.iter().zip(small_out) {
        out[i] = d;
    }
    for (i, p) in pairs.iter().enumerate() {
        if out[i].is_none() {
            out[i] = Some(compare(a, b, p)?);
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// A pair's entry, and its sums when its values were compared.
type Compared = (TensorDiff, Option<Sums>);

/// One pair's entry. A read that fails is an error of the whole diff (naming the tensor); a
/// type without an F32 form is the entry's `error`.
fn compare(a: &dyn TensorSource, b: &dyn TensorSource, p: &Pair) -> Result<Compared> {
    let ta = p.a.map(|i| &a.tensors()[i]);
    let tb = p.b.map(|i| &b.tensors()[i]);
    let name = ta.or(tb).map(|t| t.name.clone()).unwrap_or_default();
    let mut d = TensorDiff {
        layer: layer_of(&name),
        name_b: match (ta, tb) {
            (Some(x), Some(y)) if x.name != y.name => Some(y.name.clone()),
            _ => None,
        },
        name,
        status: match (ta, tb) {
            (Some(_), Some(_)) => "common",
            (Some(_), None) => "only-a",
            _ => "only-b",
        },
        shape_a: ta.map(|t| t.shape.clone()),
        shape_b: tb.map(|t| t.shape.clone()),
        dtype_a: ta.map(|t| type_of(a, t)),
        dtype_b: tb.map(|t| type_of(b, t)),
        shape_changed: false,
        dtype_changed: false,
        identical: None,
        numel: None,
        max_abs: None,
        mean_abs: None,
        rel_error: None,
        cosine: None,
        error: None,
    };
    let (Some(ta), Some(tb)) = (ta, tb) else {
        return Ok((d, None));
    };
    d.shape_changed = ta.shape != tb.shape;
    d.dtype_changed = d.dtype_a != d.dtype_b;
    if d.shape_changed {
        d.identical = Some(false);
        return Ok((d, None));
    }
    let read = |s: &dyn TensorSource, t: &SourceTensor, transform: Transform| {
        values_f32(s, t, transform).map_err(|e| match s.path() {
            Some(path) => e.with_tensor(&t.name).with_path(path),
            None => e.with_tensor(&t.name),
        })
    };
    let (ta_tr, tb_tr) = if p.on_a {
        (p.transform, Transform::Identity)
    } else {
        (Transform::Identity, p.transform)
    };
    let values = read(a, ta, ta_tr).and_then(|va| Ok((va, read(b, tb, tb_tr)?)));
    let (va, mut vb) = match values {
        Ok(v) => v,
        Err(e) if e.kind() == crate::ErrorKind::UnsupportedDtype => {
            d.error = Some(format!("{}: {}", e.code(), e.detail()));
            return Ok((d, None));
        }
        Err(e) => return Err(e),
    };
    let s = sums(&va, &mut vb)?;
    drop((va, vb));
    // The same stored type in both, of a type F32 does not hold exactly: the stored bytes say.
    let identical = if !d.dtype_changed && lossy_in_f32(ta.dtype) && s.bits_equal {
        same_raw(a, ta, b, tb)?
    } else {
        s.bits_equal
    };
    d.identical = Some(identical);
    d.numel = Some(s.n);
    d.max_abs = Some(if s.nan { f64::NAN } else { s.max_abs });
    d.mean_abs = Some(s.sum_abs / s.n.max(1) as f64);
    d.rel_error = rel_error(s.sum_sq_d, s.sum_sq_a);
    d.cosine = cosine(s.dot, s.sum_sq_a, s.sum_sq_b);
    Ok((d, Some(s)))
}

/// Whether values of `dtype` can differ and still read as the same F32.
fn lossy_in_f32(dtype: crate::DType) -> bool {
    use crate::DType::*;
    matches!(dtype, I32 | U32 | I64 | U64 | F64)
}

/// Whether two tensors' stored bytes are the same.
fn same_raw(
    a: &dyn TensorSource,
    ta: &SourceTensor,
    b: &dyn TensorSource,
    tb: &SourceTensor,
) -> Result<bool> {
    let (ra, rb) = (a.fetch_raw(&ta.name)?, b.fetch_raw(&tb.name)?);
    Ok(ra.as_slice() == rb.as_slice())
}

fn rel_error(sum_sq_d: f64, sum_sq_a: f64) -> Option<f64> {
    if sum_sq_a > 0.0 {
        Some(sum_sq_d.sqrt() / sum_sq_a.sqrt())
    } else if sum_sq_d == 0.0 {
        Some(0.0)
    } else {
        None
    }
}

fn cosine(dot: f64, sum_sq_a: f64, sum_sq_b: f64) -> Option<f64> {
    (sum_sq_a > 0.0 && sum_sq_b > 0.0).then(|| dot / (sum_sq_a.sqrt() * sum_sq_b.sqrt()))
}

/// A tensor's values as F32 (as `getTensor(name, { as: 'F32' })` reads them: decoded
/// straight into the buffer, a mapped file's pages given back as they are converted), with
/// `transform` applied.
fn values_f32(
    source: &dyn TensorSource,
    t: &SourceTensor,
    transform: Transform,
) -> Result<Vec<f32>> {
    let mut out = buffer::zeroed::<f32>(t.numel())?;
    if let Some(decoder) = source.f32_decoder(&t.name)? {
        decoder.decode_into(&mut out)?;
    } else {
        let dtype = t.dtype;
        cast::to_f32(dtype, &[], &mut [])?;
        match source.fetch(&t.name)? {
            TensorBytes::Shared { memory, start, len } => {
                memory.convert_once(start, len, &mut out, |s, d| cast::to_f32(dtype, s, d))?
            }
            TensorBytes::Owned(v) => cast::to_f32(dtype, &v, &mut out)?,
        }
    }
    match transform {
        Transform::Identity => Ok(out),
        Transform::RopeInterleave { heads } => {
            let moved = llamacpp::rope_interleave(
                cast::element_bytes(&out),
                &t.shape,
                crate::DType::F32,
                heads,
            )?;
            Ok(cast::copy_elements::<f32>(&moved))
        }
        Transform::Transpose => {
            let moved =
                llamacpp::transpose(cast::element_bytes(&out), &t.shape, crate::DType::F32)?;
            Ok(cast::copy_elements::<f32>(&moved))
        }
        Transform::AddOne => {
            // In the export's precision: an F16 source adds in F16.
            let precision = if t.dtype == crate::DType::F16 {
                crate::DType::F16
            } else {
                crate::DType::F32
            };
            let (dtype, shifted) =
                llamacpp::add_one(&cast::encode_f32(&out, precision)?, precision)?;
            cast::to_f32_vec(dtype, &shifted)
        }
        Transform::SkipRows(n) => {
            let rows = t.shape.first().copied().unwrap_or(0);
            let skipped = (out.len().checked_div(rows).unwrap_or(0) * n).min(out.len());
            out.drain(..skipped);
            Ok(out)
        }
    }
}

/// The sums of one pair (or one chunk of it).
#[derive(Debug, Clone, Copy)]
struct Sums {
    n: u64,
    sum_abs: f64,
    sum_sq_d: f64,
    sum_sq_a: f64,
    sum_sq_b: f64,
    dot: f64,
    max_abs: f64,
    nan: bool,
    bits_equal: bool,
}

impl Sums {
    const EMPTY: Sums = Sums {
        n: 0,
        sum_abs: 0.0,
        sum_sq_d: 0.0,
        sum_sq_a: 0.0,
        sum_sq_b: 0.0,
        dot: 0.0,
        max_abs: 0.0,
        nan: false,
        bits_equal: true,
    };

    fn of(a: &[f32], b: &[f32]) -> Sums {
        let mut s = Sums::EMPTY;
        for (&x, &y) in a.iter().zip(b) {
            let (x64, y64) = (f64::from(x), f64::from(y));
            let d = x64 - y64;
            let ad = d.abs();
            s.sum_abs += ad;
            s.sum_sq_d += d * d;
            s.sum_sq_a += x64 * x64;
            s.sum_sq_b += y64 * y64;
            s.dot += x64 * y64;
            if ad > s.max_abs {
                s.max_abs = ad;
            }
            s.nan |= d.is_nan();
            s.bits_equal &= x.to_bits() == y.to_bits();
        }
        s.n = a.len() as u64;
        s
    }

    fn add(self, o: Sums) -> Sums {
        Sums {
            n: self.n + o.n,
            sum_abs: self.sum_abs + o.sum_abs,
            sum_sq_d: self.sum_sq_d + o.sum_sq_d,
            sum_sq_a: self.sum_sq_a + o.sum_sq_a,
            sum_sq_b: self.sum_sq_b + o.sum_sq_b,
            dot: self.dot + o.dot,
            max_abs: self.max_abs.max(o.max_abs),
            nan: self.nan || o.nan,
            bits_equal: self.bits_equal && o.bits_equal,
        }
    }
}

/// The sums over `a` and `b` (of one length), on every core for a large pair; the chunks'
/// sums are added in chunk order, so the result does not depend on the threads.
fn sums(a: &[f32], b: &mut [f32]) -> Result<Sums> {
    let parts: Mutex<Vec<(usize, Sums)>> = Mutex::new(Vec::new());
    for_chunks(Split::new(1, 1), a, b, |at, ca, cb| {
        let s = Sums::of(ca, cb);
        parts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((at, s));
        Ok(())
    })?;
    let mut parts = parts.into_inner().unwrap_or_else(|p| p.into_inner());
    parts.sort_by_key(|&(at, _)| at);
    Ok(parts
        .into_iter()
        .fold(Sums::EMPTY, |acc, (_, s)| acc.add(s)))
}

/// The layer of a tensor: its name up to the first `.`-separated part that is a number
/// (`model.layers.3.mlp.up_proj.weight` → `model.layers.3`, `blk.3.ffn_up.weight` → `blk.3`).
pub fn layer_of(name: &str) -> Option<String> {
    let parts: Vec<&str> = name.split('.').collect();
    let at = parts
        .iter()
        .position(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))?;
    Some(parts[..=at].join("."))
}

/// The totals per layer (in the order their first tensor appears, the tensors outside the
/// layers last) and for everything.
fn summarize(compared: &[Compared]) -> (Vec<LayerDiff>, Totals) {
    let mut order: Vec<Option<String>> = Vec::new();
    let mut layers: HashMap<Option<String>, Acc> = HashMap::new();
    let mut all = Acc::default();
    for (t, s) in compared {
        if !layers.contains_key(&t.layer) {
            order.push(t.layer.clone());
        }
        layers
            .entry(t.layer.clone())
            .or_default()
            .add(t, s.as_ref());
        all.add(t, s.as_ref());
    }
    // The tensors outside the layers (embeddings, final norm) after the layers.
    order.sort_by_key(Option::is_none);
    let layers = order
        .into_iter()
        .map(|layer| {
            let totals = layers[&layer].totals();
            LayerDiff { layer, totals }
        })
        .collect();
    (layers, all.totals())
}

/// Running totals (see [`Totals`]).
#[derive(Default)]
struct Acc {
    only_a: usize,
    only_b: usize,
    shape_changed: usize,
    dtype_changed: usize,
    identical: usize,
    compared: usize,
    sums: Option<Sums>,
    min_cosine: Option<f64>,
}

impl Acc {
    fn add(&mut self, t: &TensorDiff, s: Option<&Sums>) {
        self.only_a += usize::from(t.status == "only-a");
        self.only_b += usize::from(t.status == "only-b");
        self.shape_changed += usize::from(t.shape_changed);
        self.dtype_changed += usize::from(t.dtype_changed);
        let Some(s) = s else { return };
        self.compared += 1;
        self.identical += usize::from(t.identical == Some(true));
        self.sums = Some(self.sums.unwrap_or(Sums::EMPTY).add(*s));
        if let Some(c) = t.cosine {
            self.min_cosine = Some(self.min_cosine.map_or(c, |m| m.min(c)));
        }
    }

    fn totals(&self) -> Totals {
        Totals {
            compared: self.compared,
            only_a: self.only_a,
            only_b: self.only_b,
            shape_changed: self.shape_changed,
            dtype_changed: self.dtype_changed,
            identical: self.identical,
            numel: self.sums.map_or(0, |s| s.n),
            max_abs: self.sums.map(|s| if s.nan { f64::NAN } else { s.max_abs }),
            mean_abs: self.sums.map(|s| s.sum_abs / s.n.max(1) as f64),
            rel_error: self.sums.and_then(|s| rel_error(s.sum_sq_d, s.sum_sq_a)),
            min_cosine: self.min_cosine,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::safetensors::save_file;
    use crate::tensor::TensorView;

    fn write(path: &Path, tensors: &[(&str, Vec<usize>, Vec<f32>)]) {
        let views: Vec<TensorView> = tensors
            .iter()
            .map(|(n, s, v)| TensorView::from_f32(*n, s.clone(), v).unwrap())
            .collect();
        save_file(path, &views, None, Default::default()).unwrap();
    }

    #[test]
    fn layers_are_the_name_up_to_its_first_number() {
        assert_eq!(
            layer_of("model.layers.3.mlp.up_proj.weight").as_deref(),
            Some("model.layers.3")
        );
        assert_eq!(layer_of("blk.12.ffn_up.weight").as_deref(), Some("blk.12"));
        assert_eq!(layer_of("model.embed_tokens.weight"), None);
        assert_eq!(layer_of("h.0"), Some("h.0".to_string()));
        assert_eq!(
            NameMap::parse("bogus").unwrap_err().code(),
            "ERR_INVALID_ARGUMENT"
        );
    }

    #[test]
    fn figures_per_tensor_per_layer_and_in_all() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (
            tmp.path().join("a.safetensors"),
            tmp.path().join("b.safetensors"),
        );
        write(
            &a,
            &[
                ("model.layers.0.w", vec![4], vec![1.0, 2.0, 3.0, 4.0]),
                ("model.layers.0.same", vec![2], vec![0.5, -0.5]),
                ("model.layers.1.t", vec![2, 3], vec![0.0; 6]),
                ("only.a", vec![1], vec![1.0]),
            ],
        );
        write(
            &b,
            &[
                ("model.layers.0.w", vec![4], vec![1.0, 2.0, 3.0, 5.0]),
                ("model.layers.0.same", vec![2], vec![0.5, -0.5]),
                ("model.layers.1.t", vec![3, 2], vec![0.0; 6]),
                ("only.b", vec![1], vec![1.0]),
            ],
        );
        let r = diff(&a, &b, NameMap::Auto).unwrap();
        assert_eq!(r.name_map, "direct");
        // A's tensors in A's serving order (the writer's), then those only in B.
        let by = |name: &str| r.tensors.iter().find(|t| t.name == name).unwrap();
        let w = by("model.layers.0.w");
        assert_eq!(
            (w.status, w.numel, w.identical),
            ("common", Some(4), Some(false))
        );
        assert_eq!((w.max_abs, w.mean_abs), (Some(1.0), Some(0.25)));
        assert!((w.rel_error.unwrap() - 1.0 / 30f64.sqrt()).abs() < 1e-15);
        assert!((w.cosine.unwrap() - 34.0 / (30f64.sqrt() * 39f64.sqrt())).abs() < 1e-15);
        assert_eq!(by("model.layers.0.same").identical, Some(true));
        let t = by("model.layers.1.t");
        assert!(t.shape_changed && t.max_abs.is_none() && t.identical == Some(false));
        assert_eq!(by("only.a").status, "only-a");
        let last = r.tensors.last().unwrap();
        assert_eq!((last.name.as_str(), last.status), ("only.b", "only-b"));
        // Layer 0: both tensors; the sums, not the per-tensor figures, are what add up.
        let l0 = &r.layers[0];
        assert_eq!(l0.layer.as_deref(), Some("model.layers.0"));
        assert_eq!(
            (l0.totals.compared, l0.totals.identical, l0.totals.numel),
            (2, 1, 6)
        );
        assert_eq!(l0.totals.mean_abs, Some(1.0 / 6.0));
        assert!((l0.totals.rel_error.unwrap() - 1.0 / 30.5f64.sqrt()).abs() < 1e-15);
        assert_eq!(r.layers[1].totals.shape_changed, 1);
        assert_eq!(r.layers.last().unwrap().layer, None);
        assert_eq!(
            (r.summary.only_a, r.summary.only_b, r.summary.compared),
            (1, 1, 2)
        );
        assert_eq!(
            diff(&a, &b, NameMap::LlamaCpp).unwrap_err().code(),
            "ERR_INVALID_ARGUMENT"
        );
    }
}
