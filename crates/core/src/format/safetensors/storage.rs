//! An open SafeTensors file or buffer: where its bytes live (a mapping, positioned reads of
//! a file, or elsewhere), reading tensors, and the format's registry entry and source.

#[cfg(feature = "fs")]
use super::header::validate_file;
use super::header::{Header, TensorInfo, N_LEN};
use crate::error::{CoreError, Result};
#[cfg(feature = "fs")]
use crate::fsutil;
#[cfg(feature = "fs")]
use crate::memory::Backend;
use crate::memory::{Memory, TensorBytes};
use crate::slice::{SliceArg, SlicePlan};
use crate::source::{
    self, Metadata, SourceFile, SourceTensor, TensorList, TensorSource, WeightsFormat,
};
use crate::tensor::TensorView;
use std::collections::BTreeMap;
#[cfg(feature = "fs")]
use std::fs::File;
#[cfg(feature = "fs")]
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `(offset, length)` of a run of bytes within a file.
pub type FileSpan = (u64, u64);

enum Storage {
    Memory(Arc<Memory>),
    #[cfg(feature = "fs")]
    File(File),
    /// Only the header is here; the data lives elsewhere (e.g. behind HTTP range requests)
    /// and is fetched by the caller, which asks [`SafeTensors::file_range`] where to look.
    Detached,
}

/// A validated SafeTensors file (or buffer) whose tensors are read lazily.
pub struct SafeTensors {
    header: Header,
    storage: Storage,
    path: Option<PathBuf>,
    file_len: u64,
    #[cfg(feature = "fs")]
    /// What the file was when opened (files opened from a path only).
    identity: Option<FileIdentity>,
}

#[cfg(feature = "fs")]
/// A file's identity and state at one moment: enough to tell, with one `stat`, whether the
/// path still names the same, unchanged file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileIdentity {
    dev: u64,
    ino: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

#[cfg(feature = "fs")]
impl FileIdentity {
    fn of(meta: &std::fs::Metadata) -> FileIdentity {
        use std::os::unix::fs::MetadataExt;
        FileIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            modified: meta.modified().ok(),
        }
    }
}

impl SafeTensors {
    #[cfg(feature = "fs")]
    /// Open and validate a file. A file that is recognisably another format (GGUF, a zip
    /// archive, a pickle, …) is ERR_UNKNOWN_FORMAT naming what it is, rather than whatever
    /// header error its first bytes would give when read as SafeTensors.
    pub fn open(path: &Path, backend: Backend) -> Result<SafeTensors> {
        let (file, meta) = fsutil::open_regular(path, "a SafeTensors file")?;
        SafeTensors::open_file(file, &meta, path, backend).map_err(|e| {
            crate::format::detect::explain_misread(e, WeightsFormat::SafeTensors, &|| {
                crate::format::detect::Head::read_path(path)
            })
        })
    }

    #[cfg(feature = "fs")]
    fn open_file(
        file: File,
        meta: &std::fs::Metadata,
        path: &Path,
        backend: Backend,
    ) -> Result<SafeTensors> {
        let file_len = meta.len();
        let identity = Some(FileIdentity::of(meta));
        let with_path = |e: CoreError| e.with_path(path);
        match backend {
            Backend::Mmap => {
                let memory = Memory::map(&file, file_len, path)?;
                let mut st = SafeTensors::from_memory(Arc::new(memory)).map_err(with_path)?;
                st.path = Some(path.to_path_buf());
                st.identity = identity;
                Ok(st)
            }
            Backend::Read => {
                let mut prefix = [0u8; N_LEN];
                let got = read_up_to(&file, &mut prefix, 0).map_err(|e| CoreError::io(e, path))?;
                let json_len = Header::json_len(&prefix[..got], file_len).map_err(with_path)?;
                let mut json = vec![0u8; json_len];
                file.read_exact_at(&mut json, N_LEN as u64)
                    .map_err(|e| CoreError::io(e, path))?;
                let header = Header::parse(&json, file_len).map_err(with_path)?;
                Ok(SafeTensors {
                    header,
                    storage: Storage::File(file),
                    path: Some(path.to_path_buf()),
                    file_len,
                    identity,
                })
            }
        }
    }

    /// Validate a whole file already in memory.
    pub fn from_memory(memory: Arc<Memory>) -> Result<SafeTensors> {
        let file_len = memory.len() as u64;
        let json_len = Header::json_len(&memory, file_len)?;
        let header = Header::parse(&memory[N_LEN..N_LEN + json_len], file_len)?;
        Ok(SafeTensors {
            header,
            storage: Storage::Memory(memory),
            path: None,
            file_len,
            #[cfg(feature = "fs")]
            identity: None,
        })
    }

