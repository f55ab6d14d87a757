use super::read::integer_to_f64_round_to_odd;
use super::*;
use crate::cast;
#[cfg(feature = "fs")]
use crate::fsutil::WriteOptions;

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}
fn u16_bytes(values: &[u16]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn tensor<'a>(weights: &'a MlxWeights, name: &str) -> &'a TensorView<'static> {
    weights
        .tensors
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no tensor {name}"))
}

fn err(json: &str) -> CoreError {
    parse_mlx(json.as_bytes()).expect_err(json)
}

/// Assert ERR_INVALID_MLX naming `tensor`, with `fragment` in the message.
fn assert_invalid(json: &str, tensor: Option<&str>, fragment: &str) {
    let e = err(json);
    assert_eq!(e.code(), "ERR_INVALID_MLX", "{json}: {e}");
    assert_eq!(e.tensor(), tensor, "{json}: {e}");
    assert!(e.detail().contains(fragment), "{json}: {e}");
}

const TYPED: &str = r#"{"version": "0.1", "weights": {
    "f": {"shape": [3], "dtype": DF32, "data": [1.5, -2, 0.1]},
    "h": {"shape": [1, 2], "dtype": DF16, "data": [0.1, -65504]},
    "b": {"shape": [2], "dtype": DBF16, "data": [0.1, 3]},
    "i": {"shape": [2], "dtype": DI32, "data": [-2147483648, 2147483647]},
    "u": {"shape": [], "dtype": DU32, "data": [4294967295]}
}}"#;

fn check_typed(weights: &MlxWeights) {
    let names: Vec<&str> = weights.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["f", "h", "b", "i", "u"], "file order");
    let f = tensor(weights, "f");
    assert_eq!((f.dtype, f.shape.clone()), (DType::F32, vec![3]));
    assert_eq!(f.data.as_ref(), f32_bytes(&[1.5, -2.0, 0.1]));
    let h = tensor(weights, "h");
    assert_eq!((h.dtype, h.shape.clone()), (DType::F16, vec![1, 2]));
    assert_eq!(h.data.as_ref(), u16_bytes(&[0x2E66, 0xFBFF]));
    let b = tensor(weights, "b");
    assert_eq!(b.dtype, DType::BF16);
    assert_eq!(b.data.as_ref(), u16_bytes(&[0x3DCD, 0x4040]));
    let i = tensor(weights, "i");
    assert_eq!(i.dtype, DType::I32);
    let ints: Vec<u8> = [i32::MIN, i32::MAX]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(i.data.as_ref(), ints);
    let u = tensor(weights, "u");
    assert_eq!((u.dtype, u.shape.clone()), (DType::U32, vec![]));
    assert_eq!(u.data.as_ref(), u32::MAX.to_le_bytes());
}

#[test]
fn dtype_names_parse_to_exact_bytes() {
    let json = TYPED
        .replace("DF32", "\"float32\"")
        .replace("DF16", "\"float16\"")
        .replace("DBF16", "\"bfloat16\"")
        .replace("DI32", "\"int32\"")
        .replace("DU32", "\"uint32\"");
    let weights = parse_mlx(json.as_bytes()).unwrap();
    assert_eq!(weights.version.as_deref(), Some("0.1"));
    assert_eq!(weights.metadata, None);
    check_typed(&weights);
}

#[test]
fn dtype_codes_parse_to_exact_bytes() {
    let json = TYPED
        .replace("DF32", "0")
        .replace("DF16", "2")
        .replace("DBF16", "3")
        .replace("DI32", "1")
        .replace("DU32", "4");
    check_typed(&parse_mlx(json.as_bytes()).unwrap());
}

