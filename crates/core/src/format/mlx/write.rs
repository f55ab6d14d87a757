//! Writing `weights.mlx`, number by number through a buffered writer.

use super::{MlxDtype, MLX_WRITE_VERSION};
use crate::dtype::DType;
use crate::tensor::TensorView;
use std::collections::BTreeMap;
use std::io::{self, Write};

// ---------------------------------------------------------------------------------------
// Writing.

pub(super) fn write_document(
    w: &mut impl Write,
    tensors: &[TensorView<'_>],
    metadata: Option<&BTreeMap<String, String>>,
) -> io::Result<()> {
    write!(w, "{{\"version\":\"{MLX_WRITE_VERSION}\"")?;
    if let Some(metadata) = metadata {
        w.write_all(b",\"metadata\":")?;
        serde_json::to_writer(&mut *w, metadata)?;
    }
    w.write_all(b",\"weights\":{")?;
    for (i, tensor) in tensors.iter().enumerate() {
        w.write_all(if i == 0 { b"\n" } else { b",\n" })?;
        write_tensor(w, tensor)?;
    }
    w.write_all(b"\n}}\n")
}

fn write_tensor(w: &mut impl Write, tensor: &TensorView<'_>) -> io::Result<()> {
    let dtype = MlxDtype::of(tensor.dtype)
        .ok_or_else(|| io::Error::other(format!("{} cannot be written", tensor.dtype)))?;
    serde_json::to_writer(&mut *w, &tensor.name)?;
    write!(w, ":{{\"dtype\":\"{}\",\"shape\":[", dtype.name)?;
    for (i, dim) in tensor.shape.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        write!(w, "{dim}")?;
    }
    w.write_all(b"],\"data\":[")?;
    let size = tensor.dtype.size().unwrap_or(1);
    for (i, element) in tensor.data.chunks_exact(size).enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        match tensor.dtype {
            DType::F32 => write_float(
                w,
                f32::from_le_bytes([element[0], element[1], element[2], element[3]]),
            )?,
            DType::F16 => write_float(
                w,
                half::f16::from_le_bytes([element[0], element[1]]).to_f32(),
            )?,
            DType::BF16 => write_float(
                w,
                half::bf16::from_le_bytes([element[0], element[1]]).to_f32(),
            )?,
            DType::I32 => write!(
                w,
                "{}",
                i32::from_le_bytes([element[0], element[1], element[2], element[3]])
            )?,
            DType::U32 => write!(
                w,
                "{}",
                u32::from_le_bytes([element[0], element[1], element[2], element[3]])
            )?,
            other => return Err(io::Error::other(format!("{other} cannot be written"))),
        }
    }
    w.write_all(b"]}")
}

/// The shortest decimal that reads back as `v` (f16/bf16 values are exact f32 values, and
/// the nearest half to that decimal is the half itself). Plain notation in JavaScript's range
/// [1e-6, 1e21), exponent notation outside it to keep subnormals short.
fn write_float(w: &mut impl Write, v: f32) -> io::Result<()> {
    if v.is_nan() {
        return w.write_all(b"\"NaN\"");
    }
    if v.is_infinite() {
        return w.write_all(if v > 0.0 {
            b"\"Infinity\""
        } else {
            b"\"-Infinity\""
        });
    }
    if v == 0.0 {
        // "-0" would parse as the integer 0 and lose the sign.
        return w.write_all(if v.is_sign_negative() { b"-0.0" } else { b"0" });
    }
    let magnitude = v.abs();
    if (1e-6..1e21).contains(&magnitude) {
        write!(w, "{v}")
    } else {
        write!(w, "{v:e}")
    }
}
