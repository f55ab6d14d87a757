//! llama.cpp's quantization presets (`llama-quantize model.gguf out.gguf Q4_K_M`): which
//! ggml type each tensor of a model gets.
//!
//! This is `llama_tensor_get_type` of llama.cpp's `src/llama-quant.cpp`, rewritten as a pure
//! function of the tensors' llama.cpp names (`token_embd.weight`, `blk.N.attn_v.weight`,
//! `output.weight`, …), shapes and current types, and of the few model parameters it looks
//! at ([`TypePlanModel`]). Like llama-quantize it walks the tensors in its loader's order
//! (tensors outside `blk.N.` first, then by layer, by name within each) because some rules
//! count tensors as they go (`use_more_bits` on the i-th `attn_v`). The branches for the
//! presets we do not offer (IQ mixes, TQ, MXFP4_MOE, Q2_K_S) are left out, as are
//! llama-quantize's options (importance matrices, per-tensor overrides, `--pure`).
//!
//! Tested against `llama-quantize` itself: the same type for every tensor and the same bytes.

use super::GgmlType;
use crate::error::{CoreError, Result};

/// A llama-quantize preset ("file type"), named as its command line names it.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Preset {
    F32,
    F16,
    BF16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2_K,
    Q3_K_S,
    Q3_K_M,
    Q3_K_L,
    Q4_K_S,
    Q4_K_M,
    Q5_K_S,
    Q5_K_M,
    Q6_K,
}

