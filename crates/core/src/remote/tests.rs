use super::*;
use crate::dtype::DType;
use crate::format;
use crate::format::gguf::{standard_metadata, write_gguf, GgmlType, GgufTensorSpec, GgufValue};
use crate::format::safetensors::serialize;
use crate::format::safetensors::SafeTensors;
use crate::tensor::TensorView;
#[cfg(feature = "fs")]
use std::path::{Path, PathBuf};

/// A server: the reply to each request.
type Server<'a> = Box<dyn FnMut(&Request) -> Reply + 'a>;

/// What a driver saw: requests made and bytes served.
#[derive(Default, Debug)]
struct Traffic {
    requests: usize,
    bytes: u64,
}

/// Drive an opener of the file "mem://file" with `server` answering each request.
fn drive_with(
    hint: Option<WeightsFormat>,
    traffic: &mut Traffic,
    server: &mut dyn FnMut(&Request) -> Reply,
) -> Result<RemoteFile> {
    drive_opener(Opener::new("mem://file", hint), traffic, server)
}

/// An honest server of `file`'s ranges.
fn serve(file: &[u8]) -> impl FnMut(&Request) -> Reply + '_ {
    move |r: &Request| {
        assert_eq!(r.file, "");
        let len = file.len() as u64;
        let (start, end) = match r.want {
            Want::Range { start, end } => (start.min(len), end.min(len)),
            Want::Whole { .. } => (0, len),
        };
        Reply::Bytes {
            bytes: file[start as usize..end as usize].to_vec(),
            total: Some(len),
        }
    }
}

fn drive(file: &[u8], hint: Option<WeightsFormat>) -> (Result<RemoteFile>, Traffic) {
    let mut traffic = Traffic::default();
    let result = drive_with(hint, &mut traffic, &mut serve(file));
    (result, traffic)
}

/// Every tensor's served bytes (decoded to F32 where the source decodes) and raw bytes.
fn served_locally(source: &dyn TensorSource, name: &str) -> (Vec<u8>, Vec<u8>) {
    let t = source.info(name).unwrap();
    let served = match source.f32_decoder(name).unwrap() {
        Some(d) => d.decode_to_bytes(t.numel()).unwrap(),
        None => source.fetch(name).unwrap().as_slice().to_vec(),
    };
    (served, source.fetch_raw(name).unwrap().as_slice().to_vec())
}

/// What `remote` serves of `name` (decoded to F32 where the source decodes) and its raw
/// bytes, the spans read from `read(file)`.
fn served_by(
    remote: &RemoteFile,
    name: &str,
    read: &dyn Fn(&str) -> Vec<u8>,
) -> (Vec<u8>, Vec<u8>) {
    if remote.holds(name).unwrap() {
        return served_locally(remote.source(), name);
    }
    let mut raw = Vec::new();
    for s in remote.spans(name).unwrap() {
        let file = read(&s.file);
        raw.extend_from_slice(&file[s.start as usize..(s.start + s.len) as usize]);
    }
    let numel = remote.source().info(name).unwrap().numel();
    let served = match remote.serve(name, raw.clone()).unwrap() {
        Served::Bytes(b) => b.as_slice().to_vec(),
        Served::Decoder(d) => d.decode_to_bytes(numel).unwrap(),
    };
    // A NumPy array's or torch tensor's bytes "as stored" are its elements in order.
    if matches!(remote.read_of(name).unwrap(), Read::Ranged(..)) {
        return (served.clone(), served);
    }
    (served, raw)
}

fn served_remotely(remote: &RemoteFile, file: &[u8], name: &str) -> (Vec<u8>, Vec<u8>) {
    served_by(remote, name, &|f| {
        assert_eq!(f, "");
        file.to_vec()
    })
}

/// The remote open of `file` gives exactly the local open of its bytes: the same tensors,
/// metadata and bytes, or the same error.
fn same_as_local(file: &[u8], what: &str) -> Traffic {
    let local = format::open_bytes(file.to_vec(), None);
    let (remote, traffic) = drive(file, None);
    match (local, remote) {
        (Ok(local), Ok(remote)) => {
            let listed = |s: &dyn TensorSource| {
                s.tensors()
                    .iter()
                    .map(|t| {
                        let t = (
                            &t.name,
                            t.dtype,
                            t.stored.to_string(),
                            &t.shape,
                            t.stored_len,
                        );
                        format!("{t:?}")
                    })
                    .collect::<Vec<_>>()
            };
            assert_eq!(listed(remote.source()), listed(local.as_ref()), "{what}");
            assert_eq!(remote.source().format(), local.format(), "{what}");
            assert_eq!(
                remote.source().metadata().to_json(),
                local.metadata().to_json(),
                "{what}"
            );
            for t in local.tensors().iter() {
                assert_eq!(
                    remote.source().stored_range(&t.name),
                    local.stored_range(&t.name),
                    "{what} {}",
                    t.name
                );
                assert_eq!(
                    served_remotely(&remote, file, &t.name),
                    served_locally(local.as_ref(), &t.name),
                    "{what} {}",
                    t.name
                );
            }
        }
        (Err(local), Err(remote)) => {
            assert_eq!(
                (remote.code(), remote.detail()),
                (local.code(), local.detail()),
                "{what}"
            );
            assert_eq!(remote.path(), Some("mem://file"), "{what}");
        }
        (local, remote) => panic!(
            "{what}: locally {:?}, remotely {:?}",
            local.err(),
            remote.err()
        ),
    }
    traffic
}

#[cfg(feature = "fs")]
fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures");
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            let name = p.to_string_lossy().into_owned();
            if p.is_dir() {
                if !name.ends_with("expected") && !name.ends_with("datasets") {
                    stack.push(p);
                }
            } else if [
                ".safetensors",
                ".pt",
                ".bin",
                ".npy",
                ".npz",
                ".gguf",
                ".mlx",
            ]
            .iter()
            .any(|s| name.ends_with(s))
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[cfg(feature = "fs")]
#[test]
fn every_fixture_opens_as_it_does_locally() {
    let files = fixtures();
    assert!(files.len() > 30, "{files:?}");
    for path in files {
        let bytes = std::fs::read(&path).unwrap();
        same_as_local(&bytes, &path.display().to_string());
    }
}

/// A SafeTensors file with a header over the first range and a large tensor.
fn large_safetensors() -> Vec<u8> {
    let big: Vec<f32> = (0..256 * 1024).map(|i| (i % 997) as f32 / 7.0).collect();
    let mut views = vec![TensorView::from_f32("big", vec![512, 512], &big).unwrap()];
    for i in 0..3000 {
        views.push(
            TensorView::from_f32(
                format!("layer.{i}.a_rather_long_tensor_name"),
                vec![2],
                &[i as f32, 1.0],
            )
            .unwrap(),
        );
    }
    let metadata = [("format".to_string(), "pt".to_string())].into();
    serialize(&views, Some(&metadata)).unwrap()
}

/// A GGUF file whose header (a vocabulary) runs past the first range, with block types.
fn large_gguf() -> Vec<u8> {
    let values: Vec<f32> = (0..256 * 1024)
        .map(|i| ((i % 113) as f32 - 56.0) / 9.0)
        .collect();
    let views = [
        TensorView::from_f32("q8", vec![1024, 256], &values).unwrap(),
        TensorView::from_f32("f32", vec![1024, 256], &values).unwrap(),
        TensorView::new(
            "f16",
            DType::F16,
            vec![64],
            crate::cast::encode_f32(&values[..64], DType::F16).unwrap(),
        )
        .unwrap(),
    ];
    let specs = [
        GgufTensorSpec::new("q8", vec![1024, 256], GgmlType::Q8_0),
        GgufTensorSpec::new("f32", vec![1024, 256], GgmlType::F32),
        GgufTensorSpec::new("f16", vec![64], GgmlType::F16),
    ];
    let mut metadata = standard_metadata("test", "t", &specs);
    let tokens = (0..20_000).map(|i| format!("token-{i}")).collect();
    metadata.push((
        "tokenizer.ggml.tokens".to_string(),
        GgufValue::Array(crate::format::gguf::GgufArray::String(tokens)),
    ));
    let mut bytes = Vec::new();
    write_gguf(&mut bytes, &metadata, &specs, |i, _| Ok(views[i].clone())).unwrap();
    bytes
}

