//! `llama` (LlamaForCausalLM: Llama 1–3, and checkpoints of the same shape). Llama-style
//! rope: Q and K rows are permuted; tokenizer from `tokenizer.model` (SentencePiece) or
//! `tokenizer.json` (byte-level BPE, Llama 3).

use super::decoder::{self, DecoderSpec, DROPPED, EMBEDDINGS, FFN_NORM};
use super::names::{rule, Dim::*, NamePolicy, Need::*, TensorRule};
use super::{Architecture, LlamaExport, ModelInput};
use crate::error::Result;

/// Hugging Face name → llama.cpp name (`tensor_mapping.py`, llama rows): attention, with
/// the biases some checkpoints have (`attention_bias`).
#[rustfmt::skip]
pub const ATTENTION: &[TensorRule] = &[
    //   Hugging Face                                    llama.cpp                    weight    bias      shape (outermost first)
    rule("model.layers.{bid}.input_layernorm",          "blk.{bid}.attn_norm",   Required, Absent,   &[Embd]),
    rule("model.layers.{bid}.self_attn.q_proj",         "blk.{bid}.attn_q",      Required, Optional, &[Q, Embd]),
    rule("model.layers.{bid}.self_attn.k_proj",         "blk.{bid}.attn_k",      Required, Optional, &[Kv, Embd]),
    rule("model.layers.{bid}.self_attn.v_proj",         "blk.{bid}.attn_v",      Required, Optional, &[Kv, Embd]),
    rule("model.layers.{bid}.self_attn.o_proj",         "blk.{bid}.attn_output", Required, Optional, &[Embd, Q]),
];

/// The gated feed-forward, with the biases some checkpoints have (`mlp_bias`).
#[rustfmt::skip]
pub const FFN: &[TensorRule] = &[
    rule("model.layers.{bid}.mlp.gate_proj",            "blk.{bid}.ffn_gate",    Required, Optional, &[Ff, Embd]),
    rule("model.layers.{bid}.mlp.up_proj",              "blk.{bid}.ffn_up",      Required, Optional, &[Ff, Embd]),
    rule("model.layers.{bid}.mlp.down_proj",            "blk.{bid}.ffn_down",    Required, Optional, &[Embd, Ff]),
];

pub const SPEC: DecoderSpec = DecoderSpec {
    arch: "llama",
    tensors: &[EMBEDDINGS, ATTENTION, FFN_NORM, FFN],
    names: NamePolicy {
        prefix_renames: &[],
        renames: &[],
        dropped: DROPPED,
    },
    permute_qk: true,
    vocab_and_rope_dims: true,
    pooling_from_modules: false,
    default_head_dim: None,
    config_has_head_dim: true,
    default_context: 2048,
    default_rms_eps: 1e-6,
    default_rope_theta: 10000.0,
    expert_ff_keys: false,
    reads_head_dim: true,
    layer_norm: false,
    scales: &[],
};

pub const ARCH: Architecture = Architecture {
    hf_classes: &["LlamaForCausalLM", "LLaMAForCausalLM"],
    model_type: "llama",
    plan,
};

fn plan(input: &ModelInput) -> Result<LlamaExport> {
    decoder::plan(&SPEC, input)
}
