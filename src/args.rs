//! Arguments shared by the classes and functions: how a tensor is read (`GetOptions`), a
//! file's backend, slice ranges; and JavaScript buffers in arguments, taken in two phases.
//!
//! Reading a property, an array element or a string of a JS value can run JavaScript (a
//! getter, a Proxy trap, `valueOf`), and that JavaScript can detach, transfer or resize any
//! ArrayBuffer — after which its old memory is freed or reused. So a pointer into JS memory
//! must never survive such a call. Every binding entry that takes a buffer therefore works in
//! two phases:
//!
//! 1. read and validate every argument and property while holding only handles: a typed
//!    array becomes a [`ViewArg`] (its kind is known, its bytes are not taken);
//! 2. only then take the bytes, all at once, with [`with_views`], and use or copy them in
//!    Rust before any call into JavaScript.
//!
//! Phase 2 uses only `napi_get_typedarray_info`, `napi_is_arraybuffer` and
//! `napi_is_detached_arraybuffer`, none of which runs JavaScript. It refuses a view whose
//! buffer is detached, or is a SharedArrayBuffer (another thread could write it while Rust
//! reads it), with ERR_INVALID_ARGUMENT. A resizable ArrayBuffer is taken at its size in
//! phase 2: nothing can resize it until the borrow ends (only JavaScript on this thread
//! can), and async calls copy the bytes before they return.

use crate::error::{invalid_argument, option, CoreResult};
use crate::typed::{ReadAs, ReadMode};
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use stcore::memory::Backend;
use stcore::slice::SliceArg;
use std::marker::PhantomData;

/// A typed-array argument, seen as a handle only (phase 1).
pub struct ViewArg<'env> {
    env: sys::napi_env,
    value: sys::napi_value,
    kind: TypedArrayType,
    what: String,
    _scope: PhantomData<&'env ()>,
}

fn status(s: sys::napi_status, what: &str) -> CoreResult<()> {
    if s == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(invalid_argument(format!(
            "{what}: cannot read the typed array"
        )))
    }
}

/// Bytes per element of a typed array kind; `None` for kinds we do not take (Float16Array
/// and any later one).
fn element_size(kind: TypedArrayType) -> Option<usize> {
    Some(match kind {
        TypedArrayType::Int8 | TypedArrayType::Uint8 | TypedArrayType::Uint8Clamped => 1,
        TypedArrayType::Int16 | TypedArrayType::Uint16 => 2,
        TypedArrayType::Int32 | TypedArrayType::Uint32 | TypedArrayType::Float32 => 4,
        TypedArrayType::Float64 | TypedArrayType::BigInt64 | TypedArrayType::BigUint64 => 8,
        _ => return None,
    })
}

impl<'env> ViewArg<'env> {
    /// `value` as a typed array, or `None` when it is something else. Runs no JavaScript and
    /// takes no pointer (`napi_get_typedarray_info` is asked for the kind only, which does
    /// not even move a small array's storage off the V8 heap).
    pub fn typed_array(value: &Unknown<'env>, what: &str) -> CoreResult<Option<ViewArg<'env>>> {
        let v = value.value();
        let mut is_typed_array = false;
        // SAFETY: plain Node-API calls on the live env of the current call.
        unsafe {
            status(
                sys::napi_is_typedarray(v.env, v.value, &mut is_typed_array),
                what,
            )?;
            if !is_typed_array {
                return Ok(None);
            }
            let mut kind = 0;
            let mut length = 0;
            status(
                sys::napi_get_typedarray_info(
                    v.env,
                    v.value,
                    &mut kind,
                    &mut length,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                ),
                what,
            )?;
            let kind = TypedArrayType::from(kind);
            if element_size(kind).is_none() {
                return Err(invalid_argument(format!(
                    "{what}: unsupported typed array type {kind:?}"
                )));
            }
            Ok(Some(ViewArg {
                env: v.env,
                value: v.value,
                kind,
                what: what.to_string(),
                _scope: PhantomData,
            }))
        }
    }

    /// A typed array of exactly `kind` (`Uint8Array` for bytes), else ERR_INVALID_ARGUMENT.
    pub fn of_kind(
        value: &Unknown<'env>,
        kind: TypedArrayType,
        what: &str,
        expected: &str,
    ) -> CoreResult<ViewArg<'env>> {
        match Self::typed_array(value, what)? {
            Some(view) if view.kind == kind => Ok(view),
            _ => Err(invalid_argument(format!("{what} must be a {expected}"))),
        }
    }

    pub fn kind(&self) -> TypedArrayType {
        self.kind
    }

