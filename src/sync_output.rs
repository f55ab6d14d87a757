//! The large outputs of synchronous calls, and how a loop that never yields gets the memory of
//! the ones it dropped back.
//!
//! A large output (4 MiB or more) is a huge-page buffer of the core
//! ([`LargeBuffer::for_overwrite`]: a mapping kept from an earlier output when one fits),
//! handed to JS as an external ArrayBuffer. Node runs the finalizers of external buffers only
//! between event-loop turns, so on their own the outputs a synchronous loop drops would all
//! stay allocated until it yields. Here is what frees them inside the loop:
//!
//! - V8 counts the backing store of every ArrayBuffer, external ones too, as the isolate's
//!   external memory (`ArrayBufferSweeper`), and starts a marking cycle each time that grows
//!   by 64 MiB past what the last one left. For these outputs the tracker decides when to
//!   collect (below), so where the tracking works ([`probe`]) and V8 lets its count dip below
//!   zero ([`may_uncount`]: V8 12 and older), right after V8 has counted one its bytes are
//!   taken off again (`napi_adjust_external_memory`), and given back when the output is freed.
//!   V8's count then does not grow by our outputs. A model loader's synchronous loop, which
//!   keeps all 2.4 GB it makes, spent a quarter of its time in the ~37 marking cycles that
//!   V8's own count started (and twice that when this module reported the bytes a second
//!   time, as it did at first), each finding nothing to free. The count does dip: V8 takes a
//!   collected buffer's bytes off when it sweeps it, which may come before the tracker or the
//!   finalizer gives them back. V8 13 aborts the process when its count would go below zero
//!   (`CHECK_GE` in `ExternalMemoryAccounting::UpdateAmount`; Node 24): there V8 keeps its
//!   own count of our outputs.
//! - Each output's ArrayBuffer has a weak reference, and before the next large output is made
//!   [`Tracker::make_room`] looks at them. An ArrayBuffer V8 has collected can no longer be
//!   reached by any JavaScript (typed arrays and DataViews hold their buffer; an external buffer
//!   cannot be detached or transferred: `structuredClone` and `postMessage` copy it), so its
//!   memory is freed there and then — into the core's cache of mappings, for the next output.
//!   The finalizer, when it runs later, finds nothing left to free ([`Slot`]).
//! - A full collection is forced once the outputs not yet found collected reach
//!   [`Tracker::force_at`]: reporting a huge amount of external memory for an instant makes V8
//!   collect everything at once (`Heap::ReportExternalMemoryPressure`). The references are
//!   read in a handle scope of their own: a handle left in the call's scope is a root of any
//!   collection during the call (every tracked output was then marked live by every one).
//!   When that finds most of them collected, the next is forced [`STEP`] later; when it finds
//!   them alive (a loop that keeps them, like a model loader) the distance doubles, so a loop
//!   that keeps n bytes forces about log2(n / STEP) collections.
//! - Past [`Tracker::cap`] of outputs not found collected, an output is a V8 buffer instead: a
//!   quarter of physical memory where a forced collection was seen to clear a reference
//!   ([`probe`], once per environment: Node), else [`STEP`] (Deno's Node-API was seen to
//!   clear none inside a loop: there a loop that drops its outputs holds at most that).

use crate::error::CoreResult;
use napi::bindgen_prelude::*;
use napi::sys;
use stcore::buffer::{physical_memory, LargeBuffer};
use stcore::cast::Element;
use std::cell::RefCell;
use std::sync::{Arc, Mutex};

/// Outputs not yet found collected that a dropping loop may hold before a collection is forced.
const STEP: usize = 256 << 20;

/// What is reported to V8 for an instant to force a collection: far past its hard limit for
/// external memory (half the old generation's maximum) on any heap.
const FORCE: i64 = 1 << 46;

/// Force V8 to collect everything now: twice, because a collection forced while V8's
/// incremental marking is under way only finishes that marking, in which everything made
/// since it began counts as alive (a dropping loop's forced collection then found none of its
/// six dropped outputs collected, and took the loop for one that keeps them).
///
/// # Safety
/// `env` is the current environment, in a call on its JS thread.
unsafe fn force_collection(env: sys::napi_env) {
    let mut total = 0;
    // SAFETY: plain Node-API calls on the current env; the second undoes the first.
    unsafe {
        for _ in 0..2 {
            sys::napi_adjust_external_memory(env, FORCE, &mut total);
            sys::napi_adjust_external_memory(env, -FORCE, &mut total);
        }
    }
}