impl Preset {
    /// Every preset, in the order the documentation lists them.
    pub const ALL: &'static [Preset] = &[
        Preset::F32,
        Preset::F16,
        Preset::BF16,
        Preset::Q8_0,
        Preset::Q6_K,
        Preset::Q5_K_M,
        Preset::Q5_K_S,
        Preset::Q5_1,
        Preset::Q5_0,
        Preset::Q4_K_M,
        Preset::Q4_K_S,
        Preset::Q4_1,
        Preset::Q4_0,
        Preset::Q3_K_L,
        Preset::Q3_K_M,
        Preset::Q3_K_S,
        Preset::Q2_K,
    ];

    /// llama-quantize's aliases: `Q3_K`, `Q4_K` and `Q5_K` are the `_M` mixes.
    const ALIASES: &'static [(&'static str, Preset)] = &[
        ("Q3_K", Preset::Q3_K_M),
        ("Q4_K", Preset::Q4_K_M),
        ("Q5_K", Preset::Q5_K_M),
    ];

    pub fn name(self) -> &'static str {
        match self {
            Preset::F32 => "F32",
            Preset::F16 => "F16",
            Preset::BF16 => "BF16",
            Preset::Q4_0 => "Q4_0",
            Preset::Q4_1 => "Q4_1",
            Preset::Q5_0 => "Q5_0",
            Preset::Q5_1 => "Q5_1",
            Preset::Q8_0 => "Q8_0",
            Preset::Q2_K => "Q2_K",
            Preset::Q3_K_S => "Q3_K_S",
            Preset::Q3_K_M => "Q3_K_M",
            Preset::Q3_K_L => "Q3_K_L",
            Preset::Q4_K_S => "Q4_K_S",
            Preset::Q4_K_M => "Q4_K_M",
            Preset::Q5_K_S => "Q5_K_S",
            Preset::Q5_K_M => "Q5_K_M",
            Preset::Q6_K => "Q6_K",
        }
    }

    /// Every name [`Preset::parse`] accepts: the presets, then the aliases.
    pub fn names() -> Vec<&'static str> {
        Preset::ALL
            .iter()
            .map(|p| p.name())
            .chain(Preset::ALIASES.iter().map(|(n, _)| *n))
            .collect()
    }

    /// A preset by name (any case), aliases included.
    pub fn parse(name: &str) -> Result<Preset> {
        Preset::ALL
            .iter()
            .map(|&p| (p.name(), p))
            .chain(Preset::ALIASES.iter().copied())
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, p)| p)
            .ok_or_else(|| {
                CoreError::invalid_argument(format!(
                    "unknown GGUF quantization '{name}'; expected one of {}",
                    Preset::names().join(", ")
                ))
            })
    }

    /// The type of the tensors no rule singles out (llama.cpp's
    /// `llama_ftype_get_default_type`).
    pub fn default_type(self) -> GgmlType {
        match self {
            Preset::F32 => GgmlType::F32,
            Preset::F16 => GgmlType::F16,
            Preset::BF16 => GgmlType::BF16,
            Preset::Q4_0 => GgmlType::Q4_0,
            Preset::Q4_1 => GgmlType::Q4_1,
            Preset::Q5_0 => GgmlType::Q5_0,
            Preset::Q5_1 => GgmlType::Q5_1,
            Preset::Q8_0 => GgmlType::Q8_0,
            Preset::Q2_K => GgmlType::Q2_K,
            Preset::Q3_K_S | Preset::Q3_K_M | Preset::Q3_K_L => GgmlType::Q3_K,
            Preset::Q4_K_S | Preset::Q4_K_M => GgmlType::Q4_K,
            Preset::Q5_K_S | Preset::Q5_K_M => GgmlType::Q5_K,
            Preset::Q6_K => GgmlType::Q6_K,
        }
    }

    /// llama.cpp's `llama_ftype` number, written as `general.file_type`.
    pub fn file_type(self) -> u32 {
        match self {
            Preset::F32 => 0,
            Preset::F16 => 1,
            Preset::Q4_0 => 2,
            Preset::Q4_1 => 3,
            Preset::Q8_0 => 7,
            Preset::Q5_0 => 8,
            Preset::Q5_1 => 9,
            Preset::Q2_K => 10,
            Preset::Q3_K_S => 11,
            Preset::Q3_K_M => 12,
            Preset::Q3_K_L => 13,
            Preset::Q4_K_S => 14,
            Preset::Q4_K_M => 15,
            Preset::Q5_K_S => 16,
            Preset::Q5_K_M => 17,
            Preset::Q6_K => 18,
            Preset::BF16 => 32,
        }
    }

    /// Every type this preset may choose for a float tensor (its default, the types its
    /// rules name, and their fallbacks), for checking that we can encode them all.
    pub fn possible_types(self) -> &'static [GgmlType] {
        use GgmlType::*;
        match self {
            Preset::F32 => &[F32],
            Preset::F16 => &[F16],
            Preset::BF16 => &[BF16],
            Preset::Q4_0 | Preset::Q4_1 | Preset::Q5_0 | Preset::Q5_1 | Preset::Q8_0 => {
                &[Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q6_K, F16]
            }
            _ => &[Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q4_0, Q5_0, Q5_1, Q8_0, F16],
        }
    }
}

impl std::fmt::Display for Preset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What `options.quantization` of a GGUF export may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantizationChoice {
    /// No option: every tensor keeps its type (F32, F16, BF16, F64 and the integers;
    /// block-quantized GGUF inputs decode to F32).
    Keep,
    /// A llama-quantize preset.
    Preset(Preset),
}

impl QuantizationChoice {
    pub fn parse(name: Option<&str>) -> Result<QuantizationChoice> {
        match name {
            None => Ok(QuantizationChoice::Keep),
            Some(n) => Preset::parse(n).map(QuantizationChoice::Preset),
        }
    }

    /// The preset's name, `None` for [`QuantizationChoice::Keep`].
    pub fn name(self) -> Option<&'static str> {
        match self {
            QuantizationChoice::Keep => None,
            QuantizationChoice::Preset(p) => Some(p.name()),
        }
    }
}

/// The model parameters llama-quantize's rules look at (its `llama_quant_model_desc`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TypePlanModel {
    /// `general.architecture` ("llama", "falcon", …).
    pub architecture: String,
    /// `{arch}.block_count`.
    pub n_layer: usize,
    /// `{arch}.attention.head_count` (of the first layer).
    pub n_head: u32,
    /// `{arch}.attention.head_count_kv` (of the first layer; 0 when unknown).
    pub n_head_kv: u32,
    /// `{arch}.expert_count` (0 for dense models).
    pub n_expert: u32,
}

