//! Unit tests of the llama.cpp export: the rope permutation against the rotation it stands
//! for, the type policy and size labels against gguf-py's, and recognition with every kind
//! of bad input. The end-to-end checks (llama.cpp loading our files, comparisons with
//! llama.cpp's converter) are in `__test__/llama.spec.ts`.

use super::*;
use crate::format::gguf::{GgufArray, Preset};
use serde_json::json;
use std::fs;

/// Hugging Face's rope on one head (`rotate_half`: element i pairs with i + d/2).
fn rope_hf(x: &[f64], pos: f64) -> Vec<f64> {
    let d = x.len();
    let half = d / 2;
    (0..d)
        .map(|k| {
            let i = k % half;
            let theta = pos / 10000f64.powf(2.0 * i as f64 / d as f64);
            let rotated = if k < half { -x[k + half] } else { x[k - half] };
            x[k] * theta.cos() + rotated * theta.sin()
        })
        .collect()
}

/// ggml's "normal" rope on one head (element 2i pairs with 2i + 1).
fn rope_ggml(x: &[f64], pos: f64) -> Vec<f64> {
    let d = x.len();
    let mut out = vec![0.0; d];
    for i in 0..d / 2 {
        let theta = pos / 10000f64.powf(2.0 * i as f64 / d as f64);
        let (a, b) = (x[2 * i], x[2 * i + 1]);
        out[2 * i] = a * theta.cos() - b * theta.sin();
        out[2 * i + 1] = a * theta.sin() + b * theta.cos();
    }
    out
}

#[test]
fn rope_permutation_turns_hugging_faces_rotation_into_ggmls() {
    // Q = W·h per head: permuting W's rows permutes Q. Rotating the permuted Q the ggml way
    // must give the permuted Hugging Face rotation, for every head and position.
    let (heads, head_dim, cols) = (3usize, 8usize, 2usize);
    let rows = heads * head_dim;
    let w: Vec<f32> = (0..rows * cols).map(|i| (i as f32 * 0.37).sin()).collect();
    let bytes: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
    let permuted = rope_interleave(&bytes, &[rows, cols], DType::F32, heads).unwrap();
    let pw: Vec<f32> = permuted
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let h = [0.5f64, -1.25];
    let q = |w: &[f32], r: usize| {
        (0..cols)
            .map(|c| w[r * cols + c] as f64 * h[c])
            .sum::<f64>()
    };
    for head in 0..heads {
        let hf_q: Vec<f64> = (0..head_dim).map(|r| q(&w, head * head_dim + r)).collect();
        let ours_q: Vec<f64> = (0..head_dim).map(|r| q(&pw, head * head_dim + r)).collect();
        for pos in [0.0, 1.0, 7.0, 123.0] {
            let via_hf = rope_hf(&hf_q, pos);
            let via_ggml = rope_ggml(&ours_q, pos);
            // llama.cpp's element 2i+j is Hugging Face's element j·d/2 + i.
            for i in 0..head_dim / 2 {
                for j in 0..2 {
                    let a = via_ggml[2 * i + j];
                    let b = via_hf[j * head_dim / 2 + i];
                    assert!((a - b).abs() < 1e-12, "head {head} pos {pos}: {a} vs {b}");
                }
            }
        }
    }
    // Biases (one column) move the same way; bad head counts are refused.
    let bias: Vec<u8> = (0..8u8).collect();
    assert_eq!(
        rope_interleave(&bias, &[8], DType::U8, 2).unwrap(),
        vec![0, 2, 1, 3, 4, 6, 5, 7]
    );
    assert!(rope_interleave(&bias, &[8], DType::U8, 3).is_err());
    assert!(rope_interleave(&bias, &[8], DType::U8, 0).is_err());
}

#[test]
fn llama3_rope_factors_are_torchs_bits() {
    // (rope_theta, head_dim, factor, original context) → the bits llama.cpp's converter
    // writes (torch 2.15 running its generate_extra_tensors; low/high freq factors 1 and 4).
    #[rustfmt::skip]
    let cases: &[(f64, usize, f64, usize, &[u32])] = &[
        (500000.0, 16, 32.0, 8192, &[0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x4052b46f, 0x42000000, 0x42000000, 0x42000000]),
        (500000.0, 64, 32.0, 8192, &[0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3fd35ec2, 0x4052b46f, 0x411aaaee, 0x42000000, 0x42000000, 0x42000000, 0x42000000, 0x42000000, 0x42000000, 0x42000000, 0x42000000, 0x42000000, 0x42000000, 0x42000000, 0x42000000, 0x42000000, 0x42000000]),
        (500000.0, 128, 8.0, 8192, &[0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f9a8ed5, 0x3fc6d64a, 0x4001af1d, 0x402c732e, 0x406bcace, 0x40a83c06, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000]),
        (10000.0, 128, 8.0, 2048, &[0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f897638, 0x3fa342ea, 0x3fc2f21b, 0x3fea5387, 0x400e0110, 0x402df0a0, 0x405801e0, 0x40889d90, 0x40b14943, 0x40eedd9d, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000, 0x41000000]),
        (1000000.0, 96, 16.0, 4096, &[0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f8eec13, 0x3fd227cc, 0x4022592f, 0x408948e1, 0x410e841c, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000, 0x41800000]),
    ];
    for (theta, dim, factor, ctx, bits) in cases {
        let rope = hparams::Rope {
            theta: Some(*theta),
            kind: Some("llama3".into()),
            factor: Some(*factor),
            original_context: Some(*ctx),
            low_freq_factor: Some(1.0),
            high_freq_factor: Some(4.0),
            ..Default::default()
        };
        let got: Vec<u32> = decoder::llama3_rope_factors(&rope, *dim)
            .unwrap()
            .iter()
            .map(|f| f.to_bits())
            .collect();
        assert_eq!(&got, bits, "theta {theta} dim {dim}");
    }
}

#[test]
fn types_follow_the_converters_rules() {
    let t = |name: &str, shape: &[usize], d| output_type(name, shape, d).unwrap();
    assert_eq!(
        t("token_embd.weight", &[100, 64], DType::F16),
        GgmlType::F16
    );
    assert_eq!(
        t("token_embd.weight", &[100, 64], DType::BF16),
        GgmlType::BF16
    );
    assert_eq!(
        t("blk.0.attn_norm.weight", &[64], DType::F16),
        GgmlType::F32
    );
    assert_eq!(
        t("blk.0.attn_q_norm.weight", &[64], DType::BF16),
        GgmlType::F32
    );
    assert_eq!(t("blk.0.attn_q.bias", &[64], DType::F16), GgmlType::F32);
    assert_eq!(
        t("position_embd.weight", &[512, 384], DType::F16),
        GgmlType::F32
    );
    assert_eq!(
        t("token_types.weight", &[2, 384], DType::BF16),
        GgmlType::F32
    );
    assert_eq!(
        t("blk.0.ffn_up.weight", &[10, 33], DType::F32),
        GgmlType::F32
    );
    // Integers stay integers; a dtype GGUF cannot hold is refused, naming the tensor.
    assert_eq!(t("position_ids", &[1, 512], DType::I64), GgmlType::I64);
    let e = output_type("mask.weight", &[4, 4], DType::U8).unwrap_err();
    assert_eq!(
        (e.code(), e.tensor()),
        ("ERR_UNSUPPORTED_DTYPE", Some("mask.weight"))
    );
}

#[test]
fn size_labels_match_gguf_py() {
    // Values printed by gguf-py's size_label (llama.cpp 0.3.36 sources).
    for (n, label) in [
        (22_713_216u64, "23M"),
        (1_500_000_000, "1.5B"),
        (494_032_768, "494M"),
        (135_000, "135K"),
        (7_241_732_096, "7.2B"),
        (999_500, "1000K"),
        (1_000_001, "1.0M"),
        (2_500_000_000_000, "2.5T"),
        (9_950_000, "10M"),
    ] {
        assert_eq!(size_label(n), label, "{n}");
    }
}

// ---------------------------------------------------------------------------------------
// Recognition and bad input, on small BERT and Llama directories.

