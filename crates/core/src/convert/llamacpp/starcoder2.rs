//! `starcoder2` (Starcoder2ForCausalLM): LayerNorms and linear layers with biases, a plain
//! (ungated) GELU feed-forward, NeoX-style rope.

use super::decoder::{self, DecoderSpec};
use super::names::{rule, Dim::*, Need::*, TensorRule};
use super::{qwen2, Architecture, LlamaExport, ModelInput};
use crate::error::Result;

/// Hugging Face name → llama.cpp name (`tensor_mapping.py`, starcoder2 rows).
#[rustfmt::skip]
pub const TENSORS: &[TensorRule] = &[
    //   Hugging Face                                    llama.cpp                    weight    bias      shape (outermost first)
    rule("model.embed_tokens",                          "token_embd",            Required, Absent,   &[Vocab, Embd]),
    rule("model.norm",                                  "output_norm",           Required, Required, &[Embd]),
    rule("lm_head",                                     "output",                Optional, Absent,   &[Vocab, Embd]),
    rule("model.layers.{bid}.input_layernorm",          "blk.{bid}.attn_norm",   Required, Required, &[Embd]),
    rule("model.layers.{bid}.self_attn.q_proj",         "blk.{bid}.attn_q",      Required, Optional, &[Q, Embd]),
    rule("model.layers.{bid}.self_attn.k_proj",         "blk.{bid}.attn_k",      Required, Optional, &[Kv, Embd]),
    rule("model.layers.{bid}.self_attn.v_proj",         "blk.{bid}.attn_v",      Required, Optional, &[Kv, Embd]),
    rule("model.layers.{bid}.self_attn.o_proj",         "blk.{bid}.attn_output", Required, Optional, &[Embd, Q]),
    rule("model.layers.{bid}.post_attention_layernorm", "blk.{bid}.ffn_norm",    Required, Required, &[Embd]),
    rule("model.layers.{bid}.mlp.c_fc",                 "blk.{bid}.ffn_up",      Required, Optional, &[Ff, Embd]),
    rule("model.layers.{bid}.mlp.c_proj",               "blk.{bid}.ffn_down",    Required, Optional, &[Embd, Ff]),
];

pub const SPEC: DecoderSpec = DecoderSpec {
    arch: "starcoder2",
    tensors: &[TENSORS],
    pooling_from_modules: false,
    default_context: 4096,
    default_rms_eps: 1e-5,
    layer_norm: true,
    ..qwen2::SPEC
};

pub const ARCH: Architecture = Architecture {
    hf_classes: &["Starcoder2ForCausalLM"],
    model_type: "starcoder2",
    plan,
};

fn plan(input: &ModelInput) -> Result<LlamaExport> {
    decoder::plan(&SPEC, input)
}
