use super::*;
use crate::dtype::DType;
use crate::format::safetensors::{self as st, SafeTensors};
use crate::fsutil::WriteOptions;
use std::collections::BTreeMap;

fn tensor(name: &str, values: &[f32]) -> TensorView<'static> {
    TensorView::from_f32(name, vec![values.len()], values).unwrap()
}

fn write_config(dir: &Path) {
    std::fs::write(
        dir.join(CONFIG_FILE),
        r#"{"model_type":"llama","hidden_size":4,"camelCase":true}"#,
    )
    .unwrap();
}

fn open(dir: &Path) -> Result<ModelDir> {
    ModelDir::open(dir, &mut |_| {})
}

#[test]
fn single_file_and_discovery_order() {
    let d = tempfile::tempdir().unwrap();
    write_config(d.path());
    st::save_file(
        &d.path().join("model.safetensors"),
        &[tensor("m", &[1.0])],
        None,
        WriteOptions::default(),
    )
    .unwrap();
    let m = open(d.path()).unwrap();
    assert_eq!(
        (m.format(), m.files()),
        (
            WeightFormat::SafeTensors,
            &["model.safetensors".to_string()][..]
        )
    );
    assert_eq!(m.config()["camelCase"], serde_json::json!(true));
    // weights.safetensors wins over model.safetensors.
    st::save_file(
        &d.path().join("weights.safetensors"),
        &[tensor("w", &[2.0])],
        None,
        WriteOptions::default(),
    )
    .unwrap();
    let m = open(d.path()).unwrap();
    assert_eq!(m.files(), &["weights.safetensors".to_string()]);
    assert_eq!(m.tensor_names().collect::<Vec<_>>(), vec!["w"]);
}

#[test]
fn sharded_round_trip_and_progress() {
    let d = tempfile::tempdir().unwrap();
    let tensors: Vec<TensorView> = (0..6)
        .map(|i| tensor(&format!("layer.{i}"), &[i as f32; 10]))
        .collect();
    let config = serde_json::json!({"model_type": "x"});
    let saved = save_model_dir(
        d.path(),
        &config,
        &tensors,
        None,
        &SaveOptions {
            max_shard_bytes: Some(80),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        saved.files,
        [
            "model-00001-of-00003.safetensors",
            "model-00002-of-00003.safetensors",
            "model-00003-of-00003.safetensors",
            INDEX_FILE
        ]
    );
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.path().join(INDEX_FILE)).unwrap()).unwrap();
    assert_eq!(index["metadata"], serde_json::json!({"total_size": 240}));
    assert_eq!(
        index["weight_map"]["layer.5"],
        "model-00003-of-00003.safetensors"
    );
    let mut events = Vec::new();
    let m = ModelDir::open(d.path(), &mut |p| events.push(p)).unwrap();
    assert_eq!(m.format(), WeightFormat::ShardedSafeTensors);
    assert_eq!(events.len(), 3);
    assert_eq!(events[2].loaded_bytes, events[2].total_bytes);
    assert!(events[0].loaded_bytes < events[1].loaded_bytes);
    for t in &tensors {
        assert_eq!(&m.view(&t.name).unwrap(), t);
    }
    assert_eq!(m.num_parameters(), 60);
    // Saving again as one file replaces the shards and the index.
    let again = tempfile::tempdir().unwrap();
    m.save(again.path(), &SaveOptions::default()).unwrap();
    save_model_dir(d.path(), &config, &tensors, None, &SaveOptions::default()).unwrap();
    assert_eq!(names(d.path()), ["config.json", "model.safetensors"]);
    assert_eq!(
        open(again.path()).unwrap().view("layer.3").unwrap(),
        tensors[3]
    );
}

fn sharded_dir(weight_map: serde_json::Value) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    write_config(d.path());
    st::save_file(
        &d.path().join("a.safetensors"),
        &[tensor("x", &[1.0]), tensor("y", &[2.0])],
        None,
        WriteOptions::default(),
    )
    .unwrap();
    st::save_file(
        &d.path().join("b.safetensors"),
        &[tensor("z", &[3.0])],
        None,
        WriteOptions::default(),
    )
    .unwrap();
    std::fs::write(
        d.path().join(INDEX_FILE),
        serde_json::json!({ "weight_map": weight_map }).to_string(),
    )
    .unwrap();
    d
}

