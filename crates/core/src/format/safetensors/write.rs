//! The writer: headers, whole files and streamed files.

use super::header::{MAX_HEADER_SIZE, N_LEN};
use crate::dtype::DType;
use crate::error::{CoreError, Result};
#[cfg(feature = "fs")]
use crate::fsutil::{self, WriteOptions};
use crate::tensor::{checked_numel, TensorView};
#[cfg(feature = "fs")]
use std::borrow::Cow;
use std::collections::BTreeMap;
#[cfg(feature = "fs")]
use std::{io::Write, path::Path};

/// What the writer needs to know of a tensor before its data: name, dtype, shape, size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSpec {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub byte_len: usize,
}

impl TensorSpec {
    /// The spec of a tensor whose data comes later (size from shape and dtype).
    pub fn new(name: impl Into<String>, dtype: DType, shape: Vec<usize>) -> Result<TensorSpec> {
        let name = name.into();
        let byte_len = checked_numel(&shape)
            .and_then(|n| dtype.byte_len(n))
            .ok_or_else(|| {
                CoreError::invalid_argument(format!(
                    "shape {shape:?} of {dtype} overflows or does not fill whole bytes"
                ))
                .with_tensor(&name)
            })?;
        Ok(TensorSpec {
            name,
            dtype,
            shape,
            byte_len,
        })
    }

    fn of(view: &TensorView<'_>) -> TensorSpec {
        TensorSpec {
            name: view.name.clone(),
            dtype: view.dtype,
            shape: view.shape.clone(),
            byte_len: view.data.len(),
        }
    }
}

/// The header bytes (length prefix + padded JSON) of the file the reference writer would
/// produce for `specs`, and the order (indices into `specs`) in which their data follows:
/// dtype descending (the reference's alignment order), then name.
pub fn header_bytes(
    specs: &[TensorSpec],
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<(Vec<u8>, Vec<usize>)> {
    let mut order: Vec<usize> = (0..specs.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&specs[a], &specs[b]);
        b.dtype.cmp(&a.dtype).then_with(|| a.name.cmp(&b.name))
    });
    let mut seen = std::collections::HashSet::with_capacity(specs.len());
    for spec in specs {
        if !seen.insert(spec.name.as_str()) {
            return Err(CoreError::invalid_argument(format!(
                "duplicate tensor name '{}'",
                spec.name
            )));
        }
    }
    let mut json = String::from("{");
    if let Some(m) = metadata {
        json.push_str("\"__metadata__\":");
        json.push_str(&to_json(m)?);
    }
    let mut offset = 0usize;
    for &i in &order {
        let t = &specs[i];
        if t.name == "__metadata__" {
            return Err(CoreError::invalid_argument(
                "'__metadata__' is reserved and cannot name a tensor",
            ));
        }
        if json.len() > 1 {
            json.push(',');
        }
        let end = offset
            .checked_add(t.byte_len)
            .ok_or_else(|| CoreError::invalid_argument("total size overflows"))?;
        json.push_str(&format!(
            "{}:{{\"dtype\":\"{}\",\"shape\":{},\"data_offsets\":[{offset},{end}]}}",
            to_json(&t.name)?,
            t.dtype,
            to_json(&t.shape)?,
        ));
        offset = end;
    }
    json.push('}');
    let padded = json.len().next_multiple_of(N_LEN);
    if padded > MAX_HEADER_SIZE {
        return Err(CoreError::invalid_argument(format!(
            "the header would be {padded} bytes, over the format's limit of {MAX_HEADER_SIZE}"
        )));
    }
    let mut header = Vec::with_capacity(N_LEN + padded);
    header.extend_from_slice(&(padded as u64).to_le_bytes());
    header.extend_from_slice(json.as_bytes());
    header.resize(N_LEN + padded, b' ');
    Ok((header, order))
}

/// JSON text of a value, exactly as the reference (serde_json, compact) writes it.
fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| CoreError::invalid_argument(e.to_string()))
}

