use super::*;

/// A member to forge: name, method, the bytes as stored, and the numbers the headers claim.
#[derive(Clone)]
pub(crate) struct Member {
    pub name: String,
    pub method: u16,
    pub stored: Vec<u8>,
    pub crc: u32,
    pub usize: u64,
    pub flags: u16,
    /// Write sizes and offset as 0xFFFFFFFF with a ZIP64 extra field.
    pub zip64: bool,
}

/// Raw deflate of `data` (zlib-rs, level 6).
pub(crate) fn deflate(data: &[u8]) -> Vec<u8> {
    let mut config = zlib_rs::DeflateConfig::new(6);
    config.window_bits = -15;
    let mut out = vec![0u8; zlib_rs::compress_bound(data.len())];
    let (got, rc) = zlib_rs::compress_slice(&mut out, data, config);
    assert_eq!(rc, zlib_rs::ReturnCode::Ok);
    got.to_vec()
}

pub(crate) fn stored(name: &str, data: &[u8]) -> Member {
    Member {
        name: name.into(),
        method: 0,
        stored: data.to_vec(),
        crc: crc32(data),
        usize: data.len() as u64,
        flags: 0,
        zip64: false,
    }
}

pub(crate) fn deflated(name: &str, data: &[u8]) -> Member {
    Member {
        name: name.into(),
        method: 8,
        stored: deflate(data),
        crc: crc32(data),
        usize: data.len() as u64,
        flags: 0,
        zip64: false,
    }
}

