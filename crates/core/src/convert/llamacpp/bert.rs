//! `bert` (BertModel, BertForMaskedLM): sentence-embedding encoders such as
//! all-MiniLM-L6-v2. Non-causal attention, learned position and token-type embeddings,
//! LayerNorm with biases, a WordPiece tokenizer, and the pooling of a sentence-transformers
//! directory (`modules.json` → `1_Pooling/config.json`).

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
    strip_prefixes: &["bert."],
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
    plan,
};

fn plan(input: &ModelInput) -> Result<LlamaExport> {
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
    let token_types = h.count(&["type_vocab_size"])?.unwrap_or(2);
    let eps = h
        .number(&["layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"])?
        .unwrap_or(1e-12);
    let dims = Dims {
        vocab: vocab_size,
        embd,
        ff,
        n_head,
        n_head_kv: n_head,
        head_dim: embd / n_head,
        ctx,
        token_types,
        ..Dims::default()
    };
    let mapped = names::map_tensors(input.tensors, TENSORS, &NAMES, &dims, block_count)?;
    let tensors = source_tensors(&mapped, input.tensors, |_| Transform::Identity)?;
    let vocab = vocab::wordpiece(input.files, h, h.raw())?;
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
    md.set(
        "general.file_type",
        // Set by `recognize` once the tensors' final types are known.
        GgufValue::U32(0),
    );
    md.set(k("attention.causal"), GgufValue::Bool(false));
    if let Some(p) = pooling {
        md.set(k("pooling_type"), GgufValue::U32(p));
    }
    md.set("general.quantization_version", GgufValue::U32(2));
    let mut warnings = vocab.warnings();
    vocab.write(&mut md);
    if pooling.is_none() {
        warnings.push(
            "no sentence-transformers pooling (modules.json): llama.cpp will use its default pooling for embeddings".into(),
        );
    }
    Ok(LlamaExport {
        architecture: "bert",
        metadata: md.into_vec(),
        tensors,
        warnings,
    })
}
