//! A GGUF file as a [`TensorSource`]: mapped once, parsed once, tensors fetched by name.
//!
//! What `fetch` yields per ggml type (the type policy of every reader of GGUF: `getTensor`,
//! `convert`, `Model`): plain types (F32, F16, BF16, F64, the integers) are served as stored
//! (a view of the mapping); block types are decoded to F32 through the codec table
//! ([`crate::codecs`]; a type without a decoder lists normally and fails to fetch with
//! ERR_UNSUPPORTED_DTYPE, while `fetch_raw` always gives the stored blocks).

use super::{GgmlType, GgufFile, GgufParts, GgufTensorInfo};
use crate::dtype::DType;
use crate::error::{CoreError, Result};
use crate::format::{detect, FileReader, Reader, Registration};
use crate::memory::{Block, Memory, TensorBytes};
#[cfg(feature = "fs")]
use crate::source::OpenOptions;
use crate::source::{
    self, F32Decoder, Metadata, SourceFile, SourceTensor, TensorList, TensorSource, WeightsFormat,
};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// GGUF's entry in the format registry.
pub const FORMAT: Registration = Registration {
    format: WeightsFormat::Gguf,
    name: "gguf",
    describe: "a GGUF file",
    metadata_namespace: "gguf",
    sniff: detect::is_gguf,
    reader: Reader::File(FileReader {
        #[cfg(feature = "fs")]
        open: Some(|path, options| Ok(Box::new(GgufSource::open(path, options)?))),
        from_bytes: Some(|bytes| Ok(Box::new(GgufSource::from_bytes(bytes)?))),
        #[cfg(feature = "fs")]
        problems: None,
    }),
};

/// A parsed GGUF file that owns its bytes (or, for a file read piecewise, only its header:
/// see [`GgufSource::from_header`]).
pub struct GgufSource {
    memory: Arc<Memory>,
    /// The length of a file whose header alone is held (`memory` is empty then).
    header_only: Option<u64>,
    path: Option<PathBuf>,
    /// The parsed header: version, alignment, data offset, metadata, and the file's own
    /// description of each tensor (in the order of `tensors`).
    header: GgufParts,
    tensors: TensorList,
    /// The files of a split set after the first (see [`super::split`]), in order; empty for
    /// a single file.
    more: Vec<ShardFile>,
    /// For each tensor (in the order of `header.tensors`), the file holding it: 0 for the
    /// first, `i` for `more[i - 1]`. Empty for a single file.
    shard_of: Vec<u16>,
}

/// A file of a split set after the first.
struct ShardFile {
    /// Empty for a file whose header alone is held.
    memory: Arc<Memory>,
    path: PathBuf,
    /// The file's length.
    len: u64,
    data_offset: usize,
}

/// The dtype a tensor of `t` is served as: a plain type as itself (integers stay integers,
/// F16 and BF16 keep their bits), a block type as F32 (the codec table decodes it).
pub fn served_dtype(t: GgmlType) -> DType {
    t.decoded_dtype().unwrap_or(DType::F32)
}

/// Whether `t` is served as its stored bytes (no decoding).
fn served_as_stored(t: GgmlType) -> bool {
    t.codec().native.is_some()
}

impl GgufSource {
    #[cfg(feature = "fs")]
    /// Map (or, with `Backend::Read`, read) and parse a file. The first file of a split set
    /// opens the whole set: every file's tensors, found from this one's name as llama.cpp
    /// finds them; a later file of a set is refused, naming the first (ERR_INVALID_GGUF).
    pub fn open(path: &Path, options: &mut OpenOptions<'_>) -> Result<GgufSource> {
        let (memory, mut source) = open_file(path, options)?;
        drop(memory);
        source.path = Some(path.to_path_buf());
        let split =
            super::split::split_info(&source.header.metadata).map_err(|e| e.with_path(path))?;
        if let Some(split) = split {
            source.join_shards(path, split, options)?;
        }
        Ok(source)
    }

