//! `gemma` (GemmaForCausalLM), `gemma2` (Gemma2ForCausalLM) and `gemma3` (Gemma3ForCausalLM,
//! Gemma 3's text model, and the text model of Gemma3ForConditionalGeneration, as every Gemma
//! 3 above 1B ships). What sets them apart from llama:
//!
//! - their RMSNorm scales by `1 + w`: every `*norm.weight` is written shifted by one
//!   ([`Transform::AddOne`]), as llama.cpp's norm multiplies by the weight alone;
//! - NeoX-style rope (no Q/K permutation), embeddings scaled by √hidden_size and tied to the
//!   output (llama.cpp does both by itself; Gemma 1 and 2 have no place for an `lm_head`);
//! - Gemma 2 and 3 norm after attention and after the feed-forward as well as before
//!   (`post_attention_norm`, `ffn_norm`, `post_ffw_norm`), and alternate sliding-window and
//!   global layers (llama.cpp's pattern: every 2nd layer global for Gemma 2, every 6th for
//!   Gemma 3, as transformers' `layer_types` default to);
//! - Gemma 2 soft-caps attention and final logits; Gemma 3 has per-head Q/K norms, a rope
//!   base of its own for the sliding layers (`rope_local_base_freq`) and optional final
//!   soft-capping;
//! - a SentencePiece vocabulary without the dummy prefix (`add_space_prefix` false).
//!
//! The key/values are those llama.cpp's converter writes (`conversion/gemma.py`): Gemma 1 and
//! 2 write no rope key at all (llama.cpp's default base, 10000, is theirs); Gemma 1 names
//! CodeGemma's end-of-turn token (107).
//!
//! Gemma 3's multimodal checkpoints nest the text model's numbers in `text_config` (lifted by
//! [`Hparams`], with transformers' defaults for what is left out) and its tensors under
//! `language_model.` or `model.language_model.`, beside the SigLIP vision tower and the
//! projector. Like the converter without `--mmproj`, the export is the text model alone: the
//! vision tensors are skipped (llama.cpp runs images through a separate mmproj file, which
//! this export does not write).

use super::decoder::{self, DecoderSpec, EMBEDDINGS, FFN_NORM, GATED_FFN};
use super::hparams::{field_error, Hparams};
use super::names::{rule, Dim::*, NamePolicy, Need::*, TensorRule};
use super::{Architecture, LlamaExport, ModelInput, Origin, Transform};
use crate::error::Result;
use crate::format::gguf::GgufValue;

/// Gemma 1 and 2: the token embeddings (also the output) and the final norm.
#[rustfmt::skip]
pub const TIED_EMBEDDINGS: &[TensorRule] = &[
    rule("model.embed_tokens", "token_embd",  Required, Absent, &[Vocab, Embd]),
    rule("model.norm",         "output_norm", Required, Absent, &[Embd]),
];

/// Hugging Face name → llama.cpp name (`tensor_mapping.py`, gemma rows): attention.
#[rustfmt::skip]
pub const ATTENTION: &[TensorRule] = &[
    //   Hugging Face                                    llama.cpp                    weight    bias    shape (outermost first)
    rule("model.layers.{bid}.input_layernorm",          "blk.{bid}.attn_norm",   Required, Absent, &[Embd]),
    rule("model.layers.{bid}.self_attn.q_proj",         "blk.{bid}.attn_q",      Required, Absent, &[Q, Embd]),
    rule("model.layers.{bid}.self_attn.k_proj",         "blk.{bid}.attn_k",      Required, Absent, &[Kv, Embd]),
    rule("model.layers.{bid}.self_attn.v_proj",         "blk.{bid}.attn_v",      Required, Absent, &[Kv, Embd]),
    rule("model.layers.{bid}.self_attn.o_proj",         "blk.{bid}.attn_output", Required, Absent, &[Embd, Q]),
];

