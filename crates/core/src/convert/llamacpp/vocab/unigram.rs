//! XLM-RoBERTa's SentencePiece Unigram vocabulary (`sentencepiece.bpe.model`) for llama.cpp's
//! `t5` (UGM) tokenizer, as the converter's `_xlmroberta_set_vocab` lists it: the pieces with
//! their scores and types, realigned to fairseq's ids (`<s> <pad> </s> <unk>` first, the
//! pieces after SentencePiece's own three special ones shifted by one), with the normalizer's
//! flags and precompiled character map.

use super::spm::{self, piece_type};
use super::{read_file, token_type, Need, Vocab, MAX_SENTENCEPIECE_FILE};
use crate::convert::llamacpp::hparams::Hparams;
use crate::convert::llamacpp::Metadata;
use crate::error::{CoreError, Result};
use crate::format::gguf::{GgufArray, GgufValue};
use crate::pretrained::companion::ModelFiles;
use serde_json::Value as Json;

const FILE: &str = "sentencepiece.bpe.model";

/// The vocabulary, and the normalizer keys only a Unigram tokenizer has.
pub struct Unigram {
    pub vocab: Vocab,
    pub normalizer: Normalizer,
}

pub struct Normalizer {
    pub remove_extra_whitespaces: bool,
    /// Empty when the model has none (the key is then left out, as the converter does).
    pub precompiled_charsmap: Vec<u8>,
}

impl Normalizer {
    /// Write the keys, after [`Vocab::write`]'s.
    pub fn write(self, md: &mut Metadata) {
        md.set(
            "tokenizer.ggml.remove_extra_whitespaces",
            GgufValue::Bool(self.remove_extra_whitespaces),
        );
        if !self.precompiled_charsmap.is_empty() {
            md.set(
                "tokenizer.ggml.precompiled_charsmap",
                GgufArray::U8(self.precompiled_charsmap),
            );
        }
    }
}

/// The `t5` vocabulary of an XLM-RoBERTa directory (which must have `sentencepiece.bpe.model`).
pub fn xlm_roberta(files: &ModelFiles, hparams: &Hparams, config: &Json) -> Result<Unigram> {
    let path = files.path(FILE);
    let Some(bytes) = read_file(files, FILE, MAX_SENTENCEPIECE_FILE, Need::Vocabulary)? else {
        return Err(CoreError::invalid_model(format!(
            "has no {FILE}: the llama.cpp export reads an XLM-RoBERTa vocabulary from it"
        ))
        .with_path(files.dir()));
    };
    let model = spm::parse(&bytes, &path)?;
    drop(bytes);
    let kind = model.trainer_spec.as_ref().and_then(|t| t.model_type);
    if kind.unwrap_or(1) != 1 {
        return Err(CoreError::invalid_model(format!(
            "is a SentencePiece model of type {}, not Unigram (1), which XLM-RoBERTa's vocabulary is",
            kind.unwrap_or(1)
        ))
        .with_path(&path));
    }
    let n = model.pieces.len();
    // Fairseq's four special tokens take the place of SentencePiece's three.
    if n < 4 {
        return Err(CoreError::invalid_model(format!(
            "has {n} pieces: XLM-RoBERTa's vocabulary needs its three special pieces and at least one more"
        ))
        .with_path(&path));
    }
    let vocab_size = super::vocab_size(hparams, n)?.max(n);
    let mut tokens: Vec<String> = (0..vocab_size).map(|i| format!("[PAD{i}]")).collect();
    let mut scores = vec![-10000.0f32; vocab_size];
    let mut types = vec![token_type::UNUSED; vocab_size];
    for (id, piece) in model.pieces.iter().enumerate() {
        tokens[id] = piece.piece.clone().unwrap_or_default();
        scores[id] = piece.score.unwrap_or(0.0);
        types[id] = piece_type(piece.r#type);
    }
    // SentencePiece's <unk> <s> </s> (ids 0-2) become <s> <pad> </s> <unk>, every later piece
    // moves up one, and the last slot (XLM-R's <mask>, named by tokenizer_config.json) drops.
    fn realign<T>(head: [T; 4], mut all: Vec<T>) -> Vec<T> {
        all.truncate(all.len() - 1);
        head.into_iter().chain(all.drain(3..)).collect()
    }
    let tokens = realign(["<s>", "<pad>", "</s>", "<unk>"].map(String::from), tokens);
    let scores = realign([0.0; 4], scores);
    let types = realign(
        [
            token_type::CONTROL,
            token_type::CONTROL,
            token_type::CONTROL,
            token_type::UNKNOWN,
        ],
        types,
    );
    let normalizer = model.normalizer_spec.unwrap_or_default();
    let special = spm::specials(files, config, tokens.len())?;
    Ok(Unigram {
        vocab: Vocab {
            model: "t5",
            pre: "default".into(),
            tokens,
            types,
            scores: Some(scores),
            special,
            add_space_prefix: Some(normalizer.add_dummy_prefix.unwrap_or(true)),
            token_type_count: Some(hparams.count(&["type_vocab_size"])?.unwrap_or(1) as u32),
            warnings: Vec::new(),
        },
        normalizer: Normalizer {
            remove_extra_whitespaces: normalizer.remove_extra_whitespaces.unwrap_or(true),
            precompiled_charsmap: normalizer.precompiled_charsmap.unwrap_or_default(),
        },
    })
}