fn listing(tensors: &[(&str, &[usize])]) -> Vec<TensorListing> {
    tensors
        .iter()
        .map(|(n, s)| TensorListing {
            name: n.to_string(),
            dtype: DType::F32,
            shape: s.to_vec(),
        })
        .collect()
}

fn bert_config() -> Json {
    json!({"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 8,
           "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16,
           "vocab_size": 6, "max_position_embeddings": 4, "type_vocab_size": 2,
           "layer_norm_eps": 1e-12, "pad_token_id": 0})
}

fn bert_tensors() -> Vec<TensorListing> {
    let (v, e, f, c) = (6, 8, 16, 4);
    let mut t: Vec<(String, Vec<usize>)> = vec![
        ("embeddings.word_embeddings.weight".into(), vec![v, e]),
        ("embeddings.position_embeddings.weight".into(), vec![c, e]),
        ("embeddings.token_type_embeddings.weight".into(), vec![2, e]),
        ("embeddings.LayerNorm.weight".into(), vec![e]),
        ("embeddings.LayerNorm.bias".into(), vec![e]),
        ("embeddings.position_ids".into(), vec![1, c]),
        ("pooler.dense.weight".into(), vec![e, e]),
    ];
    let l = "encoder.layer.0";
    for (n, s) in [
        ("attention.self.query", vec![e, e]),
        ("attention.self.key", vec![e, e]),
        ("attention.self.value", vec![e, e]),
        ("attention.output.dense", vec![e, e]),
        ("intermediate.dense", vec![f, e]),
        ("output.dense", vec![e, f]),
    ] {
        t.push((format!("{l}.{n}.bias"), vec![s[0]]));
        t.push((format!("{l}.{n}.weight"), s));
    }
    for n in ["attention.output.LayerNorm", "output.LayerNorm"] {
        t.push((format!("{l}.{n}.weight"), vec![e]));
        t.push((format!("{l}.{n}.bias"), vec![e]));
    }
    t.into_iter()
        .map(|(name, shape)| TensorListing {
            name,
            dtype: DType::F32,
            shape,
        })
        .collect()
}

fn bert_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("vocab.txt"),
        "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n##lo\n",
    )
    .unwrap();
    fs::write(
        dir.path().join("modules.json"),
        r#"[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
            {"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}]"#,
    )
    .unwrap();
    fs::create_dir(dir.path().join("1_Pooling")).unwrap();
    fs::write(
        dir.path().join("1_Pooling/config.json"),
        r#"{"pooling_mode_cls_token": true}"#,
    )
    .unwrap();
    dir
}

fn known(r: Recognition) -> LlamaExport {
    match r {
        Recognition::Known(e) => *e,
        Recognition::Unknown(w) => panic!("not recognised: {w}"),
    }
}

/// Where output tensor `name` comes from.
fn origin(e: &LlamaExport, name: &str) -> Option<Origin> {
    e.tensors
        .iter()
        .find(|t| t.name == name)
        .map(|t| t.origin.clone())
}

fn kv<'a>(e: &'a LlamaExport, key: &str) -> Option<&'a GgufValue> {
    e.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

#[test]
fn a_bert_directory_with_vocab_txt_and_cls_pooling() {
    let dir = bert_dir();
    let e = known(
        recognize(
            dir.path(),
            &bert_config(),
            &bert_tensors(),
            QuantizationChoice::Preset(Preset::F16),
        )
        .unwrap(),
    );
    assert_eq!(e.architecture, "bert");
    assert_eq!(e.metadata[0].0, "general.architecture");
    assert_eq!(kv(&e, "bert.pooling_type"), Some(&GgufValue::U32(2)));
    assert_eq!(
        kv(&e, "bert.attention.causal"),
        Some(&GgufValue::Bool(false))
    );
    assert_eq!(kv(&e, "general.file_type"), Some(&GgufValue::U32(1)));
    assert_eq!(
        kv(&e, "tokenizer.ggml.tokens"),
        Some(&GgufValue::Array(GgufArray::String(
            ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "\u{2581}hello", "lo"]
                .map(String::from)
                .to_vec()
        )))
    );
    assert_eq!(
        kv(&e, "tokenizer.ggml.token_type"),
        Some(&GgufValue::Array(GgufArray::I32(vec![3, 3, 3, 3, 1, 1])))
    );
    assert_eq!(
        kv(&e, "tokenizer.ggml.padding_token_id"),
        Some(&GgufValue::U32(0))
    );
    // position_ids and the pooler are dropped; norms and biases stay F32.
    assert_eq!(e.tensors.len(), 5 + 16);
    let t = |n: &str| e.tensors.iter().find(|t| t.name == n).unwrap();
    assert_eq!(t("token_embd.weight").ggml_type, GgmlType::F16);
    assert_eq!(t("position_embd.weight").ggml_type, GgmlType::F32);
    assert_eq!(t("blk.0.ffn_up.bias").ggml_type, GgmlType::F32);
    assert_eq!(
        t("blk.0.layer_output_norm.weight").origin,
        Origin::Source {
            name: "encoder.layer.0.output.LayerNorm.weight".into(),
            transform: Transform::Identity
        }
    );
}

#[test]
fn an_unsupported_transformers_architecture_is_refused_naming_it_and_the_supported_ones() {
    let dir = tempfile::tempdir().unwrap();
    for (config, named) in [
        (
            json!({"architectures": ["FalconForCausalLM"], "model_type": "falcon"}),
            "architecture 'FalconForCausalLM'",
        ),
        (
            json!({"architectures": ["BertForSequenceClassification"], "model_type": "bert"}),
            "architecture 'BertForSequenceClassification'",
        ),
        (
            json!({"model_type": "falcon", "transformers_version": "4.57.6"}),
            "model_type 'falcon'",
        ),
    ] {
        let e = expect_invalid(
            recognize(dir.path(), &config, &[], QuantizationChoice::Keep),
            named,
        );
        let message = e.to_string();
        for supported in [
            "LlamaForCausalLM",
            "Qwen3ForCausalLM",
            "BertModel",
            "Gemma3ForCausalLM",
            "Gemma3ForConditionalGeneration",
        ] {
            assert!(message.contains(supported), "{message}");
        }
        assert_eq!(
            e.path(),
            Some(dir.path().join("config.json").to_str().unwrap())
        );
    }
}

#[test]
fn other_directories_are_recognised_as_unknown() {
    let dir = tempfile::tempdir().unwrap();
    for config in [
        json!({"model_type": "tiny_llama"}),
        json!({"model_type": "linear_regression", "n_features": 2}),
        json!({}),
    ] {
        match recognize(
            dir.path(),
            &config,
            &[],
            QuantizationChoice::Preset(Preset::F32),
        )
        .unwrap()
        {
            Recognition::Unknown(w) => assert!(w.contains("llama.cpp"), "{w}"),
            Recognition::Known(_) => panic!("{config} recognised"),
        }
    }
}

fn expect_invalid(result: Result<Recognition>, needle: &str) -> CoreError {
    let e = match result {
        Err(e) => e,
        Ok(_) => panic!("accepted; expected an error naming {needle}"),
    };
    assert_eq!(e.code(), "ERR_INVALID_MODEL", "{e}");
    assert!(e.to_string().contains(needle), "{e} does not name {needle}");
    e
}