#[test]
fn safetensors_and_gguf_are_opened_by_their_headers_in_few_requests() {
    let st = large_safetensors();
    let header = SafeTensors::header_end(&st, st.len() as u64).unwrap();
    assert!(header > FIRST_RANGE_BYTES, "{header}");
    let traffic = same_as_local(&st, "large safetensors");
    assert_eq!(traffic.requests, 2);
    assert_eq!(traffic.bytes, header);
    assert!(
        traffic.bytes * 4 < st.len() as u64,
        "{traffic:?} of {}",
        st.len()
    );

    let gguf = large_gguf();
    let traffic = same_as_local(&gguf, "large gguf");
    assert!((2..=4).contains(&traffic.requests), "{traffic:?}");
    assert!(
        traffic.bytes * 2 < gguf.len() as u64,
        "{traffic:?} of {}",
        gguf.len()
    );
}

#[test]
fn a_safetensors_slice_is_its_spans() {
    let st = large_safetensors();
    let (remote, _) = drive(&st, None);
    let remote = remote.unwrap();
    let local = format::open_bytes(st.clone(), None).unwrap();
    let ranges = [SliceArg::Range(3, 7), SliceArg::Range(-5, 512)];
    let (shape, spans) = remote.slice_spans("big", &ranges).unwrap();
    let want = local.select("big", &ranges).unwrap();
    assert_eq!(shape, want.shape);
    assert_eq!(spans.len(), 4);
    let got: Vec<u8> = spans
        .iter()
        .flat_map(|s| st[s.start as usize..(s.start + s.len) as usize].to_vec())
        .collect();
    assert_eq!(got, want.bytes.into_bytes().unwrap().as_slice().to_vec());
}

#[test]
fn truncated_and_damaged_files_fail_as_they_do_locally() {
    for (what, file) in [("safetensors", large_safetensors()), ("gguf", large_gguf())] {
        // Cuts inside the header, past the first range and inside it.
        for cut in [0, 3, 8, 24, 1000, 150_000, 300_000] {
            same_as_local(
                &file[..cut.min(file.len())],
                &format!("{what} cut at {cut}"),
            );
        }
        // A length prefix or a count far past the file.
        let mut lying = file.clone();
        lying[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        same_as_local(&lying, &format!("{what} with a huge count"));
    }
}

#[test]
fn a_server_that_lies_gives_coded_errors() {
    let file = large_safetensors();
    let len = file.len() as u64;
    let cases: Vec<(&str, Server)> = vec![
        (
            "short",
            Box::new(|r: &Request| match r.want {
                Want::Range { start, .. } => Reply::Bytes {
                    bytes: file[start as usize..start as usize + 10].to_vec(),
                    total: Some(len),
                },
                Want::Whole { .. } => unreachable!(),
            }),
        ),
        (
            "no length",
            Box::new(|_: &Request| Reply::Bytes {
                bytes: file[..100].to_vec(),
                total: None,
            }),
        ),
        (
            "length changes",
            Box::new({
                let mut n = 0;
                let mut honest = serve(&file);
                move |r: &Request| {
                    n += 1;
                    match honest(r) {
                        Reply::Bytes { bytes, total } if n > 1 => Reply::Bytes {
                            bytes,
                            total: total.map(|t| t + 1),
                        },
                        reply => reply,
                    }
                }
            }),
        ),
        ("404", Box::new(|_: &Request| Reply::NotFound)),
        (
            "error",
            Box::new(|_: &Request| Reply::Error(CoreError::new(ErrorKind::Io, "connection reset"))),
        ),
    ];
    for (what, mut server) in cases {
        let e = drive_with(None, &mut Traffic::default(), &mut *server)
            .err()
            .unwrap();
        let code = if what == "404" {
            "ERR_NOT_FOUND"
        } else {
            "ERR_IO"
        };
        assert_eq!(e.code(), code, "{what}: {e}");
        assert_eq!(e.path(), Some("mem://file"), "{what}");
    }
}

#[test]
fn the_protocol_refuses_misuse() {
    let mut opener = Opener::new("mem://file", None);
    let Step::Fetch(requests) = opener.step().unwrap() else {
        panic!("the first step fetches")
    };
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].want,
        Want::Range {
            start: 0,
            end: FIRST_RANGE_BYTES
        }
    );
    let e = opener.step().err().unwrap();
    assert_eq!(
        (e.code(), e.detail()),
        ("ERR_INVALID_ARGUMENT", "1 requests are not answered yet")
    );
    let e = opener.reply(99, Reply::NotFound).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
    let st = large_safetensors();
    let (remote, _) = drive(&st, None);
    let remote = remote.unwrap();
    let e = remote.serve("big", vec![0; 3]).err().unwrap();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
    assert!(e.detail().contains("3 bytes given"), "{e}");
    assert_eq!(remote.spans("nope").unwrap_err().code(), "ERR_NOT_FOUND");
}

/// Drive `opener` with `server` answering each request.
fn drive_opener(
    mut opener: Opener,
    traffic: &mut Traffic,
    server: &mut dyn FnMut(&Request) -> Reply,
) -> Result<RemoteFile> {
    for _ in 0..64 {
        match opener.step()? {
            Step::Fetch(requests) => {
                for r in requests {
                    traffic.requests += 1;
                    let reply = server(&r);
                    if let Reply::Bytes { bytes, .. } = &reply {
                        traffic.bytes += bytes.len() as u64;
                    }
                    opener.reply(r.id, reply)?;
                }
            }
            Step::Ready(file) => return Ok(*file),
        }
    }
    panic!("the opener asked for more than 64 steps");
}

const BASE: &str = "https://host/org/model/";

/// An honest server of the files under `dir`, at `BASE`.
#[cfg(feature = "fs")]
fn serve_dir(dir: &Path) -> impl FnMut(&Request) -> Reply + '_ {
    move |r: &Request| {
        let name = r.url.strip_prefix(BASE).expect("a file under the base");
        assert_eq!(r.file, name);
        let Ok(file) = std::fs::read(dir.join(name)) else {
            return Reply::NotFound;
        };
        let reply = serve(&file)(&Request {
            file: String::new(),
            ..r.clone()
        });
        reply
    }
}

/// The bytes of a tensor of a remote directory, fetched from `dir`'s files.
#[cfg(feature = "fs")]
fn served_from_dir(remote: &RemoteFile, dir: &Path, name: &str) -> (Vec<u8>, Vec<u8>) {
    served_by(remote, name, &|f| std::fs::read(dir.join(f)).unwrap())
}

