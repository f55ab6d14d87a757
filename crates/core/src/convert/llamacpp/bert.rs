//! `bert` (BertModel, BertForMaskedLM): sentence-embedding encoders such as
//! all-MiniLM-L6-v2. Non-causal attention, learned position and token-type embeddings,
//! LayerNorm with biases, a WordPiece tokenizer, and the pooling of a sentence-transformers
//! directory (`modules.json` → `1_Pooling/config.json`).
//!
//! `xlm-roberta` (XLMRobertaModel: bge-m3, multilingual-e5) is the same network under
//! llama.cpp's `bert` architecture, with position ids starting at `pad_token_id + 1` (the
//! rows below are left out and the context shrinks by as many) and a SentencePiece Unigram
//! tokenizer (llama.cpp's `t5`).

use super::decoder::pooling_type;
use super::hparams::field_error;
use super::names::{self, rule, Dim::*, Dims, NamePolicy, Need::*, TensorRule};
use super::vocab;
use super::{source_tensors, Architecture, Header, LlamaExport, Metadata, ModelInput, Transform};
use crate::error::Result;
use crate::format::gguf::GgufValue;

/// Hugging Face name → llama.cpp name (`tensor_mapping.py`, bert rows).
#[rustfmt::skip]
pub const TENSORS: &[TensorRule] = &[
    //   Hugging Face                                    llama.cpp                    weight    bias      shape (outermost first)
    rule("embeddings.word_embeddings",                     "token_embd",                  Required, Absent,   &[Vocab, Embd]),
    rule("embeddings.position_embeddings",                 "position_embd",               Required, Absent,   &[Ctx, Embd]),
    rule("embeddings.token_type_embeddings",               "token_types",                 Optional, Absent,   &[TokenTypes, Embd]),
    rule("embeddings.LayerNorm",                           "token_embd_norm",             Required, Required, &[Embd]),
    rule("encoder.layer.{bid}.attention.self.query",       "blk.{bid}.attn_q",            Required, Optional, &[Embd, Embd]),
    rule("encoder.layer.{bid}.attention.self.key",         "blk.{bid}.attn_k",            Required, Optional, &[Kv, Embd]),
    rule("encoder.layer.{bid}.attention.self.value",       "blk.{bid}.attn_v",            Required, Optional, &[Kv, Embd]),
    rule("encoder.layer.{bid}.attention.output.dense",     "blk.{bid}.attn_output",       Required, Optional, &[Embd, Embd]),
    rule("encoder.layer.{bid}.attention.output.LayerNorm", "blk.{bid}.attn_output_norm",  Required, Required, &[Embd]),
    rule("encoder.layer.{bid}.intermediate.dense",         "blk.{bid}.ffn_up",            Required, Optional, &[Ff, Embd]),
    rule("encoder.layer.{bid}.output.dense",               "blk.{bid}.ffn_down",          Required, Optional, &[Embd, Ff]),
    rule("encoder.layer.{bid}.output.LayerNorm",           "blk.{bid}.layer_output_norm", Required, Required, &[Embd]),
];

const NAMES: NamePolicy = NamePolicy {
    // `roberta.` of XLMRobertaForMaskedLM-style checkpoints (bge-reranker-v2-m3).
    prefix_renames: &[("bert.", ""), ("roberta.", "")],
    renames: &[(".gamma", ".weight"), (".beta", ".bias")],
    // The pooler and the masked-LM head are not part of the embedding model.
    dropped: &[
        "embeddings.position_ids",
        "pooler.*",
        "cls.predictions*",
        "cls.seq_relationship*",
    ],
};

pub const ARCH: Architecture = Architecture {
    hf_classes: &["BertModel", "BertForMaskedLM"],
    model_type: "bert",
    plan: |input| plan(input, Tokenizer::WordPiece),
};

pub const XLM_ROBERTA: Architecture = Architecture {
    hf_classes: &["XLMRobertaModel"],
    model_type: "xlm-roberta",
    plan: |input| plan(input, Tokenizer::XlmRoberta),
};

/// What tells the two apart: the tokenizer and, with it, RoBERTa's position offset.
#[derive(Clone, Copy, PartialEq)]
enum Tokenizer {
    WordPiece,
    XlmRoberta,
}

