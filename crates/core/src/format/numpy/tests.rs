use super::*;

/// A `.npy` with the given header text (padded as numpy pads it) and data.
pub(crate) fn npy(version: u8, header: &str, data: &[u8]) -> Vec<u8> {
    let len_size = if version == 1 { 2 } else { 4 };
    let mut h = header.as_bytes().to_vec();
    while !(8 + len_size + h.len() + 1).is_multiple_of(64) {
        h.push(b' ');
    }
    h.push(b'\n');
    let mut out = b"\x93NUMPY".to_vec();
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(h.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    out
}

fn header(text: &str) -> Result<NpyHeader> {
    parse_header(&npy(1, text, &[]))
}

#[test]
fn headers_as_numpy_and_python_2_wrote_them() {
    let h = header("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }").unwrap();
    assert_eq!(
        (h.dtype, h.big_endian, h.fortran_order, h.shape.clone()),
        (DType::F32, false, false, vec![3, 4])
    );
    assert_eq!((h.data_offset, h.data_len), (128, 48));
    // Python 2 longs, double quotes, no trailing comma, 1-tuples, 0-d.
    let h = header("{\"descr\": \">i8\", \"fortran_order\": True, \"shape\": (2L, 5L)}").unwrap();
    assert_eq!(
        (h.dtype, h.big_endian, h.fortran_order, h.shape.clone()),
        (DType::I64, true, true, vec![2, 5])
    );
    assert_eq!(
        header("{'descr': '|u1', 'fortran_order': False, 'shape': (7,), }")
            .unwrap()
            .shape,
        vec![7]
    );
    assert_eq!(
        header("{'descr': '<c8', 'fortran_order': False, 'shape': (), }")
            .unwrap()
            .data_len,
        8
    );
    // One-byte types have no byte order, whatever the prefix says.
    assert!(
        !header("{'descr': '>i1', 'fortran_order': False, 'shape': (1,), }")
            .unwrap()
            .big_endian
    );
    for v in [2, 3] {
        let b = npy(
            v,
            "{'descr': '<u2', 'fortran_order': False, 'shape': (1,), }",
            &[1, 0],
        );
        assert_eq!(parse_header(&b).unwrap().dtype, DType::U16);
    }
}

#[test]
fn every_numeric_dtype_and_nothing_else() {
    let ok = [
        ("<f2", DType::F16),
        ("<f4", DType::F32),
        ("<f8", DType::F64),
        ("|i1", DType::I8),
        ("<i2", DType::I16),
        ("<i4", DType::I32),
        ("<i8", DType::I64),
        ("|u1", DType::U8),
        ("<u2", DType::U16),
        ("<u4", DType::U32),
        ("<u8", DType::U64),
        ("|b1", DType::BOOL),
        ("<c8", DType::C64),
        ("=f4", DType::F32),
        ("!f8", DType::F64),
    ];
    for (d, want) in ok {
        let h = header(&format!(
            "{{'descr': '{d}', 'fortran_order': False, 'shape': (1,), }}"
        ))
        .unwrap();
        assert_eq!(h.dtype, want, "{d}");
    }
    for d in [
        "<c16", "<f16", "|V2", "<U3", "|S4", "<M8[ns]", "<m8[s]", "<f3", "", "<", "f",
    ] {
        let e = header(&format!(
            "{{'descr': '{d}', 'fortran_order': False, 'shape': (1,), }}"
        ))
        .unwrap_err();
        assert_eq!(e.code(), "ERR_UNSUPPORTED_DTYPE", "{d}: {e}");
    }
    for d in ["|O", "<O8", "O"] {
        let e = header(&format!(
            "{{'descr': '{d}', 'fortran_order': False, 'shape': (1,), }}"
        ))
        .unwrap_err();
        assert_eq!(e.code(), "ERR_UNSAFE_PICKLE", "{d}: {e}");
    }
}

#[test]
fn malformed_headers_are_refused() {
    let bad = [
        "{'descr': '<f4', 'fortran_order': False}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}",
        "{'descr': '<f4', 'descr': '<f4', 'shape': (1,)}",
        "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': [1]}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1.5,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} junk",
        "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (1,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)",
        "['descr', '<f4']",
        "{descr: '<f4'}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': ((((((((((((((((((((1,),),),),),),),),),),),),),),),),),),),)}",
    ];
    for text in bad {
        assert!(header(text).is_err(), "accepted {text}");
    }
    // Not magic, unknown versions, truncated anywhere: errors, never panics.
    assert!(parse_header(b"\x93NUMPZ\x01\x00").is_err());
    assert!(parse_header(b"\x93NUMPY\x04\x00\x10\x00").is_err());
    let full = npy(
        1,
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
        &[0; 12],
    );
    for n in 0..64 {
        assert!(parse_header(&full[..n]).is_err(), "prefix {n}");
    }
    // Header longer than numpy allows.
    let mut big = b"\x93NUMPY\x02\x00".to_vec();
    big.extend_from_slice(&20_000u32.to_le_bytes());
    big.extend(std::iter::repeat_n(b' ', 20_000));
    assert_eq!(
        parse_header(&big).unwrap_err().code(),
        "ERR_HEADER_TOO_LARGE"
    );
}

fn open(bytes: Vec<u8>) -> Result<NumpyFile> {
    NumpyFile::from_memory(Arc::new(Memory::Owned(bytes)))
}

#[test]
fn data_must_fill_the_file_exactly() {
    let h = "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 2), }";
    let f = open(npy(1, h, &[1, 0, 2, 0, 3, 0, 4, 0])).unwrap();
    assert_eq!(f.tensors()[0].name, NPY_ARRAY_NAME);
    assert_eq!(
        f.fetch(NPY_ARRAY_NAME).unwrap().as_slice(),
        &[1, 0, 2, 0, 3, 0, 4, 0]
    );
    assert_eq!(
        open(npy(1, h, &[0; 7])).err().unwrap().code(),
        "ERR_INCOMPLETE_FILE"
    );
    assert_eq!(
        open(npy(1, h, &[0; 9])).err().unwrap().code(),
        "ERR_INCOMPLETE_FILE"
    );
    // A shape whose bytes fit in usize but whose end (after the 64-byte header) wraps past
    // 2^64: too large for any file, not "bytes after the array's data".
    let n = (usize::MAX - 63) / 8;
    let h = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({n},), }}");
    let e = open(npy(1, &h, &[0; 10])).err().unwrap();
    assert_eq!(e.code(), "ERR_SIZE_MISMATCH");
    assert!(e.to_string().contains("are too large for any file"), "{e}");
}