#[test]
fn sharded_errors() {
    let ok = sharded_dir(
        serde_json::json!({"x": "a.safetensors", "y": "a.safetensors", "z": "b.safetensors"}),
    );
    assert_eq!(open(ok.path()).unwrap().tensor_names().count(), 3);

    for bad in [
        "/etc/passwd",
        "../a.safetensors",
        "sub/../../a.safetensors",
        "",
        "./a.safetensors",
        "sub/./a.safetensors",
        "sub//a.safetensors",
        "a.safetensors/",
        "sub\\a.safetensors",
        "C:a.safetensors",
        "file:a.safetensors",
        "a\0.safetensors",
    ] {
        let d = sharded_dir(serde_json::json!({ "x": bad }));
        assert_eq!(
            open(d.path()).err().unwrap().code(),
            "ERR_UNSAFE_PATH",
            "{bad}"
        );
    }
    let outside = tempfile::tempdir().unwrap();
    st::save_file(
        &outside.path().join("evil.safetensors"),
        &[tensor("x", &[1.0])],
        None,
        WriteOptions::default(),
    )
    .unwrap();
    // A symlink placed in the directory is its owner's choice: followed, wherever it leads
    // (the Hugging Face cache links every file into ../../blobs/).
    let d = sharded_dir(serde_json::json!({ "x": "link.safetensors" }));
    std::os::unix::fs::symlink(
        outside.path().join("evil.safetensors"),
        d.path().join("link.safetensors"),
    )
    .unwrap();
    assert_eq!(open(d.path()).unwrap().files(), ["link.safetensors"]);
    let d = sharded_dir(serde_json::json!({ "x": "out/evil.safetensors" }));
    std::os::unix::fs::symlink(outside.path(), d.path().join("out")).unwrap();
    assert_eq!(
        open(d.path()).unwrap().view("x").unwrap(),
        tensor("x", &[1.0])
    );

    let d = sharded_dir(serde_json::json!({"x": "b.safetensors"}));
    let e = open(d.path()).err().unwrap();
    assert_eq!((e.code(), e.tensor()), ("ERR_INVALID_MODEL", Some("x")));

    let d = sharded_dir(serde_json::json!({"x": "a.safetensors", "z": "b.safetensors"}));
    st::save_file(
        &d.path().join("b.safetensors"),
        &[tensor("z", &[3.0]), tensor("y", &[0.0])],
        None,
        WriteOptions::default(),
    )
    .unwrap();
    let e = open(d.path()).err().unwrap();
    assert_eq!((e.code(), e.tensor()), ("ERR_INVALID_MODEL", Some("y")));

    let d = sharded_dir(serde_json::json!({"x": "missing.safetensors"}));
    assert_eq!(open(d.path()).err().unwrap().code(), "ERR_INVALID_MODEL");

    // A damaged SafeTensors shard fails validation, named.
    let d = sharded_dir(serde_json::json!({"x": "a.safetensors", "z": "b.safetensors"}));
    std::fs::write(
        d.path().join("b.safetensors"),
        b"\x40\0\0\0\0\0\0\0{\"garbage",
    )
    .unwrap();
    let e = open(d.path()).err().unwrap();
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    assert!(e.to_string().contains("b.safetensors"), "{e}");
    // A shard of text is what it is.
    std::fs::write(d.path().join("b.safetensors"), b"garbage!garbage!").unwrap();
    let e = open(d.path()).err().unwrap();
    assert_eq!(e.code(), "ERR_UNKNOWN_FORMAT");
    assert!(
        e.to_string().contains("b.safetensors") && e.detail().contains("a text file"),
        "{e}"
    );

    let d = sharded_dir(serde_json::json!({"x": 5}));
    assert_eq!(open(d.path()).err().unwrap().code(), "ERR_INVALID_MODEL");

    // A shard that is no weights format at all is reported as what it is, at its path (the
    // shard_index fuzz target found an index naming config.json).
    let d = sharded_dir(serde_json::json!({"x": "config.json"}));
    let e = open(d.path()).err().unwrap();
    assert_eq!(e.code(), "ERR_UNKNOWN_FORMAT");
    let config = d.path().join("config.json");
    assert_eq!(e.path(), config.to_str());
    assert!(e.detail().contains("JSON document"), "{e}");

    // An index named as a shard — itself, or another one — is refused, not opened in turn
    // (an index naming itself recursed until the stack overflowed).
    for shard in [INDEX_FILE, "other.index.json"] {
        let d = sharded_dir(serde_json::json!({ "x": shard }));
        std::fs::copy(d.path().join(INDEX_FILE), d.path().join("other.index.json")).unwrap();
        let e = open(d.path()).err().unwrap();
        assert_eq!(e.code(), "ERR_INVALID_MODEL", "{shard}: {e}");
        assert!(e.detail().contains("itself a sharded index"), "{e}");
    }
}

