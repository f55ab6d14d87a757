//! SentencePiece vocabularies (`tokenizer.model`, a `sentencepiece_model.proto` message)
//! for llama.cpp's `llama` tokenizer: the pieces with their scores and types, then the
//! added tokens of `added_tokens.json` and `tokenizer_config.json`, as llama.cpp's
//! converter (`_create_vocab_sentencepiece`) lists them.

use super::special::SpecialVocab;
use super::{read_file, read_json, token_type, Need, Vocab, MAX_SENTENCEPIECE_FILE};
use crate::convert::llamacpp::hparams::Hparams;
use crate::error::{CoreError, Result};
use crate::pretrained::companion::ModelFiles;
use prost::Message;
use serde_json::Value as Json;
use std::path::Path;

/// The subset of `ModelProto` the vocabulary needs; other fields are skipped.
#[derive(Clone, PartialEq, Message)]
pub struct ModelProto {
    #[prost(message, repeated, tag = "1")]
    pub pieces: Vec<SentencePiece>,
    #[prost(message, optional, tag = "2")]
    pub trainer_spec: Option<TrainerSpec>,
    #[prost(message, optional, tag = "3")]
    pub normalizer_spec: Option<NormalizerSpec>,
}

#[derive(Clone, PartialEq, Message)]
pub struct SentencePiece {
    #[prost(string, optional, tag = "1")]
    pub piece: Option<String>,
    #[prost(float, optional, tag = "2")]
    pub score: Option<f32>,
    /// `SentencePiece.Type`: NORMAL 1 (the default), UNKNOWN 2, CONTROL 3, USER_DEFINED 4,
    /// BYTE 6, UNUSED 5.
    #[prost(int32, optional, tag = "3")]
    pub r#type: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TrainerSpec {
    /// UNIGRAM 1 (the default), BPE 2, WORD 3, CHAR 4.
    #[prost(int32, optional, tag = "3")]
    pub model_type: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
pub struct NormalizerSpec {
    /// The normalization rules compiled to a double-array trie and a string pool, which
    /// llama.cpp's UGM tokenizer reads as they are.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub precompiled_charsmap: Option<Vec<u8>>,
    /// Defaults true, as in `sentencepiece_model.proto`.
    #[prost(bool, optional, tag = "3")]
    pub add_dummy_prefix: Option<bool>,
    /// Defaults true, as in `sentencepiece_model.proto`.
    #[prost(bool, optional, tag = "5")]
    pub remove_extra_whitespaces: Option<bool>,
}

/// llama.cpp's type of a piece of `SentencePiece.Type` `ty`, as the converter asks
/// IsUnknown / IsControl / IsUnused / IsByte: everything else, user-defined pieces included,
/// is NORMAL.
pub(crate) fn piece_type(ty: Option<i32>) -> i32 {
    match ty.unwrap_or(1) {
        2 => token_type::UNKNOWN,
        3 => token_type::CONTROL,
        5 => token_type::UNUSED,
        6 => token_type::BYTE,
        _ => token_type::NORMAL,
    }
}

/// Parse `tokenizer.model`.
pub fn parse(bytes: &[u8], path: &Path) -> Result<ModelProto> {
    let model = ModelProto::decode(bytes).map_err(|e| {
        CoreError::invalid_model(format!("is not a SentencePiece model: {e}")).with_path(path)
    })?;
    if model.pieces.is_empty() {
        return Err(
            CoreError::invalid_model("is a SentencePiece model without pieces").with_path(path),
        );
    }
    Ok(model)
}

/// The `llama` vocabulary of the directory (which has `tokenizer.model`).
pub fn vocab(files: &ModelFiles, hparams: &Hparams, config: &Json) -> Result<Vocab> {
    let path = files.path("tokenizer.model");
    let bytes = read_file(
        files,
        "tokenizer.model",
        MAX_SENTENCEPIECE_FILE,
        Need::Vocabulary,
    )?
    .ok_or_else(|| CoreError::not_found("no such file").with_path(&path))?;
    let model = parse(&bytes, &path)?;
    let vocab_size = super::vocab_size(hparams, model.pieces.len())?;
    let mut tokens: Vec<String> = (0..vocab_size).map(|i| format!("[PAD{i}]")).collect();
    let mut scores = vec![-10000.0f32; vocab_size];
    let mut types = vec![token_type::UNUSED; vocab_size];
    let mut warnings = Vec::new();
    for (id, piece) in model.pieces.iter().enumerate() {
        if id >= vocab_size {
            warnings.push(format!(
                "tokenizer.model has {} pieces, config.json's vocab_size is {vocab_size}: pieces from {id} on are left out",
                model.pieces.len()
            ));
            break;
        }
        tokens[id] = piece.piece.clone().unwrap_or_default();
        scores[id] = piece.score.unwrap_or(0.0);
        types[id] = piece_type(piece.r#type);
    }
    let added_path = files.path("added_tokens.json");
    if let Some(added) = read_json(files, "added_tokens.json", Need::Vocabulary)? {
        let map = added.as_object().ok_or_else(|| {
            CoreError::invalid_model("must map tokens to ids").with_path(&added_path)
        })?;
        for (token, id) in map {
            let id = id.as_u64().ok_or_else(|| {
                CoreError::invalid_model(format!("token '{token}' has no integer id"))
                    .with_path(&added_path)
            })? as usize;
            if id >= vocab_size {
                warnings.push(format!(
                    "added token '{token}' id {id} is not below vocab_size {vocab_size}: left out"
                ));
                continue;
            }
            tokens[id] = token.clone();
            scores[id] = -1000.0;
            types[id] = token_type::USER_DEFINED;
        }
    }
    let config_path = files.path("tokenizer_config.json");
    if let Some(tc) = read_json(files, "tokenizer_config.json", Need::Extra)? {
        if let Some(decoder) = tc.get("added_tokens_decoder").and_then(Json::as_object) {
            for (id, data) in decoder {
                let Ok(id) = id.parse::<usize>() else {
                    return Err(CoreError::invalid_model(format!(
                        "'added_tokens_decoder' has the non-numeric id '{id}'"
                    ))
                    .with_path(&config_path));
                };
                let Some(content) = data.get("content").and_then(Json::as_str) else {
                    return Err(CoreError::invalid_model(format!(
                        "'added_tokens_decoder' entry {id} has no content"
                    ))
                    .with_path(&config_path));
                };
                if id >= vocab_size {
                    warnings.push(format!("added token '{content}' id {id} is not below vocab_size {vocab_size}: left out"));
                    continue;
                }
                let special = data.get("special").and_then(Json::as_bool).unwrap_or(false);
                if special || super::looks_special(content) {
                    types[id] = token_type::CONTROL;
                    tokens[id] = content.to_string();
                } else {
                    types[id] = token_type::USER_DEFINED;
                    tokens[id] = content.replace('\u{2581}', " ");
                }
                scores[id] = -1000.0;
            }
        }
    }
    let special = specials(files, config, tokens.len())?;
    Ok(Vocab {
        model: "llama",
        pre: "default".into(),
        tokens,
        types,
        scores: Some(scores),
        special,
        add_space_prefix: None,
        token_type_count: None,
        warnings,
    })
}

/// The special tokens of a SentencePiece vocabulary of `n` tokens. A tokenizer.json beside
/// the model still supplies the added tokens' ids and the post-processor (as it does for the
/// converter).
pub(super) fn specials(files: &ModelFiles, config: &Json, n: usize) -> Result<SpecialVocab> {
    let mut tokenizer_json = super::load_tokenizer_json(files)?.map(|(json, _)| json);
    SpecialVocab::load(files, tokenizer_json.as_mut(), config, false, Some(n))
}
