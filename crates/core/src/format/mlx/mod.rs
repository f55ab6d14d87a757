//! `weights.mlx`: MLX-Node's JSON fallback format, read and written without ever holding the
//! whole document as a JSON tree.
//!
//! ```json
//! {"version": "1.0",
//!  "metadata": {"format": "mlx"},
//!  "weights": {"w": {"shape": [2, 2], "dtype": "float32", "data": [1, 2.5, -0.0, "NaN"]}}}
//! ```
//!
//! Reading rules (every violation is ERR_INVALID_MLX, naming the tensor when one is concerned):
//!
//! - The document is an object with a `weights` object; `version` (string or number) is
//!   optional, a `metadata` object is kept (string values as they are, numbers and booleans as
//!   their JSON text; nulls, arrays and objects inside it are skipped), any other top-level key
//!   (`config`, ...) is ignored.
//! - Each entry has `shape` (non-negative integers), `dtype` and `data` (numbers, row-major),
//!   in any order; other entry keys are ignored. `dtype` is `"float32"`, `"float16"`,
//!   `"bfloat16"`, `"int32"`, `"uint32"` or MLX-Node's integer code 0 F32, 1 I32, 2 F16,
//!   3 BF16, 4 U32.
//! - JSON has no NaN or infinities, so `data` also accepts the strings `"NaN"`, `"Infinity"`
//!   and `"-Infinity"` (float dtypes only). `null` (what `JSON.stringify` makes of NaN) is
//!   rejected like any other non-number.
//! - Numbers are rounded to the entry's dtype once, to nearest even, from the decimal text's
//!   f64 (integers beyond 2^53 go through a round-to-odd f64 so that no double rounding
//!   occurs); int32/uint32 data must be integers in range.
//! - A file whose entries all lack `data`, or that has no `weights` key, is MLX-Node's
//!   metadata file: the error says the weights are stored elsewhere.
//! - Files over [`DEFAULT_MAX_MLX_FILE_BYTES`] (16 GiB; see [`MlxReadOptions`]) are refused.
//!
//! Memory: the file streams through serde_json's `Deserializer` with hand-written visitors;
//! each `data` number is encoded into its tensor's byte buffer as it is read, so a parse costs
//! about the decoded tensor bytes (4 bytes per float32 number) plus a 256 KiB read buffer. When
//! `data` comes before `dtype` in an entry, its numbers wait as f64 (8 bytes each) until the
//! entry ends. Capacity hints from `shape` are capped by what the input could hold, so a
//! lying shape cannot make the reader allocate more than a small multiple of the file size.
//!
//! Writing streams too, number by number through a buffered writer. Floats are printed in the
//! shortest form that reads back to the same stored value (half-precision values as their
//! exact f32 value), `-0.0` keeps its sign, NaN and infinities become the strings above (NaN
//! payloads and sign are not kept: every NaN reads back as the canonical quiet NaN).

mod read;
mod source;
#[cfg(test)]
mod tests;
mod write;

pub use source::{MlxSource, FORMAT};

use crate::dtype::DType;
use crate::error::{CoreError, ErrorKind, Result};
#[cfg(feature = "fs")]
use crate::fsutil;
use crate::tensor::{checked_numel, TensorView};
#[cfg(feature = "fs")]
use read::CountingReader;
use read::{decode, json_error, max_numbers_in};
#[cfg(feature = "fs")]
use std::cell::Cell;
use std::collections::{BTreeMap, HashSet};
#[cfg(feature = "fs")]
use std::io::{self, BufReader};
use std::io::{BufWriter, Write};
#[cfg(feature = "fs")]
use std::path::Path;
use write::write_document;

/// The largest file [`read_mlx`] accepts by default: 16 GiB of JSON decodes to at most a few
/// GiB of tensors, beyond what an in-memory fallback format is meant for.
pub const DEFAULT_MAX_MLX_FILE_BYTES: u64 = 16 << 30;

/// The `version` [`write_mlx`] writes.
pub const MLX_WRITE_VERSION: &str = "1.0";

#[cfg(feature = "fs")]
/// Bytes read between two progress reports while a file is parsed.
const PROGRESS_STEP_BYTES: u64 = 16 << 20;

#[cfg(feature = "fs")]
/// Read buffer of the streaming parser.
const READ_BUFFER_BYTES: usize = 256 << 10;

/// Numbers collected as f64 before they are encoded into the tensor's dtype in one batch.
const ENCODE_BATCH: usize = 8192;

/// Shared ending of the "this file holds no weights" messages.
const WEIGHTS_ELSEWHERE: &str =
    "the weights themselves are stored elsewhere — look for a .safetensors file beside it";

/// The contents of a `weights.mlx` file.
#[derive(Debug, Clone, PartialEq)]
pub struct MlxWeights {
    pub version: Option<String>,
    /// The top-level `metadata` object, if the file has one.
    pub metadata: Option<BTreeMap<String, String>>,
    /// The tensors, in file order, with owned little-endian bytes.
    pub tensors: Vec<TensorView<'static>>,
}

/// Limits of [`read_mlx_with_options`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MlxReadOptions {
    /// Files larger than this are refused with ERR_INVALID_MLX.
    pub max_file_bytes: u64,
}

impl Default for MlxReadOptions {
    fn default() -> Self {
        MlxReadOptions {
            max_file_bytes: DEFAULT_MAX_MLX_FILE_BYTES,
        }
    }
}

#[cfg(feature = "fs")]
/// Read a `weights.mlx` file. Errors carry the path.
pub fn read_mlx(path: &Path) -> Result<MlxWeights> {
    read_mlx_with_options(path, &MlxReadOptions::default(), &mut |_, _| {})
}

