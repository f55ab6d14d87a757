//! `granite` (GraniteForCausalLM: IBM Granite 3): llama's layout and rope, with four scalar
//! multipliers llama.cpp reads from the GGUF; its converter ignores `head_dim`.

use super::decoder::{self, DecoderSpec};
use super::llama;
use super::{Architecture, LlamaExport, ModelInput};
use crate::error::Result;

pub const SPEC: DecoderSpec = DecoderSpec {
    arch: "granite",
    config_has_head_dim: false,
    reads_head_dim: false,
    scales: &[
        ("attention_multiplier", "attention.scale"),
        ("embedding_multiplier", "embedding_scale"),
        ("residual_multiplier", "residual_scale"),
        ("logits_scaling", "logit_scale"),
    ],
    ..llama::SPEC
};

pub const ARCH: Architecture = Architecture {
    hf_classes: &["GraniteForCausalLM"],
    model_type: "granite",
    plan,
};

fn plan(input: &ModelInput) -> Result<LlamaExport> {
    decoder::plan(&SPEC, input)
}