    #[cfg(feature = "fs")]
    /// Open the other files of the split set whose first file `self` is, and serve their
    /// tensors too (see [`GgufSource::join_shard`]).
    fn join_shards(
        &mut self,
        path: &Path,
        split: super::split::SplitInfo,
        options: &mut OpenOptions<'_>,
    ) -> Result<()> {
        let files = super::split::other_files(path, split).map_err(|e| e.with_path(path))?;
        for (i, file) in files.into_iter().enumerate() {
            let (memory, parts) = match open_file(&file, options) {
                Ok((memory, source)) => (memory, source.header),
                Err(e) if e.code() == "ERR_NOT_FOUND" => {
                    return Err(super::split::file_missing(i + 1, split).with_path(&file))
                }
                Err(e) => return Err(e),
            };
            let len = memory.len() as u64;
            self.join_shard(split, i + 1, file, memory, len, parts)?;
        }
        self.joined(split)
    }

    /// Add file `no` (from 1) of the split set whose first file `self` is (its `split`
    /// keys): the file at `path` of `len` bytes, whose header is `parts` and bytes `memory`
    /// (empty for a header read by ranges). It must say it is file `no` of the same set.
    /// [`GgufSource::joined`] checks the set once every file is added.
    pub fn join_shard(
        &mut self,
        split: super::split::SplitInfo,
        no: usize,
        path: PathBuf,
        memory: Arc<Memory>,
        len: u64,
        parts: GgufParts,
    ) -> Result<()> {
        use super::split::split_info;
        let count = split.count;
        let theirs = split_info(&parts.metadata).map_err(|e| e.with_path(&path))?;
        let expected = super::split::SplitInfo {
            no: no as u16,
            ..split
        };
        if theirs != Some(expected) {
            return Err(CoreError::invalid_gguf(format!(
                "its split keys say {}, but it is named as file {} of the {count} of a set \
                 of {} tensors: it belongs to another split GGUF",
                theirs.map_or("it is no split file".to_string(), |t| format!(
                    "file {} of {} of a set of {} tensors",
                    t.no as usize + 1,
                    t.count,
                    t.tensors
                )),
                no + 1,
                split.tensors
            ))
            .with_path(&path));
        }
        if self.shard_of.len() < self.header.tensors.len() {
            self.shard_of.resize(self.header.tensors.len(), 0);
        }
        self.shard_of
            .extend(std::iter::repeat_n(no as u16, parts.tensors.len()));
        self.header.tensors.extend(parts.tensors);
        self.more.push(ShardFile {
            memory,
            path,
            len,
            data_offset: parts.data_offset,
        });
        Ok(())
    }

    /// Check the set joined by [`GgufSource::join_shard`]: no tensor in two files, and as
    /// many tensors as `split.tensors`.
    pub fn joined(&mut self, split: super::split::SplitInfo) -> Result<()> {
        let fail = |msg: String| self.context(CoreError::invalid_gguf(msg));
        let tensors = tensor_list(&self.header, |n| {
            fail("a tensor listed in two files of the split GGUF".to_string()).with_tensor(n)
        })?;
        if self.header.tensors.len() != split.tensors {
            return Err(fail(format!(
                "'{}' is {}, but the {} files of the split GGUF hold {} tensors",
                super::split::SPLIT_TENSORS_COUNT,
                split.tensors,
                split.count,
                self.header.tensors.len()
            )));
        }
        self.tensors = tensors;
        Ok(())
    }

    /// The header alone, the file's bytes (if held) let go.
    pub fn into_header(self) -> GgufParts {
        self.header
    }

    /// Which file of a split set holds `name`: 0 for the first (and for a single file).
    pub fn file_index(&self, name: &str) -> Option<usize> {
        let i = self.tensors.position(name)?;
        Some(self.shard_of.get(i).map_or(0, |&s| s as usize))
    }