#[test]
fn fortran_order_and_big_endian_come_out_row_major_little_endian() {
    // A 2x3 int16 array [[1, 2, 3], [4, 5, 6]] stored column-major big-endian.
    let data: Vec<u8> = [1i16, 4, 2, 5, 3, 6]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect();
    let f = open(npy(
        1,
        "{'descr': '>i2', 'fortran_order': True, 'shape': (2, 3), }",
        &data,
    ))
    .unwrap();
    let want: Vec<u8> = [1i16, 2, 3, 4, 5, 6]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(f.fetch(NPY_ARRAY_NAME).unwrap().as_slice(), want.as_slice());
    // Fortran order of a vector is C order: a view.
    let f = open(npy(
        1,
        "{'descr': '<i2', 'fortran_order': True, 'shape': (3, 1), }",
        &[1, 0, 2, 0, 3, 0],
    ))
    .unwrap();
    assert!(matches!(
        f.fetch(NPY_ARRAY_NAME).unwrap(),
        TensorBytes::Shared { .. }
    ));
}

/// An `.npz` of stored (uncompressed) members `NAME.npy`, laid out as `np.savez` writes it:
/// local headers and data, the central directory, the end record.
pub(crate) fn npz(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let (mut out, mut central) = (Vec::new(), Vec::new());
    for (name, data) in members {
        let name = format!("{name}.npy");
        let len = data.len() as u32;
        let sizes = [crate::format::zip::crc32(data), len, len].map(u32::to_le_bytes);
        let name_len = (name.len() as u16).to_le_bytes();
        let offset = (out.len() as u32).to_le_bytes();
        let local: &[&[u8]] = &[
            b"PK\x03\x04\x14\0\0\0\0\0\0\0\0\0",
            &sizes.concat(),
            &name_len,
            &[0; 2],
            name.as_bytes(),
            data,
        ];
        out.extend(local.concat());
        let entry: &[&[u8]] = &[
            b"PK\x01\x02\x14\x03\x14\0\0\0\0\0\0\0\0\0",
            &sizes.concat(),
            &name_len,
            &[0; 12],
            &offset,
            name.as_bytes(),
        ];
        central.extend(entry.concat());
    }
    let count = (members.len() as u16).to_le_bytes();
    let end: &[&[u8]] = &[
        b"PK\x05\x06\0\0\0\0",
        &count,
        &count,
        &(central.len() as u32).to_le_bytes(),
        &(out.len() as u32).to_le_bytes(),
        &[0; 2],
    ];
    out.extend(central);
    out.extend(end.concat());
    out
}

#[test]
fn npz_array_names_are_printable_text() {
    let array = || {
        npy(
            1,
            "{'descr': '<i2', 'fortran_order': False, 'shape': (1,), }",
            &[7, 0],
        )
    };
    let f = open(npz(&[("a b", array()), ("é", array())])).unwrap();
    assert_eq!(
        f.tensors()
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["a b", "é"]
    );
    // The archive's member names are refused first (the zip reader's rule)...
    for (name, shown, why) in [
        ("a\tb", "a\\tb", "it holds a control character"),
        ("\u{1b}[2J", "\\x1b[2J", "it holds a control character"),
        ("a\u{7f}", "a\\x7f", "it holds a control character"),
        (" a", " a", "it starts or ends with whitespace"),
        ("a\n", "a\\n", "it holds a control character"),
    ] {
        let e = open(npz(&[("ok", array()), (name, array())]))
            .err()
            .unwrap();
        assert_eq!(e.code(), "ERR_UNSAFE_PATH", "{name:?}");
        assert_eq!(
            e.detail(),
            format!("zip: member name '{shown}.npy' is refused: {why}")
        );
    }
    // ... and an array's name, the member's less `.npy`, by the same rule.
    let e = open(npz(&[("ok", array()), ("a ", array())]))
        .err()
        .unwrap();
    assert_eq!(e.code(), "ERR_INVALID_HEADER");
    assert_eq!(
        e.detail(),
        "npy: the .npz array name 'a ' is refused: it starts or ends with whitespace"
    );
}
