use super::*;
use crate::dtype::DType;
use crate::format::safetensors::{Backend, SafeTensors};
use crate::models::{LinearRegression, MatrixRef};
use std::collections::BTreeMap;

fn checkpoint(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("ck.safetensors");
    let w: Vec<f32> = (0..64 * 32)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
        .collect();
    let tensors = vec![
        TensorView::from_f32("blk.weight", vec![64, 32], &w).unwrap(),
        TensorView::from_f32("norm", vec![32], &w[..32]).unwrap(),
        TensorView::new(
            "half",
            DType::F16,
            vec![2, 32],
            crate::cast::encode_f32(&w[..64], DType::F16).unwrap(),
        )
        .unwrap(),
    ];
    let meta = BTreeMap::from([("format".to_string(), "pt".to_string())]);
    st::save_file(&p, &tensors, Some(&meta), WriteOptions::default()).unwrap();
    p
}

#[test]
fn inputs_are_named_by_content_and_directories_as_model_dirs() {
    let d = tempfile::tempdir().unwrap();
    let ck = checkpoint(d.path());
    // A SafeTensors file under any name, GGUF under a .safetensors name: by their bytes.
    let renamed = d.path().join("weights.bin");
    std::fs::copy(&ck, &renamed).unwrap();
    assert_eq!(inspect(&renamed).unwrap().format, "safetensors");
    let gg = d.path().join("really-gguf.safetensors");
    convert(&ck, &gg, Target::Gguf, None, WriteOptions::default()).unwrap();
    assert_eq!(inspect(&gg).unwrap().format, "gguf");
    assert_eq!(validate(&gg).format.as_deref(), Some("gguf"));
    std::fs::write(d.path().join("config.json"), "{}").unwrap();
    std::fs::copy(&ck, d.path().join("model.safetensors")).unwrap();
    let report = convert(
        d.path(),
        &d.path().join("x.mlx"),
        Target::Mlx,
        None,
        WriteOptions::default(),
    )
    .unwrap();
    assert_eq!(report.input_format, MODEL_DIR);
    assert_eq!(validate(d.path()).format.as_deref(), Some(MODEL_DIR));
    let e = inspect(&d.path().join("nope")).unwrap_err();
    assert_eq!(e.code(), "ERR_NOT_FOUND");
    assert_eq!(validate(&d.path().join("nope")).format, None);
}

#[test]
fn safetensors_gguf_safetensors_round_trip() {
    let d = tempfile::tempdir().unwrap();
    let ck = checkpoint(d.path());
    let mut events = Vec::new();
    let gg = d.path().join("ck.gguf");
    let report = convert(
        &ck,
        &gg,
        Target::Gguf,
        Some(Preset::Q8_0),
        WriteOptions::with_progress(&mut |a, b| events.push((a, b))),
    )
    .unwrap();
    assert_eq!((report.tensors, report.output_format.as_str()), (3, "gguf"));
    assert_eq!(events.last().map(|&(a, b)| a == b), Some(true));
    let info = inspect(&gg).unwrap();
    let types: BTreeMap<_, _> = info
        .tensors
        .iter()
        .map(|t| (t.name.as_str(), t.dtype.as_str()))
        .collect();
    assert_eq!(types["blk.weight"], "Q8_0");
    assert_eq!(types["norm"], "F32");
    assert_eq!(info.metadata["general.quantization_version"], 2);
    assert_eq!(info.metadata["safetensors.format"], "pt");
    let back = d.path().join("back.safetensors");
    convert(
        &gg,
        &back,
        Target::SafeTensors,
        None,
        WriteOptions::default(),
    )
    .unwrap();
    let a = SafeTensors::open(&ck, Backend::Mmap).unwrap();
    let b = SafeTensors::open(&back, Backend::Mmap).unwrap();
    assert_eq!(
        b.view("norm").unwrap().data,
        a.view("norm").unwrap().data,
        "F32 exact"
    );
    // The F16 tensor went through GGUF as F32 (1-D/2-D policy) and comes back as F32 values.
    let wa = crate::cast::to_f32_vec(DType::F32, &a.view("blk.weight").unwrap().data).unwrap();
    let wb = crate::cast::to_f32_vec(DType::F32, &b.view("blk.weight").unwrap().data).unwrap();
    for (block_a, block_b) in wa.chunks(32).zip(wb.chunks(32)) {
        let amax = block_a.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        for (x, y) in block_a.iter().zip(block_b) {
            assert!((x - y).abs() <= d * 0.5 + amax * 1e-3, "{x} vs {y}");
        }
    }
}

