//! The core's readers and codecs behind a plain C ABI, for a WebAssembly module driven by
//! `wasm/index.mjs` (no wasm-bindgen: the module imports nothing, so it runs in any
//! WebAssembly host — a page, a worker, Node, Deno, Bun, an edge runtime).
//!
//! Every call that can fail returns a status (0 success, 1 error) and leaves its answer in
//! the result buffer ([`stw_result_ptr`], [`stw_result_len`]): JSON, an error
//! `{"code","message","path"?,"tensor"?}`, or a tensor's elements (their kind from
//! [`stw_result_kind`]). The result stays valid until the next call. Bytes handed in are
//! written by JS into a buffer from [`stw_alloc`] and owned by the call they are given to.
//!
//! Opened files and openers live in a table of handles; nothing is shared between handles
//! and nothing runs concurrently (the module is single-threaded).

use serde_json::{json, Value};
use stcore::cast;
use stcore::format::gguf::Served;
use stcore::memory::TensorBytes;
use stcore::remote::{Opener, RemoteFile, Reply, Step, Want};
use stcore::source::value::{GgufArray, GgufValue};
use stcore::{CoreError, DType, F32Decoder, WeightsFormat};
use std::cell::RefCell;

mod convert;
mod write;

pub use convert::{Output, ReadAs};

/// An opener or an open file, with the origin named in errors.
enum Slot {
    Opener(Box<Opener>, String),
    File(Box<RemoteFile>, String),
}

#[derive(Default)]
struct State {
    slots: Vec<Option<Slot>>,
    result: Output,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

type Answer = stcore::Result<Output>;

/// Run `f` on the state and keep its answer (or its error, as JSON) as the result.
fn call(f: impl FnOnce(&mut State) -> Answer) -> i32 {
    STATE.with(|s| {
        let mut state = s.borrow_mut();
        let (status, out) = match f(&mut state) {
            Ok(out) => (0, out),
            Err(e) => (1, Output::json(&error_json(&e))),
        };
        state.result = out;
        status
    })
}

fn error_json(e: &CoreError) -> Value {
    let mut v = json!({ "code": e.code(), "message": e.to_string() });
    if let Some(p) = e.path() {
        v["path"] = json!(p);
    }
    if let Some(t) = e.tensor() {
        v["tensor"] = json!(t);
    }
    v
}

fn bad_handle(h: u32) -> CoreError {
    CoreError::new(stcore::ErrorKind::Closed, format!("handle {h} is closed"))
}

impl State {
    fn insert(&mut self, slot: Slot) -> u32 {
        match self.slots.iter().position(Option::is_none) {
            Some(i) => {
                self.slots[i] = Some(slot);
                i as u32
            }
            None => {
                self.slots.push(Some(slot));
                (self.slots.len() - 1) as u32
            }
        }
    }

    fn opener(&mut self, h: u32) -> stcore::Result<&mut Opener> {
        match self.slots.get_mut(h as usize) {
            Some(Some(Slot::Opener(o, _))) => Ok(o),
            _ => Err(bad_handle(h)),
        }
    }

