//! A base model with a PEFT LoRA adapter merged in, as one more [`TensorSource`]: each
//! adapted weight is served as PEFT's `merge_and_unload()` computes it, when it is fetched,
//! so a conversion of the merged model streams one tensor at a time like any other.
//!
//! For a linear layer `W [out, in]` with `A [r, in]`, `B [out, r]` and PEFT's scaling `s`
//! (`lora_alpha / r`, rsLoRA `lora_alpha / √r`, times the caller's `loraScale`):
//! `W' = W + (B·A)·s`, in float32 operation by operation as torch does on the CPU (`B·A`
//! accumulated here in f64 and rounded once, where torch's matrix product rounds along the
//! way: the results differ by a few ulp). An embedding's delta is `(B·A)ᵀ`. The merged
//! weight keeps the base's dtype (F32, F16 or BF16, rounded to nearest even).

use crate::cast;
use crate::dtype::DType;
use crate::error::{CoreError, Result};
use crate::memory::TensorBytes;
use crate::pretrained::adapter::{LoraAdapter, LoraPair};
use crate::source::{Metadata, SourceFile, TensorList, TensorSource, WeightsFormat};
use std::collections::HashMap;
use std::path::Path;

pub struct Merged {
    base: Box<dyn TensorSource>,
    adapter: LoraAdapter,
    /// The caller's multiplier of PEFT's scaling (`loraScale`, 1 by default).
    lora_scale: f64,
    /// Adapted base tensor → its pair in `adapter.pairs`.
    adapted: HashMap<String, usize>,
}

impl Merged {
    /// `adapter` over `base`: every pair must adapt a float tensor of the base whose shape
    /// its delta has (ERR_INVALID_MODEL naming the adapter's tensor otherwise).
    pub fn new(
        base: Box<dyn TensorSource>,
        adapter: LoraAdapter,
        lora_scale: f64,
    ) -> Result<Merged> {
        if !lora_scale.is_finite() {
            return Err(CoreError::invalid_argument(format!(
                "options.loraScale must be a finite number, not {lora_scale}"
            )));
        }
        let mut adapted = HashMap::with_capacity(adapter.pairs.len());
        for (i, pair) in adapter.pairs.iter().enumerate() {
            let fail = |msg: String| {
                Err(CoreError::invalid_model(msg)
                    .with_tensor(&pair.a)
                    .with_path(&adapter.dir))
            };
            let Some(t) = base.tensor(&pair.target) else {
                return fail(format!(
                    "adapts {}, which the base model does not have (the adapter was trained for another model)",
                    pair.target
                ));
            };
            if !matches!(t.dtype, DType::F32 | DType::F16 | DType::BF16) {
                return fail(format!(
                    "adapts {}, a {} tensor: only F32, F16 and BF16 weights can be merged",
                    pair.target, t.dtype
                ));
            }
            let shape = |n: &str| adapter.source.tensor(n).map(|t| t.shape.clone());
            let (Some(a), Some(b)) = (shape(&pair.a), shape(&pair.b)) else {
                return fail("is not in the adapter's weights".into());
            };
            let delta = if pair.embedding {
                [a[1], b[0]]
            } else {
                [b[0], a[1]]
            };
            if t.shape != delta {
                return fail(format!(
                    "lora_A {a:?} and lora_B {b:?} make a delta of shape {delta:?}, but the base \
                     model's {} is {:?}: the adapter was trained for another model",
                    pair.target, t.shape
                ));
            }
            adapted.insert(pair.target.clone(), i);
        }
        Ok(Merged {
            base,
            adapter,
            lora_scale,
            adapted,
        })
    }

    /// How many of the base's tensors the adapter changes.
    pub fn adapted(&self) -> usize {
        self.adapted.len()
    }

    fn merge(&self, name: &str, pair: &LoraPair) -> Result<Vec<u8>> {
        let t = self.info(name)?;
        let weight = self.base.fetch(name)?;
        let mut w = cast::to_f32_vec(t.dtype, weight.as_slice())?;
        drop(weight);
        let a = self.adapter.source.view(&pair.a)?;
        let b = self.adapter.source.view(&pair.b)?;
        let a_values = cast::to_f32_vec(a.dtype, &a.data)?;
        let b_values = cast::to_f32_vec(b.dtype, &b.data)?;
        let rank = pair.rank;
        // torch multiplies a float32 tensor by a Python float in float32.
        let scale = (self.adapter.scale(rank) * self.lora_scale) as f32;
        let (rows, cols) = (t.shape[0], t.shape[1]);
        // A is [r, a_cols]; B is [b_rows, r].
        let a_cols = a.shape[1];
        for row in 0..rows {
            for col in 0..cols {
                // Linear: delta[row][col] = Σ B[row][k]·A[k][col];
                // embedding: delta[row][col] = (B·A)[col][row] = Σ B[col][k]·A[k][row].
                let (bi, ai) = if pair.embedding {
                    (col, row)
                } else {
                    (row, col)
                };
                let dot: f64 = (0..rank)
                    .map(|k| {
                        f64::from(b_values[bi * rank + k]) * f64::from(a_values[k * a_cols + ai])
                    })
                    .sum();
                let delta = (dot as f32) * scale;
                w[row * cols + col] += delta;
            }
        }
        cast::encode_f32(&w, t.dtype)
    }
}