/// Whether this runtime clears the weak reference of an external ArrayBuffer nothing holds
/// when a collection is forced: the tracking works here.
///
/// # Safety
/// `env` is the current environment, in a call on its JS thread.
unsafe fn probe(env: sys::napi_env) -> bool {
    unsafe extern "C" fn free_probe(
        _env: sys::napi_env,
        _data: *mut std::ffi::c_void,
        hint: *mut std::ffi::c_void,
    ) {
        // SAFETY: the box `probe` leaked for this finalizer, which runs once.
        drop(unsafe { Box::from_raw(hint.cast::<[u64; 2]>()) });
    }
    let data = Box::into_raw(Box::new([0u64; 2]));
    let mut weak = std::ptr::null_mut();
    // SAFETY: plain Node-API calls on the current env, each scope closed before the next
    // step; the 16 bytes stay allocated until the finalizer frees them.
    unsafe {
        let mut scope = std::ptr::null_mut();
        if sys::napi_open_handle_scope(env, &mut scope) != sys::Status::napi_ok {
            drop(Box::from_raw(data));
            return false;
        }
        let mut buffer = std::ptr::null_mut();
        let made = sys::napi_create_external_arraybuffer(
            env,
            data.cast(),
            16,
            Some(free_probe),
            data.cast(),
            &mut buffer,
        ) == sys::Status::napi_ok;
        if !made {
            drop(Box::from_raw(data));
        }
        let referenced =
            made && sys::napi_create_reference(env, buffer, 0, &mut weak) == sys::Status::napi_ok;
        sys::napi_close_handle_scope(env, scope);
        if !referenced {
            return false;
        }
        force_collection(env);
        let mut cleared = false;
        if sys::napi_open_handle_scope(env, &mut scope) == sys::Status::napi_ok {
            let mut value = std::ptr::null_mut();
            cleared = sys::napi_get_reference_value(env, weak, &mut value) == sys::Status::napi_ok
                && value.is_null();
            sys::napi_close_handle_scope(env, scope);
        }
        sys::napi_delete_reference(env, weak);
        cleared
    }
}

/// Whether this runtime's V8 lets its count of external memory go below zero, which taking
/// tracked outputs off it may do for a moment (see the module's notes): the V8 linked into
/// this process is version 12 or older. V8 13 aborts the process instead; a runtime whose V8
/// version cannot be read (Bun has none; Deno does not export it) is not asked to.
fn may_uncount() -> bool {
    static MAY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *MAY.get_or_init(|| {
        let major = v8_version()
            .as_deref()
            .and_then(|v| v.split('.').next())
            .and_then(|m| m.parse::<u32>().ok());
        matches!(major, Some(1..=12))
    })
}

/// The version of the V8 linked into this process, from V8 itself: `v8::V8::GetVersion()`,
/// which Node exports for addons, looked up by its symbol. Nothing here touches a JS value,
/// so no script can run during the lookup (reading `process.versions.v8` could: `process` is
/// a property user code may redefine).
#[cfg(unix)]
fn v8_version() -> Option<String> {
    // `static const char* v8::V8::GetVersion()`, Itanium-mangled (Linux, macOS).
    const SYMBOL: &std::ffi::CStr = c"_ZN2v82V810GetVersionEv";
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only looks the symbol up.
    let address = unsafe { libc::dlsym(libc::RTLD_DEFAULT, SYMBOL.as_ptr()) };
    if address.is_null() {
        return None;
    }
    // SAFETY: the symbol is V8's `GetVersion`, a function of no arguments returning a pointer
    // to a static NUL-terminated string (v8.h); it runs no JS and touches no isolate.
    let version = unsafe {
        let get: unsafe extern "C" fn() -> *const std::ffi::c_char = std::mem::transmute(address);
        let text = get();
        if text.is_null() {
            return None;
        }
        std::ffi::CStr::from_ptr(text)
    };
    version.to_str().ok().map(str::to_owned)
}

/// Elsewhere the version is not looked up, and V8 keeps its own count of the outputs.
#[cfg(not(unix))]
fn v8_version() -> Option<String> {
    None
}

/// One output's buffer, freed by whichever comes first: the tracker or the finalizer.
struct Slot {
    buf: Mutex<Option<Box<dyn Send>>>,
    bytes: usize,
    /// Whether the bytes were taken off V8's count of external memory (to give back on free).
    uncounted: bool,
}

