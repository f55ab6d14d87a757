//! `phi3` (Phi3ForCausalLM: Phi-3, Phi-3.5, Phi-4 mini). Fused projections kept as llama.cpp
//! loads them (`qkv_proj` → `attn_qkv`, `gate_up_proj` → `ffn_up` of `2 × intermediate_size`
//! rows), NeoX-style rope over `partial_rotary_factor` of each head, a sliding window, and
//! LongRoPE's per-frequency factors as the `rope_factors_long` / `rope_factors_short` tensors.

use super::hparams::field_error;
use super::names::{self, rule, Dim::*, Dims, NamePolicy, Need::*, TensorRule};
use super::vocab;
use super::{
    source_tensors, Architecture, ExportTensor, Header, LlamaExport, Metadata, ModelInput, Origin,
    Transform,
};
use crate::error::Result;
use crate::format::gguf::{GgmlType, GgufValue};
use serde_json::Value as Json;

/// Hugging Face name → llama.cpp name (`tensor_mapping.py`, phi3 rows).
#[rustfmt::skip]
pub const TENSORS: &[TensorRule] = &[
    //   Hugging Face                                    llama.cpp                    weight    bias      shape (outermost first)
    rule("model.embed_tokens",                          "token_embd",            Required, Absent,   &[Vocab, Embd]),
    rule("model.norm",                                  "output_norm",           Required, Absent,   &[Embd]),
    rule("lm_head",                                     "output",                Optional, Absent,   &[Vocab, Embd]),
    rule("model.layers.{bid}.input_layernorm",          "blk.{bid}.attn_norm",   Required, Absent,   &[Embd]),
    rule("model.layers.{bid}.self_attn.qkv_proj",       "blk.{bid}.attn_qkv",    Required, Absent,   &[Qkv, Embd]),
    rule("model.layers.{bid}.self_attn.o_proj",         "blk.{bid}.attn_output", Required, Absent,   &[Embd, Q]),
    rule("model.layers.{bid}.post_attention_layernorm", "blk.{bid}.ffn_norm",    Required, Absent,   &[Embd]),
    rule("model.layers.{bid}.mlp.gate_up_proj",         "blk.{bid}.ffn_up",      Required, Absent,   &[Ff2, Embd]),
    rule("model.layers.{bid}.mlp.down_proj",            "blk.{bid}.ffn_down",    Required, Absent,   &[Embd, Ff]),
];

const NAMES: NamePolicy = NamePolicy {
    prefix_renames: &[],
    renames: &[],
    dropped: super::decoder::DROPPED,
};

pub const ARCH: Architecture = Architecture {
    hf_classes: &["Phi3ForCausalLM"],
    model_type: "phi3",
    plan,
};

fn plan(input: &ModelInput) -> Result<LlamaExport> {
    let h = &input.hparams;
    let block_count = h.required_count(&["num_hidden_layers", "n_layer"])?;
    let embd = h.required_count(&["hidden_size", "n_embd"])?;
    let ff = h.required_count(&["intermediate_size"])?;
    let n_head = h.required_count(&["num_attention_heads", "n_head"])?;
    let n_head_kv = h
        .count(&["num_key_value_heads", "n_head_kv"])?
        .unwrap_or(n_head);
    let vocab_size = h.required_count(&["vocab_size"])?;
    if !embd.is_multiple_of(n_head) || !n_head.is_multiple_of(n_head_kv) {
        return Err(field_error(
            "num_attention_heads",
            &format!("({n_head}) must divide hidden_size ({embd}) and be a multiple of num_key_value_heads ({n_head_kv})"),
        ));
    }
    // transformers' Phi3Config defaults.
    let ctx = h
        .count(&["n_positions", "max_position_embeddings"])?
        .unwrap_or(4096);
    let rope = h.rope()?;
    let orig_ctx = rope.original_context.unwrap_or(4096);
    let rotary = h.number(&["partial_rotary_factor"])?.unwrap_or(1.0);
    // Python's int(rot_pct * n_embd) // n_head.
    let rope_dims = (rotary * embd as f64) as usize / n_head;
    let dims = Dims {
        n_head_kv,
        ..Dims::dense(vocab_size, embd, ff, n_head, ctx)
    };
    let mapped = names::map_tensors(input.tensors, TENSORS, &NAMES, &dims, block_count)?;
    let long_rope = long_rope(h, ctx, orig_ctx, rope_dims, rope.kind.as_deref())?;
    let mut tensors: Vec<ExportTensor> = Vec::with_capacity(mapped.len() + 2);
    if let Some(lr) = &long_rope {
        for (name, factors) in [
            ("rope_factors_long.weight", &lr.long),
            ("rope_factors_short.weight", &lr.short),
        ] {
            tensors.push(ExportTensor {
                name: name.into(),
                shape: vec![factors.len()],
                ggml_type: GgmlType::F32,
                origin: Origin::Generated(factors.clone()),
            });
        }
    }
    tensors.extend(source_tensors(&mapped, input.tensors, |_| {
        Transform::Identity
    })?);
    let vocab = vocab::sentencepiece_or_gpt2(input.files, h, h.raw())?;

    let k = |s: &str| format!("phi3.{s}");
    let mut md = Metadata::default();
    Header {
        arch: "phi3",
        block_count,
        context: ctx,
        embd,
        ff,
        n_head,
    }
    .write(&mut md, input, &tensors);
    md.set(
        k("rope.scaling.original_context_length"),
        GgufValue::U32(orig_ctx as u32),
    );
    md.set(
        k("attention.head_count_kv"),
        GgufValue::U32(n_head_kv as u32),
    );
    let eps = h.number(&["rms_norm_eps"])?.unwrap_or(1e-5);
    md.set(
        k("attention.layer_norm_rms_epsilon"),
        GgufValue::F32(eps as f32),
    );
    md.set(k("rope.dimension_count"), GgufValue::U32(rope_dims as u32));
    md.set(
        k("rope.freq_base"),
        GgufValue::F32(rope.theta.unwrap_or(10000.0) as f32),
    );
    md.set(
        "general.file_type",
        // Set by `recognize` once the tensors' final types are known.
        GgufValue::U32(0),
    );
    // 0 (no window) when config.json has none, as the converter writes it.
    let window = h.count(&["sliding_window"])?.unwrap_or(0);
    md.set(k("attention.sliding_window"), GgufValue::U32(window as u32));
    if let Some(lr) = &long_rope {
        md.set(
            k("rope.scaling.attn_factor"),
            GgufValue::F32(lr.attn_factor as f32),
        );
    }
    md.set("general.quantization_version", GgufValue::U32(2));
    let warnings = vocab.warnings();
    vocab.write(&mut md);
    Ok(LlamaExport {
        architecture: "phi3",
        metadata: md.into_vec(),
        tensors,
        warnings,
    })
}

