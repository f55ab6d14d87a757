//! PyTorch checkpoints → SafeTensors, as Hugging Face's `convert.py` converts them
//! (`safetensors/convert.py`: `convert_file` / `convert_multi`):
//!
//! - a checkpoint wrapped as `{"state_dict": {…}}` is unwrapped: the tensors under
//!   `state_dict.` are written without that prefix, the rest (optimizer state, …) left out;
//! - tensors that share storage bytes are written once: in each group the name convert.py
//!   keeps ([`TensorSource::tied_tensors`]); the others are dropped, named in the file's
//!   metadata as `{dropped: kept}` (convert.py's own record) and in the report;
//! - `__metadata__` is `{"format": "pt"}` plus those names;
//! - a model directory (or an index) becomes a directory: `pytorch_model.bin` →
//!   `model.safetensors`, shards `pytorch_model-0000i-of-0000N.bin` →
//!   `model-0000i-of-0000N.safetensors` (the same rename) with
//!   `model.safetensors.index.json` rewritten to name them;
//! - every written file is read back and compared with its input, tensor by tensor: dtype,
//!   shape, and a CRC-32 of the bytes (computed as each tensor was written, while its bytes
//!   were at hand, so the input is read once).
//!
//! Streaming: each tensor is fetched (a view of the mapped checkpoint where it is stored
//! contiguously), written, and its mapped pages given back ([`TensorSource::release`])
//! before the next one, so the process holds about one tensor plus the pickle's structure.

use crate::error::{CoreError, ErrorKind, Result};
use crate::format::detect::Detected;
use crate::format::safetensors::{self as st, TensorSpec};
use crate::format::zip;
use crate::fsutil::{self, Durability, WriteOptions};
use crate::memory::Backend;
use crate::pretrained::companion::ModelFiles;
use crate::pretrained::layout::{self, Layout};
use crate::source::{TensorSource, WeightsFormat};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// A tensor a conversion did not write, because `kept_as` holds the same bytes.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DroppedTensor {
    pub name: String,
    pub kept_as: String,
}

/// What [`to_safetensors`] wrote.
pub struct Written {
    pub tensors: usize,
    pub dropped: Vec<DroppedTensor>,
    /// The files written, relative to the output, when it is a directory.
    pub files: Option<Vec<String>>,
    pub bytes: u64,
    /// Companion files not copied, and why.
    pub warnings: Vec<String>,
}

/// The wrapper convert.py unwraps (`if "state_dict" in loaded: loaded = loaded["state_dict"]`).
pub const STATE_DICT_PREFIX: &str = "state_dict.";

/// The metadata value convert.py writes under `format`.
pub const FORMAT_PT: &str = "pt";

/// Whether `convert` of `source` to SafeTensors takes this path.
pub fn applies(source: &dyn TensorSource) -> bool {
    source.format() == WeightsFormat::PyTorch
}

/// The name convert.py gives the SafeTensors file of a checkpoint file: its extension
/// replaced by `.safetensors`, then `pytorch_model` → `model`.
pub fn rename(name: &str) -> String {
    let (dir, file) = match name.rsplit_once('/') {
        Some((d, f)) => (Some(d), f),
        None => (None, name),
    };
    let stem = match file.rfind('.') {
        Some(i) if i > 0 => &file[..i],
        _ => file,
    };
    let local = format!("{stem}.safetensors");
    let renamed = match dir {
        Some(d) => format!("{d}/{local}"),
        None => local,
    };
    renamed.replace("pytorch_model", "model")
}

/// The sharded index a PyTorch input was opened through, if any: the input itself, or the
/// one discovery chose in a model directory.
fn index_of(input: &Path) -> Result<Option<PathBuf>> {
    if input.is_dir() {
        for candidate in layout::DISCOVERY {
            let path = input.join(candidate.file);
            if path.is_file() {
                return Ok((candidate.layout == Layout::Sharded).then_some(path));
            }
        }
        return Ok(None);
    }
    Ok(match crate::format::detect_file(input)? {
        Detected::Format(WeightsFormat::ShardedSafeTensors) => Some(input.to_path_buf()),
        _ => None,
    })
}

