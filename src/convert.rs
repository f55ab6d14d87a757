//! `convert`, `inspect`, `validate`: conversion and inspection from JavaScript.

use crate::error::{invalid_argument, option, CoreResult};
use crate::tasks::{CoreTask, ProgressSink};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use stcore::convert::{self, Target};
use stcore::format::gguf::Preset;
use std::path::Path;

#[napi(object)]
pub struct ConvertProgress {
    pub done_bytes: f64,
    pub total_bytes: f64,
}

/// A report handed to JS as a plain object.
pub struct Json(serde_json::Value);

impl TypeName for Json {
    fn type_name() -> &'static str {
        "object"
    }
    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ToNapiValue for Json {
    unsafe fn to_napi_value(
        env: napi::sys::napi_env,
        val: Self,
    ) -> napi::Result<napi::sys::napi_value> {
        // SAFETY: forwarding to serde_json::Value's conversion.
        unsafe { serde_json::Value::to_napi_value(env, val.0) }
    }
}

pub fn json<T: serde::Serialize>(value: T) -> CoreResult<Json> {
    serde_json::to_value(value)
        .map(Json)
        .map_err(|e| invalid_argument(e.to_string()))
}

/// Convert a SafeTensors file, sharded index, model directory, GGUF file or weights.mlx to
/// `options.to` (ONNX takes a linear/logistic regression model). Streams tensor by tensor.
#[napi(
    strict,
    ts_args_type = "input: string, output: string, options: ConvertOptions",
    ts_return_type = "Promise<ConvertReport>"
)]
pub fn convert(
    input: String,
    output: String,
    options: Option<Object>,
) -> napi::Result<AsyncTask<CoreTask<Json>>> {
    // Every argument error rejects the promise, as every other failure does.
    let to = option::<String>(&options, "to")
        .and_then(|t| {
            t.ok_or_else(|| {
                invalid_argument("options.to is required ('gguf' | 'onnx' | 'safetensors' | 'mlx')")
            })
        })
        .and_then(|t| Target::parse(&t));
    let quantization = option::<String>(&options, "quantization")
        .and_then(|q| q.as_deref().map(Preset::parse).transpose());
    let durable = option::<bool>(&options, "durable");
    let callback = match &options {
        None => Ok(None),
        Some(o) => o
            .get_named_property::<Option<Function<ConvertProgress, ()>>>("onProgress")
            .map_err(|e| {
                invalid_argument(format!(
                    "options.onProgress must be a function: {}",
                    e.reason
                ))
            }),
    };
    let (sink, callback_ok) = match callback {
        Ok(f) => (ProgressSink::new(f)?, Ok(())),
        Err(e) => (None, Err(e)),
    };
    Ok(CoreTask::new(move || {
        callback_ok?;
        let (to, quantization, durable) = (to?, quantization?, durable?);
        // Report at most ~100 steps: each one is a round trip to the JS thread.
        let mut last_percent = None;
        let report = convert::convert_with(
            Path::new(&input),
            Path::new(&output),
            to,
            quantization,
            crate::write::durability(durable),
            &mut |done, total| {
                let percent = (done * 100).checked_div(total).unwrap_or(100);
                if let Some(sink) = &sink {
                    if last_percent != Some(percent) {
                        last_percent = Some(percent);
                        sink.send(ConvertProgress {
                            done_bytes: done as f64,
                            total_bytes: total as f64,
                        });
                    }
                }
            },
        )?;
        json(report)
    }))
}

/// `inspect`'s report as JSON text (index.js parses it: napi's object conversion caps the
/// number of values, and a file may list hundreds of thousands of tensors).
#[napi(strict, ts_return_type = "Promise<string>")]
pub fn inspect_json(path: String) -> AsyncTask<CoreTask<String>> {
    CoreTask::new(move || {
        let report = convert::inspect(Path::new(&path))?;
        serde_json::to_string(&report).map_err(|e| invalid_argument(e.to_string()))
    })
}

/// Every problem found in a file or directory (not only the first), with codes.
#[napi(strict, ts_return_type = "Promise<ValidationReport>")]
pub fn validate(path: String) -> AsyncTask<CoreTask<Json>> {
    CoreTask::new(move || json(convert::validate(Path::new(&path))))
}
