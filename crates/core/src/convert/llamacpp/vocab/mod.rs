//! The tokenizer as llama.cpp reads it (`tokenizer.ggml.*`), from the files of a Hugging
//! Face directory:
//!
//! * **WordPiece** (BERT): `tokenizer.json` (or `vocab.txt`), tokens rewritten to llama.cpp's
//!   "phantom space" form (`▁word`, `##piece` → `piece`).
//! * **byte-level BPE** (`gpt2`: Qwen2/3, Llama 3): `tokenizer.json`'s vocabulary, added
//!   tokens and merges, and the pre-tokenizer named from its split pattern ([`PRE_TOKENIZERS`]).
//! * **SentencePiece** (`llama`: Llama 1/2, Mistral): `tokenizer.model`, a protobuf, parsed
//!   here ([`spm`]).
//!
//! plus special token ids, `add_*_token` flags and the chat template ([`special`]).

mod special;
pub(crate) mod spm;

use super::hparams::Hparams;
use super::Metadata;
use crate::error::{CoreError, Result};
use crate::format::gguf::{GgufArray, GgufValue};
use crate::pretrained::companion::ModelFiles;
use serde_json::Value as Json;
use special::SpecialVocab;
use std::collections::HashMap;
use std::path::Path;

/// Tokenizer files larger than this are refused rather than read (the largest real ones,
/// Gemma's `tokenizer.json`, are ~35 MB; `tokenizer.model` files ~5 MB).
const MAX_TOKENIZER_FILE: u64 = 128 * 1024 * 1024;
/// A SentencePiece model decodes to ~60 bytes per piece of 2 bytes or more in the file:
/// this bounds what a hostile one can make us allocate.
pub(crate) const MAX_SENTENCEPIECE_FILE: u64 = 16 * 1024 * 1024;
/// The most tokens a GGUF array can hold (ggml's `GGUF_MAX_ARRAY_ELEMENTS`).
const MAX_TOKENS: usize = 64 * 1024 * 1024;

/// llama.cpp's token types (`llama_token_type`), as gguf-py numbers them.
pub mod token_type {
    pub const NORMAL: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const CONTROL: i32 = 3;
    pub const USER_DEFINED: i32 = 4;
    pub const UNUSED: i32 = 5;
    pub const BYTE: i32 = 6;
}

/// The byte-level BPE pre-tokenizers we recognise: the split pattern of `tokenizer.json`'s
/// pre-tokenizer (as llama.cpp's `llama-vocab.cpp` quotes it for each type) and the name
/// llama.cpp knows it by. llama.cpp's converter names a pre-tokenizer by hashing the
/// tokenization of a test text and looking the hash up; models sharing one of these patterns
/// share llama.cpp's pre-tokenization, so the name below selects the same behaviour.
pub const PRE_TOKENIZERS: &[(&str, &str)] = &[
    (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        "llama-bpe",
    ),
    (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        "qwen2",
    ),
    (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        "qwen35",
    ),
];

/// What the export does with a file of the directory that may not be read (one resolving
/// outside it, a FIFO, a dangling link: see [`ModelFiles`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// A file of the vocabulary (`tokenizer.json`, `tokenizer.model`, `vocab.txt`,
    /// `merges.txt`, `added_tokens.json`): an error, since the tokens would be wrong without it.
    Vocabulary,
    /// A file the export can do without (`tokenizer_config.json`, chat templates, pooling):
    /// skipped, with a warning in the conversion's report.
    Extra,
}

/// The file `name` of the model directory, at most `max` bytes: `None` when absent (or, for
/// an [`Need::Extra`], skipped).
pub(crate) fn read_file(
    files: &ModelFiles,
    name: &str,
    max: u64,
    need: Need,
) -> Result<Option<Vec<u8>>> {
    const WHAT: &str = "a tokenizer or model file";
    let opened = match need {
        Need::Vocabulary => files.open(name, WHAT)?,
        Need::Extra => files.open_optional(name, WHAT)?,
    };
    let Some(opened) = opened else {
        return Ok(None);
    };
    let path = opened.path.clone();
    opened
        .read(max, |n| {
            CoreError::invalid_model(format!(
                "is {n} bytes or more, more than the {max} a tokenizer file may have"
            ))
            .with_path(&path)
        })
        .map(Some)
}

/// [`read_file`] of a tokenizer file of at most [`MAX_TOKENIZER_FILE`] bytes, as UTF-8.
pub(crate) fn read_text(files: &ModelFiles, name: &str, need: Need) -> Result<Option<String>> {
    read_file(files, name, MAX_TOKENIZER_FILE, need)?
        .map(|bytes| {
            String::from_utf8(bytes)
                .map_err(|_| CoreError::invalid_model("is not UTF-8").with_path(files.path(name)))
        })
        .transpose()
}