#[test]
fn mlx_round_trip_and_inspect() {
    let d = tempfile::tempdir().unwrap();
    let ck = checkpoint(d.path());
    let m = d.path().join("weights.mlx");
    convert(&ck, &m, Target::Mlx, None, WriteOptions::default()).unwrap();
    let info = inspect(&m).unwrap();
    assert_eq!((info.format.as_str(), info.num_tensors), ("mlx", 3));
    let back = d.path().join("back.safetensors");
    convert(
        &m,
        &back,
        Target::SafeTensors,
        None,
        WriteOptions::default(),
    )
    .unwrap();
    let a = SafeTensors::open(&ck, Backend::Mmap).unwrap();
    let b = SafeTensors::open(&back, Backend::Mmap).unwrap();
    for t in a.tensors() {
        assert_eq!(a.view(&t.name).unwrap(), b.view(&t.name).unwrap());
    }
}

#[test]
fn onnx_needs_a_model_and_validate_lists_problems() {
    let d = tempfile::tempdir().unwrap();
    let ck = checkpoint(d.path());
    let e = convert(
        &ck,
        &d.path().join("x.onnx"),
        Target::Onnx,
        None,
        WriteOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    let mut model = LinearRegression::new(true);
    let x = [1.0, 2.0, 2.0, 1.0, 3.0, 5.0];
    model
        .fit(MatrixRef::from_f64(&x, 3, 2).unwrap(), &[1.0, 2.0, 3.0])
        .unwrap();
    let mp = d.path().join("lin.safetensors");
    let model = AnyModel::Linear(model);
    model
        .save_safetensors(&mp, None, WriteOptions::default())
        .unwrap();
    // The one-piece writers report once, with what they wrote.
    let mut reports = Vec::new();
    let direct = d.path().join("direct.onnx");
    model
        .to_onnx(
            &direct,
            WriteOptions::with_progress(&mut |a, b| reports.push((a, b))),
        )
        .unwrap();
    let size = std::fs::metadata(&direct).unwrap().len();
    assert_eq!(reports, [(size, size)]);
    reports.clear();
    let saved = d.path().join("saved");
    model
        .save_dir(
            &saved,
            WriteOptions::with_progress(&mut |a, b| reports.push((a, b))),
        )
        .unwrap();
    let size = std::fs::metadata(saved.join("model.safetensors"))
        .unwrap()
        .len();
    assert_eq!(reports, [(size, size)]);
    convert(
        &mp,
        &d.path().join("lin.onnx"),
        Target::Onnx,
        None,
        WriteOptions::default(),
    )
    .unwrap();
    assert!(
        crate::format::onnx::decode_model(&std::fs::read(d.path().join("lin.onnx")).unwrap())
            .is_ok()
    );

    assert!(validate(&ck).ok);
    let bad = d.path().join("bad.safetensors");
    std::fs::write(&bad, b"\x05\0\0\0\0\0\0\0{\"a\":").unwrap();
    let r = validate(&bad);
    assert!(!r.ok);
    assert_eq!(r.errors[0].code, "ERR_INVALID_HEADER");
    assert_eq!(
        convert(
            &ck,
            &d.path().join("x"),
            Target::SafeTensors,
            Some(Preset::Q8_0),
            WriteOptions::default()
        )
        .unwrap_err()
        .code(),
        "ERR_INVALID_ARGUMENT"
    );
}
