//! The shared plan of the decoder-only transformers (`llama`, `qwen2`, `qwen3`): what
//! differs between them is a [`DecoderSpec`] — a name table and a few switches.

use super::hparams::{field_error, Hparams};
use super::names::{self, rule, Dim::*, Dims, NamePolicy, Need::*, TensorRule};
use super::vocab::{self, Vocab};
use super::{
    output_type, size_label, source_dtype, ExportTensor, LlamaExport, Metadata, ModelInput, Origin,
    Transform,
};
use crate::error::{CoreError, Result};
use crate::format::gguf::{GgmlType, GgufValue};
use crate::pretrained::companion::ModelFiles;
use crate::tensor::checked_numel;
use std::path::Path;

/// What makes one decoder architecture different from another.
pub struct DecoderSpec {
    /// `general.architecture`
    pub arch: &'static str,
    /// The name table, as groups of rows (architectures share groups).
    pub tensors: &'static [&'static [TensorRule]],
    pub names: NamePolicy,
    /// Llama-style rope rotates adjacent pairs: Q and K rows are permuted (see
    /// [`Transform::RopeInterleave`]). NeoX-style (Qwen) keeps Hugging Face's layout.
    pub permute_qk: bool,
    /// `{arch}.vocab_size` and `{arch}.rope.dimension_count` (the llama class writes them).
    pub vocab_and_rope_dims: bool,
    /// `{arch}.pooling_type` from a sentence-transformers `modules.json`, when present.
    pub pooling_from_modules: bool,
    /// transformers' `head_dim` when config.json has none: `Some(d)` for a fixed default
    /// (Qwen3: 128), `None` for hidden_size / num_attention_heads.
    pub default_head_dim: Option<usize>,
    /// Whether transformers' config class always carries `head_dim` (llama, qwen3), which
    /// makes the converter write `attention.key_length` / `value_length`; otherwise they are
    /// written only when config.json has `head_dim`.
    pub config_has_head_dim: bool,
    /// Whether config.json's `head_dim` counts (Granite's converter drops it: hidden_size /
    /// num_attention_heads, and no `key_length`).
    pub reads_head_dim: bool,
    /// transformers' defaults for fields config.json may leave out.
    pub default_context: usize,
    pub default_rms_eps: f64,
    /// LayerNorm (with biases) instead of RMSNorm: `attention.layer_norm_epsilon` from
    /// `norm_epsilon` / `layer_norm_eps` (`default_rms_eps` its default) instead of the RMS one.
    pub layer_norm: bool,
    pub default_rope_theta: f64,
    /// `{arch}.expert_feed_forward_length` and `expert_shared_feed_forward_length` from
    /// `moe_intermediate_size` and `shared_expert_intermediate_size` (the Qwen mixtures).
    pub expert_ff_keys: bool,
    /// F32 key/values copied from config.json when present and non-zero: (config field,
    /// key under `{arch}.`), e.g. Granite's multipliers.
    pub scales: &'static [(&'static str, &'static str)],
}

impl DecoderSpec {
    /// The name table's rows, groups in order.
    pub fn rules(&self) -> Vec<TensorRule> {
        self.tensors.concat()
    }
}

/// Rows most decoders share (`tensor_mapping.py`): the token embeddings, the final norm and
/// the output projection (tied to the embeddings when absent).
#[rustfmt::skip]
pub const EMBEDDINGS: &[TensorRule] = &[
    rule("model.embed_tokens", "token_embd",  Required, Absent, &[Vocab, Embd]),
    rule("model.norm",         "output_norm", Required, Absent, &[Embd]),
    rule("lm_head",            "output",      Optional, Absent, &[Vocab, Embd]),
];

/// The norm before the feed-forward.
#[rustfmt::skip]
pub const FFN_NORM: &[TensorRule] = &[
    rule("model.layers.{bid}.post_attention_layernorm", "blk.{bid}.ffn_norm", Required, Absent, &[Embd]),
];