fn plan(input: &ModelInput, tokenizer: Tokenizer) -> Result<LlamaExport> {
    let h = &input.hparams;
    let block_count =
        h.required_count(&["num_hidden_layers", "n_layers", "n_layer", "num_layers"])?;
    let embd = h.required_count(&["hidden_size", "n_embd", "dim"])?;
    let ff = h.required_count(&["intermediate_size", "n_inner", "hidden_dim"])?;
    let n_head = h.required_count(&["num_attention_heads", "n_head", "n_heads"])?;
    let vocab_size = h.required_count(&["vocab_size"])?;
    if !embd.is_multiple_of(n_head) {
        return Err(field_error(
            "num_attention_heads",
            &format!("({n_head}) does not divide hidden_size ({embd})"),
        ));
    }
    // transformers' BertConfig defaults.
    let ctx = h
        .count(&[
            "max_position_embeddings",
            "n_ctx",
            "n_positions",
            "max_length",
            "max_sequence_length",
            "model_max_length",
        ])?
        .unwrap_or(512);
    // RoBERTa numbers positions from pad_token_id + 1: the converter leaves the rows below
    // out and writes a context that much shorter.
    let offset = match tokenizer {
        Tokenizer::XlmRoberta => match h.count(&["pad_token_id"])? {
            Some(pad) if pad < ctx => pad + 1,
            Some(pad) => {
                return Err(field_error(
                    "pad_token_id",
                    &format!("({pad}) leaves no position below max_position_embeddings ({ctx})"),
                ))
            }
            None => 0,
        },
        Tokenizer::WordPiece => 0,
    };
    let default_types = if tokenizer == Tokenizer::XlmRoberta {
        1
    } else {
        2
    };
    let token_types = h.count(&["type_vocab_size"])?.unwrap_or(default_types);
    let eps = h
        .number(&["layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"])?
        .unwrap_or(1e-12);
    let dims = Dims {
        token_types,
        ..Dims::dense(vocab_size, embd, ff, n_head, ctx)
    };
    let mut mapped = names::map_tensors(input.tensors, TENSORS, &NAMES, &dims, block_count)?;
    for m in mapped
        .iter_mut()
        .filter(|m| m.gguf == "position_embd.weight")
    {
        m.shape[0] -= offset;
    }
    let tensors = source_tensors(&mapped, input.tensors, |m| {
        if m.gguf == "position_embd.weight" && offset > 0 {
            Transform::SkipRows(offset)
        } else {
            Transform::Identity
        }
    })?;
    let ctx = ctx - offset;
    let (vocab, normalizer) = match tokenizer {
        Tokenizer::WordPiece => (vocab::wordpiece(input.files, h, h.raw())?, None),
        Tokenizer::XlmRoberta => {
            let u = vocab::xlm_roberta(input.files, h, h.raw())?;
            (u.vocab, Some(u.normalizer))
        }
    };
    let pooling = pooling_type(input.files)?;

    let k = |s: &str| format!("bert.{s}");
    let mut md = Metadata::default();
    Header {
        arch: "bert",
        block_count,
        context: ctx,
        embd,
        ff,
        n_head,
    }
    .write(&mut md, input, &tensors);
    md.set(
        k("attention.layer_norm_epsilon"),
        GgufValue::F32(eps as f32),
    );
    encoder_keys(&mut md, "bert", pooling);
    md.set("general.quantization_version", GgufValue::U32(2));
    let mut warnings = vocab.warnings();
    vocab.write(&mut md);
    if let Some(n) = normalizer {
        n.write(&mut md);
    }
    warnings.extend(pooling_warning(pooling));
    Ok(LlamaExport {
        architecture: "bert",
        metadata: md.into_vec(),
        tensors,
        warnings,
    })
}

/// The keys an encoder writes after its epsilon, in the converter's order: the file type (set
/// by `recognize` once the tensors' final types are known), non-causal attention, and the
/// sentence-transformers pooling where the directory has one.
pub(crate) fn encoder_keys(md: &mut Metadata, arch: &str, pooling: Option<u32>) {
    md.set("general.file_type", GgufValue::U32(0));
    md.set(format!("{arch}.attention.causal"), GgufValue::Bool(false));
    if let Some(p) = pooling {
        md.set(format!("{arch}.pooling_type"), GgufValue::U32(p));
    }
}

/// What an encoder without a sentence-transformers pooling tells the user.
pub(crate) fn pooling_warning(pooling: Option<u32>) -> Option<String> {
    pooling.is_none().then(|| {
        "no sentence-transformers pooling (modules.json): llama.cpp will use its default pooling for embeddings".into()
    })
}