    /// Parse a whole file held in memory.
    /// A whole file held in memory; an error says what else the bytes look like, if they
    /// look like something else.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufSource> {
        let memory = Arc::new(Memory::Owned(bytes));
        GgufSource::from_memory(Arc::clone(&memory)).map_err(|e| {
            detect::explain_misread(e, WeightsFormat::Gguf, &|| Ok(detect::Head::of(&memory)))
        })
    }

    pub fn from_memory(memory: Arc<Memory>) -> Result<GgufSource> {
        let parts = GgufFile::parse(&memory)?.into_parts();
        GgufSource::from_parts(memory, None, parts)
    }

    /// The header of a file of `file_len` bytes read elsewhere (over HTTP, by range requests:
    /// see [`super::parse_header`]). It lists and describes every tensor; the tensors' bytes
    /// are fetched by the caller and served with [`GgufSource::serve_stored`]. `fetch` and
    /// `fetch_raw` are ERR_INVALID_ARGUMENT.
    pub fn from_header(parts: GgufParts, file_len: u64) -> Result<GgufSource> {
        GgufSource::from_parts(Arc::new(Memory::Owned(Vec::new())), Some(file_len), parts)
    }

    fn from_parts(
        memory: Arc<Memory>,
        header_only: Option<u64>,
        parts: GgufParts,
    ) -> Result<GgufSource> {
        // Names were checked unique by the parser.
        let tensors = tensor_list(&parts, |n| {
            CoreError::invalid_gguf("duplicate tensor name").with_tensor(n)
        })?;
        Ok(GgufSource {
            memory,
            header_only,
            path: None,
            header: parts,
            tensors,
            more: Vec::new(),
            shard_of: Vec::new(),
        })
    }

    /// The parsed header: version, alignment, data section offset, metadata in file order,
    /// and each tensor's ggml type and offset.
    pub fn header(&self) -> &GgufParts {
        &self.header
    }

    /// The file's description of a tensor (ggml type, offset within the data section).
    pub fn gguf_info(&self, name: &str) -> Option<&GgufTensorInfo> {
        self.tensors.position(name).map(|i| &self.header.tensors[i])
    }

    fn context(&self, e: CoreError) -> CoreError {
        match &self.path {
            Some(p) => e.with_path(p),
            None => e,
        }
    }

    fn info_of(&self, name: &str) -> Result<&GgufTensorInfo> {
        self.gguf_info(name).ok_or_else(|| {
            self.context(CoreError::not_found("no such tensor in the file").with_tensor(name))
        })
    }

    /// What `fetch` would give for `name`, from its stored bytes `raw` (fetched by the caller
    /// from the file at [`GgufSource::file_offset`]): the bytes as they are for plain types;
    /// for block types a decoder to F32 over them, as [`TensorSource::f32_decoder`] gives, so
    /// that the caller decodes straight into its output ([`F32Decoder::decode_to_bytes`]
    /// when it wants the decoded bytes).
    pub fn serve_stored(&self, name: &str, raw: Vec<u8>) -> Result<Served> {
        let info = self.info_of(name)?;
        if raw.len() != info.byte_len {
            return Err(self.context(
                CoreError::invalid_argument(format!(
                    "{} bytes given for a tensor of {} stored bytes",
                    raw.len(),
                    info.byte_len
                ))
                .with_tensor(name),
            ));
        }
        if served_as_stored(info.ggml_type) {
            return Ok(Served::Bytes(TensorBytes::Owned(raw)));
        }
        Ok(Served::Decoder(decoder(
            info.ggml_type,
            TensorBytes::Owned(raw),
        )))
    }

    /// Where the stored bytes of `name` start, from the start of the file holding it.
    pub fn file_offset(&self, name: &str) -> Option<u64> {
        let i = self.tensors.position(name)?;
        let (_, data_offset) = self.shard(i);
        Some(data_offset as u64 + self.header.tensors[i].offset)
    }

    /// The memory and data section offset of the file holding tensor `i`.
    fn shard(&self, i: usize) -> (&Arc<Memory>, usize) {
        match self
            .shard_of
            .get(i)
            .and_then(|&s| self.more.get((s as usize).checked_sub(1)?))
        {
            Some(f) => (&f.memory, f.data_offset),
            None => (&self.memory, self.header.data_offset),
        }
    }

    /// The size of the file.
    pub fn file_len(&self) -> u64 {
        self.header_only.unwrap_or(self.memory.len() as u64)
    }

    fn raw(&self, info: &GgufTensorInfo) -> Result<TensorBytes<'_>> {
        if self.header_only.is_some() {
            return Err(self.context(
                CoreError::invalid_argument(
                    "only the header of this file was read: fetch the tensor's bytes and decode them",
                )
                .with_tensor(&info.name),
            ));
        }
        let i = self.tensors.position(&info.name).unwrap_or(usize::MAX);
        let (memory, data_offset) = self.shard(i);
        // The range was checked against the file's length by the parser.
        let start = data_offset + info.offset as usize;
        TensorBytes::shared(memory, start, info.byte_len)
            .map_err(|e| self.context(e.with_tensor(&info.name)))
    }
}