/// A gated (SwiGLU) feed-forward without biases.
#[rustfmt::skip]
pub const GATED_FFN: &[TensorRule] = &[
    rule("model.layers.{bid}.mlp.gate_proj", "blk.{bid}.ffn_gate", Required, Absent, &[Ff, Embd]),
    rule("model.layers.{bid}.mlp.up_proj",   "blk.{bid}.ffn_up",   Required, Absent, &[Ff, Embd]),
    rule("model.layers.{bid}.mlp.down_proj", "blk.{bid}.ffn_down", Required, Absent, &[Embd, Ff]),
];

/// Tensors every decoder has that llama.cpp does not load, dropped as its converter drops them.
pub const DROPPED: &[&str] = &[
    "*.rotary_emb.inv_freq",
    "*.attention.masked_bias",
    "*.attention.bias",
];

/// Plan the export of a decoder described by `spec`.
pub fn plan(spec: &DecoderSpec, input: &ModelInput) -> Result<LlamaExport> {
    let h = &input.hparams;
    let block_count =
        h.required_count(&["num_hidden_layers", "n_layers", "n_layer", "num_layers"])?;
    let embd = h.required_count(&["hidden_size", "n_embd", "dim"])?;
    let ff = h.required_count(&["intermediate_size", "n_inner", "hidden_dim"])?;
    let n_head = h.required_count(&["num_attention_heads", "n_head", "n_heads"])?;
    let n_head_kv = h
        .count(&["num_key_value_heads", "n_kv_heads"])?
        .unwrap_or(n_head);
    let vocab_size = h.required_count(&["vocab_size"])?;
    let config_head_dim = if spec.reads_head_dim {
        h.count(&["head_dim"])?
    } else {
        None
    };
    let head_dim = match (config_head_dim, spec.default_head_dim) {
        (Some(d), _) | (None, Some(d)) => d,
        (None, None) if embd.is_multiple_of(n_head) => embd / n_head,
        (None, None) => {
            return Err(field_error(
                "num_attention_heads",
                &format!(
                    "({n_head}) does not divide hidden_size ({embd}) and there is no head_dim"
                ),
            ))
        }
    };
    let n_expert = h.count(&["num_local_experts", "num_experts", "n_routed_experts"])?;
    let n_expert_used = h.count(&[
        "num_experts_per_tok",
        "num_experts_per_token",
        "top_k_experts",
    ])?;
    if let (Some(n), Some(used)) = (n_expert, n_expert_used) {
        if used > n {
            return Err(field_error(
                "num_experts_per_tok",
                &format!("({used}) exceeds the number of experts ({n})"),
            ));
        }
    }
    if !n_head.is_multiple_of(n_head_kv) {
        return Err(field_error(
            "num_key_value_heads",
            &format!("({n_head_kv}) does not divide num_attention_heads ({n_head})"),
        ));
    }
    if spec.permute_qk && !head_dim.is_multiple_of(2) {
        return Err(field_error(
            "head_dim",
            &format!("({head_dim}) must be even for rope"),
        ));
    }
    let ctx = h
        .count(&[
            "max_position_embeddings",
            "n_ctx",
            "n_positions",
            "max_length",
            "max_sequence_length",
            "model_max_length",
        ])?
        .unwrap_or(spec.default_context);
    let dims = Dims {
        vocab: vocab_size,
        embd,
        ff,
        n_head,
        n_head_kv,
        head_dim,
        ctx,
        token_types: 0,
        n_expert: n_expert.unwrap_or(0),
        expert_ff: h.count(&["moe_intermediate_size"])?.unwrap_or(ff),
        shared_ff: h.count(&["shared_expert_intermediate_size"])?.unwrap_or(0),
    };
    let mapped = names::map_tensors(
        input.tensors,
        &spec.rules(),
        &spec.names,
        &dims,
        block_count,
    )?;
    let rope = h.rope()?;
    let mut warnings = Vec::new();

    // Tensors: a generated rope_freqs first (as the converter writes it), then the model's.
    let mut tensors = Vec::with_capacity(mapped.len() + 1);
    if rope
        .kind
        .as_deref()
        .is_some_and(|k| k.eq_ignore_ascii_case("llama3"))
    {
        let factors = llama3_rope_factors(&rope, head_dim)?;
        tensors.push(ExportTensor {
            name: "rope_freqs.weight".into(),
            shape: vec![factors.len()],
            ggml_type: GgmlType::F32,
            origin: Origin::Generated(factors),
        });
    }
    for m in &mapped {
        let transform = match m.rule.gguf {
            "blk.{bid}.attn_q" if spec.permute_qk => Transform::RopeInterleave { heads: n_head },
            "blk.{bid}.attn_k" if spec.permute_qk => Transform::RopeInterleave { heads: n_head_kv },
            _ => Transform::Identity,
        };
        tensors.push(ExportTensor {
            ggml_type: output_type(&m.gguf, &m.shape, source_dtype(input.tensors, &m.source))?,
            name: m.gguf.clone(),
            shape: m.shape.clone(),
            origin: if m.experts.is_empty() {
                Origin::Source {
                    name: m.source.clone(),
                    transform,
                }
            } else {
                Origin::Stack(m.experts.clone())
            },
        });
    }

    let vocab: Vocab = vocab::sentencepiece_or_gpt2(input.files, h, h.raw())?;
    warnings.extend(vocab.warnings());

    // Key/values, in the converter's order.
    let arch = spec.arch;
    let k = |s: &str| format!("{arch}.{s}");
    let mut md = Metadata::default();
    md.set("general.architecture", arch);
    md.set("general.type", "model");
    md.set("general.name", model_name(input.files.dir(), h));
    md.set("general.size_label", size_label_of(&tensors));
    md.set(k("block_count"), GgufValue::U32(block_count as u32));
    md.set(k("context_length"), GgufValue::U32(ctx as u32));
    md.set(k("embedding_length"), GgufValue::U32(embd as u32));
    md.set(k("feed_forward_length"), GgufValue::U32(ff as u32));
    md.set(k("attention.head_count"), GgufValue::U32(n_head as u32));
    md.set(
        k("attention.head_count_kv"),
        GgufValue::U32(n_head_kv as u32),
    );
    if h.bool("is_causal")? == Some(false) {
        md.set(k("attention.causal"), GgufValue::Bool(false));
    }
    match rope.kind.as_deref() {
        None => {}
        Some("linear") if rope.factor.is_some() => {
            md.set(k("rope.scaling.type"), "linear");
            md.set(k("rope.scaling.factor"), GgufValue::F32(rope.factor.unwrap_or(1.0) as f32));
        }
        Some("yarn") if rope.factor.is_some() => {
            let orig = rope.original_context.ok_or_else(|| {
                field_error("rope_scaling", "is yarn without 'original_max_position_embeddings'")
            })?;
            md.set(k("rope.scaling.type"), "yarn");
            md.set(k("rope.scaling.factor"), GgufValue::F32(rope.factor.unwrap_or(1.0) as f32));
            md.set(k("rope.scaling.original_context_length"), GgufValue::U32(orig as u32));
            for (key, v) in [
                ("rope.scaling.yarn_ext_factor", rope.yarn_ext_factor),
                ("rope.scaling.yarn_attn_factor", rope.yarn_attn_factor),
                ("rope.scaling.yarn_beta_fast", rope.yarn_beta_fast),
                ("rope.scaling.yarn_beta_slow", rope.yarn_beta_slow),
            ] {
                if let Some(v) = v {
                    md.set(k(key), GgufValue::F32(v as f32));
                }
            }
        }
        Some(kind) if kind.eq_ignore_ascii_case("llama3") => {} // the rope_freqs tensor
        Some("default") => {}
        Some(other) => warnings.push(format!(
            "config.json: rope type '{other}' is not one llama.cpp's converter writes (linear, yarn, llama3): ignored, as it ignores it"
        )),
    }
    md.set(
        k("rope.freq_base"),
        GgufValue::F32(rope.theta.unwrap_or(spec.default_rope_theta) as f32),
    );
    let (eps_keys, eps_key): (&[&str], _) = if spec.layer_norm {
        (
            &["layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"],
            "attention.layer_norm_epsilon",
        )
    } else {
        (
            &["rms_norm_eps", "norm_eps"],
            "attention.layer_norm_rms_epsilon",
        )
    };
    let eps = h.number(eps_keys)?.unwrap_or(spec.default_rms_eps);
    md.set(k(eps_key), GgufValue::F32(eps as f32));
    if let Some(n) = n_expert {
        md.set(k("expert_count"), GgufValue::U32(n as u32));
    }
    if let Some(n) = n_expert_used {
        md.set(k("expert_used_count"), GgufValue::U32(n as u32));
    }
    if config_head_dim.is_some() || spec.config_has_head_dim {
        md.set(k("attention.key_length"), GgufValue::U32(head_dim as u32));
        md.set(k("attention.value_length"), GgufValue::U32(head_dim as u32));
    }
    md.set(
        "general.file_type",
        // Set by `recognize` once the tensors' final types are known.
        GgufValue::U32(0),
    );
    if spec.vocab_and_rope_dims {
        md.set(k("vocab_size"), GgufValue::U32(vocab_size as u32));
        md.set(k("rope.dimension_count"), GgufValue::U32(head_dim as u32));
    }
    if spec.pooling_from_modules {
        if let Some(p) = pooling_type(input.files)? {
            md.set(k("pooling_type"), GgufValue::U32(p));
        }
    }
    for (field, key) in spec.scales {
        if let Some(x) = h.number(&[field])?.filter(|x| *x != 0.0) {
            md.set(k(key), GgufValue::F32(x as f32));
        }
    }
    if spec.expert_ff_keys {
        if let Some(n) = h.count(&["moe_intermediate_size"])? {
            md.set(k("expert_feed_forward_length"), GgufValue::U32(n as u32));
        }
        if let Some(n) = h.count(&["shared_expert_intermediate_size"])? {
            md.set(
                k("expert_shared_feed_forward_length"),
                GgufValue::U32(n as u32),
            );
        }
    }
    md.set("general.quantization_version", GgufValue::U32(2));
    vocab.write(&mut md);

    Ok(LlamaExport {
        architecture: spec.arch,
        metadata: md.into_vec(),
        tensors,
        warnings,
    })
}

