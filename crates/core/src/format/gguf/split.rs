//! Split GGUF sets, as `llama-gguf-split --split` writes them and llama.cpp loads them.
//!
//! A model too large for one file is written as `PREFIX-00001-of-0000N.gguf` …
//! `PREFIX-0000N-of-0000N.gguf`. Every file is a whole GGUF with `split.no` (UINT16, 0-based),
//! `split.count` (UINT16) and `split.tensors.count` (INT32, the tensors of the whole set);
//! the first file also holds every other key/value of the model, the later ones only the
//! split keys. Tensors are never cut: each file holds whole tensors, the first file possibly
//! none (`--no-tensor-first-split`). The other files are found from the first one's name, as
//! llama.cpp's loader does (`llama_split_prefix`, `llama_split_path`).

use super::{align_up, keys};
use crate::error::{CoreError, Result};
use crate::source::value::GgufValue;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// `split.no`: this file's place in the set, from 0.
pub const SPLIT_NO: &str = "split.no";
/// `split.count`: files in the set.
pub const SPLIT_COUNT: &str = "split.count";
/// `split.tensors.count`: tensors in the whole set.
pub const SPLIT_TENSORS_COUNT: &str = "split.tensors.count";

/// Whether `key` describes a file's place in a split set (never carried from one file to
/// another: a writer sets them for the files it writes).
pub fn is_split_key(key: &str) -> bool {
    key.starts_with("split.")
}

/// What a file's split keys say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitInfo {
    /// This file's place, from 0.
    pub no: u16,
    /// Files in the set (more than 1).
    pub count: u16,
    /// Tensors in the whole set.
    pub tensors: usize,
}

/// The split keys of `metadata`: `None` for a file that is not part of a set of several
/// (no `split.count`, or a count of 0 or 1, as llama.cpp reads it). ERR_INVALID_GGUF when
/// they have the wrong types or are missing in a file of a set.
pub fn split_info(metadata: &[(String, GgufValue)]) -> Result<Option<SplitInfo>> {
    let get = |key: &str| metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v);
    let wrong = |key: &str, want: &str| {
        CoreError::invalid_gguf(format!(
            "'{key}' of a split GGUF must be {want} (as llama-gguf-split writes it)"
        ))
    };
    let count = match get(SPLIT_COUNT) {
        None => return Ok(None),
        Some(GgufValue::U16(n)) if *n <= 1 => return Ok(None),
        Some(GgufValue::U16(n)) => *n,
        Some(_) => return Err(wrong(SPLIT_COUNT, "UINT16")),
    };
    let no = match get(SPLIT_NO) {
        Some(GgufValue::U16(n)) if *n < count => *n,
        Some(GgufValue::U16(n)) => {
            return Err(CoreError::invalid_gguf(format!(
                "'{SPLIT_NO}' is {n}, but the set has {count} files ('{SPLIT_COUNT}')"
            )))
        }
        _ => return Err(wrong(SPLIT_NO, "a UINT16 below split.count")),
    };
    let tensors = match get(SPLIT_TENSORS_COUNT) {
        Some(GgufValue::I32(n)) if *n >= 0 => *n as usize,
        _ => return Err(wrong(SPLIT_TENSORS_COUNT, "a non-negative INT32")),
    };
    Ok(Some(SplitInfo { no, count, tensors }))
}

/// The name of file `no` (from 0) of a set of `count` files: `PREFIX-%05d-of-%05d.gguf`.
pub fn shard_path(prefix: &Path, no: usize, count: usize) -> PathBuf {
    let mut name = prefix.as_os_str().to_owned();
    name.push(format!("-{:05}-of-{count:05}.gguf", no + 1));
    PathBuf::from(name)
}

/// The prefix of `path` when it is named as file `no` of a set of `count` files, `None`
/// when it is not (llama.cpp cannot find the other files then either).
pub fn split_prefix(path: &Path, no: usize, count: usize) -> Option<PathBuf> {
    let suffix = format!("-{:05}-of-{count:05}.gguf", no + 1);
    let text = path.to_str()?;
    let prefix = text.strip_suffix(&suffix)?;
    (!prefix.is_empty()).then(|| PathBuf::from(prefix))
}

