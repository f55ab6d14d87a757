//! Work that runs off the event loop. Every async function of the API is a [`CoreTask`]:
//! a closure computed on the libuv pool, whose `CoreError` (if any) is turned into the same
//! coded JS error a sync call would throw.

use crate::error::{to_js, CoreResult};
use napi::bindgen_prelude::*;
use napi::{Env, Task};
use stcore::CoreError;

type Work<T> = Box<dyn FnOnce() -> CoreResult<T> + Send>;

thread_local! {
    /// Set while a task's work runs on a libuv worker thread.
    static IN_TASK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the current code runs inside a task's work (off the JS thread). Outputs made
/// there are finished there; outputs made on the JS thread may be filled when they reach JS
/// (see `typed.rs`).
pub fn in_task() -> bool {
    IN_TASK.with(|f| f.get())
}

pub struct CoreTask<T> {
    work: Option<Work<T>>,
    failure: Option<CoreError>,
}

impl<T> CoreTask<T> {
    pub fn new(work: impl FnOnce() -> CoreResult<T> + Send + 'static) -> AsyncTask<CoreTask<T>>
    where
        T: Send + ToNapiValue + TypeName + 'static,
    {
        AsyncTask::new(CoreTask {
            work: Some(Box::new(work)),
            failure: None,
        })
    }
}

impl<T: Send + ToNapiValue + TypeName + 'static> Task for CoreTask<T> {
    type Output = T;
    type JsValue = T;

    fn compute(&mut self) -> napi::Result<T> {
        let work = self
            .work
            .take()
            .ok_or_else(|| napi::Error::from_reason("task ran twice"))?;
        // A panic must never cross into Node: turn it into an error.
        IN_TASK.with(|f| f.set(true));
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
        IN_TASK.with(|f| f.set(false));
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                let reason = e.to_string();
                self.failure = Some(e);
                Err(napi::Error::from_reason(reason))
            }
            Err(payload) => {
                let e = CoreError::panicked("an asynchronous task", payload.as_ref());
                self.failure = Some(e);
                Err(napi::Error::from_reason("panic"))
            }
        }
    }

    fn resolve(&mut self, _env: Env, output: T) -> napi::Result<T> {
        Ok(output)
    }

    fn reject(&mut self, env: Env, err: napi::Error) -> napi::Result<T> {
        match self.failure.take() {
            Some(e) => Err(to_js(&env, &e)),
            None => Err(err),
        }
    }
}

/// A JS progress callback that worker threads can call. Each call waits until JS has run
/// the callback, so every event is delivered before the task's promise settles (the wait is
/// bounded: a closing environment drops the callback, which ends it at once).
pub struct ProgressSink<T: 'static + ToNapiValue> {
    tsfn: napi::threadsafe_function::ThreadsafeFunction<T, (), T, napi::Status, false>,
}

impl<T: 'static + ToNapiValue + JsValuesTupleIntoVec> ProgressSink<T> {
    pub fn new(callback: Option<Function<'_, T, ()>>) -> napi::Result<Option<Self>> {
        callback
            .map(|f| {
                f.build_threadsafe_function()
                    .callee_handled::<false>()
                    .weak::<false>()
                    .build()
                    .map(|tsfn| ProgressSink { tsfn })
            })
            .transpose()
    }

    pub fn send(&self, event: T) {
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let status = self.tsfn.call_with_return_value(
            event,
            napi::threadsafe_function::ThreadsafeFunctionCallMode::Blocking,
            move |_: napi::Result<()>, _| {
                let _ = done.send(());
                Ok(())
            },
        );
        if status == napi::Status::Ok {
            let _ = wait.recv_timeout(std::time::Duration::from_secs(30));
        }
    }
}