impl TensorSource for Merged {
    fn format(&self) -> WeightsFormat {
        self.base.format()
    }
    fn list(&self) -> &TensorList {
        self.base.list()
    }
    fn metadata(&self) -> Metadata<'_> {
        self.base.metadata()
    }
    fn fetch(&self, name: &str) -> Result<TensorBytes<'_>> {
        match self.adapted.get(name) {
            Some(&i) => Ok(TensorBytes::Owned(
                self.merge(name, &self.adapter.pairs[i])
                    .map_err(|e| e.with_tensor(name))?,
            )),
            None => self.base.fetch(name),
        }
    }
    fn fetch_raw(&self, name: &str) -> Result<TensorBytes<'_>> {
        match self.adapted.get(name) {
            Some(_) => self.fetch(name),
            None => self.base.fetch_raw(name),
        }
    }
    fn path(&self) -> Option<&Path> {
        self.base.path()
    }
    fn files(&self) -> Vec<SourceFile> {
        self.base.files()
    }
    fn file_of(&self, name: &str) -> Option<&str> {
        self.base.file_of(name)
    }
    fn config(&self) -> Option<&serde_json::Value> {
        self.base.config()
    }
    fn release(&self, name: &str) {
        self.base.release(name);
        if let Some(&i) = self.adapted.get(name) {
            let pair = &self.adapter.pairs[i];
            self.adapter.source.release(&pair.a);
            self.adapter.source.release(&pair.b);
        }
    }
}

/// Write the merged model `s` as the model directory `dir` (created if missing):
/// `model.safetensors` streamed tensor by tensor (`fetched(name, bytes)` is told of each
/// tensor as the writer takes it), `config.json` and the base's companion files (tokenizer,
/// generation config). Returns the files written.
pub fn save_dir(
    s: &dyn TensorSource,
    dir: &Path,
    specs: &[crate::format::safetensors::TensorSpec],
    durability: crate::fsutil::Durability,
    fetched: &mut dyn FnMut(&str, u64),
) -> Result<Vec<String>> {
    use crate::fsutil::{self, WriteOptions};
    use crate::pretrained::{save, CONFIG_FILE, SINGLE_FILES};
    if dir.is_file() {
        return Err(CoreError::invalid_argument(
            "a merged model is written as a model directory, and this is a file",
        )
        .with_path(dir));
    }
    std::fs::create_dir_all(dir).map_err(|e| CoreError::io(e, dir))?;
    let weights = SINGLE_FILES[1];
    let kept = s
        .metadata()
        .as_safetensors_metadata(crate::format::safetensors::MAX_HEADER_SIZE)?;
    crate::format::safetensors::save_streaming(
        &dir.join(weights),
        specs,
        kept.as_ref(),
        WriteOptions::with_durability(durability),
        &mut |i| {
            fetched(&specs[i].name, specs[i].byte_len as u64);
            Ok(s.fetch(&specs[i].name)?.into_cow())
        },
    )?;
    let config = s.config().cloned().unwrap_or_default();
    let mut text = serde_json::to_string_pretty(&config)
        .map_err(|e| CoreError::invalid_argument(e.to_string()))?;
    text.push('\n');
    let path = dir.join(CONFIG_FILE);
    fsutil::write_atomic(&path, durability, |out| {
        fsutil::write_all(out, text.as_bytes(), &path)
    })?;
    let mut saved = save::Saved {
        files: vec![weights.to_string(), CONFIG_FILE.to_string()],
        ..save::Saved::default()
    };
    if let Some(base) = s.path() {
        let options = save::SaveOptions {
            durability,
            ..save::SaveOptions::default()
        };
        save::copy_companions(base, dir, &mut saved, &options)?;
    }
    let mut files = saved.files;
    files.extend(saved.companions);
    Ok(files)
}