/// [`read_file`] of a JSON file of at most [`MAX_TOKENIZER_FILE`] bytes, parsed.
pub(crate) fn read_json(files: &ModelFiles, name: &str, need: Need) -> Result<Option<Json>> {
    read_file(files, name, MAX_TOKENIZER_FILE, need)?
        .map(|bytes| {
            serde_json::from_slice(&bytes).map_err(|e| {
                CoreError::invalid_model(format!("is not valid JSON: {e}"))
                    .with_path(files.path(name))
            })
        })
        .transpose()
}

/// `vocab_size`, refused above what a GGUF token list can hold.
fn vocab_size(hparams: &Hparams, fallback: usize) -> Result<usize> {
    let n = hparams.count(&["vocab_size"])?.unwrap_or(fallback);
    if n > MAX_TOKENS {
        return Err(super::hparams::field_error(
            "vocab_size",
            &format!("is {n}, more than the {MAX_TOKENS} tokens a GGUF file can list"),
        ));
    }
    Ok(n)
}

/// The tokenizer of a model, ready to be written.
pub struct Vocab {
    pub model: &'static str,
    pub pre: String,
    pub tokens: Vec<String>,
    pub types: Vec<i32>,
    pub scores: Option<Vec<f32>>,
    pub special: SpecialVocab,
    /// `tokenizer.ggml.add_space_prefix`, where the directory says.
    pub add_space_prefix: Option<bool>,
    /// `tokenizer.ggml.token_type_count` (BERT's segment embeddings).
    pub token_type_count: Option<u32>,
    pub warnings: Vec<String>,
}

impl Vocab {
    /// Write the keys in gguf-py's order.
    pub fn write(&self, md: &mut Metadata) {
        if let Some(n) = self.token_type_count {
            md.set("tokenizer.ggml.token_type_count", GgufValue::U32(n));
        }
        if let Some(v) = self.add_space_prefix {
            md.set("tokenizer.ggml.add_space_prefix", GgufValue::Bool(v));
        }
        md.set("tokenizer.ggml.model", self.model);
        md.set("tokenizer.ggml.pre", self.pre.as_str());
        md.set(
            "tokenizer.ggml.tokens",
            GgufArray::String(self.tokens.clone()),
        );
        if let Some(scores) = &self.scores {
            md.set("tokenizer.ggml.scores", GgufArray::F32(scores.clone()));
        }
        md.set(
            "tokenizer.ggml.token_type",
            GgufArray::I32(self.types.clone()),
        );
        self.special.write(md);
    }

    pub fn warnings(&self) -> Vec<String> {
        let mut w = self.warnings.clone();
        w.extend(self.special.warnings.iter().cloned());
        w
    }
}

/// gguf-py's `does_token_look_special`: added tokens that should be control tokens even
/// where the tokenizer does not mark them special.
fn looks_special(token: &str) -> bool {
    matches!(token, "<pad>" | "<mask>" | "<2mass>" | "[@BOS@]")
        || (token.starts_with("<|") && token.ends_with("|>"))
        || (token.starts_with("<｜") && token.ends_with("｜>"))
        || (token.starts_with("<unused") && token.ends_with('>'))
}

