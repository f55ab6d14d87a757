//! PyTorch checkpoints and NumPy arrays written by torch 2.15 / numpy 2.4 (the files in
//! `shared/fixtures/pytorch`, and this repository's own in `tests/data/pytorch`), read back
//! to the exact bit against the values `torch.load(weights_only=True)` / `numpy.load`
//! produced from the same files (`expected/`), and every hostile file refused with its code.

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;
use stcore::format::numpy::{NumpyFile, NPY_ARRAY_NAME};
use stcore::format::pytorch::{Container, PyTorchFile, TensorListing};
use stcore::format::safetensors::TensorBytes;
use stcore::source::WholeFile;
use std::path::{Path, PathBuf};

fn shared() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/pytorch")
}

fn ours() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/pytorch")
}

/// A JSON object's entries in file order (the expected files list tensors in the order
/// torch.load / numpy.load gave them).
struct Ordered(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Ordered, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Value>()? {
                    out.push((k, v));
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Deserialize)]
struct Expected {
    file: String,
    weights_format: String,
    container: String,
    #[serde(default)]
    pickle_protocol: Option<u8>,
    tensors: Ordered,
}

enum Opened {
    Torch(PyTorchFile),
    Numpy(NumpyFile),
}

impl Opened {
    fn open(path: &Path, format: &str) -> stcore::Result<Opened> {
        match format {
            "pytorch" => PyTorchFile::open(path).map(Opened::Torch),
            "numpy" => NumpyFile::open(path).map(Opened::Numpy),
            f => panic!("unknown format {f}"),
        }
    }
    fn tensors(&self) -> &[TensorListing] {
        match self {
            Opened::Torch(f) => f.tensors(),
            Opened::Numpy(f) => f.tensors(),
        }
    }
    fn fetch(&self, name: &str) -> stcore::Result<TensorBytes<'_>> {
        match self {
            Opened::Torch(f) => f.fetch(name),
            Opened::Numpy(f) => f.fetch(name),
        }
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Check one expected file: names in order, dtype, shape and bytes of every tensor.
/// Returns how many tensors came back as zero-copy views of the mapping.
fn check(root: &Path, json: &Path) -> usize {
    let e: Expected = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    let path = root.join(&e.file);
    let f =
        Opened::open(&path, &e.weights_format).unwrap_or_else(|err| panic!("{}: {err}", e.file));
    if let Opened::Torch(t) = &f {
        let want = if e.container == "legacy" {
            Container::Legacy
        } else {
            Container::Zip
        };
        assert_eq!(t.container(), want, "{}", e.file);
        // Protocols 0 and 1 have no PROTO opcode: the reader says 0 for both.
        let want = e.pickle_protocol.map(|p| if p < 2 { 0 } else { p });
        assert_eq!(Some(t.pickle_protocol()), want, "{}", e.file);
    }
    let names: Vec<String> = f.tensors().iter().map(|t| t.name.clone()).collect();
    let want_names: Vec<String> = e
        .tensors
        .0
        .iter()
        .map(|(n, _)| {
            if n == "*" {
                NPY_ARRAY_NAME.to_string()
            } else {
                n.clone()
            }
        })
        .collect();
    assert_eq!(names, want_names, "{}: names", e.file);
    let mut shared = 0;
    for (listing, (_, want)) in f.tensors().iter().zip(&e.tensors.0) {
        let ctx = format!("{} / {}", e.file, listing.name);
        assert_eq!(
            listing.dtype.name(),
            want["dtype"].as_str().unwrap(),
            "{ctx}: dtype"
        );
        let shape: Vec<usize> = want["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(listing.shape, shape, "{ctx}: shape");
        if let Some(td) = want.get("torch_dtype") {
            assert_eq!(listing.stored, td.as_str().unwrap(), "{ctx}: stored type");
        }
        if let Some(nd) = want.get("numpy_dtype") {
            assert_eq!(listing.stored, nd.as_str().unwrap(), "{ctx}: stored type");
        }
        let bytes = match (want.get("hex"), want.get("bin")) {
            (Some(h), _) => hex(h.as_str().unwrap()),
            (None, Some(b)) => {
                std::fs::read(root.join("expected").join(b.as_str().unwrap())).unwrap()
            }
            _ => panic!("{ctx}: no expected bytes"),
        };
        let got = f
            .fetch(&listing.name)
            .unwrap_or_else(|err| panic!("{ctx}: {err}"));
        assert_eq!(
            listing.stored_len as usize,
            bytes.len(),
            "{ctx}: stored_len"
        );
        assert!(got.as_slice() == bytes.as_slice(), "{ctx}: bytes differ");
        if matches!(got, TensorBytes::Shared { .. }) {
            shared += 1;
        }
    }
    shared
}

fn expected_files(root: &Path) -> Vec<PathBuf> {
    let index: Value =
        serde_json::from_slice(&std::fs::read(root.join("expected/index.json")).unwrap()).unwrap();
    index["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            root.join("expected")
                .join(format!("{}.json", f["file"].as_str().unwrap()))
        })
        .collect()
}

#[test]
fn every_shared_fixture_reads_back_bit_exact() {
    let files = expected_files(&shared());
    assert!(files.len() >= 43, "only {} fixtures listed", files.len());
    for json in files {
        check(&shared(), &json);
    }
}

#[test]
fn contiguous_little_endian_tensors_are_views_of_the_mapping() {
    let root = shared();
    // all_dtypes.pt: every tensor contiguous in a 64-byte-aligned stored record.
    let n = check(&root, &root.join("expected/zip/all_dtypes.pt.json"));
    assert_eq!(n, 13);
    // big_endian.pt: byte-swapped, so owned.
    assert_eq!(
        check(&root, &root.join("expected/zip/big_endian.pt.json")),
        0
    );
    // noncontiguous.pt: all five are views that must be gathered.
    assert_eq!(
        check(&root, &root.join("expected/zip/noncontiguous.pt.json")),
        0
    );
    // legacy storages are raw bytes in the file: contiguous ones are views too.
    assert!(check(&root, &root.join("expected/legacy/legacy.pt.json")) >= 11);
    // npy in C order little-endian: a view; Fortran order and big-endian: owned.
    assert_eq!(
        check(&root, &root.join("expected/numpy/c_float32.npy.json")),
        1
    );
    assert_eq!(
        check(&root, &root.join("expected/numpy/fortran_f4.npy.json")),
        0
    );
    assert_eq!(
        check(&root, &root.join("expected/numpy/big_endian_f8.npy.json")),
        0
    );
    // stored npz members are views, deflated ones cannot be.
    assert!(check(&root, &root.join("expected/numpy/stored.npz.json")) >= 5);
    assert_eq!(
        check(&root, &root.join("expected/numpy/compressed.npz.json")),
        0
    );
}

#[test]
fn tied_and_offset_views_report_their_shared_storage() {
    let f = PyTorchFile::open(&shared().join("zip/tied.pt")).unwrap();
    assert_eq!(
        f.shared_groups(),
        vec![vec!["embed.weight", "lm_head.weight"]]
    );
    let a = f.storage_span("embed.weight").unwrap();
    let b = f.storage_span("lm_head.weight").unwrap();
    assert_eq!(a, b);
    assert!(a.complete);
    let f = PyTorchFile::open(&shared().join("zip/storage_offset.pt")).unwrap();
    // q and kv are disjoint views of one storage: not shared (nothing overlaps).
    assert!(f.shared_groups().is_empty(), "{:?}", f.shared_groups());
    let q = f.storage_span("fused.q").unwrap();
    let kv = f.storage_span("fused.kv").unwrap();
    assert_eq!(q.key, kv.key);
    assert_eq!((q.start, q.end, kv.start, kv.end), (0, 24, 24, 72));
    assert!(!q.complete && !kv.complete);
    let o = f.storage_span("offset_view").unwrap();
    assert_eq!((o.start, o.end), (28, 76));
    assert!(f.tied_duplicates(&[]).unwrap().is_empty());
}

/// convert.py's rule (safetensors `_remove_duplicate_names`): keep the first complete name,
/// preferring those not in `discard_names`.
#[test]
fn tied_duplicates_follow_convert_py() {
    let f = PyTorchFile::open(&shared().join("zip/tied.pt")).unwrap();
    let pair = |k: &str, d: &str| (k.to_string(), d.to_string());
    assert_eq!(
        f.tied_duplicates(&[]).unwrap(),
        [pair("embed.weight", "lm_head.weight")]
    );
    assert_eq!(
        f.tied_duplicates(&["embed.weight"]).unwrap(),
        [pair("lm_head.weight", "embed.weight")]
    );
    let f = PyTorchFile::open(&shared().join("hf_bin/pytorch_model.bin")).unwrap();
    assert_eq!(
        f.tied_duplicates(&["lm_head.weight"]).unwrap(),
        [pair("embed.weight", "lm_head.weight")]
    );
    // protocol2.pt ties 'a' and 'a_tied' through one memoized tensor object.
    let f = PyTorchFile::open(&shared().join("zip/protocol2.pt")).unwrap();
    assert_eq!(f.tied_duplicates(&[]).unwrap(), [pair("a", "a_tied")]);
}

/// The files of `hostile/`: each refused with its code, nothing executed (no canary file).
#[test]
fn hostile_files_are_refused_with_their_code_and_nothing_runs() {
    let root = shared().join("hostile");
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "global_os_system.pt",
            "pytorch",
            "ERR_UNSAFE_PICKLE",
            "os.system",
        ),
        (
            "reduce_builtins_eval.pt",
            "pytorch",
            "ERR_UNSAFE_PICKLE",
            "builtins.eval",
        ),
        (
            "legacy_posix_system.bin",
            "pytorch",
            "ERR_UNSAFE_PICKLE",
            "posix.system",
        ),
        (
            "inst_os_system.pt",
            "pytorch",
            "ERR_UNSAFE_PICKLE",
            "os.system",
        ),
        (
            "full_module.pt",
            "pytorch",
            "ERR_UNSAFE_PICKLE",
            "torch.nn.modules.linear.Linear",
        ),
        (
            "object_array.npy",
            "numpy",
            "ERR_UNSAFE_PICKLE",
            "object array",
        ),
        (
            "zip_parent_evil.pt",
            "pytorch",
            "ERR_UNSAFE_PATH",
            "../evil",
        ),
        (
            "dup_entry.pt",
            "pytorch",
            "ERR_INVALID_HEADER",
            "two members named",
        ),
        (
            "short_storage.pt",
            "pytorch",
            "ERR_SIZE_MISMATCH",
            "holds 24 bytes",
        ),
        (
            "short_record.pt",
            "pytorch",
            "ERR_SIZE_MISMATCH",
            "600 elements",
        ),
        (
            "negative_stride.pt",
            "pytorch",
            "ERR_INVALID_OFFSETS",
            "stride is negative",
        ),
        (
            "memo_missing.pt",
            "pytorch",
            "ERR_INVALID_HEADER",
            "memo slot 7",
        ),
        (
            "binbytes8_huge.pt",
            "pytorch",
            "ERR_INCOMPLETE_FILE",
            "9223372036854775808 bytes",
        ),
        (
            "deep_lists.pt",
            "pytorch",
            "ERR_INVALID_HEADER",
            "deeper than 1000",
        ),
    ];
    let index: Value =
        serde_json::from_slice(&std::fs::read(shared().join("expected/index.json")).unwrap())
            .unwrap();
    let listed = index["hostile"].as_array().unwrap();
    assert_eq!(
        listed.len(),
        cases.len(),
        "every hostile fixture has a case here"
    );
    let canaries: Vec<&str> = listed.iter().filter_map(|h| h["canary"].as_str()).collect();
    for c in &canaries {
        let _ = std::fs::remove_file(c);
    }
    for (file, format, code, needle) in cases {
        let err = match Opened::open(&root.join(file), format) {
            Ok(_) => panic!("{file}: accepted"),
            Err(e) => e,
        };
        assert_eq!(err.code(), *code, "{file}: {err}");
        assert!(
            err.to_string().contains(needle),
            "{file}: '{err}' lacks '{needle}'"
        );
    }
    for c in &canaries {
        assert!(!Path::new(c).exists(), "canary {c} exists: something ran");
    }
    assert!(!Path::new("evil").exists() && !root.join("../evil").exists());
}