#[test]
fn config_and_weights_errors() {
    let d = tempfile::tempdir().unwrap();
    let e = open(d.path()).err().unwrap();
    assert_eq!(e.code(), "ERR_NOT_FOUND");
    assert!(e.to_string().contains("config.json"));
    std::fs::write(d.path().join(CONFIG_FILE), "{not json").unwrap();
    assert_eq!(open(d.path()).err().unwrap().code(), "ERR_INVALID_MODEL");
    write_config(d.path());
    let e = open(d.path()).err().unwrap();
    assert_eq!(e.code(), "ERR_NO_WEIGHTS");
    assert!(e.detail().contains("weights.mlx") && e.detail().contains(INDEX_FILE));
    assert_eq!(
        open(&d.path().join("nope")).err().unwrap().code(),
        "ERR_NOT_FOUND"
    );
    assert_eq!(
        open(&d.path().join(CONFIG_FILE)).err().unwrap().code(),
        "ERR_INVALID_ARGUMENT"
    );
    let m = {
        st::save_file(
            &d.path().join("weights.safetensors"),
            &[tensor("w", &[2.0])],
            None,
            WriteOptions::default(),
        )
        .unwrap();
        open(d.path()).unwrap()
    };
    assert_eq!(m.view("nope").err().unwrap().code(), "ERR_NOT_FOUND");
    assert_eq!(m.info("w").unwrap().dtype, DType::F32);
}