/// The remote open of the directory `dir` gives exactly its local open: the same config,
/// files, tensors and bytes, or the same error (code, message, and path under the base).
#[cfg(feature = "fs")]
fn same_dir_as_local(dir: &Path, what: &str) -> (Result<RemoteFile>, Traffic) {
    let local = crate::pretrained::ModelDir::open(dir, &mut |_| {});
    let mut traffic = Traffic::default();
    let remote = drive_opener(Opener::directory(BASE), &mut traffic, &mut serve_dir(dir));
    match (&local, &remote) {
        (Ok(local), Ok(remote)) => {
            let listed = |s: &dyn TensorSource| {
                s.tensors()
                    .iter()
                    .map(|t| format!("{t:?} {:?}", s.file_of(&t.name)))
                    .collect::<Vec<_>>()
            };
            assert_eq!(listed(remote.source()), listed(local.weights()), "{what}");
            assert_eq!(remote.source().format(), local.weights().format(), "{what}");
            assert_eq!(remote.config(), Some(local.config()), "{what}");
            assert_eq!(remote.files(), local.files(), "{what}");
            assert_eq!(remote.base(), Some(BASE), "{what}");
            for t in local.weights().tensors() {
                assert_eq!(
                    served_from_dir(remote, dir, &t.name),
                    served_locally(local.weights(), &t.name),
                    "{what} {}",
                    t.name
                );
            }
        }
        (Err(local), Err(remote)) => {
            assert_eq!(
                (remote.code(), remote.detail(), remote.tensor()),
                (local.code(), local.detail(), local.tensor()),
                "{what}"
            );
            let dir_text = dir.display().to_string();
            let local_path = local
                .path()
                .unwrap()
                .replace(&dir_text, BASE.trim_end_matches('/'));
            let remote_path = remote.path().map(|p| p.trim_end_matches('/'));
            assert_eq!(remote_path, Some(local_path.as_str()), "{what}");
        }
        (local, remote) => panic!(
            "{what}: locally {:?}, remotely {:?}",
            local.as_ref().err(),
            remote.as_ref().err()
        ),
    }
    (remote, traffic)
}

#[cfg(feature = "fs")]
fn write(dir: &Path, name: &str, bytes: &[u8]) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// A SafeTensors file of `names`, each a 512×256 F32 tensor (larger than the first range).
fn shard_bytes(names: &[&str]) -> Vec<u8> {
    let values: Vec<f32> = (0..512 * 256).map(|i| i as f32 / 3.0).collect();
    let views: Vec<TensorView> = names
        .iter()
        .map(|n| TensorView::from_f32(*n, vec![512, 256], &values).unwrap())
        .collect();
    serialize(&views, None).unwrap()
}

#[cfg(feature = "fs")]
fn model_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "config.json",
        br#"{"model_type": "llama", "n": 2}"#,
    );
    dir
}

#[cfg(feature = "fs")]
fn sharded_index(dir: &Path, map: &[(&str, &str)]) {
    let map: serde_json::Map<String, serde_json::Value> = map
        .iter()
        .map(|(t, s)| (t.to_string(), serde_json::Value::from(*s)))
        .collect();
    let index = serde_json::json!({ "metadata": {}, "weight_map": map });
    write(dir, layout::INDEX_FILE, index.to_string().as_bytes());
}

#[cfg(feature = "fs")]
#[test]
fn a_directory_with_one_file_opens_as_it_does_locally() {
    let dir = model_dir();
    let file = large_safetensors();
    write(dir.path(), "model.safetensors", &file);
    let (remote, traffic) = same_dir_as_local(dir.path(), "model.safetensors");
    assert!(!remote.unwrap().is_whole());
    // config.json, weights.safetensors (missing), then the header of model.safetensors.
    assert_eq!(traffic.requests, 4, "{traffic:?}");
    assert!(traffic.bytes * 4 < file.len() as u64, "{traffic:?}");
}

#[cfg(feature = "fs")]
#[test]
fn a_sharded_directory_opens_its_shards_by_their_headers() {
    let dir = model_dir();
    write(
        dir.path(),
        "sub/a.safetensors",
        &shard_bytes(&["w.0", "w.1"]),
    );
    write(dir.path(), "sub/b.safetensors", &shard_bytes(&["w.2"]));
    sharded_index(
        dir.path(),
        &[
            ("w.0", "sub/a.safetensors"),
            ("w.1", "sub/a.safetensors"),
            ("w.2", "sub/b.safetensors"),
        ],
    );
    let (remote, traffic) = same_dir_as_local(dir.path(), "sharded");
    let remote = remote.unwrap();
    assert_eq!(remote.source().format(), WeightsFormat::ShardedSafeTensors);
    let spans = remote.spans("w.2").unwrap();
    assert_eq!(spans[0].url, format!("{BASE}sub/b.safetensors"));
    // config, two missing single files, the index, one header range per shard (each shard
    // is larger than the first range).
    assert_eq!(traffic.requests, 6, "{traffic:?}");
    let stored: u64 = 3 * 512 * 256 * 4;
    assert!(traffic.bytes < stored / 4, "{traffic:?}");
    let local = crate::pretrained::ModelDir::open(dir.path(), &mut |_| {}).unwrap();
    let ranges = [SliceArg::Range(1, 3)];
    let (shape, spans) = remote.slice_spans("w.1", &ranges).unwrap();
    let want = local.weights().select("w.1", &ranges).unwrap();
    assert_eq!(shape, want.shape);
    let file = std::fs::read(dir.path().join("sub/a.safetensors")).unwrap();
    let got: Vec<u8> = spans
        .iter()
        .flat_map(|s| file[s.start as usize..(s.start + s.len) as usize].to_vec())
        .collect();
    assert_eq!(got, want.bytes.into_bytes().unwrap().as_slice().to_vec());
}

#[cfg(feature = "fs")]
#[test]
fn pytorch_directories_open_as_they_do_locally() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/pytorch");
    for name in ["hf_bin", "hf_bin_sharded"] {
        let (remote, _) = same_dir_as_local(&root.join(name), name);
        let remote = remote.unwrap();
        assert!(remote.is_whole(), "{name}");
        assert_eq!(remote.source().format(), WeightsFormat::PyTorch, "{name}");
    }
}

#[cfg(feature = "fs")]
#[test]
fn broken_directories_fail_as_they_do_locally() {
    // No config.json.
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "model.safetensors", &shard_bytes(&["w"]));
    same_dir_as_local(dir.path(), "no config").0.err().unwrap();
    // No weights.
    let dir = model_dir();
    let e = same_dir_as_local(dir.path(), "no weights").0.err().unwrap();
    assert_eq!(e.code(), "ERR_NO_WEIGHTS", "{e}");
    // Config not an object; config over its cap.
    let dir = model_dir();
    write(dir.path(), "config.json", b"[1]");
    write(dir.path(), "model.safetensors", &shard_bytes(&["w"]));
    same_dir_as_local(dir.path(), "config not an object")
        .0
        .err()
        .unwrap();
    // A missing shard.
    let dir = model_dir();
    write(dir.path(), "a.safetensors", &shard_bytes(&["w.0"]));
    sharded_index(
        dir.path(),
        &[("w.0", "a.safetensors"), ("w.1", "b.safetensors")],
    );
    let e = same_dir_as_local(dir.path(), "missing shard")
        .0
        .err()
        .unwrap();
    assert!(e.detail().contains("is missing"), "{e}");
    // An index naming itself as a shard.
    let dir = model_dir();
    sharded_index(dir.path(), &[("w.0", layout::INDEX_FILE)]);
    let e = same_dir_as_local(dir.path(), "index naming itself")
        .0
        .err()
        .unwrap();
    assert!(e.detail().contains("itself a sharded index"), "{e}");
    // A damaged shard; a tensor the index places in the wrong shard; one in two shards.
    let dir = model_dir();
    let mut bad = shard_bytes(&["w.0"]);
    bad.truncate(200);
    write(dir.path(), "a.safetensors", &bad);
    sharded_index(dir.path(), &[("w.0", "a.safetensors")]);
    let e = same_dir_as_local(dir.path(), "damaged shard")
        .0
        .err()
        .unwrap();
    assert!(e.detail().contains("failed validation"), "{e}");
    let dir = model_dir();
    write(dir.path(), "a.safetensors", &shard_bytes(&["w.0"]));
    write(dir.path(), "b.safetensors", &shard_bytes(&["w.0", "w.1"]));
    sharded_index(
        dir.path(),
        &[("w.0", "a.safetensors"), ("w.1", "a.safetensors")],
    );
    same_dir_as_local(dir.path(), "wrong shard")
        .0
        .err()
        .unwrap();
    sharded_index(
        dir.path(),
        &[("w.0", "a.safetensors"), ("w.1", "b.safetensors")],
    );
    same_dir_as_local(dir.path(), "two shards").0.err().unwrap();
    // A shard name that climbs out of the directory.
    sharded_index(dir.path(), &[("w.0", "../a.safetensors")]);
    let e = same_dir_as_local(dir.path(), "climbing shard")
        .0
        .err()
        .unwrap();
    assert_eq!(e.code(), "ERR_UNSAFE_PATH", "{e}");
}