/// Gemma 2 and 3: the norms around attention and the feed-forward (`post_attention_layernorm`
/// is the norm after attention here, not the one before the feed-forward).
#[rustfmt::skip]
pub const SANDWICH_NORMS: &[TensorRule] = &[
    rule("model.layers.{bid}.post_attention_layernorm",   "blk.{bid}.post_attention_norm", Required, Absent, &[Embd]),
    rule("model.layers.{bid}.pre_feedforward_layernorm",  "blk.{bid}.ffn_norm",            Required, Absent, &[Embd]),
    rule("model.layers.{bid}.post_feedforward_layernorm", "blk.{bid}.post_ffw_norm",       Required, Absent, &[Embd]),
];

/// Gemma 3: per-head RMS norms of Q and K.
#[rustfmt::skip]
pub const QK_NORMS: &[TensorRule] = &[
    rule("model.layers.{bid}.self_attn.q_norm",         "blk.{bid}.attn_q_norm", Required, Absent, &[Head]),
    rule("model.layers.{bid}.self_attn.k_norm",         "blk.{bid}.attn_k_norm", Required, Absent, &[Head]),
];

/// Gemma 1 and 2 drop `lm_head` (a copy of the embeddings some exports carry), as the
/// converter does: llama.cpp's gemma and gemma2 have no output tensor.
const TIED_DROPPED: &[&str] = &[
    "*.rotary_emb.inv_freq",
    "*.attention.masked_bias",
    "*.attention.bias",
    "lm_head.weight",
];

pub const GEMMA_SPEC: DecoderSpec = DecoderSpec {
    arch: "gemma",
    tensors: &[TIED_EMBEDDINGS, ATTENTION, FFN_NORM, GATED_FFN],
    names: NamePolicy {
        prefix_renames: &[],
        renames: &[],
        dropped: TIED_DROPPED,
    },
    permute_qk: false,
    vocab_and_rope_dims: false,
    pooling_from_modules: false,
    // transformers' GemmaConfig defaults.
    default_head_dim: Some(256),
    config_has_head_dim: true,
    reads_head_dim: true,
    default_context: 8192,
    default_rms_eps: 1e-6,
    layer_norm: false,
    default_rope_theta: 10000.0,
    expert_ff_keys: false,
    scales: &[],
};

pub const GEMMA2_SPEC: DecoderSpec = DecoderSpec {
    arch: "gemma2",
    tensors: &[TIED_EMBEDDINGS, ATTENTION, SANDWICH_NORMS, GATED_FFN],
    ..GEMMA_SPEC
};

/// Gemma 3 (both classes, as the converter treats them): the text model of a multimodal
/// checkpoint under `model.language_model.` (transformers ≥ 4.52) or `language_model.`
/// (`language_model.model.layers.N…`, `language_model.lm_head`), the vision tower and the
/// projector skipped (llama.cpp's text model has no place for them).
pub const GEMMA3_SPEC: DecoderSpec = DecoderSpec {
    arch: "gemma3",
    tensors: &[EMBEDDINGS, ATTENTION, QK_NORMS, SANDWICH_NORMS, GATED_FFN],
    names: NamePolicy {
        prefix_renames: &[("model.language_model.", "model."), ("language_model.", "")],
        renames: &[],
        dropped: &[
            "*.rotary_emb.inv_freq",
            "*.attention.masked_bias",
            "*.attention.bias",
            "vision_tower.*",
            "model.vision_tower.*",
            "multi_modal_projector.*",
            "model.multi_modal_projector.*",
        ],
    },
    default_context: 131072,
    default_rope_theta: 1_000_000.0,
    ..GEMMA_SPEC
};

pub const GEMMA: Architecture = Architecture {
    hf_classes: &["GemmaForCausalLM"],
    model_type: "gemma",
    plan: plan_gemma,
};

pub const GEMMA2: Architecture = Architecture {
    hf_classes: &["Gemma2ForCausalLM"],
    model_type: "gemma2",
    plan: plan_gemma2,
};

pub const GEMMA3: Architecture = Architecture {
    hf_classes: &["Gemma3ForCausalLM"],
    model_type: "gemma3_text",
    plan: plan_gemma3,
};

/// Gemma 3's multimodal class: its text model, planned as Gemma3ForCausalLM's.
pub const GEMMA3_CONDITIONAL: Architecture = Architecture {
    hf_classes: &["Gemma3ForConditionalGeneration"],
    model_type: "gemma3",
    plan: plan_gemma3,
};

