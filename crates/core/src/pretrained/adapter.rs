//! PEFT LoRA adapter directories: `adapter_config.json` and `adapter_model.safetensors` (or
//! `adapter_model.bin`), as `PeftModel.save_pretrained` writes them.
//!
//! An adapter is not a model: its tensors are the low-rank pairs `lora_A` (`[r, in]`) and
//! `lora_B` (`[out, r]`) of some of a base model's linear layers, and it changes each of
//! those weights by `scale · B·A` (`scale = lora_alpha / r`, or `lora_alpha / √r` with
//! rsLoRA). [`LoraAdapter::open`] reads the configuration and pairs the tensors; the
//! llama.cpp export (`convert::llamacpp::lora`) and the merge (`convert::merge`) use them.

use super::companion::ModelFiles;
use super::CONFIG_FILE;
use crate::error::{CoreError, Result};
use crate::format::OpenOptions;
use crate::source::TensorSource;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};

pub const ADAPTER_CONFIG_FILE: &str = "adapter_config.json";
/// The weight files PEFT writes, in the order they are looked for.
pub const ADAPTER_WEIGHTS: [&str; 2] = ["adapter_model.safetensors", "adapter_model.bin"];
/// adapter_config.json is a few KB; refused well above that.
const ADAPTER_CONFIG_MAX_BYTES: u64 = 4 << 20;

/// Whether `files` is an adapter directory: `adapter_config.json` and no `config.json`.
pub fn is_adapter_dir(files: &ModelFiles) -> bool {
    files.has(ADAPTER_CONFIG_FILE) && !files.has(CONFIG_FILE)
}

/// The error for an adapter directory given where a model directory is expected.
pub fn not_a_model(dir: &Path) -> CoreError {
    CoreError::invalid_model(
        "is a PEFT LoRA adapter (adapter_config.json, no config.json), not a model: convert \
         it to a llama.cpp LoRA with convert(adapter, 'adapter.gguf', { to: 'gguf', base: \
         baseModelDir }) (CLI: convert ADAPTER adapter.gguf --to gguf --base BASE), or merge \
         it into its base model with convert(baseModelDir, out, { to: 'safetensors' | 'gguf', \
         lora: adapter }) (CLI: --lora ADAPTER)",
    )
    .with_path(dir)
}

/// One adapted weight of the base model.
#[derive(Debug, Clone, PartialEq)]
pub struct LoraPair {
    /// The base model's tensor (`model.layers.0.self_attn.q_proj.weight`).
    pub target: String,
    /// The adapter's `lora_A` (`[r, in]`; an embedding's `lora_embedding_A` is `[r, vocab]`).
    pub a: String,
    /// The adapter's `lora_B` (`[out, r]`; an embedding's `lora_embedding_B` is `[embd, r]`).
    pub b: String,
    /// `r`: A's rows.
    pub rank: usize,
    /// An embedding (`nn.Embedding`): its delta is `(B·A)ᵀ`, `[vocab, embd]`.
    pub embedding: bool,
}

/// An opened adapter directory.
pub struct LoraAdapter {
    pub dir: PathBuf,
    /// `lora_alpha`
    pub alpha: f64,
    /// rsLoRA: the scale is `alpha / √r` instead of `alpha / r`.
    pub rslora: bool,
    /// The adapter's weights (`adapter_model.safetensors` or `.bin`).
    pub source: Box<dyn TensorSource>,
    /// Every adapted weight, in the order the adapter lists its first tensor.
    pub pairs: Vec<LoraPair>,
}