#[test]
fn a_missing_file_is_read_as_a_directory_and_companions_are_named() {
    let shard = shard_bytes(&["w"]);
    let mut server = |r: &Request| match r.url.as_str() {
        "https://host/org/model/config.json" => Reply::Bytes {
            bytes: b"{}".to_vec(),
            total: Some(2),
        },
        "https://host/org/model/model.safetensors" => serve(&shard)(&Request {
            file: String::new(),
            ..r.clone()
        }),
        _ => Reply::NotFound,
    };
    let opener = Opener::any("https://host/org/model", None);
    let remote = drive_opener(opener, &mut Traffic::default(), &mut server).unwrap();
    assert_eq!(remote.files(), ["model.safetensors"]);
    assert_eq!(remote.base(), Some(BASE));
    let companions = remote.companions().unwrap();
    assert_eq!(companions.len(), layout::COMPANION_FILES.len());
    assert_eq!(
        companions.last().unwrap(),
        &(
            "1_Pooling/config.json".to_string(),
            format!("{BASE}1_Pooling/config.json")
        )
    );
    // Neither a file nor a directory: the file's error.
    let opener = Opener::any("https://host/org/nothing", None);
    let e = drive_opener(opener, &mut Traffic::default(), &mut server)
        .err()
        .unwrap();
    assert_eq!(
        (e.code(), e.path()),
        ("ERR_NOT_FOUND", Some("https://host/org/nothing"))
    );
    // A server that ignores ranges: the whole file, read from memory.
    let mut whole = |r: &Request| match r.want {
        Want::Range { .. } => Reply::Bytes {
            bytes: shard.clone(),
            total: Some(shard.len() as u64),
        },
        Want::Whole { .. } => unreachable!(),
    };
    let opener = Opener::new("https://host/w.safetensors", None);
    let remote = drive_opener(opener, &mut Traffic::default(), &mut whole).unwrap();
    assert!(remote.is_whole() && remote.holds("w").unwrap());
}

#[test]
fn a_json_file_past_its_cap_is_refused() {
    let mut server = |r: &Request| match r.want {
        Want::Whole { cap } => Reply::Bytes {
            bytes: Vec::new(),
            total: Some(cap + 1),
        },
        Want::Range { .. } => Reply::NotFound,
    };
    let e = drive_opener(
        Opener::directory(BASE),
        &mut Traffic::default(),
        &mut server,
    )
    .err()
    .unwrap();
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    assert!(
        e.detail().starts_with("config.json is larger than 16 MiB"),
        "{e}"
    );
}

/// A split GGUF set of four files, `set-0000N-of-00004.gguf` in `dir` (block and plain
/// types, the first file holding tensors too).
#[cfg(feature = "fs")]
fn split_gguf(dir: &Path) -> Vec<PathBuf> {
    use crate::format::gguf::{write_gguf_split, TensorData};
    let values: Vec<f32> = (0..4096).map(|i| ((i % 61) as f32 - 30.0) / 7.0).collect();
    let specs = [
        GgufTensorSpec::new("a", vec![64, 64], GgmlType::Q8_0),
        GgufTensorSpec::new("b", vec![64, 64], GgmlType::F32),
        GgufTensorSpec::new("c", vec![32], GgmlType::F16),
        GgufTensorSpec::new("d", vec![64, 64], GgmlType::F32),
    ];
    let metadata = standard_metadata("test", "t", &specs);
    let durability = crate::fsutil::Durability::default();
    let path = dir.join("set.gguf");
    write_gguf_split(&path, &metadata, &specs, 16_400, durability, |_, s| {
        let n = s.shape.iter().product();
        Ok(TensorData::View(
            TensorView::from_f32(s.name.clone(), s.shape.clone(), &values[..n]).unwrap(),
        ))
    })
    .unwrap()
}

/// Drive an opener of the file `name` at `BASE`, served from `dir` (files beside it asked
/// for by their names).
#[cfg(feature = "fs")]
fn drive_beside(dir: &Path, name: &str, traffic: &mut Traffic) -> Result<RemoteFile> {
    drive_beside_as(dir, name, traffic, |url| Opener::new(url, None))
}

/// [`drive_beside`] with the opener `open` makes of the file's URL.
#[cfg(feature = "fs")]
fn drive_beside_as(
    dir: &Path,
    name: &str,
    traffic: &mut Traffic,
    open: impl FnOnce(&str) -> Opener,
) -> Result<RemoteFile> {
    let mut server = |r: &Request| {
        let at = r.url.strip_prefix(BASE).expect("a file beside the origin");
        if r.file.is_empty() {
            assert_eq!(at, name);
        } else {
            assert!(r.beside, "{r:?}");
            assert_eq!(r.file, at);
        }
        match std::fs::read(dir.join(at)) {
            Ok(file) => serve(&file)(&Request {
                file: String::new(),
                ..r.clone()
            }),
            Err(_) => Reply::NotFound,
        }
    };
    drive_opener(open(&format!("{BASE}{name}")), traffic, &mut server)
}

#[cfg(feature = "fs")]
#[test]
fn a_model_is_a_directory_or_a_gguf_file() {
    let dir = tempfile::tempdir().unwrap();
    split_gguf(dir.path());
    let first = "set-00001-of-00004.gguf";
    let mut traffic = Traffic::default();
    let model = drive_beside_as(dir.path(), first, &mut traffic, Opener::model).unwrap();
    assert_eq!(model.base(), Some(BASE));
    assert_eq!(model.config(), Some(&serde_json::json!({})));
    let set: Vec<_> = (1..=4)
        .map(|i| format!("set-0000{i}-of-00004.gguf"))
        .collect();
    assert_eq!(model.files(), set);
    assert_eq!(model.source().tensors().len(), 4);
    // Anything else is a directory, named with its trailing '/'.
    let mut none = |_: &Request| Reply::NotFound;
    for origin in ["https://host/org/model", "https://host/org/model/"] {
        let e = drive_opener(Opener::model(origin), &mut Traffic::default(), &mut none)
            .err()
            .unwrap();
        assert_eq!(
            (e.code(), e.path()),
            ("ERR_NOT_FOUND", Some("https://host/org/model/config.json"))
        );
    }
}

