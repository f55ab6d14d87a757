//! What a conversion to GGUF stores each tensor as, and how metadata crosses between GGUF
//! and SafeTensors.
//!
//! Types ([`plan_export`]):
//!
//! * Every tensor has a *base type*, the GGUF type that holds its dtype without loss: F32,
//!   F16, BF16, F64 and I8–I64 are themselves (integers stay integers); F8 types widen to
//!   F32 exactly. Unsigned integers, booleans and complex or sub-byte types have no GGUF type
//!   and are refused (ERR_UNSUPPORTED_DTYPE naming the tensor), never guessed.
//! * Without a quantization option every tensor keeps its base type.
//! * With a llama-quantize preset ([`Preset`]), floating-point tensors get the type
//!   llama-quantize would give them ([`crate::codecs::presets::plan_types`]), starting from
//!   what `convert_hf_to_gguf.py` would have written: 1-D float tensors as F32, the others in
//!   their base type (a GGUF input's tensors as stored, block types decoded to F32). Integer
//!   tensors are never quantized.
//!
//! F16 cannot hold values beyond ±65504: encoding one that would overflow is refused
//! ([`check_f16_range`]) rather than written as infinity.

use crate::codecs::presets::{plan_types, Preset, QuantizationChoice, TensorPlan, TypePlanModel};
use crate::codecs::GgmlType;
use crate::dtype::DType;
use crate::error::{CoreError, Result};
use crate::source::value::GgufValue;
pub use crate::source::value::{metadata_as_strings, value_as_string};

/// The GGUF type that holds `dtype` without loss.
pub fn base_type(dtype: DType) -> Result<GgmlType> {
    Ok(match dtype {
        DType::F32 => GgmlType::F32,
        DType::F16 => GgmlType::F16,
        DType::BF16 => GgmlType::BF16,
        DType::F64 => GgmlType::F64,
        DType::I8 => GgmlType::I8,
        DType::I16 => GgmlType::I16,
        DType::I32 => GgmlType::I32,
        DType::I64 => GgmlType::I64,
        DType::F8_E5M2
        | DType::F8_E4M3
        | DType::F8_E8M0
        | DType::F8_E4M3FNUZ
        | DType::F8_E5M2FNUZ => GgmlType::F32,
        DType::BOOL
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::U64
        | DType::F4
        | DType::F6_E2M3
        | DType::F6_E3M2
        | DType::C64 => {
            return Err(CoreError::unsupported_dtype(format!(
                "GGUF has no type that holds {dtype} (its integer types are signed: I8, I16, \
                 I32, I64); convert the tensor first"
            )))
        }
    })
}

fn is_float(t: GgmlType) -> bool {
    !matches!(
        t,
        GgmlType::I8 | GgmlType::I16 | GgmlType::I32 | GgmlType::I64
    )
}

/// One tensor of a conversion's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportTensor<'a> {
    pub name: &'a str,
    /// Outermost first.
    pub shape: &'a [usize],
    /// The dtype the input serves it as (a GGUF input serves its block types as F32).
    pub dtype: DType,
    /// Whether the input is a GGUF file (whose tensors keep their stored type when a preset
    /// leaves them alone, as llama-quantize does).
    pub gguf_input: bool,
}

