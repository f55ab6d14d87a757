//! `smollm3` (SmolLM3ForCausalLM): llama's layout and rope; llama.cpp leaves rope out of
//! every fourth layer by itself, as transformers' `no_rope_layer_interval` (4) does.

use super::decoder::{self, DecoderSpec};
use super::llama;
use super::{Architecture, LlamaExport, ModelInput};
use crate::error::Result;

pub const SPEC: DecoderSpec = DecoderSpec {
    arch: "smollm3",
    default_context: 32768,
    // transformers' SmolLM3Config has no head_dim: key_length only when config.json has one.
    config_has_head_dim: false,
    ..llama::SPEC
};

pub const ARCH: Architecture = Architecture {
    hf_classes: &["SmolLM3ForCausalLM"],
    model_type: "smollm3",
    plan,
};

fn plan(input: &ModelInput) -> Result<LlamaExport> {
    decoder::plan(&SPEC, input)
}
