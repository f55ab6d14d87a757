//! `olmo2` (Olmo2ForCausalLM: OLMo 2): norms after attention and after the feed-forward
//! instead of before them, Q/K RMS norms over the whole projection, NeoX-style rope.

use super::decoder::{self, DecoderSpec, EMBEDDINGS, GATED_FFN};
use super::names::{rule, Dim::*, Need::*, TensorRule};
use super::{qwen2, Architecture, LlamaExport, ModelInput};
use crate::error::Result;

/// Hugging Face name → llama.cpp name (`tensor_mapping.py`, olmo2 rows).
#[rustfmt::skip]
pub const ATTENTION: &[TensorRule] = &[
    //   Hugging Face                                      llama.cpp                              weight    bias    shape (outermost first)
    rule("model.layers.{bid}.self_attn.q_proj",           "blk.{bid}.attn_q",              Required, Absent, &[Q, Embd]),
    rule("model.layers.{bid}.self_attn.k_proj",           "blk.{bid}.attn_k",              Required, Absent, &[Kv, Embd]),
    rule("model.layers.{bid}.self_attn.v_proj",           "blk.{bid}.attn_v",              Required, Absent, &[Kv, Embd]),
    rule("model.layers.{bid}.self_attn.q_norm",           "blk.{bid}.attn_q_norm",         Required, Absent, &[Q]),
    rule("model.layers.{bid}.self_attn.k_norm",           "blk.{bid}.attn_k_norm",         Required, Absent, &[Kv]),
    rule("model.layers.{bid}.self_attn.o_proj",           "blk.{bid}.attn_output",         Required, Absent, &[Embd, Q]),
    rule("model.layers.{bid}.post_attention_layernorm",   "blk.{bid}.post_attention_norm", Required, Absent, &[Embd]),
    rule("model.layers.{bid}.post_feedforward_layernorm", "blk.{bid}.post_ffw_norm",       Required, Absent, &[Embd]),
];

pub const SPEC: DecoderSpec = DecoderSpec {
    arch: "olmo2",
    tensors: &[EMBEDDINGS, ATTENTION, GATED_FFN],
    pooling_from_modules: false,
    default_context: 2048,
    default_rms_eps: 1e-5,
    ..qwen2::SPEC
};

pub const ARCH: Architecture = Architecture {
    hf_classes: &["Olmo2ForCausalLM"],
    model_type: "olmo2",
    plan,
};

fn plan(input: &ModelInput) -> Result<LlamaExport> {
    decoder::plan(&SPEC, input)
}
