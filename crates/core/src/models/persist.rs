//! Shared pieces of model persistence: tensor encoding and decoding, the string metadata
//! stored beside the tensors, and the JSON config of [`super::AnyModel`].
//!
//! Tensor bytes are little-endian and may sit at any address (a mapped file gives no
//! alignment guarantee), so values are decoded with `from_le_bytes`, never by casting.

use crate::dtype::DType;
use crate::error::{CoreError, Result};
use crate::tensor::{checked_numel, TensorView};
use std::collections::BTreeMap;

pub(crate) const COEFFICIENTS: &str = "coefficients";
pub(crate) const INTERCEPT: &str = "intercept";
pub(crate) const CLASSES: &str = "classes";

pub(crate) fn f32_tensor(
    name: &str,
    shape: Vec<usize>,
    values: &[f32],
) -> Result<TensorView<'static>> {
    TensorView::from_f32(name, shape, values)
}

pub(crate) fn i32_tensor(
    name: &str,
    shape: Vec<usize>,
    values: &[i32],
) -> Result<TensorView<'static>> {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    TensorView::new(name, DType::I32, shape, bytes)
}

/// The tensor `name`, or ERR_INVALID_MODEL naming it.
pub(crate) fn require<'t>(
    get: &dyn Fn(&str) -> Option<TensorView<'t>>,
    name: &str,
) -> Result<TensorView<'t>> {
    get(name).ok_or_else(|| {
        CoreError::invalid_model(format!("the model has no '{name}' tensor")).with_tensor(name)
    })
}

/// Check dtype and byte length, then return the element count.
fn checked_elements(view: &TensorView<'_>, name: &str, dtype: DType) -> Result<usize> {
    if view.dtype != dtype {
        return Err(CoreError::invalid_model(format!(
            "expected dtype {dtype}, found {}",
            view.dtype
        ))
        .with_tensor(name));
    }
    let numel = checked_numel(&view.shape)
        .filter(|&n| n.checked_mul(4) == Some(view.data.len()))
        .ok_or_else(|| {
            CoreError::invalid_model(format!(
                "shape {:?} does not match its {} bytes of data",
                view.shape,
                view.data.len()
            ))
            .with_tensor(name)
        })?;
    Ok(numel)
}

/// The values of an F32 tensor; ERR_INVALID_MODEL naming it for another dtype, a byte
/// length that does not match the shape, or a NaN/±Inf value.
pub(crate) fn decode_f32(view: &TensorView<'_>, name: &str) -> Result<Vec<f32>> {
    checked_elements(view, name, DType::F32)?;
    let values: Vec<f32> = view
        .data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    if let Some(index) = values.iter().position(|v| !v.is_finite()) {
        return Err(CoreError::invalid_model(format!(
            "value {} at index {index} is not finite",
            values[index]
        ))
        .with_tensor(name));
    }
    Ok(values)
}