#[cfg(feature = "fs")]
/// Map (or read) and parse one GGUF file; the memory is returned beside the source.
fn open_file(path: &Path, options: &mut OpenOptions<'_>) -> Result<(Arc<Memory>, GgufSource)> {
    let (file, meta) = crate::fsutil::open_regular(path, "a GGUF file")?;
    let memory = Arc::new(Memory::load(&file, meta.len(), path, options.backend)?);
    let source = GgufSource::from_memory(Arc::clone(&memory)).map_err(|e| {
        detect::explain_misread(e.with_path(path), WeightsFormat::Gguf, &|| {
            detect::Head::read(&file, meta.len(), path)
        })
    })?;
    options.report(meta.len(), meta.len());
    Ok((memory, source))
}

/// The tensor list of `parts`, as served (see [`served_dtype`]).
fn tensor_list(parts: &GgufParts, duplicate: impl Fn(&str) -> CoreError) -> Result<TensorList> {
    let tensors = parts
        .tensors
        .iter()
        .map(|t| SourceTensor {
            name: t.name.clone(),
            dtype: served_dtype(t.ggml_type),
            stored: Cow::Borrowed(t.ggml_type.name()),
            shape: t.shape.clone(),
            stored_len: t.byte_len as u64,
        })
        .collect();
    TensorList::new(tensors, duplicate)
}

