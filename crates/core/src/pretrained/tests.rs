use super::*;
use crate::dtype::DType;
use crate::format::safetensors::SafeTensors;
use crate::fsutil::WriteOptions;

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
    let written = save_model_dir(
        d.path(),
        &config,
        &tensors,
        &SaveOptions {
            max_shard_bytes: Some(80),
            ..Default::default()
        },
    )
    .unwrap();
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.path().join(INDEX_FILE)).unwrap()).unwrap();
    let save = index["metadata"][SAVE_ID_KEY].as_str().unwrap().to_string();
    assert_eq!(save.len(), 16);
    assert_eq!(
        written,
        vec![
            format!("model-00001-of-00003-{save}.safetensors"),
            format!("model-00002-of-00003-{save}.safetensors"),
            format!("model-00003-of-00003-{save}.safetensors"),
            INDEX_FILE.to_string()
        ]
    );
    assert_eq!(index["metadata"]["total_size"], 240);
    assert_eq!(
        index["weight_map"]["layer.5"],
        format!("model-00003-of-00003-{save}.safetensors")
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
    // Saving again as one file removes the shards and the index.
    let again = tempfile::tempdir().unwrap();
    m.save(again.path(), &SaveOptions::default()).unwrap();
    save_model_dir(d.path(), &config, &tensors, &SaveOptions::default()).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, vec!["config.json", "weights.safetensors"]);
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
    std::fs::write(d.path().join("b.safetensors"), b"\x40\0\0\0\0\0\0\0{\"garbage").unwrap();
    let e = open(d.path()).err().unwrap();
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    assert!(e.to_string().contains("b.safetensors"), "{e}");
    // A shard of text is what it is.
    std::fs::write(d.path().join("b.safetensors"), b"garbage!garbage!").unwrap();
    let e = open(d.path()).err().unwrap();
    assert_eq!(e.code(), "ERR_UNKNOWN_FORMAT");
    assert!(e.to_string().contains("b.safetensors") && e.detail().contains("a text file"), "{e}");

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

#[test]
fn every_file_of_a_save_carries_its_id_and_the_config_hides_it() {
    let d = tempfile::tempdir().unwrap();
    let config = serde_json::json!({"model_type": "x", "version": 1});
    save_model_dir(d.path(), &config, &layers(1.0), &sharded(80)).unwrap();
    let text: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.path().join(CONFIG_FILE)).unwrap()).unwrap();
    let save = text[CONFIG_SAVE_ID_KEY].as_str().unwrap().to_string();
    let m = open(d.path()).unwrap();
    // model.config is the config as given: the id is bookkeeping.
    assert_eq!(m.config(), &config);
    for f in &m.files()[..3] {
        let shard = SafeTensors::open(&d.path().join(f), Backend::Mmap).unwrap();
        assert_eq!(shard.metadata().unwrap()[SAVE_ID_KEY], save);
    }
    // Saving again: new names, the old shards gone, a new id everywhere.
    save_model_dir(d.path(), &config, &layers(2.0), &sharded(80)).unwrap();
    let again = open(d.path()).unwrap();
    assert!(again.files().iter().all(|f| !m.files()[..3].contains(f)));
    assert_eq!(names(d.path()).len(), 5);
    assert_eq!(again.view("layer.0").unwrap(), layers(2.0)[0]);
    // Single-file and MLX layouts carry it in their metadata.
    for mlx in [false, true] {
        let options = SaveOptions {
            mlx,
            ..Default::default()
        };
        save_model_dir(d.path(), &config, &layers(3.0), &options).unwrap();
        let m = open(d.path()).unwrap();
        assert_eq!(m.view("layer.5").unwrap(), layers(3.0)[5]);
        assert_eq!(names(d.path()).len(), 2, "{:?}", names(d.path()));
    }
}