    /// Phase 2 for one view.
    ///
    /// # Safety
    /// The slice points into JavaScript memory: no call that can run JavaScript may happen
    /// while it is alive (see [`with_views`], the only caller).
    unsafe fn bytes<'a>(&self) -> CoreResult<&'a [u8]> {
        let what = &self.what;
        let mut kind = 0;
        let mut length = 0usize;
        let mut data = std::ptr::null_mut();
        let mut buffer = std::ptr::null_mut();
        let mut offset = 0usize;
        let mut is_arraybuffer = false;
        let mut detached = false;
        // SAFETY: plain Node-API calls on the live env of the current call, none of which runs
        // JavaScript.
        unsafe {
            status(
                sys::napi_get_typedarray_info(
                    self.env,
                    self.value,
                    &mut kind,
                    &mut length,
                    &mut data,
                    &mut buffer,
                    &mut offset,
                ),
                what,
            )?;
            // A SharedArrayBuffer is not an ArrayBuffer to Node-API.
            status(
                sys::napi_is_arraybuffer(self.env, buffer, &mut is_arraybuffer),
                what,
            )?;
            if !is_arraybuffer {
                return Err(invalid_argument(format!(
                    "{what} is a view of a SharedArrayBuffer, which another thread may change \
                     while it is read: copy it into an ArrayBuffer first"
                )));
            }
            status(
                sys::napi_is_detached_arraybuffer(self.env, buffer, &mut detached),
                what,
            )?;
        }
        if detached {
            return Err(invalid_argument(format!(
                "{what} is a view of a detached ArrayBuffer (transferred or detached): its \
                 data is gone"
            )));
        }
        let size = element_size(TypedArrayType::from(kind))
            .ok_or_else(|| invalid_argument(format!("{what}: unsupported typed array type")))?;
        let len = length
            .checked_mul(size)
            .ok_or_else(|| invalid_argument(format!("{what} is too large")))?;
        if len == 0 || data.is_null() {
            return Ok(&[]);
        }
        // SAFETY: Node-API reports `length` elements of `size` bytes at `data`, in an attached,
        // unshared ArrayBuffer that the handle keeps alive; the caller keeps JavaScript from
        // running (and so from detaching or resizing it) while the slice is alive.
        Ok(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) })
    }
}

/// Phase 2: run `f` on the current bytes of every view (in order). `f` must not call into
/// JavaScript: the slices point into JS memory that JavaScript could free. Every property of
/// every argument must have been read (phase 1) before this is called.
pub fn with_views<R>(
    views: &[&ViewArg<'_>],
    f: impl FnOnce(&[&[u8]]) -> CoreResult<R>,
) -> CoreResult<R> {
    let bytes = views
        .iter()
        // SAFETY: the slices live only inside this call, and `f` runs no JavaScript.
        .map(|v| unsafe { v.bytes() })
        .collect::<CoreResult<Vec<_>>>()?;
    f(&bytes)
}

/// Phase 2 for one view.
pub fn with_view<R>(view: &ViewArg<'_>, f: impl FnOnce(&[u8]) -> CoreResult<R>) -> CoreResult<R> {
    with_views(&[view], |b| f(b[0]))
}

/// A `Uint8Array` argument (a Node `Buffer` is one), phase 1.
pub fn bytes_arg<'env>(value: &Unknown<'env>, what: &str) -> CoreResult<ViewArg<'env>> {
    ViewArg::of_kind(value, TypedArrayType::Uint8, what, "Uint8Array")
}

#[napi(object, object_to_js = false)]
#[derive(Default)]
pub struct GetOptions {
    #[napi(js_name = "as", ts_type = "'native' | 'F32' | 'F64' | 'raw'")]
    pub as_: Option<String>,
    pub copy: Option<bool>,
}

impl GetOptions {
    pub fn mode(options: &Option<GetOptions>, default: ReadAs) -> CoreResult<ReadMode> {
        let o = options.as_ref();
        ReadMode::parse(
            o.and_then(|o| o.as_.as_deref()),
            o.and_then(|o| o.copy),
            default,
        )
    }
}

pub fn parse_backend(options: &Option<Object>) -> CoreResult<Backend> {
    match option::<String>(options, "backend")?.as_deref() {
        None | Some("mmap") => Ok(Backend::Mmap),
        Some("read") => Ok(Backend::Read),
        Some(other) => Err(invalid_argument(format!(
            "options.backend must be 'mmap' or 'read', not '{other}'"
        ))),
    }
}

/// The leading-dimension ranges of `getSlice`, as JS gives them.
pub type JsRanges = Vec<Option<Either<Vec<f64>, f64>>>;

pub fn slice_args(ranges: &JsRanges) -> CoreResult<Vec<SliceArg>> {
    ranges.iter().map(slice_arg).collect()
}

fn integer(v: f64, what: &str) -> CoreResult<i64> {
    if v.fract() != 0.0 || !v.is_finite() || v.abs() > 9007199254740991.0 {
        return Err(invalid_argument(format!(
            "{what} must be an integer, got {v}"
        )));
    }
    Ok(v as i64)
}

pub fn slice_arg(r: &Option<Either<Vec<f64>, f64>>) -> CoreResult<SliceArg> {
    Ok(match r {
        None => SliceArg::Full,
        Some(Either::B(i)) => SliceArg::Index(integer(*i, "a slice index")?),
        Some(Either::A(pair)) if pair.len() == 2 => SliceArg::Range(
            integer(pair[0], "a slice start")?,
            integer(pair[1], "a slice stop")?,
        ),
        Some(Either::A(_)) => return Err(invalid_argument("a slice range must be [start, stop]")),
    })
}
