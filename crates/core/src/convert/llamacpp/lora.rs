//! A PEFT LoRA adapter as the GGUF LoRA llama.cpp applies to its base model
//! (`llama_adapter_lora_init`), as `convert_lora_to_gguf.py` writes it: `general.type =
//! adapter`, `adapter.type = lora`, `adapter.lora.alpha`, and for each adapted weight of the
//! base its llama.cpp name with `.lora_a` (`[r, in]`) and `.lora_b` (`[out, r]`).
//!
//! The names come from the base architecture's own table (the decoder specs), and so does
//! the layout: llama-style rope permutes the rows of Q and K, which for `B·A` are B's rows
//! (the converter applies the base model's permutation to the pair, which moves B's rows).
//! An embedding's `lora_embedding_A` (`[r, vocab]`) is written transposed, as the converter
//! writes it for llama.cpp's `get_rows` on it.

use super::decoder::DecoderSpec;
use super::hparams::Hparams;
use super::names::gguf_name;
use super::{
    find_architecture, llama, mistral, qwen2, qwen3, qwen_moe, Architecture, ExportTensor,
    LlamaExport, Metadata, Origin, TensorListing, Transform,
};
use crate::dtype::DType;
use crate::error::{CoreError, Result};
use crate::format::gguf::{GgmlType, GgufValue, Preset, QuantizationChoice};
use crate::pretrained::adapter::LoraAdapter;
use serde_json::Value as Json;

/// The architectures whose adapters are exported: the decoders, by their name tables.
const DECODERS: &[(&Architecture, &DecoderSpec)] = &[
    (&llama::ARCH, &llama::SPEC),
    (&mistral::ARCH, &mistral::SPEC),
    (&mistral::MIXTRAL, &mistral::MIXTRAL_SPEC),
    (&qwen2::ARCH, &qwen2::SPEC),
    (&qwen3::ARCH, &qwen3::SPEC),
    (&qwen_moe::QWEN2_MOE, &qwen_moe::QWEN2_MOE_SPEC),
    (&qwen_moe::QWEN3_MOE, &qwen_moe::QWEN3_MOE_SPEC),
];

/// Plan the GGUF LoRA of `adapter` for the base model whose `config.json` is `base_config`
/// and whose tensors are `base_tensors`. Every pair is checked against the base weight it
/// adapts (present, `[out, in]` matching B's rows and A's columns) before anything is
/// written; `quantization` is F32, F16, BF16 or Q8_0 (the converter's `--outtype`s), or
/// keeps the adapter's float types.
pub fn plan(
    adapter: &LoraAdapter,
    base_config: &Json,
    base_tensors: &[TensorListing],
    quantization: QuantizationChoice,
) -> Result<LlamaExport> {
    let h = Hparams::new(base_config)?;
    let arch = find_architecture(&h).map_err(|what| {
        CoreError::invalid_model(format!(
            "the base model is {what}: llama.cpp LoRA export knows {}",
            known().join(", ")
        ))
    })?;
    let Some((_, spec)) = DECODERS
        .iter()
        .find(|(a, _)| a.hf_classes == arch.hf_classes)
    else {
        return Err(CoreError::invalid_model(format!(
            "the base model is a {}: llama.cpp LoRA export knows {}",
            arch.hf_classes.join(" / "),
            known().join(", ")
        )));
    };
    let n_head = h.required_count(&["num_attention_heads", "n_head", "n_heads"])?;
    let n_head_kv = h
        .count(&["num_key_value_heads", "n_kv_heads"])?
        .unwrap_or(n_head);
    let listing = |n: &str| adapter.source.tensor(n);
    let mut tensors = Vec::with_capacity(adapter.pairs.len() * 2);
    for pair in &adapter.pairs {
        let Some(base) = base_tensors.iter().find(|t| t.name == pair.target) else {
            return Err(CoreError::invalid_model(format!(
                "adapts {}, which the base model does not have{}",
                pair.target,
                if pair.target == "lm_head.weight" {
                    " (its output layer is tied to the embeddings)"
                } else {
                    ""
                }
            ))
            .with_tensor(&pair.a));
        };
        let (Some(a), Some(b)) = (listing(&pair.a), listing(&pair.b)) else {
            continue; // paired from the listing: both are there
        };
        // nn.Linear is [out, in] = B [out, r] · A [r, in]; nn.Embedding is [vocab, embd] =
        // (B [embd, r] · A [r, vocab])ᵀ.
        let (out_dim, in_dim) = if pair.embedding {
            (a.shape[1], b.shape[0])
        } else {
            (b.shape[0], a.shape[1])
        };
        if base.shape != [out_dim, in_dim] {
            return Err(CoreError::invalid_model(format!(
                "lora_A {:?} and lora_B {:?} make a delta of shape [{out_dim}, {in_dim}], but \
                 the base model's {} is {:?}: the adapter was trained for another model",
                a.shape, b.shape, pair.target, base.shape
            ))
            .with_tensor(&pair.a));
        }
        let Some((name, rule)) = gguf_name(&pair.target, &spec.rules(), &spec.names) else {
            return Err(CoreError::invalid_model(format!(
                "adapts {}, which llama.cpp's {} has no tensor for",
                pair.target, spec.arch
            ))
            .with_tensor(&pair.a));
        };
        let b_transform = match rule.gguf {
            "blk.{bid}.attn_q" if spec.permute_qk => Transform::RopeInterleave { heads: n_head },
            "blk.{bid}.attn_k" if spec.permute_qk => Transform::RopeInterleave { heads: n_head_kv },
            _ => Transform::Identity,
        };
        let (a_shape, a_transform) = if pair.embedding {
            (vec![a.shape[1], a.shape[0]], Transform::Transpose)
        } else {
            (a.shape.clone(), Transform::Identity)
        };
        let same_dtype = a.dtype == b.dtype;
        for (suffix, source, shape, transform, dtype) in [
            (".lora_a", &pair.a, a_shape, a_transform, a.dtype),
            (".lora_b", &pair.b, b.shape.clone(), b_transform, b.dtype),
        ] {
            let ggml_type = lora_type(quantization, dtype, same_dtype, &shape)?;
            tensors.push(ExportTensor {
                name: format!("{name}{suffix}"),
                shape,
                ggml_type,
                origin: Origin::Source {
                    name: source.clone(),
                    transform,
                },
            });
        }
    }
    if tensors.is_empty() {
        return Err(
            CoreError::invalid_model("the adapter holds no lora_A / lora_B pair")
                .with_path(&adapter.dir),
        );
    }
    let mut md = Metadata::default();
    md.set("general.architecture", spec.arch);
    md.set("general.type", "adapter");
    md.set("adapter.type", "lora");
    md.set("general.name", super::decoder::model_name(&adapter.dir, &h));
    md.set(
        "adapter.lora.alpha",
        GgufValue::F32(gguf_alpha(adapter)? as f32),
    );
    md.set("general.quantization_version", GgufValue::U32(2));
    Ok(LlamaExport {
        architecture: spec.arch,
        metadata: md.into_vec(),
        tensors,
        warnings: Vec::new(),
    })
}