impl TypePlanModel {
    /// `n_head / n_head_kv` (0 when `n_head_kv` is 0), as llama.cpp's `n_gqa()`.
    fn n_gqa(&self) -> u32 {
        self.n_head.checked_div(self.n_head_kv).unwrap_or(0)
    }

    /// llama.cpp infers the 70B size class (which bumps `attn_v`) only for llama models of
    /// 80 layers with grouped-query attention.
    fn is_70b(&self) -> bool {
        self.architecture == "llama" && self.n_layer == 80 && self.n_head != self.n_head_kv
    }

    fn is(&self, arch: &str) -> bool {
        self.architecture == arch
    }
}

/// One tensor to plan: its llama.cpp name, shape (outermost first, as everywhere in this
/// crate) and the type it has now (what it keeps if the preset leaves it alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorPlan<'a> {
    pub name: &'a str,
    pub shape: &'a [usize],
    pub current: GgmlType,
}

/// A tensor's role, from its name (llama.cpp's `tensor_category`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Category {
    TokenEmbd,
    AttentionQ,
    AttentionV,
    AttentionK,
    AttentionQkv,
    AttentionKvB,
    AttentionOutput,
    FfnUp,
    FfnGate,
    FfnDown,
    Output,
    Other,
}

impl Category {
    fn of(name: &str) -> Category {
        // The first match wins, in llama.cpp's order.
        const BY_SUBSTRING: [(&str, Category); 9] = [
            ("attn_qkv.weight", Category::AttentionQkv),
            ("attn_kv_b.weight", Category::AttentionKvB),
            ("attn_v.weight", Category::AttentionV),
            ("attn_k.weight", Category::AttentionK),
            ("attn_q.weight", Category::AttentionQ),
            ("attn_output.weight", Category::AttentionOutput),
            ("ffn_up", Category::FfnUp),
            ("ffn_gate", Category::FfnGate),
            ("ffn_down", Category::FfnDown),
        ];
        if name == "output.weight" {
            return Category::Output;
        }
        if is_token_embd(name) {
            return Category::TokenEmbd;
        }
        BY_SUBSTRING
            .iter()
            .find(|(s, _)| name.contains(s))
            .map_or(Category::Other, |&(_, c)| c)
    }

    fn is_attn_v(self) -> bool {
        matches!(
            self,
            Category::AttentionV | Category::AttentionQkv | Category::AttentionKvB
        )
    }
}

fn is_token_embd(name: &str) -> bool {
    name == "token_embd.weight" || name == "per_layer_token_embd.weight"
}

/// Name fragments of tensors llama-quantize never quantizes (`tensor_allows_quantization`).
const NOT_QUANTIZED: &[&str] = &[
    "_norm.weight",
    "ffn_gate_inp.weight",
    "ffn_gate_tid2eid.weight",
    "altup",
    "laurel",
    "per_layer_model_proj",
    "ssm_conv1d",
    "shortconv.conv.weight",
    "indexer.k_proj.weight",
    "indexer.q_proj.weight",
    "time_mix_first.weight",
    "time_mix_w0.weight",
    "time_mix_w1.weight",
    "time_mix_w2.weight",
    "time_mix_v0.weight",
    "time_mix_v1.weight",
    "time_mix_v2.weight",
    "time_mix_a0.weight",
    "time_mix_a1.weight",
    "time_mix_a2.weight",
    "time_mix_g1.weight",
    "time_mix_g2.weight",
    "time_mix_decay_w1.weight",
    "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight",
    "attn_rel_b.weight",
    ".position_embd",
    "sam.pos_embd",
    "sam.neck.",
    "sam.net_",
    ".rel_pos",
    ".patch_embd",
    ".patch_merger",
    "a.rvq.codebook",
    "mm.a.code_embd",
];

