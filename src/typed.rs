//! Tensor bytes → JavaScript typed arrays: a zero-copy view of shared memory when the data
//! is aligned for its element type, an aligned owned copy otherwise.
//!
//! Owned copies below [`LARGE_BUFFER_BYTES`] go to JS in an ArrayBuffer that V8 allocates
//! ([`SmallCopy`]); larger ones (huge-page outputs) and views are external buffers. The
//! difference is when memory comes back: Node runs the finalizers of external buffers only
//! between event-loop turns, so a synchronous loop of upcasts used to hold every copy until
//! it yielded (2,000 × 256 KiB ≈ 500 MiB), while V8 frees its own buffers as it collects.

use crate::error::CoreResult;
use napi::bindgen_prelude::*;
use stcore::buffer::{Output, LARGE_BUFFER_BYTES};
use stcore::cast::{self, Element};
use stcore::format::safetensors::{Memory, TensorBytes};
use stcore::{CoreError, DType};
use std::sync::Arc;

/// Any of the typed arrays a tensor can become.
pub enum TypedArrayOut {
    F32(Float32Array),
    F64(Float64Array),
    I8(Int8Array),
    U8(Uint8Array),
    I16(Int16Array),
    U16(Uint16Array),
    I32(Int32Array),
    U32(Uint32Array),
    I64(BigInt64Array),
    U64(BigUint64Array),
    Small(SmallCopy),
}

/// Elements whose bytes can be handed over as they are (little-endian hosts only, as the
/// rest of the crate).
trait ElementBytes: Send {
    fn bytes(&self) -> &[u8];
}

impl<T: Element + Send> ElementBytes for Vec<T> {
    fn bytes(&self) -> &[u8] {
        cast::element_bytes(self)
    }
}

/// A small owned array, copied into a V8-allocated ArrayBuffer when it reaches JS.
pub struct SmallCopy {
    kind: TypedArrayType,
    len: usize,
    data: Box<dyn ElementBytes>,
}

/// `values` as a typed array of `kind`: a [`SmallCopy`] when small, else `large(values)`.
fn owned<T: Element + Send + 'static>(
    values: Vec<T>,
    kind: TypedArrayType,
    large: impl FnOnce(Vec<T>) -> TypedArrayOut,
) -> TypedArrayOut {
    if std::mem::size_of_val(values.as_slice()) < LARGE_BUFFER_BYTES {
        TypedArrayOut::Small(SmallCopy {
            kind,
            len: values.len(),
            data: Box::new(values),
        })
    } else {
        large(values)
    }
}

impl SmallCopy {
    /// # Safety
    /// `env` must be the current environment (as in any `to_napi_value`).
    unsafe fn to_napi_value(env: napi::sys::napi_env, val: Self) -> Result<napi::sys::napi_value> {
        use napi::sys;
        let bytes = val.data.bytes();
        let mut data = std::ptr::null_mut();
        let mut buffer = std::ptr::null_mut();
        let mut array = std::ptr::null_mut();
        // SAFETY: plain Node-API calls on the current env; the new buffer holds exactly
        // `bytes.len()` writable bytes at `data` (null, and not written, when empty).
        unsafe {
            napi::check_status!(
                sys::napi_create_arraybuffer(env, bytes.len(), &mut data, &mut buffer),
                "cannot allocate an ArrayBuffer of {} bytes",
                bytes.len()
            )?;
            if !bytes.is_empty() {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), data.cast::<u8>(), bytes.len());
            }
            napi::check_status!(
                sys::napi_create_typedarray(env, val.kind as i32, val.len, buffer, 0, &mut array),
                "cannot create a typed array"
            )?;
        }
        Ok(array)
    }
}

impl TypeName for TypedArrayOut {
    fn type_name() -> &'static str {
        "TypedArray"
    }
    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ToNapiValue for TypedArrayOut {
    unsafe fn to_napi_value(env: napi::sys::napi_env, val: Self) -> Result<napi::sys::napi_value> {
        // SAFETY: forwarding to each array type's own conversion.
        unsafe {
            match val {
                TypedArrayOut::F32(a) => Float32Array::to_napi_value(env, a),
                TypedArrayOut::F64(a) => Float64Array::to_napi_value(env, a),
                TypedArrayOut::I8(a) => Int8Array::to_napi_value(env, a),
                TypedArrayOut::U8(a) => Uint8Array::to_napi_value(env, a),
                TypedArrayOut::I16(a) => Int16Array::to_napi_value(env, a),
                TypedArrayOut::U16(a) => Uint16Array::to_napi_value(env, a),
                TypedArrayOut::I32(a) => Int32Array::to_napi_value(env, a),
                TypedArrayOut::U32(a) => Uint32Array::to_napi_value(env, a),
                TypedArrayOut::I64(a) => BigInt64Array::to_napi_value(env, a),
                TypedArrayOut::U64(a) => BigUint64Array::to_napi_value(env, a),
                TypedArrayOut::Small(a) => SmallCopy::to_napi_value(env, a),
            }
        }
    }
}

/// What form the caller asked for (`GetOptions.as`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ReadAs {
    Native,
    F32,
    F64,
    Raw,
}

#[derive(Clone, Copy, Debug)]
pub struct ReadMode {
    pub as_: ReadAs,
    pub copy: bool,
}

impl ReadMode {
    pub fn parse(as_: Option<&str>, copy: Option<bool>, default: ReadAs) -> CoreResult<ReadMode> {
        let as_ = match as_ {
            None => default,
            Some("native") => ReadAs::Native,
            Some("F32") => ReadAs::F32,
            Some("F64") => ReadAs::F64,
            Some("raw") => ReadAs::Raw,
            Some(other) => {
                return Err(CoreError::invalid_argument(format!(
                    "options.as must be 'native', 'F32', 'F64' or 'raw', not '{other}'"
                )))
            }
        };
        Ok(ReadMode {
            as_,
            copy: copy.unwrap_or(false),
        })
    }
}

