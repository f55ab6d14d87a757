//! Tensor name tables: how an architecture's Hugging Face tensors map to llama.cpp's
//! (`gguf-py/gguf/tensor_mapping.py` as data), which ones llama.cpp requires, which it
//! accepts, and the shape each must have.

use super::TensorListing;
use crate::error::{CoreError, Result};
use std::collections::{BTreeMap, HashMap};

/// The layer of a llama.cpp name (`blk.N.…`).
fn layer_of(gguf: &str) -> Option<usize> {
    gguf.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}

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
    /// The fused Q, K and V rows: `(num_attention_heads + 2 × num_key_value_heads) × head_dim`
    Qkv,
    /// The fused gate and up rows: `2 × intermediate_size`
    Ff2,
    /// `max_position_embeddings`
    Ctx,
    /// `type_vocab_size`
    TokenTypes,
    /// `num_local_experts` / `num_experts`
    Experts,
    /// `moe_intermediate_size` (an expert's feed-forward width)
    ExpertFf,
    /// `shared_expert_intermediate_size`
    SharedFf,
    /// 1
    One,
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
    /// Experts of a mixture-of-experts layer (0 for a dense model).
    pub n_expert: usize,
    pub expert_ff: usize,
    pub shared_ff: usize,
}

impl Dims {
    /// A dense model's: every head its own key/value head, heads of `embd / n_head`.
    pub fn dense(vocab: usize, embd: usize, ff: usize, n_head: usize, ctx: usize) -> Dims {
        Dims {
            vocab,
            embd,
            ff,
            n_head,
            n_head_kv: n_head,
            head_dim: embd / n_head,
            ctx,
            ..Dims::default()
        }
    }