#[cfg(feature = "fs")]
#[test]
fn a_split_gguf_set_opens_by_url_as_one_file_as_it_does_locally() {
    let dir = tempfile::tempdir().unwrap();
    let paths = split_gguf(dir.path());
    assert_eq!(paths.len(), 4, "{paths:?}");
    let first = "set-00001-of-00004.gguf";
    let options = &mut crate::source::OpenOptions::with_backend(Default::default());
    let local = GgufSource::open(&dir.path().join(first), options).unwrap();
    let mut traffic = Traffic::default();
    let remote = drive_beside(dir.path(), first, &mut traffic).unwrap();
    let names: Vec<_> = local.tensors().iter().map(|t| t.name.clone()).collect();
    assert_eq!(names, ["a", "b", "c", "d"]);
    let listed = |s: &dyn TensorSource| format!("{:?}", s.tensors());
    assert_eq!(listed(remote.source()), listed(&local));
    assert_eq!(
        remote.source().metadata().to_json(),
        local.metadata().to_json()
    );
    let total: u64 = paths.iter().map(|p| p.metadata().unwrap().len()).sum();
    assert_eq!(remote.byte_length(), total);
    for name in &names {
        let spans = remote.spans(name).unwrap();
        let expected = local.file_of(name).unwrap();
        assert_eq!(spans[0].url.rsplit('/').next(), Some(expected), "{name}");
        let served = served_by(&remote, name, &|f| {
            let f = if f.is_empty() { first } else { f };
            std::fs::read(dir.path().join(f)).unwrap()
        });
        assert_eq!(served, served_locally(&local, name), "{name}");
    }
    // One first range per file: every file here is smaller than it.
    assert_eq!(traffic.requests, 4, "{traffic:?}");

    // A missing or foreign later file: the local errors, naming that file's URL.
    let failures = |dir: &Path| {
        let options = &mut crate::source::OpenOptions::with_backend(Default::default());
        let local = GgufSource::open(&dir.join(first), options).err().unwrap();
        let remote = drive_beside(dir, first, &mut Traffic::default())
            .err()
            .unwrap();
        let local_path = local
            .path()
            .unwrap()
            .replace(&format!("{}/", dir.display()), BASE);
        assert_eq!(
            (remote.code(), remote.detail(), remote.path()),
            (local.code(), local.detail(), Some(local_path.as_str()))
        );
        remote
    };
    let third = dir.path().join("set-00004-of-00004.gguf");
    let held = std::fs::read(&third).unwrap();
    std::fs::remove_file(&third).unwrap();
    let e = failures(dir.path());
    assert_eq!(e.code(), "ERR_INVALID_GGUF");
    assert!(e.detail().contains("file 4 of the 4"), "{e}");
    std::fs::write(&third, &held).unwrap();
    std::fs::copy(dir.path().join(first), &third).unwrap();
    let e = failures(dir.path());
    assert!(e.detail().contains("belongs to another split GGUF"), "{e}");
    // A later file opened first names the first.
    let e = drive_beside(
        dir.path(),
        "set-00002-of-00004.gguf",
        &mut Traffic::default(),
    )
    .err()
    .unwrap();
    assert_eq!(e.code(), "ERR_INVALID_GGUF");
    assert!(e.detail().contains("'set-00001-of-00004.gguf'"), "{e}");
}

#[test]
fn a_split_gguf_header_claiming_65535_files_costs_a_few_requests() {
    let specs = [GgufTensorSpec::new("a", vec![4], GgmlType::F32)];
    let mut metadata = standard_metadata("test", "t", &specs);
    metadata.push(("split.no".into(), GgufValue::U16(0)));
    metadata.push(("split.count".into(), GgufValue::U16(u16::MAX)));
    metadata.push(("split.tensors.count".into(), GgufValue::I32(1 << 20)));
    let mut first = Vec::new();
    let view = TensorView::from_f32("a", vec![4], &[1.0, 2.0, 3.0, 4.0]).unwrap();
    write_gguf(&mut first, &metadata, &specs, |_, _| Ok(view.clone())).unwrap();
    let name = "x-00001-of-65535.gguf";
    let mut traffic = Traffic::default();
    let mut server = |r: &Request| {
        if r.file.is_empty() {
            serve(&first)(r)
        } else {
            Reply::NotFound
        }
    };
    let opener = Opener::new(&format!("{BASE}{name}"), None);
    let e = drive_opener(opener, &mut traffic, &mut server)
        .err()
        .unwrap();
    assert_eq!(e.code(), "ERR_INVALID_GGUF");
    assert!(e.detail().contains("file 2 of the 65535"), "{e}");
    assert_eq!(e.path(), Some(&*format!("{BASE}x-00002-of-65535.gguf")));
    assert!(traffic.requests <= 1 + FILES_AT_ONCE, "{traffic:?}");
}

thread_local! {
    /// The first range the openers of this test thread ask for.
    pub(super) static FIRST_RANGE: std::cell::Cell<u64> =
        const { std::cell::Cell::new(FIRST_RANGE_BYTES) };
}

/// `f`, its openers asking for `first` bytes first (a small file read by ranges).
fn with_first_range<T>(first: u64, f: impl FnOnce() -> T) -> T {
    FIRST_RANGE.with(|c| c.set(first));
    let out = f();
    FIRST_RANGE.with(|c| c.set(FIRST_RANGE_BYTES));
    out
}

#[cfg(feature = "fs")]
#[test]
fn checkpoint_fixtures_read_by_ranges_open_as_they_do_locally() {
    use crate::format::zip::{Method, ZipArchive};
    let (mut ranged, mut deflated, mut legacy) = (0, 0, 0);
    for path in fixtures() {
        let bytes = std::fs::read(&path).unwrap();
        let zip = format::zip::looks_like_zip(&bytes);
        if !zip && !crate::format::pytorch::looks_like_legacy(&bytes) {
            continue;
        }
        let what = path.display().to_string();
        let traffic = with_first_range(512, || same_as_local(&bytes, &what));
        let (remote, _) = with_first_range(512, || drive(&bytes, None));
        let Ok(remote) = remote else {
            continue; // A damaged fixture: it failed as it does locally.
        };
        // A file the first range holds is read whole.
        if remote.is_whole() {
            assert!(bytes.len() <= 512, "{what}");
            continue;
        }
        assert!(traffic.requests <= 6, "{what}: {traffic:?}");
        ranged += 1;
        if zip {
            let archive = ZipArchive::parse(&bytes).unwrap();
            deflated += usize::from(
                archive
                    .entries()
                    .iter()
                    .any(|e| e.method == Method::Deflate),
            );
        } else {
            legacy += 1;
        }
    }
    assert!(ranged >= 12, "{ranged} checkpoint fixtures read by ranges");
    assert!(
        deflated >= 1 && legacy >= 1,
        "{deflated} deflated, {legacy} legacy"
    );
}

/// Little-endian f32 bytes of `n` values from `seed`.
fn floats(n: u32, seed: u32) -> Vec<u8> {
    (0..n)
        .flat_map(|i| ((i.wrapping_mul(seed) % 1009) as f32 / 3.0).to_le_bytes())
        .collect()
}

/// An `.npz` of two 1 MiB arrays (one big-endian in Fortran order) and a small one.
fn large_npz() -> Vec<u8> {
    use crate::format::numpy::tests::{npy, npz};
    let header = |descr: &str, fortran: &str, shape: &str| {
        format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}")
    };
    let big_endian: Vec<u8> = floats(256 * 1024, 7)
        .chunks_exact(4)
        .flat_map(|b| [b[3], b[2], b[1], b[0]])
        .collect();
    npz(&[
        (
            "a",
            npy(
                1,
                &header("<f4", "False", "(512, 512)"),
                &floats(256 * 1024, 3),
            ),
        ),
        (
            "b",
            npy(1, &header(">f4", "True", "(256, 1024)"), &big_endian),
        ),
        (
            "small",
            npy(1, &header("<i2", "False", "(3,)"), &[1, 0, 2, 0, 3, 0]),
        ),
    ])
}

/// A torch zip checkpoint: a 1 MiB weight, its transposed view, and a small bias.
fn large_torch() -> Vec<u8> {
    torch_checkpoint("")
}

/// A pickled string key: `X`, its length, its bytes.
fn pickled_key(p: &mut Vec<u8>, key: &str) {
    p.push(b'X');
    p.extend_from_slice(&(key.len() as u32).to_le_bytes());
    p.extend_from_slice(key.as_bytes());
}