#[test]
fn every_fixture_of_ours_reads_back_bit_exact() {
    let files = expected_files(&ours());
    assert!(files.len() >= 13, "only {} fixtures listed", files.len());
    for json in files {
        check(&ours(), &json);
    }
}

/// `tests/data/pytorch/hostile`: each file's code and message, from the index the script
/// wrote; canaries absent afterwards.
#[test]
fn hostile_files_of_ours_are_refused_with_their_code_and_nothing_runs() {
    let index: Value =
        serde_json::from_slice(&std::fs::read(ours().join("expected/index.json")).unwrap())
            .unwrap();
    let cases = index["hostile"].as_array().unwrap();
    assert!(cases.len() >= 40);
    for c in cases.iter().filter_map(|c| c["canary"].as_str()) {
        let _ = std::fs::remove_file(c);
    }
    for case in cases {
        let file = case["file"].as_str().unwrap();
        let path = ours().join(file);
        let format = if file.ends_with(".npy") || file.ends_with(".npz") {
            "numpy"
        } else {
            "pytorch"
        };
        let err = match Opened::open(&path, format) {
            Ok(_) => panic!("{file}: accepted ({})", case["must"]),
            Err(e) => e,
        };
        assert_eq!(err.code(), case["code"].as_str().unwrap(), "{file}: {err}");
        let needle = case["needle"].as_str().unwrap();
        assert!(
            err.to_string().contains(needle),
            "{file}: '{err}' lacks '{needle}'"
        );
    }
    for c in cases.iter().filter_map(|c| c["canary"].as_str()) {
        assert!(!Path::new(c).exists(), "canary {c} exists: something ran");
    }
}

