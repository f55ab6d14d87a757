//! Tensor bytes → JavaScript typed arrays, in one of three forms:
//!
//! - **Copies in V8 buffers** ([`Fill`]): every output of a synchronous call is written
//!   straight into an ArrayBuffer that V8 allocates, when the value is handed to JS. V8
//!   counts it, collects it and frees it like any ArrayBuffer a script makes, so a
//!   synchronous loop that drops its outputs stays flat without ever yielding. Small outputs
//!   of tasks are copied into one the same way at resolve.
//! - **Vectors handed over**: a task's large output (4 MiB or more), written on a worker
//!   thread into a vector of its own, becomes an external ArrayBuffer over that vector (no
//!   copy on the JS thread). Node frees it between event-loop turns, which a task's result
//!   reaches JS through anyway.
//! - **Views** of the file's memory (an external buffer over the private mapping, which keeps
//!   the mapping alive), only when the caller asks for one (`copy: false`) and the bytes are
//!   aligned for their element type. Node frees views, and so unmaps a closed file, only
//!   between event-loop turns: a copy by default keeps a synchronous loop over many files
//!   from holding every one of them mapped.

use crate::error::CoreResult;
use napi::bindgen_prelude::*;
use stcore::buffer::LARGE_BUFFER_BYTES;
use stcore::cast::{self, Element};
use stcore::format::safetensors::{Memory, TensorBytes};
use stcore::memory::Block;
pub use stcore::read_as::ReadAs;
use stcore::read_as::{self, Elements, Form};
use stcore::{CoreError, DType, F32Decoder};
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
    Filled(Fill),
}

/// An output written into a V8-allocated ArrayBuffer when it reaches JS (on the JS thread).
pub struct Fill(Box<dyn FnOnce(napi::sys::napi_env) -> Result<napi::sys::napi_value> + Send>);

impl Fill {
    /// `len` elements of `T`, written by `write` (which must set every element and run no
    /// JavaScript).
    fn new<T: Element>(
        kind: TypedArrayType,
        len: usize,
        write: impl FnOnce(&mut [T]) -> CoreResult<()> + Send + 'static,
    ) -> Fill {
        // SAFETY: called by `to_napi_value` with the current env.
        Fill(Box::new(move |env| unsafe {
            v8_array(env, kind, len, write)
        }))
    }

    /// A copy of `values` (small: always a V8 buffer).
    fn of_vec<T: Element>(kind: TypedArrayType, values: Vec<T>) -> Fill {
        // SAFETY: called by `to_napi_value` with the current env.
        Fill(Box::new(move |env| unsafe {
            v8_array(env, kind, values.len(), |dst: &mut [T]| {
                dst.copy_from_slice(&values);
                Ok(())
            })
        }))
    }
}

/// A new typed array of `len` elements of `T` whose ArrayBuffer V8 allocates, filled by
/// `write` (large buffers get transparent huge pages asked for first).
///
/// # Safety
/// `env` must be the current environment. `write` must run no JavaScript: the buffer is
/// written through a raw pointer, which is sound only because no JS value refers to the
/// buffer yet and nothing else can run meanwhile.
unsafe fn v8_array<T: Element>(
    env: napi::sys::napi_env,
    kind: TypedArrayType,
    len: usize,
    write: impl FnOnce(&mut [T]) -> CoreResult<()>,
) -> Result<napi::sys::napi_value> {
    use napi::sys;
    let throw = |e: CoreError| crate::error::to_js(&Env::from_raw(env), &e);
    let bytes = len
        .checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| throw(CoreError::invalid_argument("array size overflows")))?;
    // V8 aborts the process when it cannot allocate an ArrayBuffer: ask the kernel first.
    if bytes >= LARGE_BUFFER_BYTES {
        stcore::buffer::check_allocatable(bytes).map_err(throw)?;
    }
    let mut data = std::ptr::null_mut();
    let mut buffer = std::ptr::null_mut();
    let mut array = std::ptr::null_mut();
    // SAFETY: plain Node-API calls on the current env. The new buffer holds exactly `bytes`
    // zeroed, writable bytes at `data` (possibly null when empty), aligned for T (checked);
    // no JS value refers to it until this function returns and `write` runs no JS, so nothing
    // can detach or free it while it is written.
    unsafe {
        napi::check_status!(
            sys::napi_create_arraybuffer(env, bytes, &mut data, &mut buffer),
            "cannot allocate an ArrayBuffer of {} bytes",
            bytes
        )?;
        let dst: &mut [T] = if bytes == 0 || data.is_null() {
            &mut []
        } else if !(data as usize).is_multiple_of(std::mem::align_of::<T>()) {
            return Err(throw(CoreError::invalid_argument(
                "an ArrayBuffer is not aligned for its elements",
            )));
        } else {
            stcore::buffer::prepare_output(data.cast(), bytes);
            std::slice::from_raw_parts_mut(data.cast::<T>(), len)
        };
        write(dst).map_err(throw)?;
        napi::check_status!(
            sys::napi_create_typedarray(env, kind as i32, len, buffer, 0, &mut array),
            "cannot create a typed array"
        )?;
    }
    Ok(array)
}

