//! The sharded-index loader: the input becomes `model.safetensors.index.json` in a model
//! directory that holds real shards, a subdirectory, a symlink to a shard inside it and a
//! symlink to a directory outside it. Names from the index are checked by their spelling
//! (plain relative names, no `..`, `.` or empty components); symlinks the directory holds
//! are its owner's choice and are followed. `ModelDir::open` must succeed only with files
//! named that way and serve every tensor it lists, or fail with a coded error; `safe_join`
//! must never hand back a path that leaves the directory lexically, and the outside shard
//! is reached only through the owner's `outside` link.
//!
//! The same names under a base URL (`shard_url`, what `lib/remote.js` fetches): a URL exactly
//! when a local path, which a WHATWG parser (fetch's) reads as the base's origin, the base's
//! path and then exactly the name, segment by segment. The raw input, when it is UTF-8, is
//! checked as a name too, so names are explored without the JSON around them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stcore::format::safetensors::save_file;
use stcore::fsutil::WriteOptions;
use stcore::pretrained::layout::shard_url;
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
    let joined = safe_join(&fx.model, name);
    check_url(name, joined.is_ok());
    let Ok(path) = joined else {
        return;
    };
    let rel = path
        .strip_prefix(&fx.model)
        .expect("joined path under the directory");
    assert!(
        rel.components().all(|c| matches!(c, Component::Normal(_))),
        "{name:?} joined to {path:?}"
    );
    assert_eq!(
        rel.components().count(),
        name.split('/').count(),
        "{name:?}"
    );
    if let Ok(real) = path.canonicalize() {
        assert!(
            real.starts_with(&fx.model_real) || name == "outside" || name.starts_with("outside/"),
            "{name:?} resolves to {real:?}"
        );
    }
}

/// Bases shard URLs are made under: a Hub resolve URL, and one with credentials, a query and
/// a fragment (which are not part of the directory).
const BASES: [&str; 2] = [
    "https://hub.example:8443/org/name/resolve/0123456789abcdef/",
    "http://user:pw@127.0.0.1:9/models/m/?sig=a/../b#top",
];

/// `segment` with its `%XX` escapes decoded (as a server decodes a path once).
fn percent_decoded(segment: &str) -> String {
    let b = segment.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = segment.get(i + 1..i + 3).expect("'%' and two hex digits");
            out.push(u8::from_str_radix(hex, 16).expect("two hex digits"));
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).expect("the decoded name is UTF-8")
}

/// `name` under each base: a URL exactly when a local path (`local`); read by a WHATWG
/// parser, the base's origin, no query or fragment, and a path that is the base's followed
/// by exactly `name` once decoded (no segment deleted, added, climbed out of or merged).
fn check_url(name: &str, local: bool) {
    for base in BASES {
        let url = match shard_url(base, name) {
            Ok(url) => url,
            Err(e) => {
                assert!(!local, "{name:?}: a local path but no URL: {e}");
                assert_eq!(e.code(), "ERR_UNSAFE_PATH", "{name:?}: {e}");
                continue;
            }
        };
        assert!(local, "{name:?}: a URL ({url}) but no local path");
        let parsed = url::Url::parse(&url).unwrap_or_else(|e| panic!("{name:?} → {url}: {e}"));
        let dir = url::Url::parse(base).unwrap();
        assert_eq!(parsed.origin(), dir.origin(), "{name:?} → {url}");
        assert_eq!(
            (parsed.query(), parsed.fragment()),
            (None, None),
            "{name:?} → {url}"
        );
        let rest = parsed
            .path()
            .strip_prefix(dir.path())
            .unwrap_or_else(|| panic!("{name:?} → {url} leaves {}", dir.path()));
        let decoded: Vec<String> = rest.split('/').map(percent_decoded).collect();
        assert_eq!(decoded.join("/"), name, "{url}");
    }
}

fuzz_target!(|index: &[u8]| {
    let fx = fixture();
    if let Ok(name) = std::str::from_utf8(index) {
        check_join(fx, name);
    }
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