/// [`large_torch`]'s tensors, their names after `prefix`.
fn torch_checkpoint(prefix: &str) -> Vec<u8> {
    use crate::format::pytorch::tests::{tensor_pickle, torch_zip};
    let mut p = b"\x80\x02}(".to_vec();
    pickled_key(&mut p, &format!("{prefix}w"));
    p.extend(tensor_pickle("0", 256 * 1024, 0, &[512, 512], &[512, 1]));
    pickled_key(&mut p, &format!("{prefix}wt"));
    p.extend(tensor_pickle("0", 256 * 1024, 0, &[512, 512], &[1, 512]));
    pickled_key(&mut p, &format!("{prefix}b"));
    p.extend(tensor_pickle("1", 8, 2, &[4], &[1]));
    p.extend_from_slice(b"u.");
    torch_zip(&p, &[("0", &floats(256 * 1024, 5)), ("1", &floats(8, 11))])
}

/// The slice of `name` that `remote` serves from the bytes of its spans in `file`: asserted to
/// be the local `select`'s shape and bytes. The bytes its spans asked for.
fn sliced_as_locally(
    remote: &RemoteFile,
    local: &dyn TensorSource,
    file: &[u8],
    name: &str,
    ranges: &[SliceArg],
) -> u64 {
    let (shape, spans) = remote.slice_spans(name, ranges).unwrap();
    let want = local.select(name, ranges).unwrap();
    assert_eq!(shape, want.shape, "{name}");
    let stored: Vec<u8> = (spans.iter())
        .flat_map(|s| file[s.start as usize..(s.start + s.len) as usize].to_vec())
        .collect();
    let (shape, got) = remote.serve_slice(name, ranges, stored).unwrap();
    assert_eq!(shape, want.shape, "{name}");
    assert_eq!(got, want.bytes.into_bytes().unwrap().as_slice(), "{name}");
    spans.iter().map(|s| s.len).sum()
}

/// A legacy torch checkpoint: the same tensors as [`large_torch`]'s.
fn large_legacy() -> Vec<u8> {
    legacy_checkpoint("")
}

/// [`large_legacy`]'s tensors, their names after `prefix`.
fn legacy_checkpoint(prefix: &str) -> Vec<u8> {
    use crate::format::pytorch::tests::{legacy_file, legacy_id, tensor_pickle};
    let mut p = b"\x80\x02}(".to_vec();
    for (name, stride) in [("w", [512, 1]), ("wt", [1, 512])] {
        pickled_key(&mut p, &format!("{prefix}{name}"));
        let tensor = tensor_pickle("0", 256 * 1024, 0, &[512, 512], &stride);
        p.extend(legacy_id(tensor));
    }
    pickled_key(&mut p, &format!("{prefix}b"));
    p.extend(legacy_id(tensor_pickle("1", 8, 2, &[4], &[1])));
    p.extend_from_slice(b"u.");
    let (w, b) = (floats(256 * 1024, 5), floats(8, 11));
    legacy_file(&p, &[("0", 256 * 1024, &w), ("1", 8, &b)])
}

#[test]
fn a_large_checkpoint_is_read_by_its_headers() {
    let headers = FIRST_RANGE_BYTES + crate::format::zip::END_RECORDS_MAX_BYTES + (16 << 10);
    for (what, file, plain, strided) in [
        ("npz", large_npz(), "a", "b"),
        ("torch zip", large_torch(), "w", "wt"),
        ("legacy torch", large_legacy(), "w", "wt"),
    ] {
        let traffic = same_as_local(&file, what);
        assert!(traffic.bytes <= headers, "{what}: {traffic:?}");
        assert!(traffic.bytes * 4 < file.len() as u64, "{what}: {traffic:?}");
        assert!(traffic.requests <= 4, "{what}: {traffic:?}");
        let (remote, _) = drive(&file, None);
        let remote = remote.unwrap();
        assert!(!remote.is_whole(), "{what}");
        // What is asked for a tensor is its bytes: 1 MiB, in one span.
        let spans = remote.spans(plain).unwrap();
        assert_eq!((spans.len(), spans[0].len), (1, 1 << 20), "{what}");
        // A slice of a row-major tensor is its rows; a strided one reads its whole range and
        // is cut from it: both equal the local `select`.
        let local = format::open_bytes(file.clone(), None).unwrap();
        let ranges = [SliceArg::Range(3, 7)];
        for (name, whole) in [(plain, false), (strided, true)] {
            let asked = sliced_as_locally(&remote, local.as_ref(), &file, name, &ranges);
            let tensor_bytes = local.info(name).unwrap().stored_len;
            assert_eq!(asked == tensor_bytes, whole, "{what} {name}: {asked} bytes");
            let e = remote.serve_slice(name, &ranges, vec![0; 8]).unwrap_err();
            assert!(e.to_string().contains("8 bytes given"), "{what}: {e}");
        }
        // The source opened from the headers refuses (never panics on) a tensor it lacks.
        let e = remote.source().fetch(plain).err().unwrap();
        assert_eq!(e.code(), "ERR_INVALID_ARGUMENT", "{what}: {e}");
        // Bytes of the wrong length are refused.
        let e = remote.serve(plain, vec![0; 8]).err().unwrap();
        assert!(e.to_string().contains("8 bytes given"), "{what}: {e}");
    }
}

/// A sharded PyTorch directory (`pytorch_model.bin.index.json`) whose shards are zip or
/// legacy checkpoints larger than the first range: each shard read by its headers, each
/// tensor and slice by its own ranges of the shard holding it, as locally; a damaged shard
/// fails as it does locally.
#[cfg(feature = "fs")]
#[test]
fn a_sharded_pytorch_directory_reads_its_shards_by_ranges() {
    let index = "pytorch_model.bin.index.json";
    let shards = [
        "pytorch_model-00001-of-00002.bin",
        "pytorch_model-00002-of-00002.bin",
    ];
    let checkpoint_of = |what: &str, prefix: &str| match what {
        "zip" => torch_checkpoint(prefix),
        _ => legacy_checkpoint(prefix),
    };
    for what in ["zip", "legacy"] {
        let dir = model_dir();
        let mut map = serde_json::Map::new();
        let mut total = 0;
        for (i, shard) in shards.iter().enumerate() {
            let prefix = format!("layer.{i}.");
            let bytes = checkpoint_of(what, &prefix);
            total += bytes.len() as u64;
            write(dir.path(), shard, &bytes);
            for name in ["w", "wt", "b"] {
                map.insert(format!("{prefix}{name}"), serde_json::Value::from(*shard));
            }
        }
        let json = serde_json::json!({ "metadata": {}, "weight_map": map });
        write(dir.path(), index, json.to_string().as_bytes());
        let (remote, traffic) = same_dir_as_local(dir.path(), what);
        let remote = remote.unwrap();
        assert_eq!(remote.source().format(), WeightsFormat::PyTorch, "{what}");
        assert!(!remote.is_whole(), "{what}");
        assert!(traffic.bytes * 4 < total, "{what}: {traffic:?} of {total}");
        let spans = remote.spans("layer.1.w").unwrap();
        assert_eq!(spans.len(), 1, "{what}");
        assert_eq!(spans[0].url, format!("{BASE}{}", shards[1]), "{what}");
        assert_eq!(spans[0].len, 1 << 20, "{what}");
        let local = crate::pretrained::ModelDir::open(dir.path(), &mut |_| {}).unwrap();
        let ranges = [SliceArg::Range(3, 7)];
        for name in ["layer.1.w", "layer.1.wt", "layer.0.wt"] {
            let shard = remote.source().file_of(name).unwrap();
            let file = std::fs::read(dir.path().join(shard)).unwrap();
            sliced_as_locally(&remote, local.weights(), &file, name, &ranges);
        }
        // The second shard damaged: its last storage cut.
        let path = dir.path().join(shards[1]);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        let e = same_dir_as_local(dir.path(), what).0.err().unwrap();
        assert!(e.detail().contains(shards[1]), "{what}: {e}");
    }
}

