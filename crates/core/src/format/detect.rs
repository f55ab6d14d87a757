//! Recognising a weights file by its bytes, never by its name.
//!
//! [`sniff`] looks at the first bytes of a file ([`Head`]) and answers with the format that
//! claims it in the registry ([`crate::format::FORMATS`], in order), or with a description
//! of what the file looks like ("an ONNX model", "a zip archive (PyTorch or NumPy .npz?)",
//! "a PNG image", "a text file", "binary data of no known kind"). SafeTensors has no magic
//! number: it claims what its length prefix or its header's first byte says is one, so a
//! damaged SafeTensors file still gets the precise error of the rule it breaks, and anything
//! else gets ERR_UNKNOWN_FORMAT naming what it is.
//!
//! The recognisers:
//!
//! | format | bytes |
//! |---|---|
//! | GGUF | `GGUF` |
//! | SafeTensors | a little-endian u64 header length `n` with `8 + n` ≤ the file and `n` ≤ 100,000,000; or a JSON object's start (`{` then `"`, `}` or whitespace) right after the prefix; or at most 8 bytes (the reference reader's "header too small" or "too large") |
//! | NumPy | `\x93NUMPY`, or a zip archive whose first entry is a `.npy` (`.npz`) |
//! | PyTorch | a zip archive whose first entry is `…/data.pkl` (torch.save since 1.6), or a pickle of torch's legacy magic number |
//! | sharded index | a JSON object with a top-level `weight_map` |
//! | weights.mlx | a JSON object with a top-level `weights` |
//! | not read | ONNX (a protobuf `ModelProto`: `ir_version` first, then known fields up to the graph), other zip archives, other pickles, HDF5, gzip, other JSON; images, documents, archives, executables, text and other bytes, by their magic numbers |

use crate::error::{CoreError, ErrorKind, Result};
use crate::source::WeightsFormat;
#[cfg(feature = "fs")]
use std::path::Path;

/// How much of a file the recognisers see.
pub const HEAD_BYTES: usize = 64 << 10;

/// The first bytes of a file (at most [`HEAD_BYTES`]) and its total length.
#[derive(Debug, Clone)]
pub struct Head {
    pub bytes: Vec<u8>,
    pub file_len: u64,
}

impl Head {
    /// The head of bytes held in memory.
    pub fn of(bytes: &[u8]) -> Head {
        Head {
            bytes: bytes[..bytes.len().min(HEAD_BYTES)].to_vec(),
            file_len: bytes.len() as u64,
        }
    }

    #[cfg(feature = "fs")]
    /// The head of an open file of `file_len` bytes.
    pub fn read(file: &std::fs::File, file_len: u64, path: &Path) -> Result<Head> {
        use std::os::unix::fs::FileExt;
        let mut bytes = vec![0u8; (file_len.min(HEAD_BYTES as u64)) as usize];
        let mut got = 0;
        while got < bytes.len() {
            match file.read_at(&mut bytes[got..], got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(CoreError::io(e, path)),
            }
        }
        bytes.truncate(got);
        Ok(Head { bytes, file_len })
    }

    #[cfg(feature = "fs")]
    /// The head of the regular file at `path`.
    pub fn read_path(path: &Path) -> Result<Head> {
        let (file, meta) = crate::fsutil::open_regular(path, "a weights file")?;
        Head::read(&file, meta.len(), path)
    }

    fn starts_with(&self, magic: &[u8]) -> bool {
        self.bytes.starts_with(magic)
    }
}

/// What a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detected {
    /// A format of the registry (readable or not yet).
    Format(WeightsFormat),
    /// Something we recognise and do not read, described for a message.
    Foreign(&'static str),
}

