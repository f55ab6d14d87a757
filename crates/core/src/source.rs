//! [`TensorSource`]: the one shape every weights format takes.
//!
//! A format module (SafeTensors, GGUF, PyTorch, NumPy, weights.mlx) exports a type
//! implementing this trait and registers how to recognise and open it in the format registry;
//! a model directory or a sharded index is one more source made of them. Everything downstream — `getTensor` in the binding,
//! `Model`, `convert`, `inspect`, `validate`, the CLI, the writers — lists tensors and
//! fetches their bytes through it, and never asks which format it is reading.
//!
//! ```text
//! bytes ─► detect ─► open ─► dyn TensorSource ─► tensors(): name, dtype, stored type, shape
//!                                              └► fetch(name): TensorBytes (a view where the
//!                                                 bytes allow, owned where decoded)
//! ```

pub mod value;

use crate::dtype::DType;
use crate::error::{CoreError, Result};
use crate::memory::{Backend, Block, Memory, TensorBytes};
use crate::slice::{SliceArg, SlicePlan};
use crate::tensor::{checked_numel, TensorView};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use value::GgufValue;

/// How a source is opened from a file.
#[derive(Default)]
pub struct OpenOptions<'p> {
    pub backend: Backend,
    /// Called with (bytes done, bytes in all) while a file is read (at least once per file;
    /// more often while a large document is parsed).
    pub progress: Option<&'p mut dyn FnMut(u64, u64)>,
}

impl OpenOptions<'_> {
    pub fn with_backend(backend: Backend) -> OpenOptions<'static> {
        OpenOptions {
            backend,
            progress: None,
        }
    }

    /// Report progress, if anyone listens.
    pub fn report(&mut self, done: u64, total: u64) {
        if let Some(p) = self.progress.as_mut() {
            p(done, total)
        }
    }
}

/// The formats a [`TensorSource`] can come from (`WeightsFile.format` in JavaScript). What
/// each one is called and how it is described are its registration's data (the format
/// registry's `name`, `describe`, `metadata_namespace`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WeightsFormat {
    SafeTensors,
    ShardedSafeTensors,
    Gguf,
    PyTorch,
    NumPy,
    Mlx,
}

impl WeightsFormat {
    pub const ALL: [WeightsFormat; 6] = [
        WeightsFormat::SafeTensors,
        WeightsFormat::ShardedSafeTensors,
        WeightsFormat::Gguf,
        WeightsFormat::PyTorch,
        WeightsFormat::NumPy,
        WeightsFormat::Mlx,
    ];
}

/// One tensor of a source, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceTensor {
    pub name: String,
    /// What [`TensorSource::fetch`] yields: the stored dtype, or the dtype a stored type is
    /// decoded to (GGUF block types: F32).
    pub dtype: DType,
    /// The stored type as the format names it: `"BF16"`, `"Q4_K"`, `"torch.bfloat16"`.
    pub stored: Cow<'static, str>,
    /// Row-major, outermost first (whatever order the format stores dimensions in).
    pub shape: Vec<usize>,
    /// Bytes as stored ([`TensorSource::fetch_raw`] returns exactly this many).
    pub stored_len: u64,
}

impl SourceTensor {
    /// Elements (checked by every source at open; 0 if it were to overflow).
    pub fn numel(&self) -> usize {
        checked_numel(&self.shape).unwrap_or(0)
    }

    /// Bytes [`TensorSource::fetch`] yields: elements × the size of `dtype`.
    pub fn byte_len(&self) -> usize {
        self.dtype.byte_len(self.numel()).unwrap_or(0)
    }
}

/// Decodes a tensor's whole stored bytes into exactly its element count of F32 values.
pub type DecodeF32 = Box<dyn Fn(&[u8], &mut [f32]) -> Result<()> + Send + Sync>;

/// A tensor's stored bytes and how they decode to F32 ([`TensorSource::f32_decoder`]).
pub struct F32Decoder<'a> {
    pub stored: TensorBytes<'a>,
    /// The stored bytes and decoded values of one block: `decode` takes any whole number of
    /// blocks, so the stored bytes can be read in parts ([`Memory::convert_blocks_once`]).
    pub block: Block,
    pub decode: DecodeF32,
}

impl F32Decoder<'_> {
    /// The decoded values into `out` (the tensor's element count), the stored bytes read as
    /// [`TensorBytes::convert_blocks`] reads them.
    pub fn decode_into(&self, out: &mut [f32]) -> Result<()> {
        self.stored.convert_blocks(out, self.block, &self.decode)
    }

    /// The `numel` decoded values as little-endian f32 bytes, in a new buffer.
    pub fn decode_to_bytes(&self, numel: usize) -> Result<Vec<u8>> {
        crate::buffer::f32_bytes(numel, &|out| self.decode_into(out))
    }
}