    fn value(&self, d: Dim) -> usize {
        match d {
            Dim::Vocab => self.vocab,
            Dim::Embd => self.embd,
            Dim::Ff => self.ff,
            Dim::Q => self.n_head * self.head_dim,
            Dim::Kv => self.n_head_kv * self.head_dim,
            Dim::Head => self.head_dim,
            Dim::Qkv => (self.n_head + 2 * self.n_head_kv) * self.head_dim,
            Dim::Ff2 => 2 * self.ff,
            Dim::Ctx => self.ctx,
            Dim::TokenTypes => self.token_types,
            Dim::Experts => self.n_expert,
            Dim::ExpertFf => self.expert_ff,
            Dim::SharedFf => self.shared_ff,
            Dim::One => 1,
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
            Dim::Qkv => "(num_attention_heads + 2 × num_key_value_heads) × head_dim",
            Dim::Ff2 => "2 × intermediate_size",
            Dim::Ctx => "max_position_embeddings",
            Dim::TokenTypes => "type_vocab_size",
            Dim::Experts => "num_experts",
            Dim::ExpertFf => "moe_intermediate_size",
            Dim::SharedFf => "shared_expert_intermediate_size",
            Dim::One => "1",
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
/// has the weight's first dimension. An `hf` name with `{xid}` (after `{bid}`) is one expert
/// of a mixture: llama.cpp stores a layer's experts stacked in one tensor, so the rule's
/// output is `[num_experts, ..shape]`, expert `xid` at index `xid`.
#[derive(Debug, Clone, Copy)]
pub struct TensorRule {
    pub hf: &'static str,
    pub gguf: &'static str,
    pub weight: Need,
    pub bias: Need,
    pub shape: &'static [Dim],
    /// The Hugging Face weight is stored `[in, out]` (GPT-2's `Conv1D`): its shape is
    /// `shape` reversed, and the export transposes it ([`super::Transform::Transpose`]).
    pub transposed: bool,
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
        transposed: false,
    }
}

/// A table row whose weight is stored transposed (`Conv1D`, see [`TensorRule::transposed`]).
pub const fn conv1d(
    hf: &'static str,
    gguf: &'static str,
    weight: Need,
    bias: Need,
    shape: &'static [Dim],
) -> TensorRule {
    TensorRule {
        transposed: true,
        ..rule(hf, gguf, weight, bias, shape)
    }
}

/// The numbers in a matched name: the layer (`{bid}`) and the expert (`{xid}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Placed {
    layer: Option<usize>,
    expert: Option<usize>,
}

impl TensorRule {
    /// Where `base` (a name without suffix) sits when it matches `hf`: its layer (`None`
    /// outside the layers) and expert (`None` outside a mixture).
    fn matches(&self, base: &str) -> Option<Placed> {
        let mut placed = Placed {
            layer: None,
            expert: None,
        };
        let mut pattern = self.hf;
        let mut name = base;
        loop {
            let next = ["{bid}", "{xid}"]
                .iter()
                .filter_map(|p| pattern.find(p).map(|at| (at, *p)))
                .min();
            let Some((at, placeholder)) = next else {
                return (name == pattern).then_some(placed);
            };
            name = name.strip_prefix(&pattern[..at])?;
            let digits = name.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 || (digits > 1 && name.starts_with('0')) {
                return None;
            }
            let number = name[..digits].parse().ok()?;
            if placeholder == "{bid}" {
                placed.layer = Some(number);
            } else {
                placed.expert = Some(number);
            }
            name = &name[digits..];
            pattern = &pattern[at + placeholder.len()..];
        }
    }
}

/// A tensor of the input placed in the output.
#[derive(Debug, Clone)]
pub struct Mapped {
    /// The input tensor (the first expert's, for stacked experts).
    pub source: String,
    /// Stacked experts: every expert's input tensor, in expert order (empty otherwise).
    pub experts: Vec<String>,
    pub gguf: String,
    /// The output's shape (`[num_experts, ..]` for stacked experts).
    pub shape: Vec<usize>,
    pub rule: TensorRule,
    /// The source is the output transposed (a `Conv1D` weight).
    pub transposed: bool,
}

/// What an architecture does with names before looking them up.
pub struct NamePolicy {
    /// Prefixes replaced first, the first that matches: (from, to), e.g. a multimodal
    /// checkpoint's `model.language_model.` → `model.` (its text model's names), or removed
    /// (`to` empty: `bert.` of BertForMaskedLM).
    pub prefix_renames: &'static [(&'static str, &'static str)],
    /// Old suffixes renamed: (from, to), e.g. `.gamma` → `.weight`.
    pub renames: &'static [(&'static str, &'static str)],
    /// Tensors llama.cpp does not use, dropped: exact names or `*suffix` / `prefix*`.
    pub dropped: &'static [&'static str],
}

impl NamePolicy {
    /// `name` with the policy's prefixes and suffixes renamed.
    fn normalize(&self, name: &str) -> String {
        let renamed = self
            .prefix_renames
            .iter()
            .find_map(|(from, to)| name.strip_prefix(from).map(|rest| format!("{to}{rest}")));
        let mut name = renamed.unwrap_or_else(|| name.to_string());
        for (from, to) in self.renames {
            if let Some(stem) = name.strip_suffix(from) {
                name = format!("{stem}{to}");
            }
        }
        name
    }
}