/// `general.name`: the directory's name, as the converter falls back to.
pub fn model_name(dir: &Path, _h: &Hparams) -> String {
    dir.canonicalize()
        .ok()
        .as_deref()
        .unwrap_or(dir)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".to_string())
}

/// `general.size_label` as gguf-py's writer derives it: the parameter count, or for a
/// mixture `{experts}x{one expert's share}` (the shared parameters plus one expert's).
pub fn size_label_of(tensors: &[ExportTensor]) -> String {
    let (mut shared, mut per_expert, mut expert_sum, mut expert_tensors) = (0u64, 0u64, 0u64, 0u64);
    for t in tensors {
        let size = checked_numel(&t.shape).unwrap_or(0) as u64;
        match t.shape.len().checked_sub(3).map(|i| t.shape[i] as u64) {
            Some(experts) if t.name.contains("_exps.") && experts > 0 => {
                per_expert += size / experts;
                expert_sum += experts;
                expert_tensors += 1;
            }
            _ => shared += size,
        }
    }
    match expert_sum.checked_div(expert_tensors) {
        Some(experts) if experts > 0 => format!("{experts}x{}", size_label(shared + per_expert)),
        _ => size_label(shared),
    }
}

/// llama.cpp's pooling type from a sentence-transformers directory: `modules.json` names a
/// `…Pooling` module whose `config.json` says which (mean 1, cls 2, last token 3). Both are
/// files the export can do without ([`vocab::Need::Extra`]).
pub fn pooling_type(files: &ModelFiles) -> Result<Option<u32>> {
    let Some(modules) = vocab::read_json(files, "modules.json", vocab::Need::Extra)? else {
        return Ok(None);
    };
    let Some(list) = modules.as_array() else {
        return Err(CoreError::invalid_model("must hold a list of modules")
            .with_path(files.path("modules.json")));
    };
    let pooling_dir = list.iter().find_map(|m| {
        m.get("type")
            .and_then(|t| t.as_str())
            .filter(|t| t.ends_with("Pooling"))
            .and(m.get("path").and_then(|p| p.as_str()))
    });
    let Some(sub) = pooling_dir else {
        return Ok(None);
    };
    crate::pretrained::safe_join(files.dir(), sub)?;
    let name = format!("{sub}/config.json");
    if !files.has(&name) {
        return Err(CoreError::not_found(format!(
            "no such file, and modules.json names '{sub}' as the pooling module"
        ))
        .with_path(files.path(&name)));
    }
    let Some(cfg) = vocab::read_json(files, &name, vocab::Need::Extra)? else {
        return Ok(None);
    };
    let flag = |k: &str| cfg.get(k).and_then(|v| v.as_bool()).unwrap_or(false);
    let kind = if flag("pooling_mode_mean_tokens") {
        1
    } else if flag("pooling_mode_cls_token") {
        2
    } else if flag("pooling_mode_lasttoken") {
        3
    } else {
        match cfg.get("pooling_mode").and_then(|v| v.as_str()) {
            Some("mean") => 1,
            Some("cls") => 2,
            Some("lasttoken") => 3,
            _ => {
                return Err(CoreError::invalid_model(
                    "names a pooling llama.cpp does not have (it has mean, cls and last token)",
                )
                .with_path(files.path(&name)))
            }
        }
    };
    Ok(Some(kind))
}