/// A format's key/values, in the form the format has them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Metadata<'a> {
    None,
    /// String pairs: SafeTensors' `__metadata__`, weights.mlx's `metadata`.
    Strings(&'a BTreeMap<String, String>),
    /// GGUF's typed pairs, in file order.
    Gguf(&'a [(String, GgufValue)]),
    /// Anything else, as a JSON object.
    Json(&'a serde_json::Value),
}

impl Metadata<'_> {
    pub fn is_none(&self) -> bool {
        matches!(self, Metadata::None)
    }

    /// The pairs as one JSON object (`null` when there are none): what `inspect` and
    /// `WeightsFile.metadata` show (GGUF arrays within `JsonBudget::REPORT`).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Metadata::None => serde_json::Value::Null,
            Metadata::Strings(m) => serde_json::to_value(m).unwrap_or(serde_json::Value::Null),
            Metadata::Gguf(pairs) => {
                // Arrays (a vocabulary) are shown within a report's budget, not in full.
                let mut budget = value::JsonBudget::REPORT;
                serde_json::Value::Object(
                    pairs
                        .iter()
                        .map(|(k, v)| (k.clone(), v.to_json_within(&mut budget)))
                        .collect(),
                )
            }
            Metadata::Json(v) => (*v).clone(),
        }
    }

    /// String pairs, when that is what the format holds (what a SafeTensors `__metadata__`
    /// written from this source may keep).
    pub fn strings(&self) -> Option<&BTreeMap<String, String>> {
        match self {
            Metadata::Strings(m) => Some(m),
            _ => None,
        }
    }

    /// GGUF's typed pairs, when that is what the format holds.
    pub fn gguf_pairs(&self) -> Option<&[(String, GgufValue)]> {
        match self {
            Metadata::Gguf(pairs) => Some(pairs),
            _ => None,
        }
    }

    /// The pairs as a SafeTensors `__metadata__` (string → string) keeps them: string pairs
    /// as they are, GGUF's as `gguf.<key>` → its value as text, refused past `max_bytes` of
    /// text ([`value::metadata_as_strings`]); none for other forms.
    pub fn as_safetensors_metadata(
        &self,
        max_bytes: usize,
    ) -> crate::error::Result<Option<BTreeMap<String, String>>> {
        Ok(match self {
            Metadata::Strings(m) => Some((*m).clone()),
            Metadata::Gguf(pairs) => Some(value::metadata_as_strings(pairs, max_bytes)?),
            Metadata::None | Metadata::Json(_) => None,
        })
    }

    /// The string value of `key`, in whatever form the pairs come.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        match self {
            Metadata::None => None,
            Metadata::Strings(m) => m.get(key).map(String::as_str),
            Metadata::Gguf(pairs) => pairs
                .iter()
                .find(|(k, _)| k == key)
                .and_then(|(_, v)| v.as_str()),
            Metadata::Json(v) => v.get(key).and_then(|v| v.as_str()),
        }
    }
}

/// One file a source reads, relative to the source's directory, and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    pub name: String,
    pub bytes: u64,
}

/// A sub-tensor selected by [`TensorSource::select`].
pub struct Selection<'a> {
    /// Its shape: the kept dimensions of the ranges, then the tensor's trailing ones.
    pub shape: Vec<usize>,
    pub bytes: Selected<'a>,
}

/// Where a selection's bytes are.
pub enum Selected<'a> {
    /// In hand: one run of the source's memory, or the runs read or gathered.
    Bytes(TensorBytes<'a>),
    /// Several runs `(start, len)` of the source's memory, each within it, not yet gathered.
    Runs {
        memory: &'a Arc<Memory>,
        runs: Vec<(usize, usize)>,
    },
}

impl<'a> Selected<'a> {
    /// The selected bytes, the runs gathered in order.
    pub fn into_bytes(self) -> Result<TensorBytes<'a>> {
        match self {
            Selected::Bytes(bytes) => Ok(bytes),
            Selected::Runs { memory, runs } => {
                let mut out = Vec::with_capacity(runs.iter().map(|r| r.1).sum());
                for (start, len) in runs {
                    out.extend_from_slice(TensorBytes::shared(memory, start, len)?.as_slice());
                }
                Ok(TensorBytes::Owned(out))
            }
        }
    }
}

