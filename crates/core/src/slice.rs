//! Slicing: which byte spans of a tensor a request for leading-dimension ranges selects
//! (what `TensorSource::select` and every reader by ranges of a file share).

use crate::dtype::DType;
use crate::error::{CoreError, Result};

/// One entry of a slice request, per leading dimension.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SliceArg {
    /// The whole dimension.
    Full,
    /// One index; the dimension is dropped from the result (negative counts from the end).
    Index(i64),
    /// Half-open `[start, stop)`; negative values count from the end.
    Range(i64, i64),
}

/// The product of `dims`: 0 if any is 0 (even when others would overflow), `None` on overflow.
fn zero_aware_product(mut dims: impl Iterator<Item = usize> + Clone) -> Option<usize> {
    if dims.clone().any(|d| d == 0) {
        return Some(0);
    }
    dims.try_fold(1usize, |acc, d| acc.checked_mul(d))
}

/// The contiguous byte spans (relative to the tensor's start) that a slice selects.
pub struct SlicePlan {
    pub shape: Vec<usize>,
    pub spans: Vec<(usize, usize)>,
    pub byte_len: usize,
}

impl SlicePlan {
    /// The plan of `args` over a tensor of `dtype` and `shape` (row-major, outermost first).
    pub fn new(dtype: DType, shape: &[usize], args: &[SliceArg]) -> Result<SlicePlan> {
        let elem = dtype.size().ok_or_else(|| {
            CoreError::unsupported_dtype(format!("{dtype} packs below a byte and cannot be sliced"))
        })?;
        if args.len() > shape.len() {
            return Err(CoreError::invalid_argument(format!(
                "{} slice ranges given for a tensor of rank {}",
                args.len(),
                shape.len()
            )));
        }
        // Normalise each argument to [start, stop) and whether the dim is kept. i128: indices
        // come from the caller as i64 and dimensions may exceed i64::MAX on zero-size tensors.
        let mut bounds = Vec::with_capacity(args.len());
        for (axis, (&arg, &dim)) in args.iter().zip(shape).enumerate() {
            let dim_i = dim as i128;
            let resolve = |v: i64| -> i128 {
                let v = v as i128;
                if v < 0 {
                    v + dim_i
                } else {
                    v
                }
            };
            let (start, stop, keep) = match arg {
                SliceArg::Full => (0, dim_i, true),
                SliceArg::Index(i) => {
                    let i = resolve(i);
                    (i, i + 1, false)
                }
                SliceArg::Range(a, b) => (resolve(a), resolve(b), true),
            };
            if start < 0 || stop < start || stop > dim_i {
                return Err(CoreError::invalid_argument(format!(
                    "slice {arg:?} is out of bounds for axis {axis} of size {dim}"
                )));
            }
            bounds.push((start as usize, stop as usize, keep));
        }
        let mut out_shape = Vec::with_capacity(shape.len());
        for &(a, b, keep) in &bounds {
            if keep {
                out_shape.push(b - a);
            }
        }
        out_shape.extend_from_slice(&shape[bounds.len()..]);
        // Bytes of the selection and of one contiguous block below the last sliced axis. A
        // zero anywhere makes a product zero, whatever the other (possibly huge) dimensions.
        let selected = zero_aware_product(bounds.iter().map(|&(a, b, _)| b - a));
        let inner = zero_aware_product(shape[bounds.len()..].iter().copied())
            .and_then(|n| n.checked_mul(elem));
        let total = match (selected, inner) {
            (Some(0), _) | (_, Some(0)) => 0,
            (Some(s), Some(i)) => s.checked_mul(i).ok_or_else(|| {
                CoreError::size_mismatch(format!("slice of shape {shape:?} overflows"))
            })?,
            _ => {
                return Err(CoreError::size_mismatch(format!(
                    "slice of shape {shape:?} overflows"
                )))
            }
        };
        let inner = inner.unwrap_or(0);
        let mut spans: Vec<(usize, usize)> = Vec::new();
        if total > 0 {
            // Row-major strides (in bytes) of the sliced axes.
            let mut strides = vec![0usize; bounds.len()];
            let mut acc = inner;
            for axis in (0..bounds.len()).rev() {
                strides[axis] = acc;
                // Only reached when nothing is zero: the products are within the tensor's size.
                acc = acc.saturating_mul(shape[axis]);
            }
            // Iterate the selected index tuples of all axes but the last, odometer style;
            // the last sliced axis is one contiguous run per tuple.
            let k = bounds.len();
            if k == 0 {
                spans.push((0, inner));
            } else {
                let mut idx: Vec<usize> = bounds.iter().map(|&(a, _, _)| a).collect();
                loop {
                    let offset: usize = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
                    let (a, b, _) = bounds[k - 1];
                    let len = (b - a) * strides[k - 1];
                    match spans.last_mut() {
                        Some((s, l)) if *s + *l == offset => *l += len,
                        _ => spans.push((offset, len)),
                    }
                    // Advance axes k-2 .. 0.
                    let mut axis = k - 1;
                    loop {
                        if axis == 0 {
                            return Ok(SlicePlan {
                                shape: out_shape,
                                spans,
                                byte_len: total,
                            });
                        }
                        axis -= 1;
                        idx[axis] += 1;
                        if idx[axis] < bounds[axis].1 {
                            break;
                        }
                        idx[axis] = bounds[axis].0;
                    }
                }
            }
        }
        Ok(SlicePlan {
            shape: out_shape,
            spans,
            byte_len: total,
        })
    }
}
