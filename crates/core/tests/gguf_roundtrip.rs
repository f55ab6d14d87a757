//! GGUF writer → reader round trips, the exact header layout, and writer argument checks.

use half::f16;
use stcore::format::gguf::{
    self, choose_type, standard_metadata, write_gguf, write_gguf_file, GgmlType, GgufArray,
    GgufFile, GgufTensorSpec, GgufValue, Preset,
};
use stcore::fsutil::WriteOptions;
use stcore::{DType, TensorView};

fn f32_of(view: &TensorView<'_>) -> Vec<f32> {
    assert_eq!(view.dtype, DType::F32);
    view.data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    // A cheap deterministic spread of magnitudes and signs.
    (0..n)
        .map(|i| {
            let k = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8;
            (k % 20_001) as f32 / 1000.0 - 10.0
        })
        .collect()
}

fn write(
    metadata: &[(String, GgufValue)],
    specs: &[GgufTensorSpec],
    sources: &[TensorView<'static>],
) -> stcore::Result<Vec<u8>> {
    let mut out = Vec::new();
    let n = write_gguf(&mut out, metadata, specs, |i, _| Ok(sources[i].clone()))?;
    assert_eq!(n, out.len() as u64);
    Ok(out)
}

#[test]
fn round_trip_of_every_written_type() {
    let mat = values(3 * 5, 1);
    let vec7 = [1.0f32, 0.1, 65504.0, 1e-8, -2.5, 3.140_625_2, 65519.0];
    let q8 = values(4 * 64, 2);
    let q4 = values(2 * 96, 3);
    let bf16_src: Vec<f32> = values(64, 4)
        .iter()
        .map(|&v| half::bf16::from_f32(v).to_f32())
        .collect();
    let bf16_bytes: Vec<u8> = bf16_src
        .iter()
        .flat_map(|&v| half::bf16::from_f32(v).to_bits().to_le_bytes())
        .collect();
    let f16_bytes: Vec<u8> = [0x3C00u16, 0x8001, 0x7BFF]
        .iter()
        .flat_map(|b| b.to_le_bytes())
        .collect();
    let sources = vec![
        TensorView::from_f32("mat", vec![3, 5], &mat).unwrap(),
        TensorView::from_f32("vec", vec![7], &vec7).unwrap(),
        TensorView::from_f32("q8", vec![4, 64], &q8).unwrap(),
        TensorView::from_f32("q4", vec![2, 96], &q4).unwrap(),
        TensorView::new("bf", DType::BF16, vec![2, 32], bf16_bytes).unwrap(),
        TensorView::new("half", DType::F16, vec![3], f16_bytes.clone()).unwrap(),
        TensorView::from_f32("scalar", vec![], &[42.0]).unwrap(),
    ];
    let specs = vec![
        GgufTensorSpec::new("mat", vec![3, 5], GgmlType::F32),
        GgufTensorSpec::new("vec", vec![7], GgmlType::F16),
        GgufTensorSpec::new("q8", vec![4, 64], GgmlType::Q8_0),
        GgufTensorSpec::new("q4", vec![2, 96], GgmlType::Q4_0),
        GgufTensorSpec::new("bf", vec![2, 32], GgmlType::Q8_0),
        GgufTensorSpec::new("half", vec![3], GgmlType::F16),
        GgufTensorSpec::new("scalar", vec![], GgmlType::F32),
    ];
    let mut metadata = standard_metadata("llama", "round trip", &specs);
    metadata.extend([
        ("t.u8".to_string(), GgufValue::U8(200)),
        ("t.i8".to_string(), GgufValue::I8(-100)),
        ("t.u16".to_string(), GgufValue::U16(60000)),
        ("t.i16".to_string(), GgufValue::I16(-30000)),
        ("t.i32".to_string(), GgufValue::I32(-5)),
        ("t.f32".to_string(), GgufValue::F32(0.1)),
        ("t.bool".to_string(), GgufValue::Bool(true)),
        ("t.u64".to_string(), GgufValue::U64(u64::MAX)),
        ("t.i64".to_string(), GgufValue::I64(i64::MIN)),
        ("t.f64".to_string(), GgufValue::F64(-1e300)),
        (
            "t.strs".to_string(),
            GgufValue::from(vec!["a".to_string(), String::new(), "ü".to_string()]),
        ),
        ("t.u32s".to_string(), GgufValue::from(vec![1u32, 2, 3])),
        (
            "t.empty".to_string(),
            GgufValue::Array(GgufArray::F32(vec![])),
        ),
        ("t.bools".to_string(), GgufValue::from(vec![true, false])),
    ]);
    let bytes = write(&metadata, &specs, &sources).unwrap();
    assert_eq!(bytes.len() % 32, 0, "file padded to the alignment");

    let file = GgufFile::parse(&bytes).unwrap();
    assert_eq!(file.version(), 3);
    assert_eq!(file.alignment(), 32);
    assert_eq!(file.data_offset() % 32, 0);
    assert_eq!(file.metadata(), &metadata[..]);
    assert_eq!(file.architecture(), Some("llama"));
    assert_eq!(
        file.get("general.quantization_version"),
        Some(&GgufValue::U32(2))
    );

    // Offsets: in order, aligned, each right after the previous tensor's padded data.
    let mut expected_offset = 0u64;
    for (info, spec) in file.tensors().iter().zip(&specs) {
        assert_eq!(info.name, spec.name);
        assert_eq!(info.ggml_type, spec.ggml_type);
        assert_eq!(info.offset, expected_offset);
        assert_eq!(info.byte_len, spec.byte_len().unwrap());
        expected_offset = (info.offset + info.byte_len as u64).next_multiple_of(32);
    }
    assert_eq!(
        file.data_offset() as u64 + expected_offset,
        bytes.len() as u64
    );

    let t = file.tensor("mat").unwrap();
    assert_eq!(t.shape, vec![3, 5]);
    assert!(matches!(t.data, std::borrow::Cow::Borrowed(_)));
    assert_eq!(f32_of(&t), mat);

    let t = file.tensor("vec").unwrap();
    let rne: Vec<f32> = vec7.iter().map(|&v| f16::from_f32(v).to_f32()).collect();
    assert_eq!(f32_of(&t), rne);
    assert_eq!(
        f32_of(&t)[6],
        65504.0,
        "65519 still rounds down to f16's largest"
    );
    assert_eq!(
        file.raw("half").unwrap(),
        &f16_bytes[..],
        "F16 source copied as is"
    );

    for (name, source, quant) in [("q8", &q8, GgmlType::Q8_0), ("q4", &q4, GgmlType::Q4_0)] {
        let mut want = vec![0u8; file.raw(name).unwrap().len()];
        if quant == GgmlType::Q8_0 {
            gguf::quantize_q8_0_ref(source, &mut want).unwrap();
        } else {
            gguf::quantize_q4_0_ref(source, &mut want).unwrap();
        }
        assert_eq!(
            file.raw(name).unwrap(),
            &want[..],
            "{name} bytes are the reference's"
        );
        let got = f32_of(&file.tensor(name).unwrap());
        for (block, (xs, ys)) in source.chunks(32).zip(got.chunks(32)).enumerate() {
            let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
            let d = if quant == GgmlType::Q8_0 {
                amax / 127.0
            } else {
                amax / 8.0
            };
            let d16 = f16::from_f32(d).to_f32();
            let bound = if quant == GgmlType::Q8_0 {
                d / 2.0 + 127.0 * (d - d16).abs()
            } else {
                d + 8.0 * (d - d16).abs()
            } + amax * 1e-6;
            for (x, y) in xs.iter().zip(ys) {
                assert!((x - y).abs() <= bound, "{name} block {block}: {x} vs {y}");
            }
        }
    }

    // BF16 source quantized from its exact f32 values.
    let mut want = vec![0u8; 68];
    gguf::quantize_q8_0_ref(&bf16_src, &mut want).unwrap();
    assert_eq!(file.raw("bf").unwrap(), &want[..]);

    let t = file.tensor("scalar").unwrap();
    assert_eq!(t.shape, vec![1], "a scalar is stored as one dimension of 1");
    assert_eq!(f32_of(&t), vec![42.0]);

    assert_eq!(file.tensor("nope").unwrap_err().code(), "ERR_NOT_FOUND");
}

#[test]
fn header_bytes_are_exactly_the_spec() {
    let specs = [GgufTensorSpec::new("w", vec![2, 3], GgmlType::F32)];
    let metadata = vec![("general.architecture".to_string(), GgufValue::from("x"))];
    let source = TensorView::from_f32("w", vec![2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let bytes = write(&metadata, &specs, &[source]).unwrap();

    let mut want = Vec::new();
    want.extend_from_slice(b"GGUF");
    want.extend_from_slice(&3u32.to_le_bytes());
    want.extend_from_slice(&1u64.to_le_bytes()); // tensors
    want.extend_from_slice(&1u64.to_le_bytes()); // kv
    want.extend_from_slice(&20u64.to_le_bytes());
    want.extend_from_slice(b"general.architecture");
    want.extend_from_slice(&8u32.to_le_bytes()); // STRING
    want.extend_from_slice(&1u64.to_le_bytes());
    want.extend_from_slice(b"x");
    want.extend_from_slice(&1u64.to_le_bytes());
    want.extend_from_slice(b"w");
    want.extend_from_slice(&2u32.to_le_bytes()); // n_dims
    want.extend_from_slice(&3u64.to_le_bytes()); // ne[0]: innermost (cols)
    want.extend_from_slice(&2u64.to_le_bytes()); // ne[1]: rows
    want.extend_from_slice(&0u32.to_le_bytes()); // F32
    want.extend_from_slice(&0u64.to_le_bytes()); // offset
    want.resize(want.len().next_multiple_of(32), 0);
    for v in 1..=6 {
        want.extend_from_slice(&(v as f32).to_le_bytes());
    }
    want.resize(want.len().next_multiple_of(32), 0);
    assert_eq!(bytes, want);
}

#[test]
fn integers_are_stored_as_integers_and_f16_overflow_is_refused() {
    // 16777217 is not an f32: stored as I32 it stays exact (it became 16777216 as F32).
    let ints: Vec<u8> = [-3i32, 7, 0, 16_777_217]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let longs: Vec<u8> = [i64::MIN, 5].iter().flat_map(|v| v.to_le_bytes()).collect();
    let wide: Vec<u8> = [1.0f64 + 1e-12, 2.0, 65519.0, -1e-9]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let sources = [
        TensorView::new("i", DType::I32, vec![4], ints.clone()).unwrap(),
        TensorView::new("l", DType::I64, vec![1, 2], longs.clone()).unwrap(),
        TensorView::new("d", DType::F64, vec![4], wide).unwrap(),
    ];
    let specs = [
        GgufTensorSpec::new("i", vec![4], GgmlType::I32),
        GgufTensorSpec::new("l", vec![1, 2], GgmlType::I64),
        GgufTensorSpec::new("d", vec![4], GgmlType::F16),
    ];
    let metadata = standard_metadata("x", "x", &specs);
    let bytes = write(&metadata, &specs, &sources).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    let i = file.tensor("i").unwrap();
    assert_eq!((i.dtype, i.data.as_ref()), (DType::I32, &ints[..]));
    let l = file.tensor("l").unwrap();
    assert_eq!((l.dtype, l.data.as_ref()), (DType::I64, &longs[..]));
    let d = f32_of(&file.tensor("d").unwrap());
    assert_eq!(&d[..3], &[1.0, 2.0, 65504.0]);
    assert_eq!(d[3], f16::from_f64(-1e-9).to_f32());

    // An integer tensor is never cast to a float type or quantized.
    for ty in [GgmlType::F32, GgmlType::F16, GgmlType::Q8_0] {
        let n = if ty.is_quantized() { 32 } else { 4 };
        let src = TensorView::new("i", DType::I32, vec![n], vec![0u8; 4 * n]).unwrap();
        let spec = [GgufTensorSpec::new("i", vec![n], ty)];
        let e = write(&standard_metadata("x", "x", &spec), &spec, &[src]).unwrap_err();
        assert_eq!(
            (e.code(), e.tensor()),
            ("ERR_UNSUPPORTED_DTYPE", Some("i")),
            "{ty}"
        );
    }
    // 65520 is halfway between f16's largest and the next step: RNE would give infinity.
    // BF16's 99840 (issue 16) and F64's 65520 are refused, naming the tensor and the value.
    let bf = half::bf16::from_f32(99840.0).to_bits().to_le_bytes();
    for (dtype, data) in [
        (DType::BF16, bf.to_vec()),
        (DType::F64, 65520f64.to_le_bytes().to_vec()),
        (DType::F32, (-1e9f32).to_le_bytes().to_vec()),
    ] {
        let src = TensorView::new("big", dtype, vec![1], data).unwrap();
        let spec = [GgufTensorSpec::new("big", vec![1], GgmlType::F16)];
        let e = write(&standard_metadata("x", "x", &spec), &spec, &[src]).unwrap_err();
        assert_eq!(
            (e.code(), e.tensor()),
            ("ERR_INVALID_ARGUMENT", Some("big")),
            "{dtype}"
        );
        assert!(e.to_string().contains("F16"), "{e}");
    }
}

#[test]
fn file_writer_is_atomic_and_readable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.gguf");
    let specs = [GgufTensorSpec::new("w", vec![32, 32], GgmlType::Q4_0)];
    let metadata = standard_metadata("x", "x", &specs);
    let w = values(1024, 9);
    write_gguf_file(&path, &metadata, &specs, WriteOptions::default(), |_, _| {
        TensorView::from_f32("w", vec![32, 32], &w)
    })
    .unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    assert_eq!(file.tensor("w").unwrap().shape, vec![32, 32]);

    // A failing load leaves no file and names the tensor.
    let path2 = dir.path().join("bad.gguf");
    let err = write_gguf_file(
        &path2,
        &metadata,
        &specs,
        WriteOptions::default(),
        |_, _| Err(stcore::CoreError::invalid_argument("boom")),
    )
    .unwrap_err();
    assert_eq!(err.tensor(), Some("w"));
    assert!(!path2.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

/// Progress counts each tensor's GGUF data bytes once it is written (Q4_0: 18 bytes per 32
/// values), with durability asked for too.
#[test]
fn file_writer_reports_progress_per_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.gguf");
    let specs = [
        GgufTensorSpec::new("w", vec![32, 32], GgmlType::Q4_0),
        GgufTensorSpec::new("b", vec![3], GgmlType::F32),
    ];
    let metadata = standard_metadata("x", "x", &specs);
    let w = values(1024, 3);
    let mut reports = Vec::new();
    let mut loads = Vec::new();
    let options = WriteOptions {
        durability: stcore::fsutil::Durability::Sync,
        progress: Some(&mut |done, total| reports.push((done, total))),
    };
    write_gguf_file(&path, &metadata, &specs, options, |i, s| {
        loads.push(i);
        match i {
            0 => TensorView::from_f32(&s.name, s.shape.clone(), &w),
            _ => TensorView::from_f32(&s.name, s.shape.clone(), &[1.0, 2.0, 3.0]),
        }
    })
    .unwrap();
    assert_eq!(loads, [0, 1]);
    assert_eq!(
        reports,
        [(32 * 18, 32 * 18 + 12), (32 * 18 + 12, 32 * 18 + 12)]
    );
    let bytes = std::fs::read(&path).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    assert_eq!(file.tensor("b").unwrap().shape, vec![3]);
}

#[test]
fn writer_rejects_what_ggml_would_not_read() {
    let meta = |specs: &[GgufTensorSpec]| standard_metadata("x", "x", specs);
    let try_write = |specs: Vec<GgufTensorSpec>| {
        let metadata = meta(&specs);
        let mut out = Vec::new();
        write_gguf(&mut out, &metadata, &specs, |_, s| {
            let n: usize = s.shape.iter().product();
            TensorView::from_f32(&s.name, s.shape.clone(), &vec![0.0; n])
        })
    };
    let code = |specs| try_write(specs).unwrap_err().code();
    assert_eq!(
        code(vec![GgufTensorSpec::new(
            "a".repeat(64),
            vec![1],
            GgmlType::F32
        )]),
        "ERR_INVALID_ARGUMENT"
    );
    assert!(try_write(vec![GgufTensorSpec::new(
        "a".repeat(63),
        vec![1],
        GgmlType::F32
    )])
    .is_ok());
    assert_eq!(
        code(vec![GgufTensorSpec::new("", vec![1], GgmlType::F32)]),
        "ERR_INVALID_ARGUMENT"
    );
    // A NUL: ggml cuts the name there, so "a\0b" and "a\0c" would both read back as "a".
    let nul = try_write(vec![
        GgufTensorSpec::new("a\0b", vec![1], GgmlType::F32),
        GgufTensorSpec::new("a\0c", vec![1], GgmlType::F32),
    ])
    .unwrap_err();
    assert_eq!(nul.code(), "ERR_INVALID_ARGUMENT");
    assert_eq!(nul.tensor(), Some("a\0b"));
    assert!(nul.to_string().contains("tensor 'a\\x00b': "), "{nul}");
    assert!(nul.detail().contains("NUL"), "{nul}");
    assert_eq!(
        code(vec![GgufTensorSpec::new("w", vec![1; 5], GgmlType::F32)]),
        "ERR_INVALID_ARGUMENT"
    );
    assert_eq!(
        code(vec![GgufTensorSpec::new("w", vec![2, 33], GgmlType::Q8_0)]),
        "ERR_INVALID_ARGUMENT"
    );
    assert_eq!(
        code(vec![GgufTensorSpec::new(
            "w",
            vec![2, 256],
            GgmlType::IQ2_XXS
        )]),
        "ERR_INVALID_ARGUMENT"
    );
    assert_eq!(
        code(vec![GgufTensorSpec::new(
            "w",
            vec![usize::MAX, 2],
            GgmlType::F32
        )]),
        "ERR_INVALID_ARGUMENT"
    );
    assert_eq!(
        code(vec![GgufTensorSpec::new("w", vec![0, 32], GgmlType::F32)]),
        "ERR_INVALID_ARGUMENT"
    );
    let dup = vec![
        GgufTensorSpec::new("w", vec![1], GgmlType::F32),
        GgufTensorSpec::new("w", vec![1], GgmlType::F32),
    ];
    let err = try_write(dup).unwrap_err();
    assert_eq!(
        (err.code(), err.tensor()),
        ("ERR_INVALID_ARGUMENT", Some("w"))
    );

    let specs = [GgufTensorSpec::new("w", vec![2], GgmlType::F32)];
    let load = |_: usize, _: &GgufTensorSpec| TensorView::from_f32("w", vec![2], &[1.0, 2.0]);
    let mut out = Vec::new();
    // No architecture.
    let e = write_gguf(&mut out, &[], &specs, load).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
    // Duplicate key, bad alignment.
    let mut m = meta(&specs);
    m.push(("general.name".into(), GgufValue::from("again")));
    assert!(write_gguf(&mut out, &m, &specs, load).is_err());
    let mut m = meta(&specs);
    m[2].1 = GgufValue::U32(24);
    assert!(write_gguf(&mut out, &m, &specs, load).is_err());
    m[2].1 = GgufValue::U64(32);
    assert!(write_gguf(&mut out, &m, &specs, load).is_err());
    // A loaded tensor of another shape, or of a dtype without real values.
    let e = write_gguf(&mut out, &meta(&specs), &specs, |_, _| {
        TensorView::from_f32("w", vec![1, 2], &[1.0, 2.0])
    })
    .unwrap_err();
    assert_eq!((e.code(), e.tensor()), ("ERR_INVALID_ARGUMENT", Some("w")));
    let e = write_gguf(&mut out, &meta(&specs), &specs, |_, _| {
        TensorView::new("w", DType::C64, vec![2], vec![0u8; 16])
    })
    .unwrap_err();
    assert_eq!(e.code(), "ERR_UNSUPPORTED_DTYPE");
}

#[test]
fn other_alignments_are_honoured() {
    let specs = [
        GgufTensorSpec::new("a", vec![3], GgmlType::F32),
        GgufTensorSpec::new("b", vec![5], GgmlType::F32),
    ];
    let mut metadata = standard_metadata("x", "x", &specs);
    metadata[2].1 = GgufValue::U32(256);
    let sources = [
        TensorView::from_f32("a", vec![3], &[1.0, 2.0, 3.0]).unwrap(),
        TensorView::from_f32("b", vec![5], &[4.0; 5]).unwrap(),
    ];
    let bytes = write(&metadata, &specs, &sources).unwrap();
    assert_eq!(bytes.len() % 256, 0);
    let file = GgufFile::parse(&bytes).unwrap();
    assert_eq!(file.alignment(), 256);
    assert_eq!(file.data_offset() % 256, 0);
    assert_eq!(file.tensors()[1].offset, 256);
    assert_eq!(f32_of(&file.tensor("b").unwrap()), vec![4.0; 5]);
}

#[test]
fn conversion_policy_feeds_the_writer() {
    let shapes: [&[usize]; 4] = [&[64, 64], &[64], &[10, 33], &[]];
    for &q in Preset::ALL {
        let specs: Vec<GgufTensorSpec> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| GgufTensorSpec::new(format!("t{i}"), s.to_vec(), choose_type(s, q)))
            .collect();
        for spec in &specs {
            spec.byte_len().unwrap();
        }
        let metadata = standard_metadata("x", "x", &specs);
        assert_eq!(
            metadata
                .iter()
                .any(|(k, _)| k == "general.quantization_version"),
            q.default_type().is_quantized()
        );
    }
}

/// Tensors of several pieces (the writer encodes pieces of 512K elements on every core and
/// writes them in order) give the bytes of the one-shot reference conversion, for every
/// target type and for sources that need staging (BF16, F64), with a partial last piece.
#[test]
fn multi_piece_tensors_match_the_one_shot_reference() {
    let shape = vec![37usize, 65_536]; // 2.31M elements: 4 full pieces and a partial one
    let n = shape[0] * shape[1];
    let x = values(n, 9);
    let bf16_bytes: Vec<u8> = x
        .iter()
        .flat_map(|&v| half::bf16::from_f32(v).to_bits().to_le_bytes())
        .collect();
    let bf16_values: Vec<f32> = x
        .iter()
        .map(|&v| half::bf16::from_f32(v).to_f32())
        .collect();
    let f64_bytes: Vec<u8> = x
        .iter()
        .flat_map(|&v| (v as f64 * (1.0 + 1e-9)).to_le_bytes())
        .collect();
    let sources = vec![
        TensorView::from_f32("f32_q8", shape.clone(), &x).unwrap(),
        TensorView::from_f32("f32_q4", shape.clone(), &x).unwrap(),
        TensorView::from_f32("f32_f16", shape.clone(), &x).unwrap(),
        TensorView::new("bf16_q4", DType::BF16, shape.clone(), bf16_bytes.clone()).unwrap(),
        TensorView::new("bf16_f32", DType::BF16, shape.clone(), bf16_bytes).unwrap(),
        TensorView::new("f64_f16", DType::F64, shape.clone(), f64_bytes.clone()).unwrap(),
    ];
    let types = [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::F32,
        GgmlType::F16,
    ];
    let specs: Vec<GgufTensorSpec> = sources
        .iter()
        .zip(types)
        .map(|(s, t)| GgufTensorSpec::new(s.name.clone(), shape.clone(), t))
        .collect();
    let metadata = standard_metadata("x", "x", &specs);
    let bytes = write(&metadata, &specs, &sources).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();

    let q8 = |v: &[f32]| {
        let mut out = vec![0u8; v.len() / gguf::QK * gguf::Q8_0_BLOCK_BYTES];
        gguf::quantize_q8_0_ref(v, &mut out).unwrap();
        out
    };
    let q4 = |v: &[f32]| {
        let mut out = vec![0u8; v.len() / gguf::QK * gguf::Q4_0_BLOCK_BYTES];
        gguf::quantize_q4_0_ref(v, &mut out).unwrap();
        out
    };
    let f16_of = |v: &[f32]| -> Vec<u8> {
        v.iter()
            .flat_map(|&v| f16::from_f32(v).to_bits().to_le_bytes())
            .collect()
    };
    // The nearest f16 to each f64 (ties to even), by search among the neighbours of a
    // first guess — `f16::from_f64` itself goes through f32 on F16C machines (a double
    // rounding, one ulp off for some values), which the writer must not do.
    let nearest_f16 = |v: f64| -> u16 {
        let guess = f16::from_f64(v).to_bits();
        let candidates = [guess.wrapping_sub(1), guess, guess.wrapping_add(1)];
        let error = |h: u16| (f16::from_bits(h).to_f64() - v).abs();
        candidates
            .into_iter()
            .filter(|&h| {
                f16::from_bits(h).is_finite() && (f16::from_bits(h).to_f64() >= 0.0) == (v >= 0.0)
            })
            .min_by(|&a, &b| error(a).total_cmp(&error(b)).then((a & 1).cmp(&(b & 1))))
            .unwrap()
    };
    let f64_to_f16: Vec<u8> = f64_bytes
        .chunks_exact(8)
        .flat_map(|b| nearest_f16(f64::from_le_bytes(b.try_into().unwrap())).to_le_bytes())
        .collect();
    let bf16_f32: Vec<u8> = bf16_values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let expected: [(&str, Vec<u8>); 6] = [
        ("f32_q8", q8(&x)),
        ("f32_q4", q4(&x)),
        ("f32_f16", f16_of(&x)),
        ("bf16_q4", q4(&bf16_values)),
        ("bf16_f32", bf16_f32),
        ("f64_f16", f64_to_f16),
    ];
    for (name, want) in expected {
        let got = file.raw(name).unwrap();
        assert_eq!(got.len(), want.len(), "{name}");
        if let Some(at) = got.iter().zip(&want).position(|(a, b)| a != b) {
            panic!(
                "{name}: first difference at byte {at} of {}: got {:?}, want {:?}",
                want.len(),
                &got[at & !1..][..2],
                &want[at & !1..][..2]
            );
        }
    }
}