/// Recognise a file by its first bytes (see the module documentation): the formats with a
/// magic number first, then SafeTensors, which has none and claims what is plausible (a GGUF
/// file cut after its magic is a damaged GGUF file, not a short SafeTensors one).
pub fn sniff(head: &Head) -> Detected {
    let safetensors = |r: &&crate::format::Registration| r.format == WeightsFormat::SafeTensors;
    let formats = crate::format::FORMATS.iter();
    let by_magic = formats.clone().filter(|r| !safetensors(r));
    if let Some(r) = by_magic
        .chain(formats.filter(safetensors))
        .find(|r| (r.sniff)(head))
    {
        return Detected::Format(r.format);
    }
    Detected::Foreign(foreign(head).unwrap_or_else(|| unclaimed(head)))
}

/// Files we recognise and do not read.
fn foreign(head: &Head) -> Option<&'static str> {
    if is_onnx(head) {
        Some("an ONNX model")
    } else if zip_first_entry(head).is_some() || head.starts_with(b"PK\x05\x06") {
        Some("a zip archive (PyTorch or NumPy .npz?)")
    } else if pickle_protocol(head).is_some() {
        Some("a Python pickle (a PyTorch checkpoint?)")
    } else if head.starts_with(b"\x89HDF\r\n\x1a\n") {
        Some("an HDF5 file (Keras .h5?)")
    } else if head.starts_with(b"\x1f\x8b") {
        Some("a gzip-compressed file")
    } else if json_top_level_key(head, &[]).is_some() {
        Some("a JSON document (not a sharded index or weights.mlx)")
    } else {
        None
    }
}

// ---------------------------------------------------------------------------------------
// Recognisers, one per kind of bytes (the registry's entries call these).

/// `GGUF` magic.
pub fn is_gguf(head: &Head) -> bool {
    head.starts_with(&crate::format::gguf::GGUF_MAGIC)
}

/// A SafeTensors file, or a damaged one: a length prefix that fits the file and the format's
/// limit (every other recogniser's magic, read as this length, is far larger than any file),
/// or the start of the header's JSON object right after the prefix (a truncated file, a
/// length past the limit), or a file of at most the 8 bytes of a prefix.
pub fn is_safetensors(head: &Head) -> bool {
    // Nothing but a prefix, or not even that: read as the reference reader would.
    if head.file_len <= 8 {
        return true;
    }
    let Some(prefix) = head.bytes.get(..8) else {
        return false;
    };
    let n = u64::from_le_bytes(prefix.try_into().unwrap_or([0xff; 8]));
    let fits = n <= crate::format::safetensors::MAX_HEADER_SIZE as u64
        && n.checked_add(8).is_some_and(|end| end <= head.file_len);
    let json_start = head.bytes.get(8) == Some(&b'{')
        && head
            .bytes
            .get(9)
            .is_none_or(|b| matches!(b, b'"' | b'}' | b' ' | b'\t' | b'\r' | b'\n'));
    fits || json_start
}

/// What a file no recogniser claims looks like, by the magic numbers of common kinds of files.
fn unclaimed(head: &Head) -> &'static str {
    const MAGIC: [(&[u8], &str); 12] = [
        (b"\x89PNG\r\n\x1a\n", "a PNG image"),
        (b"\xff\xd8\xff", "a JPEG image"),
        (b"GIF87a", "a GIF image"),
        (b"GIF89a", "a GIF image"),
        (b"%PDF-", "a PDF document"),
        (b"\xfd7zXZ\0", "an xz-compressed file"),
        (b"\x28\xb5\x2f\xfd", "a zstd-compressed file"),
        (b"BZh", "a bzip2-compressed file"),
        (b"7z\xbc\xaf\x27\x1c", "a 7z archive"),
        (b"\x7fELF", "an executable (ELF)"),
        (b"\0asm", "a WebAssembly module"),
        (b"\xef\xbb\xbf", "a text file"),
    ];
    if let Some((_, what)) = MAGIC.iter().find(|(m, _)| head.starts_with(m)) {
        return what;
    }
    if head.bytes.get(8..12) == Some(b"WEBP") && head.starts_with(b"RIFF") {
        return "a WebP image";
    }
    if head.bytes.get(257..262) == Some(b"ustar") {
        return "a tar archive";
    }
    if is_text(&head.bytes) {
        return "a text file";
    }
    "binary data of no known kind"
}