impl Slot {
    /// Free the buffer (its mapping goes to the cache) unless that was done already, and give
    /// its bytes back to V8's count if they were taken off.
    fn free(&self, env: sys::napi_env) {
        let taken = self.buf.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(buf) = taken {
            drop(buf);
            if self.uncounted {
                let mut total = 0;
                // SAFETY: `env` is the environment the output was made in, on its thread.
                unsafe { sys::napi_adjust_external_memory(env, self.bytes as i64, &mut total) };
            }
        }
    }
}

/// An output handed to JS by a synchronous call on this thread, not yet found collected.
struct Tracked {
    weak: sys::napi_ref,
    slot: Arc<Slot>,
}

/// The outputs of this JS thread's environment (a worker has its own thread and its own).
struct Tracker {
    env: sys::napi_env,
    tracked: Vec<Tracked>,
    /// Bytes of `tracked`.
    pending: usize,
    /// `pending` at which the next collection is forced.
    force_at: usize,
    /// `pending` past which outputs are V8 buffers.
    cap: usize,
    /// Whether V8's count of external memory leaves the tracked outputs out ([`may_uncount`]).
    uncounts: bool,
}

thread_local! {
    /// Dropped on thread exit without Node-API calls: the environment deletes its own
    /// references, and the finalizers free what is left.
    static TRACKER: RefCell<Option<Tracker>> = const { RefCell::new(None) };
}

impl Tracker {
    /// Free the memory of every output whose ArrayBuffer V8 has collected.
    ///
    /// # Safety
    /// `self.env` is the current environment, in a call on its JS thread.
    unsafe fn sweep(&mut self) {
        let env = self.env;
        let mut freed = 0;
        // Each live reference's value is a handle: left in the call's scope, it would be a root
        // of the marking that making the next output starts (see the module's notes).
        let mut scope = std::ptr::null_mut();
        // SAFETY: a handle scope of the current env, closed below.
        if unsafe { sys::napi_open_handle_scope(env, &mut scope) } != sys::Status::napi_ok {
            return;
        }
        self.tracked.retain(|t| {
            let mut value = std::ptr::null_mut();
            // SAFETY: a reference made in this environment and not deleted yet.
            let status = unsafe { sys::napi_get_reference_value(env, t.weak, &mut value) };
            if status != sys::Status::napi_ok || !value.is_null() {
                return true;
            }
            t.slot.free(env);
            freed += t.slot.bytes;
            // SAFETY: as above; deleted once, with its entry.
            unsafe { sys::napi_delete_reference(env, t.weak) };
            false
        });
        // SAFETY: the scope opened above, innermost.
        unsafe { sys::napi_close_handle_scope(env, scope) };
        self.pending -= freed;
    }

    /// Before an output of `bytes`: free what V8 has collected, force a collection when due,
    /// and say whether the output may be an external buffer (else it is a V8 buffer).
    ///
    /// # Safety
    /// As [`Tracker::sweep`].
    unsafe fn make_room(&mut self, bytes: usize) -> bool {
        // SAFETY: the caller's contract.
        unsafe { self.sweep() };
        if self.pending + bytes > self.force_at {
            let before = self.pending;
            // SAFETY: the caller's contract.
            unsafe {
                force_collection(self.env);
                self.sweep();
            }
            let kept = self.pending;
            let dropping = (before - kept) * 2 >= before;
            self.force_at = kept + if dropping { STEP } else { kept.max(STEP) };
        }
        self.pending + bytes <= self.cap
    }

    /// Track an output of `bytes` in `slot` whose ArrayBuffer is `buffer` (just made: V8 has
    /// just counted its bytes, which an `uncounted` slot takes off again; [`Slot::free`] gives
    /// them back).
    ///
    /// # Safety
    /// As [`Tracker::sweep`]; `buffer` is a value of the current call.
    unsafe fn track(&mut self, buffer: sys::napi_value, slot: Arc<Slot>) {
        if slot.uncounted {
            let mut total = 0;
            // SAFETY: a plain Node-API call on the current env.
            unsafe { sys::napi_adjust_external_memory(self.env, -(slot.bytes as i64), &mut total) };
        }
        let mut weak = std::ptr::null_mut();
        // SAFETY: a plain Node-API call on the current env.
        if unsafe { sys::napi_create_reference(self.env, buffer, 0, &mut weak) }
            != sys::Status::napi_ok
        {
            return;
        }
        self.pending += slot.bytes;
        self.tracked.push(Tracked { weak, slot });
    }