/// Serialize tensors to the bytes of a SafeTensors file, byte-identical to the reference
/// writer (metadata keys sorted, so the output is deterministic).
pub fn serialize(
    tensors: &[TensorView<'_>],
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<Vec<u8>> {
    let specs: Vec<TensorSpec> = tensors.iter().map(TensorSpec::of).collect();
    let (header, order) = header_bytes(&specs, metadata)?;
    let total = header.len() + specs.iter().map(|t| t.byte_len).sum::<usize>();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&header);
    for i in order {
        out.extend_from_slice(&tensors[i].data);
    }
    Ok(out)
}

#[cfg(feature = "fs")]
/// Write tensors to `path` atomically (temporary file in the same directory, then rename;
/// see [`WriteOptions`] for `fsync` and progress).
pub fn save_file(
    path: &Path,
    tensors: &[TensorView<'_>],
    metadata: Option<&BTreeMap<String, String>>,
    options: WriteOptions<'_>,
) -> Result<()> {
    let specs: Vec<TensorSpec> = tensors.iter().map(TensorSpec::of).collect();
    save_streaming(path, &specs, metadata, options, &mut |i| {
        Ok(Cow::Borrowed(tensors[i].data.as_ref()))
    })
}

#[cfg(feature = "fs")]
/// Write a file whose tensor data is produced one tensor at a time by `fetch(i)` (an index
/// into `specs`), so a conversion never holds the whole model in memory twice. Atomic;
/// progress is reported after each tensor is written, in tensor data bytes.
pub fn save_streaming<'d>(
    path: &Path,
    specs: &[TensorSpec],
    metadata: Option<&BTreeMap<String, String>>,
    options: WriteOptions<'_>,
    fetch: &mut dyn FnMut(usize) -> Result<Cow<'d, [u8]>>,
) -> Result<()> {
    save_streaming_parts(path, specs, metadata, options, &mut |i, put| {
        put(&fetch(i)?)
    })
}

/// What [`save_streaming_parts`] hands its producer: writes the next part of the tensor.
pub type Put<'a> = &'a mut dyn FnMut(&[u8]) -> Result<()>;

#[cfg(feature = "fs")]
/// [`save_streaming`] for a producer that hands each tensor over in parts:
/// `write(i, put)` calls `put` with consecutive parts of tensor `i` (which must add up to
/// its length), so a producer reading a mapping can give each part's pages back as soon as
/// it is written, and a large tensor is never resident whole.
pub fn save_streaming_parts(
    path: &Path,
    specs: &[TensorSpec],
    metadata: Option<&BTreeMap<String, String>>,
    mut options: WriteOptions<'_>,
    write: &mut dyn FnMut(usize, Put<'_>) -> Result<()>,
) -> Result<()> {
    let (header, order) = header_bytes(specs, metadata).map_err(|e| e.with_path(path))?;
    // The exact size (header_bytes checked that the data offsets add up).
    let len = specs.iter().fold(header.len() as u64, |n, s| {
        n.saturating_add(s.byte_len as u64)
    });
    let data_total = len - header.len() as u64;
    let mut done = 0u64;
    fsutil::write_atomic_sized(path, options.durability, len, |out: &mut dyn Write| {
        fsutil::write_all(out, &header, path)?;
        for i in order {
            let spec = &specs[i];
            let mut got = 0usize;
            write(i, &mut |part: &[u8]| {
                got = got.saturating_add(part.len());
                if got > spec.byte_len {
                    return Err(wrong_length(spec, got));
                }
                fsutil::write_all(out, part, path)
            })?;
            if got != spec.byte_len {
                return Err(wrong_length(spec, got));
            }
            done += spec.byte_len as u64;
            options.report(done, data_total);
        }
        Ok(())
    })
}

#[cfg(feature = "fs")]
fn wrong_length(spec: &TensorSpec, got: usize) -> CoreError {
    CoreError::invalid_argument(format!(
        "expected {} bytes of data, got {}{}",
        spec.byte_len,
        if got > spec.byte_len { "at least " } else { "" },
        got
    ))
    .with_tensor(&spec.name)
}