/// More fragments for the glm5-next architecture.
const NOT_QUANTIZED_GLM5_NEXT: &[&str] = &[
    "hc_",
    "indexer.attn_q_b",
    "indexer.attn_k",
    "indexer.proj",
    "indexer_compressor_gate",
    "indexer_compressor_ape",
    "ssm_f_a.weight",
    "ssm_f_b.weight",
    "ssm_g_a.weight",
    "ssm_g_b.weight",
    "ssm_beta.weight",
    "attn_kv_a_mqa.weight",
    "attn_k_b.weight",
    "attn_v_b.weight",
];

/// ggml's dimension count: up to the last dimension greater than 1 (at least 1), counted
/// on ggml's innermost-first `ne` — a `[1, 4096]` tensor has one dimension.
fn ggml_n_dims(shape: &[usize]) -> usize {
    let ne: Vec<usize> = shape.iter().rev().copied().collect();
    (1..ne.len())
        .rev()
        .find(|&i| ne[i] > 1)
        .map_or(1, |i| i + 1)
}

/// Whether llama-quantize would quantize this tensor at all.
pub fn allows_quantization(model: &TypePlanModel, name: &str, shape: &[usize]) -> bool {
    if ggml_n_dims(shape) < 2 || !name.ends_with("weight") {
        return false;
    }
    if name == "position_embd.weight" || name == "token_types.weight" {
        return false;
    }
    let excluded = |list: &[&str]| list.iter().any(|s| name.contains(s));
    !(excluded(NOT_QUANTIZED) || (model.is("glm5-next") && excluded(NOT_QUANTIZED_GLM5_NEXT)))
}

/// The layer number of `blk.N.…` names (llama.cpp's loader sorts by it; -1 otherwise).
fn layer_of(name: &str) -> i64 {
    let Some(rest) = name.strip_prefix("blk.") else {
        return -1;
    };
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    match (digits.parse::<i64>(), rest[digits.len()..].starts_with('.')) {
        (Ok(n), true) => n,
        // sscanf("blk.%d.") reads the number even without the dot; a huge number does not
        // fit an int and is not a layer llama.cpp could load anyway.
        (Ok(n), false) if n <= i32::MAX as i64 => n,
        _ => -1,
    }
}

/// llama.cpp's counters, advanced as tensors are visited in loader order.
#[derive(Default)]
struct Counters {
    n_attention_wv: usize,
    i_attention_wv: usize,
    i_ffn_down: usize,
    i_ffn_gate: usize,
    i_ffn_up: usize,
    has_tied_embeddings: bool,
}