/// The other files of the split set (its `split` keys) whose first file is `path`, in
/// order, named as llama.cpp finds them. ERR_INVALID_GGUF for a later file of a set (naming
/// the first) or a first file not named `PREFIX-00001-of-0000N.gguf`.
pub fn other_files(path: &Path, split: SplitInfo) -> Result<Vec<PathBuf>> {
    let count = split.count as usize;
    if split.no != 0 {
        let first = split_prefix(path, split.no as usize, count)
            .map(|p| shard_path(&p, 0, count).display().to_string())
            .unwrap_or_else(|| format!("PREFIX-00001-of-{count:05}.gguf"));
        return Err(CoreError::invalid_gguf(format!(
            "this is file {} of the {count} of a split GGUF; open its first file, \
             '{first}', which opens them all",
            split.no + 1
        )));
    }
    let prefix = split_prefix(path, 0, count).ok_or_else(|| {
        CoreError::invalid_gguf(format!(
            "the first file of a split GGUF of {count} files must be named \
             PREFIX-00001-of-{count:05}.gguf for the others to be found (as llama.cpp \
             finds them)"
        ))
    })?;
    Ok((1..count)
        .map(|no| shard_path(&prefix, no, count))
        .collect())
}

/// File `no` (from 0) of the set is missing.
pub fn file_missing(no: usize, split: SplitInfo) -> CoreError {
    CoreError::invalid_gguf(format!(
        "file {} of the {} of this split GGUF is missing",
        no + 1,
        split.count
    ))
}

/// Which tensors (ranges of indices) go in which file when each file's tensor data (each
/// tensor padded to `alignment`) must stay within `max_bytes`, as `llama-gguf-split
/// --split-max-size` decides it: a new file starts when the next tensor would pass the
/// limit. A tensor larger than the limit gets a file of its own (a tensor is never cut).
/// No tensors: one empty file.
pub fn plan_shards(sizes: &[usize], alignment: usize, max_bytes: u64) -> Vec<Range<usize>> {
    let mut shards = Vec::new();
    let (mut start, mut filled) = (0usize, 0u64);
    for (i, &size) in sizes.iter().enumerate() {
        let padded = align_up(size as u64, alignment as u64).unwrap_or(u64::MAX);
        let next = filled.saturating_add(padded);
        if next > max_bytes && i > start {
            shards.push(start..i);
            start = i;
            filled = padded;
        } else {
            filled = next;
        }
    }
    shards.push(start..sizes.len());
    shards
}

/// The metadata of file `no` of a set of `count`: the model's key/values (but split keys)
/// in the first file, only `general.alignment` (when not the default) in the others; then
/// the split keys.
pub fn shard_metadata(
    metadata: &[(String, GgufValue)],
    no: usize,
    count: usize,
    tensors: usize,
) -> Result<Vec<(String, GgufValue)>> {
    let (Ok(no16), Ok(count16), Ok(tensors32)) = (
        u16::try_from(no),
        u16::try_from(count),
        i32::try_from(tensors),
    ) else {
        return Err(CoreError::invalid_argument(format!(
            "a split GGUF holds at most {} files and {} tensors: this one would need {count} \
             files for {tensors} tensors (raise maxShardBytes)",
            u16::MAX,
            i32::MAX
        )));
    };
    let kept = |(k, v): &(String, GgufValue)| {
        let later_keeps =
            k == keys::ALIGNMENT && *v != GgufValue::U32(super::DEFAULT_ALIGNMENT as u32);
        ((no == 0 && !is_split_key(k)) || (no > 0 && later_keeps)).then(|| (k.clone(), v.clone()))
    };
    let mut out: Vec<(String, GgufValue)> = metadata.iter().filter_map(kept).collect();
    out.push((SPLIT_NO.to_string(), GgufValue::U16(no16)));
    out.push((SPLIT_COUNT.to_string(), GgufValue::U16(count16)));
    out.push((SPLIT_TENSORS_COUNT.to_string(), GgufValue::I32(tensors32)));
    Ok(out)
}