/// A typed array made during a synchronous call (see [`new_array`]).
pub struct JsArray(napi::sys::napi_value);

impl TypeName for JsArray {
    fn type_name() -> &'static str {
        "TypedArray"
    }
    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ToNapiValue for JsArray {
    unsafe fn to_napi_value(_env: napi::sys::napi_env, val: Self) -> Result<napi::sys::napi_value> {
        Ok(val.0)
    }
}

/// For synchronous calls: a typed array of `len` elements of `T`, written now by `write`
/// (which must run no JavaScript — take any JS memory it reads only inside it) into an
/// ArrayBuffer that V8 allocates, and so frees when it collects.
pub fn new_array<T: Element>(
    env: &Env,
    kind: TypedArrayType,
    len: usize,
    write: impl FnOnce(&mut [T]) -> CoreResult<()>,
) -> Result<JsArray> {
    // SAFETY: `env` is the live env of the current call; `write`'s contract is ours.
    unsafe { v8_array(env.raw(), kind, len, write) }.map(JsArray)
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
                // The deferred fill is our code running after the call's body: guarded like it.
                TypedArrayOut::Filled(a) => {
                    crate::error::guard(&Env::from_raw(env), "filling a typed array", || (a.0)(env))
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct ReadMode {
    pub as_: ReadAs,
    /// `Some(false)`: a view of the file's memory whenever the bytes are aligned and need no
    /// conversion; otherwise (the default) an owned copy.
    pub copy: Option<bool>,
}

/// Whether `len` bytes at `ptr` go out as a view under `copy`: only when asked for, and
/// aligned for their element type.
fn as_view(copy: Option<bool>, ptr: *const u8, len: usize, align: usize) -> bool {
    copy == Some(false) && len > 0 && (ptr as usize).is_multiple_of(align)
}

impl ReadMode {
    pub fn parse(as_: Option<&str>, copy: Option<bool>, default: ReadAs) -> CoreResult<ReadMode> {
        let as_ = match as_ {
            None => default,
            Some(name) => ReadAs::parse(name)?,
        };
        Ok(ReadMode { as_, copy })
    }
}

/// A tensor's bytes kept for work done later (on the JS thread, when the array reaches JS).
enum Source {
    Shared {
        memory: Arc<Memory>,
        start: usize,
        len: usize,
    },
    Owned(Vec<u8>),
}

impl Source {
    fn new(bytes: TensorBytes<'_>) -> Source {
        match bytes {
            TensorBytes::Shared { memory, start, len } => Source::Shared {
                memory: Arc::clone(memory),
                start,
                len,
            },
            TensorBytes::Owned(v) => Source::Owned(v),
        }
    }

    /// Map the bytes' pages now (reading them from disk if need be), for a read later on
    /// another thread ([`Memory::populate_once`]).
    fn prefetch(&self) {
        if let Source::Shared { memory, start, len } = self {
            memory.populate_once(*start, *len);
        }
    }

    /// Read the bytes once for a conversion: a file mapping's pages are mapped in one call
    /// first (not one fault per 4 KiB page as the conversion walks them) and given back
    /// after, unless JS holds a view of them ([`stcore::pages`]).
    fn convert<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Source::Shared { memory, start, len } => memory.read_once(*start, *len, f),
            Source::Owned(v) => f(v),
        }
    }

    /// Like [`Source::convert`] for a conversion that maps each run of bytes to one element
    /// of `dst` (or, given a `block`, each block of bytes to its elements: a decoder): the
    /// first time, a file's bytes are read with positioned reads on every core (no page
    /// mapped); else large tensors are read in parts, each given back once converted
    /// ([`Memory::convert_once`], [`Memory::convert_blocks_once`]).
    fn convert_parts<T: Send>(
        &self,
        dst: &mut [T],
        block: Option<Block>,
        f: impl Fn(&[u8], &mut [T]) -> CoreResult<()> + Sync,
    ) -> CoreResult<()> {
        match (self, block) {
            (Source::Shared { memory, start, len }, None) => {
                memory.convert_once(*start, *len, dst, f)
            }
            (Source::Shared { memory, start, len }, Some(block)) => {
                memory.convert_blocks_once(*start, *len, dst, block, f)
            }
            (Source::Owned(v), _) => f(v, dst),
        }
    }
}