/// Write a zip: local headers + data, central directory, (ZIP64 end records,) end record.
/// `central_offset_of` may redirect a central entry to another member's local header.
pub(crate) fn build(
    members: &[Member],
    redirect: Option<(usize, usize)>,
    zip64_end: bool,
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offsets = Vec::new();
    for m in members {
        offsets.push(out.len() as u64);
        let extra = if m.zip64 {
            let mut e = vec![1, 0, 16, 0];
            e.extend_from_slice(&m.usize.to_le_bytes());
            e.extend_from_slice(&(m.stored.len() as u64).to_le_bytes());
            e
        } else {
            Vec::new()
        };
        out.extend_from_slice(&LOCAL_SIG.to_le_bytes());
        out.extend_from_slice(&[20, 0]);
        out.extend_from_slice(&m.flags.to_le_bytes());
        out.extend_from_slice(&m.method.to_le_bytes());
        out.extend_from_slice(&[0, 0, 0, 0]);
        out.extend_from_slice(&m.crc.to_le_bytes());
        let (c, u) = if m.zip64 {
            (u32::MAX, u32::MAX)
        } else {
            (m.stored.len() as u32, m.usize as u32)
        };
        out.extend_from_slice(&c.to_le_bytes());
        out.extend_from_slice(&u.to_le_bytes());
        out.extend_from_slice(&(m.name.len() as u16).to_le_bytes());
        out.extend_from_slice(&(extra.len() as u16).to_le_bytes());
        out.extend_from_slice(m.name.as_bytes());
        out.extend_from_slice(&extra);
        out.extend_from_slice(&m.stored);
    }
    let cd_start = out.len() as u64;
    for (i, m) in members.iter().enumerate() {
        let target = match redirect {
            Some((from, to)) if from == i => offsets[to],
            _ => offsets[i],
        };
        let extra = if m.zip64 {
            let mut e = vec![1, 0, 24, 0];
            e.extend_from_slice(&m.usize.to_le_bytes());
            e.extend_from_slice(&(m.stored.len() as u64).to_le_bytes());
            e.extend_from_slice(&target.to_le_bytes());
            e
        } else {
            Vec::new()
        };
        out.extend_from_slice(&CENTRAL_SIG.to_le_bytes());
        out.extend_from_slice(&[20, 3, 20, 0]);
        out.extend_from_slice(&m.flags.to_le_bytes());
        out.extend_from_slice(&m.method.to_le_bytes());
        out.extend_from_slice(&[0, 0, 0, 0]);
        out.extend_from_slice(&m.crc.to_le_bytes());
        let (c, u, o) = if m.zip64 {
            (u32::MAX, u32::MAX, u32::MAX)
        } else {
            (m.stored.len() as u32, m.usize as u32, target as u32)
        };
        out.extend_from_slice(&c.to_le_bytes());
        out.extend_from_slice(&u.to_le_bytes());
        out.extend_from_slice(&(m.name.len() as u16).to_le_bytes());
        out.extend_from_slice(&(extra.len() as u16).to_le_bytes());
        out.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        out.extend_from_slice(&o.to_le_bytes());
        out.extend_from_slice(m.name.as_bytes());
        out.extend_from_slice(&extra);
    }
    let cd_size = out.len() as u64 - cd_start;
    let n = members.len() as u64;
    if zip64_end {
        let eocd64 = out.len() as u64;
        out.extend_from_slice(&EOCD64_SIG.to_le_bytes());
        out.extend_from_slice(&44u64.to_le_bytes());
        out.extend_from_slice(&[45, 0, 45, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&cd_size.to_le_bytes());
        out.extend_from_slice(&cd_start.to_le_bytes());
        out.extend_from_slice(&EOCD64_LOCATOR_SIG.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&eocd64.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
    }
    out.extend_from_slice(&EOCD_SIG.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    let (n16, size32, off32) = if zip64_end {
        (u16::MAX, u32::MAX, u32::MAX)
    } else {
        (n as u16, cd_size as u32, cd_start as u32)
    };
    out.extend_from_slice(&n16.to_le_bytes());
    out.extend_from_slice(&n16.to_le_bytes());
    out.extend_from_slice(&size32.to_le_bytes());
    out.extend_from_slice(&off32.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out
}

fn read_all(bytes: &[u8]) -> Result<Vec<(String, Vec<u8>)>> {
    let zip = ZipArchive::parse(bytes)?;
    zip.entries()
        .iter()
        .map(|e| Ok((e.name.clone(), e.read(bytes, u64::MAX)?.into_owned())))
        .collect()
}

#[test]
fn crc32_matches_the_standard_check_values_and_a_bitwise_reference() {
    assert_eq!(crc32(b""), 0);
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(
        crc32(b"The quick brown fox jumps over the lazy dog"),
        0x414F_A339
    );
    // Every length 0..40 against a bitwise reference (slicing-by-8 and its tail).
    let data: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37)).collect();
    for n in 0..data.len() {
        let mut c = !0u32;
        for &b in &data[..n] {
            c ^= b as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
        }
        assert_eq!(crc32(&data[..n]), !c, "length {n}");
    }
}

#[test]
fn stored_deflated_and_zip64_members_read_back() {
    let text: Vec<u8> = (0..5000u32).flat_map(|i| (i % 97).to_le_bytes()).collect();
    let mut z64 = stored("big/z64", b"zip64 member");
    z64.zip64 = true;
    let members = [
        stored("a/x", b"hello"),
        deflated("a/y", &text),
        z64,
        stored("a/empty", b""),
    ];
    for zip64_end in [false, true] {
        let bytes = build(&members, None, zip64_end);
        let got = read_all(&bytes).unwrap();
        assert_eq!(got.len(), 4);
        assert_eq!(got[0], ("a/x".into(), b"hello".to_vec()));
        assert_eq!(got[1], ("a/y".into(), text.clone()));
        assert_eq!(got[2], ("big/z64".into(), b"zip64 member".to_vec()));
        assert_eq!(got[3], ("a/empty".into(), Vec::new()));
        let zip = ZipArchive::parse(&bytes).unwrap();
        // Stored members are borrowed from the input, never copied.
        let x = zip.find("a/x").unwrap();
        assert!(matches!(x.read(&bytes, 100).unwrap(), Cow::Borrowed(_)));
        assert_eq!(&bytes[x.data_range()], b"hello");
        // A prefix of a deflated member without inflating the rest.
        let y = zip.find("a/y").unwrap();
        assert_eq!(y.read_prefix(&bytes, 10).unwrap(), &text[..10]);
        assert_eq!(y.read_prefix(&bytes, 1 << 20).unwrap(), text);
        // A caller's limit is a hard cap.
        assert_eq!(y.read(&bytes, 100).unwrap_err().code(), "ERR_SIZE_MISMATCH");
    }
}

#[test]
fn an_end_record_comment_is_skipped_and_a_fake_end_record_inside_it_is_not_taken() {
    let mut bytes = build(&[stored("a/x", b"hi")], None, false);
    let n = bytes.len();
    // A comment that itself contains an end-record signature.
    let comment = [
        EOCD_SIG.to_le_bytes().to_vec(),
        vec![0u8; 18],
        b"tail".to_vec(),
    ]
    .concat();
    bytes[n - 2..].copy_from_slice(&(comment.len() as u16).to_le_bytes());
    bytes.extend_from_slice(&comment);
    assert_eq!(read_all(&bytes).unwrap()[0].1, b"hi");
}

fn code(bytes: &[u8]) -> String {
    match read_all(bytes) {
        Ok(_) => "ok".into(),
        Err(e) => format!("{} {e}", e.code()),
    }
}

#[test]
fn names_that_leave_the_archive_are_refused() {
    for name in [
        "../evil",
        "a/../../evil",
        "/etc/passwd",
        "a\\..\\b",
        "C:evil",
        "a/./b",
        "",
    ] {
        let bytes = build(&[stored("a/ok", b"1"), stored(name, b"x")], None, false);
        assert!(
            code(&bytes).starts_with("ERR_UNSAFE_PATH"),
            "{name:?}: {}",
            code(&bytes)
        );
    }
    for name in ["a/b..c", "a/.hidden", "archive/data/0", "x"] {
        assert_eq!(
            code(&build(&[stored(name, b"x")], None, false)),
            "ok",
            "{name:?}"
        );
    }
}

#[test]
fn names_with_control_characters_or_padded_parts_are_refused_escaped() {
    for (name, shown, why) in [
        ("a/\0b", "'a/\\x00b'", "control character"),
        ("a/b\x1b[2Jc", "'a/b\\x1b[2Jc'", "control character"),
        (
            "archive/data/0\n",
            "'archive/data/0\\n'",
            "control character",
        ),
        ("a/\x7f", "'a/\\x7f'", "control character"),
        ("a/\u{85}b", "'a/\\x85b'", "control character"),
        ("archive/data/0 ", "'archive/data/0 '", "whitespace"),
        (" archive/data.pkl", "' archive/data.pkl'", "whitespace"),
        ("archive /data.pkl", "'archive /data.pkl'", "whitespace"),
        ("a/\u{3000}b", "'a/\u{3000}b'", "whitespace"),
    ] {
        let got = code(&build(
            &[stored("a/ok", b"1"), stored(name, b"x")],
            None,
            false,
        ));
        assert!(
            got.starts_with("ERR_UNSAFE_PATH") && got.contains(shown) && got.contains(why),
            "{name:?}: {got}"
        );
    }
    for name in ["a b/c d", "a/b\u{e9}", "archive/data/0"] {
        assert_eq!(
            code(&build(&[stored(name, b"x")], None, false)),
            "ok",
            "{name:?}"
        );
    }
}

#[test]
fn duplicate_names_are_refused_never_guessed() {
    let bytes = build(&[stored("a/0", b"one"), stored("a/0", b"two")], None, false);
    assert!(
        code(&bytes).contains("two members named"),
        "{}",
        code(&bytes)
    );
}

#[test]
fn overlapping_members_are_refused() {
    // Member 1's local header and data are forged *inside* member 0's data, and its central
    // entry points there: both headers are valid, the bytes are shared.
    let inner = build(&[stored("a/in", b"payload")], None, false);
    let local_len = LOCAL_LEN + "a/in".len() + b"payload".len();
    let outer = stored("a/out", &inner[..local_len]);
    let mut shadow = stored("a/in", b"payload");
    shadow.crc = crc32(b"payload");
    let mut bytes = build(&[outer.clone(), shadow], None, false);
    // Point the second central entry at the header hidden in the first member's data.
    let header_in_outer = (LOCAL_LEN + "a/out".len()) as u32;
    let cd = bytes.len() - EOCD_LEN;
    let cd_start = u32::from_le_bytes(bytes[cd + 16..cd + 20].try_into().unwrap()) as usize;
    let second = cd_start + CENTRAL_LEN + "a/out".len();
    bytes[second + 42..second + 46].copy_from_slice(&header_in_outer.to_le_bytes());
    let c = code(&bytes);
    assert!(
        c.starts_with("ERR_INVALID_OFFSETS") && c.contains("overlap"),
        "{c}"
    );
    // A central entry that points at another member's header: its name differs.
    let bytes = build(
        &[stored("a/x", b"1"), stored("a/y", b"2")],
        Some((1, 0)),
        false,
    );
    assert!(
        code(&bytes).contains("local header names"),
        "{}",
        code(&bytes)
    );
}

#[test]
fn sizes_that_disagree_are_refused() {
    // Stored: compressed and uncompressed sizes must be equal.
    let mut m = stored("a/x", b"hello");
    m.usize = 9;
    assert!(code(&build(&[m], None, false)).starts_with("ERR_SIZE_MISMATCH"));
    // Data running into the central directory.
    let mut bytes = build(&[stored("a/x", b"hello")], None, false);
    let cd = bytes.len() - EOCD_LEN;
    let cd_start = u32::from_le_bytes(bytes[cd + 16..cd + 20].try_into().unwrap()) as usize;
    for at in [cd_start + 20, cd_start + 24] {
        bytes[at..at + 4].copy_from_slice(&500u32.to_le_bytes());
    }
    let c = code(&bytes);
    assert!(
        c.starts_with("ERR_SIZE_MISMATCH") || c.starts_with("ERR_INVALID_OFFSETS"),
        "{c}"
    );
    // A wrong CRC.
    let mut m = stored("a/x", b"hello");
    m.crc ^= 1;
    assert!(code(&build(&[m], None, false)).contains("CRC-32"));
    // More members claimed than the directory can hold.
    let mut bytes = build(&[stored("a/x", b"hello")], None, false);
    let n = bytes.len();
    bytes[n - 12..n - 10].copy_from_slice(&1000u16.to_le_bytes());
    bytes[n - 14..n - 12].copy_from_slice(&1000u16.to_le_bytes());
    assert!(
        code(&bytes).starts_with("ERR_SIZE_MISMATCH"),
        "{}",
        code(&bytes)
    );
}

#[test]
fn zip_bombs_are_refused_before_or_while_inflating() {
    let zeros = vec![0u8; 8 << 20];
    // Declared small, inflates to 8 MiB: stops at the declared size + 1 byte.
    let mut m = deflated("a/bomb", &zeros);
    m.usize = 1000;
    let c = code(&build(&[m], None, false));
    assert!(c.contains("inflates to more than the 1000 bytes"), "{c}");
    // Declared far beyond what deflate can produce from so few bytes: refused at parse.
    let mut m = deflated("a/bomb", &zeros);
    m.usize = 1 << 40;
    m.zip64 = true;
    let c = code(&build(&[m], None, false));
    assert!(c.contains("more than deflate can produce"), "{c}");
    // Declared larger than it inflates to.
    let mut m = deflated("a/short", b"tiny");
    m.usize = 10;
    assert!(code(&build(&[m], None, false)).contains("inflates to 4 bytes"));
    // Not deflate at all.
    let mut m = stored("a/junk", &[0xFF; 64]);
    m.method = 8;
    assert!(code(&build(&[m], None, false)).contains("not a valid deflate stream"));
}

#[test]
fn unsupported_features_are_refused_not_skipped() {
    let mut m = stored("a/x", b"hello");
    m.flags = 1;
    assert!(code(&build(&[m], None, false)).contains("encrypted"));
    let mut m = stored("a/x", b"hello");
    m.method = 12;
    assert!(code(&build(&[m], None, false)).contains("method 12"));
    assert!(code(b"PK\x03\x04 not really").contains("end-of-central-directory"));
    assert!(code(b"").contains("too short"));
    // Every truncation of a valid archive is an error, never a panic.
    let bytes = build(
        &[stored("a/x", b"hello"), deflated("a/y", &[7u8; 300])],
        None,
        true,
    );
    for n in 0..bytes.len() {
        let _ = read_all(&bytes[..n]);
    }
    // And every single-byte corruption.
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0x5A;
        let _ = read_all(&b);
    }
}

#[test]
fn a_deflated_prefix_comes_from_the_first_compressed_bytes_or_asks_for_more() {
    // Values that deflate poorly: a prefix needs about as many compressed bytes.
    let data: Vec<u8> = (0..100_000u32)
        .flat_map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes())
        .collect();
    let zip = build(&[deflated("a", &data)], None, false);
    let archive = ZipArchive::parse(&zip).unwrap();
    let e = &archive.entries()[0];
    let raw = &zip[e.data_range()];
    assert_eq!(e.read_prefix(&zip, 10_000).unwrap(), &data[..10_000]);
    assert_eq!(e.prefix_of(raw, 10_000).unwrap().unwrap(), &data[..10_000]);
    // Too few compressed bytes: none (more may give it), never a wrong prefix.
    assert_eq!(e.prefix_of(&raw[..100], 10_000).unwrap(), None);
    let enough = (256..raw.len())
        .step_by(256)
        .find(|&n| e.prefix_of(&raw[..n], 10_000).unwrap().is_some())
        .unwrap();
    assert!((10_000..20_000).contains(&enough), "{enough}");
    assert_eq!(
        e.prefix_of(&raw[..enough], 10_000).unwrap().unwrap(),
        &data[..10_000]
    );
    // Asked for more than the member holds: all of it, once the stream's end is there.
    let small = build(&[deflated("s", &data[..40])], None, false);
    let archive = ZipArchive::parse(&small).unwrap();
    let s = &archive.entries()[0];
    let raw = &small[s.data_range()];
    assert_eq!(s.prefix_of(raw, 10_000).unwrap().unwrap(), &data[..40]);
    assert_eq!(s.prefix_of(&raw[..raw.len() - 1], 10_000).unwrap(), None);
    // A stream that is invalid from its first byte: an error once all of it is there.
    let bad = Member {
        stored: vec![0xff; 64],
        ..deflated("b", &data[..40])
    };
    let zip = build(&[bad], None, false);
    let archive = ZipArchive::parse(&zip).unwrap();
    let b = &archive.entries()[0];
    let raw = &zip[b.data_range()];
    assert_eq!(b.prefix_of(&raw[..10], 16).unwrap(), None);
    let e = b.prefix_of(raw, 16).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_HEADER", "{e}");
    assert_eq!(
        b.read_prefix(&zip, 16).unwrap_err().code(),
        "ERR_INVALID_HEADER"
    );
}
