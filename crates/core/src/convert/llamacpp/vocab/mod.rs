//! The tokenizer as llama.cpp reads it (`tokenizer.ggml.*`), from the files of a Hugging
//! Face directory:
//!
//! * **WordPiece** (BERT): `tokenizer.json` (or `vocab.txt`), tokens rewritten to llama.cpp's
//!   "phantom space" form (`▁word`, `##piece` → `piece`).
//! * **byte-level BPE** (`gpt2`: Qwen2/3, Llama 3): `tokenizer.json`'s vocabulary, added
//!   tokens and merges, and the pre-tokenizer named from its split pattern ([`PRE_TOKENIZERS`]).
//! * **SentencePiece** (`llama`: Llama 1/2, Mistral): `tokenizer.model`, a protobuf, parsed
//!   here ([`spm`]).
//! * **SentencePiece Unigram** (`t5`: XLM-RoBERTa): `sentencepiece.bpe.model` ([`unigram`]).
//!
//! plus special token ids, `add_*_token` flags and the chat template ([`special`]).

mod special;
pub(crate) mod spm;
pub(crate) mod tokenizer_json;
mod unigram;

use super::hparams::Hparams;
use super::Metadata;
use crate::error::{CoreError, Result};
use crate::format::gguf::{GgufArray, GgufValue};
use crate::pretrained::companion::{ModelFiles, Opened};
use serde_json::Value as Json;
use special::SpecialVocab;
use std::collections::HashMap;
use std::path::Path;
use tokenizer_json::{AddedToken, TokenizerJson, TokenizerModel, Vocabulary};
pub use unigram::xlm_roberta;

/// Tokenizer files larger than this are refused rather than read (the largest real ones,
/// Gemma's `tokenizer.json`, are ~35 MB; `tokenizer.model` files ~5 MB).
const MAX_TOKENIZER_FILE: u64 = 128 * 1024 * 1024;
/// The other JSON files (`tokenizer_config.json`, `added_tokens.json`, `chat_template.json`,
/// `modules.json`, a pooling config) are parsed as JSON trees, which cost up to ~16 times
/// their text: they are refused past this (the largest real ones, ~1 MB), as config.json is.
const MAX_JSON_FILE: u64 = 16 * 1024 * 1024;
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
    let Some(opened) = open_file(files, name, need)? else {
        return Ok(None);
    };
    let path = opened.path.clone();
    opened.read(max, |n| too_large(&path, n, max)).map(Some)
}

fn open_file(files: &ModelFiles, name: &str, need: Need) -> Result<Option<Opened>> {
    const WHAT: &str = "a tokenizer or model file";
    match need {
        Need::Vocabulary => files.open(name, WHAT),
        Need::Extra => files.open_optional(name, WHAT),
    }
}