/// A file a model directory holds beside its weights (config, tokenizer, …): copied into
/// the converted directory. Weight files of any format and hidden files are not.
fn is_companion(name: &str) -> bool {
    const WEIGHTS: [&str; 12] = [
        ".bin",
        ".pt",
        ".pth",
        ".ckpt",
        ".safetensors",
        ".gguf",
        ".npy",
        ".npz",
        ".h5",
        ".msgpack",
        ".mlx",
        ".index.json",
    ];
    !name.starts_with('.') && !WEIGHTS.iter().any(|ext| name.ends_with(ext))
}

/// Convert a PyTorch source to SafeTensors at `output` (see the module documentation):
/// a directory when the input is a model directory or an index and `output` does not end in
/// `.safetensors`, else one file.
pub fn to_safetensors(
    input: &Path,
    source: &dyn TensorSource,
    output: &Path,
    durability: Durability,
    edits: &[super::MetadataEdit],
    progress: &mut dyn FnMut(u64),
) -> Result<Written> {
    let tied = source.tied_tensors();
    let kept_as: HashMap<&str, &str> = tied
        .iter()
        .map(|(kept, dropped)| (dropped.as_str(), kept.as_str()))
        .collect();
    let index = index_of(input)?;
    let as_dir =
        (input.is_dir() || index.is_some()) && !output.to_string_lossy().ends_with(".safetensors");
    let mut names: Vec<&str> = source.tensors().iter().map(|t| t.name.as_str()).collect();
    let unwrap = names.iter().any(|n| n.starts_with(STATE_DICT_PREFIX));
    if unwrap {
        names.retain(|n| n.starts_with(STATE_DICT_PREFIX));
    }
    // The name a tensor is written under.
    let out_name = |name: &str| -> String {
        match name.strip_prefix(STATE_DICT_PREFIX).filter(|_| unwrap) {
            Some(inner) => inner.to_string(),
            None => name.to_string(),
        }
    };

    let mut done = 0u64;
    let mut written = Written {
        tensors: 0,
        dropped: Vec::new(),
        files: None,
        bytes: 0,
        warnings: Vec::new(),
    };
    // Groups of tensors, each one output file (relative to `output` when it is a directory).
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    if as_dir {
        let files = source.files();
        for name in &names {
            let shard = match (&index, source.file_of(name)) {
                (Some(_), Some(shard)) => shard.to_string(),
                _ => files
                    .first()
                    .map(|f| f.name.clone())
                    .unwrap_or_else(|| layout::PYTORCH_FILE.to_string()),
            };
            let out = rename(&shard);
            match groups.iter_mut().find(|(o, _)| *o == out) {
                Some((_, g)) => g.push(name),
                None => groups.push((out, vec![name])),
            }
        }
        if groups.is_empty() {
            groups.push((rename(layout::PYTORCH_FILE), Vec::new()));
        }
        fsutil::create_dir_all(output, durability)?;
    } else {
        groups.push((String::new(), names.clone()));
    }

    let mut weight_map: BTreeMap<String, String> = BTreeMap::new();
    let mut total_size = 0u64;
    let mut files = Vec::new();
    for (file, group) in &groups {
        let path = if as_dir {
            let path = crate::pretrained::safe_join(output, file)?;
            if let Some(parent) = path.parent() {
                fsutil::create_dir_all(parent, durability)?;
            }
            path
        } else {
            output.to_path_buf()
        };
        let mut metadata = BTreeMap::from([("format".to_string(), FORMAT_PT.to_string())]);
        let mut specs = Vec::with_capacity(group.len());
        let mut from = Vec::with_capacity(group.len());
        for &name in group {
            let t = source.info(name)?;
            let written_as = out_name(name);
            match kept_as.get(name) {
                Some(&kept) => {
                    metadata
                        .entry(written_as.clone())
                        .or_insert_with(|| out_name(kept));
                    written.dropped.push(DroppedTensor {
                        name: written_as,
                        kept_as: out_name(kept),
                    });
                    done += t.byte_len() as u64;
                }
                None => {
                    specs.push(TensorSpec::new(&written_as, t.dtype, t.shape.clone())?);
                    from.push(name);
                    weight_map.insert(written_as, file.clone());
                    total_size += t.byte_len() as u64;
                }
            }
        }
        super::metadata::apply_strings(&mut metadata, edits);
        progress(done);
        let crcs = write_file(
            source,
            &path,
            &specs,
            &from,
            &metadata,
            durability,
            &mut |n| {
                done += n;
                progress(done)
            },
        )?;
        verify(&path, &specs, &crcs)?;
        written.tensors += specs.len();
        written.bytes += std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        files.push(file.clone());
    }

    if as_dir {
        if let Some(index) = &index {
            let name = layout::INDEX_FILE;
            let text = rewrite_index(index, &weight_map, total_size)?;
            fsutil::write_atomic(&output.join(name), durability, |out| {
                fsutil::write_all(out, text.as_bytes(), &output.join(name))
            })?;
            written.bytes += text.len() as u64;
            files.push(name.to_string());
        }
        if input.is_dir() {
            files.extend(copy_companions(
                input,
                output,
                durability,
                &mut written.warnings,
            )?);
        }
        written.files = Some(files);
    }
    written.dropped.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(written)
}