fn use_more_bits(i_layer: usize, n_layers: usize) -> bool {
    let (i, n) = (i_layer as i64, n_layers as i64);
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// The type of every tensor under `preset`, in the order given (the plan is made in
/// llama-quantize's order). Tensors the preset does not quantize keep `current`; the others
/// get the preset's choice, falling back as llama-quantize does when their rows are not a
/// whole number of the type's blocks (Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0, Q2_K/Q3_K →
/// Q4_0, then F16 when even 32 does not divide the row).
pub fn plan_types(
    preset: Preset,
    model: &TypePlanModel,
    tensors: &[TensorPlan<'_>],
) -> Result<Vec<GgmlType>> {
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by(|&a, &b| {
        let (na, nb) = (tensors[a].name, tensors[b].name);
        layer_of(na).cmp(&layer_of(nb)).then_with(|| na.cmp(nb))
    });
    let categories: Vec<Category> = tensors.iter().map(|t| Category::of(t.name)).collect();
    let mut counters = Counters {
        n_attention_wv: categories.iter().filter(|c| c.is_attn_v()).count(),
        has_tied_embeddings: !categories.contains(&Category::Output),
        ..Counters::default()
    };
    let mut out = vec![GgmlType::F32; tensors.len()];
    for i in order {
        let t = &tensors[i];
        out[i] = if allows_quantization(model, t.name, t.shape) {
            tensor_type(preset, model, &mut counters, t, categories[i])
                .map_err(|e| e.with_tensor(t.name))?
        } else {
            t.current
        };
    }
    Ok(out)
}

/// `llama_tensor_get_type` for a tensor llama-quantize allows to quantize.
fn tensor_type(
    preset: Preset,
    model: &TypePlanModel,
    counters: &mut Counters,
    t: &TensorPlan<'_>,
    category: Category,
) -> Result<GgmlType> {
    let default = preset.default_type();
    if !default.is_quantized() {
        return Ok(default);
    }
    let chosen = mixture_type(preset, model, counters, t, category, default)?;
    Ok(fallback(chosen, t.shape.last().copied().unwrap_or(1)))
}

/// The layer of an FFN tensor: the running count for dense models, the name's `blk.N`
/// for mixtures of experts (whose expert tensors are not in layer order).
fn layer_info(model: &TypePlanModel, counter: usize, name: &str) -> Result<(usize, usize)> {
    let n_layer = model.n_layer;
    if model.n_expert > 1 {
        let layer = layer_of(name);
        if layer < 0 || layer as usize >= n_layer {
            return Err(CoreError::invalid_argument(format!(
                "cannot place this expert tensor in a layer of [0, {n_layer}): its name must \
                 start with blk.N."
            )));
        }
        return Ok((layer as usize, n_layer));
    }
    Ok((counter, n_layer))
}

/// `llama_tensor_get_type_impl`, for the presets we offer.
fn mixture_type(
    preset: Preset,
    model: &TypePlanModel,
    c: &mut Counters,
    t: &TensorPlan<'_>,
    category: Category,
    default: GgmlType,
) -> Result<GgmlType> {
    use GgmlType as T;
    use Preset as P;
    let name = t.name;
    let mut new_type = default;
    let falcon = model.is("falcon");
    if model.is("glm5-next")
        && ["attn_q_a", "attn_q_b", "nextn.eh_proj"]
            .iter()
            .any(|s| name.contains(s))
    {
        return Ok(T::Q8_0);
    }
    if category == Category::Output || (c.has_tied_embeddings && category == Category::TokenEmbd) {
        let nx = t.shape.last().copied().unwrap_or(1);
        if falcon || !nx.is_multiple_of(new_type.block_size()) {
            new_type = T::Q8_0;
        } else if new_type != T::Q8_0 {
            new_type = T::Q6_K;
        }
    } else if category == Category::TokenEmbd {
        // No rule for these presets.
    } else if category.is_attn_v() {
        let n_gqa = model.n_gqa();
        match preset {
            P::Q2_K => new_type = if n_gqa >= 4 { T::Q4_K } else { T::Q3_K },
            P::Q3_K_M => {
                new_type = if c.i_attention_wv < 2 {
                    T::Q5_K
                } else {
                    T::Q4_K
                };
            }
            P::Q3_K_L => new_type = T::Q5_K,
            P::Q4_K_M | P::Q5_K_M if use_more_bits(c.i_attention_wv, c.n_attention_wv) => {
                new_type = T::Q6_K
            }
            P::Q4_K_S if c.i_attention_wv < 4 => new_type = T::Q5_K,
            _ => {}
        }
        if model.is_70b() && matches!(new_type, T::Q3_K | T::Q4_K) {
            new_type = T::Q5_K;
        }
        if model.n_expert == 8 {
            new_type = T::Q8_0;
        }
        c.i_attention_wv += 1;
    } else if category == Category::AttentionK {
        if model.n_expert == 8 {
            new_type = T::Q8_0;
        }
    } else if category == Category::AttentionQ {
        // No rule for these presets.
    } else if category == Category::FfnDown {
        let (i_layer, n_layer) = layer_info(model, c.i_ffn_down, name)?;
        match preset {
            P::Q2_K => new_type = T::Q3_K,
            P::Q3_K_M => {
                new_type = if i_layer < n_layer / 16 {
                    T::Q5_K
                } else if !falcon || use_more_bits(i_layer, n_layer) {
                    T::Q4_K
                } else {
                    T::Q3_K
                }
            }
            P::Q3_K_L => new_type = if falcon { T::Q4_K } else { T::Q5_K },
            P::Q4_K_M => {
                if falcon {
                    new_type = if i_layer < n_layer / 16 {
                        T::Q6_K
                    } else if use_more_bits(i_layer, n_layer) {
                        T::Q5_K
                    } else {
                        T::Q4_K
                    };
                } else if use_more_bits(i_layer, n_layer) {
                    new_type = T::Q6_K;
                }
            }
            P::Q5_K_M if use_more_bits(i_layer, n_layer) => new_type = T::Q6_K,
            P::Q4_K_S if !falcon && i_layer < n_layer / 8 => new_type = T::Q5_K,
            _ => {}
        }
        c.i_ffn_down += 1;
    } else if category == Category::AttentionOutput {
        if !falcon {
            if model.n_expert == 8 {
                if matches!(
                    preset,
                    P::Q2_K | P::Q3_K_S | P::Q3_K_M | P::Q4_K_S | P::Q4_K_M
                ) {
                    new_type = T::Q5_K;
                }
            } else {
                match preset {
                    P::Q2_K => new_type = T::Q3_K,
                    P::Q3_K_M => new_type = T::Q4_K,
                    P::Q3_K_L => new_type = T::Q5_K,
                    _ => {}
                }
            }
        } else if preset == P::Q3_K_L {
            new_type = T::Q4_K;
        }
    } else if category == Category::AttentionQkv {
        match preset {
            P::Q3_K_M | P::Q3_K_L => new_type = T::Q4_K,
            P::Q4_K_M => new_type = T::Q5_K,
            P::Q5_K_M => new_type = T::Q6_K,
            _ => {}
        }
    } else if category == Category::FfnGate {
        layer_info(model, c.i_ffn_gate, name)?;
        c.i_ffn_gate += 1;
    } else if category == Category::FfnUp {
        layer_info(model, c.i_ffn_up, name)?;
        c.i_ffn_up += 1;
    }
    Ok(new_type)
}

/// llama-quantize's `tensor_type_fallback`: a type whose blocks do not divide the row
/// length `ncols` is replaced by a 32-element type, or F16 when 32 does not divide it either.
pub fn fallback(ty: GgmlType, ncols: usize) -> GgmlType {
    use GgmlType::*;
    if ncols.is_multiple_of(ty.block_size()) {
        return ty;
    }
    let smaller = match ty {
        IQ1_S | IQ1_M | IQ2_XXS | IQ2_XS | IQ2_S | IQ3_XXS | IQ3_S | IQ4_XS => IQ4_NL,
        Q2_0 | Q2_K | Q3_K | TQ1_0 | TQ2_0 => Q4_0,
        Q4_K => Q5_0,
        Q5_K => Q5_1,
        Q6_K => Q8_0,
        // Types of 32-element blocks have nothing smaller; the check below makes them F16,
        // as it does the others (llama.cpp refuses those with no fallback; F16 fits any row).
        F32 | F16 | BF16 | F64 | I8 | I16 | I32 | I64 | Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q8_1
        | IQ4_NL | MXFP4 | NVFP4 | Q8_K | Q1_0 => ty,
    };
    if ncols.is_multiple_of(smaller.block_size()) {
        smaller
    } else {
        F16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dimension_count_is_ggmls() {
        assert_eq!(ggml_n_dims(&[]), 1);
        assert_eq!(ggml_n_dims(&[4096]), 1);
        assert_eq!(ggml_n_dims(&[1, 4096]), 1);
        assert_eq!(ggml_n_dims(&[4096, 1]), 2);
        assert_eq!(ggml_n_dims(&[2, 1, 1]), 3);
    }

    #[test]
    fn loader_order_puts_layers_after_the_rest_in_number_order() {
        assert_eq!(layer_of("blk.10.attn_v.weight"), 10);
        assert_eq!(layer_of("blk.2.attn_v.weight"), 2);
        assert_eq!(layer_of("output.weight"), -1);
        assert_eq!(layer_of("blk.x.attn_v.weight"), -1);
    }

    #[test]
    fn every_type_a_preset_can_choose_is_encodable() {
        for &p in Preset::ALL {
            for &t in p.possible_types() {
                assert!(t.can_encode(), "{p} may choose {t}, which we cannot write");
            }
            assert!(p.possible_types().contains(&p.default_type()));
        }
    }
}