/// Llama 3's rope frequency factors (`rope_freqs.weight`): per frequency of the head, 1 above
/// the high-frequency wavelength, `factor` below the low one, a smooth blend between. The
/// converter computes them with torch in f32, one operation at a time; so do we, step for
/// step (torch's `a / t` for a scalar `a` is `t.reciprocal() * a`), to write the same bits.
pub fn llama3_rope_factors(rope: &super::hparams::Rope, head_dim: usize) -> Result<Vec<f32>> {
    let base = rope.theta.unwrap_or(10000.0);
    let factor = rope.factor.unwrap_or(8.0);
    let low = rope.low_freq_factor.unwrap_or(1.0);
    let high = rope.high_freq_factor.unwrap_or(4.0);
    let old_ctx = rope.original_context.unwrap_or(8192) as f64;
    if high == low {
        return Err(field_error(
            "rope_scaling",
            "has equal low_freq_factor and high_freq_factor, which leaves llama3 scaling undefined",
        ));
    }
    // Python computes these in f64; torch compares and divides with them as f32.
    let low_wavelen = (old_ctx / low) as f32;
    let high_wavelen = (old_ctx / high) as f32;
    let two_pi = (2.0 * std::f64::consts::PI) as f32;
    let dim = head_dim as f32;
    Ok((0..head_dim)
        .step_by(2)
        .map(|i| {
            let exponent = i as f32 / dim;
            let freq = (base as f32).powf(exponent).recip();
            let wavelen = freq.recip() * two_pi;
            if wavelen < high_wavelen {
                1.0
            } else if wavelen > low_wavelen {
                factor as f32
            } else {
                let smooth = (wavelen.recip() * old_ctx as f32 - low as f32) / (high - low) as f32;
                ((1.0 - smooth) / factor as f32 + smooth).recip()
            }
        })
        .collect())
}