    /// Validate a file known only by its first bytes (the 8-byte prefix and the whole JSON
    /// header, possibly more) and its total length. Tensor data is not available from the
    /// result: callers fetch the bytes of [`SafeTensors::file_range`] themselves.
    pub fn from_header(head: &[u8], file_len: u64, origin: &str) -> Result<SafeTensors> {
        let parse = || {
            let json_len = Header::json_len(head, file_len)?;
            let json = head.get(N_LEN..N_LEN + json_len).ok_or_else(|| {
                CoreError::incomplete_file(format!(
                    "have {} bytes of the file's start, the header needs {}",
                    head.len(),
                    N_LEN + json_len
                ))
            })?;
            Header::parse(json, file_len).map_err(|e| e.with_path(origin))
        };
        let header = parse().map_err(|e| {
            crate::format::detect::explain_misread(e, WeightsFormat::SafeTensors, &|| {
                let mut head = crate::format::detect::Head::of(head);
                head.file_len = file_len;
                Ok(head)
            })
        })?;
        Ok(SafeTensors {
            header,
            storage: Storage::Detached,
            path: Some(PathBuf::from(origin)),
            file_len,
            #[cfg(feature = "fs")]
            identity: None,
        })
    }

    /// Where the header of a file starting with `head` (at least its 8-byte length prefix)
    /// ends, when the prefix is a length the format allows and the file can hold: how many
    /// bytes from the start a reader must have to parse the header.
    pub fn header_end(head: &[u8], file_len: u64) -> Option<u64> {
        Header::json_len(head, file_len)
            .ok()
            .map(|n| (N_LEN + n) as u64)
    }

    /// Absolute byte range `[start, end)` of a tensor within the file.
    pub fn file_range(&self, info: &TensorInfo) -> (u64, u64) {
        let base = self.header.data_start() as u64;
        (
            base + info.data_offsets.0 as u64,
            base + info.data_offsets.1 as u64,
        )
    }

    /// The absolute byte spans of a slice (see [`TensorSource::select`]) and its shape.
    pub fn slice_spans(
        &self,
        name: &str,
        ranges: &[SliceArg],
    ) -> Result<(Vec<usize>, Vec<FileSpan>)> {
        let info = self.info(name)?;
        let plan = SlicePlan::new(info.dtype, &info.shape, ranges)
            .map_err(|e| self.context(e.with_tensor(name)))?;
        let (base, _) = self.file_range(&info);
        let spans = plan
            .spans
            .iter()
            .map(|&(s, l)| (base + s as u64, l as u64))
            .collect();
        Ok((plan.shape, spans))
    }