fn too_large(path: &Path, n: u64, max: u64) -> CoreError {
    CoreError::invalid_model(format!(
        "is {n} bytes or more, more than the {max} a tokenizer file may have"
    ))
    .with_path(path)
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

/// [`read_file`] of a JSON file of at most [`MAX_JSON_FILE`] bytes, parsed.
pub(crate) fn read_json(files: &ModelFiles, name: &str, need: Need) -> Result<Option<Json>> {
    read_file(files, name, MAX_JSON_FILE, need)?
        .map(|bytes| {
            serde_json::from_slice(&bytes).map_err(|e| {
                CoreError::invalid_model(format!("is not valid JSON: {e}"))
                    .with_path(files.path(name))
            })
        })
        .transpose()
}

/// `vocab_size`, refused above what a GGUF token list can hold. The token lists are sized by
/// it: every architecture calls the vocabulary functions after `names::map_tensors` has
/// checked it against the embedding's rows, which the weight files hold.
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
    /// Write the keys in gguf-py's order (the lists are moved, not copied: a vocabulary's
    /// tokens and merges are the largest values of the file).
    pub fn write(self, md: &mut Metadata) {
        if let Some(n) = self.token_type_count {
            md.set("tokenizer.ggml.token_type_count", GgufValue::U32(n));
        }
        if let Some(v) = self.add_space_prefix {
            md.set("tokenizer.ggml.add_space_prefix", GgufValue::Bool(v));
        }
        md.set("tokenizer.ggml.model", self.model);
        md.set("tokenizer.ggml.pre", self.pre);
        md.set("tokenizer.ggml.tokens", GgufArray::String(self.tokens));
        if let Some(scores) = self.scores {
            md.set("tokenizer.ggml.scores", GgufArray::F32(scores));
        }
        md.set("tokenizer.ggml.token_type", GgufArray::I32(self.types));
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

/// The vocabulary of `tokenizer.json` (`model.vocab` with the added tokens) as gguf-py's
/// `get_vocab_base` lists it: `vocab_size` entries (config.json's, else the token count),
/// gaps filled with `[PAD{i}]` (unused), added tokens control or user-defined. The tokens are
/// taken out of `tokenizer` (moved, not copied).
fn hf_vocab(
    tokenizer: &mut TokenizerJson,
    hparams: &Hparams,
    path: &Path,
) -> Result<(Vec<String>, Vec<i32>)> {
    let bad = |msg: &str| CoreError::invalid_model(msg.to_string()).with_path(path);
    let model = tokenizer
        .model
        .as_mut()
        .ok_or_else(|| bad("has no 'model'"))?;
    let vocab = model
        .vocab
        .take()
        .ok_or_else(|| bad("'model.vocab' is not a map of tokens to ids"))?;
    if let Some(token) = &vocab.without_id {
        return Err(bad(&format!("token '{token}' has no integer id")));
    }
    let entries = by_id(vocab.entries);
    // Added tokens: content → (id, special), and the token each id ends up with (an added
    // token takes its id from the vocabulary's; the last one listed wins).
    let mut added: HashMap<&str, (u64, bool)> = HashMap::new();
    let mut added_at: HashMap<u64, &str> = HashMap::new();
    for a in tokenizer.added() {
        let (Some(content), Some(id)) = (
            a.content.as_deref(),
            a.id.and_then(|id| u64::try_from(id).ok()),
        ) else {
            return Err(bad("an entry of 'added_tokens' has no content or id"));
        };
        added.insert(content, (id, a.special));
        added_at.insert(id, content);
    }
    let in_vocab = |id: &u64| entries.binary_search_by_key(id, |e| e.1).is_ok();
    let ids = entries.len() + added_at.keys().filter(|id| !in_vocab(id)).count();
    let max_id = entries
        .last()
        .map(|e| e.1)
        .into_iter()
        .chain(added_at.keys().copied())
        .max();
    let vocab_size = vocab_size(hparams, ids)?;
    if let Some(m) = max_id {
        if m >= vocab_size as u64 {
            return Err(CoreError::invalid_model(format!(
                "config.json: 'vocab_size' is {vocab_size}, but tokenizer.json has token id {m}"
            ))
            .with_path(path));
        }
    }
    let special_by_id: HashMap<u64, bool> = added.values().map(|(id, s)| (*id, *s)).collect();
    // Every id's token, or an unused slot. Ids 0..n without a gap (the usual vocabulary)
    // keep the entries' allocation: the tokens are never in memory twice.
    let mut types = vec![token_type::UNUSED; vocab_size];
    let contiguous = entries.iter().enumerate().all(|(i, e)| e.1 == i as u64);
    let mut tokens: Vec<String> = if contiguous {
        types[..entries.len()].fill(token_type::NORMAL);
        entries.into_iter().map(|e| e.0).collect()
    } else {
        let mut listed = entries.into_iter().peekable();
        (0..vocab_size)
            .map(|i| match listed.next_if(|e| e.1 == i as u64) {
                Some((token, _)) => {
                    types[i] = token_type::NORMAL;
                    token
                }
                None => String::new(),
            })
            .collect()
    };
    tokens.resize(vocab_size, String::new());
    for (&id, content) in &added_at {
        tokens[id as usize] = content.to_string();
        types[id as usize] = token_type::NORMAL;
    }
    for (i, (token, ty)) in tokens.iter_mut().zip(types.iter_mut()).enumerate() {
        if *ty == token_type::UNUSED {
            *token = format!("[PAD{i}]");
        } else if added.contains_key(token.as_str()) {
            let special = special_by_id.get(&(i as u64)).copied().unwrap_or(false);
            if special || looks_special(token) {
                *ty = token_type::CONTROL;
            } else {
                *token = token.replace('\u{2581}', " ");
                *ty = token_type::USER_DEFINED;
            }
        }
    }
    Ok((tokens, types))
}

/// The entries of a vocabulary as a JSON object holds them, sorted by id: a token listed
/// twice keeps its last id, and of tokens sharing an id the last in key order is kept (what
/// a map keyed by id, filled in key order, ends with).
fn by_id(mut entries: Vec<(String, u64)>) -> Vec<(String, u64)> {
    // Tokens listed twice, found by hash (an index and a hash per entry, not a copy of the
    // strings): every listing but the last is dropped.
    let hash = |s: &str| {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        BuildHasherDefault::<DefaultHasher>::default().hash_one(s)
    };
    let mut order: Vec<(u64, usize)> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| (hash(&e.0), i))
        .collect();
    order.sort_unstable();
    let mut shadowed = vec![false; entries.len()];
    for pair in order.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if a.0 == b.0 && entries[a.1].0 == entries[b.1].0 {
            shadowed[a.1] = true;
        }
    }
    drop(order);
    if shadowed.iter().any(|&s| s) {
        let mut keep = shadowed.iter().map(|s| !s);
        entries.retain(|_| keep.next().unwrap_or(true));
    }
    entries.sort_unstable_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    entries.dedup_by(|later, earlier| {
        let same = later.1 == earlier.1;
        if same {
            std::mem::swap(later, earlier);
        }
        same
    });
    entries
}

