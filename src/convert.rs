//! `convert`, `inspect`, `validate`: conversion and inspection from JavaScript.

use crate::error::{guard, invalid_argument, option, CoreResult};
use crate::tasks::{CoreTask, ProgressSink};
use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;
use stcore::convert::{self, Target};
use stcore::format::gguf::Preset;
use stcore::fsutil;
use std::path::Path;

#[napi(object)]
pub struct ConvertProgress {
    pub done_bytes: f64,
    pub total_bytes: f64,
}

/// A report (or config) handed to JS as a plain object, built by the engine's own
/// `JSON.parse` from the JSON text: keys are own properties exactly as `JSON.parse` makes
/// them (`"__proto__"` included), and no size or depth limit applies beyond JSON.parse's
/// (napi-rs's value conversion stops at 1,000,000 values and sets keys by assignment).
pub struct Json(pub serde_json::Value);

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
        use napi::sys;
        let text = serde_json::to_string(&val.0)
            .map_err(|e| napi::Error::new(Status::GenericFailure, e.to_string()))?;
        let mut global = std::ptr::null_mut();
        let mut json = std::ptr::null_mut();
        let mut parse = std::ptr::null_mut();
        let mut arg = std::ptr::null_mut();
        let mut out = std::ptr::null_mut();
        // SAFETY: plain Node-API calls on the live env napi-rs passes to this conversion.
        unsafe {
            napi::check_status!(sys::napi_get_global(env, &mut global))?;
            napi::check_status!(sys::napi_get_named_property(
                env,
                global,
                c"JSON".as_ptr(),
                &mut json
            ))?;
            napi::check_status!(sys::napi_get_named_property(
                env,
                json,
                c"parse".as_ptr(),
                &mut parse
            ))?;
            napi::check_status!(
                sys::napi_create_string_utf8(
                    env,
                    text.as_ptr().cast(),
                    text.len() as isize,
                    &mut arg
                ),
                "a report of {} bytes is too large for a JavaScript string",
                text.len()
            )?;
            napi::check_status!(sys::napi_call_function(env, json, parse, 1, &arg, &mut out))?;
        }
        Ok(out)
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
    catch_unwind,
    strict,
    ts_args_type = "input: string, output: string, options: ConvertOptions",
    ts_return_type = "Promise<ConvertReport>"
)]
pub fn convert(
    env: Env,
    input: String,
    output: String,
    options: Option<Object>,
) -> napi::Result<AsyncTask<CoreTask<Json>>> {
    guard(&env, "convert", || {
        // Every argument error rejects the promise, as every other failure does.
        let to = option::<String>(&options, "to")
            .and_then(|t| {
                t.ok_or_else(|| {
                    invalid_argument(
                        "options.to is required ('gguf' | 'onnx' | 'safetensors' | 'mlx')",
                    )
                })
            })
            .and_then(|t| Target::parse(&t));
        let quantization = option::<String>(&options, "quantization")
            .and_then(|q| q.as_deref().map(Preset::parse).transpose());
        let durable = option::<bool>(&options, "durable");
        let settings = convert_settings(&options);
        let base = option::<String>(&options, "base");
        let lora = option::<String>(&options, "lora");
        let lora_scale = option::<f64>(&options, "loraScale");
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
            let (to, quantization, durable, settings) = (to?, quantization?, durable?, settings?);
            let (base, lora, lora_scale) = (base?, lora?, lora_scale?);
            // Report at most ~100 steps: each one is a round trip to the JS thread.
            let mut last_percent = None;
            let mut report_progress = |done: u64, total: u64| {
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
            };
            let options = fsutil::WriteOptions {
                durability: crate::write::Durable::arg(durable).durability(),
                progress: Some(&mut report_progress),
            };
            let adapter = convert::LoraOptions {
                base: base.as_deref().map(Path::new),
                lora: lora.as_deref().map(Path::new),
                lora_scale,
            };
            let report = convert::convert_with(
                Path::new(&input),
                Path::new(&output),
                to,
                quantization,
                &settings,
                &adapter,
                options,
            )?;
            json(report)
        }))
    })
}

/// `metadata` and `maxShardBytes` of `convert`'s options.
fn convert_settings(options: &Option<Object>) -> CoreResult<convert::ConvertSettings> {
    let max = option::<f64>(options, "maxShardBytes")?;
    let max_shard_bytes = match max {
        None => None,
        Some(n) if n >= 1.0 && n.fract() == 0.0 && n <= 9_007_199_254_740_991.0 => Some(n as u64),
        Some(n) => {
            return Err(invalid_argument(format!(
                "options.maxShardBytes must be a positive whole number of bytes, not {n}"
            )))
        }
    };
    Ok(convert::ConvertSettings {
        metadata: crate::metadata::metadata_edits(options)?,
        max_shard_bytes,
    })
}

/// `inspect`'s report as JSON text (index.js parses it: napi's object conversion caps the
/// number of values, and a file may list hundreds of thousands of tensors).
#[napi(catch_unwind, strict, ts_return_type = "Promise<string>")]
pub fn inspect_json(env: Env, path: String) -> napi::Result<AsyncTask<CoreTask<String>>> {
    guard(&env, "inspectJson", || {
        Ok(CoreTask::new(move || {
            let report = convert::inspect(Path::new(&path))?;
            serde_json::to_string(&report).map_err(|e| invalid_argument(e.to_string()))
        }))
    })
}

/// Every problem found in a file or directory (not only the first), with codes.
#[napi(catch_unwind, strict, ts_return_type = "Promise<ValidationReport>")]
pub fn validate(env: Env, path: String) -> napi::Result<AsyncTask<CoreTask<Json>>> {
    guard(&env, "validate", || {
        Ok(CoreTask::new(move || {
            json(convert::validate(Path::new(&path)))
        }))
    })
}
