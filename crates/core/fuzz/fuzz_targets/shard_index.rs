//! The sharded-index loader: the input becomes `model.safetensors.index.json` in a model
//! directory that holds real shards, a subdirectory, a symlink to a shard inside it and a
//! symlink to a directory outside it. Names from the index are checked by their spelling
//! (plain relative names, no `..`, `.` or empty components); symlinks the directory holds
//! are its owner's choice and are followed. `ModelDir::open` must succeed only with files
//! named that way and serve every tensor it lists, or fail with a coded error; `safe_join`
//! must never hand back a path that leaves the directory lexically, and the outside shard
//! is reached only through the owner's `outside` link.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stcore::format::safetensors::save_file;
use stcore::fsutil::WriteOptions;
use stcore::pretrained::{safe_join, ModelDir, INDEX_FILE};
use stcore::TensorSource;
use stcore::TensorView;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

struct Fixture {
    model: PathBuf,
    model_real: PathBuf,
}

fn shard(path: &Path, names: &[&str]) {
    let views: Vec<TensorView> = names
        .iter()
        .enumerate()
        .map(|(i, n)| TensorView::from_f32(*n, vec![2], &[i as f32, -(i as f32)]).unwrap())
        .collect();
    save_file(path, &views, None, WriteOptions::default()).unwrap();
}

/// `<tmp>/stcore-fuzz-shards-<pid>/{model,outside}` (scripts/fuzz.mjs removes it afterwards).
fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("stcore-fuzz-shards-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let model = root.join("model");
        let outside = root.join("outside");
        std::fs::create_dir_all(model.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(model.join("config.json"), "{}").unwrap();
        shard(&model.join("model-00001-of-00002.safetensors"), &["a", "b"]);
        shard(&model.join("model-00002-of-00002.safetensors"), &["c"]);
        shard(&model.join("sub/extra.safetensors"), &["d"]);
        std::fs::write(model.join("not-a-shard.bin"), b"\x08\0\0\0\0\0\0\0{}      ").unwrap();
        shard(&outside.join("model.safetensors"), &["secret"]);
        std::os::unix::fs::symlink(&outside, model.join("outside")).unwrap();
        std::os::unix::fs::symlink(
            model.join("model-00002-of-00002.safetensors"),
            model.join("link.safetensors"),
        )
        .unwrap();
        let model_real = model.canonicalize().unwrap();
        Fixture { model, model_real }
    })
}

/// What `safe_join` returns must stay inside the directory lexically, spelled exactly as
/// the index spells it; on disk it leaves only through the owner's `outside` link.
fn check_join(fx: &Fixture, name: &str) {
    let Ok(path) = safe_join(&fx.model, name) else {
        return;
    };
    let rel = path
        .strip_prefix(&fx.model)
        .expect("joined path under the directory");
    assert!(
        rel.components().all(|c| matches!(c, Component::Normal(_))),
        "{name:?} joined to {path:?}"
    );
    assert_eq!(rel.components().count(), name.split('/').count(), "{name:?}");
    if let Ok(real) = path.canonicalize() {
        assert!(
            real.starts_with(&fx.model_real) || name == "outside" || name.starts_with("outside/"),
            "{name:?} resolves to {real:?}"
        );
    }
}

fuzz_target!(|index: &[u8]| {
    let fx = fixture();
    std::fs::write(fx.model.join(INDEX_FILE), index).unwrap();
    if let Ok(serde_json::Value::Object(top)) = serde_json::from_slice(index) {
        if let Some(serde_json::Value::Object(map)) = top.get("weight_map") {
            for file in map.values().filter_map(|v| v.as_str()) {
                check_join(fx, file);
            }
        }
    }
    match ModelDir::open(&fx.model, &mut |_| {}) {
        Ok(model) => {
            assert_eq!(model.format().name(), "sharded-safetensors");
            for file in model.files() {
                check_join(fx, file);
                let real = fx.model.join(file).canonicalize().unwrap();
                assert!(
                    real.starts_with(&fx.model_real) || file.starts_with("outside/"),
                    "{file} opened outside"
                );
            }
            let names: Vec<String> = model.tensor_names().map(String::from).collect();
            assert!(
                !names.iter().any(|n| n == "secret")
                    || model.files().iter().any(|f| f.starts_with("outside/")),
                "served a tensor from outside, not through the owner's link"
            );
            for name in &names {
                let view = model.view(name).expect("a listed tensor reads");
                assert_eq!(view.data.len(), 8);
            }
        }
        // ERR_UNKNOWN_FORMAT: a shard that is no weights format (the index may name
        // config.json), reported as what it is rather than as a damaged shard.
        Err(e) => assert!(
            matches!(
                e.code(),
                "ERR_INVALID_MODEL"
                    | "ERR_UNSAFE_PATH"
                    | "ERR_NOT_FOUND"
                    | "ERR_IO"
                    | "ERR_UNKNOWN_FORMAT"
            ),
            "{}: {e}",
            e.code()
        ),
    }
});
