//! `qwen2` (Qwen2ForCausalLM: Qwen1.5, Qwen2, Qwen2.5). NeoX-style rope (no permutation),
//! Q/K/V biases, byte-level BPE tokenizer.

use super::decoder::{self, DecoderSpec, DROPPED, FFN_NORM, GATED_FFN};
use super::names::{rule, Dim::*, NamePolicy, Need::*, TensorRule};
use super::{Architecture, LlamaExport, ModelInput};
use crate::error::Result;

/// Hugging Face name → llama.cpp name (`tensor_mapping.py`, qwen2 rows): qwen2's output
/// projection may have a bias.
#[rustfmt::skip]
pub const HEAD: &[TensorRule] = &[
    rule("model.embed_tokens",                          "token_embd",            Required, Absent,   &[Vocab, Embd]),
    rule("model.norm",                                  "output_norm",           Required, Absent,   &[Embd]),
    rule("lm_head",                                     "output",                Optional, Optional, &[Vocab, Embd]),
];

/// Attention with Q/K/V biases.
#[rustfmt::skip]
pub const ATTENTION: &[TensorRule] = &[
    //   Hugging Face                                    llama.cpp                    weight    bias      shape (outermost first)
    rule("model.layers.{bid}.input_layernorm",          "blk.{bid}.attn_norm",   Required, Absent,   &[Embd]),
    rule("model.layers.{bid}.self_attn.q_proj",         "blk.{bid}.attn_q",      Required, Optional, &[Q, Embd]),
    rule("model.layers.{bid}.self_attn.k_proj",         "blk.{bid}.attn_k",      Required, Optional, &[Kv, Embd]),
    rule("model.layers.{bid}.self_attn.v_proj",         "blk.{bid}.attn_v",      Required, Optional, &[Kv, Embd]),
    rule("model.layers.{bid}.self_attn.o_proj",         "blk.{bid}.attn_output", Required, Absent,   &[Embd, Q]),
];

pub const SPEC: DecoderSpec = DecoderSpec {
    arch: "qwen2",
    tensors: &[HEAD, ATTENTION, FFN_NORM, GATED_FFN],
    names: NamePolicy {
        prefix_renames: &[],
        renames: &[],
        dropped: DROPPED,
    },
    permute_qk: false,
    vocab_and_rope_dims: false,
    pooling_from_modules: true,
    default_head_dim: None,
    config_has_head_dim: false,
    default_context: 32768,
    default_rms_eps: 1e-6,
    default_rope_theta: 10000.0,
    expert_ff_keys: false,
    reads_head_dim: true,
    layer_norm: false,
    scales: &[],
};

pub const ARCH: Architecture = Architecture {
    hf_classes: &["Qwen2ForCausalLM"],
    model_type: "qwen2",
    plan,
};

fn plan(input: &ModelInput) -> Result<LlamaExport> {
    decoder::plan(&SPEC, input)
}