/// A weights file (or a set of them) whose tensors can be listed and fetched one by one.
///
/// Implementations validate at open (every listed tensor's bytes lie inside the source and
/// match its type and shape), so fetching a listed tensor fails only for reasons outside the
/// source's control (a read error, a file changed on disk, an undecodable stored type).
pub trait TensorSource: Send + Sync {
    fn format(&self) -> WeightsFormat;

    /// The tensors, in serving order (the order `tensorNames` lists them), with a name index.
    fn list(&self) -> &TensorList;

    /// Every tensor, in serving order.
    fn tensors(&self) -> &[SourceTensor] {
        self.list().as_slice()
    }

    /// The listed tensor called `name`.
    fn tensor(&self, name: &str) -> Option<&SourceTensor> {
        self.list().get(name)
    }

    fn metadata(&self) -> Metadata<'_>;

    /// The tensor's bytes as `dtype` (row-major, little endian): borrowed from the source's
    /// memory where the stored bytes are already that, decoded into owned bytes otherwise.
    fn fetch(&self, name: &str) -> Result<TensorBytes<'_>>;

    /// The tensor's bytes exactly as stored.
    fn fetch_raw(&self, name: &str) -> Result<TensorBytes<'_>>;

    /// For a tensor [`fetch`](Self::fetch) decodes to F32: its stored bytes and the decoder,
    /// so a caller can decode straight into memory of its own (a JavaScript array) instead of
    /// into a fresh buffer that it then copies. `None` (the default) where `fetch` serves
    /// the stored bytes or decodes to another type.
    fn f32_decoder(&self, _name: &str) -> Result<Option<F32Decoder<'_>>> {
        Ok(None)
    }

    /// The runs `spans` (`(offset, len)` within the bytes [`fetch`](Self::fetch) serves) of
    /// `name`, gathered, when the source reads them without reading the whole tensor (a file
    /// read with positioned reads: a slice of a large tensor reads only its rows). `None`
    /// (the default) where the caller should cut them from `fetch`'s bytes.
    fn fetch_spans(&self, _name: &str, _spans: &[(usize, usize)]) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }

    /// The sub-tensor of `name` selected along its leading dimensions by `ranges` (see
    /// [`SlicePlan`]): the runs [`fetch_spans`](Self::fetch_spans) reads where the source
    /// can, otherwise cut from [`fetch`](Self::fetch)'s bytes — one run borrowed, several
    /// left where they lie ([`Selected::Runs`]) for a caller that converts them on the way.
    fn select(&self, name: &str, ranges: &[SliceArg]) -> Result<Selection<'_>> {
        let t = self.info(name)?;
        let served = t.dtype.byte_len(t.numel()).unwrap_or(usize::MAX);
        let context = |e: CoreError| match self.path() {
            Some(p) => e.with_tensor(name).with_path(p),
            None => e.with_tensor(name),
        };
        let SlicePlan { shape, spans, .. } =
            SlicePlan::new(t.dtype, &t.shape, ranges).map_err(context)?;
        let selected = |bytes| Selection {
            shape: shape.clone(),
            bytes,
        };
        if let Some(gathered) = self.fetch_spans(name, &spans).map_err(context)? {
            return Ok(selected(Selected::Bytes(TensorBytes::Owned(gathered))));
        }
        let bytes = self.fetch(name).map_err(context)?;
        if bytes.len() != served {
            return Err(context(CoreError::size_mismatch(format!(
                "{} bytes served for {} of shape {:?}",
                bytes.len(),
                t.dtype,
                t.shape
            ))));
        }
        let outside = || context(CoreError::invalid_argument("slice outside the tensor"));
        // Within the served bytes by the plan's construction; checked all the same.
        let inside = |&(s, l): &(usize, usize)| s.checked_add(l).is_some_and(|e| e <= served);
        if !spans.iter().all(inside) {
            return Err(outside());
        }
        Ok(selected(match (bytes, &spans[..]) {
            (TensorBytes::Shared { memory, start, .. }, [(s, l)]) => {
                Selected::Bytes(TensorBytes::shared(memory, start + s, *l).map_err(context)?)
            }
            (TensorBytes::Shared { memory, start, .. }, _) => Selected::Runs {
                memory,
                runs: spans.iter().map(|&(s, l)| (start + s, l)).collect(),
            },
            (bytes, spans) => {
                let all = bytes.as_slice();
                let mut out = Vec::with_capacity(spans.iter().map(|s| s.1).sum());
                spans
                    .iter()
                    .for_each(|&(s, l)| out.extend_from_slice(&all[s..s + l]));
                Selected::Bytes(TensorBytes::Owned(out))
            }
        }))
    }

    /// The file or directory the source was opened from (none for bytes held in memory).
    fn path(&self) -> Option<&Path>;

    /// The files read, with their sizes (one for a single file, every shard of a sharded
    /// checkpoint), named relative to the source's directory.
    fn files(&self) -> Vec<SourceFile>;

    /// Where the stored bytes of `name` lie, `[start, end)` within the format's data section
    /// (SafeTensors: `data_offsets`; GGUF: the tensor's offset), for formats that have one.
    fn stored_range(&self, _name: &str) -> Option<(u64, u64)> {
        None
    }

    /// Which of [`files`](Self::files) holds `name`, where there are several.
    fn file_of(&self, _name: &str) -> Option<&str> {
        None
    }

    /// `config.json` of a model directory.
    fn config(&self) -> Option<&serde_json::Value> {
        None
    }

    /// The listed tensor called `name`, or ERR_NOT_FOUND naming it and the source.
    fn info(&self, name: &str) -> Result<&SourceTensor> {
        self.tensor(name).ok_or_else(|| {
            let e = CoreError::not_found(format!(
                "no such tensor in {}",
                if self.config().is_some() {
                    "the model"
                } else {
                    "the file"
                }
            ))
            .with_tensor(name);
            match self.path() {
                Some(p) => e.with_path(p),
                None => e,
            }
        })
    }

    /// A [`TensorView`] of [`fetch`](Self::fetch)'s bytes.
    fn view(&self, name: &str) -> Result<TensorView<'_>> {
        let t = self.info(name)?;
        let bytes = self.fetch(name)?;
        TensorView::new(t.name.clone(), t.dtype, t.shape.clone(), bytes.into_cow())
    }

    /// A conversion has read `name` and will not read it again: give back this process's
    /// resident pages of its stored bytes where they are part of a mapping (pages under a view
    /// handed to JS stay: [`crate::memory::Memory::release`]). Advisory.
    fn release(&self, name: &str) {
        if let Ok(TensorBytes::Shared { memory, start, len }) = self.fetch_raw(name) {
            memory.release(start, len);
        }
    }

    /// Listed tensors whose bytes another listed tensor holds (PyTorch's tied weights, one
    /// storage under several names), as `(kept, dropped)` pairs: a SafeTensors conversion
    /// writes `kept` and drops `dropped`, as Hugging Face's `convert.py` does. None for
    /// formats where each tensor has bytes of its own.
    fn tied_tensors(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    fn num_parameters(&self) -> u64 {
        self.tensors().iter().map(|t| t.numel() as u64).sum()
    }

    /// Bytes on disk of every file read.
    fn file_size(&self) -> u64 {
        self.files().iter().map(|f| f.bytes).sum()
    }
}