impl LoraAdapter {
    /// Read `dir`'s adapter_config.json, open its weights and pair every `lora_A` with its
    /// `lora_B`. What PEFT can save but a LoRA of a model's weights cannot be written as
    /// (DoRA, per-module alphas, trained biases, full copies of modules) is ERR_INVALID_MODEL
    /// naming the field or tensor.
    pub fn open(dir: &Path) -> Result<LoraAdapter> {
        let files = ModelFiles::new(dir)?;
        if !files.has(ADAPTER_CONFIG_FILE) {
            return Err(CoreError::invalid_model(
                "is not a PEFT LoRA adapter: it has no adapter_config.json",
            )
            .with_path(dir));
        }
        let opened = files.open_required(ADAPTER_CONFIG_FILE, ADAPTER_CONFIG_FILE)?;
        let config_path = opened.path.clone();
        let text = opened.read(ADAPTER_CONFIG_MAX_BYTES, |len| {
            CoreError::invalid_model(format!(
                "is {len} bytes, more than the {ADAPTER_CONFIG_MAX_BYTES} an adapter_config.json may be"
            ))
            .with_path(&config_path)
        })?;
        let config: Json = serde_json::from_slice(&text).map_err(|e| {
            CoreError::invalid_model(format!("is not valid JSON: {e}")).with_path(&config_path)
        })?;
        let (alpha, rslora) = read_config(&config).map_err(|e| e.with_path(&config_path))?;
        let weights = ADAPTER_WEIGHTS
            .iter()
            .find(|f| files.has(f))
            .ok_or_else(|| {
                CoreError::not_found(format!(
                    "no adapter weights ({}) beside adapter_config.json",
                    ADAPTER_WEIGHTS.join(" or ")
                ))
                .with_path(dir)
            })?;
        let path = crate::pretrained::safe_join(dir, weights)?;
        let source = super::open(&path, None, &mut OpenOptions::default())?;
        let pairs = pair_tensors(source.as_ref()).map_err(|e| e.with_path(&path))?;
        Ok(LoraAdapter {
            dir: dir.to_path_buf(),
            alpha,
            rslora,
            source,
            pairs,
        })
    }

    /// PEFT's scaling of a pair of rank `rank`.
    pub fn scale(&self, rank: usize) -> f64 {
        if self.rslora {
            self.alpha / (rank as f64).sqrt()
        } else {
            self.alpha / rank as f64
        }
    }
}

/// `lora_alpha` and `use_rslora`, after refusing what changes the arithmetic in a way a
/// plain LoRA does not carry.
fn read_config(config: &Json) -> Result<(f64, bool)> {
    let field = |name: &str, why: &str| Err(CoreError::invalid_model(format!("'{name}' {why}")));
    match config.get("peft_type").and_then(Json::as_str) {
        Some("LORA") | None => {}
        Some(other) => {
            return field(
                "peft_type",
                &format!("is '{other}': only LoRA adapters ('LORA') are supported"),
            )
        }
    }
    let truthy = |name: &str| {
        config
            .get(name)
            .is_some_and(|v| !v.is_null() && v != &Json::Bool(false))
    };
    let non_empty = |name: &str| match config.get(name) {
        Some(Json::Object(m)) => !m.is_empty(),
        Some(Json::Array(a)) => !a.is_empty(),
        Some(Json::Null) | None => false,
        Some(_) => true,
    };
    for (name, why) in [
        (
            "use_dora",
            "is set: DoRA's magnitude vectors are not a LoRA",
        ),
        (
            "lora_bias",
            "is set: the adapter trains biases, which a LoRA cannot carry",
        ),
        (
            "fan_in_fan_out",
            "is set: only linear layers stored [out, in] are supported",
        ),
        (
            "layer_replication",
            "is set: the adapter changes the model's layers",
        ),
    ] {
        if truthy(name) {
            return field(name, why);
        }
    }
    for (name, why) in [
        (
            "alpha_pattern",
            "sets per-module alphas: one lora_alpha for the whole adapter is supported",
        ),
        (
            "target_parameters",
            "adapts parameters (not modules), which is not supported",
        ),
        (
            "trainable_token_indices",
            "trains token embeddings, which is not supported",
        ),
    ] {
        if non_empty(name) {
            return field(name, why);
        }
    }
    let alpha = match config.get("lora_alpha") {
        Some(v) => v.as_f64().filter(|a| a.is_finite()).ok_or_else(|| {
            CoreError::invalid_model(format!("'lora_alpha' must be a finite number, not {v}"))
        })?,
        None => 8.0, // PEFT's default
    };
    let rslora = truthy("use_rslora");
    Ok((alpha, rslora))
}

