//! A small zip reader for checkpoints: PyTorch's zip format (`torch.save` since 1.6) and
//! NumPy's `.npz`. It reads the central directory of a file already in memory (a mapping),
//! hands out stored members as slices of that memory (zero-copy) and inflates deflated ones.
//!
//! The input is hostile until proven otherwise. Every number in the archive is checked
//! against the bytes that are really there before it is used, and refused rather than
//! repaired:
//! - member names that leave the archive (`../x`, `/x`, `C:x`, backslashes), that hold a control
//!   character (C0, DEL, C1) or whose parts start or end with whitespace → ERR_UNSAFE_PATH;
//! - two members of one name (torch silently takes the last; we never guess) → ERR_INVALID_HEADER;
//! - members whose bytes overlap each other or the central directory → ERR_INVALID_OFFSETS;
//! - sizes that disagree (central vs local header, stored size vs length, inflated length vs
//!   declared) → ERR_SIZE_MISMATCH;
//! - zip bombs: a member inflates into a buffer of exactly its declared size (never more), the
//!   declared size may not exceed what deflate can physically produce from its compressed
//!   bytes (1032:1), and callers cap it further ([`ZipArchive::read`]'s `limit`).
//! - encryption, multi-disk archives and compression methods other than stored/deflate are
//!   refused, not skipped.

use crate::error::{CoreError, Result};
use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;

const LOCAL_SIG: u32 = 0x0403_4b50;
const CENTRAL_SIG: u32 = 0x0201_4b50;
const EOCD_SIG: u32 = 0x0605_4b50;
const EOCD64_SIG: u32 = 0x0606_4b50;
const EOCD64_LOCATOR_SIG: u32 = 0x0706_4b50;
const LOCAL_LEN: usize = 30;
const CENTRAL_LEN: usize = 46;
const EOCD_LEN: usize = 22;
const EOCD64_LEN: usize = 56;
const EOCD64_LOCATOR_LEN: usize = 20;
const ZIP64_EXTRA_ID: u16 = 0x0001;
/// Deflate's largest possible expansion: a 258-byte match coded in 2 bits.
pub const DEFLATE_MAX_RATIO: u64 = 1032;
/// Slack for block headers when bounding a tiny member's inflated size.
const DEFLATE_SLACK: u64 = 1024;

/// How a member's bytes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Stored,
    Deflate,
}

/// One member of the archive, its numbers checked against the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZipEntry {
    pub name: String,
    pub method: Method,
    /// Absolute offset of the member's (compressed) bytes in the file.
    pub data_start: u64,
    pub compressed_len: u64,
    pub uncompressed_len: u64,
    pub crc32: u32,
    /// Absolute offset of the member's local header.
    pub header_start: u64,
}

impl ZipEntry {
    /// The member's bytes as stored in the file (compressed for deflate members).
    pub fn data_range(&self) -> Range<usize> {
        // Checked against the file length in `ZipArchive::parse`.
        self.data_start as usize..(self.data_start + self.compressed_len) as usize
    }
}

/// The central directory of a zip file, validated.
#[derive(Debug, Clone)]
pub struct ZipArchive {
    entries: Vec<ZipEntry>,
    by_name: HashMap<String, usize>,
}

/// Whether `bytes` begin like a zip file (a local header or an empty archive's end record).
pub fn looks_like_zip(bytes: &[u8]) -> bool {
    bytes.len() >= 4
        && matches!(
            u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
            LOCAL_SIG | EOCD_SIG
        )
}

fn bad(message: impl Into<String>) -> CoreError {
    CoreError::invalid_header(format!("zip: {}", message.into()))
}

/// Little-endian reads that fail (not panic) past the end of the input.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn at(bytes: &'a [u8], at: usize) -> Self {
        Reader { bytes, at }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| {
            CoreError::incomplete_file("zip: a record runs past the end of the file")
        })?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