/// Whether the bytes are UTF-8 text (a character cut off at the end of the head allowed)
/// without control characters other than tab, line feed and carriage return.
fn is_text(bytes: &[u8]) -> bool {
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) if e.error_len().is_none() => {
            std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default()
        }
        Err(_) => return false,
    };
    !text.is_empty()
        && text
            .chars()
            .all(|c| !c.is_control() || matches!(c, '\t' | '\n' | '\r'))
}

/// A NumPy `.npy` file, or a `.npz` archive (a zip whose first entry is an `.npy`).
pub fn is_numpy(head: &Head) -> bool {
    head.starts_with(b"\x93NUMPY") || zip_first_entry(head).is_some_and(|n| n.ends_with(b".npy"))
}

/// A checkpoint written by `torch.save`: a zip archive whose first record is
/// `<folder>/data.pkl` (torch ≥ 1.6), or the legacy format, a pickle of torch's magic
/// number `0x1950a86a20f9469cfc6c` first.
pub fn is_pytorch(head: &Head) -> bool {
    if let Some(name) = zip_first_entry(head) {
        return name.ends_with(b"/data.pkl") || name == b"data.pkl";
    }
    const LEGACY_MAGIC: [u8; 12] = [
        0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19,
    ];
    pickle_protocol(head).is_some()
        && head
            .bytes
            .get(..32)
            .is_some_and(|b| b.windows(LEGACY_MAGIC.len()).any(|w| w == LEGACY_MAGIC))
}

/// A JSON object with a top-level `weight_map` (a Hugging Face sharded index).
pub fn is_sharded_index(head: &Head) -> bool {
    json_top_level_key(head, &["weight_map", "weights"]) == Some("weight_map")
}

/// A JSON object with a top-level `weights` (MLX-Node's weights.mlx).
pub fn is_mlx(head: &Head) -> bool {
    json_top_level_key(head, &["weight_map", "weights"]) == Some("weights")
}

/// The name of the first entry of a zip archive (its local file header), if it starts one.
fn zip_first_entry(head: &Head) -> Option<&[u8]> {
    let b = &head.bytes;
    if !b.starts_with(b"PK\x03\x04") {
        return None;
    }
    let name_len = u16::from_le_bytes([*b.get(26)?, *b.get(27)?]) as usize;
    b.get(30..30 + name_len)
}

/// The protocol of a pickle that starts with a PROTO opcode (protocols 2–5).
fn pickle_protocol(head: &Head) -> Option<u8> {
    match head.bytes.get(..2) {
        Some(&[0x80, p]) if (2..=5).contains(&p) => Some(p),
        _ => None,
    }
}

/// Whether the bytes start an ONNX `ModelProto`: `ir_version` (field 1, a small varint)
/// first, then only fields a ModelProto has, with their wire types and lengths that fit the
/// file, up to the graph (field 7) — what every ONNX writer (protobuf's field order) emits.
fn is_onnx(head: &Head) -> bool {
    let b = &head.bytes;
    let mut pos = 0usize;
    let varint = |pos: &mut usize| -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *b.get(*pos)?;
            *pos += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    };
    // ir_version: tag (1, varint), value 1..=64.
    if b.first() != Some(&0x08) {
        return false;
    }
    pos += 1;
    if !varint(&mut pos).is_some_and(|v| (1..=64).contains(&v)) {
        return false;
    }
    for _ in 0..16 {
        let Some(tag) = varint(&mut pos) else {
            return false;
        };
        let (field, wire) = (tag >> 3, tag & 7);
        match (field, wire) {
            // model_version: varint.
            (5, 0) => {
                if varint(&mut pos).is_none() {
                    return false;
                }
            }
            // producer_name, producer_version, domain, doc_string; the graph; opset_import,
            // metadata_props, training_info, functions, configuration: length-delimited.
            (2..=4 | 6 | 7 | 8 | 14 | 20 | 25 | 26, 2) => {
                let Some(len) = varint(&mut pos) else {
                    return false;
                };
                let end = (pos as u64).checked_add(len);
                if end.is_none_or(|e| e > head.file_len) {
                    return false;
                }
                if field == 7 {
                    return true;
                }
                let Some(end) = end.and_then(|e| usize::try_from(e).ok()) else {
                    return false;
                };
                pos = end;
            }
            _ => return false,
        }
    }
    false
}