#[test]
fn half_precision_rounds_to_nearest_even_from_the_decimal() {
    let json = r#"{"weights": {
        "h": {"shape": [5], "dtype": "float16",
              "data": [1.00048828125, 1.00146484375, 65519.99, 65520, 5.960464477539063e-8]},
        "b": {"shape": [4], "dtype": "bfloat16",
              "data": [1.00390625, 1.0039062500000009, 1157425104234217473, -1157425104234217473]}
    }}"#;
    let weights = parse_mlx(json.as_bytes()).unwrap();
    // 1 + 2^-11 ties to even (1.0); 1 + 3·2^-11 ties to even upward; 65520 overflows.
    assert_eq!(
        tensor(&weights, "h").data.as_ref(),
        u16_bytes(&[0x3C00, 0x3C02, 0x7BFF, 0x7C00, 0x0001])
    );
    // 1 + 2^-8 ties to 1.0, but a hair above it (only visible in f64) rounds up. The
    // integer 2^60 + 2^52 + 1 lies just above a bf16 tie: a nearest-even f64 conversion
    // would land on the tie and round down.
    assert_eq!(
        tensor(&weights, "b").data.as_ref(),
        u16_bytes(&[0x3F80, 0x3F81, 0x5D81, 0xDD81])
    );
}

#[test]
fn float32_rounds_once_from_the_decimal() {
    // 16777217 = 2^24 + 1 ties to even (2^24); 16777219 ties upward.
    let json = r#"{"weights": {"f": {"shape": [3], "dtype": "float32",
        "data": [16777217, 16777219, 1e-46]}}}"#;
    let weights = parse_mlx(json.as_bytes()).unwrap();
    assert_eq!(
        tensor(&weights, "f").data.as_ref(),
        f32_bytes(&[16777216.0, 16777220.0, 0.0])
    );
}

#[test]
fn field_order_does_not_matter() {
    let orders = [
        r#"{"shape": [2, 2], "dtype": "DT", "data": [0.1, 2, -3.5, 1e-7]}"#,
        r#"{"data": [0.1, 2, -3.5, 1e-7], "dtype": "DT", "shape": [2, 2]}"#,
        r#"{"dtype": "DT", "data": [0.1, 2, -3.5, 1e-7], "extra": {"x": [1]}, "shape": [2, 2]}"#,
        r#"{"shape": [2, 2], "data": [0.1, 2, -3.5, 1e-7], "dtype": "DT"}"#,
    ];
    for dtype in ["float32", "float16", "bfloat16"] {
        let mut results = orders.iter().map(|entry| {
            let json = format!(r#"{{"weights": {{"w": {}}}}}"#, entry.replace("DT", dtype));
            parse_mlx(json.as_bytes()).unwrap().tensors
        });
        let first = results.next().unwrap();
        let expected = cast::encode_f64(&[0.1, 2.0, -3.5, 1e-7], first[0].dtype).unwrap();
        assert_eq!(first[0].data.as_ref(), expected, "{dtype}");
        assert_eq!(first[0].shape, vec![2, 2]);
        for other in results {
            assert_eq!(other, first, "{dtype}");
        }
    }
    // Integers buffered before their dtype are still range-checked.
    assert_invalid(
        r#"{"weights": {"w": {"data": [1, 2.5], "shape": [2], "dtype": "int32"}}}"#,
        Some("w"),
        "element 1 (2.5)",
    );
}

#[test]
fn non_finite_strings_and_metadata() {
    let json = r#"{"version": 2, "config": {"deep": [[1, null], {"a": true}]},
        "metadata": {"format": "mlx", "layers": 12, "ok": true, "skip": null, "nested": {"a": 1}},
        "weights": {"w": {"shape": [3], "dtype": "float32", "data": ["NaN", "Infinity", "-Infinity"]}}}"#;
    let weights = parse_mlx(json.as_bytes()).unwrap();
    assert_eq!(weights.version.as_deref(), Some("2"));
    let metadata = weights.metadata.as_ref().unwrap();
    let entries: Vec<(&str, &str)> = metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        entries,
        [("format", "mlx"), ("layers", "12"), ("ok", "true")]
    );
    let w = tensor(&weights, "w");
    assert_eq!(
        w.data.as_ref(),
        f32_bytes(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY])
    );
    // Version is optional; a non-object metadata is skipped, not refused.
    let weights = parse_mlx(br#"{"metadata": [1, 2], "weights": {}}"#).unwrap();
    assert_eq!((weights.version, weights.metadata), (None, None));
    assert!(weights.tensors.is_empty());
}