/// Where the central directory is, from the end records.
#[derive(Debug, Clone)]
pub struct Directory {
    entries: u64,
    offset: u64,
    size: u64,
    /// Where the end records start: nothing of a member may reach past it.
    end_records: u64,
}

/// The most bytes from a file's end that can hold its end records: the end record with the
/// longest comment, the ZIP64 locator and the ZIP64 end record before it.
pub const END_RECORDS_MAX_BYTES: u64 =
    (EOCD_LEN + u16::MAX as usize + EOCD64_LOCATOR_LEN + EOCD64_LEN) as u64;

fn find_eocd(bytes: &[u8]) -> Result<usize> {
    if bytes.len() < EOCD_LEN {
        return Err(bad("file too short for an end-of-central-directory record"));
    }
    // The record is 22 bytes plus a comment of at most 65,535; take the last signature whose
    // comment length reaches exactly to the end of the file.
    let lowest = bytes.len().saturating_sub(EOCD_LEN + u16::MAX as usize);
    let mut pos = bytes.len() - EOCD_LEN;
    loop {
        if bytes[pos..pos + 4] == EOCD_SIG.to_le_bytes() {
            let comment = u16::from_le_bytes([bytes[pos + 20], bytes[pos + 21]]) as usize;
            if pos + EOCD_LEN + comment == bytes.len() {
                return Ok(pos);
            }
        }
        if pos == lowest {
            return Err(bad("no end-of-central-directory record"));
        }
        pos -= 1;
    }
}

impl Directory {
    /// The end records of a file whose last bytes are `tail`, which starts at byte `base` of
    /// the file (`0`: the whole file). A ZIP64 end record that lies before `tail` is refused.
    pub fn read(tail: &[u8], base: u64) -> Result<Directory> {
        let mut dir = read_directory(tail, base)?;
        dir.end_records += base;
        Ok(dir)
    }

    /// Where the central directory lies in the file, checked to end before the end records,
    /// and to be large enough for the members it claims (each takes at least 46 bytes: the
    /// count cannot size an allocation beyond that).
    pub fn range(&self) -> Result<Range<u64>> {
        let end = self
            .offset
            .checked_add(self.size)
            .filter(|&e| e <= self.end_records)
            .ok_or_else(|| {
                CoreError::invalid_offsets("zip: the central directory runs past its end record")
            })?;
        if self.entries > self.size / CENTRAL_LEN as u64 {
            return Err(CoreError::size_mismatch(format!(
                "zip: {} members cannot fit a {}-byte central directory",
                self.entries, self.size
            )));
        }
        Ok(self.offset..end)
    }
}