/// transformers' `Gemma3TextConfig` defaults (4.57) for the fields the plan reads. The
/// converter loads config.json through `AutoConfig`, so a field config.json leaves out has
/// this value there as in transformers; Google's multimodal configs give only a handful
/// (hidden_size, intermediate_size, num_hidden_layers, rope_scaling, sliding_window).
fn gemma3_text_defaults() -> serde_json::Value {
    serde_json::json!({
        "vocab_size": 262_208,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 131_072,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1_000_000.0,
        "query_pre_attn_scalar": 256,
        "sliding_window": 4096,
        "rope_local_base_freq": 10_000.0,
    })
}

fn plan_gemma(input: &ModelInput) -> Result<LlamaExport> {
    let mut export = plan_common(&GEMMA_SPEC, input)?;
    drop_rope_keys(&mut export);
    // CodeGemma's end-of-turn token, which the converter names for every Gemma 1 (its
    // prefix/suffix/middle/separator ids have no GGUF key and are skipped as it skips them).
    set_before(
        &mut export.metadata,
        "tokenizer.chat_template",
        "tokenizer.ggml.eot_token_id",
        GgufValue::U32(107),
    );
    Ok(export)
}

fn plan_gemma2(input: &ModelInput) -> Result<LlamaExport> {
    let h = &input.hparams;
    let mut export = plan_common(&GEMMA2_SPEC, input)?;
    drop_rope_keys(&mut export);
    // transformers' Gemma2Config defaults, which the model runs with when config.json has
    // no value; a null leaves llama.cpp's own default.
    for (field, key, default) in [
        ("attn_logit_softcapping", "attn_logit_softcapping", 50.0),
        ("final_logit_softcapping", "final_logit_softcapping", 30.0),
    ] {
        if let Some(x) = number_or_default(h, field, default)? {
            set_arch_key(&mut export, key, GgufValue::F32(x as f32));
        }
    }
    let window = h.count(&["sliding_window"])?.unwrap_or(4096);
    set_arch_key(
        &mut export,
        "attention.sliding_window",
        GgufValue::U32(window as u32),
    );
    warn_where_llama_cpp_differs(h, 2, 46, &mut export.warnings)?;
    Ok(export)
}

fn plan_gemma3(input: &ModelInput) -> Result<LlamaExport> {
    let input = &ModelInput {
        files: input.files,
        hparams: input.hparams.with_text_defaults(&gemma3_text_defaults())?,
        tensors: input.tensors,
    };
    let h = &input.hparams;
    let mut export = plan_common(&GEMMA3_SPEC, input)?;
    // The sliding layers' rope base: transformers ≥ 5 nests it in `rope_parameters`,
    // 4.x has `rope_local_base_freq` (the converter reads both).
    let local_theta = match h
        .get("rope_parameters")
        .and_then(|p| p.get("sliding_attention"))
    {
        Some(sliding) => match sliding.get("rope_theta") {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => Some(v.as_f64().filter(|x| x.is_finite()).ok_or_else(|| {
                field_error(
                    "rope_parameters",
                    "'sliding_attention.rope_theta' must be a finite number",
                )
            })?),
        },
        None => h.number(&[
            "local_rope_theta",
            "rope_local_theta",
            "rope_theta_local",
            "swa_rope_theta",
            "rope_local_base_freq",
        ])?,
    };
    if let Some(theta) = local_theta {
        set_arch_key(
            &mut export,
            "rope.freq_base_swa",
            GgufValue::F32(theta as f32),
        );
    }
    if let Some(cap) = h
        .number(&["final_logit_softcapping"])?
        .filter(|x| *x != 0.0)
    {
        set_arch_key(
            &mut export,
            "final_logit_softcapping",
            GgufValue::F32(cap as f32),
        );
    }
    // A pattern of 1 is every layer global: no window.
    if h.number(&["sliding_window_pattern"])? != Some(1.0) {
        let window = h.required_count(&["sliding_window"])?;
        set_arch_key(
            &mut export,
            "attention.sliding_window",
            GgufValue::U32(window as u32),
        );
        warn_where_llama_cpp_differs(h, 6, 62, &mut export.warnings)?;
    }
    Ok(export)
}

