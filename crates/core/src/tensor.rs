//! [`TensorView`]: the one currency between the parts of the core. Readers of every format
//! produce it, writers and models consume it, so nothing downstream cares where a tensor
//! came from.

use crate::dtype::DType;
use crate::error::{CoreError, Result};
use std::borrow::Cow;

/// A named tensor: dtype, shape (outermost first, row-major) and its little-endian bytes,
/// borrowed from a mapped file where possible, owned where it had to be decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorView<'a> {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: Cow<'a, [u8]>,
}

/// Number of elements of a shape, `None` on overflow. Rank 0 holds one element.
pub fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

impl<'a> TensorView<'a> {
    /// Build a view, checking that the bytes are exactly shape × dtype size.
    pub fn new(
        name: impl Into<String>,
        dtype: DType,
        shape: Vec<usize>,
        data: impl Into<Cow<'a, [u8]>>,
    ) -> Result<Self> {
        let name = name.into();
        let data = data.into();
        let expected = checked_numel(&shape)
            .and_then(|n| dtype.byte_len(n))
            .ok_or_else(|| {
                CoreError::size_mismatch(format!(
                    "shape {shape:?} of {dtype} overflows or does not fill whole bytes"
                ))
                .with_tensor(&name)
            })?;
        if expected != data.len() {
            return Err(CoreError::invalid_argument(format!(
                "shape {shape:?} of {dtype} needs {expected} bytes, data has {}",
                data.len()
            ))
            .with_tensor(&name));
        }
        Ok(TensorView {
            name,
            dtype,
            shape,
            data,
        })
    }

    /// A view of f32 values (copied into little-endian bytes).
    pub fn from_f32(name: impl Into<String>, shape: Vec<usize>, values: &[f32]) -> Result<Self> {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        TensorView::new(name, DType::F32, shape, bytes)
    }

    pub fn numel(&self) -> usize {
        // Checked at construction.
        checked_numel(&self.shape).unwrap_or(0)
    }

    pub fn into_owned(self) -> TensorView<'static> {
        TensorView {
            name: self.name,
            dtype: self.dtype,
            shape: self.shape,
            data: Cow::Owned(self.data.into_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_checks_length() {
        assert!(TensorView::new("a", DType::F32, vec![2], vec![0u8; 8]).is_ok());
        let e = TensorView::new("a", DType::F32, vec![2], vec![0u8; 7]).unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
        let e = TensorView::new("a", DType::F32, vec![usize::MAX, 2], vec![]).unwrap_err();
        assert_eq!(e.code(), "ERR_SIZE_MISMATCH");
        assert_eq!(checked_numel(&[]), Some(1));
    }
}