#[test]
fn bad_bert_input_names_the_field_tensor_or_file() {
    let dir = bert_dir();
    let q = QuantizationChoice::Preset(Preset::F32);
    let with = |k: &str, v: Json| {
        let mut c = bert_config();
        c[k] = v;
        c
    };
    expect_invalid(
        recognize(
            dir.path(),
            &with("num_attention_heads", json!(3)),
            &bert_tensors(),
            q,
        ),
        "num_attention_heads",
    );
    expect_invalid(
        recognize(
            dir.path(),
            &with("vocab_size", json!(7)),
            &bert_tensors(),
            q,
        ),
        "vocab_size",
    );
    expect_invalid(
        recognize(
            dir.path(),
            &with("hidden_size", json!("8")),
            &bert_tensors(),
            q,
        ),
        "hidden_size",
    );
    let mut c = bert_config();
    c.as_object_mut().unwrap().remove("num_hidden_layers");
    expect_invalid(
        recognize(dir.path(), &c, &bert_tensors(), q),
        "num_hidden_layers",
    );
    // A layer tensor missing.
    let mut t = bert_tensors();
    t.retain(|t| t.name != "encoder.layer.0.attention.self.key.weight");
    let e = expect_invalid(recognize(dir.path(), &bert_config(), &t, q), "missing");
    assert_eq!(
        e.tensor(),
        Some("encoder.layer.0.attention.self.key.weight")
    );
    // A layer beyond num_hidden_layers.
    let mut t = bert_tensors();
    t.extend(listing(&[(
        "encoder.layer.1.output.dense.weight",
        &[8, 16],
    )]));
    expect_invalid(recognize(dir.path(), &bert_config(), &t, q), "layer 1");
    // A tensor llama.cpp has no place for.
    let mut t = bert_tensors();
    t.extend(listing(&[("classifier.weight", &[2, 8])]));
    let e = expect_invalid(recognize(dir.path(), &bert_config(), &t, q), "no tensor");
    assert_eq!(e.tensor(), Some("classifier.weight"));
    // Tokenizer files that do not parse, or are missing.
    fs::write(dir.path().join("tokenizer.json"), "{not json").unwrap();
    let e = expect_invalid(
        recognize(dir.path(), &bert_config(), &bert_tensors(), q),
        "not valid JSON",
    );
    assert!(e.path().unwrap().ends_with("tokenizer.json"));
    fs::write(
        dir.path().join("tokenizer.json"),
        r#"{"model": {"type": "BPE", "vocab": {}}}"#,
    )
    .unwrap();
    expect_invalid(
        recognize(dir.path(), &bert_config(), &bert_tensors(), q),
        "WordPiece",
    );
    fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    fs::remove_file(dir.path().join("vocab.txt")).unwrap();
    expect_invalid(
        recognize(dir.path(), &bert_config(), &bert_tensors(), q),
        "vocab.txt",
    );
    // A pooling llama.cpp does not have.
    let dir = bert_dir();
    fs::write(
        dir.path().join("1_Pooling/config.json"),
        r#"{"pooling_mode_max_tokens": true}"#,
    )
    .unwrap();
    expect_invalid(
        recognize(dir.path(), &bert_config(), &bert_tensors(), q),
        "pooling",
    );
}

fn llama_config() -> Json {
    json!({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8,
           "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
           "intermediate_size": 16, "vocab_size": 5, "rms_norm_eps": 1e-5,
           "max_position_embeddings": 64, "bos_token_id": 1, "eos_token_id": 2,
           "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"}})
}

fn llama_tensors(layers: usize) -> Vec<TensorListing> {
    let (v, e, f, kv) = (5, 8, 16, 4);
    let mut t = listing(&[
        ("model.embed_tokens.weight", &[v, e]),
        ("model.norm.weight", &[e]),
        ("lm_head.weight", &[v, e]),
    ]);
    for l in 0..layers {
        let p = format!("model.layers.{l}");
        for (n, s) in [
            ("input_layernorm", vec![e]),
            ("self_attn.q_proj", vec![e, e]),
            ("self_attn.k_proj", vec![kv, e]),
            ("self_attn.v_proj", vec![kv, e]),
            ("self_attn.o_proj", vec![e, e]),
            ("post_attention_layernorm", vec![e]),
            ("mlp.gate_proj", vec![f, e]),
            ("mlp.up_proj", vec![f, e]),
            ("mlp.down_proj", vec![e, f]),
        ] {
            t.push(TensorListing {
                name: format!("{p}.{n}.weight"),
                dtype: DType::BF16,
                shape: s,
            });
        }
    }
    t
}

/// A five-token SentencePiece model, encoded by hand.
fn write_spm(dir: &Path) {
    use super::vocab::spm::{ModelProto, SentencePiece};
    use prost::Message;
    let model = ModelProto {
        pieces: [
            ("<unk>", 0.0, 2),
            ("<s>", 0.0, 3),
            ("</s>", 0.0, 3),
            ("\u{2581}a", -1.0, 1),
            ("<0x0A>", 0.0, 6),
        ]
        .iter()
        .map(|(p, s, t)| SentencePiece {
            piece: Some(p.to_string()),
            score: Some(*s),
            r#type: Some(*t),
        })
        .collect(),
        trainer_spec: None,
        normalizer_spec: None,
    };
    fs::write(dir.join("tokenizer.model"), model.encode_to_vec()).unwrap();
}

#[test]
fn a_llama_directory_with_tokenizer_model() {
    let dir = tempfile::tempdir().unwrap();
    write_spm(dir.path());
    fs::write(
        dir.path().join("tokenizer_config.json"),
        r#"{"add_bos_token": true, "add_eos_token": false, "chat_template": "{{ messages }}"}"#,
    )
    .unwrap();
    let e = known(
        recognize(
            dir.path(),
            &llama_config(),
            &llama_tensors(2),
            QuantizationChoice::Preset(Preset::Q8_0),
        )
        .unwrap(),
    );
    assert_eq!(e.architecture, "llama");
    assert_eq!(
        kv(&e, "llama.attention.head_count_kv"),
        Some(&GgufValue::U32(1))
    );
    assert_eq!(
        kv(&e, "llama.rope.freq_base"),
        Some(&GgufValue::F32(500000.0))
    );
    assert_eq!(
        kv(&e, "llama.rope.dimension_count"),
        Some(&GgufValue::U32(4))
    );
    assert_eq!(kv(&e, "llama.vocab_size"), Some(&GgufValue::U32(5)));
    assert_eq!(
        kv(&e, "tokenizer.ggml.model"),
        Some(&GgufValue::from("llama"))
    );
    assert_eq!(
        kv(&e, "tokenizer.ggml.token_type"),
        Some(&GgufValue::Array(GgufArray::I32(vec![2, 3, 3, 1, 6])))
    );
    assert_eq!(
        kv(&e, "tokenizer.ggml.scores"),
        Some(&GgufValue::Array(GgufArray::F32(vec![
            0.0, 0.0, 0.0, -1.0, 0.0
        ])))
    );
    assert_eq!(
        kv(&e, "tokenizer.ggml.bos_token_id"),
        Some(&GgufValue::U32(1))
    );
    assert_eq!(
        kv(&e, "tokenizer.ggml.add_bos_token"),
        Some(&GgufValue::Bool(true))
    );
    assert_eq!(
        kv(&e, "tokenizer.chat_template"),
        Some(&GgufValue::from("{{ messages }}"))
    );
    let t = |n: &str| e.tensors.iter().find(|t| t.name == n).unwrap().clone();
    assert_eq!(
        t("blk.1.attn_q.weight").origin,
        Origin::Source {
            name: "model.layers.1.self_attn.q_proj.weight".into(),
            transform: Transform::RopeInterleave { heads: 2 }
        }
    );
    assert_eq!(
        t("blk.1.attn_k.weight").origin,
        Origin::Source {
            name: "model.layers.1.self_attn.k_proj.weight".into(),
            transform: Transform::RopeInterleave { heads: 1 }
        }
    );
    // Rows of 8 are not whole Q8_0 blocks: F16, as the converter falls back.
    assert_eq!(t("blk.0.attn_v.weight").ggml_type, GgmlType::F16);
}