/// A source's tensors in serving order, with a name index ([`TensorSource::list`]).
#[derive(Debug, Clone, Default)]
pub struct TensorList {
    tensors: Vec<SourceTensor>,
    index: HashMap<String, usize>,
}

impl TensorList {
    /// A list in the given order; a name listed twice is `duplicate(name)`'s error.
    pub fn new(
        tensors: Vec<SourceTensor>,
        duplicate: impl Fn(&str) -> CoreError,
    ) -> Result<TensorList> {
        let mut index = HashMap::with_capacity(tensors.len());
        for (i, t) in tensors.iter().enumerate() {
            if index.insert(t.name.clone(), i).is_some() {
                return Err(duplicate(&t.name));
            }
        }
        Ok(TensorList { tensors, index })
    }

    pub fn as_slice(&self) -> &[SourceTensor] {
        &self.tensors
    }

    pub fn get(&self, name: &str) -> Option<&SourceTensor> {
        self.position(name).map(|i| &self.tensors[i])
    }

    /// Where `name` is in the list.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }
}

/// [`TensorSource::files`] of a source read from one file (`path`, if it has one) of `bytes`
/// bytes: that file, by name.
pub fn single_file(path: Option<&Path>, bytes: u64) -> Vec<SourceFile> {
    path.map(|p| SourceFile {
        name: p
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| p.display().to_string()),
        bytes,
    })
    .into_iter()
    .collect()
}

