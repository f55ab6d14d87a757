//! Tensor name tables: how an architecture's Hugging Face tensors map to llama.cpp's
//! (`gguf-py/gguf/tensor_mapping.py` as data), which ones llama.cpp requires, which it
//! accepts, and the shape each must have.

use super::TensorListing;
use crate::error::{CoreError, Result};
use std::collections::HashMap;

/// A dimension of an expected shape, resolved from the config by [`Dims`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    /// `vocab_size`
    Vocab,
    /// `hidden_size`
    Embd,
    /// `intermediate_size`
    Ff,
    /// `num_attention_heads × head_dim`
    Q,
    /// `num_key_value_heads × head_dim`
    Kv,
    /// `head_dim`
    Head,
    /// `max_position_embeddings`
    Ctx,
    /// `type_vocab_size`
    TokenTypes,
}

/// The numbers [`Dim`]s stand for, with the config fields they come from (for messages).
#[derive(Debug, Clone, Default)]
pub struct Dims {
    pub vocab: usize,
    pub embd: usize,
    pub ff: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub ctx: usize,
    pub token_types: usize,
}

impl Dims {
    fn value(&self, d: Dim) -> usize {
        match d {
            Dim::Vocab => self.vocab,
            Dim::Embd => self.embd,
            Dim::Ff => self.ff,
            Dim::Q => self.n_head * self.head_dim,
            Dim::Kv => self.n_head_kv * self.head_dim,
            Dim::Head => self.head_dim,
            Dim::Ctx => self.ctx,
            Dim::TokenTypes => self.token_types,
        }
    }

    fn describe(d: Dim) -> &'static str {
        match d {
            Dim::Vocab => "vocab_size",
            Dim::Embd => "hidden_size",
            Dim::Ff => "intermediate_size",
            Dim::Q => "num_attention_heads × head_dim",
            Dim::Kv => "num_key_value_heads × head_dim",
            Dim::Head => "head_dim",
            Dim::Ctx => "max_position_embeddings",
            Dim::TokenTypes => "type_vocab_size",
        }
    }
}

/// Whether llama.cpp's loader needs a tensor, takes it if present, or has no place for it
/// (a tensor it does not create makes it refuse the whole file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Required,
    Optional,
    Absent,
}

/// One row of a name table. `hf` and `gguf` omit the `.weight` / `.bias` suffix, and
/// `{bid}` stands for the layer number. `shape` is the weight's (outermost first); a bias
/// has the weight's first dimension.
#[derive(Debug, Clone, Copy)]
pub struct TensorRule {
    pub hf: &'static str,
    pub gguf: &'static str,
    pub weight: Need,
    pub bias: Need,
    pub shape: &'static [Dim],
}

/// A table row: `rule(hf, gguf, weight, bias, shape)`.
pub const fn rule(
    hf: &'static str,
    gguf: &'static str,
    weight: Need,
    bias: Need,
    shape: &'static [Dim],
) -> TensorRule {
    TensorRule {
        hf,
        gguf,
        weight,
        bias,
        shape,
    }
}

impl TensorRule {
    /// `Some(layer)` when `base` (a name without suffix) matches `hf`; the layer is `None`
    /// for a tensor outside the layers.
    fn matches(&self, base: &str) -> Option<Option<usize>> {
        match self.hf.split_once("{bid}") {
            None => (base == self.hf).then_some(None),
            Some((prefix, rest)) => {
                let tail = base.strip_prefix(prefix)?;
                let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
                if digits == 0 || (digits > 1 && tail.starts_with('0')) {
                    return None;
                }
                let (number, after) = tail.split_at(digits);
                (after == rest).then(|| number.parse().ok().map(Some))?
            }
        }
    }
}

/// A tensor of the input placed in the output.
#[derive(Debug, Clone)]
pub struct Mapped {
    pub source: String,
    pub gguf: String,
    pub shape: Vec<usize>,
    pub rule: TensorRule,
}

/// What an architecture does with names before looking them up.
pub struct NamePolicy {
    /// Prefixes removed first (`bert.` of BertForMaskedLM).
    pub strip_prefixes: &'static [&'static str],
    /// Old suffixes renamed: (from, to), e.g. `.gamma` → `.weight`.
    pub renames: &'static [(&'static str, &'static str)],
    /// Tensors llama.cpp does not use, dropped: exact names or `*suffix` / `prefix*`.
    pub dropped: &'static [&'static str],
}

fn is_dropped(name: &str, dropped: &[&str]) -> bool {
    dropped.iter().any(|d| {
        if let Some(suffix) = d.strip_prefix('*') {
            name.ends_with(suffix)
        } else if let Some(prefix) = d.strip_suffix('*') {
            name.starts_with(prefix)
        } else {
            name == *d
        }
    })
}

