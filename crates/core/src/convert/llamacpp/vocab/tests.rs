//! Special tokens and flags, read as gguf-py's SpecialVocab reads them (the expected values
//! are what gguf-py 0.3.36's SpecialVocab gives for the same files), and the pre-tokenizer
//! table.

use super::special::{ChatTemplate, SpecialVocab};
use super::*;
use serde_json::json;
use std::fs;

fn tok(json: &Json) -> TokenizerJson {
    TokenizerJson::from_value(json).unwrap()
}

fn model_files(dir: &tempfile::TempDir) -> ModelFiles {
    ModelFiles::new(dir.path()).unwrap()
}

fn load(
    files: &[(&str, &str)],
    tokenizer: Option<Json>,
    config: Json,
    merges: bool,
) -> SpecialVocab {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let path = dir.path().join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    SpecialVocab::load(
        &model_files(&dir),
        tokenizer.map(|j| tok(&j)).as_mut(),
        &config,
        merges,
        None,
    )
    .unwrap()
}

fn bert_tokenizer() -> Json {
    json!({
        "added_tokens": [
            {"id": 0, "content": "[PAD]", "special": true}, {"id": 100, "content": "[UNK]", "special": true},
            {"id": 101, "content": "[CLS]", "special": true}, {"id": 102, "content": "[SEP]", "special": true},
            {"id": 103, "content": "[MASK]", "special": true}],
        "normalizer": {"type": "BertNormalizer", "lowercase": true, "strip_accents": null},
        "post_processor": {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]"}}, {"Sequence": {"id": "A"}}, {"SpecialToken": {"id": "[SEP]"}}],
            "pair": [{"SpecialToken": {"id": "[CLS]"}}, {"Sequence": {"id": "A"}}, {"SpecialToken": {"id": "[SEP]"}},
                     {"Sequence": {"id": "B"}}, {"SpecialToken": {"id": "[SEP]"}}]},
        "model": {"type": "WordPiece", "vocab": {}}
    })
}

#[test]
fn bert_template_gives_bos_eos_from_cls_sep() {
    // all-MiniLM-L6-v2's files: gguf-py writes bos 101, eos 102, unk 100, sep 102, pad 0,
    // mask 103, add_bos true, add_eos true, add_sep false, lowercase true.
    let sv = load(
        &[(
            "tokenizer_config.json",
            r#"{"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]"}"#,
        )],
        Some(bert_tokenizer()),
        json!({"pad_token_id": 0}),
        false,
    );
    let ids: Vec<(&str, u32)> = sv.ids.iter().map(|(t, i)| (t.as_str(), *i)).collect();
    assert_eq!(
        ids,
        [
            ("bos", 101),
            ("eos", 102),
            ("unk", 100),
            ("sep", 102),
            ("pad", 0),
            ("cls", 101),
            ("mask", 103)
        ]
    );
    let add: Vec<(&str, bool)> = sv.add.iter().map(|(t, a)| (t.as_str(), *a)).collect();
    assert_eq!(add, [("bos", true), ("eos", true), ("sep", false)]);
    assert_eq!(sv.lowercase, Some(true));
    assert_eq!(sv.strip_accents, None);
    let mut md = Metadata::default();
    sv.write(&mut md);
    let keys: Vec<String> = md.into_vec().into_iter().map(|(k, _)| k).collect();
    // cls has no GGUF key: gguf-py skips it too.
    assert!(!keys.iter().any(|k| k.contains("cls")), "{keys:?}");
    assert_eq!(keys.len(), 6 + 3 + 1);
}

#[test]
fn byte_level_bpe_with_config_ids_and_chat_template_file() {
    // A Qwen-like directory: ByteLevel post-processor (no BOS), eos from tokenizer_config,
    // bos only from config.json, the chat template in chat_template.jinja.
    let tok = json!({
        "added_tokens": [{"id": 5, "content": "<|endoftext|>", "special": true}, {"id": 6, "content": "<|im_end|>", "special": true}],
        "post_processor": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": {}, "merges": [["a", "b"], ["a b", "c"]]}
    });
    let sv = load(
        &[
            (
                "tokenizer_config.json",
                r#"{"eos_token": "<|im_end|>", "pad_token": {"content": "<|endoftext|>"}, "add_bos_token": true}"#,
            ),
            (
                "chat_template.jinja",
                "{% for m in messages %}{{ m.content }}{% endfor %}",
            ),
        ],
        Some(tok),
        json!({"bos_token_id": 5, "eos_token_id": [5, 6]}),
        true,
    );
    let ids: Vec<(&str, u32)> = sv.ids.iter().map(|(t, i)| (t.as_str(), *i)).collect();
    assert_eq!(ids, [("eos", 6), ("pad", 5), ("bos", 5)]);
    // The post-processor's "no BOS" wins over tokenizer_config's add_bos_token.
    let add: Vec<(&str, bool)> = sv.add.iter().map(|(t, a)| (t.as_str(), *a)).collect();
    assert_eq!(add, [("bos", false), ("eos", false)]);
    assert!(sv.warnings.iter().any(|w| w.contains("add_bos_token")));
    assert_eq!(sv.merges, ["a b", "a\u{120}b c"]);
    assert_eq!(
        sv.chat_template,
        Some(ChatTemplate::One(
            "{% for m in messages %}{{ m.content }}{% endfor %}".into()
        ))
    );
}