/// A tensor's stored bytes served by [`GgufSource::serve_stored`].
pub enum Served {
    /// A plain type: the bytes as they are.
    Bytes(TensorBytes<'static>),
    /// A block type: its bytes and the decoder to F32.
    Decoder(F32Decoder<'static>),
}

/// The F32 decoder of a block type over its stored bytes.
fn decoder(ty: GgmlType, stored: TensorBytes<'_>) -> F32Decoder<'_> {
    F32Decoder {
        stored,
        block: Block {
            bytes: ty.type_size(),
            values: ty.block_size(),
        },
        decode: Box::new(move |src, dst| crate::codecs::decode(ty, src, dst)),
    }
}

impl TensorSource for GgufSource {
    fn format(&self) -> WeightsFormat {
        WeightsFormat::Gguf
    }
    fn list(&self) -> &TensorList {
        &self.tensors
    }
    fn metadata(&self) -> Metadata<'_> {
        Metadata::Gguf(&self.header.metadata)
    }
    fn fetch(&self, name: &str) -> Result<TensorBytes<'_>> {
        let info = self.info_of(name)?;
        let raw = self.raw(info)?;
        if served_as_stored(info.ggml_type) {
            return Ok(raw);
        }
        decoder(info.ggml_type, raw)
            .decode_to_bytes(info.numel())
            .map(TensorBytes::Owned)
            .map_err(|e| self.context(e.with_tensor(name)))
    }
    fn fetch_raw(&self, name: &str) -> Result<TensorBytes<'_>> {
        self.raw(self.info_of(name)?)
    }
    fn f32_decoder(&self, name: &str) -> Result<Option<F32Decoder<'_>>> {
        let info = self.info_of(name)?;
        if served_as_stored(info.ggml_type) {
            return Ok(None);
        }
        Ok(Some(decoder(info.ggml_type, self.raw(info)?)))
    }
    fn stored_range(&self, name: &str) -> Option<(u64, u64)> {
        let info = self.gguf_info(name)?;
        Some((info.offset, info.offset + info.byte_len as u64))
    }
    fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
    fn files(&self) -> Vec<SourceFile> {
        let mut files = source::single_file(self.path.as_deref(), self.file_len());
        for f in &self.more {
            files.extend(source::single_file(Some(&f.path), f.len));
        }
        files
    }
    fn file_of(&self, name: &str) -> Option<&str> {
        let shard = *self.shard_of.get(self.tensors.position(name)?)? as usize;
        let path = match shard {
            0 => self.path.as_deref()?,
            s => &self.more.get(s - 1)?.path,
        };
        path.file_name()?.to_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::gguf::{write_gguf, GgufTensorSpec};
    use crate::tensor::TensorView;

    #[test]
    fn tensors_are_served_as_the_type_policy_says() {
        let values: Vec<f32> = (0..64).map(|i| (i as f32 - 20.0) / 8.0).collect();
        let views = [
            TensorView::from_f32("f32", vec![2, 32], &values).unwrap(),
            TensorView::from_f32("q8", vec![2, 32], &values).unwrap(),
            TensorView::new(
                "f16",
                DType::F16,
                vec![64],
                crate::cast::encode_f32(&values, DType::F16).unwrap(),
            )
            .unwrap(),
        ];
        let specs = [
            GgufTensorSpec::new("f32", vec![2, 32], GgmlType::F32),
            GgufTensorSpec::new("q8", vec![2, 32], GgmlType::Q8_0),
            GgufTensorSpec::new("f16", vec![64], GgmlType::F16),
        ];
        let mut bytes = Vec::new();
        let metadata = crate::format::gguf::standard_metadata("test", "t", &specs);
        write_gguf(&mut bytes, &metadata, &specs, |i, _| Ok(views[i].clone())).unwrap();
        let file = GgufFile::parse(&bytes).unwrap();
        let expected_q8 = file.tensor("q8").unwrap();
        let source = GgufSource::from_memory(Arc::new(Memory::Owned(bytes.clone()))).unwrap();
        let listed: Vec<_> = source
            .tensors()
            .iter()
            .map(|t| (t.name.as_str(), t.dtype, &*t.stored, t.stored_len))
            .collect();
        assert_eq!(
            listed,
            [
                ("f32", DType::F32, "F32", 256),
                ("q8", DType::F32, "Q8_0", 68),
                ("f16", DType::F16, "F16", 128)
            ]
        );
        // F32 and F16: the stored bytes, shared (a view in JS); Q8_0: decoded, owned.
        let f32 = source.fetch("f32").unwrap();
        assert!(matches!(f32, TensorBytes::Shared { .. }));
        assert_eq!(f32.as_slice(), &views[0].data[..]);
        assert_eq!(source.fetch("f16").unwrap().as_slice(), &views[2].data[..]);
        let q8 = source.fetch("q8").unwrap();
        assert!(matches!(q8, TensorBytes::Owned(_)));
        assert_eq!(q8.as_slice(), &expected_q8.data[..]);
        assert_eq!(source.fetch_raw("q8").unwrap().len(), 68);
        assert_eq!(source.view("q8").unwrap().shape, vec![2, 32]);
        assert_eq!(source.fetch("nope").err().unwrap().code(), "ERR_NOT_FOUND");
        assert_eq!(source.num_parameters(), 192);
        // The decoder a caller decodes into its own memory with: the stored bytes shared, and
        // the same values as `fetch`. Types served as stored have none.
        let d = source.f32_decoder("q8").unwrap().unwrap();
        assert!(matches!(d.stored, TensorBytes::Shared { .. }));
        assert_eq!(
            d.stored.as_slice(),
            source.fetch_raw("q8").unwrap().as_slice()
        );
        let mut out = vec![0f32; 64];
        (d.decode)(d.stored.as_slice(), &mut out).unwrap();
        assert_eq!(crate::cast::element_bytes(&out), q8.as_slice());
        assert!(source.f32_decoder("f32").unwrap().is_none());
        assert!(source.f32_decoder("f16").unwrap().is_none());
        assert_eq!(
            source.f32_decoder("nope").err().unwrap().code(),
            "ERR_NOT_FOUND"
        );
    }
}