#[test]
fn bad_llama_input_names_the_field_tensor_or_file() {
    let dir = tempfile::tempdir().unwrap();
    write_spm(dir.path());
    let q = QuantizationChoice::Preset(Preset::F32);
    let with = |k: &str, v: Json| {
        let mut c = llama_config();
        c[k] = v;
        c
    };
    expect_invalid(
        recognize(
            dir.path(),
            &with("num_key_value_heads", json!(3)),
            &llama_tensors(2),
            q,
        ),
        "num_key_value_heads",
    );
    expect_invalid(
        recognize(
            dir.path(),
            &with("num_attention_heads", json!(3)),
            &llama_tensors(2),
            q,
        ),
        "num_attention_heads",
    );
    expect_invalid(
        recognize(
            dir.path(),
            &with("vocab_size", json!(6)),
            &llama_tensors(2),
            q,
        ),
        "vocab_size",
    );
    let e = expect_invalid(
        recognize(
            dir.path(),
            &with("num_hidden_layers", json!(3)),
            &llama_tensors(2),
            q,
        ),
        "missing",
    );
    assert_eq!(e.tensor(), Some("model.layers.2.input_layernorm.weight"));
    // An odd head_dim cannot be rotated in pairs.
    let mut c = llama_config();
    c["head_dim"] = json!(3);
    expect_invalid(recognize(dir.path(), &c, &llama_tensors(2), q), "head_dim");
    // A tokenizer.model that is not a SentencePiece model.
    fs::write(
        dir.path().join("tokenizer.model"),
        b"\xff\xff\xff\xff not protobuf",
    )
    .unwrap();
    let e = expect_invalid(
        recognize(dir.path(), &llama_config(), &llama_tensors(2), q),
        "SentencePiece",
    );
    assert!(e.path().unwrap().ends_with("tokenizer.model"));
    // No tokenizer at all.
    fs::remove_file(dir.path().join("tokenizer.model")).unwrap();
    expect_invalid(
        recognize(dir.path(), &llama_config(), &llama_tensors(2), q),
        "tokenizer",
    );
}

/// Every file of the directory the export reads must resolve inside it (see
/// `pretrained::companion`): one that does not never reaches the GGUF. A file the export can
/// do without (tokenizer_config.json, chat templates) is skipped with a warning in the
/// report; a file of the vocabulary is an error naming why (a tokenizer.json linked to
/// /dev/zero is not "missing").
#[cfg(unix)]
#[test]
fn files_resolving_outside_the_directory_never_reach_the_gguf() {
    use std::os::unix::fs::symlink;
    let tmp = tempfile::tempdir().unwrap();
    let secret = tmp.path().join("secret.json");
    fs::write(
        &secret,
        r#"{"chat_template": "AWS_SECRET_ACCESS_KEY=hunter2"}"#,
    )
    .unwrap();
    let dir = tmp.path().join("model");
    fs::create_dir_all(dir.join("additional_chat_templates")).unwrap();
    write_spm(&dir);
    fs::write(
        dir.join("tokenizer_config.json"),
        r#"{"add_bos_token": true}"#,
    )
    .unwrap();
    let export = || {
        known(
            recognize(
                &dir,
                &llama_config(),
                &llama_tensors(2),
                QuantizationChoice::Keep,
            )
            .unwrap(),
        )
    };
    let leaks = |e: &LlamaExport| -> Vec<String> {
        e.metadata
            .iter()
            .map(|(k, v)| format!("{k}={}", v.to_json()))
            .filter(|kv| kv.contains("hunter2") || kv.contains("PATH="))
            .collect()
    };
    let skipped = |e: &LlamaExport, name: &str, why: &str| {
        assert!(
            e.warnings
                .iter()
                .any(|w| w.contains(name) && w.contains(why) && w.ends_with("skipped")),
            "{name}: {:?}",
            e.warnings
        );
        assert_eq!(leaks(e), Vec::<String>::new());
    };
    let jinja = dir.join("chat_template.jinja");

    symlink("/proc/self/environ", &jinja).unwrap();
    let e = export();
    assert_eq!(kv(&e, "tokenizer.chat_template"), None);
    skipped(&e, "chat_template.jinja", "resolves to /proc/");

    fs::remove_file(&jinja).unwrap();
    let c = std::ffi::CString::new(jinja.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    skipped(&export(), "chat_template.jinja", "is not a regular file");

    fs::remove_file(&jinja).unwrap();
    fs::write(&jinja, "{{ messages }}").unwrap();
    symlink(
        &secret,
        dir.join("additional_chat_templates/tool_use.jinja"),
    )
    .unwrap();
    let e = export();
    assert_eq!(
        kv(&e, "tokenizer.chat_template"),
        Some(&GgufValue::from("{{ messages }}"))
    );
    assert_eq!(kv(&e, "tokenizer.chat_template.tool_use"), None);
    skipped(&e, "tool_use.jinja", "outside the model directory");

    fs::remove_file(&jinja).unwrap();
    symlink(&secret, dir.join("chat_template.json")).unwrap();
    skipped(
        &export(),
        "chat_template.json",
        "outside the model directory",
    );

    fs::remove_file(dir.join("tokenizer_config.json")).unwrap();
    symlink(&secret, dir.join("tokenizer_config.json")).unwrap();
    let e = export();
    assert_eq!(kv(&e, "tokenizer.ggml.add_bos_token"), None);
    skipped(&e, "tokenizer_config.json", "outside the model directory");

    // The vocabulary itself: an error that says why.
    fs::remove_file(dir.join("tokenizer.model")).unwrap();
    symlink("/dev/zero", dir.join("tokenizer.model")).unwrap();
    let refused = |name: &str| {
        let q = QuantizationChoice::Keep;
        let e = recognize(&dir, &llama_config(), &llama_tensors(2), q).unwrap_err();
        assert_eq!(e.code(), "ERR_UNSAFE_PATH", "{e}");
        assert!(e.detail().contains("resolves to /dev/zero"), "{e}");
        assert_eq!(
            e.path(),
            Some(dir.join(name).display().to_string().as_str())
        );
    };
    refused("tokenizer.model");
    // Without tokenizer.model, the byte-level BPE tokenizer.json is the vocabulary.
    fs::remove_file(dir.join("tokenizer.model")).unwrap();
    symlink("/dev/zero", dir.join("tokenizer.json")).unwrap();
    refused("tokenizer.json");
}

/// A Hugging Face cache snapshot: every file a relative symlink into `../../blobs/`.
#[cfg(unix)]
#[test]
fn a_cache_snapshot_linking_into_its_blobs_exports_whole() {
    use std::os::unix::fs::symlink;
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("models--org--tiny-llama");
    let snapshot = repo.join("snapshots/5f0b02c75b57c5855da9ae460ce51323ea669d8a");
    fs::create_dir_all(&snapshot).unwrap();
    fs::create_dir_all(repo.join("blobs")).unwrap();
    let staging = tmp.path().join("staging");
    fs::create_dir(&staging).unwrap();
    write_spm(&staging);
    fs::write(
        staging.join("tokenizer_config.json"),
        r#"{"add_bos_token": true}"#,
    )
    .unwrap();
    fs::write(staging.join("chat_template.jinja"), "{{ messages }}").unwrap();
    for (i, entry) in fs::read_dir(&staging).unwrap().enumerate() {
        let entry = entry.unwrap();
        let blob = format!("{i:064x}");
        fs::rename(entry.path(), repo.join("blobs").join(&blob)).unwrap();
        symlink(
            format!("../../blobs/{blob}"),
            snapshot.join(entry.file_name()),
        )
        .unwrap();
    }
    let e = known(
        recognize(
            &snapshot,
            &llama_config(),
            &llama_tensors(2),
            QuantizationChoice::Keep,
        )
        .unwrap(),
    );
    assert_eq!(e.warnings, Vec::<String>::new());
    assert_eq!(
        kv(&e, "tokenizer.ggml.model"),
        Some(&GgufValue::from("llama"))
    );
    assert_eq!(
        kv(&e, "tokenizer.chat_template"),
        Some(&GgufValue::from("{{ messages }}"))
    );
    assert_eq!(
        kv(&e, "tokenizer.ggml.add_bos_token"),
        Some(&GgufValue::Bool(true))
    );
}

/// Resident bytes of the mapping that contains `addr` (from /proc/self/smaps).
#[cfg(feature = "mmap")]
fn mapping_rss(addr: usize) -> usize {
    let smaps = fs::read_to_string("/proc/self/smaps").unwrap();
    let mut inside = false;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ') {
            if let Some((a, b)) = range.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    inside = a <= addr && addr < b;
                    continue;
                }
            }
        }
        if inside {
            if let Some(kb) = line.strip_prefix("Rss:") {
                return kb
                    .trim()
                    .trim_end_matches(" kB")
                    .trim()
                    .parse::<usize>()
                    .unwrap()
                    * 1024;
            }
        }
    }
    panic!("no mapping holds {addr:#x}")
}