/// What llama.cpp fixes by itself for Gemma 2 and 3 and the converter does not write: which
/// layers slide (every `pattern`-th is global) and the attention scale (1/√head_dim, or
/// 1/√(hidden/heads) for the 27B model, which it knows by its `layers_27b` layers). A config
/// that says otherwise runs differently in llama.cpp than in transformers: a warning.
fn warn_where_llama_cpp_differs(
    h: &Hparams,
    pattern: usize,
    layers_27b: usize,
    warnings: &mut Vec<String>,
) -> Result<()> {
    if let Some(serde_json::Value::Array(types)) = h.get("layer_types") {
        let differs = types.iter().enumerate().any(|(i, t)| {
            let global = (i + 1).is_multiple_of(pattern);
            t.as_str()
                != Some(if global {
                    "full_attention"
                } else {
                    "sliding_attention"
                })
        });
        if differs {
            warnings.push(format!(
                "config.json: 'layer_types' is not llama.cpp's fixed pattern (every {pattern}th \
                 layer global, the others sliding): llama.cpp runs its own pattern"
            ));
        }
    }
    let (Some(scalar), Some(layers), Some(embd), Some(heads)) = (
        h.number(&["query_pre_attn_scalar"])?,
        h.count(&["num_hidden_layers"])?,
        h.count(&["hidden_size"])?,
        h.count(&["num_attention_heads"])?,
    ) else {
        return Ok(());
    };
    let head_dim = h.count(&["head_dim"])?.unwrap_or(256);
    let llama_cpp = if layers == layers_27b {
        (embd / heads) as f64
    } else {
        head_dim as f64
    };
    if scalar != llama_cpp {
        warnings.push(format!(
            "config.json: 'query_pre_attn_scalar' is {scalar}, llama.cpp scales attention by \
             1/sqrt({llama_cpp}) for this model: its outputs will differ from transformers'"
        ));
    }
    Ok(())
}

/// The decoder plan with Gemma's norms shifted by one and its vocabulary's space prefix off.
fn plan_common(spec: &DecoderSpec, input: &ModelInput) -> Result<LlamaExport> {
    let mut export = decoder::plan(spec, input)?;
    for t in &mut export.tensors {
        if let Origin::Source { name, transform } = &mut t.origin {
            if name.ends_with("norm.weight") {
                *transform = Transform::AddOne;
            }
        }
    }
    if input.files.has("tokenizer.model") {
        set_before(
            &mut export.metadata,
            "tokenizer.ggml.model",
            "tokenizer.ggml.add_space_prefix",
            GgufValue::Bool(false),
        );
    }
    Ok(export)
}

/// Gemma 1 and 2's converter writes no rope key (llama.cpp's defaults are theirs).
fn drop_rope_keys(export: &mut LlamaExport) {
    let prefix = format!("{}.rope.", export.architecture);
    export.metadata.retain(|(k, _)| !k.starts_with(&prefix));
}

/// A config number, `default` where the field is absent, `None` where it is null.
fn number_or_default(h: &Hparams, field: &str, default: f64) -> Result<Option<f64>> {
    match h.raw().get(field) {
        None => Ok(Some(default)),
        Some(serde_json::Value::Null) => Ok(None),
        Some(_) => h.number(&[field]),
    }
}

/// Set `{arch}.{key}` among the architecture's keys (before `general.file_type`, where the
/// converter writes the model's numbers).
fn set_arch_key(export: &mut LlamaExport, key: &str, value: GgufValue) {
    let key = format!("{}.{key}", export.architecture);
    set_before(&mut export.metadata, "general.file_type", &key, value);
}

/// Set `key` (replacing its value where present, else inserted before `anchor`, or last).
fn set_before(md: &mut Vec<(String, GgufValue)>, anchor: &str, key: &str, value: GgufValue) {
    if let Some(slot) = md.iter_mut().find(|(k, _)| k == key) {
        slot.1 = value;
        return;
    }
    let at = md.iter().position(|(k, _)| k == anchor).unwrap_or(md.len());
    md.insert(at, (key.to_string(), value));
}