/// The end records in `bytes`, the file from `base` on; `end_records` relative to `bytes`.
fn read_directory(bytes: &[u8], base: u64) -> Result<Directory> {
    let eocd = find_eocd(bytes)?;
    let mut r = Reader::at(bytes, eocd + 4);
    let disk = r.u16()?;
    let cd_disk = r.u16()?;
    let entries_here = r.u16()?;
    let entries = r.u16()?;
    let size = r.u32()?;
    let offset = r.u32()?;
    if disk != 0 || cd_disk != 0 || entries_here != entries {
        return Err(bad("multi-disk archives are not supported"));
    }
    let zip64 = entries == u16::MAX || size == u32::MAX || offset == u32::MAX;
    let locator = eocd.checked_sub(EOCD64_LOCATOR_LEN);
    let has_locator = locator.is_some_and(|l| bytes[l..l + 4] == EOCD64_LOCATOR_SIG.to_le_bytes());
    if !has_locator {
        if zip64 {
            return Err(bad("ZIP64 sizes without a ZIP64 end record locator"));
        }
        return Ok(Directory {
            entries: entries as u64,
            offset: offset as u64,
            size: size as u64,
            end_records: eocd as u64,
        });
    }
    let locator = locator.unwrap_or_default();
    let mut r = Reader::at(bytes, locator + 4);
    let eocd64_disk = r.u32()?;
    let eocd64 = r.u64()?;
    let disks = r.u32()?;
    if eocd64_disk != 0 || disks > 1 {
        return Err(bad("multi-disk archives are not supported"));
    }
    let eocd64 = eocd64
        .checked_sub(base)
        .and_then(|p| usize::try_from(p).ok())
        .filter(|&p| p.checked_add(EOCD64_LEN).is_some_and(|e| e <= locator))
        .ok_or_else(|| match eocd64.checked_add(EOCD64_LEN as u64) {
            Some(e) if eocd64 < base && e <= base + locator as u64 => bad(format!(
                "ZIP64 end record more than {END_RECORDS_MAX_BYTES} bytes before the file's end"
            )),
            _ => bad("ZIP64 end record outside the file"),
        })?;
    let mut r = Reader::at(bytes, eocd64);
    if r.u32()? != EOCD64_SIG {
        return Err(bad("ZIP64 end record signature missing"));
    }
    let _record_size = r.u64()?;
    let _made_by = r.u16()?;
    let _needed = r.u16()?;
    let disk = r.u32()?;
    let cd_disk = r.u32()?;
    let entries_here = r.u64()?;
    let entries64 = r.u64()?;
    let size64 = r.u64()?;
    let offset64 = r.u64()?;
    if disk != 0 || cd_disk != 0 || entries_here != entries64 {
        return Err(bad("multi-disk archives are not supported"));
    }
    // The 32-bit fields must agree with the 64-bit ones unless they defer to them.
    let agree = |narrow: u64, max: u64, wide: u64| narrow == max || narrow == wide;
    if !agree(entries as u64, u16::MAX as u64, entries64)
        || !agree(size as u64, u32::MAX as u64, size64)
        || !agree(offset as u64, u32::MAX as u64, offset64)
    {
        return Err(CoreError::size_mismatch(
            "zip: the end record and the ZIP64 end record disagree",
        ));
    }
    Ok(Directory {
        entries: entries64,
        offset: offset64,
        size: size64,
        end_records: eocd64 as u64,
    })
}

/// Refuse names that could mean anything but a plain relative path inside the archive, and
/// names that would print as another ([`crate::names::unprintable`], part by part). The
/// message shows the name escaped ([`crate::names::printable`]).
fn check_name(name: &str) -> Result<()> {
    let unsafe_name = name.is_empty()
        || name.starts_with('/')
        || name.contains('\\')
        || name.as_bytes().get(1) == Some(&b':')
        || name.split('/').any(|c| c == ".." || c == ".");
    let why = if unsafe_name {
        "is not a plain path inside the archive"
    } else if let Some(why) = name.split('/').find_map(crate::names::unprintable) {
        why
    } else {
        return Ok(());
    };
    Err(CoreError::unsafe_path(format!(
        "zip: member name '{}' is refused: {why}",
        crate::names::printable(name)
    )))
}

/// The ZIP64 extra field's values, in the order the header defers to them.
fn zip64_extra(
    extra: &[u8],
    want_uncompressed: bool,
    want_compressed: bool,
    want_offset: bool,
) -> Result<(Option<u64>, Option<u64>, Option<u64>)> {
    let mut r = Reader::at(extra, 0);
    while r.at + 4 <= extra.len() {
        let id = r.u16()?;
        let len = r.u16()? as usize;
        let body = r
            .take(len)
            .map_err(|_| bad("an extra field runs past its header"))?;
        if id != ZIP64_EXTRA_ID {
            continue;
        }
        let mut f = Reader::at(body, 0);
        let mut next = |want: bool| -> Result<Option<u64>> {
            if want {
                f.u64()
                    .map(Some)
                    .map_err(|_| bad("ZIP64 extra field too short"))
            } else {
                Ok(None)
            }
        };
        let u = next(want_uncompressed)?;
        let c = next(want_compressed)?;
        let o = next(want_offset)?;
        return Ok((u, c, o));
    }
    if want_uncompressed || want_compressed || want_offset {
        return Err(bad("ZIP64 sizes without a ZIP64 extra field"));
    }
    Ok((None, None, None))
}