/// Page release is a property of mapped files (the `mmap` feature).
#[cfg(feature = "mmap")]
#[test]
fn a_released_tensor_leaves_the_process_rss() {
    // The export loop releases each source tensor's pages once written, so a conversion's
    // RSS holds one tensor of the input, not the whole mapped model.
    use crate::pretrained::ModelDir;
    use crate::source::TensorSource;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    fs::write(dir.path().join("config.json"), "{}").unwrap();
    let n = 4 << 20; // 16 MiB of F32 per tensor
    let values: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let views = [
        TensorView::from_f32("a", vec![n], &values).unwrap(),
        TensorView::from_f32("b", vec![n], &values).unwrap(),
    ];
    let options = crate::fsutil::WriteOptions::default();
    crate::format::safetensors::save_file(&path, &views, None, options).unwrap();
    let file = ModelDir::open(dir.path(), &mut |_| {}).unwrap();
    let touch = |name: &str| {
        let v = file.view(name).unwrap();
        let sum: u64 = v
            .data
            .iter()
            .step_by(4096)
            .map(|&b| std::hint::black_box(b) as u64)
            .sum();
        (v.data.as_ptr() as usize, std::hint::black_box(sum))
    };
    let (addr, _) = touch("a");
    touch("b");
    let before = mapping_rss(addr);
    assert!(
        before >= 2 * n * 4 - (64 << 10),
        "both tensors resident: {before}"
    );
    file.release("a");
    let after = mapping_rss(addr);
    assert!(
        before - after >= n * 4 - 8192,
        "a released: {before} → {after}"
    );
    assert!(after >= n * 4 - 8192, "b still resident: {after}");
    // Released pages come back from the file, unchanged.
    let v = file.view("a").unwrap();
    assert_eq!(&v.data[4 * 12345..4 * 12346], &12345f32.to_le_bytes());
}

#[test]
fn every_exported_name_is_one_ggml_reads_whole() {
    // The writer refuses names ggml would not read back (64 bytes or more, a NUL): every
    // name of every table, with the longest layer number a name can carry, stays within.
    use crate::format::gguf::{GgmlType, GgufTensorSpec, MAX_TENSOR_NAME_BYTES};
    let mut longest = 0;
    for rules in [
        bert::TENSORS.to_vec(),
        llama::SPEC.rules(),
        mistral::MIXTRAL_SPEC.rules(),
        olmo2::SPEC.rules(),
        qwen2::SPEC.rules(),
        qwen3::SPEC.rules(),
        qwen_moe::QWEN2_MOE_SPEC.rules(),
        qwen_moe::QWEN3_MOE_SPEC.rules(),
        starcoder2::SPEC.rules(),
        gemma::GEMMA3_SPEC.rules(),
    ] {
        for rule in rules {
            let name = rule.gguf.replace("{bid}", &usize::MAX.to_string()) + ".weight";
            longest = longest.max(name.len());
            let spec = GgufTensorSpec::new(&name, vec![32], GgmlType::F32);
            assert!(spec.byte_len().is_ok(), "{name}");
        }
    }
    assert!(
        longest <= MAX_TENSOR_NAME_BYTES && longest > 40,
        "{longest}"
    );
}

/// Gemma's norms scale by `1 + w`: the export adds one in the converter's precision (F16
/// rounds back to F16, BF16 widens to F32 first).
#[test]
fn gemma_norms_add_one_in_the_converters_precision() {
    let f16 = |x: f32| half::f16::from_f32(x).to_bits().to_le_bytes();
    // 2^-11 + 1 is not an F16: it rounds to 1 (ties to even).
    let (dtype, out) = add_one(&[f16(0.5), f16(2f32.powi(-11))].concat(), DType::F16).unwrap();
    assert_eq!(dtype, DType::F16);
    assert_eq!(out, [f16(1.5), f16(1.0)].concat());
    // 2^-8 + 1 is an F32 but not a BF16: kept whole.
    let bf16 = (2f32.powi(-8).to_bits() >> 16) as u16;
    let (dtype, out) = add_one(&bf16.to_le_bytes(), DType::BF16).unwrap();
    assert_eq!(dtype, DType::F32);
    assert_eq!(out, (1.0 + 2f32.powi(-8)).to_le_bytes());
}

fn gemma2_tensors() -> Vec<TensorListing> {
    let (v, e, f, d) = (5, 8, 16, 4);
    let mut t = listing(&[
        ("model.embed_tokens.weight", &[v, e]),
        ("model.norm.weight", &[e]),
        ("lm_head.weight", &[v, e]),
    ]);
    t.extend(gemma_layer("model.", [e, f, 2, 1, d], false));
    t
}

/// Layer 0 of a Gemma 2 or 3 (with `qk_norms`) under `{prefix}layers.0.`, BF16, of sizes
/// `[hidden, intermediate, heads, key/value heads, head_dim]`.
fn gemma_layer(prefix: &str, [e, f, h, kv, d]: [usize; 5], qk_norms: bool) -> Vec<TensorListing> {
    let norms: &[(&str, Vec<usize>)] = if qk_norms {
        &[("self_attn.q_norm", vec![d]), ("self_attn.k_norm", vec![d])]
    } else {
        &[]
    };
    [
        ("input_layernorm", vec![e]),
        ("self_attn.q_proj", vec![h * d, e]),
        ("self_attn.k_proj", vec![kv * d, e]),
        ("self_attn.v_proj", vec![kv * d, e]),
        ("self_attn.o_proj", vec![e, h * d]),
    ]
    .iter()
    .chain(norms)
    .chain(&[
        ("post_attention_layernorm", vec![e]),
        ("pre_feedforward_layernorm", vec![e]),
        ("post_feedforward_layernorm", vec![e]),
        ("mlp.gate_proj", vec![f, e]),
        ("mlp.up_proj", vec![f, e]),
        ("mlp.down_proj", vec![e, f]),
    ])
    .map(|(n, s)| TensorListing {
        name: format!("{prefix}layers.0.{n}.weight"),
        dtype: DType::BF16,
        shape: s.clone(),
    })
    .collect()
}

/// The export of a one-layer Gemma 2 directory whose config.json has `extra` besides the sizes.
fn gemma2_export(extra: Json) -> LlamaExport {
    let dir = tempfile::tempdir().unwrap();
    write_spm(dir.path());
    let mut config = json!({"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
        "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
        "num_key_value_heads": 1, "head_dim": 4, "intermediate_size": 16, "vocab_size": 5});
    if let (Some(c), Some(x)) = (config.as_object_mut(), extra.as_object()) {
        c.extend(x.clone());
    }
    let e = known(
        recognize(
            dir.path(),
            &config,
            &gemma2_tensors(),
            QuantizationChoice::Keep,
        )
        .unwrap(),
    );
    e
}