/// The values of an I32 tensor; ERR_INVALID_MODEL naming it for another dtype or a byte
/// length that does not match the shape.
pub(crate) fn decode_i32(view: &TensorView<'_>, name: &str) -> Result<Vec<i32>> {
    checked_elements(view, name, DType::I32)?;
    Ok(view
        .data
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

pub(crate) fn shape_error(name: &str, found: &[usize], expected: &str) -> CoreError {
    CoreError::invalid_model(format!("shape {found:?}, expected {expected}")).with_tensor(name)
}

/// What the string metadata of a saved model says (every key optional: aprender writes
/// none). Keys other than these are ignored, so a file may carry more.
#[derive(Debug, Default)]
pub(crate) struct StoredMetadata {
    pub n_features: Option<usize>,
    pub fit_intercept: Option<bool>,
    pub n_classes: Option<usize>,
}

impl StoredMetadata {
    /// Parse the metadata of a model of type `model_type`; a `model_type` entry naming
    /// another class, or an unparsable value, is ERR_INVALID_MODEL.
    pub fn parse(metadata: Option<&BTreeMap<String, String>>, model_type: &str) -> Result<Self> {
        let Some(metadata) = metadata else {
            return Ok(StoredMetadata::default());
        };
        if let Some(stored) = metadata.get("model_type") {
            if stored != model_type {
                return Err(CoreError::invalid_model(format!(
                    "the file holds a '{stored}' model, not a '{model_type}'"
                )));
            }
        }
        let count = |key: &str| -> Result<Option<usize>> {
            metadata
                .get(key)
                .map(|text| {
                    text.parse::<usize>().map_err(|_| {
                        CoreError::invalid_model(format!(
                            "metadata '{key}' is '{text}', not a non-negative integer"
                        ))
                    })
                })
                .transpose()
        };
        let fit_intercept = metadata
            .get("fit_intercept")
            .map(|text| match text.as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                other => Err(CoreError::invalid_model(format!(
                    "metadata 'fit_intercept' is '{other}', expected 'true' or 'false'"
                ))),
            })
            .transpose()?;
        Ok(StoredMetadata {
            n_features: count("n_features")?,
            fit_intercept,
            n_classes: count("n_classes")?,
        })
    }
}

/// The fields of a model's `config_json` (all optional on input; present-but-null counts
/// as absent).
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct ModelConfig {
    pub model_type: Option<String>,
    pub n_features: Option<usize>,
    pub fit_intercept: Option<bool>,
    pub n_classes: Option<usize>,
    pub classes: Option<Vec<i32>>,
    pub c: Option<f64>,
    pub max_iter: Option<usize>,
    pub tol: Option<f64>,
}

impl ModelConfig {
    /// Read a config object; a non-object or a field of the wrong type is ERR_INVALID_MODEL.
    pub fn parse(config: &serde_json::Value) -> Result<Self> {
        let object = config
            .as_object()
            .ok_or_else(|| CoreError::invalid_model("the model config is not a JSON object"))?;
        let field = |key: &str| object.get(key).filter(|v| !v.is_null());
        let wrong = |key: &str, expected: &str| {
            CoreError::invalid_model(format!("model config '{key}' is not {expected}"))
        };
        let count = |key: &str| -> Result<Option<usize>> {
            field(key)
                .map(|v| {
                    v.as_u64()
                        .and_then(|n| usize::try_from(n).ok())
                        .ok_or_else(|| wrong(key, "a non-negative integer"))
                })
                .transpose()
        };
        let number = |key: &str| -> Result<Option<f64>> {
            field(key)
                .map(|v| v.as_f64().ok_or_else(|| wrong(key, "a number")))
                .transpose()
        };
        let model_type = field("model_type")
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| wrong("model_type", "a string"))
            })
            .transpose()?;
        let fit_intercept = field("fit_intercept")
            .map(|v| {
                v.as_bool()
                    .ok_or_else(|| wrong("fit_intercept", "a boolean"))
            })
            .transpose()?;
        let classes = field("classes")
            .map(|v| {
                v.as_array()
                    .and_then(|items| {
                        items
                            .iter()
                            .map(|item| item.as_i64().and_then(|n| i32::try_from(n).ok()))
                            .collect::<Option<Vec<i32>>>()
                    })
                    .ok_or_else(|| wrong("classes", "an array of 32-bit integers"))
            })
            .transpose()?;
        Ok(ModelConfig {
            model_type,
            n_features: count("n_features")?,
            fit_intercept,
            n_classes: count("n_classes")?,
            classes,
            c: number("c")?,
            max_iter: count("max_iter")?,
            tol: number("tol")?,
        })
    }
}

/// ERR_INVALID_MODEL unless a stated value (from metadata or config) equals the one the
/// tensors imply.
pub(crate) fn check_stated<T: PartialEq + std::fmt::Debug>(
    source: &str,
    key: &str,
    stated: Option<T>,
    actual: T,
) -> Result<()> {
    match stated {
        Some(value) if value != actual => Err(CoreError::invalid_model(format!(
            "{source} says {key} = {value:?}, but the tensors hold {actual:?}"
        ))),
        _ => Ok(()),
    }
}

/// A model fitted without intercept stores an intercept of exactly zero; anything else
/// means the file and its description disagree.
pub(crate) fn check_zero_intercept(source: &str, intercept: &[f32]) -> Result<()> {
    if intercept.iter().any(|&b| b != 0.0) {
        return Err(CoreError::invalid_model(format!(
            "{source} says fit_intercept = false, but the intercept is {intercept:?}"
        ))
        .with_tensor(INTERCEPT));
    }
    Ok(())
}