/// A member as the central directory describes it, its local header not yet read.
#[derive(Debug, Clone)]
pub struct Central {
    entry: ZipEntry,
    name_len: usize,
    extra_len: usize,
}

impl Central {
    /// Where its local header starts.
    pub fn header_start(&self) -> u64 {
        self.entry.header_start
    }

    /// The member as the central directory describes it (`data_start` not yet known).
    pub fn entry(&self) -> &ZipEntry {
        &self.entry
    }

    /// How many bytes from its local header on hold the header, as far as `local` (bytes
    /// from there) tells: the central directory's lengths until the fixed part is there.
    pub fn local_len(&self, local: &[u8]) -> u64 {
        let field = |at: usize| {
            local
                .get(at..at + 2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]))
        };
        match (field(26), field(28)) {
            (Some(name), Some(extra)) => (LOCAL_LEN + name as usize + extra as usize) as u64,
            _ => (LOCAL_LEN + self.name_len + self.extra_len) as u64,
        }
    }

    /// The member, checked against its local header (`local`: the file's bytes from the
    /// header on; the member's data must end by `cd_offset`, where the directory starts).
    pub fn with_local(self, local: &[u8], cd_offset: u64) -> Result<ZipEntry> {
        let Central { mut entry, .. } = self;
        let name = &entry.name;
        let mut l = Reader::at(local, 0);
        if l.u32()? != LOCAL_SIG {
            return Err(bad(format!(
                "member {name:?}: local header signature missing"
            )));
        }
        let _needed = l.u16()?;
        let lflags = l.u16()?;
        let lmethod = l.u16()?;
        let _time = l.u16()?;
        let _date = l.u16()?;
        let lcrc = l.u32()?;
        let lcsize = l.u32()?;
        let lusize = l.u32()?;
        let lname_len = l.u16()? as usize;
        let lextra_len = l.u16()? as usize;
        let lname = l.take(lname_len)?;
        l.take(lextra_len)?;
        if lname != name.as_bytes() {
            return Err(bad(format!(
                "member {name:?}: its local header names {:?}",
                String::from_utf8_lossy(lname)
            )));
        }
        if lmethod != if entry.method == Method::Stored { 0 } else { 8 } {
            return Err(bad(format!(
                "member {name:?}: local and central headers disagree on the compression method"
            )));
        }
        let (compressed_len, uncompressed_len) = (entry.compressed_len, entry.uncompressed_len);
        // With a data descriptor (flag bit 3) the local sizes may be zero; otherwise they must
        // match (0xFFFFFFFF defers to the local ZIP64 field, which the central one governs).
        if lflags & 0x0008 == 0 {
            let same = |local: u32, central: u64| local == u32::MAX || local as u64 == central;
            if lcrc != entry.crc32
                || !same(lcsize, compressed_len)
                || !same(lusize, uncompressed_len)
            {
                return Err(CoreError::size_mismatch(format!(
                    "zip: member {name:?}: local and central headers disagree on its size or checksum"
                )));
            }
        }
        let data_start = entry.header_start + l.at as u64;
        let data_end = data_start.checked_add(compressed_len);
        if data_end.is_none_or(|e| e > cd_offset) {
            return Err(CoreError::invalid_offsets(format!(
                "zip: member {name:?} ({compressed_len} bytes at {data_start}) runs into the central directory or past the file"
            )));
        }
        entry.data_start = data_start;
        Ok(entry)
    }
}