#[cfg(feature = "fs")]
/// Write `tensors` as a split set named after `path` (`out.gguf` → `out-00001-of-0000N.gguf`
/// …, beside it), each file's tensor data within `max_shard_bytes` as [`plan_shards`]
/// decides, each file atomically; `load` as for [`super::write::write_gguf_data`], called
/// once per tensor in order. Returns the paths written. A failure removes the files
/// already written, so no partial set is left.
pub fn write_gguf_split<'d, F>(
    path: &Path,
    metadata: &[(String, GgufValue)],
    tensors: &[super::GgufTensorSpec],
    max_shard_bytes: u64,
    durability: crate::fsutil::Durability,
    mut load: F,
) -> Result<Vec<PathBuf>>
where
    F: FnMut(usize, &super::GgufTensorSpec) -> Result<super::TensorData<'d>>,
{
    use super::write::{write_gguf_file_data, Shard};
    if max_shard_bytes == 0 {
        return Err(CoreError::invalid_argument(
            "maxShardBytes must be a positive number of bytes",
        ));
    }
    let prefix = match path.to_str().and_then(|p| p.strip_suffix(".gguf")) {
        Some(p) => PathBuf::from(p),
        None => path.to_path_buf(),
    };
    let alignment = match metadata.iter().find(|(k, _)| k == keys::ALIGNMENT) {
        Some((_, GgufValue::U32(a))) => *a as usize,
        _ => super::DEFAULT_ALIGNMENT,
    };
    let sizes: Vec<usize> = tensors
        .iter()
        .map(super::GgufTensorSpec::byte_len)
        .collect::<Result<_>>()?;
    let plan = plan_shards(&sizes, alignment, max_shard_bytes);
    let count = plan.len();
    let mut written: Vec<PathBuf> = Vec::with_capacity(count);
    let result = plan.iter().enumerate().try_for_each(|(no, range)| {
        let shard_meta = shard_metadata(metadata, no, count, tensors.len())?;
        let file = shard_path(&prefix, no, count);
        let kind = if no == 0 { Shard::Whole } else { Shard::Later };
        let options = crate::fsutil::WriteOptions::with_durability(durability);
        write_gguf_file_data(
            &file,
            &shard_meta,
            &tensors[range.clone()],
            kind,
            options,
            |i, spec| load(range.start + i, spec),
        )?;
        written.push(file);
        Ok(())
    });
    match result {
        Ok(()) => Ok(written),
        Err(e) => {
            for file in &written {
                let _ = std::fs::remove_file(file);
            }
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_prefixes_are_llama_cpps() {
        let p = shard_path(Path::new("/m/model"), 0, 3);
        assert_eq!(p, Path::new("/m/model-00001-of-00003.gguf"));
        assert_eq!(
            split_prefix(&p, 0, 3).as_deref(),
            Some(Path::new("/m/model"))
        );
        assert_eq!(split_prefix(&p, 1, 3), None);
        assert_eq!(split_prefix(Path::new("-00001-of-00003.gguf"), 0, 3), None);
        assert_eq!(
            shard_path(Path::new("x"), 99_999, 100_000),
            Path::new("x-100000-of-100000.gguf")
        );
    }

    #[test]
    fn shards_stay_within_the_limit_and_never_cut_a_tensor() {
        // Padded to 32: 32, 64, 32, 128, 32.
        let sizes = [10, 64, 1, 100, 32];
        assert_eq!(plan_shards(&sizes, 32, 96), vec![0..2, 2..3, 3..4, 4..5]);
        assert_eq!(plan_shards(&sizes, 32, 1 << 20), vec![0..5]);
        assert_eq!(
            plan_shards(&sizes, 32, 1),
            vec![0..1, 1..2, 2..3, 3..4, 4..5]
        );
        assert_eq!(plan_shards(&[], 32, 1), vec![0..0]);
    }

    #[test]
    fn split_keys_are_checked() {
        let md = |pairs: &[(&str, GgufValue)]| -> Vec<(String, GgufValue)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect()
        };
        assert_eq!(split_info(&md(&[])).unwrap(), None);
        assert_eq!(
            split_info(&md(&[(SPLIT_COUNT, GgufValue::U16(1))])).unwrap(),
            None
        );
        let ok = md(&[
            (SPLIT_NO, GgufValue::U16(1)),
            (SPLIT_COUNT, GgufValue::U16(3)),
            (SPLIT_TENSORS_COUNT, GgufValue::I32(7)),
        ]);
        assert_eq!(
            split_info(&ok).unwrap(),
            Some(SplitInfo {
                no: 1,
                count: 3,
                tensors: 7
            })
        );
        for bad in [
            md(&[(SPLIT_COUNT, GgufValue::U32(3))]),
            md(&[
                (SPLIT_COUNT, GgufValue::U16(3)),
                (SPLIT_NO, GgufValue::U16(3)),
            ]),
            md(&[
                (SPLIT_COUNT, GgufValue::U16(3)),
                (SPLIT_NO, GgufValue::U16(0)),
            ]),
        ] {
            assert_eq!(split_info(&bad).unwrap_err().code(), "ERR_INVALID_GGUF");
        }
    }
}