/// Map every input tensor through `rules`, then check the result against what llama.cpp
/// loads: every required tensor of every layer present, nothing it has no place for, every
/// shape as the config implies. Errors are ERR_INVALID_MODEL naming the tensor.
///
/// `block_count` comes from config.json (up to 2^32 - 1): nothing is sized by it. The layers
/// are walked in order and the first one without its required tensors is the error, so the
/// walk never goes past the highest layer the tensors name, plus one.
pub fn map_tensors(
    tensors: &[TensorListing],
    rules: &[TensorRule],
    policy: &NamePolicy,
    dims: &Dims,
    block_count: usize,
) -> Result<Vec<Mapped>> {
    let mut out: Vec<Mapped> = Vec::with_capacity(tensors.len());
    let mut seen: HashMap<String, String> = HashMap::new();
    // Layers the tensors name: 0..layers_held.
    let mut layers_held = 0usize;
    for t in tensors {
        let mut name = t.name.as_str();
        for p in policy.strip_prefixes {
            if let Some(rest) = name.strip_prefix(p) {
                name = rest;
            }
        }
        let mut name = name.to_string();
        for (from, to) in policy.renames {
            if let Some(stem) = name.strip_suffix(from) {
                name = format!("{stem}{to}");
            }
        }
        if is_dropped(&name, policy.dropped) {
            continue;
        }
        let fail = |msg: String| Err(CoreError::invalid_model(msg).with_tensor(&t.name));
        let (base, is_bias) = if let Some(b) = name.strip_suffix(".weight") {
            (b, false)
        } else if let Some(b) = name.strip_suffix(".bias") {
            (b, true)
        } else {
            return fail("llama.cpp has no tensor of this name for this architecture (only .weight and .bias tensors are mapped)".into());
        };
        let Some((rule, layer)) = rules
            .iter()
            .find_map(|r| r.matches(base).map(|layer| (*r, layer)))
        else {
            return fail(
                "llama.cpp has no tensor of this name for this architecture, and would refuse a \
                 file that holds it"
                    .into(),
            );
        };
        if let Some(l) = layer {
            if l >= block_count {
                return fail(format!(
                    "belongs to layer {l}, but config.json has num_hidden_layers = {block_count}"
                ));
            }
            layers_held = layers_held.max(l + 1);
        }
        let need = if is_bias { rule.bias } else { rule.weight };
        if need == Need::Absent {
            return fail(format!(
                "llama.cpp's {} has no {} here and would refuse a file that holds one",
                rule.gguf.replace("{bid}", "N"),
                if is_bias { "bias" } else { "weight" }
            ));
        }
        let expected: Vec<usize> = if is_bias {
            rule.shape.iter().take(1).map(|d| dims.value(*d)).collect()
        } else {
            rule.shape.iter().map(|d| dims.value(*d)).collect()
        };
        if t.shape != expected {
            let names: Vec<&str> = if is_bias {
                rule.shape
                    .iter()
                    .take(1)
                    .map(|d| Dims::describe(*d))
                    .collect()
            } else {
                rule.shape.iter().map(|d| Dims::describe(*d)).collect()
            };
            return fail(format!(
                "shape {:?} disagrees with config.json, which implies {expected:?} ({})",
                t.shape,
                names.join(", ")
            ));
        }
        let gguf = match layer {
            Some(l) => rule.gguf.replace("{bid}", &l.to_string()),
            None => rule.gguf.to_string(),
        } + if is_bias { ".bias" } else { ".weight" };
        if let Some(first) = seen.insert(gguf.clone(), t.name.clone()) {
            return fail(format!("maps to {gguf}, as '{first}' already does"));
        }
        out.push(Mapped {
            source: t.name.clone(),
            gguf,
            shape: t.shape.clone(),
            rule,
        });
    }
    // Required tensors, layer by layer.
    for rule in rules {
        for is_bias in [false, true] {
            let need = if is_bias { rule.bias } else { rule.weight };
            if need != Need::Required {
                continue;
            }
            let suffix = if is_bias { ".bias" } else { ".weight" };
            let per_layer = rule.hf.contains("{bid}");
            for i in 0..if per_layer { block_count } else { 1 } {
                let layer = per_layer.then_some(i);
                let gguf = match layer {
                    Some(l) => rule.gguf.replace("{bid}", &l.to_string()),
                    None => rule.gguf.to_string(),
                } + suffix;
                if !seen.contains_key(&gguf) {
                    let hf = match layer {
                        Some(l) => rule.hf.replace("{bid}", &l.to_string()),
                        None => rule.hf.to_string(),
                    } + suffix;
                    let layers = match layer {
                        Some(l) if l >= layers_held => format!(
                            "; config.json has num_hidden_layers = {block_count}, the tensors \
                             hold {layers_held} layer{}",
                            if layers_held == 1 { "" } else { "s" }
                        ),
                        _ => String::new(),
                    };
                    return Err(CoreError::invalid_model(format!(
                        "tensor '{hf}' is missing (llama.cpp needs {gguf}){layers}"
                    ))
                    .with_tensor(hf));
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    const RULES: &[TensorRule] = &[
        TensorRule {
            hf: "emb",
            gguf: "token_embd",
            weight: Need::Required,
            bias: Need::Absent,
            shape: &[Dim::Vocab, Dim::Embd],
        },
        TensorRule {
            hf: "layers.{bid}.q",
            gguf: "blk.{bid}.attn_q",
            weight: Need::Required,
            bias: Need::Optional,
            shape: &[Dim::Q, Dim::Embd],
        },
    ];
    const POLICY: NamePolicy = NamePolicy {
        strip_prefixes: &["outer."],
        renames: &[(".gamma", ".weight")],
        dropped: &["*.inv_freq", "pooler*"],
    };

    fn dims() -> Dims {
        Dims {
            vocab: 10,
            embd: 4,
            n_head: 2,
            n_head_kv: 2,
            head_dim: 2,
            ..Dims::default()
        }
    }

    fn t(name: &str, shape: &[usize]) -> TensorListing {
        TensorListing {
            name: name.into(),
            dtype: DType::F32,
            shape: shape.to_vec(),
        }
    }

    #[test]
    fn names_map_with_layers_prefixes_renames_and_drops() {
        let out = map_tensors(
            &[
                t("outer.emb.weight", &[10, 4]),
                t("layers.0.q.gamma", &[4, 4]),
                t("layers.1.q.weight", &[4, 4]),
                t("layers.1.q.bias", &[4]),
                t("layers.0.rot.inv_freq", &[1]),
                t("pooler.dense.weight", &[4, 4]),
            ],
            RULES,
            &POLICY,
            &dims(),
            2,
        )
        .unwrap();
        let names: Vec<&str> = out.iter().map(|m| m.gguf.as_str()).collect();
        assert_eq!(
            names,
            [
                "token_embd.weight",
                "blk.0.attn_q.weight",
                "blk.1.attn_q.weight",
                "blk.1.attn_q.bias"
            ]
        );
        assert_eq!(out[3].source, "layers.1.q.bias");
    }

    #[test]
    fn every_problem_names_its_tensor() {
        let ok = [t("emb.weight", &[10, 4]), t("layers.0.q.weight", &[4, 4])];
        let run = |extra: Vec<TensorListing>, drop: Option<&str>, layers: usize| {
            let mut all: Vec<TensorListing> = ok
                .iter()
                .filter(|x| Some(x.name.as_str()) != drop)
                .cloned()
                .collect();
            all.extend(extra);
            map_tensors(&all, RULES, &POLICY, &dims(), layers).unwrap_err()
        };
        let e = run(vec![], Some("layers.0.q.weight"), 1);
        assert_eq!(e.tensor(), Some("layers.0.q.weight"));
        assert!(e.to_string().contains("missing"), "{e}");
        let e = run(vec![], None, 2);
        assert_eq!(e.tensor(), Some("layers.1.q.weight"));
        let e = run(vec![t("layers.2.q.weight", &[4, 4])], None, 1);
        assert!(e.to_string().contains("layer 2"), "{e}");
        let e = run(vec![t("emb.bias", &[10])], None, 1);
        assert!(e.to_string().contains("no bias"), "{e}");
        let e = run(vec![t("head.weight", &[2, 4])], None, 1);
        assert_eq!(e.tensor(), Some("head.weight"));
        let e = run(vec![t("layers.0.q.running_mean", &[4])], None, 1);
        assert_eq!(e.code(), "ERR_INVALID_MODEL");
        let mut bad = dims();
        bad.vocab = 11;
        let e = map_tensors(&ok, RULES, &POLICY, &bad, 1).unwrap_err();
        assert_eq!(e.tensor(), Some("emb.weight"));
        assert!(e.to_string().contains("vocab_size"), "{e}");
        // Leading zeros are not a layer number.
        let e = run(vec![t("layers.00.q.weight", &[4, 4])], None, 1);
        assert!(e.to_string().contains("no tensor of this name"), "{e}");
    }

    /// config.json's count is a number up to 2^32 - 1: refused at the first layer the
    /// tensors do not hold, with nothing allocated or walked per configured layer (64 GB
    /// and an abort for 4294967295 otherwise).
    #[test]
    fn an_absurd_layer_count_is_refused_at_the_first_missing_layer() {
        let ok = [t("emb.weight", &[10, 4]), t("layers.0.q.weight", &[4, 4])];
        for layers in [2, 1_000_000_000, u32::MAX as usize] {
            let e = map_tensors(&ok, RULES, &POLICY, &dims(), layers).unwrap_err();
            assert_eq!(e.code(), "ERR_INVALID_MODEL");
            assert_eq!(e.tensor(), Some("layers.1.q.weight"));
            assert!(
                e.to_string().contains(&format!(
                    "config.json has num_hidden_layers = {layers}, the tensors hold 1 layer"
                )),
                "{e}"
            );
        }
    }
}