/// The pre-tokenizer name of a byte-level BPE `tokenizer.json` (see [`PRE_TOKENIZERS`]), or
/// a warning when it is none we know.
fn bpe_pre_tokenizer(tokenizer: &TokenizerJson) -> std::result::Result<&'static str, String> {
    let pre = tokenizer.pre_tokenizer.as_ref();
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

/// `tokenizer.json`, when the directory has one: streamed from the file ([`TokenizerJson`]).
fn load_tokenizer_json(files: &ModelFiles) -> Result<Option<(TokenizerJson, std::path::PathBuf)>> {
    use std::io::Read;
    let Some(opened) = open_file(files, "tokenizer.json", Need::Vocabulary)? else {
        return Ok(None);
    };
    let path = opened.path;
    if opened.len > MAX_TOKENIZER_FILE {
        return Err(too_large(&path, opened.len, MAX_TOKENIZER_FILE));
    }
    // No more than its size when opened, and through a buffer: never whole in memory.
    let text = std::io::BufReader::with_capacity(1 << 20, opened.file.take(opened.len));
    let json = TokenizerJson::parse(text).map_err(|e| {
        let problem = match e.classify() {
            serde_json::error::Category::Data => e.to_string(),
            _ => format!("is not valid JSON: {e}"),
        };
        CoreError::invalid_model(problem).with_path(&path)
    })?;
    let json =
        json.ok_or_else(|| CoreError::invalid_model("must hold a JSON object").with_path(&path))?;
    Ok(Some((json, path)))
}

/// A WordPiece (BERT) vocabulary from `tokenizer.json`, or `vocab.txt` without one.
pub fn wordpiece(files: &ModelFiles, hparams: &Hparams, config: &Json) -> Result<Vocab> {
    let mut tokenizer = load_tokenizer_json(files)?;
    let (tokens, types) = match &mut tokenizer {
        Some((json, path)) => {
            if json.kind() != Some("WordPiece") {
                return Err(CoreError::invalid_model(format!(
                    "a BERT model needs a WordPiece tokenizer, this one is {}",
                    json.kind().unwrap_or("of no type")
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
            // One token per line, its id the line's number; BERT's special tokens are added
            // tokens (at their last line, as a map of tokens to ids keeps them).
            let special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
            let mut last_line = [None; 5];
            let entries: Vec<(String, u64)> = text
                .lines()
                .enumerate()
                .map(|(i, w)| {
                    if let Some(k) = special.iter().position(|s| *s == w) {
                        last_line[k] = Some(i as i64);
                    }
                    (w.to_string(), i as u64)
                })
                .collect();
            drop(text);
            let added_tokens = special
                .iter()
                .zip(last_line)
                .filter_map(|(s, id)| {
                    Some(AddedToken {
                        content: Some(s.to_string()),
                        id: Some(id?),
                        special: true,
                    })
                })
                .collect();
            let mut json = TokenizerJson {
                model: Some(TokenizerModel {
                    kind: Some("WordPiece".into()),
                    vocab: Some(Vocabulary {
                        entries,
                        without_id: None,
                    }),
                    ..TokenizerModel::default()
                }),
                added_tokens: Some(added_tokens),
                ..TokenizerJson::default()
            };
            hf_vocab(&mut json, hparams, &path)?
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
        tokenizer.as_mut().map(|(j, _)| j),
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
    let Some((mut json, path)) = load_tokenizer_json(files)? else {
        return Err(CoreError::invalid_model(
            "has no tokenizer.json or tokenizer.model: llama.cpp needs the vocabulary",
        )
        .with_path(files.dir()));
    };
    if json.kind() != Some("BPE") {
        return Err(CoreError::invalid_model(format!(
            "expected a byte-level BPE tokenizer, this one is {}",
            json.kind().unwrap_or("of no type")
        ))
        .with_path(&path));
    }
    if json.model.as_ref().and_then(|m| m.byte_fallback) == Some(true) {
        return Err(CoreError::invalid_model(
            "is a SentencePiece-style BPE tokenizer (byte_fallback), which llama.cpp reads from \
             tokenizer.model: put the model's tokenizer.model beside it",
        )
        .with_path(&path));
    }
    let (tokens, types) = hf_vocab(&mut json, hparams, &path)?;
    let mut warnings = Vec::new();
    let pre = match bpe_pre_tokenizer(&json) {
        Ok(name) => name.to_string(),
        Err(w) => {
            warnings.push(w);
            "default".to_string()
        }
    };
    let special = SpecialVocab::load(files, Some(&mut json), config, true, None)?;
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