/// Old and new files of two saves side by side, as a kill between the renames (or a reader
/// between them) would find them: refused, never mixed.
#[test]
fn config_and_weights_of_different_saves_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let config_a = serde_json::json!({"version": "a"});
    let config_b = serde_json::json!({"version": "b"});
    let keep = tempfile::tempdir().unwrap();
    for (config, options) in [
        (&config_a, sharded(80)),
        (&config_a, SaveOptions::default()),
    ] {
        save_model_dir(d.path(), config, &layers(1.0), &options).unwrap();
        // The config of another save, as if its rename came and the weights' did not.
        save_model_dir(keep.path(), &config_b, &layers(2.0), &options).unwrap();
        std::fs::copy(keep.path().join(CONFIG_FILE), d.path().join(CONFIG_FILE)).unwrap();
        let e = open(d.path()).err().unwrap();
        assert_eq!(e.code(), "ERR_INVALID_MODEL");
        assert!(
            e.detail()
                .contains("a save into this directory is under way or was interrupted"),
            "{e}"
        );
        // A config.json of other origin (no id) is the owner's choice: it loads.
        std::fs::write(d.path().join(CONFIG_FILE), r#"{"hand": "written"}"#).unwrap();
        assert_eq!(
            open(d.path()).unwrap().view("layer.1").unwrap(),
            layers(1.0)[1]
        );
    }
    // A shard of another save under the name the index gives.
    save_model_dir(d.path(), &config_a, &layers(1.0), &sharded(80)).unwrap();
    save_model_dir(keep.path(), &config_a, &layers(2.0), &sharded(80)).unwrap();
    let ours = open(d.path()).unwrap().files()[0].clone();
    let theirs = open(keep.path()).unwrap().files()[0].clone();
    std::fs::copy(keep.path().join(&theirs), d.path().join(&ours)).unwrap();
    let e = open(d.path()).err().unwrap();
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    assert!(
        e.detail().contains(&format!("shard '{ours}' is from save")),
        "{e}"
    );
}

#[test]
fn a_failed_save_leaves_the_old_model_and_no_files_of_its_own() {
    let d = tempfile::tempdir().unwrap();
    let config = serde_json::json!({"v": 1});
    save_model_dir(d.path(), &config, &layers(1.0), &sharded(80)).unwrap();
    let before = names(d.path());
    // Weights the writer refuses (two tensors of one name), after some were written.
    let bad = [tensor("dup", &[1.0]), tensor("dup", &[2.0])];
    assert!(save_model_dir(d.path(), &config, &bad, &SaveOptions::default()).is_err());
    assert_eq!(names(d.path()), before);
    assert_eq!(
        open(d.path()).unwrap().view("layer.2").unwrap(),
        layers(1.0)[2]
    );
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

/// The state a save killed between renaming config.json and its weights leaves (or a reader
/// between the two renames sees): the new config, the old weights, and the new save's
/// weights complete under their pending name. It loads as the new model, whole.
#[test]
fn a_save_stopped_between_its_renames_loads_as_the_new_model() {
    let config_a = serde_json::json!({"version": "a"});
    let config_b = serde_json::json!({"version": "b"});
    for (from, to) in [
        (sharded(80), sharded(80)),
        (SaveOptions::default(), sharded(80)),
        (sharded(80), SaveOptions::default()),
        (SaveOptions::default(), SaveOptions::default()),
    ] {
        let d = tempfile::tempdir().unwrap();
        save_model_dir(d.path(), &config_a, &layers(1.0), &from).unwrap();
        // Save B elsewhere, then bring its files over as the interrupted save left them.
        let k = tempfile::tempdir().unwrap();
        let written = save_model_dir(k.path(), &config_b, &layers(2.0), &to).unwrap();
        let text = std::fs::read(k.path().join(CONFIG_FILE)).unwrap();
        let config: serde_json::Value = serde_json::from_slice(&text).unwrap();
        let save = config[CONFIG_SAVE_ID_KEY].as_str().unwrap();
        for f in &written {
            let dest = if DISCOVERY_ORDER.contains(&f.as_str()) {
                Pending::new(d.path(), f, save).tmp
            } else {
                d.path().join(f)
            };
            std::fs::copy(k.path().join(f), dest).unwrap();
        }
        // Before config.json is renamed: the old model, whole.
        let m = open(d.path()).unwrap();
        assert_eq!(
            (m.config(), m.view("layer.4").unwrap()),
            (&config_a, layers(1.0)[4].clone())
        );
        // After: the new one, whole, from the pending file.
        std::fs::write(d.path().join(CONFIG_FILE), &text).unwrap();
        let m = open(d.path()).unwrap();
        assert_eq!(m.config(), &config_b);
        for t in layers(2.0) {
            assert_eq!(m.view(&t.name).unwrap(), t);
        }
        // The next save cleans up whatever the interrupted one left.
        save_model_dir(d.path(), &config_a, &layers(3.0), &from).unwrap();
        assert_eq!(
            names(d.path()).len(),
            if from.max_shard_bytes.is_some() { 5 } else { 2 }
        );
        assert_eq!(
            open(d.path()).unwrap().view("layer.0").unwrap(),
            layers(3.0)[0]
        );
    }
}