/// The members the central directory `cd` (at `dir`'s offset) describes, each name once,
/// each local header inside the member area.
pub fn central_records(cd: &[u8], dir: &Directory) -> Result<Vec<Central>> {
    let mut records = Vec::with_capacity(dir.entries as usize);
    let mut names = std::collections::HashSet::with_capacity(dir.entries as usize);
    let mut r = Reader::at(cd, 0);
    for _ in 0..dir.entries {
        let record = central_record(&mut r, dir.offset)?;
        if !names.insert(record.entry.name.clone()) {
            return Err(bad(format!(
                "two members named {:?} (refusing to guess which one is meant)",
                record.entry.name
            )));
        }
        records.push(record);
    }
    if r.at != cd.len() {
        return Err(CoreError::size_mismatch(format!(
            "zip: the central directory holds more than its {} members",
            dir.entries
        )));
    }
    Ok(records)
}

fn central_record(r: &mut Reader<'_>, cd_offset: u64) -> Result<Central> {
    if r.u32()? != CENTRAL_SIG {
        return Err(bad("central directory record signature missing"));
    }
    let _made_by = r.u16()?;
    let _needed = r.u16()?;
    let flags = r.u16()?;
    let method = r.u16()?;
    let _time = r.u16()?;
    let _date = r.u16()?;
    let crc32 = r.u32()?;
    let csize32 = r.u32()?;
    let usize32 = r.u32()?;
    let name_len = r.u16()? as usize;
    let extra_len = r.u16()? as usize;
    let comment_len = r.u16()? as usize;
    let disk = r.u16()?;
    let _internal = r.u16()?;
    let _external = r.u32()?;
    let offset32 = r.u32()?;
    let name_bytes = r.take(name_len)?;
    let extra = r.take(extra_len)?;
    r.take(comment_len)?;
    let name = std::str::from_utf8(name_bytes)
        .map_err(|_| bad("a member name is not UTF-8"))?
        .to_string();
    check_name(&name)?;
    let named = |e: CoreError| e.with_tensor(&name);
    if flags & 0x0001 != 0 || flags & 0x0040 != 0 {
        return Err(bad(format!("member {name:?} is encrypted")));
    }
    let method = match method {
        0 => Method::Stored,
        8 => Method::Deflate,
        m => {
            return Err(bad(format!(
                "member {name:?} uses compression method {m} (only stored and deflate are read)"
            )))
        }
    };
    let (u64v, c64v, o64v) = zip64_extra(
        extra,
        usize32 == u32::MAX,
        csize32 == u32::MAX,
        offset32 == u32::MAX,
    )
    .map_err(named)?;
    if disk != 0 && disk != u16::MAX {
        return Err(bad("multi-disk archives are not supported"));
    }
    let uncompressed_len = u64v.unwrap_or(usize32 as u64);
    let compressed_len = c64v.unwrap_or(csize32 as u64);
    let header_start = o64v.unwrap_or(offset32 as u64);
    if method == Method::Stored && compressed_len != uncompressed_len {
        return Err(CoreError::size_mismatch(format!(
            "zip: stored member {name:?} declares {compressed_len} bytes stored but {uncompressed_len} bytes long"
        )));
    }
    if method == Method::Deflate
        && uncompressed_len
            > compressed_len
                .saturating_mul(DEFLATE_MAX_RATIO)
                .saturating_add(DEFLATE_SLACK)
    {
        return Err(CoreError::size_mismatch(format!(
            "zip: member {name:?} declares {uncompressed_len} bytes from {compressed_len} compressed bytes, more than deflate can produce (a zip bomb?)"
        )));
    }
    // The local header (read next) must lie before the directory.
    if header_start.saturating_add(LOCAL_LEN as u64) > cd_offset
        || usize::try_from(header_start).is_err()
    {
        return Err(CoreError::invalid_offsets(format!(
            "zip: member {name:?} starts outside the member area"
        )));
    }
    Ok(Central {
        entry: ZipEntry {
            name,
            method,
            data_start: 0,
            compressed_len,
            uncompressed_len,
            crc32,
            header_start,
        },
        name_len,
        extra_len,
    })
}

