//! `qwen2_moe` (Qwen2MoeForCausalLM: Qwen1.5-MoE) and `qwen3_moe` (Qwen3MoeForCausalLM):
//! qwen2's and qwen3's attention with a mixture of experts in every layer, stacked per layer
//! (`ffn_{gate,down,up}_exps`) with the router (`ffn_gate_inp`); Qwen2-MoE adds a shared
//! expert and its gate (`*_shexp`).

use super::decoder::{self, DecoderSpec, EMBEDDINGS, FFN_NORM};
use super::names::{rule, Dim::*, Need::*, TensorRule};
use super::{qwen2, qwen3, Architecture, LlamaExport, ModelInput};
use crate::error::Result;

/// Hugging Face name → llama.cpp name (`tensor_mapping.py`, qwen2moe/qwen3moe rows): the
/// router and the experts.
#[rustfmt::skip]
pub const MOE_FFN: &[TensorRule] = &[
    //   Hugging Face                                           llama.cpp                          weight    bias      shape (outermost first)
    rule("model.layers.{bid}.mlp.gate",                        "blk.{bid}.ffn_gate_inp",      Required, Absent,   &[Experts, Embd]),
    rule("model.layers.{bid}.mlp.experts.{xid}.gate_proj",     "blk.{bid}.ffn_gate_exps",     Required, Absent,   &[ExpertFf, Embd]),
    rule("model.layers.{bid}.mlp.experts.{xid}.down_proj",     "blk.{bid}.ffn_down_exps",     Required, Absent,   &[Embd, ExpertFf]),
    rule("model.layers.{bid}.mlp.experts.{xid}.up_proj",       "blk.{bid}.ffn_up_exps",       Required, Absent,   &[ExpertFf, Embd]),
];

/// Qwen2-MoE's shared expert and its gate.
#[rustfmt::skip]
pub const SHARED_EXPERT: &[TensorRule] = &[
    rule("model.layers.{bid}.mlp.shared_expert_gate",          "blk.{bid}.ffn_gate_inp_shexp", Required, Absent,  &[One, Embd]),
    rule("model.layers.{bid}.mlp.shared_expert.gate_proj",     "blk.{bid}.ffn_gate_shexp",    Required, Absent,   &[SharedFf, Embd]),
    rule("model.layers.{bid}.mlp.shared_expert.down_proj",     "blk.{bid}.ffn_down_shexp",    Required, Absent,   &[Embd, SharedFf]),
    rule("model.layers.{bid}.mlp.shared_expert.up_proj",       "blk.{bid}.ffn_up_shexp",      Required, Absent,   &[SharedFf, Embd]),
];

pub const QWEN2_MOE_SPEC: DecoderSpec = DecoderSpec {
    arch: "qwen2moe",
    tensors: &[
        EMBEDDINGS,
        qwen2::ATTENTION,
        FFN_NORM,
        MOE_FFN,
        SHARED_EXPERT,
    ],
    pooling_from_modules: false,
    expert_ff_keys: true,
    ..qwen2::SPEC
};

pub const QWEN2_MOE: Architecture = Architecture {
    hf_classes: &["Qwen2MoeForCausalLM"],
    model_type: "qwen2_moe",
    plan: plan_qwen2_moe,
};

fn plan_qwen2_moe(input: &ModelInput) -> Result<LlamaExport> {
    decoder::plan(&QWEN2_MOE_SPEC, input)
}

pub const QWEN3_MOE_SPEC: DecoderSpec = DecoderSpec {
    arch: "qwen3moe",
    tensors: &[EMBEDDINGS, qwen3::ATTENTION, FFN_NORM, MOE_FFN],
    pooling_from_modules: false,
    expert_ff_keys: true,
    ..qwen3::SPEC
};

pub const QWEN3_MOE: Architecture = Architecture {
    hf_classes: &["Qwen3MoeForCausalLM"],
    model_type: "qwen3_moe",
    plan: plan_qwen3_moe,
};

fn plan_qwen3_moe(input: &ModelInput) -> Result<LlamaExport> {
    decoder::plan(&QWEN3_MOE_SPEC, input)
}
