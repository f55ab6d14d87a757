//! `mistral` (MistralForCausalLM) and `mixtral` (MixtralForCausalLM): llama's layout, which
//! llama.cpp loads as `llama`; Mixtral's feed-forward is a mixture of experts, stacked per
//! layer (`ffn_{gate,down,up}_exps`) with its router (`ffn_gate_inp`).

use super::decoder::{self, DecoderSpec, EMBEDDINGS, FFN_NORM};
use super::llama;
use super::names::{rule, Dim::*, Need::*, TensorRule};
use super::{Architecture, LlamaExport, ModelInput};
use crate::error::Result;

/// Mistral: llama's table; transformers' MistralConfig defaults.
pub const SPEC: DecoderSpec = DecoderSpec {
    default_context: 4096 * 32,
    ..llama::SPEC
};

pub const ARCH: Architecture = Architecture {
    hf_classes: &["MistralForCausalLM"],
    model_type: "mistral",
    plan,
};

fn plan(input: &ModelInput) -> Result<LlamaExport> {
    decoder::plan(&SPEC, input)
}

/// Hugging Face name → llama.cpp name (`tensor_mapping.py`, Mixtral's feed-forward): the
/// router and the experts.
#[rustfmt::skip]
pub const MIXTRAL_FFN: &[TensorRule] = &[
    //   Hugging Face                                                  llama.cpp                      weight    bias    shape (outermost first)
    rule("model.layers.{bid}.block_sparse_moe.gate",                  "blk.{bid}.ffn_gate_inp",  Required, Absent, &[Experts, Embd]),
    rule("model.layers.{bid}.block_sparse_moe.experts.{xid}.w1",      "blk.{bid}.ffn_gate_exps", Required, Absent, &[ExpertFf, Embd]),
    rule("model.layers.{bid}.block_sparse_moe.experts.{xid}.w2",      "blk.{bid}.ffn_down_exps", Required, Absent, &[Embd, ExpertFf]),
    rule("model.layers.{bid}.block_sparse_moe.experts.{xid}.w3",      "blk.{bid}.ffn_up_exps",   Required, Absent, &[ExpertFf, Embd]),
];

/// Mixtral: the llama class in llama.cpp's converter, experts stacked.
pub const MIXTRAL_SPEC: DecoderSpec = DecoderSpec {
    tensors: &[EMBEDDINGS, llama::ATTENTION, FFN_NORM, MIXTRAL_FFN],
    default_context: 4096 * 32,
    ..llama::SPEC
};

pub const MIXTRAL: Architecture = Architecture {
    hf_classes: &["MixtralForCausalLM"],
    model_type: "mixtral",
    plan: plan_mixtral,
};

fn plan_mixtral(input: &ModelInput) -> Result<LlamaExport> {
    decoder::plan(&MIXTRAL_SPEC, input)
}