/// The vocabulary of `tokenizer.json` (`tokenizer.vocab` with the added tokens) as gguf-py's
/// `get_vocab_base` lists it: `vocab_size` entries (config.json's, else the token count),
/// gaps filled with `[PAD{i}]` (unused), added tokens control or user-defined.
fn hf_vocab(tokenizer: &Json, hparams: &Hparams, path: &Path) -> Result<(Vec<String>, Vec<i32>)> {
    let bad = |msg: &str| CoreError::invalid_model(msg.to_string()).with_path(path);
    let model = tokenizer
        .get("model")
        .ok_or_else(|| bad("has no 'model'"))?;
    let vocab = model
        .get("vocab")
        .and_then(Json::as_object)
        .ok_or_else(|| bad("'model.vocab' is not a map of tokens to ids"))?;
    let mut by_id: HashMap<u64, String> = HashMap::with_capacity(vocab.len());
    for (token, id) in vocab {
        let id = id
            .as_u64()
            .ok_or_else(|| bad(&format!("token '{token}' has no integer id")))?;
        by_id.insert(id, token.clone());
    }
    // Added tokens: content → (id, special).
    let mut added: HashMap<String, (u64, bool)> = HashMap::new();
    for a in tokenizer
        .get("added_tokens")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        let (Some(content), Some(id)) = (
            a.get("content").and_then(Json::as_str),
            a.get("id").and_then(Json::as_u64),
        ) else {
            return Err(bad("an entry of 'added_tokens' has no content or id"));
        };
        let special = a.get("special").and_then(Json::as_bool).unwrap_or(false);
        added.insert(content.to_string(), (id, special));
        by_id.insert(id, content.to_string());
    }
    let max_id = by_id.keys().copied().max();
    let vocab_size = vocab_size(hparams, by_id.len())?;
    if let Some(m) = max_id {
        if m >= vocab_size as u64 {
            return Err(CoreError::invalid_model(format!(
                "config.json: 'vocab_size' is {vocab_size}, but tokenizer.json has token id {m}"
            ))
            .with_path(path));
        }
    }
    let special_by_id: HashMap<u64, bool> = added.values().map(|(id, s)| (*id, *s)).collect();
    let mut tokens = Vec::with_capacity(vocab_size);
    let mut types = Vec::with_capacity(vocab_size);
    for i in 0..vocab_size as u64 {
        match by_id.get(&i) {
            None => {
                tokens.push(format!("[PAD{i}]"));
                types.push(token_type::UNUSED);
            }
            Some(token) if added.contains_key(token) => {
                let special = special_by_id.get(&i).copied().unwrap_or(false);
                if special || looks_special(token) {
                    tokens.push(token.clone());
                    types.push(token_type::CONTROL);
                } else {
                    tokens.push(token.replace('\u{2581}', " "));
                    types.push(token_type::USER_DEFINED);
                }
            }
            Some(token) => {
                tokens.push(token.clone());
                types.push(token_type::NORMAL);
            }
        }
    }
    Ok((tokens, types))
}

/// The pre-tokenizer name of a byte-level BPE `tokenizer.json` (see [`PRE_TOKENIZERS`]), or
/// a warning when it is none we know.
fn bpe_pre_tokenizer(tokenizer: &Json) -> std::result::Result<&'static str, String> {
    let pre = tokenizer.get("pre_tokenizer");
    let mut patterns = Vec::new();
    let mut byte_level_regex = false;
    let list: Vec<&Json> = match pre
        .and_then(|p| p.get("pretokenizers"))
        .and_then(Json::as_array)
    {
        Some(l) => l.iter().collect(),
        None => pre.into_iter().collect(),
    };
    for p in list {
        match p.get("type").and_then(Json::as_str) {
            Some("Split") => {
                if let Some(r) = p
                    .get("pattern")
                    .and_then(|pat| pat.get("Regex"))
                    .and_then(Json::as_str)
                {
                    patterns.push(r);
                }
            }
            Some("ByteLevel") => {
                byte_level_regex |= p.get("use_regex").and_then(Json::as_bool).unwrap_or(true);
            }
            _ => {}
        }
    }
    match patterns.as_slice() {
        [] if byte_level_regex => Ok("gpt-2"),
        [one] => PRE_TOKENIZERS
            .iter()
            .find(|(pattern, _)| pattern == one)
            .map(|(_, name)| *name)
            .ok_or_else(|| {
                format!("tokenizer.json's pre-tokenizer pattern is not one we know ({one}): wrote tokenizer.ggml.pre = 'default', so llama.cpp may split text differently from Hugging Face")
            }),
        _ => Err("tokenizer.json's pre-tokenizer is not one we know: wrote tokenizer.ggml.pre = 'default', so llama.cpp may split text differently from Hugging Face".to_string()),
    }
}

fn load_tokenizer_json(files: &ModelFiles) -> Result<Option<(Json, std::path::PathBuf)>> {
    let Some(json) = read_json(files, "tokenizer.json", Need::Vocabulary)? else {
        return Ok(None);
    };
    let path = files.path("tokenizer.json");
    if !json.is_object() {
        return Err(CoreError::invalid_model("must hold a JSON object").with_path(&path));
    }
    Ok(Some((json, path)))
}