/// The GGUF type of every tensor of a conversion (see the module documentation).
pub fn plan_export(
    choice: QuantizationChoice,
    model: &TypePlanModel,
    tensors: &[ExportTensor<'_>],
) -> Result<Vec<GgmlType>> {
    let base: Vec<GgmlType> = tensors
        .iter()
        .map(|t| base_type(t.dtype).map_err(|e| e.with_tensor(t.name)))
        .collect::<Result<_>>()?;
    let preset = match choice {
        QuantizationChoice::Keep => return Ok(base),
        QuantizationChoice::Preset(p) => p,
    };
    // What llama-quantize would find in the file convert_hf_to_gguf.py writes.
    let current: Vec<GgmlType> = tensors
        .iter()
        .zip(&base)
        .map(|(t, &b)| {
            // convert_hf_to_gguf.py writes 1-D tensors and norms as F32.
            let f32_first = t.shape.len() <= 1 || t.name.ends_with("_norm.weight");
            if !t.gguf_input && is_float(b) && f32_first {
                GgmlType::F32
            } else {
                b
            }
        })
        .collect();
    let plans: Vec<TensorPlan> = tensors
        .iter()
        .zip(current)
        .map(|(t, current)| TensorPlan {
            name: t.name,
            shape: t.shape,
            current,
        })
        .collect();
    plan_preset(preset, model, &plans)
}

/// The type of every tensor under `preset`, each starting from its `current` type:
/// llama-quantize's choice for floating-point tensors
/// ([`crate::codecs::presets::plan_types`]); integer tensors keep their type.
pub fn plan_preset(
    preset: Preset,
    model: &TypePlanModel,
    tensors: &[TensorPlan<'_>],
) -> Result<Vec<GgmlType>> {
    let floats: Vec<usize> = (0..tensors.len())
        .filter(|&i| is_float(tensors[i].current))
        .collect();
    let plans: Vec<TensorPlan> = floats.iter().map(|&i| tensors[i].clone()).collect();
    let planned = plan_types(preset, model, &plans)?;
    let mut out: Vec<GgmlType> = tensors.iter().map(|t| t.current).collect();
    for (&i, ty) in floats.iter().zip(planned) {
        out[i] = ty;
    }
    Ok(out)
}

/// `general.file_type` of a file of these tensor types without a preset, as llama.cpp's
/// converter writes it: MOSTLY_BF16 (32) or MOSTLY_F16 (1) when multi-dimensional tensors are
/// of that type, ALL_F32 (0) otherwise.
pub fn file_type_of_kept(types: &[(GgmlType, &[usize])]) -> u32 {
    let matrices = || types.iter().filter(|(_, s)| s.len() >= 2).map(|(t, _)| *t);
    if matrices().any(|t| t == GgmlType::BF16) {
        32
    } else if matrices().any(|t| t == GgmlType::F16) {
        1
    } else {
        0
    }
}

/// The parameters llama-quantize's rules use, from a Hugging Face `config.json`.
pub fn model_from_hf_config(config: &serde_json::Value) -> TypePlanModel {
    let get = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| config.get(*k).and_then(serde_json::Value::as_u64))
    };
    let n_head = get(&["num_attention_heads", "n_head"]).unwrap_or(0) as u32;
    TypePlanModel {
        architecture: config
            .get("model_type")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string(),
        n_layer: get(&["num_hidden_layers", "n_layer"]).unwrap_or(0) as usize,
        n_head,
        n_head_kv: get(&["num_key_value_heads", "n_head_kv"]).map_or(n_head, |v| v as u32),
        n_expert: get(&["num_local_experts", "num_experts", "n_routed_experts"]).unwrap_or(0)
            as u32,
    }
}

/// The parameters llama-quantize's rules use, from a GGUF file's metadata (as its loader
/// reads them: `{arch}.block_count`, `{arch}.attention.head_count[_kv]` (the first layer's
/// when per layer), `{arch}.expert_count`).
pub fn model_from_gguf_metadata(metadata: &[(String, GgufValue)]) -> TypePlanModel {
    let get = |key: &str| metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v);
    let architecture = get(super::keys::ARCHITECTURE)
        .and_then(GgufValue::as_str)
        .unwrap_or("")
        .to_string();
    let number = |suffix: &str| -> Option<u64> {
        let v = get(&format!("{architecture}.{suffix}"))?;
        v.as_u64().or_else(|| match v.to_json() {
            serde_json::Value::Array(a) => a.first().and_then(serde_json::Value::as_u64),
            _ => None,
        })
    };
    let n_head = number("attention.head_count").unwrap_or(0) as u32;
    TypePlanModel {
        n_layer: number("block_count").unwrap_or(0) as usize,
        n_head,
        n_head_kv: number("attention.head_count_kv").map_or(n_head, |v| v as u32),
        n_expert: number("expert_count").unwrap_or(0) as u32,
        architecture,
    }
}