#[test]
fn roberta_processing_and_named_templates() {
    let tok = json!({
        "added_tokens": [{"id": 0, "content": "<s>"}, {"id": 2, "content": "</s>"}],
        "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0]},
        "model": {"type": "BPE", "vocab": {}}
    });
    let sv = load(
        &[(
            "tokenizer_config.json",
            r#"{"bos_token": "<s>", "eos_token": "</s>", "chat_template": [{"name": "default", "template": "D"}, {"name": "tool use", "template": "T"}]}"#,
        )],
        Some(tok),
        json!({}),
        false,
    );
    let add: Vec<(&str, bool)> = sv.add.iter().map(|(t, a)| (t.as_str(), *a)).collect();
    assert_eq!(add, [("bos", true), ("eos", true), ("sep", true)]);
    let ids: Vec<(&str, u32)> = sv.ids.iter().map(|(t, i)| (t.as_str(), *i)).collect();
    assert_eq!(ids, [("bos", 0), ("eos", 2), ("sep", 2), ("cls", 0)]);
    let mut md = Metadata::default();
    sv.write(&mut md);
    let md = md.into_vec();
    let get = |k: &str| md.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    assert_eq!(get("tokenizer.chat_template"), Some(GgufValue::from("D")));
    assert_eq!(
        get("tokenizer.chat_template.tool_use"),
        Some(GgufValue::from("T"))
    );
    assert_eq!(
        get("tokenizer.chat_templates"),
        Some(GgufValue::Array(GgufArray::String(vec!["tool_use".into()])))
    );
}

#[test]
fn special_token_ids_out_of_range_are_skipped_and_negative_ones_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sv = SpecialVocab::load(
        &model_files(&dir),
        None,
        &json!({"bos_token_id": 9, "eos_token_id": 1}),
        false,
        Some(5),
    )
    .unwrap();
    assert_eq!(sv.ids, [("eos".to_string(), 1)]);
    assert!(sv.warnings.iter().any(|w| w.contains("bos")));
    let e = SpecialVocab::load(
        &model_files(&dir),
        None,
        &json!({"pad_token_id": -1}),
        false,
        None,
    )
    .unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_MODEL");
}

#[test]
fn merges_in_either_format_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let merges = |m: Json| {
        let mut t = tok(&json!({"model": {"type": "BPE", "vocab": {}, "merges": m}}));
        SpecialVocab::load(&model_files(&dir), Some(&mut t), &json!({}), true, None)
            .map(|sv| sv.merges)
    };
    assert_eq!(merges(json!(["a b", "c d"])).unwrap(), ["a b", "c d"]);
    assert_eq!(merges(json!([["a", "b c"]])).unwrap(), ["a b\u{120}c"]);
    for bad in [
        json!("a b"),
        json!([1, 2]),
        json!([["a"]]),
        json!([["a", 1]]),
    ] {
        assert_eq!(
            merges(bad.clone()).unwrap_err().code(),
            "ERR_INVALID_MODEL",
            "{bad}"
        );
    }
}

#[test]
fn pre_tokenizers_by_split_pattern() {
    let split = |r: &str| {
        json!({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}})
    };
    for (pattern, name) in PRE_TOKENIZERS {
        assert_eq!(bpe_pre_tokenizer(&tok(&split(pattern))), Ok(*name));
    }
    assert_eq!(
        bpe_pre_tokenizer(&tok(
            &json!({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}})
        )),
        Ok("gpt-2")
    );
    assert!(bpe_pre_tokenizer(&tok(&split(r"\p{N}+")))
        .unwrap_err()
        .contains("default"));
    assert!(bpe_pre_tokenizer(&tok(&json!({"pre_tokenizer": null}))).is_err());
}

#[test]
fn looks_special_as_gguf_py() {
    for t in [
        "<|im_start|>",
        "<｜end▁of▁sentence｜>",
        "<unused12>",
        "<pad>",
        "<mask>",
    ] {
        assert!(looks_special(t), "{t}");
    }
    for t in ["<s>", "|>", "<|", "hello", "<unused"] {
        assert!(!looks_special(t), "{t}");
    }
}

/// The vocabulary as gguf-py lists it from the JSON object Python reads: a token listed
/// twice keeps its last id, tokens sharing an id leave the last in key order, added tokens
/// take their ids, gaps and the rest up to vocab_size are `[PAD{i}]`.
#[test]
fn vocabulary_entries_as_a_json_object_holds_them() {
    let text = r#"{"model": {"type": "BPE", "vocab": {"a": 9, "b": 1, "y": 3, "x": 3, "a": 0}},
        "added_tokens": [{"id": 1, "content": "<|b|>", "special": true},
                         {"id": 4, "content": "\u2581user", "special": false}]}"#;
    let vocab = |text: &str, size: usize| {
        let mut t = TokenizerJson::parse(text.as_bytes()).unwrap().unwrap();
        let h = Hparams::new(&json!({ "vocab_size": size })).unwrap();
        hf_vocab(&mut t, &h, Path::new("tokenizer.json")).unwrap()
    };
    let (tokens, types) = vocab(text, 6);
    assert_eq!(tokens, ["a", "<|b|>", "[PAD2]", "y", " user", "[PAD5]"]);
    use token_type::*;
    assert_eq!(
        types,
        [NORMAL, CONTROL, UNUSED, NORMAL, USER_DEFINED, UNUSED]
    );
    // Without a gap (the entries' allocation is reused), the same rules.
    let text = r#"{"model": {"vocab": {"c": 2, "a": 0, "b": 1, "<s>": 3}},
        "added_tokens": [{"id": 3, "content": "<s>"}, {"id": 5, "content": "<|end|>"}]}"#;
    let (tokens, types) = vocab(text, 7);
    assert_eq!(
        tokens,
        ["a", "b", "c", "<s>", "[PAD4]", "<|end|>", "[PAD6]"]
    );
    assert_eq!(
        types,
        [
            NORMAL,
            NORMAL,
            NORMAL,
            USER_DEFINED,
            UNUSED,
            CONTROL,
            UNUSED
        ]
    );
}
