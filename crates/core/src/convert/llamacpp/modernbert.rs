//! `modernbert` (ModernBertModel): an encoder with a fused Q/K/V projection, a gated
//! feed-forward whose up projection holds both halves (`Wi`), LayerNorms without biases (none
//! before the first layer's attention), rope with one base for the global-attention layers
//! (every `global_attn_every_n_layers`-th) and another for the local ones between, which see
//! a symmetric window of `local_attention` tokens; GPT-NeoX's byte-level BPE tokenizer with
//! `[CLS] … [SEP]`, and the pooling of a sentence-transformers directory.

use super::bert::{encoder_keys, pooling_warning};
use super::decoder::pooling_type;
use super::hparams::field_error;
use super::names::{self, rule, Dim::*, Dims, NamePolicy, Need::*, TensorRule};
use super::vocab;
use super::{source_tensors, Architecture, Header, LlamaExport, Metadata, ModelInput, Transform};
use crate::error::{CoreError, Result};
use crate::format::gguf::GgufValue;

/// Hugging Face name → llama.cpp name (`tensor_mapping.py`, modern-bert rows). llama.cpp
/// loads no biases for this architecture.
#[rustfmt::skip]
pub const TENSORS: &[TensorRule] = &[
    //   Hugging Face                  llama.cpp                 weight    bias    shape (outermost first)
    rule("embeddings.tok_embeddings",  "token_embd",             Required, Absent, &[Vocab, Embd]),
    rule("embeddings.norm",            "token_embd_norm",        Required, Absent, &[Embd]),
    // The first layer has none (its attention reads the embeddings' norm).
    rule("layers.{bid}.attn_norm",     "blk.{bid}.attn_norm",    Optional, Absent, &[Embd]),
    rule("layers.{bid}.attn.Wqkv",     "blk.{bid}.attn_qkv",     Required, Absent, &[Qkv, Embd]),
    rule("layers.{bid}.attn.Wo",       "blk.{bid}.attn_output",  Required, Absent, &[Embd, Embd]),
    rule("layers.{bid}.mlp_norm",      "blk.{bid}.ffn_norm",     Required, Absent, &[Embd]),
    rule("layers.{bid}.mlp.Wi",        "blk.{bid}.ffn_up",       Required, Absent, &[Ff2, Embd]),
    rule("layers.{bid}.mlp.Wo",        "blk.{bid}.ffn_down",     Required, Absent, &[Embd, Ff]),
    rule("final_norm",                 "output_norm",            Required, Absent, &[Embd]),
];

const NAMES: NamePolicy = NamePolicy {
    // ModernBertForMaskedLM's body is `model.`.
    prefix_renames: &[("model.", "")],
    renames: &[],
    dropped: &[],
};

pub const ARCH: Architecture = Architecture {
    hf_classes: &["ModernBertModel"],
    model_type: "modernbert",
    plan,
};