/// How a task's large output reaches JS: its vector handed over as an external buffer.
type External<T> = fn(Vec<T>) -> TypedArrayOut;

macro_rules! external {
    ($variant:ident, $array:ident) => {
        |mut values: Vec<_>| {
            let ptr = values.as_mut_ptr();
            let n = values.len();
            // SAFETY: `values` owns `n` initialised elements at `ptr` (n > 0: only large
            // outputs are handed over); moving it into the finalizer keeps them alive, at the
            // same address, until JS collects the array.
            TypedArrayOut::$variant(unsafe {
                $array::with_external_data(ptr, n, move |_, _| drop(values))
            })
        }
    };
}

/// An owned output of `n` elements written by `write` (which must set every element): on the
/// JS thread, when it reaches JS, straight into a V8 buffer; in a task, now, into a vector —
/// copied into a V8 buffer at resolve when small, handed over as is when large.
fn produce<T: Element + Default>(
    kind: TypedArrayType,
    n: usize,
    write: impl FnOnce(&mut [T]) -> CoreResult<()> + Send + 'static,
    external: External<T>,
) -> CoreResult<TypedArrayOut> {
    if !crate::tasks::in_task() {
        return Ok(TypedArrayOut::Filled(Fill::new(kind, n, write)));
    }
    let mut out = stcore::buffer::zeroed::<T>(n)?;
    write(&mut out)?;
    Ok(
        if n == 0 || n * std::mem::size_of::<T>() < LARGE_BUFFER_BYTES {
            TypedArrayOut::Filled(Fill::of_vec(kind, out))
        } else {
            external(out)
        },
    )
}

/// A copy of the bytes as elements of `T` (a trailing partial element is ignored).
fn copy_of<T: Element + Default>(
    kind: TypedArrayType,
    bytes: TensorBytes,
    external: External<T>,
) -> CoreResult<TypedArrayOut> {
    let size = std::mem::size_of::<T>();
    let n = bytes.as_slice().len() / size;
    let source = Source::new(bytes);
    // A small copy is always made on the JS thread, straight into the V8 buffer it ends in.
    // Made in a task it would be written into a vector first and copied into that buffer at
    // resolve anyway: twice the writes, and the vector's fresh pages faulted in (an .npz's
    // 111 arrays read with `getTensorAsync`: 55–64 ms against 20–45 synchronously). The
    // task still maps the file's pages, so reading them from disk stays off the JS thread.
    let small = n * size < LARGE_BUFFER_BYTES;
    if small && crate::tasks::in_task() {
        source.prefetch();
    }
    let copy = move |dst: &mut [T]| {
        source.convert(|src| {
            // SAFETY: `dst` holds n elements = n * size bytes, all inside `src`; T is
            // plain old data; a fresh output cannot overlap the source.
            unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr().cast::<u8>(), n * size)
            };
        });
        Ok(())
    };
    if small {
        return Ok(TypedArrayOut::Filled(Fill::new(kind, n, copy)));
    }
    produce(kind, n, copy, external)
}

macro_rules! view_or_copy {
    ($variant:ident, $array:ident, $kind:ident, $t:ty, $bytes:expr, $copy:expr) => {{
        let bytes: TensorBytes = $bytes;
        match bytes {
            TensorBytes::Shared { memory, start, len }
                if as_view(
                    $copy,
                    memory[start..].as_ptr(),
                    len,
                    std::mem::align_of::<$t>(),
                ) =>
            {
                // JS may write through the view: its pages must never be given back.
                memory.mark_viewed(start, len);
                let keep: Arc<Memory> = Arc::clone(memory);
                let ptr = memory[start..start + len].as_ptr() as *mut $t;
                let n = len / std::mem::size_of::<$t>();
                // SAFETY: `ptr` is aligned and covers `n` elements inside `memory`, which
                // the finalizer keeps alive (the Arc moves into it) until JS drops the
                // array. The memory is a private copy-on-write map or an owned buffer,
                // so JS writes cannot reach the file.
                TypedArrayOut::$variant(unsafe {
                    $array::with_external_data(ptr, n, move |_, _| drop(keep))
                })
            }
            other => copy_of::<$t>(TypedArrayType::$kind, other, external!($variant, $array))?,
        }
    }};
}

/// Upcast to f32 (element types [`cast::to_f32`] accepts).
fn convert_f32(dtype: DType, bytes: TensorBytes) -> CoreResult<TypedArrayOut> {
    let n = cast::element_count(dtype, bytes.as_slice())?;
    // Refuse types that have no f32 form now, with the same error the conversion would give.
    cast::to_f32(dtype, &[], &mut [])?;
    let source = Source::new(bytes);
    produce(
        TypedArrayType::Float32,
        n,
        move |dst: &mut [f32]| {
            source.convert_parts(dst, None, |src, dst| cast::to_f32(dtype, src, dst))
        },
        external!(F32, Float32Array),
    )
}