#[cfg(feature = "fs")]
/// [`read_mlx`], reporting `(bytes parsed, file size)` at the start, every 16 MiB and at the
/// end of a successful parse.
pub fn read_mlx_with_progress(
    path: &Path,
    on_progress: &mut dyn FnMut(u64, u64),
) -> Result<MlxWeights> {
    read_mlx_with_options(path, &MlxReadOptions::default(), on_progress)
}

#[cfg(feature = "fs")]
/// [`read_mlx_with_progress`] with explicit limits.
pub fn read_mlx_with_options(
    path: &Path,
    options: &MlxReadOptions,
    on_progress: &mut dyn FnMut(u64, u64),
) -> Result<MlxWeights> {
    let (file, meta) = fsutil::open_regular(path, "an MLX weights file")?;
    let total = meta.len();
    let too_large = || {
        CoreError::invalid_mlx(format!(
            "the file is larger than the {} bytes an MLX weights file may have",
            options.max_file_bytes
        ))
        .with_path(path)
    };
    if total > options.max_file_bytes {
        return Err(too_large());
    }
    on_progress(0, total);
    // Set by the reader if the file grew past the limit after the size check.
    let over_limit = Cell::new(false);
    let weights = {
        let counting = CountingReader {
            inner: file,
            bytes_read: 0,
            total,
            max_bytes: options.max_file_bytes,
            next_report: PROGRESS_STEP_BYTES,
            over_limit: &over_limit,
            on_progress: &mut *on_progress,
        };
        let reader = BufReader::with_capacity(READ_BUFFER_BYTES, counting);
        let mut de = serde_json::Deserializer::from_reader(reader);
        decode(&mut de, max_numbers_in(total), |e| {
            if over_limit.get() {
                too_large()
            } else if e.classify() == serde_json::error::Category::Io {
                CoreError::io(io::Error::from(e), path)
            } else {
                json_error(e)
            }
        })
        .map_err(|e| e.with_path(path))?
    };
    on_progress(total, total);
    Ok(weights)
}

/// Parse `weights.mlx` bytes already in memory (no size limit: the bytes are already here).
pub fn parse_mlx(bytes: &[u8]) -> Result<MlxWeights> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    decode(&mut de, max_numbers_in(bytes.len() as u64), json_error)
}

/// Write `tensors` (float32, float16, bfloat16, int32 or uint32) as a `weights.mlx` document,
/// version [`MLX_WRITE_VERSION`]. Every tensor is checked before the first byte is written.
pub fn write_mlx(
    out: &mut dyn Write,
    tensors: &[TensorView<'_>],
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<()> {
    let mut names = HashSet::with_capacity(tensors.len());
    for tensor in tensors {
        if MlxDtype::of(tensor.dtype).is_none() {
            return Err(CoreError::unsupported_dtype(format!(
                "MLX weights hold float32, float16, bfloat16, int32 or uint32, not {}; \
                 convert the tensor first",
                tensor.dtype
            ))
            .with_tensor(&tensor.name));
        }
        let expected = checked_numel(&tensor.shape).and_then(|n| tensor.dtype.byte_len(n));
        if expected != Some(tensor.data.len()) {
            return Err(CoreError::invalid_argument(format!(
                "shape {:?} of {} does not match its {} data bytes",
                tensor.shape,
                tensor.dtype,
                tensor.data.len()
            ))
            .with_tensor(&tensor.name));
        }
        if !names.insert(tensor.name.as_str()) {
            return Err(
                CoreError::invalid_argument("duplicate tensor name").with_tensor(&tensor.name)
            );
        }
    }
    let mut writer = BufWriter::with_capacity(1 << 16, out);
    write_document(&mut writer, tensors, metadata)
        .and_then(|()| writer.flush())
        .map_err(|e| CoreError::new(ErrorKind::Io, format!("writing MLX weights failed: {e}")))
}

#[cfg(feature = "fs")]
/// Write a `weights.mlx` file atomically (see [`fsutil::write_atomic`] and
/// [`fsutil::WriteOptions`]; progress is reported once, with the file's size, when it is
/// written).
pub fn save_mlx(
    path: &Path,
    tensors: &[TensorView<'_>],
    metadata: Option<&BTreeMap<String, String>>,
    mut options: fsutil::WriteOptions<'_>,
) -> Result<()> {
    let mut written = 0u64;
    fsutil::write_atomic(path, options.durability, |out| {
        let mut counted = fsutil::Counted::new(out);
        write_mlx(&mut counted, tensors, metadata)?;
        written = counted.written();
        Ok(())
    })
    .map_err(|e| e.with_path(path))?;
    options.report(written, written);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Dtypes.

/// The element types MLX weights files hold, with their names and MLX-Node codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MlxDtype {
    dtype: DType,
    name: &'static str,
    code: u64,
}

const MLX_DTYPES: [MlxDtype; 5] = [
    MlxDtype {
        dtype: DType::F32,
        name: "float32",
        code: 0,
    },
    MlxDtype {
        dtype: DType::I32,
        name: "int32",
        code: 1,
    },
    MlxDtype {
        dtype: DType::F16,
        name: "float16",
        code: 2,
    },
    MlxDtype {
        dtype: DType::BF16,
        name: "bfloat16",
        code: 3,
    },
    MlxDtype {
        dtype: DType::U32,
        name: "uint32",
        code: 4,
    },
];

impl MlxDtype {
    fn of(dtype: DType) -> Option<MlxDtype> {
        MLX_DTYPES.into_iter().find(|d| d.dtype == dtype)
    }
    fn named(name: &str) -> Option<MlxDtype> {
        MLX_DTYPES.into_iter().find(|d| d.name == name)
    }
    fn coded(code: u64) -> Option<MlxDtype> {
        MLX_DTYPES.into_iter().find(|d| d.code == code)
    }
}
