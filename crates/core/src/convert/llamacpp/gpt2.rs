//! `gpt2` (GPT2LMHeadModel): learned position embeddings, LayerNorms and linear layers with
//! biases, a fused Q/K/V projection kept fused (`attn_qkv`), `Conv1D` weights stored
//! `[in, out]` and transposed here, the output tied to the token embeddings (llama.cpp
//! reuses them when `output.weight` is absent), a byte-level BPE tokenizer.

use super::hparams::field_error;
use super::names::{self, conv1d, rule, Dim::*, Dims, NamePolicy, Need::*, TensorRule};
use super::vocab;
use super::{source_tensors, Architecture, Header, LlamaExport, Metadata, ModelInput, Transform};
use crate::error::Result;
use crate::format::gguf::GgufValue;

/// Hugging Face name → llama.cpp name (`tensor_mapping.py`, gpt2 rows). Shapes are the
/// output's; `conv1d` rows are stored transposed.
#[rustfmt::skip]
pub const TENSORS: &[TensorRule] = &[
    //     Hugging Face                        llama.cpp                    weight    bias      shape (outermost first)
    rule(  "wte",                             "token_embd",            Required, Absent,   &[Vocab, Embd]),
    rule(  "wpe",                             "position_embd",         Required, Absent,   &[Ctx, Embd]),
    rule(  "ln_f",                            "output_norm",           Required, Required, &[Embd]),
    rule(  "lm_head",                         "output",                Optional, Absent,   &[Vocab, Embd]),
    rule(  "h.{bid}.ln_1",                    "blk.{bid}.attn_norm",   Required, Required, &[Embd]),
    conv1d("h.{bid}.attn.c_attn",             "blk.{bid}.attn_qkv",    Required, Required, &[Qkv, Embd]),
    conv1d("h.{bid}.attn.c_proj",             "blk.{bid}.attn_output", Required, Required, &[Embd, Embd]),
    rule(  "h.{bid}.ln_2",                    "blk.{bid}.ffn_norm",    Required, Required, &[Embd]),
    conv1d("h.{bid}.mlp.c_fc",                "blk.{bid}.ffn_up",      Required, Required, &[Ff, Embd]),
    conv1d("h.{bid}.mlp.c_proj",              "blk.{bid}.ffn_down",    Required, Required, &[Embd, Ff]),
];

const NAMES: NamePolicy = NamePolicy {
    // GPT2LMHeadModel's body is `transformer.`; GPT2Model's has no prefix.
    prefix_renames: &[("transformer.", "")],
    renames: &[],
    // The causal-mask buffers older checkpoints saved.
    dropped: &["*.attn.bias", "*.attn.masked_bias"],
};

pub const ARCH: Architecture = Architecture {
    hf_classes: &["GPT2LMHeadModel"],
    model_type: "gpt2",
    plan,
};

fn plan(input: &ModelInput) -> Result<LlamaExport> {
    let h = &input.hparams;
    let block_count = h.required_count(&["n_layer", "num_hidden_layers"])?;
    let embd = h.required_count(&["n_embd", "hidden_size"])?;
    let n_head = h.required_count(&["n_head", "num_attention_heads"])?;
    let vocab_size = h.required_count(&["vocab_size"])?;
    // transformers' GPT2Config: n_inner null is 4 × n_embd, the width the converter writes.
    let ff = h.count(&["n_inner"])?.unwrap_or(4 * embd);
    if !embd.is_multiple_of(n_head) {
        return Err(field_error(
            "n_head",
            &format!("({n_head}) does not divide n_embd ({embd})"),
        ));
    }
    // llama.cpp sizes the position embeddings by the context length: the converter writes
    // `n_ctx`, which openai-community/gpt2's config.json has beside `n_positions`.
    let ctx = h
        .count(&["n_ctx", "n_positions", "max_position_embeddings"])?
        .unwrap_or(1024);
    let eps = h.number(&["layer_norm_epsilon"])?.unwrap_or(1e-5);
    let dims = Dims::dense(vocab_size, embd, ff, n_head, ctx);
    let mapped = names::map_tensors(input.tensors, TENSORS, &NAMES, &dims, block_count)?;
    let tensors = source_tensors(&mapped, input.tensors, |_| Transform::Identity)?;
    let vocab = vocab::gpt2(input.files, h, h.raw())?;

    let mut md = Metadata::default();
    Header {
        arch: "gpt2",
        block_count,
        context: ctx,
        embd,
        ff,
        n_head,
    }
    .write(&mut md, input, &tensors);
    md.set(
        "gpt2.attention.layer_norm_epsilon",
        GgufValue::F32(eps as f32),
    );
    md.set(
        "general.file_type",
        // Set by `recognize` once the tensors' final types are known.
        GgufValue::U32(0),
    );
    md.set("general.quantization_version", GgufValue::U32(2));
    let warnings = vocab.warnings();
    vocab.write(&mut md);
    Ok(LlamaExport {
        architecture: "gpt2",
        metadata: md.into_vec(),
        tensors,
        warnings,
    })
}