/// An `.npz` of deflated members (`np.savez_compressed`): each array's `.npy` header
/// inflated from the first of its compressed bytes at open, each array fetched as its
/// compressed bytes and inflated; a slice is cut from the whole array.
#[test]
fn a_deflated_npz_is_read_by_its_headers_and_each_member_by_its_range() {
    use crate::format::numpy::tests::npy;
    use crate::format::zip::tests::{build, deflated};
    let header = |descr: &str, fortran: &str, shape: &str| {
        format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}")
    };
    // Values that deflate poorly, as trained weights do.
    let noise = |n: u32, seed: u32| -> Vec<u8> {
        (0..n)
            .flat_map(|i| (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 3).to_le_bytes())
            .collect()
    };
    let a = npy(
        1,
        &header("<f4", "False", "(512, 512)"),
        &noise(256 * 1024, 3),
    );
    let b = npy(
        1,
        &header(">i4", "True", "(256, 1024)"),
        &noise(256 * 1024, 7),
    );
    let small = npy(1, &header("<i2", "False", "(3,)"), &[1, 0, 2, 0, 3, 0]);
    let file = build(
        &[
            deflated("a.npy", &a),
            deflated("b.npy", &b),
            deflated("small.npy", &small),
        ],
        None,
        false,
    );
    assert!(file.len() > 1_500_000, "{}", file.len());
    let traffic = same_as_local(&file, "deflated npz");
    let headers = FIRST_RANGE_BYTES + crate::format::zip::END_RECORDS_MAX_BYTES + (64 << 10);
    assert!(traffic.bytes <= headers, "{traffic:?}");
    assert!(traffic.requests <= 5, "{traffic:?}");
    let (remote, _) = drive(&file, None);
    let remote = remote.unwrap();
    assert!(!remote.is_whole());
    let local = format::open_bytes(file.clone(), None).unwrap();
    let zip = crate::format::zip::ZipArchive::parse(&file).unwrap();
    for name in ["a", "b", "small"] {
        // Its span is the member's compressed bytes.
        let entry = zip.find(&format!("{name}.npy")).unwrap();
        let spans = remote.spans(name).unwrap();
        assert_eq!(spans.len(), 1);
        assert_eq!(
            (spans[0].start, spans[0].len),
            (entry.data_start, entry.compressed_len),
            "{name}"
        );
        let ranges = [SliceArg::Range(1, 2)];
        sliced_as_locally(&remote, local.as_ref(), &file, name, &ranges);
    }
    // Compressed bytes that are not the member's: the local inflation's coded errors.
    let span = &remote.spans("a").unwrap()[0];
    let mut wrong = file[span.start as usize..(span.start + span.len) as usize].to_vec();
    wrong[span.len as usize / 2] ^= 0x55;
    let e = remote.serve("a", wrong).err().unwrap();
    assert!(
        ["ERR_SIZE_MISMATCH", "ERR_INVALID_HEADER"].contains(&e.code()),
        "{e}"
    );
}

/// A legacy checkpoint whose counts lie, whose storages are cut or whose pickles are: the
/// local error by ranges, every request inside the file.
#[test]
fn a_damaged_legacy_checkpoint_fails_by_ranges_as_it_does_locally() {
    let file = large_legacy();
    let n = file.len();
    // The second storage: its count 40 bytes before the end (8 + 8 floats).
    let count_1 = n - 40;
    let mut lying = file.clone();
    lying[count_1..count_1 + 8].copy_from_slice(&9i64.to_le_bytes());
    let mut first_lies = file.clone();
    let count_0 = count_1 - (1 << 20) - 8;
    first_lies[count_0..count_0 + 8].copy_from_slice(&(-1i64).to_le_bytes());
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("the second count lies", lying, "ERR_SIZE_MISMATCH"),
        ("the first count lies", first_lies, "ERR_SIZE_MISMATCH"),
        (
            "the last storage cut",
            file[..n - 1].to_vec(),
            "ERR_INCOMPLETE_FILE",
        ),
        (
            "the last count cut",
            file[..count_1 + 4].to_vec(),
            "ERR_INCOMPLETE_FILE",
        ),
        (
            "the first storage cut",
            file[..count_0 + 100].to_vec(),
            "ERR_INCOMPLETE_FILE",
        ),
        (
            "the pickles cut",
            file[..count_0 - 20].to_vec(),
            "ERR_INCOMPLETE_FILE",
        ),
    ];
    for (what, file, code) in cases {
        let traffic = fails_inside_as_locally(what, &file, code);
        assert!(traffic.requests <= 8, "{what}: {traffic:?}");
        assert!(traffic.bytes < 16 << 10, "{what}: {traffic:?}");
    }
}

/// Pickles that run on past [`LEGACY_PICKLES_MAX_BYTES`] are refused once that much was read,
/// whatever length the file claims.
#[test]
fn legacy_pickles_are_read_by_ranges_up_to_their_cap() {
    let mut head = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.".to_vec();
    head.extend_from_slice(b"\x80\x02M\xe9\x03.");
    // The sys-info pickle: bytes as long as the file.
    head.extend_from_slice(b"\x80\x02\x8e");
    head.extend_from_slice(&(1u64 << 30).to_le_bytes());
    let total = (1u64 << 30) + head.len() as u64 + 1;
    let mut traffic = Traffic::default();
    let mut server = |r: &Request| {
        let Want::Range { start, end } = r.want else {
            panic!("{r:?}")
        };
        let bytes = (start..end.min(total))
            .map(|i| head.get(i as usize).copied().unwrap_or(0))
            .collect();
        Reply::Bytes {
            bytes,
            total: Some(total),
        }
    };
    let e = drive_with(None, &mut traffic, &mut server).err().unwrap();
    assert_eq!(e.code(), "ERR_HEADER_TOO_LARGE", "{e}");
    assert!(e.to_string().contains("past 64 MiB"), "{e}");
    assert_eq!(traffic.bytes, LEGACY_PICKLES_MAX_BYTES, "{traffic:?}");
    assert!(traffic.requests <= 12, "{traffic:?}");
}

/// A `.npy` is read by its header (the first range holds it), its array by its own range;
/// a big-endian Fortran-order one too, arranged and sliced as locally; one whose array does
/// not end the file is the local error.
#[test]
fn a_large_npy_is_read_by_its_header() {
    use crate::format::numpy::tests::npy;
    let header = |descr: &str, fortran: &str| {
        format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': (512, 512), }}")
    };
    let big_endian: Vec<u8> = floats(256 * 1024, 7)
        .chunks_exact(4)
        .flat_map(|b| [b[3], b[2], b[1], b[0]])
        .collect();
    for (what, file) in [
        (
            "row-major",
            npy(1, &header("<f4", "False"), &floats(256 * 1024, 3)),
        ),
        (
            "big-endian Fortran",
            npy(1, &header(">f4", "True"), &big_endian),
        ),
    ] {
        let traffic = same_as_local(&file, what);
        assert_eq!(traffic.requests, 1, "{what}: {traffic:?}");
        assert!(traffic.bytes <= FIRST_RANGE_BYTES, "{what}: {traffic:?}");
        let (remote, _) = drive(&file, None);
        let remote = remote.unwrap();
        assert!(!remote.is_whole(), "{what}");
        let spans = remote.spans("arr_0").unwrap();
        assert_eq!((spans.len(), spans[0].len), (1, 1 << 20), "{what}");
        let local = format::open_bytes(file.clone(), None).unwrap();
        let ranges = [SliceArg::Range(3, 7)];
        let (shape, spans) = remote.slice_spans("arr_0", &ranges).unwrap();
        let stored: Vec<u8> = (spans.iter())
            .flat_map(|s| file[s.start as usize..(s.start + s.len) as usize].to_vec())
            .collect();
        let want = local.select("arr_0", &ranges).unwrap();
        assert_eq!(shape, want.shape, "{what}");
        let (_, got) = remote.serve_slice("arr_0", &ranges, stored).unwrap();
        assert_eq!(got, want.bytes.into_bytes().unwrap().as_slice(), "{what}");
    }
    let mut long = npy(1, &header("<f4", "False"), &floats(256 * 1024, 3));
    long.extend_from_slice(&[0; 8]);
    let traffic = same_as_local(&long, "8 bytes after the array");
    assert_eq!(traffic.requests, 1, "{traffic:?}");
}

