//! The one place where core errors become JavaScript errors.
//!
//! Every failure reaches JS as a real `Error` whose `code` is the stable code of docs/api.md,
//! with `path` and `tensor` properties where the core knows them — for sync throws and
//! async rejections alike (tasks keep the `CoreError` and call [`to_js`] in `reject`).

use napi::bindgen_prelude::{JsObjectValue, JsValue};
use napi::{Env, Status};
use stcore::CoreError;

/// Build the JS error object for `e` and wrap it so napi throws (or rejects with) exactly it.
pub fn to_js(env: &Env, e: &CoreError) -> napi::Error {
    let build = || -> napi::Result<napi::Error> {
        let mut obj = env.create_error(napi::Error::new(Status::GenericFailure, e.to_string()))?;
        obj.set_named_property("code", e.code())?;
        if let Some(p) = e.path() {
            obj.set_named_property("path", p)?;
        }
        if let Some(t) = e.tensor() {
            obj.set_named_property("tensor", t)?;
        }
        Ok(napi::Error::from(obj.to_unknown()))
    };
    build().unwrap_or_else(|fallback| fallback)
}

/// The body of every synchronous `#[napi]` function, method, getter and constructor: a panic
/// in `f` (a bug) becomes a thrown ERR_INTERNAL naming `call`, as a panic in an asynchronous
/// task does (`tasks.rs`), instead of unwinding into Node. The items also carry
/// `#[napi(catch_unwind)]`, which covers napi-rs's own argument and return-value conversion
/// around this body — there a panic is thrown as napi-rs's plain `GenericFailure` error
/// (that attribute cannot build our coded error). `__test__/panic-policy.spec.ts` checks
/// that every item has both.
///
/// `SAFETENSORS_NODE_TEST_PANIC` (comma-separated call names such as
/// `SafeTensorsFile.tensorNames`, read once) makes the next call of each named one panic
/// here, once, so that the spec can check this path end to end in a child process; nothing
/// sets it otherwise (unset, the check is one atomic load).
pub fn guard<T>(
    env: &Env,
    call: &'static str,
    f: impl FnOnce() -> napi::Result<T>,
) -> napi::Result<T> {
    let run = move || {
        if injected_panic(call) {
            panic!("panic injected by SAFETENSORS_NODE_TEST_PANIC");
        }
        f()
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
        .unwrap_or_else(|payload| Err(to_js(env, &CoreError::panicked(call, payload.as_ref()))))
}

/// Whether `SAFETENSORS_NODE_TEST_PANIC` names `call` and it has not panicked yet (see [`guard`]).
fn injected_panic(call: &str) -> bool {
    use std::sync::{Mutex, OnceLock};
    static PENDING: OnceLock<Option<Mutex<Vec<String>>>> = OnceLock::new();
    let pending = PENDING.get_or_init(|| {
        let names = std::env::var("SAFETENSORS_NODE_TEST_PANIC").ok()?;
        Some(Mutex::new(
            names.split(',').map(|n| n.trim().to_string()).collect(),
        ))
    });
    let Some(pending) = pending else { return false };
    let mut names = pending
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    match names.iter().position(|n| n == call) {
        Some(i) => {
            names.remove(i);
            true
        }
        None => false,
    }
}

/// Extension to map `CoreResult<T>` in sync calls.
pub trait OrThrow<T> {
    fn or_throw(self, env: &Env) -> napi::Result<T>;
}

impl<T> OrThrow<T> for CoreResult<T> {
    fn or_throw(self, env: &Env) -> napi::Result<T> {
        self.map_err(|e| to_js(env, &e))
    }
}

/// `new Class()` of a class whose instances only come from its static factories: napi-rs
/// would throw an error without a `code`; this is ERR_INVALID_ARGUMENT naming the factories.
pub fn not_constructible(env: &Env, class: &str, factories: &str) -> napi::Error {
    to_js(
        env,
        &invalid_argument(format!(
            "{class} has no public constructor: use {factories}"
        )),
    )
}

/// A caller mistake detected in the binding itself (argument shapes JS allows but we don't).
pub fn invalid_argument(message: impl Into<String>) -> CoreError {
    CoreError::invalid_argument(message)
}

/// Results of core work inside the binding (`napi::Result` is the other kind).
pub type CoreResult<T> = std::result::Result<T, CoreError>;

/// Read an optional property, mapping a wrong type (of the property, or of `options` itself:
/// napi-rs hands any value over as an `Object`) to ERR_INVALID_ARGUMENT.
pub fn option<
    T: napi::bindgen_prelude::FromNapiValue + napi::bindgen_prelude::ValidateNapiValue,
>(
    options: &Option<napi::bindgen_prelude::Object>,
    key: &str,
) -> CoreResult<Option<T>> {
    use napi::JsValue;
    let Some(o) = options else { return Ok(None) };
    if o.to_unknown().get_type().ok() != Some(napi::ValueType::Object) {
        return Err(invalid_argument("options must be an object"));
    }
    o.get_named_property::<Option<T>>(key)
        .map_err(|_| invalid_argument(format!("options.{key} has the wrong type")))
}