fn known() -> Vec<&'static str> {
    DECODERS
        .iter()
        .flat_map(|(a, _)| a.hf_classes.iter().copied())
        .collect()
}

/// The alpha llama.cpp scales each pair by, as `alpha / r`: `lora_alpha`, or for rsLoRA
/// (`lora_alpha / √r`) `lora_alpha · √r`, which only one rank shared by every pair can carry.
fn gguf_alpha(adapter: &LoraAdapter) -> Result<f64> {
    if !adapter.rslora {
        return Ok(adapter.alpha);
    }
    let rank = adapter.pairs.first().map_or(1, |p| p.rank);
    if let Some(other) = adapter.pairs.iter().find(|p| p.rank != rank) {
        return Err(CoreError::invalid_model(format!(
            "is an rsLoRA adapter whose pairs have different ranks ({rank} and {}): llama.cpp \
             scales every pair by one alpha / r, which cannot carry lora_alpha / √r for both",
            other.rank
        ))
        .with_tensor(&other.a));
    }
    Ok(adapter.alpha * (rank as f64).sqrt())
}

/// The type of a LoRA matrix: the converter's `--outtype` for a preset (Q8_0 falls back to
/// F16 for rows that are not whole blocks, as it does), the adapter's float type otherwise
/// (F32 where A and B differ, as the converter makes them).
fn lora_type(
    quantization: QuantizationChoice,
    dtype: DType,
    same_dtype: bool,
    shape: &[usize],
) -> Result<GgmlType> {
    Ok(match quantization {
        QuantizationChoice::Keep => match dtype {
            DType::F16 if same_dtype => GgmlType::F16,
            DType::BF16 if same_dtype => GgmlType::BF16,
            _ => GgmlType::F32,
        },
        QuantizationChoice::Preset(Preset::F32) => GgmlType::F32,
        QuantizationChoice::Preset(Preset::F16) => GgmlType::F16,
        QuantizationChoice::Preset(Preset::BF16) => GgmlType::BF16,
        QuantizationChoice::Preset(Preset::Q8_0) => {
            if shape
                .last()
                .is_some_and(|n| n.is_multiple_of(GgmlType::Q8_0.block_size()))
            {
                GgmlType::Q8_0
            } else {
                GgmlType::F16
            }
        }
        QuantizationChoice::Preset(other) => {
            return Err(CoreError::invalid_argument(format!(
                "options.quantization for a LoRA adapter is 'F32', 'F16', 'BF16' or 'Q8_0' (the \
                 types llama.cpp's convert_lora_to_gguf.py writes), not '{}'",
                other.name()
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_follow_the_converters_outtypes() {
        let keep = QuantizationChoice::Keep;
        assert_eq!(
            lora_type(keep, DType::BF16, true, &[8, 64]).unwrap(),
            GgmlType::BF16
        );
        assert_eq!(
            lora_type(keep, DType::BF16, false, &[8, 64]).unwrap(),
            GgmlType::F32
        );
        let q8 = QuantizationChoice::Preset(Preset::Q8_0);
        assert_eq!(
            lora_type(q8, DType::F32, true, &[8, 64]).unwrap(),
            GgmlType::Q8_0
        );
        assert_eq!(
            lora_type(q8, DType::F32, true, &[64, 8]).unwrap(),
            GgmlType::F16
        );
        let e = lora_type(
            QuantizationChoice::Preset(Preset::Q4_K_M),
            DType::F32,
            true,
            &[8, 64],
        )
        .unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
        assert!(e.to_string().contains("'Q8_0'"), "{e}");
    }
}
