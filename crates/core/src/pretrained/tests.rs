use super::*;
use crate::dtype::DType;

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
    assert_eq!(
        written,
        vec![
            "model-00001-of-00003.safetensors",
            "model-00002-of-00003.safetensors",
            "model-00003-of-00003.safetensors",
            INDEX_FILE
        ]
    );
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.path().join(INDEX_FILE)).unwrap()).unwrap();
    assert_eq!(index["metadata"]["total_size"], 240);
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
    )
    .unwrap();
    st::save_file(
        &d.path().join("b.safetensors"),
        &[tensor("z", &[3.0])],
        None,
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
    )
    .unwrap();
    let d = sharded_dir(serde_json::json!({ "x": "link.safetensors" }));
    std::os::unix::fs::symlink(
        outside.path().join("evil.safetensors"),
        d.path().join("link.safetensors"),
    )
    .unwrap();
    assert_eq!(open(d.path()).err().unwrap().code(), "ERR_UNSAFE_PATH");

    let d = sharded_dir(serde_json::json!({"x": "b.safetensors"}));
    let e = open(d.path()).err().unwrap();
    assert_eq!((e.code(), e.tensor()), ("ERR_INVALID_MODEL", Some("x")));

    let d = sharded_dir(serde_json::json!({"x": "a.safetensors", "z": "b.safetensors"}));
    st::save_file(
        &d.path().join("b.safetensors"),
        &[tensor("z", &[3.0]), tensor("y", &[0.0])],
        None,
    )
    .unwrap();
    let e = open(d.path()).err().unwrap();
    assert_eq!((e.code(), e.tensor()), ("ERR_INVALID_MODEL", Some("y")));

    let d = sharded_dir(serde_json::json!({"x": "missing.safetensors"}));
    assert_eq!(open(d.path()).err().unwrap().code(), "ERR_INVALID_MODEL");

    let d = sharded_dir(serde_json::json!({"x": "a.safetensors", "z": "b.safetensors"}));
    std::fs::write(d.path().join("b.safetensors"), b"garbage!garbage!").unwrap();
    let e = open(d.path()).err().unwrap();
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
    assert!(e.to_string().contains("b.safetensors"), "{e}");

    let d = sharded_dir(serde_json::json!({"x": 5}));
    assert_eq!(open(d.path()).err().unwrap().code(), "ERR_INVALID_MODEL");
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
        )
        .unwrap();
        open(d.path()).unwrap()
    };
    assert_eq!(m.view("nope").err().unwrap().code(), "ERR_NOT_FOUND");
    assert_eq!(m.info("w").unwrap().dtype, DType::F32);
}