/// Stream `specs` (each read from the source tensor `from[i]`) into a SafeTensors file,
/// 16 MiB at a time for large tensors, giving back each part's mapped pages once it is
/// written: a tensor is never resident whole (the embedding of a large vocabulary alone can
/// be GBs). Returns each input tensor's CRC-32, in the order of `specs`.
fn write_file(
    source: &dyn TensorSource,
    path: &Path,
    specs: &[TensorSpec],
    from: &[&str],
    metadata: &BTreeMap<String, String>,
    durability: Durability,
    progress: &mut dyn FnMut(u64),
) -> Result<Vec<u32>> {
    let mut crcs = vec![0u32; specs.len()];
    st::save_streaming_parts(
        path,
        specs,
        Some(metadata),
        WriteOptions::with_durability(durability),
        &mut |i, put| {
            let bytes = source.fetch(from[i])?;
            let mut crc = 0;
            bytes.read_parts(|part| {
                crc = zip::crc32_continue(crc, part);
                put(part)
            })?;
            drop(bytes);
            // `read_parts` gave back the served range; a tensor decoded into owned bytes (a
            // strided or byte-swapped one) read its storage's pages instead: those go here.
            source.release(from[i]);
            crcs[i] = crc;
            progress(specs[i].byte_len as u64);
            Ok(())
        },
    )?;
    Ok(crcs)
}

/// Read the written file back: the same tensors, each of the same dtype and shape as its
/// input and bytes of the same CRC-32 (convert.py's `torch.equal` check), one at a time,
/// 16 MiB at a time, each part's pages given back once checked.
fn verify(path: &Path, specs: &[TensorSpec], crcs: &[u32]) -> Result<()> {
    let back = st::SafeTensors::open(path, Backend::Mmap)?;
    let mismatch = |name: &str, what: &str| {
        CoreError::new(
            ErrorKind::Io,
            format!("the written file does not read back as its input ({what})"),
        )
        .with_tensor(name)
        .with_path(path)
    };
    if back.tensors().len() != specs.len() {
        return Err(CoreError::new(
            ErrorKind::Io,
            format!(
                "the written file holds {} tensors, {} were written",
                back.tensors().len(),
                specs.len()
            ),
        )
        .with_path(path));
    }
    for (spec, &crc) in specs.iter().zip(crcs) {
        let t = back
            .tensor(&spec.name)
            .ok_or_else(|| mismatch(&spec.name, "missing"))?;
        if t.dtype != spec.dtype || t.shape != spec.shape {
            return Err(mismatch(&spec.name, "dtype or shape"));
        }
        let same = {
            let ours = back.fetch(&spec.name)?;
            let mut read = 0;
            ours.read_parts(|part| {
                read = zip::crc32_continue(read, part);
                Ok(())
            })?;
            ours.len() == spec.byte_len && read == crc
        };
        if !same {
            return Err(mismatch(&spec.name, "bytes"));
        }
    }
    Ok(())
}