macro_rules! view_or_copy {
    ($variant:ident, $array:ident, $kind:ident, $t:ty, $bytes:expr, $copy:expr) => {{
        let copy_of = |values: Vec<$t>| {
            owned(values, TypedArrayType::$kind, |v| {
                TypedArrayOut::$variant($array::new(v))
            })
        };
        let bytes: TensorBytes = $bytes;
        match bytes {
            TensorBytes::Shared { memory, start, len } if !$copy && len > 0 => {
                let slice = &memory[start..start + len];
                if (slice.as_ptr() as usize) % std::mem::align_of::<$t>() == 0 {
                    let keep: Arc<Memory> = Arc::clone(memory);
                    let ptr = slice.as_ptr() as *mut $t;
                    let n = len / std::mem::size_of::<$t>();
                    // SAFETY: `ptr` is aligned and covers `n` elements inside `memory`, which
                    // the finalizer keeps alive (the Arc moves into it) until JS drops the
                    // array. The memory is a private copy-on-write map or an owned buffer,
                    // so JS writes cannot reach the file.
                    TypedArrayOut::$variant(unsafe {
                        $array::with_external_data(ptr, n, move |_, _| drop(keep))
                    })
                } else {
                    copy_of(cast::copy_elements::<$t>(slice))
                }
            }
            other => copy_of(owned_elements::<$t>(other)),
        }
    }};
}

/// A Float32Array owning a conversion's output (a huge-page buffer is handed over as is).
fn f32_array(out: Output<f32>) -> TypedArrayOut {
    match out {
        Output::Small(v) => owned(v, TypedArrayType::Float32, |v| {
            TypedArrayOut::F32(Float32Array::new(v))
        }),
        Output::Large(mut buf) if !buf.is_empty() => {
            let ptr = buf.as_mut_ptr();
            let n = buf.len();
            // SAFETY: `buf` owns `n` initialised f32 at `ptr`; moving it into the finalizer
            // keeps the mapping alive until JS collects the array.
            TypedArrayOut::F32(unsafe {
                Float32Array::with_external_data(ptr, n, move |_, _| drop(buf))
            })
        }
        Output::Large(_) => TypedArrayOut::F32(Float32Array::new(Vec::new())),
    }
}

/// Upcast to f32, first mapping the source pages in one call when they are file-backed.
fn convert_f32(dtype: DType, bytes: &TensorBytes) -> CoreResult<TypedArrayOut> {
    if let TensorBytes::Shared { memory, start, len } = bytes {
        memory.populate_once(*start, *len);
    }
    cast::to_f32_output(dtype, bytes.as_slice()).map(f32_array)
}

/// Elements of `T` from bytes we are about to drop anyway.
fn owned_elements<T: Element>(bytes: TensorBytes) -> Vec<T> {
    cast::copy_elements::<T>(bytes.as_slice())
}

fn native(dtype: DType, bytes: TensorBytes, copy: bool) -> CoreResult<TypedArrayOut> {
    Ok(match dtype {
        DType::F32 | DType::C64 => view_or_copy!(F32, Float32Array, Float32, f32, bytes, copy),
        DType::F64 => view_or_copy!(F64, Float64Array, Float64, f64, bytes, copy),
        DType::I8 => view_or_copy!(I8, Int8Array, Int8, i8, bytes, copy),
        DType::U8 | DType::BOOL => view_or_copy!(U8, Uint8Array, Uint8, u8, bytes, copy),
        DType::I16 => view_or_copy!(I16, Int16Array, Int16, i16, bytes, copy),
        DType::U16 => view_or_copy!(U16, Uint16Array, Uint16, u16, bytes, copy),
        DType::I32 => view_or_copy!(I32, Int32Array, Int32, i32, bytes, copy),
        DType::U32 => view_or_copy!(U32, Uint32Array, Uint32, u32, bytes, copy),
        DType::I64 => view_or_copy!(I64, BigInt64Array, BigInt64, i64, bytes, copy),
        DType::U64 => view_or_copy!(U64, BigUint64Array, BigUint64, u64, bytes, copy),
        d if d.upcasts_to_f32() => convert_f32(d, &bytes)?,
        // F4 / F6: packed sub-byte values have no JS number type; hand out the stored bytes.
        _ => view_or_copy!(U8, Uint8Array, Uint8, u8, bytes, copy),
    })
}

/// Turn a tensor's bytes into the typed array `mode` asks for.
pub fn to_typed_array(
    dtype: DType,
    bytes: TensorBytes,
    mode: ReadMode,
) -> CoreResult<TypedArrayOut> {
    match mode.as_ {
        ReadAs::Native => native(dtype, bytes, mode.copy),
        ReadAs::Raw => Ok(view_or_copy!(U8, Uint8Array, Uint8, u8, bytes, mode.copy)),
        ReadAs::F32 if dtype == DType::F32 => native(dtype, bytes, mode.copy),
        ReadAs::F64 if dtype == DType::F64 => native(dtype, bytes, mode.copy),
        ReadAs::F32 => convert_f32(dtype, &bytes),
        ReadAs::F64 => Ok(owned(
            cast::to_f64_vec(dtype, bytes.as_slice())?,
            TypedArrayType::Float64,
            |v| TypedArrayOut::F64(Float64Array::new(v)),
        )),
    }
}