/// Our allow-list is torch's, name for name (`torch_allowed_globals.txt` was written by
/// torch 2.15's `_get_allowed_globals()`), and every name in it resolves.
#[test]
fn the_allow_list_is_exactly_torchs() {
    use stcore::format::pytorch::allow;
    let text = std::fs::read_to_string(ours().join("torch_allowed_globals.txt")).unwrap();
    let torch: std::collections::BTreeSet<&str> = text.lines().collect();
    let mine: Vec<String> = allow::allowed()
        .map(|a| format!("{}.{}", a.module, a.name))
        .collect();
    let mine_set: std::collections::BTreeSet<&str> = mine.iter().map(|s| s.as_str()).collect();
    assert_eq!(mine.len(), mine_set.len(), "duplicates in the table");
    let missing: Vec<_> = torch.difference(&mine_set).collect();
    let extra: Vec<_> = mine_set.difference(&torch).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?}, extra {extra:?}"
    );
    for a in allow::allowed() {
        assert!(allow::lookup(a.module, a.name).is_some());
    }
    assert!(allow::lookup("os", "system").is_none());
    assert!(allow::lookup("builtins", "eval").is_none());
    // Python 2 module names written at protocol 2 map as torch maps them.
    assert_eq!(
        allow::lookup("__builtin__", "set"),
        allow::lookup("builtins", "set")
    );
}