    /// Run `f` on this thread's tracker for `env` (a new one, after a [`probe`], when the
    /// environment changed).
    ///
    /// # Safety
    /// `env` is the current environment, in a call on its JS thread.
    unsafe fn with<R>(env: sys::napi_env, f: impl FnOnce(&mut Tracker) -> R) -> R {
        TRACKER.with(|cell| {
            let mut cell = cell.borrow_mut();
            let tracker = match &mut *cell {
                Some(t) if t.env == env => t,
                other => {
                    // SAFETY: the caller's contract.
                    let works = unsafe { probe(env) };
                    let uncounts = works && may_uncount();
                    other.insert(Tracker {
                        env,
                        tracked: Vec::new(),
                        pending: 0,
                        force_at: if works { STEP } else { usize::MAX },
                        cap: if works { physical_memory() / 4 } else { STEP },
                        uncounts,
                    })
                }
            };
            f(tracker)
        })
    }
}

/// Whether a synchronous call's output of `bytes` may be a huge-page buffer ([`large_array`]),
/// after freeing what V8 has collected (and forcing a collection when due); else it is a V8
/// buffer.
///
/// # Safety
/// `env` is the current environment, in a call on its JS thread.
pub unsafe fn room_for(env: sys::napi_env, bytes: usize) -> bool {
    // SAFETY: the caller's contract.
    unsafe { Tracker::with(env, |t| t.make_room(bytes)) }
}

/// A synchronous call's large output: `write` fills a huge-page buffer (a kept mapping when
/// one fits — outputs found collected have just been given back to the cache), handed to JS
/// and tracked. Ask [`room_for`] first.
///
/// # Safety
/// As `typed::v8_array`: `env` is current, `write` runs no JavaScript.
pub unsafe fn large_array<T: Element>(
    env: sys::napi_env,
    kind: TypedArrayType,
    len: usize,
    write: impl FnOnce(&mut [T]) -> CoreResult<()>,
) -> Result<sys::napi_value> {
    let throw = |e: stcore::CoreError| crate::error::to_js(&Env::from_raw(env), &e);
    let bytes = len.saturating_mul(std::mem::size_of::<T>());
    let mut buf = match LargeBuffer::<T>::cached(len).map_err(throw)? {
        Some(buf) => buf,
        None => LargeBuffer::<T>::for_overwrite(len).map_err(throw)?,
    };
    write(buf.as_mut_slice()).map_err(throw)?;
    let data = buf.as_mut_ptr().cast::<std::ffi::c_void>();
    // SAFETY: the caller's contract.
    let uncounted = unsafe { Tracker::with(env, |t| t.uncounts) };
    let slot = Arc::new(Slot {
        buf: Mutex::new(Some(Box::new(buf))),
        bytes,
        uncounted,
    });
    let hint = Box::into_raw(Box::new(Arc::clone(&slot)));
    let mut buffer = std::ptr::null_mut();
    let mut array = std::ptr::null_mut();
    // SAFETY: `data` holds `bytes` initialised bytes owned by `slot`, which stays alive (the
    // finalizer's hint holds it) until the finalizer runs or the tracker finds the ArrayBuffer
    // collected — whichever is first frees it, and after either no JS can reach it.
    unsafe {
        let status = sys::napi_create_external_arraybuffer(
            env,
            data,
            bytes,
            Some(finalize),
            hint.cast(),
            &mut buffer,
        );
        if status != sys::Status::napi_ok {
            // The hint was not taken: no finalizer will run.
            drop(Box::from_raw(hint));
            return Err(Error::new(
                Status::GenericFailure,
                format!("cannot create an external ArrayBuffer of {bytes} bytes"),
            ));
        }
        Tracker::with(env, |t| t.track(buffer, slot));
        napi::check_status!(
            sys::napi_create_typedarray(env, kind as i32, len, buffer, 0, &mut array),
            "cannot create a typed array"
        )?;
    }
    Ok(array)
}

/// The finalizer of a handed-over output: frees it unless the tracker did.
unsafe extern "C" fn finalize(
    env: sys::napi_env,
    _data: *mut std::ffi::c_void,
    hint: *mut std::ffi::c_void,
) {
    // SAFETY: `hint` is the box `large_array` leaked for this finalizer, which runs once.
    let slot = unsafe { Box::from_raw(hint.cast::<Arc<Slot>>()) };
    // Freeing unmaps or caches memory: nothing in it panics, but never unwind into Node.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| slot.free(env)));
}
