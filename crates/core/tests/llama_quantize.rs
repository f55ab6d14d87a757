//! Our llama-quantize presets against `llama-quantize` itself: on llama-architecture GGUF
//! files written by gguf-py (F32 and F16, tied and untied embeddings, grouped-query and
//! plain attention, rows that are whole 256-blocks, rows that are only whole 32-blocks, and
//! one weight whose rows fit no block), `convert(…, {quantization: P})` must give every
//! tensor the type llama-quantize gives it, the same bytes, and the same metadata.
//!
//! Ignored by default: it needs the Python environment (gguf-py writes the inputs) and a
//! llama.cpp build (`llama-quantize`; `$STN_LLAMA_QUANTIZE`, else the one
//! `scripts/peers/llama-cpp.mjs` builds, which this test runs when it exists). Without a
//! build it says so loudly and checks nothing.

use stcore::convert::{convert, Target};
use stcore::format::gguf::{GgufFile, Preset};
use stcore::fsutil::WriteOptions;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python() -> PathBuf {
    std::env::var_os("STCORE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv/bin/python"))
}

/// The llama-quantize program: `$STN_LLAMA_QUANTIZE`, else the one `scripts/peers/llama-cpp.mjs`
/// builds (it knows the cache's layout and the build's flags; it builds what is missing and
/// prints the program's path). None when neither is there.
fn llama_quantize() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("STN_LLAMA_QUANTIZE") {
        return Some(PathBuf::from(p));
    }
    let script = repo_root().join("scripts/peers/llama-cpp.mjs");
    if !script.exists() {
        return None;
    }
    let out = Command::new("node")
        .arg(&script)
        .args(["--tool", "llama-quantize"])
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run node");
    assert!(out.status.success(), "scripts/peers/llama-cpp.mjs failed");
    let path = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    path.exists().then_some(path)
}

fn write_model(dir: &Path, name: &str, spec: serde_json::Value) -> PathBuf {
    let path = dir.join(format!("{name}.gguf"));
    let mut job = spec;
    job["op"] = "llama_model".into();
    job["output"] = path.to_str().unwrap().into();
    let jobs = dir.join(format!("{name}.json"));
    std::fs::write(&jobs, serde_json::json!([job]).to_string()).unwrap();
    let out = Command::new(python())
        .arg(repo_root().join("scripts/ggml_oracle.py"))
        .arg("batch")
        .arg(&jobs)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

/// Differences between llama-quantize's file and ours: tensor types, bytes, metadata.
fn differences(theirs: &[u8], ours: &[u8]) -> Vec<String> {
    let (theirs, ours) = (
        GgufFile::parse(theirs).unwrap(),
        GgufFile::parse(ours).unwrap(),
    );
    let mut out = Vec::new();
    if theirs.tensors().len() != ours.tensors().len() {
        out.push(format!(
            "{} tensors, llama-quantize {}",
            ours.tensors().len(),
            theirs.tensors().len()
        ));
    }
    for t in theirs.tensors() {
        let Some(o) = ours.tensor_info(&t.name) else {
            out.push(format!("{}: missing", t.name));
            continue;
        };
        if o.ggml_type != t.ggml_type || o.shape != t.shape {
            out.push(format!(
                "{}: ours {} {:?}, llama-quantize {} {:?}",
                t.name, o.ggml_type, o.shape, t.ggml_type, t.shape
            ));
        } else if ours.raw(&t.name).unwrap() != theirs.raw(&t.name).unwrap() {
            let (a, b) = (ours.raw(&t.name).unwrap(), theirs.raw(&t.name).unwrap());
            let at = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(0);
            out.push(format!(
                "{} ({}): bytes differ from offset {at}",
                t.name, t.ggml_type
            ));
        }
    }
    for (k, v) in theirs.metadata() {
        if ours.get(k) != Some(v) {
            out.push(format!(
                "metadata {k}: ours {:?}, llama-quantize {v:?}",
                ours.get(k)
            ));
        }
    }
    for (k, v) in ours.metadata() {
        // We state the default alignment; llama-quantize leaves it implicit.
        if k == "general.alignment" && *v == stcore::format::gguf::GgufValue::U32(32) {
            continue;
        }
        if theirs.get(k).is_none() {
            out.push(format!("metadata {k}: only ours"));
        }
    }
    out
}

#[test]
#[ignore = "needs the Python environment and a llama.cpp build (llama-quantize)"]
fn every_preset_gives_llama_quantizes_types_and_bytes() {
    let Some(quantize) = llama_quantize() else {
        eprintln!(
            "\n*** SKIPPED every_preset_gives_llama_quantizes_types_and_bytes: llama-quantize is \
             not built (no scripts/peers/llama-cpp.mjs to build it; set STN_LLAMA_QUANTIZE). \
             Presets are NOT checked against llama.cpp. ***\n"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let models = [
        // Grouped-query attention (n_gqa 4), untied output, FFN rows of 352 (whole 32-blocks
        // only: the 256-block types fall back), one weight of 100-element rows (F16).
        write_model(
            dir.path(),
            "gqa-f32",
            serde_json::json!({"dtype": "F32", "seed": 1, "n_layer": 8, "n_embd": 256,
                "n_ff": 352, "n_head": 8, "n_head_kv": 2, "n_vocab": 300,
                "extra": [["blk.3.odd_proj.weight", 64, 100]]}),
        ),
        // F16, plain attention, tied embeddings (token_embd takes the output's type),
        // 16 layers for the layer-position rules.
        write_model(
            dir.path(),
            "tied-f16",
            serde_json::json!({"dtype": "F16", "seed": 2, "n_layer": 16, "n_embd": 256,
                "n_ff": 512, "n_head": 4, "n_head_kv": 4, "n_vocab": 260, "tied": true}),
        ),
    ];
    let mut failures = Vec::new();
    for model in &models {
        for &preset in Preset::ALL {
            let theirs = dir.path().join(format!("theirs-{preset}.gguf"));
            let ours = dir.path().join(format!("ours-{preset}.gguf"));
            let out = Command::new(&quantize)
                .arg(model)
                .arg(&theirs)
                .arg(preset.name())
                .arg("2")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "llama-quantize {preset}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            convert(
                model,
                &ours,
                Target::Gguf,
                Some(preset),
                WriteOptions::default(),
            )
            .unwrap();
            let diffs = differences(
                &std::fs::read(&theirs).unwrap(),
                &std::fs::read(&ours).unwrap(),
            );
            for d in diffs {
                failures.push(format!(
                    "{} {preset}: {d}",
                    model.file_name().unwrap().to_string_lossy()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