/// A tensor a source decodes to F32 (GGUF block types), decoded straight into the output:
/// no intermediate buffer of decoded values to allocate, fault in and copy.
pub fn decoded_f32(n: usize, decoder: F32Decoder<'_>) -> CoreResult<TypedArrayOut> {
    let source = Source::new(decoder.stored);
    let (block, decode) = (decoder.block, decoder.decode);
    produce(
        TypedArrayType::Float32,
        n,
        move |dst: &mut [f32]| source.convert_parts(dst, Some(block), decode),
        external!(F32, Float32Array),
    )
}

/// Whether [`converted_runs`] serves `mode` for `dtype`: F32 or F64 asked of a type that
/// converts to it.
pub fn runs_convert(dtype: DType, mode: ReadMode) -> bool {
    match mode.as_ {
        ReadAs::F32 => cast::to_f32(dtype, &[], &mut []).is_ok(),
        ReadAs::F64 => cast::to_f64(dtype, &[], &mut []).is_ok(),
        ReadAs::Native | ReadAs::Raw => false,
    }
}

/// A selection made of several runs of `memory` (`(start, len)`, all of one length: a slice
/// of a tensor of `dtype`), `n` elements, converted where the runs lie into the output as
/// F32 or F64 (see [`runs_convert`]) — no gathered copy of the selection first.
pub fn converted_runs(
    dtype: DType,
    mode: ReadMode,
    memory: Arc<Memory>,
    runs: Vec<(usize, usize)>,
    n: usize,
) -> CoreResult<TypedArrayOut> {
    match mode.as_ {
        ReadAs::F32 => produce(
            TypedArrayType::Float32,
            n,
            move |dst: &mut [f32]| {
                cast::convert_runs(&memory, &runs, dst, |s, d| cast::to_f32(dtype, s, d))
            },
            external!(F32, Float32Array),
        ),
        ReadAs::F64 => produce(
            TypedArrayType::Float64,
            n,
            move |dst: &mut [f64]| {
                cast::convert_runs(&memory, &runs, dst, |s, d| cast::to_f64(dtype, s, d))
            },
            external!(F64, Float64Array),
        ),
        ReadAs::Native | ReadAs::Raw => Err(CoreError::invalid_argument(
            "runs are converted only to F32 or F64",
        )),
    }
}

/// Convert to f64 (element types [`cast::to_f64`] accepts).
fn convert_f64(dtype: DType, bytes: TensorBytes) -> CoreResult<TypedArrayOut> {
    let n = cast::element_count(dtype, bytes.as_slice())?;
    cast::to_f64(dtype, &[], &mut [])?;
    let source = Source::new(bytes);
    produce(
        TypedArrayType::Float64,
        n,
        move |dst: &mut [f64]| {
            source.convert_parts(dst, None, |src, dst| cast::to_f64(dtype, src, dst))
        },
        external!(F64, Float64Array),
    )
}

/// Turn a tensor's bytes into the typed array `mode` asks for ([`read_as::form`]).
pub fn to_typed_array(
    dtype: DType,
    bytes: TensorBytes,
    mode: ReadMode,
) -> CoreResult<TypedArrayOut> {
    let copy = mode.copy;
    Ok(match read_as::form(dtype, mode.as_) {
        Form::Stored(Elements::F32) => view_or_copy!(F32, Float32Array, Float32, f32, bytes, copy),
        Form::Stored(Elements::F64) => view_or_copy!(F64, Float64Array, Float64, f64, bytes, copy),
        Form::Stored(Elements::I8) => view_or_copy!(I8, Int8Array, Int8, i8, bytes, copy),
        Form::Stored(Elements::U8) => view_or_copy!(U8, Uint8Array, Uint8, u8, bytes, copy),
        Form::Stored(Elements::I16) => view_or_copy!(I16, Int16Array, Int16, i16, bytes, copy),
        Form::Stored(Elements::U16) => view_or_copy!(U16, Uint16Array, Uint16, u16, bytes, copy),
        Form::Stored(Elements::I32) => view_or_copy!(I32, Int32Array, Int32, i32, bytes, copy),
        Form::Stored(Elements::U32) => view_or_copy!(U32, Uint32Array, Uint32, u32, bytes, copy),
        Form::Stored(Elements::I64) => {
            view_or_copy!(I64, BigInt64Array, BigInt64, i64, bytes, copy)
        }
        Form::Stored(Elements::U64) => {
            view_or_copy!(U64, BigUint64Array, BigUint64, u64, bytes, copy)
        }
        Form::ToF32 => convert_f32(dtype, bytes)?,
        Form::ToF64 => convert_f64(dtype, bytes)?,
    })
}