/// Pair the adapter's tensors by the base weight they adapt, checking their shapes agree.
fn pair_tensors(source: &dyn TensorSource) -> Result<Vec<LoraPair>> {
    let mut pairs: Vec<LoraPair> = Vec::new();
    let mut halves: std::collections::HashMap<String, (Option<String>, Option<String>, bool)> =
        std::collections::HashMap::new();
    let mut order: Vec<String> = Vec::new();
    for t in source.tensors() {
        let name = t.name.as_str();
        let inner = name.strip_prefix("base_model.model.").unwrap_or(name);
        let found = [
            (".lora_A.weight", true, false),
            (".lora_B.weight", false, false),
            (".lora_embedding_A", true, true),
            (".lora_embedding_B", false, true),
        ]
        .into_iter()
        .find_map(|(suffix, is_a, emb)| {
            inner
                .strip_suffix(suffix)
                .map(|m| (format!("{m}.weight"), is_a, emb))
        });
        let Some((target, is_a, embedding)) = found else {
            if inner.ends_with(".base_layer.weight") {
                // PEFT saves the base's own copy of a module it resized; the base has it.
                continue;
            }
            return Err(CoreError::invalid_model(
                "is not a lora_A or lora_B tensor: the adapter holds a full tensor (PEFT's \
                 modules_to_save, new token embeddings), which a LoRA cannot carry",
            )
            .with_tensor(name));
        };
        if t.shape.len() != 2 {
            return Err(CoreError::invalid_model(format!(
                "has shape {:?}: a LoRA matrix has two dimensions",
                t.shape
            ))
            .with_tensor(name));
        }
        let entry = halves.entry(target.clone()).or_insert_with(|| {
            order.push(target.clone());
            (None, None, embedding)
        });
        let slot = if is_a { &mut entry.0 } else { &mut entry.1 };
        if slot.replace(name.to_string()).is_some() {
            return Err(CoreError::invalid_model(format!(
                "is a second lora_{} of {target}",
                if is_a { "A" } else { "B" }
            ))
            .with_tensor(name));
        }
    }
    for target in order {
        let (a, b, embedding) = halves.remove(&target).unwrap_or_default();
        let (a, b) = match (a, b) {
            (Some(a), Some(b)) => (a, b),
            (Some(one), None) | (None, Some(one)) => {
                return Err(CoreError::invalid_model(format!(
                    "has no partner: {target} needs both lora_A and lora_B"
                ))
                .with_tensor(one))
            }
            (None, None) => continue,
        };
        let shape = |n: &str| {
            source
                .tensor(n)
                .map(|t| t.shape.clone())
                .unwrap_or_default()
        };
        let (sa, sb) = (shape(&a), shape(&b));
        // A is [r, in] and B [out, r] (lora_embedding_A [r, vocab], lora_embedding_B [embd, r]).
        let rank = sa[0];
        if sb[1] != rank || rank == 0 {
            return Err(CoreError::invalid_model(format!(
                "has shape {sb:?}, which does not pair with lora_A {sa:?} (rank {rank})"
            ))
            .with_tensor(b));
        }
        pairs.push(LoraPair {
            target,
            a,
            b,
            rank,
            embedding,
        });
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_lora_cannot_carry_is_refused_naming_the_field() {
        let cases = [
            (r#"{"peft_type":"IA3"}"#, "peft_type"),
            (r#"{"lora_alpha":16,"use_dora":true}"#, "use_dora"),
            (
                r#"{"lora_alpha":16,"alpha_pattern":{"q_proj":4}}"#,
                "alpha_pattern",
            ),
            (r#"{"lora_alpha":"x"}"#, "lora_alpha"),
            (r#"{"lora_alpha":16,"lora_bias":true}"#, "lora_bias"),
        ];
        for (json, field) in cases {
            let e = read_config(&serde_json::from_str(json).unwrap()).unwrap_err();
            assert_eq!(e.code(), "ERR_INVALID_MODEL");
            assert!(e.to_string().contains(field), "{e}");
        }
        let ok = r#"{"peft_type":"LORA","lora_alpha":16,"use_dora":false,"alpha_pattern":{},"use_rslora":true,"target_parameters":null}"#;
        assert_eq!(
            read_config(&serde_json::from_str(ok).unwrap()).unwrap(),
            (16.0, true)
        );
    }
}