impl ZipArchive {
    /// Read and validate the directory of a zip file held whole in `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<ZipArchive> {
        let dir = Directory::read(bytes, 0)?;
        let cd = dir.range()?;
        let centrals = central_records(&bytes[cd.start as usize..cd.end as usize], &dir)?;
        let entries = centrals
            .into_iter()
            .map(|c| {
                // Inside the file: `central_record` checked it is before the directory.
                let local = &bytes[c.header_start() as usize..];
                c.with_local(local, dir.offset)
            })
            .collect::<Result<Vec<_>>>()?;
        ZipArchive::from_entries(entries)
    }

    /// The archive of `entries` (each name once, from [`central_records`]), refused when two
    /// members share bytes.
    pub fn from_entries(entries: Vec<ZipEntry>) -> Result<ZipArchive> {
        // No two members may share bytes: sort by header and compare neighbours.
        let mut spans: Vec<(u64, u64, usize)> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.header_start, e.data_start + e.compressed_len, i))
            .collect();
        spans.sort_unstable();
        for pair in spans.windows(2) {
            if pair[1].0 < pair[0].1 {
                return Err(CoreError::invalid_offsets(format!(
                    "zip: members {:?} and {:?} overlap",
                    entries[pair[0].2].name, entries[pair[1].2].name
                )));
            }
        }
        let by_name = (entries.iter().enumerate())
            .map(|(i, e)| (e.name.clone(), i))
            .collect();
        Ok(ZipArchive { entries, by_name })
    }

    pub fn entries(&self) -> &[ZipEntry] {
        &self.entries
    }

    pub fn find(&self, name: &str) -> Option<&ZipEntry> {
        self.by_name.get(name).map(|&i| &self.entries[i])
    }
}

impl ZipEntry {
    /// The member's bytes: a slice of `bytes` (the whole file) when stored, inflated when
    /// deflated. Refused when its length exceeds `limit`, and (always) when its checksum is
    /// wrong or it inflates to anything but its declared length.
    pub fn read<'a>(&self, bytes: &'a [u8], limit: u64) -> Result<Cow<'a, [u8]>> {
        self.read_at(bytes, 0, limit)
    }

    /// [`ZipEntry::read`] of `bytes` that are the file's from byte `base` on.
    pub fn read_at<'a>(&self, bytes: &'a [u8], base: u64, limit: u64) -> Result<Cow<'a, [u8]>> {
        let entry = self;
        if entry.uncompressed_len > limit {
            return Err(CoreError::size_mismatch(format!(
                "zip: member {:?} is {} bytes, over the {limit}-byte limit for it",
                entry.name, entry.uncompressed_len
            )));
        }
        let range = entry.data_range();
        let raw = usize::try_from(base)
            .ok()
            .and_then(|base| bytes.get(range.start.checked_sub(base)?..range.end - base))
            .ok_or_else(|| CoreError::incomplete_file("zip: member past the end of the file"))?;
        let data = match entry.method {
            Method::Stored => Cow::Borrowed(raw),
            Method::Deflate => Cow::Owned(inflate_exact(raw, entry)?),
        };
        if crc32(&data) != entry.crc32 {
            return Err(CoreError::size_mismatch(format!(
                "zip: member {:?} fails its CRC-32 check",
                entry.name
            )));
        }
        Ok(data)
    }

    /// The first `n` bytes of a member (fewer if it is shorter), without reading the rest:
    /// enough to parse a header inside a large compressed member. Not checksummed.
    pub fn read_prefix(&self, bytes: &[u8], n: usize) -> Result<Vec<u8>> {
        let raw = bytes
            .get(self.data_range())
            .ok_or_else(|| CoreError::incomplete_file("zip: member past the end of the file"))?;
        self.prefix_of(raw, n)?.ok_or_else(|| corrupt(self))
    }

    /// [`ZipEntry::read_prefix`] from `raw`, the first of the member's stored bytes (all of
    /// them, or fewer: a file read by ranges): `None` when `raw` is too short to give the `n`
    /// bytes, which more of them may. A stream that is invalid however many bytes follow is
    /// an error once all are there.
    pub fn prefix_of(&self, raw: &[u8], n: usize) -> Result<Option<Vec<u8>>> {
        let stored = usize::try_from(self.compressed_len).unwrap_or(usize::MAX);
        let all = raw.len() >= stored;
        let raw = &raw[..raw.len().min(stored)];
        let n = n.min(usize::try_from(self.uncompressed_len).unwrap_or(usize::MAX));
        match self.method {
            Method::Stored if all || raw.len() >= n => Ok(Some(raw[..n.min(raw.len())].to_vec())),
            Method::Stored => Ok(None),
            Method::Deflate => {
                let mut out = vec![0u8; n];
                match inflate_into(raw, &mut out) {
                    Inflated::Ended(written) => {
                        out.truncate(written);
                        Ok(Some(out))
                    }
                    Inflated::Full => Ok(Some(out)),
                    // A truncated stream and a corrupt one look alike until all of it is read.
                    Inflated::Corrupt if all => Err(corrupt(self)),
                    Inflated::Corrupt => Ok(None),
                }
            }
        }
    }
}