/// A WordPiece (BERT) vocabulary from `tokenizer.json`, or `vocab.txt` without one.
pub fn wordpiece(files: &ModelFiles, hparams: &Hparams, config: &Json) -> Result<Vocab> {
    let tokenizer = load_tokenizer_json(files)?;
    let (tokens, types) = match &tokenizer {
        Some((json, path)) => {
            let kind = json
                .get("model")
                .and_then(|m| m.get("type"))
                .and_then(Json::as_str);
            if kind != Some("WordPiece") {
                return Err(CoreError::invalid_model(format!(
                    "a BERT model needs a WordPiece tokenizer, this one is {}",
                    kind.unwrap_or("of no type")
                ))
                .with_path(path));
            }
            hf_vocab(json, hparams, path)?
        }
        None => {
            let path = files.path("vocab.txt");
            let Some(text) = read_text(files, "vocab.txt", Need::Vocabulary)? else {
                return Err(CoreError::invalid_model(
                    "has neither tokenizer.json nor vocab.txt: llama.cpp needs the vocabulary",
                )
                .with_path(files.dir()));
            };
            let words: Vec<String> = text.lines().map(str::to_string).collect();
            let vocab: serde_json::Map<String, Json> = words
                .iter()
                .enumerate()
                .map(|(i, w)| (w.clone(), Json::from(i)))
                .collect();
            let added: Vec<Json> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                .iter()
                .filter_map(|s| {
                    vocab
                        .get(*s)
                        .map(|id| serde_json::json!({"content": s, "id": id, "special": true}))
                })
                .collect();
            let json = serde_json::json!({"model": {"type": "WordPiece", "vocab": vocab}, "added_tokens": added});
            hf_vocab(&json, hparams, &path)?
        }
    };
    // llama.cpp's WordPiece tokenizer works on "phantom space" tokens.
    let tokens = tokens
        .into_iter()
        .zip(&types)
        .map(|(t, ty)| {
            if *ty == token_type::CONTROL {
                t
            } else if let Some(piece) = t.strip_prefix("##") {
                piece.to_string()
            } else {
                format!("\u{2581}{t}")
            }
        })
        .collect::<Vec<_>>();
    let special = SpecialVocab::load(
        files,
        tokenizer.as_ref().map(|(j, _)| j),
        config,
        false,
        Some(tokens.len()),
    )?;
    Ok(Vocab {
        model: "bert",
        // llama.cpp's WordPiece tokenizer has no pre-tokenizer variants: it ignores the name.
        pre: "default".into(),
        tokens,
        types,
        scores: None,
        special,
        add_space_prefix: None,
        token_type_count: Some(hparams.count(&["type_vocab_size"])?.unwrap_or(2) as u32),
        warnings: Vec::new(),
    })
}

/// A byte-level BPE vocabulary (`tokenizer.ggml.model = gpt2`) from `tokenizer.json`.
pub fn gpt2(files: &ModelFiles, hparams: &Hparams, config: &Json) -> Result<Vocab> {
    let Some((json, path)) = load_tokenizer_json(files)? else {
        return Err(CoreError::invalid_model(
            "has no tokenizer.json or tokenizer.model: llama.cpp needs the vocabulary",
        )
        .with_path(files.dir()));
    };
    let kind = json
        .get("model")
        .and_then(|m| m.get("type"))
        .and_then(Json::as_str);
    if kind != Some("BPE") {
        return Err(CoreError::invalid_model(format!(
            "expected a byte-level BPE tokenizer, this one is {}",
            kind.unwrap_or("of no type")
        ))
        .with_path(&path));
    }
    if json
        .get("model")
        .and_then(|m| m.get("byte_fallback"))
        .and_then(Json::as_bool)
        == Some(true)
    {
        return Err(CoreError::invalid_model(
            "is a SentencePiece-style BPE tokenizer (byte_fallback), which llama.cpp reads from \
             tokenizer.model: put the model's tokenizer.model beside it",
        )
        .with_path(&path));
    }
    let (tokens, types) = hf_vocab(&json, hparams, &path)?;
    let mut warnings = Vec::new();
    let pre = match bpe_pre_tokenizer(&json) {
        Ok(name) => name.to_string(),
        Err(w) => {
            warnings.push(w);
            "default".to_string()
        }
    };
    let special = SpecialVocab::load(files, Some(&json), config, true, None)?;
    if special.merges.is_empty() {
        return Err(CoreError::invalid_model(
            "has no merges: llama.cpp cannot tokenize with a BPE vocabulary without them",
        )
        .with_path(&path));
    }
    Ok(Vocab {
        model: "gpt2",
        pre,
        tokens,
        types,
        scores: None,
        special,
        add_space_prefix: None,
        token_type_count: None,
        warnings,
    })
}

/// The vocabulary of a llama-family model, tried in the converter's order: SentencePiece
/// (`tokenizer.model`), then byte-level BPE (`tokenizer.json`).
/// A `tokenizer.model` that may not be read is an error naming why, not a reason to fall
/// back to `tokenizer.json`.
pub fn sentencepiece_or_gpt2(
    files: &ModelFiles,
    hparams: &Hparams,
    config: &Json,
) -> Result<Vocab> {
    if files.has("tokenizer.model") {
        spm::vocab(files, hparams, config)
    } else {
        gpt2(files, hparams, config)
    }
}

#[cfg(test)]
mod tests;