#[test]
fn a_gemma2_directory_shifts_its_norms_and_carries_soft_capping() {
    let e = gemma2_export(json!({"rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "final_logit_softcapping": null, "sliding_window": 4}));
    assert_eq!(e.architecture, "gemma2");
    let t = |n: &str| origin(&e, n);
    let shifted = |hf: &str| {
        Some(Origin::Source {
            name: hf.into(),
            transform: Transform::AddOne,
        })
    };
    assert_eq!(t("output_norm.weight"), shifted("model.norm.weight"));
    assert_eq!(
        t("blk.0.post_attention_norm.weight"),
        shifted("model.layers.0.post_attention_layernorm.weight")
    );
    assert_eq!(
        t("blk.0.ffn_norm.weight"),
        shifted("model.layers.0.pre_feedforward_layernorm.weight")
    );
    // NeoX rope: Q and K as they are; lm_head dropped (the output is the embeddings).
    assert_eq!(
        t("blk.0.attn_q.weight"),
        Some(Origin::Source {
            name: "model.layers.0.self_attn.q_proj.weight".into(),
            transform: Transform::Identity
        })
    );
    assert_eq!(t("output.weight"), None);
    assert_eq!(
        kv(&e, "gemma2.attn_logit_softcapping"),
        Some(&GgufValue::F32(50.0))
    );
    assert_eq!(kv(&e, "gemma2.final_logit_softcapping"), None);
    assert_eq!(
        kv(&e, "gemma2.attention.sliding_window"),
        Some(&GgufValue::U32(4))
    );
    assert_eq!(kv(&e, "gemma2.rope.freq_base"), None);
    assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    assert_eq!(
        kv(&e, "tokenizer.ggml.add_space_prefix"),
        Some(&GgufValue::Bool(false))
    );
}

/// llama.cpp fixes Gemma 2's layer pattern and attention scale itself: a config that says
/// otherwise converts, with a warning naming the field.
#[test]
fn a_gemma2_config_llama_cpp_would_run_differently_is_a_warning() {
    let e = gemma2_export(json!({"query_pre_attn_scalar": 256, "layer_types": ["full_attention"]}));
    assert_eq!(e.warnings.len(), 2, "{:?}", e.warnings);
    assert!(e.warnings[0].contains("'layer_types'"), "{:?}", e.warnings);
    assert!(
        e.warnings[1].contains("'query_pre_attn_scalar' is 256"),
        "{:?}",
        e.warnings
    );
}

/// A one-layer Gemma3ForConditionalGeneration's tensors, the text model's under `prefix`
/// (`language_model.model.` before transformers 4.52, `model.language_model.` since), the
/// vision tower's and projector's under `outer` (`` before 4.52, `model.` since), with
/// transformers' default heads (8 of head_dim 256, 4 key/value heads).
fn gemma3_mm_tensors(prefix: &str, outer: &str, lm_head: Option<&str>) -> Vec<TensorListing> {
    let (v, e, f, d) = (5, 8, 16, 256);
    let mut t: Vec<(String, Vec<usize>)> = vec![
        (format!("{prefix}embed_tokens.weight"), vec![v, e]),
        (format!("{prefix}norm.weight"), vec![e]),
        (
            format!("{outer}vision_tower.vision_model.embeddings.patch_embedding.weight"),
            vec![4, 3, 2, 2],
        ),
        (
            format!("{outer}vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.bias"),
            vec![4],
        ),
        (
            format!("{outer}vision_tower.vision_model.post_layernorm.weight"),
            vec![4],
        ),
        (
            format!("{outer}multi_modal_projector.mm_input_projection_weight"),
            vec![4, e],
        ),
        (
            format!("{outer}multi_modal_projector.mm_soft_emb_norm.weight"),
            vec![4],
        ),
    ];
    if let Some(name) = lm_head {
        t.push((name.to_string(), vec![v, e]));
    }
    let mut t: Vec<TensorListing> = t
        .into_iter()
        .map(|(name, shape)| TensorListing {
            name,
            dtype: DType::BF16,
            shape,
        })
        .collect();
    t.extend(gemma_layer(prefix, [e, f, 8, 4, d], true));
    t
}

/// Gemma 3's multimodal checkpoints: the text model from `text_config` (transformers'
/// defaults for what it leaves out, over the top level's values) and from either tensor
/// layout, the vision tower and projector skipped.
#[test]
fn a_gemma3_conditional_generation_directory_exports_its_text_model() {
    let dir = tempfile::tempdir().unwrap();
    write_spm(dir.path());
    // Google's configs give only these few; a top-level number is not the text model's.
    let config = json!({"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
        "num_attention_heads": 2, "text_config": {"model_type": "gemma3_text", "hidden_size": 8,
        "intermediate_size": 16, "num_hidden_layers": 1, "vocab_size": 5,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"}},
        "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 4}});
    let layouts = [
        (
            "language_model.model.",
            "",
            Some("language_model.lm_head.weight"),
        ),
        ("model.language_model.", "model.", Some("lm_head.weight")),
        ("model.language_model.", "model.", None),
    ];
    for (prefix, outer, lm_head) in layouts {
        let tensors = gemma3_mm_tensors(prefix, outer, lm_head);
        let e = known(recognize(dir.path(), &config, &tensors, QuantizationChoice::Keep).unwrap());
        assert_eq!(e.architecture, "gemma3");
        let origin = |n: &str| origin(&e, n);
        assert_eq!(
            origin("blk.0.attn_q.weight"),
            Some(Origin::Source {
                name: format!("{prefix}layers.0.self_attn.q_proj.weight"),
                transform: Transform::Identity
            })
        );
        assert_eq!(
            origin("output_norm.weight"),
            Some(Origin::Source {
                name: format!("{prefix}norm.weight"),
                transform: Transform::AddOne
            })
        );
        assert_eq!(
            origin("output.weight"),
            lm_head.map(|name| Origin::Source {
                name: name.into(),
                transform: Transform::Identity
            })
        );
        // The text model's 15 or 16 tensors; the vision tower's and projector's none.
        assert_eq!(e.tensors.len(), 15 + usize::from(lm_head.is_some()));
        assert!(e.tensors.iter().all(|t| match &t.origin {
            Origin::Source { name, .. } => !name.contains("vision") && !name.contains("projector"),
            _ => false,
        }));
        for (key, value) in [
            ("gemma3.attention.head_count", GgufValue::U32(8)),
            ("gemma3.attention.head_count_kv", GgufValue::U32(4)),
            ("gemma3.attention.key_length", GgufValue::U32(256)),
            ("gemma3.context_length", GgufValue::U32(131_072)),
            ("gemma3.attention.sliding_window", GgufValue::U32(4096)),
            ("gemma3.rope.freq_base", GgufValue::F32(1e6)),
            ("gemma3.rope.freq_base_swa", GgufValue::F32(1e4)),
            ("gemma3.rope.scaling.factor", GgufValue::F32(8.0)),
            (
                "gemma3.attention.layer_norm_rms_epsilon",
                GgufValue::F32(1e-6),
            ),
        ] {
            assert_eq!(kv(&e, key), Some(&value), "{key}");
        }
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    }
    // A config's own value wins over the default; a vision tensor outside the tower and
    // projector is one llama.cpp has no place for.
    let mut own = config.clone();
    own["text_config"]["sliding_window"] = json!(512);
    let tensors = gemma3_mm_tensors("model.language_model.", "model.", None);
    let e = known(recognize(dir.path(), &own, &tensors, QuantizationChoice::Keep).unwrap());
    assert_eq!(
        kv(&e, "gemma3.attention.sliding_window"),
        Some(&GgufValue::U32(512))
    );
    let mut stray = tensors.clone();
    stray.extend(listing(&[("model.audio_tower.conv.weight", &[4])]));
    let e = expect_invalid(
        recognize(dir.path(), &config, &stray, QuantizationChoice::Keep),
        "no tensor of this name",
    );
    assert_eq!(e.tensor(), Some("model.audio_tower.conv.weight"));
}

fn phi3_tensors() -> Vec<TensorListing> {
    let (v, e, f) = (5, 8, 16);
    let mut t = listing(&[
        ("model.embed_tokens.weight", &[v, e]),
        ("model.norm.weight", &[e]),
    ]);
    let p = "model.layers.0";
    t.extend(listing(&[
        (&format!("{p}.input_layernorm.weight"), &[e]),
        (&format!("{p}.self_attn.qkv_proj.weight"), &[3 * e, e]),
        (&format!("{p}.self_attn.o_proj.weight"), &[e, e]),
        (&format!("{p}.post_attention_layernorm.weight"), &[e]),
        (&format!("{p}.mlp.gate_up_proj.weight"), &[2 * f, e]),
        (&format!("{p}.mlp.down_proj.weight"), &[e, f]),
    ]));
    t
}

/// Phi-3 128k's LongRoPE: the factors become two generated F32 tensors ahead of the model's
/// and the attention factor the converter computes (√(1 + ln(scale) / ln(original context)));
/// factor lists of the wrong length are refused naming the field.
#[test]
fn phi3_long_rope_factors_become_tensors() {
    let dir = tempfile::tempdir().unwrap();
    write_spm(dir.path());
    let config = |long: Json| {
        json!({"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 8,
               "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2,
               "intermediate_size": 16, "vocab_size": 5, "max_position_embeddings": 131072,
               "original_max_position_embeddings": 4096,
               "rope_scaling": {"type": "longrope", "long_factor": long,
                                "short_factor": [1.0, 1.5]}})
    };
    let e = known(
        recognize(
            dir.path(),
            &config(json!([2.0, 3.0])),
            &phi3_tensors(),
            QuantizationChoice::Keep,
        )
        .unwrap(),
    );
    assert_eq!(e.tensors[0].name, "rope_factors_long.weight");
    assert_eq!(e.tensors[0].origin, Origin::Generated(vec![2.0, 3.0]));
    assert_eq!(e.tensors[1].name, "rope_factors_short.weight");
    assert_eq!(e.tensors[1].origin, Origin::Generated(vec![1.0, 1.5]));
    let attn = (1.0 + 32f64.ln() / 4096f64.ln()).sqrt() as f32;
    assert_eq!(
        kv(&e, "phi3.rope.scaling.attn_factor"),
        Some(&GgufValue::F32(attn))
    );
    assert_eq!(
        kv(&e, "phi3.rope.dimension_count"),
        Some(&GgufValue::U32(4))
    );
    assert_eq!(
        kv(&e, "phi3.attention.sliding_window"),
        Some(&GgufValue::U32(0))
    );
    let t = |n: &str| e.tensors.iter().find(|t| t.name == n).unwrap();
    assert_eq!(t("blk.0.attn_qkv.weight").shape, [24, 8]);
    assert_eq!(t("blk.0.ffn_up.weight").shape, [32, 8]);
    expect_invalid(
        recognize(
            dir.path(),
            &config(json!([2.0, 3.0, 4.0])),
            &phi3_tensors(),
            QuantizationChoice::Keep,
        ),
        "'rope_scaling' has 3 long and 2 short factors; the rotary dimensions (4) need 2 of each",
    );
}

/// GPT-2's Conv1D weights are `[in, out]`: checked in that layout, written transposed.
#[test]
fn gpt2_conv1d_weights_are_transposed_and_checked_in_their_own_layout() {
    let dir = tempfile::tempdir().unwrap();
    let (v, e, ctx) = (5, 8, 16);
    let config = json!({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
        "n_embd": e, "n_layer": 1, "n_head": 2, "n_positions": ctx, "vocab_size": v});
    let tensors = |c_fc: &[usize]| {
        let p = "transformer.h.0";
        let mut t = listing(&[
            ("transformer.wte.weight", &[v, e]),
            ("transformer.wpe.weight", &[ctx, e]),
            ("transformer.ln_f.weight", &[e]),
            ("transformer.ln_f.bias", &[e]),
        ]);
        for (n, s) in [
            ("ln_1.weight", vec![e]),
            ("ln_1.bias", vec![e]),
            ("attn.c_attn.weight", vec![e, 3 * e]),
            ("attn.c_attn.bias", vec![3 * e]),
            ("attn.c_proj.weight", vec![e, e]),
            ("attn.c_proj.bias", vec![e]),
            ("ln_2.weight", vec![e]),
            ("ln_2.bias", vec![e]),
            ("mlp.c_fc.weight", c_fc.to_vec()),
            ("mlp.c_fc.bias", vec![4 * e]),
            ("mlp.c_proj.weight", vec![4 * e, e]),
            ("mlp.c_proj.bias", vec![e]),
        ] {
            t.extend(listing(&[(&format!("{p}.{n}"), &s)]));
        }
        t
    };
    // No vocabulary here: the tensors are checked first.
    let err = recognize(
        dir.path(),
        &config,
        &tensors(&[4 * e, e]),
        QuantizationChoice::Keep,
    )
    .unwrap_err();
    assert_eq!(err.tensor(), Some("transformer.h.0.mlp.c_fc.weight"));
    assert!(err.to_string().contains("implies [8, 32]"), "{err}");
    let mut listed = tensors(&[e, 4 * e]);
    listed.retain(|t| t.name != "transformer.h.0.attn.c_attn.bias");
    let err = recognize(dir.path(), &config, &listed, QuantizationChoice::Keep).unwrap_err();
    // A missing tensor is named as the table names it (without the stripped prefix).
    assert_eq!(err.tensor(), Some("h.0.attn.c_attn.bias"));
    let plan = names::map_tensors(
        &tensors(&[e, 4 * e]),
        gpt2::TENSORS,
        &names::NamePolicy {
            prefix_renames: &[("transformer.", "")],
            renames: &[],
            dropped: &[],
        },
        &names::Dims {
            vocab: v,
            embd: e,
            ff: 4 * e,
            n_head: 2,
            n_head_kv: 2,
            head_dim: 4,
            ctx,
            ..Default::default()
        },
        1,
    )
    .unwrap();
    let exported = source_tensors(&plan, &tensors(&[e, 4 * e]), |_| Transform::Identity).unwrap();
    let up = exported
        .iter()
        .find(|t| t.name == "blk.0.ffn_up.weight")
        .unwrap();
    assert_eq!(up.shape, [32, 8]);
    assert!(matches!(
        up.origin,
        Origin::Source {
            transform: Transform::Transpose,
            ..
        }
    ));
    let bias = exported
        .iter()
        .find(|t| t.name == "blk.0.attn_qkv.bias")
        .unwrap();
    assert_eq!(bias.shape, [24]);
    assert!(matches!(
        bias.origin,
        Origin::Source {
            transform: Transform::Identity,
            ..
        }
    ));
}

/// `sentencepiece.bpe.model` of `pieces` (SentencePiece's <unk> <s> </s> first), of trainer
/// model type `kind`, with a precompiled character map and whitespace flags.
fn write_unigram(dir: &Path, pieces: &[&str], kind: i32) {
    use super::vocab::spm::{ModelProto, NormalizerSpec, SentencePiece, TrainerSpec};
    use prost::Message;
    let model = ModelProto {
        pieces: pieces
            .iter()
            .enumerate()
            .map(|(i, p)| SentencePiece {
                piece: Some(p.to_string()),
                score: Some(-(i as f32)),
                r#type: Some([2, 3, 3].get(i).copied().unwrap_or(1)),
            })
            .collect(),
        trainer_spec: Some(TrainerSpec {
            model_type: Some(kind),
        }),
        normalizer_spec: Some(NormalizerSpec {
            precompiled_charsmap: Some(b"charsmap".to_vec()),
            add_dummy_prefix: Some(true),
            remove_extra_whitespaces: Some(false),
        }),
    };
    fs::write(dir.join("sentencepiece.bpe.model"), model.encode_to_vec()).unwrap();
}

fn xlm_roberta_config() -> Json {
    let mut c = bert_config();
    c["architectures"] = json!(["XLMRobertaModel"]);
    c["model_type"] = json!("xlm-roberta");
    c["pad_token_id"] = json!(1);
    c
}

#[test]
fn an_xlm_roberta_directory_skips_the_position_rows_before_pad_and_reads_the_unigram_model() {
    let dir = bert_dir();
    write_unigram(dir.path(), &["<unk>", "<s>", "</s>", "▁a", "▁b"], 1);
    let q = QuantizationChoice::Preset(Preset::F32);
    let e = known(recognize(dir.path(), &xlm_roberta_config(), &bert_tensors(), q).unwrap());
    assert_eq!(e.architecture, "bert");
    // max_position_embeddings 4, positions from pad_token_id + 1 = 2.
    assert_eq!(kv(&e, "bert.context_length"), Some(&GgufValue::U32(2)));
    let pos = e
        .tensors
        .iter()
        .find(|t| t.name == "position_embd.weight")
        .unwrap();
    assert_eq!(pos.shape, [2, 8]);
    let rows: Vec<f32> = (0..32).map(|i| i as f32).collect();
    let view = e
        .load(pos, |_| {
            TensorView::from_f32("embeddings.position_embeddings.weight", vec![4, 8], &rows)
        })
        .unwrap();
    let expected: Vec<u8> = rows[16..].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!((view.shape, view.data.into_owned()), (vec![2, 8], expected));
    // Fairseq's ids: <s> <pad> </s> <unk>, the pieces after SentencePiece's three shifted by
    // one, the last slot (vocab_size 6 > 5 pieces) a placeholder.
    let strings = |k: &str| match kv(&e, k) {
        Some(GgufValue::Array(GgufArray::String(v))) => v.clone(),
        other => panic!("{k}: {other:?}"),
    };
    assert_eq!(
        strings("tokenizer.ggml.tokens"),
        ["<s>", "<pad>", "</s>", "<unk>", "▁a", "▁b"]
    );
    assert_eq!(
        kv(&e, "tokenizer.ggml.token_type"),
        Some(&GgufValue::Array(GgufArray::I32(vec![3, 3, 3, 2, 1, 1])))
    );
    assert_eq!(
        kv(&e, "tokenizer.ggml.scores"),
        Some(&GgufValue::Array(GgufArray::F32(vec![
            0.0, 0.0, 0.0, 0.0, -3.0, -4.0
        ])))
    );
    assert_eq!(
        kv(&e, "tokenizer.ggml.model"),
        Some(&GgufValue::String("t5".into()))
    );
    assert_eq!(
        kv(&e, "tokenizer.ggml.precompiled_charsmap"),
        Some(&GgufValue::Array(GgufArray::U8(b"charsmap".to_vec())))
    );
    assert_eq!(
        kv(&e, "tokenizer.ggml.remove_extra_whitespaces"),
        Some(&GgufValue::Bool(false))
    );
    assert_eq!(
        kv(&e, "tokenizer.ggml.token_type_count"),
        Some(&GgufValue::U32(2))
    );
}

#[test]
fn bad_xlm_roberta_input_names_the_field_or_file() {
    let q = QuantizationChoice::Preset(Preset::F32);
    let dir = bert_dir();
    expect_invalid(
        recognize(dir.path(), &xlm_roberta_config(), &bert_tensors(), q),
        "has no sentencepiece.bpe.model",
    );
    write_unigram(dir.path(), &["<unk>", "<s>", "</s>", "▁a"], 2);
    expect_invalid(
        recognize(dir.path(), &xlm_roberta_config(), &bert_tensors(), q),
        "not Unigram",
    );
    write_unigram(dir.path(), &["<unk>", "<s>", "</s>"], 1);
    expect_invalid(
        recognize(dir.path(), &xlm_roberta_config(), &bert_tensors(), q),
        "has 3 pieces",
    );
    write_unigram(dir.path(), &["<unk>", "<s>", "</s>", "▁a"], 1);
    let mut c = xlm_roberta_config();
    c["pad_token_id"] = json!(4);
    expect_invalid(
        recognize(dir.path(), &c, &bert_tensors(), q),
        "'pad_token_id' (4) leaves no position below max_position_embeddings (4)",
    );
}

fn modernbert_config() -> Json {
    json!({"architectures": ["ModernBertModel"], "model_type": "modernbert", "hidden_size": 8,
           "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 12,
           "vocab_size": 6, "norm_eps": 1e-5, "local_attention": 4,
           "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0,
           "local_rope_theta": 10000.0, "classifier_pooling": "mean"})
}

fn modernbert_tensors() -> Vec<TensorListing> {
    let (v, e, f) = (6, 8, 12);
    let mut t: Vec<(String, Vec<usize>)> = vec![
        ("model.embeddings.tok_embeddings.weight".into(), vec![v, e]),
        ("model.embeddings.norm.weight".into(), vec![e]),
        ("model.final_norm.weight".into(), vec![e]),
    ];
    for l in 0..2 {
        let p = format!("model.layers.{l}");
        // The first layer has no attention norm.
        if l > 0 {
            t.push((format!("{p}.attn_norm.weight"), vec![e]));
        }
        t.push((format!("{p}.attn.Wqkv.weight"), vec![3 * e, e]));
        t.push((format!("{p}.attn.Wo.weight"), vec![e, e]));
        t.push((format!("{p}.mlp_norm.weight"), vec![e]));
        t.push((format!("{p}.mlp.Wi.weight"), vec![2 * f, e]));
        t.push((format!("{p}.mlp.Wo.weight"), vec![e, f]));
    }
    let t: Vec<(&str, &[usize])> = t.iter().map(|(n, s)| (n.as_str(), s.as_slice())).collect();
    listing(&t)
}

fn write_byte_level_bpe(dir: &Path) {
    fs::write(
        dir.join("tokenizer.json"),
        json!({
            "added_tokens": [{"id": 5, "content": "[CLS]", "special": true}],
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
            "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġa": 4},
                      "merges": ["a b", "Ġ a"]}
        })
        .to_string(),
    )
    .unwrap();
}

#[test]
fn a_modernbert_directory_gets_its_epsilons_windows_and_rope_bases() {
    let dir = tempfile::tempdir().unwrap();
    write_byte_level_bpe(dir.path());
    let q = QuantizationChoice::Preset(Preset::F32);
    let e = known(recognize(dir.path(), &modernbert_config(), &modernbert_tensors(), q).unwrap());
    assert_eq!(e.architecture, "modern-bert");
    let names: Vec<&str> = e.tensors.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"blk.1.attn_norm.weight"));
    assert!(!names.contains(&"blk.0.attn_norm.weight"));
    let f32_of = |key: &str| match kv(&e, key) {
        Some(GgufValue::F32(v)) => *v,
        other => panic!("{key}: {other:?}"),
    };
    // No layer_norm_eps in the config: llama.cpp's required epsilon is norm_eps's.
    assert_eq!(f32_of("modern-bert.attention.layer_norm_epsilon"), 1e-5);
    assert_eq!(f32_of("modern-bert.attention.layer_norm_rms_epsilon"), 1e-5);
    assert_eq!(f32_of("modern-bert.rope.freq_base"), 160000.0);
    assert_eq!(f32_of("modern-bert.rope.freq_base_swa"), 10000.0);
    for (key, n) in [
        ("attention.sliding_window", 4),
        ("attention.sliding_window_pattern", 3),
        ("classifier.pooling_type", 1),
    ] {
        let key = format!("modern-bert.{key}");
        assert_eq!(kv(&e, &key), Some(&GgufValue::U32(n)), "{key}");
    }
    assert_eq!(
        kv(&e, "tokenizer.ggml.pre"),
        Some(&GgufValue::String("modern-bert".into()))
    );
    let mut c = modernbert_config();
    c["layer_norm_eps"] = json!(1e-6);
    let e = known(recognize(dir.path(), &c, &modernbert_tensors(), q).unwrap());
    assert_eq!(
        kv(&e, "modern-bert.attention.layer_norm_epsilon"),
        Some(&GgufValue::F32(1e-6))
    );
}

#[test]
fn bad_modernbert_input_names_the_field_or_tensor() {
    let dir = tempfile::tempdir().unwrap();
    write_byte_level_bpe(dir.path());
    let q = QuantizationChoice::Preset(Preset::F32);
    let mut c = modernbert_config();
    c["classifier_pooling"] = json!("max");
    expect_invalid(
        recognize(dir.path(), &c, &modernbert_tensors(), q),
        "'classifier_pooling' is 'max'",
    );
    // A bias llama.cpp would not load.
    let mut t = modernbert_tensors();
    t.push(TensorListing {
        name: "model.layers.0.attn.Wo.bias".into(),
        dtype: DType::F32,
        shape: vec![8],
    });
    let e = expect_invalid(
        recognize(dir.path(), &modernbert_config(), &t, q),
        "model.layers.0.attn.Wo.bias",
    );
    assert_eq!(e.tensor(), Some("model.layers.0.attn.Wo.bias"));
    // The second layer's attention norm is required.
    let t: Vec<TensorListing> = modernbert_tensors()
        .into_iter()
        .filter(|t| t.name != "model.layers.1.attn_norm.weight")
        .collect();
    expect_invalid(
        recognize(dir.path(), &modernbert_config(), &t, q),
        "attn_norm",
    );
}
