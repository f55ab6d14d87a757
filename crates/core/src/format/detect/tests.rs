use super::*;
use crate::format;
#[cfg(feature = "fs")]
use crate::format::OpenOptions;
#[cfg(feature = "fs")]
use crate::fsutil::WriteOptions;
#[cfg(feature = "fs")]
use crate::tensor::TensorView;
#[cfg(feature = "fs")]
use std::path::PathBuf;

#[cfg(feature = "fs")]
fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures")
        .join(name)
}

fn sniff_bytes(bytes: &[u8]) -> Detected {
    sniff(&Head::of(bytes))
}

#[cfg(feature = "fs")]
fn sniff_file(path: &Path) -> Detected {
    format::detect_file(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[cfg(feature = "fs")]
/// Every file under `dir` (recursively) whose name ends with one of `suffixes`.
fn files_under(dir: &Path, suffixes: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "expected") {
                out.extend(files_under(&path, suffixes));
            }
        } else if suffixes.iter().any(|s| path.to_string_lossy().ends_with(s)) {
            out.push(path);
        }
    }
    out.sort();
    out
}

#[cfg(feature = "fs")]
const PYTORCH: Detected = Detected::Format(WeightsFormat::PyTorch);
#[cfg(feature = "fs")]
const NUMPY: Detected = Detected::Format(WeightsFormat::NumPy);
const SAFETENSORS: Detected = Detected::Format(WeightsFormat::SafeTensors);

#[cfg(feature = "fs")]
#[test]
fn pytorch_and_numpy_files_written_by_torch_and_numpy_are_recognised() {
    let root = fixture("pytorch");
    let torch = files_under(&root, &[".pt", ".bin"]);
    let numpy = files_under(&root, &[".npy", ".npz"]);
    // 14 zip + 2 legacy + 3 hf_bin checkpoints, 13 hostile ones; 24 NumPy + 1 hostile.
    assert_eq!((torch.len(), numpy.len()), (32, 25), "{torch:?} {numpy:?}");
    for path in &torch {
        assert_eq!(sniff_file(path), PYTORCH, "{}", path.display());
    }
    for path in &numpy {
        assert_eq!(sniff_file(path), NUMPY, "{}", path.display());
    }
}

#[cfg(feature = "fs")]
#[test]
fn recognised_formats_without_a_reader_are_unknown_format_naming_them() {
    let cases = [
        ("pytorch/zip/tied.pt", "a PyTorch checkpoint (pytorch)"),
        ("pytorch/legacy/legacy.pt", "a PyTorch checkpoint (pytorch)"),
        ("pytorch/numpy/c_float32.npy", "a NumPy file (numpy)"),
        ("pytorch/numpy/stored.npz", "a NumPy file (numpy)"),
    ];
    for (name, what) in cases {
        let path = fixture(name);
        if format::registration(match sniff_file(&path) {
            Detected::Format(f) => f,
            Detected::Foreign(_) => unreachable!(),
        })
        .open()
        .is_some()
        {
            continue; // the format's reader has landed: its own tests take over
        }
        let e = crate::pretrained::open(&path, None, &mut OpenOptions::default())
            .err()
            .unwrap();
        assert_eq!(e.code(), "ERR_UNKNOWN_FORMAT", "{name}: {e}");
        assert!(e.detail().contains(what), "{name}: {e}");
        assert!(e.detail().contains("cannot read yet"), "{name}: {e}");
        assert_eq!(e.path(), Some(path.to_str().unwrap()));
        // Read as SafeTensors, the same: never a header-length error.
        let e = crate::format::safetensors::SafeTensors::open(&path, Default::default())
            .err()
            .unwrap();
        assert_eq!(e.code(), "ERR_UNKNOWN_FORMAT", "{name}: {e}");
        assert!(e.detail().contains(what), "{name}: {e}");
    }
}