    fn file(&self, h: u32) -> stcore::Result<(&RemoteFile, &str)> {
        match self.slots.get(h as usize) {
            Some(Some(Slot::File(f, origin))) => Ok((f, origin)),
            _ => Err(bad_handle(h)),
        }
    }
}

/// Bytes JS passed in: `len` bytes at `ptr` from [`stw_alloc`], taken over.
///
/// # Safety
/// `ptr` must come from `stw_alloc(len)` and not be used by JS after this call.
unsafe fn take(ptr: *mut u8, len: usize) -> Vec<u8> {
    if len == 0 {
        return Vec::new();
    }
    // SAFETY: the caller's contract: a buffer `stw_alloc` made of exactly `len` bytes.
    unsafe { Vec::from_raw_parts(ptr, len, len) }
}

/// A string JS passed in (taken over, as [`take`]).
///
/// # Safety
/// As [`take`].
unsafe fn take_str(ptr: *mut u8, len: usize) -> stcore::Result<String> {
    // SAFETY: forwarded contract.
    String::from_utf8(unsafe { take(ptr, len) })
        .map_err(|_| CoreError::invalid_argument("a string is not UTF-8"))
}

/// A buffer of `len` bytes for JS to write arguments into (0 when `len` is 0 or memory is
/// exhausted: JS reports the latter).
#[no_mangle]
pub extern "C" fn stw_alloc(len: usize) -> *mut u8 {
    if len == 0 {
        return std::ptr::null_mut();
    }
    let mut v = Vec::<u8>::new();
    if v.try_reserve_exact(len).is_err() {
        return std::ptr::null_mut();
    }
    // SAFETY: the capacity is exactly `len`; JS writes every byte before passing it back.
    unsafe { v.set_len(len) };
    let mut v = std::mem::ManuallyDrop::new(v);
    v.as_mut_ptr()
}

/// Free a buffer from [`stw_alloc`] that was not handed to a call.
///
/// # Safety
/// As [`take`].
#[no_mangle]
pub unsafe extern "C" fn stw_free(ptr: *mut u8, len: usize) {
    // SAFETY: forwarded contract.
    drop(unsafe { take(ptr, len) });
}

#[no_mangle]
pub extern "C" fn stw_result_ptr() -> *const u8 {
    STATE.with(|s| s.borrow().result.as_bytes().as_ptr())
}

#[no_mangle]
pub extern "C" fn stw_result_len() -> usize {
    STATE.with(|s| s.borrow().result.as_bytes().len())
}

/// The element kind of a tensor result ([`Output::kind_code`]).
#[no_mangle]
pub extern "C" fn stw_result_kind() -> u32 {
    STATE.with(|s| s.borrow().result.kind_code())
}

/// Drop the result buffer (a large tensor's elements, once JS copied them).
#[no_mangle]
pub extern "C" fn stw_result_clear() {
    STATE.with(|s| s.borrow_mut().result = Output::default());
}

/// Free a handle (an opener or a file); a closed handle is ignored.
#[no_mangle]
pub extern "C" fn stw_close(h: u32) {
    STATE.with(|s| {
        if let Some(slot) = s.borrow_mut().slots.get_mut(h as usize) {
            *slot = None;
        }
    });
}

/// An opener of `origin` (named in errors) with a format hint (`""`: recognised by its
/// bytes); the result is `{"handle": n}`. An http(s) URL is a file, else the model
/// directory of that name ([`Opener::any`]); any other origin (a Blob, bytes) a file.
///
/// # Safety
/// Both strings as [`take`].
#[no_mangle]
pub unsafe extern "C" fn stw_opener_new(
    origin: *mut u8,
    origin_len: usize,
    hint: *mut u8,
    hint_len: usize,
) -> i32 {
    // SAFETY: forwarded contract.
    let (origin, hint) = unsafe { (take_str(origin, origin_len), take_str(hint, hint_len)) };
    call(|state| {
        let (origin, hint) = (origin?, hint?);
        let hint =
            match hint.as_str() {
                "" => None,
                name => Some(WeightsFormat::from_name(name).ok_or_else(|| {
                    CoreError::invalid_argument(format!("unknown format '{name}'"))
                })?),
            };
        let lower = origin.to_ascii_lowercase();
        let opener = if lower.starts_with("http://") || lower.starts_with("https://") {
            Opener::any(&origin, hint)
        } else {
            Opener::new(&origin, hint)
        };
        let opener = Box::new(opener);
        let h = state.insert(Slot::Opener(opener, origin));
        Ok(Output::json(&json!({ "handle": h })))
    })
}

/// The opener's next step: `{"fetch": [{"id", "file", "url", "start", "end"} | {"id", "file",
/// "url", "whole": cap}]}` (`file` `""`: the origin; else a file of its directory, or beside
/// it, at `url`), or `{"ready": fileHandle}` (the opener's handle is then closed).
#[no_mangle]
pub extern "C" fn stw_opener_step(h: u32) -> i32 {
    call(|state| {
        let step = state.opener(h)?.step();
        let step = match step {
            Ok(step) => step,
            Err(e) => {
                state.slots[h as usize] = None;
                return Err(e);
            }
        };
        Ok(Output::json(&match step {
            Step::Fetch(requests) => {
                let list: Vec<Value> = requests
                    .iter()
                    .map(|r| {
                        let mut v = json!({ "id": r.id, "file": r.file, "url": r.url });
                        match r.want {
                            Want::Range { start, end } => {
                                v["start"] = json!(start);
                                v["end"] = json!(end);
                            }
                            Want::Whole { cap } => v["whole"] = json!(cap),
                        }
                        v
                    })
                    .collect();
                json!({ "fetch": list })
            }
            Step::Ready(file) => {
                let origin = match state.slots[h as usize].take() {
                    Some(Slot::Opener(_, origin)) => origin,
                    _ => String::new(),
                };
                json!({ "ready": state.insert(Slot::File(file, origin)) })
            }
        }))
    })
}

/// Answer request `id` with bytes (taken over) and the file's length (`total < 0`: unknown).
///
/// # Safety
/// `ptr`/`len` as [`take`].
#[no_mangle]
pub unsafe extern "C" fn stw_opener_reply(
    h: u32,
    id: f64,
    ptr: *mut u8,
    len: usize,
    total: f64,
) -> i32 {
    // SAFETY: forwarded contract.
    let bytes = unsafe { take(ptr, len) };
    let total = (total >= 0.0).then_some(total as u64);
    reply(h, id, Reply::Bytes { bytes, total })
}

/// Answer request `id`: the file does not exist (`status` 0), or the request failed with the
/// message given (`status` 1, ERR_IO).
///
/// # Safety
/// `msg`/`msg_len` as [`take`].
#[no_mangle]
pub unsafe extern "C" fn stw_opener_fail(
    h: u32,
    id: f64,
    status: u32,
    msg: *mut u8,
    msg_len: usize,
) -> i32 {
    // SAFETY: forwarded contract.
    let msg = unsafe { take(msg, msg_len) };
    let r = match status {
        0 => Reply::NotFound,
        _ => Reply::Error(CoreError::new(
            stcore::ErrorKind::Io,
            String::from_utf8_lossy(&msg).into_owned(),
        )),
    };
    reply(h, id, r)
}

fn reply(h: u32, id: f64, r: Reply) -> i32 {
    call(|state| {
        state.opener(h)?.reply(id as u64, r)?;
        Ok(Output::json(&Value::Null))
    })
}

/// What an open file holds: `{"format", "whole", "metadata", "tensors": [TensorInfo]}`.
#[no_mangle]
pub extern "C" fn stw_file_describe(h: u32) -> i32 {
    call(|state| {
        let (file, _) = state.file(h)?;
        let source = file.source();
        let tensors: Vec<Value> = source
            .tensors()
            .iter()
            .map(|t| {
                let mut v = json!({
                    "name": t.name,
                    "dtype": t.dtype.name(),
                    "storedType": t.stored,
                    "shape": t.shape,
                    "byteLength": t.stored_len,
                    "numel": t.numel(),
                });
                if let Some((a, b)) = source.stored_range(&t.name) {
                    v["dataOffsets"] = json!([a, b]);
                }
                v
            })
            .collect();
        let metadata = source.metadata();
        Ok(Output::json(&json!({
            "format": source.format().name(),
            "whole": file.is_whole(),
            "metadata": metadata.gguf_pairs().map_or_else(|| metadata.to_json(), gguf_json),
            "gguf": metadata.gguf_pairs().is_some(),
            "config": file.config(),
            "tensors": tensors,
        })))
    })
}

/// Where a tensor's stored bytes lie: `[[start, len, url], …]` (`url` null: the origin's;
/// empty for a tensor whose file was read whole).
///
/// # Safety
/// `name` as [`take`].
#[no_mangle]
pub unsafe extern "C" fn stw_file_spans(h: u32, name: *mut u8, name_len: usize) -> i32 {
    // SAFETY: forwarded contract.
    let name = unsafe { take_str(name, name_len) };
    call(|state| {
        let name = name?;
        let (file, origin) = state.file(h)?;
        let spans = || -> stcore::Result<Vec<Value>> {
            if file.holds(&name)? {
                return Ok(Vec::new());
            }
            Ok(file
                .spans(&name)?
                .iter()
                .map(|s| json!([s.start, s.len, (!s.file.is_empty()).then_some(&s.url)]))
                .collect())
        };
        Ok(Output::json(&json!(
            spans().map_err(|e| e.with_path(origin))?
        )))
    })
}

/// A tensor's elements in the form `as_` asks for ([`ReadAs`] as a number): from the file
/// itself when it was read whole, else from its stored bytes (`stored`, taken over: the
/// bytes of its spans, concatenated).
///
/// # Safety
/// `name` and `stored` as [`take`].
#[no_mangle]
pub unsafe extern "C" fn stw_file_tensor(
    h: u32,
    name: *mut u8,
    name_len: usize,
    as_: u32,
    stored: *mut u8,
    stored_len: usize,
) -> i32 {
    // SAFETY: forwarded contract.
    let (name, stored) = unsafe { (take_str(name, name_len), take(stored, stored_len)) };
    call(|state| {
        let name = name?;
        let mode = convert::read_as(as_)?;
        let (file, origin) = state.file(h)?;
        let source = file.source();
        let t = source.info(&name).map_err(|e| e.with_path(origin))?;
        let (dtype, numel) = (t.dtype, t.numel());
        let served = if file.holds(&name).map_err(|e| e.with_path(origin))? {
            match mode {
                ReadAs::Raw => Served::Bytes(owned(source.fetch_raw(&name)?)),
                ReadAs::Native | ReadAs::F32 => match source.f32_decoder(&name)? {
                    Some(d) => Served::Decoder(F32Decoder {
                        stored: owned(d.stored),
                        block: d.block,
                        decode: d.decode,
                    }),
                    None => Served::Bytes(owned(source.fetch(&name)?)),
                },
                ReadAs::F64 => Served::Bytes(owned(source.fetch(&name)?)),
            }
        } else {
            file.serve(&name, stored).map_err(|e| e.with_path(origin))?
        };
        tensor_output(dtype, numel, served, mode)
            .map_err(|e| e.with_tensor(&name).with_path(origin))
    })
}

/// The bytes of a SafeTensors file (a U8 result): `plan` (JSON) and `data` as [`write::serialize`]
/// takes them, both taken over.
///
/// # Safety
/// Both buffers as [`take`].
#[no_mangle]
pub unsafe extern "C" fn stw_serialize(
    plan: *mut u8,
    plan_len: usize,
    data: *mut u8,
    data_len: usize,
) -> i32 {
    // SAFETY: forwarded contract.
    let (plan, data) = unsafe { (take(plan, plan_len), take(data, data_len)) };
    call(|_| write::serialize(&plan, &data))
}

/// GGUF's pairs in file order, typed, for `wasm/index.mjs` to rebuild what `GgufFile.metadata`
/// gives: `[[key, type, value]]`, 64-bit integers and non-finite floats as strings (JSON has
/// neither), arrays as JSON arrays of their elements.
fn gguf_json(pairs: &[(String, GgufValue)]) -> Value {
    fn float(x: f64) -> Value {
        if x.is_finite() {
            json!(x)
        } else {
            json!(x.to_string())
        }
    }
    fn each<T: Copy>(v: &[T], f: impl Fn(T) -> Value) -> Value {
        Value::Array(v.iter().map(|&x| f(x)).collect())
    }
    let value = |v: &GgufValue| match v {
        GgufValue::U64(x) => json!(x.to_string()),
        GgufValue::I64(x) => json!(x.to_string()),
        GgufValue::F32(x) => float(f64::from(*x)),
        GgufValue::F64(x) => float(*x),
        GgufValue::Array(GgufArray::U64(a)) => each(a, |x| json!(x.to_string())),
        GgufValue::Array(GgufArray::I64(a)) => each(a, |x| json!(x.to_string())),
        GgufValue::Array(GgufArray::F32(a)) => each(a, |x| float(f64::from(x))),
        GgufValue::Array(GgufArray::F64(a)) => each(a, float),
        other => other.to_json(),
    };
    let ty = |v: &GgufValue| match v {
        GgufValue::Array(a) => format!("ARRAY[{}]", a.item_type().name()),
        other => other.value_type().name().to_string(),
    };
    Value::Array(
        pairs
            .iter()
            .map(|(k, v)| json!([k, ty(v), value(v)]))
            .collect(),
    )
}

fn owned(bytes: TensorBytes<'_>) -> TensorBytes<'static> {
    match bytes {
        TensorBytes::Owned(v) => TensorBytes::Owned(v),
        shared => TensorBytes::Owned(shared.as_slice().to_vec()),
    }
}

/// What `getTensor` gives natively (see src/typed.rs and src/gguf.rs): plain bytes in the
/// form asked for; a block type decoded to F32 (F64: widened from it), or its stored bytes.
fn tensor_output(dtype: DType, numel: usize, served: Served, mode: ReadAs) -> Answer {
    match (mode, served) {
        (_, Served::Bytes(b)) => convert::typed(dtype, b.as_slice(), mode),
        (ReadAs::Raw, Served::Decoder(d)) => Ok(Output::bytes(d.stored.as_slice().to_vec())),
        (ReadAs::Native | ReadAs::F32, Served::Decoder(d)) => {
            let mut out = stcore::buffer::zeroed::<f32>(numel)?;
            d.decode_into(&mut out)?;
            Ok(Output::f32(out))
        }
        (ReadAs::F64, Served::Decoder(d)) => {
            let f32s = d.decode_to_bytes(numel)?;
            let mut out = stcore::buffer::zeroed::<f64>(numel)?;
            cast::to_f64(DType::F32, &f32s, &mut out)?;
            Ok(Output::f64(out))
        }
    }
}