/// config.json is read only where it resolves inside the directory: a symlink to another
/// file (whose values would reach `model.config` and the directories a conversion writes)
/// is refused, one to a file of the directory or a Hugging Face cache blob is read.
#[cfg(unix)]
#[test]
fn config_json_resolving_outside_the_directory_is_refused() {
    use std::os::unix::fs::symlink;
    let tmp = tempfile::tempdir().unwrap();
    let secret = tmp.path().join("credentials.json");
    std::fs::write(&secret, r#"{"token": "hf_secret"}"#).unwrap();
    let d = tmp.path().join("model");
    std::fs::create_dir(&d).unwrap();
    st::save_file(
        &d.join("weights.safetensors"),
        &[tensor("w", &[2.0])],
        None,
        WriteOptions::default(),
    )
    .unwrap();
    symlink(&secret, d.join(CONFIG_FILE)).unwrap();
    let e = open(&d).err().unwrap();
    assert_eq!(e.code(), "ERR_UNSAFE_PATH", "{e}");
    assert!(e.detail().contains("outside the model directory"), "{e}");
    assert_eq!(
        e.path(),
        Some(d.join(CONFIG_FILE).display().to_string().as_str())
    );
    std::fs::remove_file(d.join(CONFIG_FILE)).unwrap();
    std::fs::write(d.join("real-config.json"), "{\"a\": 1}").unwrap();
    symlink("real-config.json", d.join(CONFIG_FILE)).unwrap();
    assert_eq!(open(&d).unwrap().config(), &serde_json::json!({"a": 1}));
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn layers(version: f32) -> Vec<TensorView<'static>> {
    (0..6)
        .map(|i| tensor(&format!("layer.{i}"), &[version * 100.0 + i as f32; 10]))
        .collect()
}

fn sharded(max: u64) -> SaveOptions {
    SaveOptions {
        max_shard_bytes: Some(max),
        ..Default::default()
    }
}

/// The entries of `dir`'s parent that a save of `dir` made beside it.
fn leftovers(dir: &Path) -> Vec<String> {
    let name = dir.file_name().unwrap().to_str().unwrap();
    names(dir.parent().unwrap())
        .into_iter()
        .filter(|n| n.starts_with(&format!(".{name}.")))
        .collect()
}

#[test]
fn a_save_writes_what_transformers_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("model");
    let config = serde_json::json!({"model_type": "x", "version": 1});
    let mut metadata = BTreeMap::new();
    metadata.insert("mine".to_string(), "kept".to_string());
    let options = SaveOptions {
        metadata: Some(metadata),
        ..sharded(80)
    };
    save_model_dir(&d, &config, &layers(1.0), None, &options).unwrap();
    // config.json as given, and nothing else of ours in any file.
    let text = std::fs::read_to_string(d.join(CONFIG_FILE)).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text).unwrap(),
        config
    );
    let m = open(&d).unwrap();
    assert_eq!(m.config(), &config);
    for f in &m.files()[..3] {
        let shard = SafeTensors::open(&d.join(f), Backend::Mmap).unwrap();
        let mut want = BTreeMap::new();
        want.insert("format".to_string(), "pt".to_string());
        want.insert("mine".to_string(), "kept".to_string());
        assert_eq!(shard.metadata(), Some(&want), "{f}");
    }
    // The caller's own format stands.
    let mut mlx_format = BTreeMap::new();
    mlx_format.insert("format".to_string(), "mlx".to_string());
    let options = SaveOptions {
        metadata: Some(mlx_format.clone()),
        ..Default::default()
    };
    save_model_dir(&d, &config, &layers(2.0), None, &options).unwrap();
    let file = SafeTensors::open(&d.join("model.safetensors"), Backend::Mmap).unwrap();
    assert_eq!(file.metadata(), Some(&mlx_format));
    assert_eq!(names(&d), ["config.json", "model.safetensors"]);
    assert!(leftovers(&d).is_empty(), "{:?}", leftovers(&d));
    // MLX-Node's layout on request.
    let options = SaveOptions {
        mlx: true,
        ..Default::default()
    };
    save_model_dir(&d, &config, &layers(3.0), None, &options).unwrap();
    assert_eq!(names(&d), ["config.json", "weights.mlx"]);
    assert_eq!(open(&d).unwrap().view("layer.5").unwrap(), layers(3.0)[5]);
}