#[test]
fn malformed_entries_name_the_tensor() {
    let entry = |body: &str| {
        format!(
            r#"{{"weights": {{"ok": {{"shape": [1], "dtype": "float32", "data": [1]}}, "bad": {body}}}}}"#
        )
    };
    let cases: &[(&str, &str)] = &[
        (
            r#"{"shape": [2, 2], "dtype": "float32", "data": [1, 2, 3]}"#,
            "holds 4 elements but \"data\" has 3",
        ),
        (
            r#"{"shape": [2], "dtype": "float32", "data": [1, 2, 3]}"#,
            "more numbers than the 2 elements",
        ),
        (
            r#"{"shape": [2], "dtype": "float32", "data": [1, null]}"#,
            "invalid type: null",
        ),
        (
            r#"{"shape": [2], "dtype": "float32", "data": [1, "1.5"]}"#,
            "invalid value: string \"1.5\"",
        ),
        (
            r#"{"shape": [2], "dtype": "float32", "data": [1, [2]]}"#,
            "invalid type: sequence",
        ),
        (
            r#"{"shape": [2], "dtype": "float32", "data": [true, 2]}"#,
            "invalid type: boolean",
        ),
        (
            r#"{"shape": [2], "dtype": "float32", "data": {"0": 1}}"#,
            "invalid type: map",
        ),
        (
            r#"{"shape": [2], "dtype": "float32", "data": 1.5}"#,
            "invalid type: floating point",
        ),
        (
            r#"{"shape": [-2], "dtype": "float32", "data": [1, 2]}"#,
            "shape entry -2 is negative",
        ),
        (
            r#"{"shape": [1.5], "dtype": "float32", "data": [1]}"#,
            "shape entry 1.5 is not a non-negative integer",
        ),
        (
            r#"{"shape": ["2"], "dtype": "float32", "data": [1, 2]}"#,
            "invalid type: string",
        ),
        (
            r#"{"shape": [null], "dtype": "float32", "data": [1]}"#,
            "invalid type: null",
        ),
        (
            r#"{"shape": 2, "dtype": "float32", "data": [1, 2]}"#,
            "invalid type: integer",
        ),
        (
            r#"{"shape": [4294967296, 4294967296, 4294967296], "dtype": "float32", "data": []}"#,
            "more elements than fit",
        ),
        (
            r#"{"shape": [1], "dtype": "float64", "data": [1]}"#,
            "unknown dtype \"float64\"",
        ),
        (
            r#"{"shape": [1], "dtype": 7, "data": [1]}"#,
            "unknown dtype code 7",
        ),
        (
            r#"{"shape": [1], "dtype": -1, "data": [1]}"#,
            "unknown dtype code -1",
        ),
        (
            r#"{"shape": [1], "dtype": null, "data": [1]}"#,
            "invalid type: null",
        ),
        (r#"{"shape": [1], "data": [1]}"#, "missing field `dtype`"),
        (
            r#"{"dtype": "float32", "data": [1]}"#,
            "missing field `shape`",
        ),
        (
            r#"{"shape": [1], "dtype": "float32"}"#,
            "missing field \"data\"",
        ),
        (
            r#"{"shape": [1], "shape": [1], "dtype": "float32", "data": [1]}"#,
            "duplicate key \"shape\"",
        ),
        (
            r#"{"shape": [1], "dtype": "int32", "data": [2147483648]}"#,
            "element 0 (2147483648) is not an integer in the range of int32",
        ),
        (
            r#"{"shape": [2], "dtype": "int32", "data": [1, 1.5]}"#,
            "element 1 (1.5)",
        ),
        (
            r#"{"shape": [1], "dtype": "uint32", "data": [-1]}"#,
            "range of uint32",
        ),
        (
            r#"{"shape": [1], "dtype": "int32", "data": ["NaN"]}"#,
            "element 0 (NaN)",
        ),
        (
            r#"{"shape": [1], "dtype": "float32", "data": [1e999]}"#,
            "number out of range",
        ),
        (r#"[1, 2]"#, "invalid type: sequence"),
        (r#""w""#, "invalid type: string"),
    ];
    for (body, fragment) in cases {
        assert_invalid(&entry(body), Some("bad"), fragment);
    }
    assert_invalid(
        r#"{"weights": {"w": {"shape": [1], "dtype": "float32", "data": [1]}, "w": {"shape": [1], "dtype": "float32", "data": [1]}}}"#,
        Some("w"),
        "duplicate tensor name",
    );
    // A dataless entry followed by a complete one: the dataless one is named.
    assert_invalid(
        r#"{"weights": {"a": {"shape": [1], "dtype": "float32"}, "b": {"shape": [1], "dtype": "float32", "data": [1]}}}"#,
        Some("a"),
        "missing field \"data\"",
    );
}

#[test]
fn malformed_documents() {
    let cases: &[(&str, &str)] = &[
        ("", "not valid JSON: EOF"),
        ("<html>", "not valid JSON: expected value"),
        ("[1, 2]", "expected a JSON object with a \"weights\" object"),
        ("42", "invalid type: integer"),
        (r#"{"weights": [1]}"#, "invalid type: sequence"),
        (
            r#"{"weights": {}, "version": true}"#,
            "invalid type: boolean",
        ),
        (
            r#"{"weights": {}, "weights": {}}"#,
            "duplicate key \"weights\"",
        ),
        (r#"{"weights": {}} trailing"#, "trailing characters"),
        (
            r#"{"weights": {"w": {"shape": [1], "dtype": "float32", "data": [1]}"#,
            "EOF while parsing",
        ),
    ];
    for (json, fragment) in cases {
        assert_invalid(json, None, fragment);
    }
    // Ignored keys are skipped iteratively by serde_json: deep nesting there is neither
    // refused nor a stack overflow.
    let deep = format!(
        r#"{{"config": {}1{}, "weights": {{}}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(parse_mlx(deep.as_bytes()).unwrap().tensors.is_empty());
}

#[test]
fn metadata_only_files_say_where_the_weights_are() {
    let e = err(
        r#"{"version": "1", "weights": {"a": {"shape": [2], "dtype": "float16"}, "b": {"dtype": 0, "shape": []}}}"#,
    );
    assert_eq!(e.code(), "ERR_INVALID_MLX");
    assert_eq!(e.tensor(), None);
    assert!(e.detail().contains("only metadata"), "{e}");
    assert!(e.detail().contains("stored elsewhere"), "{e}");
    assert!(e.detail().contains(".safetensors"), "{e}");
    let e = err(r#"{"version": "1", "metadata": {"a": "b"}}"#);
    assert_eq!(e.code(), "ERR_INVALID_MLX");
    assert!(e.detail().contains("no \"weights\" object"), "{e}");
    assert!(e.detail().contains("stored elsewhere"), "{e}");
    // A complete tensor followed by a dataless one is a broken file instead.
    assert_invalid(
        r#"{"weights": {"a": {"shape": [1], "dtype": "float32", "data": [1]}, "b": {"shape": [1], "dtype": "float32"}}}"#,
        Some("b"),
        "missing field \"data\"",
    );
}

fn round_trip(tensors: &[TensorView<'_>]) -> MlxWeights {
    let mut json = Vec::new();
    write_mlx(&mut json, tensors, None).unwrap();
    let weights = parse_mlx(&json).unwrap();
    assert_eq!(weights.version.as_deref(), Some(MLX_WRITE_VERSION));
    assert_eq!(weights.tensors.len(), tensors.len());
    weights
}

/// Canonical quiet NaNs come back bit-exact; other NaNs come back as NaN.
fn assert_same_halves(dtype: DType, bits: &[u16], back: &[u8], canonical_nan: u16) {
    let is_nan = |b: u16| match dtype {
        DType::F16 => half::f16::from_bits(b).is_nan(),
        _ => half::bf16::from_bits(b).is_nan(),
    };
    for (&b, got) in bits.iter().zip(back.chunks_exact(2)) {
        let got = u16::from_le_bytes([got[0], got[1]]);
        if is_nan(b) {
            assert_eq!(got, canonical_nan, "{dtype} NaN {b:#06x}");
        } else {
            assert_eq!(got, b, "{dtype} {b:#06x}");
        }
    }
}

#[test]
fn write_read_round_trip_is_bit_exact() {
    // float32: specials, subnormals, the extremes, and pseudo-random bit patterns.
    let mut bits: Vec<u32> = vec![
        0,
        0x8000_0000,
        1,
        0x8000_0001,
        0x007F_FFFF,
        0x0080_0000,
        0x7F7F_FFFF,
        0xFF7F_FFFF,
        0x7F80_0000,
        0xFF80_0000,
        0x7FC0_0000,
        0x3DCC_CCCD,
        0x4B80_0000,
        0x3380_0000,
    ];
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..200_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bits.push(state as u32);
    }
    let f32_data: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
    let all_halves: Vec<u16> = (0..=u16::MAX).collect();
    let half_data = u16_bytes(&all_halves);
    let ints: Vec<u8> = [0, -1, 1, i32::MIN, i32::MAX, 123456789]
        .iter()
        .flat_map(|v: &i32| v.to_le_bytes())
        .collect();
    let uints: Vec<u8> = [0, 1, u32::MAX, 1 << 31]
        .iter()
        .flat_map(|v: &u32| v.to_le_bytes())
        .collect();
    let tensors = vec![
        TensorView::new("f32", DType::F32, vec![bits.len()], f32_data).unwrap(),
        TensorView::new("f16", DType::F16, vec![256, 256], half_data.clone()).unwrap(),
        TensorView::new("bf16", DType::BF16, vec![65536], half_data).unwrap(),
        TensorView::new("i32", DType::I32, vec![2, 3], ints.clone()).unwrap(),
        TensorView::new("u32", DType::U32, vec![4], uints.clone()).unwrap(),
        TensorView::new("scalar", DType::F32, vec![], f32_bytes(&[-0.0])).unwrap(),
        TensorView::new("empty", DType::F16, vec![0, 3], vec![]).unwrap(),
        TensorView::new("na\"me\\ \u{e9}\n", DType::F32, vec![1], f32_bytes(&[1.0])).unwrap(),
    ];
    let weights = round_trip(&tensors);
    for (written, read) in tensors.iter().zip(&weights.tensors) {
        assert_eq!(
            (&read.name, read.dtype, &read.shape),
            (&written.name, written.dtype, &written.shape)
        );
    }
    let f32_back = &weights.tensors[0].data;
    for (&b, got) in bits.iter().zip(f32_back.chunks_exact(4)) {
        let got = u32::from_le_bytes([got[0], got[1], got[2], got[3]]);
        if f32::from_bits(b).is_nan() {
            assert_eq!(got, 0x7FC0_0000, "NaN {b:#010x}");
        } else {
            assert_eq!(got, b, "{b:#010x} ({})", f32::from_bits(b));
        }
    }
    assert_same_halves(DType::F16, &all_halves, &weights.tensors[1].data, 0x7E00);
    assert_same_halves(DType::BF16, &all_halves, &weights.tensors[2].data, 0x7FC0);
    assert_eq!(weights.tensors[3].data.as_ref(), ints);
    assert_eq!(weights.tensors[4].data.as_ref(), uints);
    assert_eq!(weights.tensors[5].data.as_ref(), (-0.0f32).to_le_bytes());
    assert!(weights.tensors[6].data.is_empty());
    assert_eq!(weights.tensors[7].data.as_ref(), f32_bytes(&[1.0]));
}

#[test]
fn writer_output_is_compact_and_readable() {
    let tensors = [TensorView::from_f32(
        "w",
        vec![2, 3],
        &[0.1, -0.0, 1.0, 1e-7, 3.4028235e38, f32::NAN],
    )
    .unwrap()];
    let metadata = BTreeMap::from([("format".to_string(), "mlx".to_string())]);
    let mut json = Vec::new();
    write_mlx(&mut json, &tensors, Some(&metadata)).unwrap();
    assert_eq!(
        String::from_utf8(json.clone()).unwrap(),
        "{\"version\":\"1.0\",\"metadata\":{\"format\":\"mlx\"},\"weights\":{\n\
         \"w\":{\"dtype\":\"float32\",\"shape\":[2,3],\"data\":[0.1,-0.0,1,1e-7,3.4028235e38,\"NaN\"]}\n}}\n"
    );
    assert_eq!(parse_mlx(&json).unwrap().metadata, Some(metadata));
}

#[test]
fn writer_refuses_what_the_format_cannot_hold() {
    let f64_tensor =
        TensorView::new("d", DType::F64, vec![1], 1.0f64.to_le_bytes().to_vec()).unwrap();
    let ok = TensorView::from_f32("ok", vec![1], &[1.0]).unwrap();
    let mut out = Vec::new();
    let e = write_mlx(&mut out, &[ok.clone(), f64_tensor], None).unwrap_err();
    assert_eq!((e.code(), e.tensor()), ("ERR_UNSUPPORTED_DTYPE", Some("d")));
    assert!(out.is_empty(), "nothing written before the check");
    let e = write_mlx(&mut out, &[ok.clone(), ok.clone()], None).unwrap_err();
    assert_eq!((e.code(), e.tensor()), ("ERR_INVALID_ARGUMENT", Some("ok")));
    let mut bad = ok;
    bad.shape = vec![2];
    let e = write_mlx(&mut out, &[bad], None).unwrap_err();
    assert_eq!((e.code(), e.tensor()), ("ERR_INVALID_ARGUMENT", Some("ok")));
    assert!(out.is_empty());
}

#[cfg(feature = "fs")]
#[test]
fn files_round_trip_with_progress_limits_and_paths() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weights.mlx");
    let tensors = [TensorView::from_f32("w", vec![2], &[0.5, -1.25]).unwrap()];
    let mut written = Vec::new();
    let mut report = |done, total| written.push((done, total));
    save_mlx(
        &path,
        &tensors,
        None,
        WriteOptions::with_progress(&mut report),
    )
    .unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    assert_eq!(written, [(size, size)]);
    let mut reports = Vec::new();
    let weights =
        read_mlx_with_progress(&path, &mut |done, total| reports.push((done, total))).unwrap();
    assert_eq!(weights.tensors, tensors.to_vec());
    assert_eq!(reports.first(), Some(&(0, size)));
    assert_eq!(reports.last(), Some(&(size, size)));

    let options = MlxReadOptions {
        max_file_bytes: size - 1,
    };
    let e = read_mlx_with_options(&path, &options, &mut |_, _| {}).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_MLX");
    assert!(e.detail().contains("larger than"), "{e}");
    assert_eq!(e.path(), Some(path.display().to_string().as_str()));

    std::fs::write(
        &path,
        br#"{"weights": {"t": {"shape": [1], "dtype": "float32", "data": [null]}}}"#,
    )
    .unwrap();
    let e = read_mlx(&path).unwrap_err();
    assert_eq!((e.code(), e.tensor()), ("ERR_INVALID_MLX", Some("t")));
    assert_eq!(e.path(), Some(path.display().to_string().as_str()));
    assert!(e.to_string().contains("line 1 column"), "{e}");

    let e = read_mlx(&dir.path().join("missing.mlx")).unwrap_err();
    assert_eq!(e.code(), "ERR_NOT_FOUND");
    // A directory is refused before any read, as SafeTensorsFile.open refuses one.
    let e = read_mlx(dir.path()).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT", "{e}");
    assert!(e.to_string().contains("is a directory"), "{e}");

    // save_mlx refuses unsupported tensors without leaving a file behind.
    let f64_tensor = TensorView::new("d", DType::F64, vec![1], vec![0; 8]).unwrap();
    let out = dir.path().join("other.mlx");
    let e = save_mlx(&out, &[f64_tensor], None, WriteOptions::default()).unwrap_err();
    assert_eq!(e.code(), "ERR_UNSUPPORTED_DTYPE");
    assert!(!out.exists());
}

#[test]
fn round_to_odd_integers() {
    assert_eq!(integer_to_f64_round_to_odd(0), 0.0);
    assert_eq!(integer_to_f64_round_to_odd(1 << 53), 9007199254740992.0);
    // 2^53 + 1 is not representable: the sticky bit makes it 2^53 + 2 (odd significand).
    assert_eq!(
        integer_to_f64_round_to_odd((1 << 53) + 1),
        9007199254740994.0
    );
    assert_eq!(
        integer_to_f64_round_to_odd((1 << 53) + 2),
        9007199254740994.0
    );
    assert_eq!(
        integer_to_f64_round_to_odd(u64::MAX),
        18446744073709549568.0
    );
}
