//! Strided views made row-major: PyTorch tensors that are views (transposed, sliced with
//! steps, expanded with stride 0, channels-last) and NumPy arrays in Fortran order are read
//! into fresh row-major buffers; byte order is fixed here too.

use crate::error::{CoreError, Result};

/// Whether a view with these strides (in elements) is already row-major and dense. Sizes
/// of 1 (and empty views) place no constraint on their stride.
pub fn is_row_major(shape: &[usize], strides: &[usize]) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut expect = 1usize;
    for (&d, &s) in shape.iter().zip(strides).rev() {
        if d != 1 && s != expect {
            return false;
        }
        expect = expect.saturating_mul(d);
    }
    true
}

/// The element index one past the last element a view touches (0 for an empty view), or
/// `None` on overflow.
pub fn extent(offset: usize, shape: &[usize], strides: &[usize]) -> Option<usize> {
    if shape.contains(&0) {
        return Some(0);
    }
    shape
        .iter()
        .zip(strides)
        .try_fold(offset, |acc, (&d, &s)| {
            acc.checked_add((d - 1).checked_mul(s)?)
        })?
        .checked_add(1)
}

/// The row-major bytes of the view `offset`/`shape`/`strides` (in elements of `es` bytes)
/// of `src`. Refuses (never reads past) a view that does not fit `src`.
pub fn gather(
    src: &[u8],
    es: usize,
    offset: usize,
    shape: &[usize],
    strides: &[usize],
) -> Result<Vec<u8>> {
    let too_big = || CoreError::size_mismatch("a strided view reaches past its storage");
    if shape.len() != strides.len() || es == 0 {
        return Err(CoreError::invalid_argument(
            "shape and strides differ in rank",
        ));
    }
    let numel = shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(too_big)?;
    let out_len = numel.checked_mul(es).ok_or_else(too_big)?;
    let end = extent(offset, shape, strides).ok_or_else(too_big)?;
    if end.checked_mul(es).is_none_or(|e| e > src.len()) {
        return Err(too_big());
    }
    if numel == 0 {
        return Ok(Vec::new());
    }
    // Drop unit dimensions and merge dimensions that are contiguous with their inner one.
    let mut dims: Vec<(usize, usize)> = Vec::with_capacity(shape.len());
    for (&d, &s) in shape.iter().zip(strides).rev() {
        if d == 1 {
            continue;
        }
        match dims.last_mut() {
            Some(inner) if s == inner.0 * inner.1 => inner.0 *= d,
            _ => dims.push((d, s)),
        }
    }
    dims.reverse();
    let Some(&(inner_n, inner_s)) = dims.last() else {
        return Ok(src[offset * es..(offset + 1) * es].to_vec());
    };
    let outer = &dims[..dims.len() - 1];
    let mut out = crate::buffer::zeroed_vec(out_len, &"a strided view")?;
    let row = inner_n * es;
    let mut idx = vec![0usize; outer.len()];
    let mut base = offset;
    for dst in out.chunks_exact_mut(row) {
        if inner_s == 1 {
            dst.copy_from_slice(&src[base * es..base * es + row]);
        } else {
            match es {
                1 => copy_strided::<1>(src, dst, base, inner_s),
                2 => copy_strided::<2>(src, dst, base, inner_s),
                4 => copy_strided::<4>(src, dst, base, inner_s),
                8 => copy_strided::<8>(src, dst, base, inner_s),
                _ => {
                    for (i, d) in dst.chunks_exact_mut(es).enumerate() {
                        let p = (base + i * inner_s) * es;
                        d.copy_from_slice(&src[p..p + es]);
                    }
                }
            }
        }
        // Next row: an odometer over the outer dimensions.
        for k in (0..outer.len()).rev() {
            idx[k] += 1;
            base += outer[k].1;
            if idx[k] < outer[k].0 {
                break;
            }
            base -= outer[k].1 * outer[k].0;
            idx[k] = 0;
        }
    }
    Ok(out)
}

fn copy_strided<const ES: usize>(src: &[u8], dst: &mut [u8], base: usize, stride: usize) {
    for (i, d) in dst.chunks_exact_mut(ES).enumerate() {
        let p = (base + i * stride) * ES;
        d.copy_from_slice(&src[p..p + ES]);
    }
}

/// Reverse the bytes of every `unit`-byte element in place (big-endian → little-endian).
pub fn swap_bytes(buf: &mut [u8], unit: usize) {
    if unit > 1 {
        for e in buf.chunks_exact_mut(unit) {
            e.reverse();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain definition: element (i0, i1, …) of the view is src[offset + Σ i_k·s_k].
    fn reference(
        src: &[u8],
        es: usize,
        offset: usize,
        shape: &[usize],
        strides: &[usize],
    ) -> Vec<u8> {
        let numel: usize = shape.iter().product();
        let mut out = Vec::new();
        for flat in 0..numel {
            let mut rem = flat;
            let mut at = offset;
            for k in (0..shape.len()).rev() {
                at += (rem % shape[k]) * strides[k];
                rem /= shape[k];
            }
            out.extend_from_slice(&src[at * es..(at + 1) * es]);
        }
        out
    }

    #[test]
    fn gather_matches_the_definition_for_many_views() {
        let src: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
        let cases: &[(usize, &[usize], &[usize])] = &[
            (0, &[4, 6], &[6, 1]),
            (0, &[6, 4], &[1, 6]),
            (3, &[2, 3, 4], &[1, 2, 6]),
            (5, &[3, 5], &[0, 1]),
            (1, &[3, 1, 5], &[10, 99, 2]),
            (7, &[], &[]),
            (0, &[2, 3, 4, 2], &[24, 1, 6, 3]),
            (2, &[4], &[3]),
            (0, &[0, 5], &[5, 1]),
            (9, &[2, 2, 2], &[0, 0, 0]),
        ];
        for es in [1, 2, 4, 8, 3] {
            for &(offset, shape, strides) in cases {
                let got = gather(&src, es, offset, shape, strides).unwrap();
                let want = reference(&src, es, offset, shape, strides);
                assert_eq!(
                    got, want,
                    "es {es} offset {offset} shape {shape:?} strides {strides:?}"
                );
            }
        }
    }

    #[test]
    fn views_past_their_storage_are_refused_not_read() {
        let src = vec![0u8; 24];
        assert!(gather(&src, 4, 0, &[6], &[1]).is_ok());
        assert_eq!(
            gather(&src, 4, 1, &[6], &[1]).unwrap_err().code(),
            "ERR_SIZE_MISMATCH"
        );
        assert_eq!(
            gather(&src, 4, 0, &[3, 2], &[3, 1]).unwrap_err().code(),
            "ERR_SIZE_MISMATCH"
        );
        assert!(gather(&src, 4, 0, &[usize::MAX, 2], &[1, 1]).is_err());
        assert!(gather(&src, 4, usize::MAX, &[1], &[1]).is_err());
    }

    #[test]
    fn row_major_detection() {
        assert!(is_row_major(&[2, 3], &[3, 1]));
        assert!(is_row_major(&[2, 1, 3], &[3, 77, 1]));
        assert!(is_row_major(&[0, 3], &[0, 0]));
        assert!(!is_row_major(&[2, 3], &[1, 2]));
        assert!(!is_row_major(&[3, 5], &[0, 1]));
        assert!(is_row_major(&[], &[]));
    }
}