/// The llama.cpp name (`blk.0.attn_q.weight`) of the Hugging Face weight or bias `name`
/// outside a mixture's experts, and its rule: `None` where the table has no place for it or
/// the policy drops it. Nothing is checked against a config (see [`map_tensors`]).
pub fn gguf_name(
    name: &str,
    rules: &[TensorRule],
    policy: &NamePolicy,
) -> Option<(String, TensorRule)> {
    let name = policy.normalize(name);
    if is_dropped(&name, policy.dropped) {
        return None;
    }
    let (base, suffix) = match name.strip_suffix(".weight") {
        Some(b) => (b, ".weight"),
        None => (name.strip_suffix(".bias")?, ".bias"),
    };
    rules.iter().find_map(|r| match r.matches(base)? {
        Placed {
            expert: Some(_), ..
        } => None,
        Placed { layer, .. } => {
            let gguf = match layer {
                Some(l) => r.gguf.replace("{bid}", &l.to_string()),
                None => r.gguf.to_string(),
            };
            Some((gguf + suffix, *r))
        }
    })
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
    // Stacked experts: output tensor → (its index in `out`, expert → input tensor).
    let mut stacks: HashMap<String, (usize, BTreeMap<usize, String>)> = HashMap::new();
    // Layers the tensors name: 0..layers_held.
    let mut layers_held = 0usize;
    for t in tensors {
        let name = policy.normalize(&t.name);
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
        let Some((rule, Placed { layer, expert })) = rules
            .iter()
            .find_map(|r| r.matches(base).map(|placed| (*r, placed)))
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
        // The shape in the source's layout: a bias is the weight's first dimension, a
        // transposed weight the output's shape reversed.
        let source_dims: Vec<Dim> = match (is_bias, rule.transposed) {
            (true, _) => rule.shape.iter().take(1).copied().collect(),
            (false, false) => rule.shape.to_vec(),
            (false, true) => rule.shape.iter().rev().copied().collect(),
        };
        let expected: Vec<usize> = source_dims.iter().map(|d| dims.value(*d)).collect();
        if t.shape != expected {
            let names: Vec<&str> = source_dims.iter().map(|d| Dims::describe(*d)).collect();
            return fail(format!(
                "shape {:?} disagrees with config.json, which implies {expected:?} ({})",
                t.shape,
                names.join(", ")
            ));
        }
        let transposed = rule.transposed && !is_bias;
        let gguf = match layer {
            Some(l) => rule.gguf.replace("{bid}", &l.to_string()),
            None => rule.gguf.to_string(),
        } + if is_bias { ".bias" } else { ".weight" };
        if let Some(x) = expert {
            if x >= dims.n_expert {
                return fail(format!(
                    "is expert {x}, but config.json has num_experts = {}",
                    dims.n_expert
                ));
            }
            let (_, experts) = stacks.entry(gguf.clone()).or_insert_with(|| {
                seen.insert(gguf.clone(), t.name.clone());
                let mut shape = Vec::with_capacity(expected.len() + 1);
                shape.push(dims.n_expert);
                shape.extend_from_slice(&expected);
                out.push(Mapped {
                    source: t.name.clone(),
                    experts: Vec::new(),
                    gguf: gguf.clone(),
                    shape,
                    rule,
                    transposed,
                });
                (out.len() - 1, BTreeMap::new())
            });
            if let Some(first) = experts.insert(x, t.name.clone()) {
                return fail(format!("is expert {x} of {gguf}, as '{first}' already is"));
            }
            continue;
        }
        if let Some(first) = seen.insert(gguf.clone(), t.name.clone()) {
            return fail(format!("maps to {gguf}, as '{first}' already does"));
        }
        out.push(Mapped {
            source: t.name.clone(),
            experts: Vec::new(),
            gguf,
            shape: if transposed {
                t.shape.iter().rev().copied().collect()
            } else {
                t.shape.clone()
            },
            rule,
            transposed,
        });
    }
    // Every expert of every stack, in order (the walk stops at the first gap, so it never
    // goes past the experts the tensors name, plus one).
    for (gguf, (at, experts)) in stacks {
        if let Some(missing) = (0..dims.n_expert).find(|x| !experts.contains_key(x)) {
            let m = &out[at];
            let hf = m.rule.hf.replace(
                "{bid}",
                &layer_of(&gguf).map_or(String::new(), |l| l.to_string()),
            );
            let hf = hf.replace("{xid}", &missing.to_string())
                + if gguf.ends_with(".bias") {
                    ".bias"
                } else {
                    ".weight"
                };
            return Err(CoreError::invalid_model(format!(
                "tensor '{hf}' is missing: config.json has num_experts = {}, and llama.cpp \
                 stacks them all in {gguf}",
                dims.n_expert
            ))
            .with_tensor(hf));
        }
        let m = &mut out[at];
        m.experts = experts.into_values().collect();
        m.source = m.experts[0].clone();
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
                    }
                    .replace("{xid}", "0")
                        + suffix;
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
            transposed: false,
        },
        TensorRule {
            hf: "layers.{bid}.q",
            gguf: "blk.{bid}.attn_q",
            weight: Need::Required,
            bias: Need::Optional,
            shape: &[Dim::Q, Dim::Embd],
            transposed: false,
        },
    ];
    const POLICY: NamePolicy = NamePolicy {
        prefix_renames: &[("wrapped.inner.", ""), ("outer.", "")],
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
                t("wrapped.inner.layers.1.q.weight", &[4, 4]),
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

    const MOE: &[TensorRule] = &[
        TensorRule {
            hf: "layers.{bid}.gate",
            gguf: "blk.{bid}.ffn_gate_inp",
            weight: Need::Required,
            bias: Need::Absent,
            shape: &[Dim::Experts, Dim::Embd],
            transposed: false,
        },
        TensorRule {
            hf: "layers.{bid}.experts.{xid}.up",
            gguf: "blk.{bid}.ffn_up_exps",
            weight: Need::Required,
            bias: Need::Absent,
            shape: &[Dim::ExpertFf, Dim::Embd],
            transposed: false,
        },
    ];

    fn moe_dims(n_expert: usize) -> Dims {
        Dims {
            embd: 4,
            n_expert,
            expert_ff: 6,
            ..Dims::default()
        }
    }

    fn moe_layer(layer: usize, experts: &[usize]) -> Vec<TensorListing> {
        let mut out = vec![t(&format!("layers.{layer}.gate.weight"), &[3, 4])];
        for x in experts {
            out.push(t(&format!("layers.{layer}.experts.{x}.up.weight"), &[6, 4]));
        }
        out
    }

    #[test]
    fn experts_stack_in_expert_order_whatever_the_listing_order() {
        let mut all = moe_layer(0, &[2, 0, 1]);
        all.extend(moe_layer(1, &[1, 2, 0]));
        let out = map_tensors(&all, MOE, &POLICY, &moe_dims(3), 2).unwrap();
        let ups: Vec<&Mapped> = out
            .iter()
            .filter(|m| m.gguf.contains("ffn_up_exps"))
            .collect();
        assert_eq!(ups.len(), 2);
        assert_eq!(ups[0].gguf, "blk.0.ffn_up_exps.weight");
        assert_eq!(ups[0].shape, [3, 6, 4]);
        assert_eq!(
            ups[1].experts,
            [
                "layers.1.experts.0.up.weight",
                "layers.1.experts.1.up.weight",
                "layers.1.experts.2.up.weight"
            ]
        );
        assert_eq!(ups[1].source, "layers.1.experts.0.up.weight");
    }

    #[test]
    fn a_missing_extra_or_repeated_expert_is_named() {
        let run = |tensors: Vec<TensorListing>, n_expert: usize| {
            map_tensors(&tensors, MOE, &POLICY, &moe_dims(n_expert), 1).unwrap_err()
        };
        let e = run(moe_layer(0, &[0, 2]), 3);
        assert_eq!(e.tensor(), Some("layers.0.experts.1.up.weight"));
        assert!(e.to_string().contains("num_experts = 3"), "{e}");
        // config.json's number is not walked past the experts the tensors hold.
        let e = run(moe_layer(0, &[0])[1..].to_vec(), u32::MAX as usize);
        assert_eq!(e.tensor(), Some("layers.0.experts.1.up.weight"));
        let mut extra = moe_layer(0, &[0, 1, 2, 3]);
        extra[0].shape = vec![3, 4];
        let e = run(extra, 3);
        assert_eq!(e.tensor(), Some("layers.0.experts.3.up.weight"));
        assert!(e.to_string().contains("is expert 3"), "{e}");
        let mut twice = moe_layer(0, &[0, 1, 2]);
        twice.push(t("layers.0.experts.01.up.weight", &[6, 4]));
        let e = run(twice, 3);
        assert!(e.to_string().contains("no tensor of this name"), "{e}");
        let e = run(moe_layer(0, &[]), 3);
        assert_eq!(e.tensor(), Some("layers.0.experts.0.up.weight"));
        assert!(e.to_string().contains("missing"), "{e}");
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