fn plan(input: &ModelInput) -> Result<LlamaExport> {
    let h = &input.hparams;
    let block_count = h.required_count(&["num_hidden_layers"])?;
    let embd = h.required_count(&["hidden_size"])?;
    let ff = h.required_count(&["intermediate_size"])?;
    let n_head = h.required_count(&["num_attention_heads"])?;
    let vocab_size = h.required_count(&["vocab_size"])?;
    if !embd.is_multiple_of(n_head) {
        return Err(field_error(
            "num_attention_heads",
            &format!("({n_head}) does not divide hidden_size ({embd})"),
        ));
    }
    // transformers' ModernBertConfig defaults.
    let ctx = h.count(&["max_position_embeddings"])?.unwrap_or(8192);
    let window = h.count(&["local_attention"])?.unwrap_or(128);
    let pattern = h.count(&["global_attn_every_n_layers"])?.unwrap_or(3);
    let rope_global = h.number(&["global_rope_theta"])?.unwrap_or(160000.0);
    let rope_local = h.number(&["local_rope_theta"])?.unwrap_or(10000.0);
    let eps = h.number(&["norm_eps"])?.unwrap_or(1e-5);
    // llama.cpp requires `layer_norm_epsilon`; the converter writes it only from a
    // `layer_norm_eps` (which ModernBERT-base's config.json has beside `norm_eps`), so a config
    // without one gets norm_eps's value rather than a file llama.cpp refuses.
    let layer_norm_eps = h.number(&["layer_norm_eps"])?.unwrap_or(eps);
    // Pooling before a classification head: llama.cpp knows CLS and mean.
    let classifier_pooling = match h.string("classifier_pooling") {
        None => None,
        Some("cls") => Some(2),
        Some("mean") => Some(1),
        Some(other) => {
            return Err(field_error(
                "classifier_pooling",
                &format!("is '{other}'; llama.cpp pools a classifier's input by 'cls' or 'mean'"),
            ))
        }
    };
    let dims = Dims::dense(vocab_size, embd, ff, n_head, ctx);
    let mapped = names::map_tensors(input.tensors, TENSORS, &NAMES, &dims, block_count)?;
    // Optional in the table for the first layer only: llama.cpp requires it in the others.
    let present: std::collections::HashSet<&str> = mapped.iter().map(|m| m.gguf.as_str()).collect();
    if let Some(l) =
        (1..block_count).find(|l| !present.contains(format!("blk.{l}.attn_norm.weight").as_str()))
    {
        let hf = format!("layers.{l}.attn_norm.weight");
        return Err(CoreError::invalid_model(format!(
            "tensor '{hf}' is missing (llama.cpp needs blk.{l}.attn_norm.weight in every layer but the first)"
        ))
        .with_tensor(hf));
    }
    let tensors = source_tensors(&mapped, input.tensors, |_| Transform::Identity)?;
    let mut vocab = vocab::gpt2(input.files, h, h.raw())?;
    // The converter names a pre-tokenizer by hashing its tokenization of a test text:
    // ModernBERT's (GPT-NeoX's vocabulary, GPT-2's split pattern) is `modern-bert`, which
    // llama.cpp pre-tokenizes as `gpt-2`.
    if vocab.pre == "gpt-2" {
        vocab.pre = "modern-bert".into();
    }
    let pooling = pooling_type(input.files)?;

    let k = |s: &str| format!("modern-bert.{s}");
    let mut md = Metadata::default();
    Header {
        arch: "modern-bert",
        block_count,
        context: ctx,
        embd,
        ff,
        n_head,
    }
    .write(&mut md, input, &tensors);
    md.set(k("rope.freq_base"), GgufValue::F32(rope_global as f32));
    md.set(k("rope.freq_base_swa"), GgufValue::F32(rope_local as f32));
    md.set(
        k("attention.layer_norm_rms_epsilon"),
        GgufValue::F32(eps as f32),
    );
    md.set(
        k("attention.layer_norm_epsilon"),
        GgufValue::F32(layer_norm_eps as f32),
    );
    encoder_keys(&mut md, "modern-bert", pooling);
    if let Some(p) = classifier_pooling {
        md.set(k("classifier.pooling_type"), GgufValue::U32(p));
    }
    md.set(k("attention.sliding_window"), GgufValue::U32(window as u32));
    md.set(
        k("attention.sliding_window_pattern"),
        GgufValue::U32(pattern as u32),
    );
    md.set(k("rope.scaling.type"), "none");
    md.set(k("vocab_size"), GgufValue::U32(vocab_size as u32));
    if let Some(act) = h.string("hidden_activation") {
        md.set(k("hidden_activation"), act);
    }
    md.set("general.quantization_version", GgufValue::U32(2));
    // The converter's defaults, which the tokenizer's post-processor overrides.
    for flag in ["add_bos_token", "add_eos_token", "add_sep_token"] {
        md.set(format!("tokenizer.ggml.{flag}"), GgufValue::Bool(true));
    }
    let mut warnings = vocab.warnings();
    vocab.write(&mut md);
    warnings.extend(pooling_warning(pooling));
    Ok(LlamaExport {
        architecture: "modern-bert",
        metadata: md.into_vec(),
        tensors,
        warnings,
    })
}
