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

/// An owned copy of several tensors' bytes, packed into one buffer: a snapshot that a
/// background write can read while the caller reuses its own arrays.
///
/// One buffer, not one `Vec` per tensor: a large snapshot lands in huge pages
/// ([`crate::buffer::zeroed`]) instead of a 4 KiB page fault per page of each copy.
pub struct PackedTensors {
    bytes: Vec<u8>,
    entries: Vec<(String, DType, Vec<usize>, std::ops::Range<usize>)>,
}

impl PackedTensors {
    /// Copy `views` (in order) into one buffer.
    pub fn pack(views: &[TensorView<'_>]) -> Result<Self> {
        let total = views
            .iter()
            .try_fold(0usize, |n, v| n.checked_add(v.data.len()))
            .ok_or_else(|| CoreError::invalid_argument("tensors too large to copy"))?;
        let mut bytes = crate::buffer::zeroed::<u8>(total)?;
        let dst = bytes.as_mut_slice();
        let mut entries = Vec::with_capacity(views.len());
        let mut at = 0;
        for v in views {
            let range = at..at + v.data.len();
            dst[range.clone()].copy_from_slice(&v.data);
            at = range.end;
            entries.push((v.name.clone(), v.dtype, v.shape.clone(), range));
        }
        Ok(PackedTensors { bytes, entries })
    }

    /// Views of the packed tensors, in the order given to [`pack`](Self::pack).
    pub fn views(&self) -> Vec<TensorView<'_>> {
        let bytes = self.bytes.as_slice();
        self.entries
            .iter()
            .map(|(name, dtype, shape, range)| TensorView {
                name: name.clone(),
                dtype: *dtype,
                shape: shape.clone(),
                data: Cow::Borrowed(bytes.get(range.clone()).unwrap_or_default()),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_tensors_give_back_the_same_views() {
        let big: Vec<f32> = (0..(3 << 20)).map(|i| i as f32).collect(); // 12 MiB: huge pages
        let views = vec![
            TensorView::from_f32("a", vec![2], &[1.0, 2.0]).unwrap(),
            TensorView::new("empty", DType::I64, vec![0, 3], Vec::new()).unwrap(),
            TensorView::from_f32("big", vec![3, 1 << 20], &big).unwrap(),
            TensorView::new("u8", DType::U8, vec![3], vec![7u8, 8, 9]).unwrap(),
        ];
        let packed = PackedTensors::pack(&views).unwrap();
        assert_eq!(packed.views(), views);
        assert_eq!(PackedTensors::pack(&[]).unwrap().views(), vec![]);
    }

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