fn corrupt(entry: &ZipEntry) -> CoreError {
    CoreError::invalid_header(format!(
        "zip: member {:?} is not a valid deflate stream",
        entry.name
    ))
}

/// How an inflation into a fixed buffer ended.
enum Inflated {
    /// The stream ended after this many bytes.
    Ended(usize),
    /// The buffer filled before the stream ended.
    Full,
    /// Not a valid (or a truncated) deflate stream.
    Corrupt,
}

fn inflate_into(raw: &[u8], out: &mut [u8]) -> Inflated {
    // Raw deflate (negative window bits: no zlib header), as zip stores it.
    let config = zlib_rs::InflateConfig { window_bits: -15 };
    let (got, rc) = zlib_rs::decompress_slice(out, raw, config);
    match rc {
        zlib_rs::ReturnCode::Ok => Inflated::Ended(got.len()),
        // Only returned once the output is full (zlib's `uncompress` contract).
        zlib_rs::ReturnCode::BufError => Inflated::Full,
        _ => Inflated::Corrupt,
    }
}

/// Inflate a member into a buffer of its declared length plus one byte: a stream that
/// reaches the extra byte is longer than it says (a bomb), one that ends early is short.
fn inflate_exact(raw: &[u8], entry: &ZipEntry) -> Result<Vec<u8>> {
    let declared = usize::try_from(entry.uncompressed_len)
        .map_err(|_| CoreError::size_mismatch("zip: member too large for this machine"))?;
    let mut out = crate::buffer::zeroed_vec(
        declared.saturating_add(1),
        &format_args!("inflating zip member {:?}", entry.name),
    )?;
    match inflate_into(raw, &mut out) {
        Inflated::Ended(written) if written == declared => {
            out.truncate(declared);
            Ok(out)
        }
        Inflated::Ended(written) => Err(CoreError::size_mismatch(format!(
            "zip: member {:?} inflates to {written} bytes, not the {declared} it declares",
            entry.name
        ))),
        Inflated::Full => Err(CoreError::size_mismatch(format!(
            "zip: member {:?} inflates to more than the {declared} bytes it declares (a zip bomb?)",
            entry.name
        ))),
        Inflated::Corrupt => Err(corrupt(entry)),
    }
}

/// CRC-32 (IEEE, as zip uses).
pub fn crc32(data: &[u8]) -> u32 {
    crc32_continue(0, data)
}

/// The CRC-32 of the bytes `crc` was computed over followed by `data`.
pub fn crc32_continue(crc: u32, data: &[u8]) -> u32 {
    zlib_rs::crc32::crc32(crc, data)
}

#[cfg(test)]
#[path = "zip_tests.rs"]
pub(crate) mod tests;
