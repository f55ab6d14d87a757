//! `qwen3` (Qwen3ForCausalLM). As qwen2 without Q/K/V biases, with per-head RMS norms of
//! Q and K, and an explicit head_dim (transformers' default 128).

use super::decoder::{self, DecoderSpec, DROPPED, EMBEDDINGS, FFN_NORM, GATED_FFN};
use super::names::{rule, Dim::*, NamePolicy, Need::*, TensorRule};
use super::{Architecture, LlamaExport, ModelInput};
use crate::error::Result;

/// Hugging Face name → llama.cpp name (`tensor_mapping.py`, qwen3 rows): attention with
/// per-head Q/K norms.
#[rustfmt::skip]
pub const ATTENTION: &[TensorRule] = &[
    //   Hugging Face                                    llama.cpp                    weight    bias      shape (outermost first)
    rule("model.layers.{bid}.input_layernorm",          "blk.{bid}.attn_norm",   Required, Absent,   &[Embd]),
    rule("model.layers.{bid}.self_attn.q_proj",         "blk.{bid}.attn_q",      Required, Optional, &[Q, Embd]),
    rule("model.layers.{bid}.self_attn.k_proj",         "blk.{bid}.attn_k",      Required, Optional, &[Kv, Embd]),
    rule("model.layers.{bid}.self_attn.v_proj",         "blk.{bid}.attn_v",      Required, Optional, &[Kv, Embd]),
    rule("model.layers.{bid}.self_attn.q_norm",         "blk.{bid}.attn_q_norm", Required, Absent,   &[Head]),
    rule("model.layers.{bid}.self_attn.k_norm",         "blk.{bid}.attn_k_norm", Required, Absent,   &[Head]),
    rule("model.layers.{bid}.self_attn.o_proj",         "blk.{bid}.attn_output", Required, Absent,   &[Embd, Q]),
];

pub const SPEC: DecoderSpec = DecoderSpec {
    arch: "qwen3",
    tensors: &[EMBEDDINGS, ATTENTION, FFN_NORM, GATED_FFN],
    names: NamePolicy {
        prefix_renames: &[],
        renames: &[],
        dropped: DROPPED,
    },
    permute_qk: false,
    vocab_and_rope_dims: false,
    pooling_from_modules: true,
    default_head_dim: Some(128),
    config_has_head_dim: true,
    default_context: 32768,
    default_rms_eps: 1e-6,
    default_rope_theta: 10000.0,
    expert_ff_keys: false,
    reads_head_dim: true,
    layer_norm: false,
    scales: &[],
};

pub const ARCH: Architecture = Architecture {
    hf_classes: &["Qwen3ForCausalLM"],
    model_type: "qwen3",
    plan,
};

fn plan(input: &ModelInput) -> Result<LlamaExport> {
    decoder::plan(&SPEC, input)
}