#[cfg(feature = "fs")]
#[test]
fn our_own_formats_are_recognised_by_content_whatever_their_names() {
    let d = tempfile::tempdir().unwrap();
    let views = [TensorView::from_f32("w", vec![2, 32], &[0.5; 64]).unwrap()];
    let st = d.path().join("a.gguf");
    crate::format::safetensors::save_file(&st, &views, None, WriteOptions::default()).unwrap();
    let gg = d.path().join("a.safetensors");
    let specs = [crate::format::gguf::GgufTensorSpec::new(
        "w",
        vec![2, 32],
        crate::format::gguf::GgmlType::F32,
    )];
    let metadata = crate::format::gguf::standard_metadata("x", "x", &specs);
    crate::format::gguf::write_gguf_file(
        &gg,
        &metadata,
        &specs,
        WriteOptions::default(),
        |i, _| Ok(views[i].clone()),
    )
    .unwrap();
    let mlx = d.path().join("a.json");
    crate::format::mlx::save_mlx(&mlx, &views, None, WriteOptions::default()).unwrap();
    let index = d.path().join("index");
    std::fs::write(
        &index,
        r#"{"metadata": {"total_size": 256}, "weight_map": {"w": "a.gguf"}}"#,
    )
    .unwrap();
    for (path, format) in [
        (&st, WeightsFormat::SafeTensors),
        (&gg, WeightsFormat::Gguf),
        (&mlx, WeightsFormat::Mlx),
        (&index, WeightsFormat::ShardedSafeTensors),
    ] {
        assert_eq!(sniff_file(path), Detected::Format(format));
        let source = crate::pretrained::open(path, None, &mut OpenOptions::default()).unwrap();
        assert_eq!(source.format(), format);
        assert_eq!(source.view("w").unwrap(), views[0], "{format}");
    }
    for f in [
        "safetensors/all_dtypes.safetensors",
        "safetensors/tiny_checkpoint.safetensors",
        "aprender/linreg.safetensors",
    ] {
        assert_eq!(sniff_file(&fixture(f)), SAFETENSORS, "{f}");
    }
}

#[test]
fn json_is_told_apart_by_its_top_level_keys() {
    let index = br#"{"metadata": {"total_size": 8, "nested": [1, {"weights": 2}]}, "weight_map": {"a": "b"}}"#;
    assert_eq!(
        sniff_bytes(index),
        Detected::Format(WeightsFormat::ShardedSafeTensors)
    );
    let mlx = br#" {"version": "1.0", "metadata": {"weight_map": "x"}, "weights": {}}"#;
    assert_eq!(sniff_bytes(mlx), Detected::Format(WeightsFormat::Mlx));
    for other in [
        &br#"{"model_type": "llama", "hidden_size": 4096}"#[..],
        b"[1, 2, 3]",
        br#"{"weights_are_elsewhere": true}"#,
    ] {
        assert_eq!(
            sniff_bytes(other),
            Detected::Foreign("a JSON document (not a sharded index or weights.mlx)"),
            "{}",
            String::from_utf8_lossy(other)
        );
    }
    // A document longer than the head is judged on the head.
    let mut long = br#"{"version": "1", "weights": {"w": {"data": ["#.to_vec();
    long.extend(std::iter::repeat_n(b'1', 200_000));
    assert_eq!(sniff_bytes(&long), Detected::Format(WeightsFormat::Mlx));
}