/// The index with its shards renamed, tensors that were dropped left out, and
/// `metadata.total_size` the bytes now stored; its other keys as they were.
fn rewrite_index(
    index: &Path,
    weight_map: &BTreeMap<String, String>,
    total_size: u64,
) -> Result<String> {
    let bytes =
        crate::pretrained::read_json_file(index, "a sharded index", layout::INDEX_MAX_BYTES)?;
    let mut value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
        CoreError::invalid_model(format!("not a valid sharded index: {e}")).with_path(index)
    })?;
    let object = value.as_object_mut().ok_or_else(|| {
        CoreError::invalid_model("a sharded index must be a JSON object").with_path(index)
    })?;
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| serde_json::json!({}));
    if let Some(m) = metadata.as_object_mut() {
        m.insert("total_size".to_string(), total_size.into());
    }
    object.insert(
        "weight_map".to_string(),
        serde_json::to_value(weight_map).unwrap_or_default(),
    );
    serde_json::to_string_pretty(&value)
        .map(|mut s| {
            s.push('\n');
            s
        })
        .map_err(|e| CoreError::invalid_argument(e.to_string()))
}

/// Companion files larger than this are not copied (a warning says so): real ones (the
/// largest, `tokenizer.json`, ~35 MB) are far below it, and a sparse file of a terabyte
/// would otherwise be written out whole.
pub const MAX_COMPANION_BYTES: u64 = 4 << 30;

/// Copy the model directory's other files (config, tokenizer, …) beside the converted
/// weights; returns their names. Each is read only where it resolves inside the directory
/// ([`ModelFiles`]): one that may not be read, or is larger than [`MAX_COMPANION_BYTES`], is
/// left out with a warning. Directories are not copied.
fn copy_companions(
    input: &Path,
    output: &Path,
    durability: Durability,
    warnings: &mut Vec<String>,
) -> Result<Vec<String>> {
    let files = ModelFiles::new(input)?;
    let mut names: Vec<String> = std::fs::read_dir(input)
        .map_err(|e| CoreError::io(e, input))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| is_companion(n) && !input.join(n).is_dir())
        .collect();
    names.sort();
    let mut copied = Vec::with_capacity(names.len());
    for name in names {
        let opened = files.open_optional(&name, "a model file")?;
        warnings.extend(files.take_warnings());
        let Some(mut from) = opened else {
            continue;
        };
        if from.len > MAX_COMPANION_BYTES {
            warnings.push(format!(
                "{}: {} bytes, more than the {MAX_COMPANION_BYTES} a file copied beside the \
                 weights may have: not copied",
                from.path.display(),
                from.len
            ));
            continue;
        }
        let len = from.len;
        fsutil::write_atomic(&output.join(&name), durability, |out| {
            use std::io::Read;
            let n = std::io::copy(&mut (&mut from.file).take(len), out)
                .map_err(|e| CoreError::io(e, &from.path))?;
            if n != len {
                return Err(CoreError::new(
                    ErrorKind::Io,
                    format!("shrank while being copied ({len} bytes when opened, {n} read)"),
                )
                .with_path(&from.path));
            }
            Ok(())
        })?;
        copied.push(name);
    }
    Ok(copied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_convert_py() {
        assert_eq!(rename("pytorch_model.bin"), "model.safetensors");
        assert_eq!(
            rename("pytorch_model-00001-of-00002.bin"),
            "model-00001-of-00002.safetensors"
        );
        assert_eq!(rename("sub/pytorch_model.bin"), "sub/model.safetensors");
        assert_eq!(rename("weights.pt"), "weights.safetensors");
        assert_eq!(rename("noext"), "noext.safetensors");
        assert!(is_companion("config.json") && is_companion("tokenizer.json"));
        for weights in [
            "training_args.bin",
            "model.safetensors",
            "pytorch_model.bin.index.json",
            ".hidden",
        ] {
            assert!(!is_companion(weights), "{weights}");
        }
    }
}
