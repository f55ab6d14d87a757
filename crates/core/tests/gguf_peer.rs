//! Differential checks against llama.cpp's Python reader (gguf-py), through
//! `scripts/check_gguf.py`. Ignored by default: they need the project's Python environment.
//! Run with `cargo test -p safetensors-node-core --test gguf_peer -- --ignored`; the
//! interpreter is `$STCORE_PYTHON`, else `<repo>/.venv/bin/python`.

use stcore::format::gguf::{
    standard_metadata, write_gguf_file, GgmlType, GgufArray, GgufFile, GgufTensorSpec, GgufValue,
};
use stcore::fsutil::WriteOptions;
use stcore::TensorView;
use std::path::PathBuf;
use std::process::Command;

fn repo_root() -> PathBuf {
    std::env::var_os("STCORE_REPO_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

fn python() -> PathBuf {
    std::env::var_os("STCORE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv/bin/python"))
}

fn check_gguf(args: &[&str]) -> (bool, serde_json::Value) {
    let out = Command::new(python())
        .arg(repo_root().join("scripts/check_gguf.py"))
        .args(args)
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    (out.status.success(), json)
}

/// Random-ish values with ties, wide ranges, zeros and repeated magnitudes.
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    (0..n)
        .map(|i| {
            let u = (next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
            match (i / 32) % 5 {
                0 => u,
                1 => u * 10f32.powi((next() % 10) as i32 - 5),
                2 => ((next() % 255) as f32 - 127.0) * 0.5,
                3 => [3.0, -3.0, 0.0][(next() % 3) as usize],
                _ => u * 1000.0,
            }
        })
        .collect()
}

fn f32_of(view: &TensorView<'_>) -> Vec<f32> {
    view.data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[test]
#[ignore = "needs the Python environment with the gguf package"]
fn gguf_py_reads_our_files_and_quantizes_identically() {
    let dir = tempfile::tempdir().unwrap();
    let shapes: Vec<(&str, Vec<usize>, GgmlType)> = vec![
        ("token_embd.weight", vec![64, 96], GgmlType::Q8_0),
        ("blk.0.attn_q.weight", vec![96, 64], GgmlType::Q4_0),
        ("blk.0.ffn_up.weight", vec![3, 5, 7, 32], GgmlType::Q8_0),
        ("big.q8", vec![1000, 256], GgmlType::Q8_0),
        ("big.q4", vec![1000, 256], GgmlType::Q4_0),
        ("blk.0.attn_norm.weight", vec![96], GgmlType::F32),
        ("odd.weight", vec![10, 33], GgmlType::F16),
        ("scalar", vec![], GgmlType::F32),
    ];
    let data: Vec<Vec<f32>> = shapes
        .iter()
        .enumerate()
        .map(|(i, (_, s, _))| values(s.iter().product(), i as u64 + 1))
        .collect();
    let specs: Vec<GgufTensorSpec> = shapes
        .iter()
        .map(|(n, s, t)| GgufTensorSpec::new(*n, s.clone(), *t))
        .collect();
    let mut metadata = standard_metadata("llama", "peer check", &specs);
    metadata.extend([
        ("t.u8".to_string(), GgufValue::U8(200)),
        ("t.i16".to_string(), GgufValue::I16(-30000)),
        ("t.f32".to_string(), GgufValue::F32(0.1)),
        ("t.bool".to_string(), GgufValue::Bool(true)),
        ("t.u64".to_string(), GgufValue::U64(u64::MAX)),
        ("t.i64".to_string(), GgufValue::I64(i64::MIN)),
        ("t.f64".to_string(), GgufValue::F64(-1e300)),
        (
            "t.strs".to_string(),
            GgufValue::from(vec!["a".to_string(), "ü€".to_string()]),
        ),
        ("t.i32s".to_string(), GgufValue::from(vec![-1i32, 2, 3])),
        (
            "t.empty".to_string(),
            GgufValue::Array(GgufArray::U32(vec![])),
        ),
    ]);
    let gguf_path = dir.path().join("m.gguf");
    write_gguf_file(
        &gguf_path,
        &metadata,
        &specs,
        WriteOptions::default(),
        |i, s| TensorView::from_f32(&s.name, s.shape.clone(), &data[i]),
    )
    .unwrap();

    // gguf-py reads everything we wrote, with the same metadata, shapes and numbers.
    let (ok, json) = check_gguf(&[gguf_path.to_str().unwrap()]);
    assert!(ok);
    let bytes = std::fs::read(&gguf_path).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    assert_eq!(json["version"], 3);
    assert_eq!(json["alignment"], 32);
    for (key, value) in file.metadata() {
        assert_eq!(json["metadata"][key], value.to_json(), "metadata {key}");
    }
    let tensors = json["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), specs.len());
    for (t, info) in tensors.iter().zip(file.tensors()) {
        assert_eq!(t["name"], info.name.as_str());
        assert_eq!(t["type"], info.ggml_type.name());
        let shape: Vec<usize> = serde_json::from_value(t["shape"].clone()).unwrap();
        let expected_shape = if info.shape.is_empty() {
            vec![1]
        } else {
            info.shape.clone()
        };
        assert_eq!(shape, expected_shape, "{}", info.name);
        let theirs: Vec<f32> = t["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        let ours = f32_of(&file.tensor(&info.name).unwrap());
        assert_eq!(theirs.len(), ours.len());
        for (k, (a, b)) in theirs.iter().zip(&ours).enumerate() {
            assert_eq!(
                a.to_bits(),
                b.to_bits(),
                "{} element {k}: {a} vs {b}",
                info.name
            );
        }
    }

    // Our Q8_0/Q4_0 bytes are gguf-py's quantization of the same data.
    let st_path = dir.path().join("src.safetensors");
    let raw: Vec<Vec<u8>> = data
        .iter()
        .map(|v| v.iter().flat_map(|x| x.to_le_bytes()).collect())
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = shapes
        .iter()
        .zip(&raw)
        .map(|((n, s, _), b)| {
            let view = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), b);
            (n.to_string(), view.unwrap())
        })
        .collect();
    std::fs::write(&st_path, safetensors::serialize(views, None).unwrap()).unwrap();
    let (ok, json) = check_gguf(&[
        gguf_path.to_str().unwrap(),
        "--compare-quant",
        "--source",
        st_path.to_str().unwrap(),
    ]);
    assert!(ok, "{json}");
    let compared = json["tensors"].as_array().unwrap();
    assert_eq!(compared.len(), 5, "{json}");
    assert!(compared.iter().all(|t| t["equal"] == true), "{json}");
}

#[test]
#[ignore = "needs the Python environment with the gguf package"]
fn we_read_files_written_by_gguf_py() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("py.gguf");
    let script = r#"
import sys, numpy as np, gguf
from gguf import GGMLQuantizationType as T
rng = np.random.default_rng(1)
w = gguf.GGUFWriter(sys.argv[1], "llama")
w.add_name("from python")
w.add_uint32("x.u32", 7)
w.add_array("x.strs", ["a", "bc"])
w.add_float64("x.f64", 0.25)
x = (rng.standard_normal((8, 96)) * 3).astype(np.float32)
for name, t in [("q8", T.Q8_0), ("q4", T.Q4_0), ("bf", T.BF16)]:
    w.add_tensor(name, gguf.quants.quantize(x, t), raw_dtype=t)
w.add_tensor("h", x.astype(np.float16))
w.add_tensor("f", x[0])
w.add_tensor("i", np.arange(-5, 5, dtype=np.int32))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
"#;
    let status = Command::new(python())
        .args(["-c", script, path.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    let bytes = std::fs::read(&path).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    assert_eq!(file.get("x.u32"), Some(&GgufValue::U32(7)));
    assert_eq!(
        file.get("general.name").and_then(GgufValue::as_str),
        Some("from python")
    );
    let (ok, json) = check_gguf(&[path.to_str().unwrap()]);
    assert!(ok);
    for t in json["tensors"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        let view = file.tensor(name).unwrap();
        let shape: Vec<usize> = serde_json::from_value(t["shape"].clone()).unwrap();
        assert_eq!(view.shape, shape, "{name}");
        let ours: Vec<f32> = match view.dtype {
            stcore::DType::I32 => view
                .data
                .chunks_exact(4)
                .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32)
                .collect(),
            _ => f32_of(&view),
        };
        // serde_json's default float parser may miss the nearest f64 by an ulp; every value
        // here is an f32, which rounding to f32 recovers exactly.
        let theirs: Vec<f32> = t["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(ours, theirs, "{name}");
    }
}
