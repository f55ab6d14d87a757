//! `serialize(tensors)`: tensors handed over from JS → the bytes of a SafeTensors file, by
//! the core's writer (the native addon's `serialize`, src/write.rs).
//!
//! JS sends a JSON plan and one buffer with every tensor's data, in plan order:
//! `{"metadata": {string: string} | null, "tensors": [{"name", "dtype": target | null,
//! "source": the typed array's dtype | "numbers", "shape": [n], "len": bytes}]}`. A typed
//! array's bytes are converted from its own dtype to the target (`dtype`, default its own);
//! `numbers` are f64 values (a JS `number[]`) encoded to the target (default F32), as natively.

use crate::convert::Output;
use serde::Deserialize;
use stcore::cast;
use stcore::format::safetensors;
use stcore::{CoreError, DType, TensorView};
use std::borrow::Cow;
use std::collections::BTreeMap;

#[derive(Deserialize)]
struct Plan {
    metadata: Option<BTreeMap<String, String>>,
    tensors: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    name: String,
    dtype: Option<String>,
    source: String,
    shape: Vec<usize>,
    len: usize,
}

fn view<'a>(e: &Entry, data: &'a [u8]) -> stcore::Result<TensorView<'a>> {
    let target = e.dtype.as_deref().map(DType::parse_arg).transpose()?;
    let (dtype, bytes) = if e.source == "numbers" {
        let values: Vec<f64> = data
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let dtype = target.unwrap_or(DType::F32);
        (dtype, Cow::Owned(cast::encode_f64(&values, dtype)?))
    } else {
        let source = DType::parse_arg(&e.source)?;
        let dtype = target.unwrap_or(source);
        (dtype, cast::convert_bytes(source, data, dtype)?)
    };
    TensorView::new(e.name.as_str(), dtype, e.shape.clone(), bytes)
}

/// The SafeTensors bytes of the tensors `plan` (JSON) describes, their data in `data`.
pub fn serialize(plan: &[u8], data: &[u8]) -> stcore::Result<Output> {
    let plan: Plan = serde_json::from_slice(plan)
        .map_err(|e| CoreError::invalid_argument(format!("serialize: bad plan: {e}")))?;
    let mut at = 0usize;
    let mut views = Vec::with_capacity(plan.tensors.len());
    for e in &plan.tensors {
        let end = at
            .checked_add(e.len)
            .filter(|&end| end <= data.len())
            .ok_or_else(|| {
                CoreError::invalid_argument("serialize: the data is shorter than the plan")
            })?;
        views.push(view(e, &data[at..end]).map_err(|err| err.with_tensor(&e.name))?);
        at = end;
    }
    Ok(Output::bytes(safetensors::serialize(
        &views,
        plan.metadata.as_ref(),
    )?))
}