#[test]
fn files_we_do_not_read_are_named() {
    let onnx = crate::format::onnx::linear_regression_model(&[1.0, 2.0], 0.5).unwrap();
    let zip = b"PK\x03\x04\x14\0\0\0\0\0\0\0\0\0\0\0\0\0\x03\0\0\0\x03\0\0\0\x07\0\0\0readme!abc";
    let pickle = b"\x80\x04\x95\x05\0\0\0\0\0\0\0K\x01.";
    let mut random = vec![0u8; 4096];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for b in random.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    random[8] = b'x'; // not a header's start
    let mut tar = vec![0u8; 1024];
    tar[..8].copy_from_slice(b"file.txt");
    tar[257..262].copy_from_slice(b"ustar");
    // What no format claims is named for what it looks like.
    let cases: [(&[u8], &str); 14] = [
        (&onnx, "an ONNX model"),
        (zip, "a zip archive (PyTorch or NumPy .npz?)"),
        (
            b"PK\x05\x06\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
            "a zip archive (PyTorch or NumPy .npz?)",
        ),
        (pickle, "a Python pickle (a PyTorch checkpoint?)"),
        (
            b"\x89HDF\r\n\x1a\n\0\0\0\0\0\0\0\0",
            "an HDF5 file (Keras .h5?)",
        ),
        (b"\x1f\x8b\x08\0\0\0\0\0\0\x03", "a gzip-compressed file"),
        (b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR", "a PNG image"),
        (b"\xff\xd8\xff\xe0\0\x10JFIF\0", "a JPEG image"),
        (b"%PDF-1.7\n%\xe2\xe3", "a PDF document"),
        (&tar, "a tar archive"),
        (b"\x7fELF\x02\x01\x01\0\0\0", "an executable (ELF)"),
        (b"hello, world: a plain text file\n", "a text file"),
        (&random, "binary data of no known kind"),
        // An ONNX-like first byte whose next fields are not a ModelProto's.
        (
            b"\x08\x07\x00\x00\x00\x00\x00\x00\x00",
            "binary data of no known kind",
        ),
    ];
    #[cfg(feature = "fs")]
    let d = tempfile::tempdir().unwrap();
    for (bytes, what) in cases {
        assert_eq!(sniff_bytes(bytes), Detected::Foreign(what));
        #[cfg_attr(not(feature = "fs"), allow(unused_mut))]
        let mut errors = vec![format::open_bytes(bytes.to_vec(), None).err().unwrap()];
        #[cfg(feature = "fs")]
        errors.push({
            let path = d.path().join("input");
            std::fs::write(&path, bytes).unwrap();
            crate::pretrained::open(&path, None, &mut OpenOptions::default())
                .err()
                .unwrap()
        });
        for e in errors {
            assert_eq!(e.code(), "ERR_UNKNOWN_FORMAT");
            assert!(e.detail().starts_with(&format!("this is {what}, not a weights format this package reads (it reads safetensors, gguf")), "{e}");
        }
        let e = crate::format::safetensors::SafeTensors::from_bytes(bytes.to_vec())
            .err()
            .unwrap();
        assert_eq!(e.code(), "ERR_UNKNOWN_FORMAT", "{what}");
        assert_eq!(
            e.detail(),
            format!("this is {what}, not a SafeTensors file")
        );
    }
}

#[test]
fn damaged_safetensors_are_claimed_so_their_own_errors_stand() {
    // Length prefixes of every size with a header's start after them, damaged JSON, too few
    // bytes for a prefix: read as SafeTensors.
    let cases: [&[u8]; 7] = [
        b"",
        b"\x02\0\0\0\0\0\0",
        b"\xff\xff\xff\xff\xff\xff\xff\xff{}",
        b"\0\0\0\0\0\0\0\x80{}",
        b"\x08\x01\0\0\0\0\0\0{\"a\":1}",
        b"\x05\0\0\0\0\0\0\0{\"a\":",
        b"\x08\x07\x3a\xff\xff\xff\x0f",
    ];
    for bytes in cases {
        assert_eq!(sniff_bytes(bytes), SAFETENSORS, "{bytes:?}");
    }
    let e = crate::format::safetensors::SafeTensors::from_bytes(cases[2].to_vec())
        .err()
        .unwrap();
    assert_eq!(e.code(), "ERR_HEADER_TOO_LARGE");
    // A file with another format's magic is that format's, however short.
    let gguf = Detected::Format(WeightsFormat::Gguf);
    for bytes in [&b"GGUF"[..], b"GGUF\x03\0\0\0", b"GGUF\x03\0\0\0\x01"] {
        assert_eq!(sniff_bytes(bytes), gguf, "{bytes:?}");
    }
}

#[test]
fn the_registry_reads_what_it_lists() {
    for f in WeightsFormat::ALL {
        assert_eq!(format::registration(f).format, f);
    }
    let readable = format::readable_list();
    assert!(
        readable.starts_with("it reads safetensors, gguf"),
        "{readable}"
    );
}