#[test]
#[cfg(unix)]
fn a_save_replaces_the_directory_whole_and_keeps_what_is_not_weights() {
    use std::os::unix::fs::{symlink, MetadataExt};
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("model");
    let config = serde_json::json!({"v": 1});
    save_model_dir(&d, &config, &layers(1.0), None, &sharded(80)).unwrap();
    // The owner's files, and weight files of other layouts.
    std::fs::write(d.join("README.md"), "# mine").unwrap();
    std::fs::create_dir_all(d.join("onnx")).unwrap();
    std::fs::write(d.join("onnx/model.onnx"), "onnx").unwrap();
    symlink("README.md", d.join("MODEL_CARD.md")).unwrap();
    std::fs::write(d.join("weights.safetensors"), "old").unwrap();
    std::fs::write(d.join("pytorch_model.bin"), "old").unwrap();
    std::fs::write(d.join("pytorch_model-00001-of-00002.bin"), "old").unwrap();
    let before = std::fs::metadata(&d).unwrap().ino();
    let readme = std::fs::metadata(d.join("README.md")).unwrap().ino();
    save_model_dir(&d, &config, &layers(2.0), None, &SaveOptions::default()).unwrap();
    assert_ne!(
        std::fs::metadata(&d).unwrap().ino(),
        before,
        "a new directory"
    );
    assert_eq!(
        names(&d),
        [
            "MODEL_CARD.md",
            "README.md",
            "config.json",
            "model.safetensors",
            "onnx"
        ]
    );
    // Files are the same files (hard links), links the same links, folders rebuilt.
    assert_eq!(
        std::fs::metadata(d.join("README.md")).unwrap().ino(),
        readme
    );
    assert_eq!(
        std::fs::read_link(d.join("MODEL_CARD.md")).unwrap(),
        Path::new("README.md")
    );
    assert_eq!(
        std::fs::read_to_string(d.join("onnx/model.onnx")).unwrap(),
        "onnx"
    );
    assert_eq!(open(&d).unwrap().view("layer.1").unwrap(), layers(2.0)[1]);
    assert!(leftovers(&d).is_empty(), "{:?}", leftovers(&d));
    // Through a symlink to the directory: the directory it names is replaced, the link stays.
    symlink(&d, tmp.path().join("link")).unwrap();
    save_model_dir(
        &tmp.path().join("link"),
        &config,
        &layers(3.0),
        None,
        &SaveOptions::default(),
    )
    .unwrap();
    assert!(std::fs::symlink_metadata(tmp.path().join("link"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(open(&d).unwrap().view("layer.1").unwrap(), layers(3.0)[1]);
    // Not a directory: refused.
    std::fs::write(tmp.path().join("file"), "x").unwrap();
    let e = save_model_dir(
        &tmp.path().join("file"),
        &config,
        &layers(1.0),
        None,
        &SaveOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_ARGUMENT", "{e}");
}

#[test]
#[cfg(unix)]
fn a_save_copies_the_models_companion_files_that_may_be_read() {
    use std::os::unix::fs::symlink;
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("source");
    std::fs::create_dir_all(&src).unwrap();
    write_config(&src);
    st::save_file(
        &src.join("model.safetensors"),
        &layers(1.0),
        None,
        WriteOptions::default(),
    )
    .unwrap();
    std::fs::write(src.join("tokenizer.json"), r#"{"model": {}}"#).unwrap();
    std::fs::write(
        src.join("generation_config.json"),
        r#"{"do_sample": false}"#,
    )
    .unwrap();
    std::fs::write(tmp.path().join("secret"), "AWS_SECRET_ACCESS_KEY=x").unwrap();
    symlink("../secret", src.join("chat_template.jinja")).unwrap();
    symlink("/proc/self/environ", src.join("tokenizer_config.json")).unwrap();
    let m = open(&src).unwrap();
    let out = tmp.path().join("out");
    let saved = m.save(&out, &SaveOptions::default()).unwrap();
    assert_eq!(
        saved.companions,
        ["tokenizer.json", "generation_config.json"]
    );
    assert_eq!(saved.warnings.len(), 2, "{:?}", saved.warnings);
    assert!(saved.warnings.iter().any(|w| w.contains("chat_template.jinja") && w.contains("outside the model directory")), "{:?}", saved.warnings);
    assert!(
        saved
            .warnings
            .iter()
            .any(|w| w.contains("tokenizer_config.json") && w.contains("/proc")),
        "{:?}",
        saved.warnings
    );
    assert_eq!(
        names(&out),
        [
            "config.json",
            "generation_config.json",
            "model.safetensors",
            "tokenizer.json"
        ]
    );
    assert_eq!(
        std::fs::read_to_string(out.join("tokenizer.json")).unwrap(),
        r#"{"model": {}}"#
    );
    // Saved over its own directory: the companions are copied again, and the refused links,
    // never read, stay what they were (the owner's entries, carried over as links).
    m.save(&src, &SaveOptions::default()).unwrap();
    assert_eq!(
        names(&src),
        [
            "chat_template.jinja",
            "config.json",
            "generation_config.json",
            "model.safetensors",
            "tokenizer.json",
            "tokenizer_config.json"
        ]
    );
    assert_eq!(
        std::fs::read_link(src.join("tokenizer_config.json")).unwrap(),
        Path::new("/proc/self/environ")
    );
    assert_eq!(open(&src).unwrap().view("layer.2").unwrap(), layers(1.0)[2]);
}

/// A save swapping the directory while a reader reads it: the reader reads it again and
/// gets one whole version, never config of one and weights of the other.
#[test]
#[cfg(target_os = "linux")]
fn a_reader_across_a_swap_reads_again() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("model");
    let config_a = serde_json::json!({"version": "a"});
    let config_b = serde_json::json!({"version": "b"});
    save_model_dir(&d, &config_a, &layers(1.0), None, &sharded(80)).unwrap();
    let mut swapped = false;
    let m = ModelDir::open(&d, &mut |_| {
        // After config.json and the first shard were read: another save's swap.
        if !swapped {
            swapped = true;
            save_model_dir(&d, &config_b, &layers(2.0), None, &sharded(80)).unwrap();
        }
    })
    .unwrap();
    assert!(swapped);
    assert_eq!(m.config(), &config_b);
    for t in layers(2.0) {
        assert_eq!(m.view(&t.name).unwrap(), t);
    }
}

/// What a save killed before its swap leaves: the old directory as it was, and its
/// temporary directory beside it, which a later save of the same target removes (not one of
/// a save still under way).
#[test]
fn an_interrupted_save_leaves_the_old_model_and_the_next_cleans_up() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("model");
    let config = serde_json::json!({"v": 1});
    save_model_dir(&d, &config, &layers(1.0), None, &SaveOptions::default()).unwrap();
    let stale = tmp.path().join(".model.0123456789abcdef.saving");
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("model.safetensors"), "half").unwrap();
    let unrelated = tmp.path().join(".model.notours.saving");
    std::fs::create_dir(&unrelated).unwrap();
    // Another save's, under way (it holds its lock), untouched for long too.
    let live = tmp.path().join(".model.fedcba9876543210.saving");
    let lock = save::Staging::create(live.clone()).unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    for d in [&stale, &live] {
        std::fs::File::open(d).unwrap().set_modified(old).unwrap();
    }
    assert_eq!(open(&d).unwrap().view("layer.0").unwrap(), layers(1.0)[0]);
    save_model_dir(&d, &config, &layers(2.0), None, &SaveOptions::default()).unwrap();
    assert!(!stale.exists());
    assert!(unrelated.exists(), "only what a save names is removed");
    assert!(live.exists(), "a save under way keeps its directory");
    drop(lock);
    assert_eq!(open(&d).unwrap().view("layer.0").unwrap(), layers(2.0)[0]);
}

#[test]
fn a_failed_save_leaves_the_old_model_and_no_files_of_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("model");
    let config = serde_json::json!({"v": 1});
    save_model_dir(&d, &config, &layers(1.0), None, &sharded(80)).unwrap();
    let before = names(&d);
    // Weights the writer refuses (two tensors of one name), after some were written.
    let bad = [tensor("dup", &[1.0]), tensor("dup", &[2.0])];
    assert!(save_model_dir(&d, &config, &bad, None, &SaveOptions::default()).is_err());
    assert_eq!(names(&d), before);
    assert!(leftovers(&d).is_empty(), "{:?}", leftovers(&d));
    assert_eq!(open(&d).unwrap().view("layer.2").unwrap(), layers(1.0)[2]);
}

#[test]
fn oversized_or_endless_json_is_refused_at_the_cap() {
    let d = tempfile::tempdir().unwrap();
    let mut big = b"{\"pad\": \"".to_vec();
    big.resize(CONFIG_MAX_BYTES as usize + 10, b'x');
    big.extend_from_slice(b"\"}");
    std::fs::write(d.path().join(CONFIG_FILE), &big).unwrap();
    let e = open(d.path()).err().unwrap();
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    assert!(
        e.detail().contains("config.json is larger than 16 MiB"),
        "{e}"
    );
    // A "regular file" without a real size: /proc/self/pagemap says 0 and reads forever.
    // As config.json it is not read at all (it resolves into /proc); as an index, to the cap.
    #[cfg(target_os = "linux")]
    if std::fs::File::open("/proc/self/pagemap").is_ok() {
        std::fs::remove_file(d.path().join(CONFIG_FILE)).unwrap();
        std::os::unix::fs::symlink("/proc/self/pagemap", d.path().join(CONFIG_FILE)).unwrap();
        let e = open(d.path()).err().unwrap();
        assert_eq!(e.code(), "ERR_UNSAFE_PATH", "{e}");
        assert!(e.detail().contains("resolves to /proc/"), "{e}");
        std::fs::remove_file(d.path().join(CONFIG_FILE)).unwrap();
        write_config(d.path());
        std::os::unix::fs::symlink("/proc/self/pagemap", d.path().join(INDEX_FILE)).unwrap();
        let e = open(d.path()).err().unwrap();
        assert_eq!(e.code(), "ERR_INVALID_MODEL", "{e}");
        assert!(
            e.detail().contains("a sharded index is larger than 64 MiB"),
            "{e}"
        );
    }
}