/// Drive an opener of `file` with its first range `first`, every request checked to lie
/// inside the file.
fn drive_inside(file: &[u8], first: u64) -> (Result<RemoteFile>, Traffic) {
    let mut traffic = Traffic::default();
    let mut honest = serve(file);
    let mut server = |r: &Request| {
        if let Want::Range { end, .. } = r.want {
            assert!(
                end <= file.len() as u64,
                "{r:?} past a {}-byte file",
                file.len()
            );
        }
        honest(r)
    };
    let result = with_first_range(first, || drive_with(None, &mut traffic, &mut server));
    (result, traffic)
}

/// `file` fails locally with `code`, and by ranges (a first range of 64 bytes, every request
/// inside the file) with the same code and message.
fn fails_inside_as_locally(what: &str, file: &[u8], code: &str) -> Traffic {
    let local = format::open_bytes(file.to_vec(), None).err().unwrap();
    assert_eq!(local.code(), code, "{what} locally: {local}");
    let (remote, traffic) = drive_inside(file, 64);
    let remote = remote.err().unwrap();
    assert_eq!(
        (remote.code(), remote.detail()),
        (local.code(), local.detail()),
        "{what}"
    );
    traffic
}

#[test]
fn hostile_zip_directories_fail_by_ranges_with_coded_errors() {
    use crate::format::zip::tests::{build, stored};
    let put = |bytes: &mut Vec<u8>, at: usize, v: &[u8]| bytes[at..at + v.len()].copy_from_slice(v);
    let find = |bytes: &[u8], sig: &[u8]| bytes.windows(4).rposition(|w| w == sig).unwrap();
    let npz = |zip64: bool| {
        let a = crate::format::numpy::tests::npy(
            1,
            "{'descr': '<f4', 'fortran_order': False, 'shape': (64,), }",
            &floats(64, 3),
        );
        build(&[stored("a.npy", &a), stored("b.npy", &a)], None, zip64)
    };
    let mut cases: Vec<(&str, Vec<u8>, &str)> = Vec::new();
    // A ZIP64 directory claiming 2^32 members.
    let mut f = npz(true);
    let eocd64 = find(&f, b"PK\x06\x06");
    put(&mut f, eocd64 + 24, &(1u64 << 32).to_le_bytes());
    put(&mut f, eocd64 + 32, &(1u64 << 32).to_le_bytes());
    let eocd = find(&f, b"PK\x05\x06");
    put(&mut f, eocd + 8, &[0xff; 4]);
    cases.push(("2^32 members", f, "ERR_SIZE_MISMATCH"));
    // A directory larger than the file.
    let mut f = npz(false);
    let eocd = find(&f, b"PK\x05\x06");
    put(&mut f, eocd + 12, &0x7fff_0000u32.to_le_bytes());
    cases.push(("directory past the end", f, "ERR_INVALID_OFFSETS"));
    // A member whose local header is past the end.
    let mut f = npz(false);
    let central = find(&f, b"PK\x01\x02");
    put(&mut f, central + 42, &0x7fff_0000u32.to_le_bytes());
    cases.push(("member past the end", f, "ERR_INVALID_OFFSETS"));
    // A torch data.pkl claiming more bytes than the file has, in both its headers.
    let mut f = large_torch();
    let central = f.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
    for at in [central + 20, central + 24, 18, 22] {
        put(&mut f, at, &0x3fff_0000u32.to_le_bytes());
    }
    cases.push(("data.pkl past the end", f, "ERR_INVALID_OFFSETS"));
    // A ZIP64 locator pointing outside the file.
    let mut f = npz(true);
    let locator = find(&f, b"PK\x06\x07");
    put(&mut f, locator + 8, &(u64::MAX / 2).to_le_bytes());
    cases.push(("ZIP64 record outside", f, "ERR_INVALID_HEADER"));
    for (what, file, code) in cases {
        let traffic = fails_inside_as_locally(what, &file, code);
        assert!(traffic.requests <= 4, "{what}: {traffic:?}");
        assert!(
            traffic.bytes <= file.len() as u64 + 64,
            "{what}: {traffic:?}"
        );
    }
    // A ZIP64 record inside the file but before the end records' bytes: refused, not read.
    let mut f = large_npz();
    let n = f.len();
    let end: Vec<u8> = f.split_off(find(&f, b"PK\x05\x06"));
    let cd = u32::from_le_bytes(end[16..20].try_into().unwrap()) as u64;
    let size = u32::from_le_bytes(end[12..16].try_into().unwrap()) as u64;
    f.extend_from_slice(b"PK\x06\x07\0\0\0\0");
    f.extend_from_slice(&16u64.to_le_bytes());
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&end);
    assert!(n > 200_000 && cd + size < n as u64);
    let (remote, traffic) = drive_inside(&f, 64);
    let e = remote.err().unwrap();
    assert_eq!(e.code(), "ERR_INVALID_HEADER", "{e}");
    assert!(e.to_string().contains("before the file's end"), "{e}");
    assert!(traffic.bytes < 100_000, "{traffic:?}");
}

#[cfg(feature = "fs")]
#[test]
fn a_sharded_index_naming_thousands_of_shards_asks_for_16_at_a_time() {
    // Thousands that do not exist: the first missing one ends the open, a few requests in.
    let dir = model_dir();
    let names: Vec<(String, String)> = (0..3000)
        .map(|i| (format!("w.{i}"), format!("s{i}.safetensors")))
        .collect();
    let map: Vec<(&str, &str)> = names
        .iter()
        .map(|(t, s)| (t.as_str(), s.as_str()))
        .collect();
    sharded_index(dir.path(), &map);
    let (remote, traffic) = same_dir_as_local(dir.path(), "3000 missing shards");
    assert_eq!(remote.err().unwrap().code(), "ERR_INVALID_MODEL");
    assert!(traffic.requests <= 8 + FILES_AT_ONCE, "{traffic:?}");
    // Forty that exist: every step asks for at most 16, and all open.
    let dir = model_dir();
    let names: Vec<(String, String)> = (0..40)
        .map(|i| (format!("w.{i}"), format!("s{i}.safetensors")))
        .collect();
    for (t, s) in &names {
        let view = TensorView::from_f32(t, vec![2], &[1.0, 2.0]).unwrap();
        write(dir.path(), s, &serialize(&[view], None).unwrap());
    }
    let map: Vec<(&str, &str)> = names
        .iter()
        .map(|(t, s)| (t.as_str(), s.as_str()))
        .collect();
    sharded_index(dir.path(), &map);
    same_dir_as_local(dir.path(), "40 shards").0.unwrap();
    let mut opener = Opener::directory(BASE);
    let mut server = serve_dir(dir.path());
    let mut widest = 0;
    let file = loop {
        match opener.step().unwrap() {
            Step::Fetch(requests) => {
                widest = widest.max(requests.len());
                for r in requests {
                    opener.reply(r.id, server(&r)).unwrap();
                }
            }
            Step::Ready(file) => break file,
        }
    };
    assert_eq!(file.source().tensors().len(), 40);
    assert_eq!(widest, FILES_AT_ONCE);
}