/// The first of `keys` found at the top level of a JSON object (or, with no keys, whether
/// the bytes start a JSON object or array at all: `Some("")`). Values are skipped without
/// being kept; a document longer than the head is judged on what the head holds.
fn json_top_level_key(head: &Head, keys: &[&'static str]) -> Option<&'static str> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    let start = head.bytes.iter().position(|b| !b" \t\r\n".contains(b))?;
    let first = head.bytes[start];
    if keys.is_empty() {
        return (first == b'{' || first == b'[').then_some("");
    }
    if first != b'{' {
        return None;
    }
    struct KeyFinder<'k> {
        keys: &'k [&'static str],
        found: &'k mut Option<&'static str>,
    }
    impl<'de> Visitor<'de> for KeyFinder<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if let Some(k) = self.keys.iter().find(|k| **k == key) {
                    *self.found = Some(k);
                    // Stop here: the rest (perhaps gigabytes of weights) is not needed.
                    return Err(serde::de::Error::custom("found"));
                }
                map.next_value::<IgnoredAny>()?;
            }
            Ok(())
        }
    }
    let mut found = None;
    let mut de = serde_json::Deserializer::from_slice(&head.bytes[start..]);
    let _ = de.deserialize_map(KeyFinder {
        keys,
        found: &mut found,
    });
    found
}

// ---------------------------------------------------------------------------------------
// Errors.

/// ERR_UNKNOWN_FORMAT for a file that is `detected` but cannot be read (as `wanted`, when a
/// caller asked for one format).
pub fn unknown_format(detected: Detected, wanted: Option<WeightsFormat>) -> CoreError {
    let readable = crate::format::readable_list();
    let message = match (detected, wanted) {
        (Detected::Foreign(what), None) => {
            format!("this is {what}, not a weights format this package reads ({readable})")
        }
        (Detected::Foreign(what), Some(w)) => format!("this is {what}, not {}", w.describe()),
        (Detected::Format(f), wanted) if !crate::format::registration(f).reads() => {
            format!(
                "this is {} ({}), which this version recognises but cannot read yet{}",
                f.describe(),
                f.name(),
                wanted
                    .filter(|w| *w != f)
                    .map(|w| format!(" (not {})", w.describe()))
                    .unwrap_or_default()
            )
        }
        (Detected::Format(f), Some(w)) => format!(
            "this is {} ({}), not {}: open it with openWeights",
            f.describe(),
            f.name(),
            w.describe()
        ),
        (Detected::Format(f), None) => format!("this is {} ({})", f.describe(), f.name()),
    };
    CoreError::new(ErrorKind::UnknownFormat, message)
}

/// When reading a file as `wanted` failed on its structure, say what the file is instead if
/// its bytes show another format (a GGUF file given to `SafeTensorsFile.open`). Errors of
/// access (not found, I/O, not a regular file) and files that do look like `wanted` keep
/// their own error.
pub fn explain_misread(
    error: CoreError,
    wanted: WeightsFormat,
    head: &dyn Fn() -> Result<Head>,
) -> CoreError {
    if matches!(
        error.kind(),
        ErrorKind::NotFound | ErrorKind::Io | ErrorKind::InvalidArgument | ErrorKind::UnknownFormat
    ) {
        return error;
    }
    let Ok(head) = head() else {
        return error;
    };
    match sniff(&head) {
        Detected::Format(f) if f == wanted => error,
        detected => {
            let e = unknown_format(detected, Some(wanted));
            match error.path() {
                Some(p) => e.with_path(p),
                None => e,
            }
        }
    }
}

#[cfg(test)]
mod tests;