/// A source parsed from one whole file held in memory (mapped, or read), as NumPy's and
/// PyTorch's are: how it is opened, its registry entry's functions ([`open_whole`],
/// [`whole_from_bytes`]) and its [`TensorSource::files`] ([`WholeFile::whole_files`]) are
/// the same for every such format, and written once here.
pub trait WholeFile: TensorSource + Sized + 'static {
    /// What the file should be, in messages ("a NumPy file").
    const WHAT: &'static str;

    /// Parse a whole file held in memory.
    fn parse(memory: Arc<Memory>) -> Result<Self>;

    /// The memory holding the whole file.
    fn memory(&self) -> &Arc<Memory>;

    /// Remember the file the source was read from (what [`TensorSource::path`] answers).
    fn set_path(&mut self, path: PathBuf);

    #[cfg(feature = "fs")]
    /// Open a file (mapped).
    fn open(path: &Path) -> Result<Self> {
        Self::open_with(path, Backend::Mmap)
    }

    #[cfg(feature = "fs")]
    /// Open a file, mapped or read into memory.
    fn open_with(path: &Path, backend: Backend) -> Result<Self> {
        let memory = Memory::open(path, Self::WHAT, backend)?;
        let mut source = Self::parse(memory).map_err(|e| e.with_path(path))?;
        // The parser read headers here and there; the kernel may have mapped far more
        // around them (whole page cache folios), none of it needed until a tensor is read.
        source.memory().give_back_unviewed();
        source.set_path(path.to_path_buf());
        Ok(source)
    }

    /// [`TensorSource::files`] of such a source: its one file, if it has a path.
    fn whole_files(&self) -> Vec<SourceFile> {
        single_file(self.path(), self.memory().len() as u64)
    }
}

/// `impl WholeFile for $type` for a source with fields `memory: Arc<Memory>` and
/// `path: Option<PathBuf>` and an inherent `from_memory` (its parser).
macro_rules! impl_whole_file {
    ($type:ty, $what:literal) => {
        impl $crate::source::WholeFile for $type {
            const WHAT: &'static str = $what;
            fn parse(
                memory: ::std::sync::Arc<$crate::memory::Memory>,
            ) -> $crate::error::Result<$type> {
                <$type>::from_memory(memory)
            }
            fn memory(&self) -> &::std::sync::Arc<$crate::memory::Memory> {
                &self.memory
            }
            fn set_path(&mut self, path: ::std::path::PathBuf) {
                self.path = Some(path);
            }
        }
    };
}
pub(crate) use impl_whole_file;

#[cfg(feature = "fs")]
/// The registry's `open` for a [`WholeFile`] format (progress once: the whole file read).
pub fn open_whole<S: WholeFile>(
    path: &Path,
    options: &mut OpenOptions<'_>,
) -> Result<Box<dyn TensorSource>> {
    let source = S::open_with(path, options.backend)?;
    let len = source.memory().len() as u64;
    options.report(len, len);
    Ok(Box::new(source))
}

/// The registry's `from_bytes` for a [`WholeFile`] format.
pub fn whole_from_bytes<S: WholeFile>(bytes: Vec<u8>) -> Result<Box<dyn TensorSource>> {
    Ok(Box::new(S::parse(Arc::new(Memory::Owned(bytes)))?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_lists_index_names_and_refuse_duplicates() {
        let t = |name: &str| SourceTensor {
            name: name.to_string(),
            dtype: DType::F32,
            stored: "F32".into(),
            shape: vec![2, 3],
            stored_len: 24,
        };
        let list = TensorList::new(vec![t("b"), t("a")], |n| CoreError::invalid_header(n)).unwrap();
        assert_eq!(list.position("a"), Some(1));
        assert_eq!(list.get("b").map(|t| t.byte_len()), Some(24));
        assert!(list.get("c").is_none());
        let e = TensorList::new(vec![t("a"), t("a")], |n| {
            CoreError::invalid_header(format!("twice: {n}"))
        })
        .unwrap_err();
        assert_eq!(e.detail(), "twice: a");
    }

    #[test]
    fn metadata_in_every_form_answers_the_same_questions() {
        let strings = BTreeMap::from([("model_type".to_string(), "llama".to_string())]);
        let gguf = [
            (
                "model_type".to_string(),
                GgufValue::String("llama".to_string()),
            ),
            ("n".to_string(), GgufValue::U64(u64::MAX)),
        ];
        let json = serde_json::json!({"model_type": "llama"});
        for m in [
            Metadata::Strings(&strings),
            Metadata::Gguf(&gguf),
            Metadata::Json(&json),
        ] {
            assert_eq!(m.get_str("model_type"), Some("llama"));
            assert_eq!(m.to_json()["model_type"], "llama");
        }
        assert_eq!(Metadata::Gguf(&gguf).to_json()["n"], u64::MAX);
        assert_eq!(Metadata::Strings(&strings).strings(), Some(&strings));
        assert_eq!(Metadata::Gguf(&gguf).strings(), None);
        assert_eq!(Metadata::None.to_json(), serde_json::Value::Null);
    }
}
