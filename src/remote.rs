//! Building blocks for remote files (the HTTP range requests themselves are made in JS by
//! `lib/remote.js` with Node's `fetch`): validate a header fetched on its own, locate a
//! tensor's bytes, and decode bytes fetched separately.

use crate::args::{bytes_arg, slice_arg, with_view, GetOptions};
use crate::error::{guard, invalid_argument, CoreResult, OrThrow};
use crate::file::SafeTensorsFile;
use crate::handle::{shape_to_js, Tensor};
use crate::tasks::CoreTask;
use crate::typed::{to_typed_array, ReadAs};
use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;
use stcore::format::safetensors::{SafeTensors, TensorBytes};
use stcore::tensor::checked_numel;
use stcore::DType;

#[napi(object, object_from_js = false)]
pub struct SliceSpans {
    pub shape: Vec<i64>,
    /// Absolute `[offset, length]` byte spans within the file, in output order.
    #[napi(ts_type = "Array<[number, number]>")]
    pub spans: Vec<Vec<f64>>,
}

/// Validate a file from its first bytes (8-byte prefix + whole JSON header) and total length;
/// its data stays elsewhere (tensors come from `decodeTensor` of fetched bytes). Used by
/// `openUrl`; internal, like the other free functions here (not exported by the package entry).
#[napi(
    catch_unwind,
    strict,
    ts_args_type = "head: Uint8Array, fileLength: number, origin: string"
)]
pub fn safetensors_from_header(
    env: Env,
    head: Unknown,
    file_length: f64,
    origin: String,
) -> napi::Result<SafeTensorsFile> {
    guard(&env, "safetensorsFromHeader", || {
        let run = || {
            let head = bytes_arg(&head, "head")?;
            with_view(&head, |head| {
                SafeTensors::from_header(head, file_length as u64, &origin)
            })
        };
        run().map(SafeTensorsFile::wrap).or_throw(&env)
    })
}

/// Absolute byte range `[start, end)` of a tensor within the file.
#[napi(catch_unwind, strict, ts_return_type = "[number, number]")]
pub fn tensor_file_range(env: Env, file: &SafeTensorsFile, name: String) -> napi::Result<Vec<f64>> {
    guard(&env, "tensorFileRange", || {
        let inner = file.inner.get().or_throw(&env)?;
        let info = inner.info(&name).or_throw(&env)?;
        let (s, e) = inner.file_range(&info);
        Ok(vec![s as f64, e as f64])
    })
}

/// The absolute byte spans a `getSlice` would read, and the result's shape.
#[napi(
    catch_unwind,
    strict,
    ts_args_type = "file: SafeTensorsFile, name: string, ranges: Array<[number, number] | number | null>"
)]
pub fn tensor_slice_spans(
    env: Env,
    file: &SafeTensorsFile,
    name: String,
    ranges: Vec<Option<Either<Vec<f64>, f64>>>,
) -> napi::Result<SliceSpans> {
    guard(&env, "tensorSliceSpans", || {
        let run = || {
            let args = ranges
                .iter()
                .map(slice_arg)
                .collect::<CoreResult<Vec<_>>>()?;
            let (shape, spans) = file.inner.get()?.slice_spans(&name, &args)?;
            Ok(SliceSpans {
                shape: shape_to_js(&shape),
                spans: spans
                    .into_iter()
                    .map(|(s, l)| vec![s as f64, l as f64])
                    .collect(),
            })
        };
        run().or_throw(&env)
    })
}

#[napi]
impl SafeTensorsFile {
    /// `getSlice` off the event loop.
    #[napi(
        catch_unwind,
        strict,
        ts_args_type = "name: string, ranges: Array<[number, number] | number | null>, options?: GetOptions",
        ts_return_type = "Promise<Tensor>"
    )]
    pub fn get_slice_async(
        &self,
        env: Env,
        name: String,
        ranges: Vec<Option<Either<Vec<f64>, f64>>>,
        options: Option<GetOptions>,
    ) -> napi::Result<AsyncTask<CoreTask<Tensor>>> {
        guard(&env, "SafeTensorsFile.getSliceAsync", || {
            Ok(self
                .inner
                .get_slice_async(name, &ranges, &options, ReadAs::Native))
        })
    }
}

/// Decode a tensor's stored bytes (fetched separately) into the form `options` asks for.
#[napi(
    catch_unwind,
    strict,
    ts_args_type = "name: string, dtype: DType, shape: number[], bytes: Uint8Array, options?: GetOptions"
)]
pub fn decode_tensor(
    env: Env,
    name: String,
    dtype: String,
    shape: Vec<f64>,
    bytes: Unknown,
    options: Option<GetOptions>,
) -> napi::Result<Tensor> {
    guard(&env, "decodeTensor", || {
        // `options` (converted before this body runs) may be a getter that resized or detached
        // `bytes`: they are taken last, and copied at once.
        let run = || {
            let dtype = DType::parse_arg(&dtype)?;
            let shape: Vec<usize> = shape
                .iter()
                .map(|&d| {
                    if d.fract() == 0.0 && d >= 0.0 {
                        Ok(d as usize)
                    } else {
                        Err(invalid_argument(format!("bad shape entry {d}")))
                    }
                })
                .collect::<CoreResult<_>>()?;
            let mode = GetOptions::mode(&options, ReadAs::Native)?;
            let view = bytes_arg(&bytes, "bytes")?;
            let expected = checked_numel(&shape).and_then(|n| dtype.byte_len(n));
            let bytes = with_view(&view, |b| {
                if expected != Some(b.len()) {
                    let need = expected.map_or("more than 2^64".to_string(), |n| n.to_string());
                    return Err(invalid_argument(format!(
                        "shape {shape:?} of {dtype} needs {need} bytes, bytes has {}",
                        b.len()
                    ))
                    .with_tensor(&name));
                }
                Ok(b.to_vec())
            })?;
            let data = to_typed_array(dtype, TensorBytes::Owned(bytes), mode)?;
            Ok(Tensor {
                name: name.clone(),
                dtype: dtype.name().to_string(),
                shape: shape_to_js(&shape),
                data,
            })
        };
        run().or_throw(&env)
    })
}