    /// Validate a whole file held in memory (see [`SafeTensors::open`] for bytes of another
    /// format).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<SafeTensors> {
        let memory = Arc::new(Memory::Owned(bytes));
        SafeTensors::from_memory(Arc::clone(&memory)).map_err(|e| {
            crate::format::detect::explain_misread(e, WeightsFormat::SafeTensors, &|| {
                Ok(crate::format::detect::Head::of(&memory))
            })
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
    pub fn file_len(&self) -> u64 {
        self.file_len
    }
    pub fn metadata(&self) -> Option<&BTreeMap<String, String>> {
        self.header.metadata()
    }
    /// Tensors in data-offset order.
    pub fn tensors(&self) -> &[SourceTensor] {
        self.header.tensors()
    }

    fn context(&self, e: CoreError) -> CoreError {
        match &self.path {
            Some(p) => e.with_path(p),
            None => e,
        }
    }

    /// Where the tensor lives in the file, or ERR_NOT_FOUND naming it.
    pub fn info(&self, name: &str) -> Result<TensorInfo> {
        self.header.info(name).ok_or_else(|| {
            self.context(CoreError::not_found("no such tensor in the file").with_tensor(name))
        })
    }

    /// The bytes of a validated tensor (shared memory, or one positioned read).
    pub fn bytes(&self, info: &TensorInfo) -> Result<TensorBytes<'_>> {
        self.bytes_range(info.data_offsets.0, info.byte_len())
            .map_err(|e| self.context(e.with_tensor(&info.name)))
    }

    /// Bytes `[offset, offset + len)` of the data section.
    fn bytes_range(&self, offset: usize, len: usize) -> Result<TensorBytes<'_>> {
        let data_len = self.header.data_len();
        if offset.checked_add(len).is_none_or(|end| end > data_len) {
            return Err(CoreError::invalid_argument(
                "byte range outside the data section",
            ));
        }
        let start = self.header.data_start() + offset;
        match &self.storage {
            Storage::Memory(memory) => TensorBytes::shared(memory, start, len),
            #[cfg(feature = "fs")]
            Storage::File(file) => {
                let mut buf = crate::memory::reserve(len as u64, "the tensor is read whole")
                    .map_err(|e| self.context(e))?;
                buf.resize(len, 0);
                file.read_exact_at(&mut buf, start as u64).map_err(|e| {
                    let e = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                        CoreError::incomplete_file(
                            "file is shorter than when it was opened (changed on disk?)",
                        )
                    } else {
                        CoreError::io(e, "")
                    };
                    self.context(e)
                })?;
                Ok(TensorBytes::Owned(buf))
            }
            Storage::Detached => Err(self.context(CoreError::invalid_argument(
                "this file's data is remote: use getTensorAsync (or getSliceAsync)",
            ))),
        }
    }

    /// A [`TensorView`] of one tensor (borrowed from memory, or owned after a read).
    pub fn view(&self, name: &str) -> Result<TensorView<'_>> {
        let info = self.info(name)?;
        let data = self.bytes(&info)?.into_cow();
        Ok(TensorView {
            name: info.name,
            dtype: info.dtype,
            shape: info.shape,
            data,
        })
    }

    #[cfg(feature = "fs")]
    /// What has happened to the file on disk since it was opened, with one `stat` (nothing
    /// for files not opened from a path): removed (ERR_NOT_FOUND), replaced by another file
    /// (ERR_IO: this handle keeps reading the one it opened), its length changed in place
    /// (ERR_INCOMPLETE_FILE: reading a memory map past a new end faults with SIGBUS, the
    /// read backend gets short reads), or modified in place (ERR_IO: untouched pages may
    /// show new bytes).
    pub fn changes_since_open(&self) -> Vec<CoreError> {
        let (Some(path), Some(then)) = (&self.path, &self.identity) else {
            return Vec::new();
        };
        let now = match std::fs::metadata(path) {
            Ok(meta) => FileIdentity::of(&meta),
            Err(e) => {
                let kind = CoreError::io(e, path).kind();
                let what = if kind == crate::error::ErrorKind::NotFound {
                    "removed since it was opened (this handle still reads the file it opened)"
                } else {
                    "cannot be checked since it was opened"
                };
                return vec![CoreError::new(kind, what).with_path(path)];
            }
        };
        let problem = if (now.dev, now.ino) != (then.dev, then.ino) {
            CoreError::new(
                crate::error::ErrorKind::Io,
                "replaced on disk since it was opened (this handle still reads the file it opened)",
            )
        } else if now.len != then.len {
            CoreError::incomplete_file(format!(
                "file changed on disk since it was opened ({} bytes then, {} now): reads past \
                 the new end fail, and through a memory map they fault (SIGBUS)",
                then.len, now.len
            ))
        } else if now.modified != then.modified {
            CoreError::new(
                crate::error::ErrorKind::Io,
                "modified in place since it was opened (tensors not yet read may show the new bytes)",
            )
        } else {
            return Vec::new();
        };
        vec![problem.with_path(path)]
    }

    #[cfg(feature = "fs")]
    /// The first of [`SafeTensors::changes_since_open`], if any.
    pub fn check_unchanged(&self) -> Result<()> {
        match self.changes_since_open().into_iter().next() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// SafeTensors' entry in the format registry.
pub const FORMAT: crate::format::Registration = crate::format::Registration {
    format: WeightsFormat::SafeTensors,
    name: "safetensors",
    describe: "a SafeTensors file",
    metadata_namespace: "safetensors",
    sniff: crate::format::detect::is_safetensors,
    reader: crate::format::Reader::File(crate::format::FileReader {
        #[cfg(feature = "fs")]
        open: Some(|path, options| {
            let file = SafeTensors::open(path, options.backend)?;
            options.report(file.file_len(), file.file_len());
            Ok(Box::new(file))
        }),
        from_bytes: Some(|bytes| Ok(Box::new(SafeTensors::from_bytes(bytes)?))),
        #[cfg(feature = "fs")]
        problems: Some(validate_file),
    }),
};

impl TensorSource for SafeTensors {
    fn format(&self) -> WeightsFormat {
        WeightsFormat::SafeTensors
    }
    fn list(&self) -> &TensorList {
        self.header.list()
    }
    fn metadata(&self) -> Metadata<'_> {
        self.header
            .metadata()
            .map_or(Metadata::None, Metadata::Strings)
    }
    fn fetch(&self, name: &str) -> Result<TensorBytes<'_>> {
        self.bytes(&self.info(name)?)
    }
    fn fetch_raw(&self, name: &str) -> Result<TensorBytes<'_>> {
        self.fetch(name)
    }
    fn fetch_spans(&self, name: &str, spans: &[(usize, usize)]) -> Result<Option<Vec<u8>>> {
        #[cfg(feature = "fs")]
        if let Storage::File(_) = self.storage {
            let (base, end) = self.info(name)?.data_offsets;
            let mut out = Vec::new();
            for &(start, len) in spans {
                // Inside the tensor, so `out` is bounded by the file's size.
                let at = base
                    .checked_add(start)
                    .filter(|at| at.checked_add(len).is_some_and(|e| e <= end))
                    .ok_or_else(|| CoreError::invalid_argument("a run outside the tensor"))?;
                out.extend_from_slice(self.bytes_range(at, len)?.as_slice());
            }
            return Ok(Some(out));
        }
        let _ = (name, spans);
        Ok(None)
    }
    fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
    fn files(&self) -> Vec<SourceFile> {
        source::single_file(self.path.as_deref(), self.file_len)
    }
    fn stored_range(&self, name: &str) -> Option<(u64, u64)> {
        let (start, end) = self.header.info(name)?.data_offsets;
        Some((start as u64, end as u64))
    }
    fn view(&self, name: &str) -> Result<TensorView<'_>> {
        SafeTensors::view(self, name)
    }
}

#[cfg(feature = "fs")]
pub(super) fn read_up_to(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64)? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}