/// LongRoPE (Phi-3 128k): per-frequency factors for long and short contexts, and the
/// attention factor llama.cpp scales by.
struct LongRope {
    long: Vec<f32>,
    short: Vec<f32>,
    attn_factor: f64,
}

/// The converter's rules: factors only when `long_factor` is set; `su`/`longrope` and `yarn`
/// attention factors; both lists `rope_dims / 2` long.
fn long_rope(
    h: &super::hparams::Hparams,
    ctx: usize,
    orig_ctx: usize,
    rope_dims: usize,
    kind: Option<&str>,
) -> Result<Option<LongRope>> {
    let params = h.find(&["rope_parameters", "rope_scaling"]).map(|(_, v)| v);
    let list = |key: &str| -> Result<Option<Vec<f32>>> {
        match params.and_then(|p| p.get(key)) {
            None | Some(Json::Null) => Ok(None),
            Some(Json::Array(a)) if a.is_empty() => Ok(None),
            Some(Json::Array(a)) => a
                .iter()
                .map(|x| x.as_f64().filter(|x| x.is_finite()).map(|x| x as f32))
                .collect::<Option<Vec<f32>>>()
                .map(Some)
                .ok_or_else(|| {
                    field_error(
                        "rope_scaling",
                        &format!("'{key}' must be a list of numbers"),
                    )
                }),
            Some(v) => Err(field_error(
                "rope_scaling",
                &format!("'{key}' must be a list of numbers, not {v}"),
            )),
        }
    };
    let Some(long) = list("long_factor")? else {
        return Ok(None);
    };
    let short = list("short_factor")?.unwrap_or_default();
    if long.len() != short.len() || long.len() * 2 != rope_dims {
        return Err(field_error(
            "rope_scaling",
            &format!(
                "has {} long and {} short factors; the rotary dimensions ({rope_dims}) need {} of each",
                long.len(),
                short.len(),
                rope_dims / 2
            ),
        ));
    }
    let scale = ctx as f64 / orig_ctx as f64;
    let attn_factor = match kind.map(str::to_ascii_lowercase).as_deref() {
        Some("su" | "longrope") if scale > 1.0 => {
            (1.0 + scale.ln() / (orig_ctx as f64).ln()).sqrt()
        }
        Some("yarn") if scale > 1.0 => 0.1 * scale.ln() + 1.0,
        Some("su" | "longrope" | "yarn") => 1.0,
        other => {
            return Err(field_error(
                "rope_scaling",
                &format!(
                    "has long_factor with rope type {}, which llama.cpp's phi3 does not take (longrope, su, yarn)",
                    other.unwrap_or("(none)")
                ),
            ))
        }
    };
    Ok(Some(LongRope {
        long,
        short,
        attn_factor,
    }))
}