/// Refuse values that F16 cannot hold: a finite value of magnitude ≥ 65520 would become
/// infinity. ERR_INVALID_ARGUMENT naming the element and its value (the caller adds the
/// tensor).
pub fn check_f16_range(values: &[f32], first_index: usize) -> Result<()> {
    match values
        .iter()
        .position(|v| v.is_finite() && v.abs() >= 65520.0)
    {
        None => Ok(()),
        Some(i) => Err(CoreError::invalid_argument(format!(
            "element {} is {}, beyond F16's range (±65504): it would be stored as infinity; \
             keep the tensor's own type (omit quantization, or use BF16 or F32)",
            first_index + i,
            values[i]
        ))),
    }
}

/// `general.file_type`: llama.cpp's number for a file's quantization mix.
pub const FILE_TYPE: &str = "general.file_type";

/// `general.file_type` for a preset.
pub fn file_type_value(preset: Preset) -> GgufValue {
    GgufValue::U32(preset.file_type())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_gguf_cannot_hold_are_refused() {
        for d in [DType::U8, DType::U32, DType::BOOL, DType::C64, DType::F4] {
            assert_eq!(
                base_type(d).unwrap_err().code(),
                "ERR_UNSUPPORTED_DTYPE",
                "{d}"
            );
        }
        assert_eq!(base_type(DType::I64).unwrap(), GgmlType::I64);
        assert_eq!(base_type(DType::F8_E4M3).unwrap(), GgmlType::F32);
    }

    #[test]
    fn integers_are_never_quantized_and_1d_floats_start_as_f32() {
        let shapes: [&[usize]; 4] = [&[1, 512], &[64, 512], &[512], &[64, 512]];
        // (An I64 position_ids tensor became Q4_0 garbage before.)
        let tensors = [
            ExportTensor {
                name: "embeddings.position_ids",
                shape: shapes[0],
                dtype: DType::I64,
                gguf_input: false,
            },
            ExportTensor {
                name: "a.weight",
                shape: shapes[1],
                dtype: DType::I32,
                gguf_input: false,
            },
            ExportTensor {
                name: "norm.weight",
                shape: shapes[2],
                dtype: DType::BF16,
                gguf_input: false,
            },
            ExportTensor {
                name: "b.weight",
                shape: shapes[3],
                dtype: DType::BF16,
                gguf_input: false,
            },
        ];
        let model = TypePlanModel::default();
        let keep = plan_export(QuantizationChoice::Keep, &model, &tensors).unwrap();
        assert_eq!(
            keep,
            [GgmlType::I64, GgmlType::I32, GgmlType::BF16, GgmlType::BF16]
        );
        let q = plan_export(QuantizationChoice::Preset(Preset::Q4_0), &model, &tensors).unwrap();
        assert_eq!(
            q,
            [GgmlType::I64, GgmlType::I32, GgmlType::F32, GgmlType::Q4_0]
        );
        let bad = [ExportTensor {
            name: "mask",
            shape: shapes[2],
            dtype: DType::U8,
            gguf_input: false,
        }];
        let e = plan_export(QuantizationChoice::Keep, &model, &bad).unwrap_err();
        assert_eq!(e.tensor(), Some("mask"));
    }

    #[test]
    fn f16_overflow_is_refused_with_the_value() {
        assert!(check_f16_range(&[65504.0, -65519.0, f32::INFINITY, f32::NAN], 0).is_ok());
        let e = check_f16_range(&[1.0, 99840.0], 10).unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
        assert!(e.to_string().contains("element 11 is 99840"), "{e}");
        assert!(check_f16_range(&[-65520.0], 0).is_err());
    }
}
