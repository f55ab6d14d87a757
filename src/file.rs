//! `SafeTensorsFile`, `loadFile`: reading SafeTensors files from JavaScript.

use crate::error::{invalid_argument, CoreResult, OrThrow};
use crate::tasks::CoreTask;
use crate::typed::{to_typed_array, ReadAs, ReadMode, TypedArrayOut};
use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;
use stcore::format::safetensors::{Backend, SafeTensors, SliceArg, TensorInfo as CoreInfo};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

#[napi(object)]
pub struct OpenOptions {
    #[napi(ts_type = "'mmap' | 'read'")]
    pub backend: Option<String>,
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

#[napi(object, object_from_js = false)]
pub struct Tensor {
    pub name: String,
    #[napi(ts_type = "DType")]
    pub dtype: String,
    pub shape: Vec<i64>,
    #[napi(ts_type = "TypedArray")]
    pub data: TypedArrayOut,
}

#[napi(object, object_from_js = false)]
pub struct TensorInfo {
    pub name: String,
    #[napi(ts_type = "DType")]
    pub dtype: String,
    pub shape: Vec<i64>,
    #[napi(ts_type = "[number, number]")]
    pub data_offsets: Vec<i64>,
    pub byte_length: i64,
    pub numel: i64,
}

pub fn shape_to_js(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}

impl From<&CoreInfo> for TensorInfo {
    fn from(t: &CoreInfo) -> Self {
        TensorInfo {
            name: t.name.clone(),
            dtype: t.dtype.name().to_string(),
            shape: shape_to_js(&t.shape),
            data_offsets: vec![t.data_offsets.0 as i64, t.data_offsets.1 as i64],
            byte_length: t.byte_len() as i64,
            numel: t.numel() as i64,
        }
    }
}

/// Tensors keyed by name, in the order given (JS objects keep string keys in insertion order).
pub struct TensorRecord(pub Vec<Tensor>);

impl TypeName for TensorRecord {
    fn type_name() -> &'static str {
        "Record<string, Tensor>"
    }
    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ToNapiValue for TensorRecord {
    unsafe fn to_napi_value(
        env: napi::sys::napi_env,
        val: Self,
    ) -> napi::Result<napi::sys::napi_value> {
        let env = Env::from_raw(env);
        let mut obj = Object::new(&env)?;
        for t in val.0 {
            let name = t.name.clone();
            obj.set_named_property(&name, t)?;
        }
        // SAFETY: converting an object we just built in this env.
        unsafe { Object::to_napi_value(env.raw(), obj) }
    }
}

fn parse_backend(options: &Option<OpenOptions>) -> CoreResult<Backend> {
    match options.as_ref().and_then(|o| o.backend.as_deref()) {
        None | Some("mmap") => Ok(Backend::Mmap),
        Some("read") => Ok(Backend::Read),
        Some(other) => Err(invalid_argument(format!(
            "options.backend must be 'mmap' or 'read', not '{other}'"
        ))),
    }
}

fn open_file(path: &str, backend: CoreResult<Backend>) -> CoreResult<SafeTensorsFile> {
    let inner = SafeTensors::open(Path::new(path), backend?)?;
    Ok(SafeTensorsFile {
        inner: Arc::new(inner),
    })
}

/// Read one tensor in the requested form.
pub fn read_tensor(st: &SafeTensors, name: &str, mode: ReadMode) -> CoreResult<Tensor> {
    let info = st.info(name)?;
    let bytes = st.bytes(info)?;
    let data = to_typed_array(info.dtype, bytes, mode).map_err(|e| e.with_tensor(name))?;
    Ok(Tensor {
        name: info.name.clone(),
        dtype: info.dtype.name().to_string(),
        shape: shape_to_js(&info.shape),
        data,
    })
}

pub fn read_all(st: &SafeTensors, mode: ReadMode) -> CoreResult<TensorRecord> {
    st.tensors()
        .iter()
        .map(|t| read_tensor(st, &t.name, mode))
        .collect::<CoreResult<Vec<_>>>()
        .map(TensorRecord)
}

/// A SafeTensors file, validated at open and read lazily. Tensors come back as typed arrays
/// that view the (private, copy-on-write) mapping when aligned, and copies otherwise.
#[napi]
pub struct SafeTensorsFile {
    pub(crate) inner: Arc<SafeTensors>,
}

#[napi]
impl SafeTensorsFile {
    /// Open and validate a file. `backend: 'read'` uses plain reads instead of a memory map.
    #[napi(factory)]
    pub fn open(
        env: Env,
        path: String,
        options: Option<OpenOptions>,
    ) -> napi::Result<SafeTensorsFile> {
        open_file(&path, parse_backend(&options)).or_throw(&env)
    }

    /// `open` off the event loop.
    #[napi(ts_return_type = "Promise<SafeTensorsFile>")]
    pub fn open_async(
        path: String,
        options: Option<OpenOptions>,
    ) -> AsyncTask<CoreTask<SafeTensorsFile>> {
        let backend = parse_backend(&options);
        CoreTask::new(move || open_file(&path, backend))
    }

    /// Validate a whole file held in memory (the bytes are copied).
    #[napi(factory)]
    pub fn from_bytes(env: Env, bytes: Uint8Array) -> napi::Result<SafeTensorsFile> {
        SafeTensors::from_bytes(bytes.to_vec())
            .map(|inner| SafeTensorsFile {
                inner: Arc::new(inner),
            })
            .or_throw(&env)
    }

    #[napi(getter)]
    pub fn path(&self) -> Option<String> {
        self.inner.path().map(|p| p.display().to_string())
    }

    /// The `__metadata__` map, or null.
    #[napi(getter)]
    pub fn metadata(&self) -> Option<HashMap<String, String>> {
        self.inner
            .metadata()
            .map(|m| m.clone().into_iter().collect())
    }

    /// Tensor names in data-offset order.
    #[napi(getter)]
    pub fn tensor_names(&self) -> Vec<String> {
        self.inner
            .tensors()
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }

    #[napi(getter)]
    pub fn num_parameters(&self) -> f64 {
        self.inner.header().num_parameters() as f64
    }

    /// Size of the whole file in bytes.
    #[napi(getter)]
    pub fn byte_length(&self) -> f64 {
        self.inner.file_len() as f64
    }

    #[napi]
    pub fn has(&self, name: String) -> bool {
        self.inner.header().get(&name).is_some()
    }

    #[napi]
    pub fn info(&self, env: Env, name: String) -> napi::Result<TensorInfo> {
        self.inner.info(&name).map(TensorInfo::from).or_throw(&env)
    }

    #[napi]
    pub fn get_tensor(
        &self,
        env: Env,
        name: String,
        options: Option<GetOptions>,
    ) -> napi::Result<Tensor> {
        GetOptions::mode(&options, ReadAs::Native)
            .and_then(|mode| read_tensor(&self.inner, &name, mode))
            .or_throw(&env)
    }

    #[napi(ts_return_type = "Promise<Tensor>")]
    pub fn get_tensor_async(
        &self,
        name: String,
        options: Option<GetOptions>,
    ) -> AsyncTask<CoreTask<Tensor>> {
        let st = Arc::clone(&self.inner);
        let mode = GetOptions::mode(&options, ReadAs::Native);
        CoreTask::new(move || read_tensor(&st, &name, mode?))
    }

    /// A sub-tensor along the leading dimensions: per dimension `[start, stop)`, an index
    /// (which drops the dimension), or null for all of it. Negative values count from the end.
    #[napi(
        ts_args_type = "name: string, ranges: Array<[number, number] | number | null>, options?: GetOptions"
    )]
    pub fn get_slice(
        &self,
        env: Env,
        name: String,
        ranges: Vec<Option<Either<Vec<f64>, f64>>>,
        options: Option<GetOptions>,
    ) -> napi::Result<Tensor> {
        let run = || -> CoreResult<Tensor> {
            let mode = GetOptions::mode(&options, ReadAs::Native)?;
            let args = ranges
                .iter()
                .map(slice_arg)
                .collect::<CoreResult<Vec<_>>>()?;
            let (shape, bytes) = self.inner.slice(&name, &args)?;
            let info = self.inner.info(&name)?;
            let data = to_typed_array(info.dtype, bytes, mode)?;
            Ok(Tensor {
                name: name.clone(),
                dtype: info.dtype.name().to_string(),
                shape: shape_to_js(&shape),
                data,
            })
        };
        run().or_throw(&env)
    }

    /// Every tensor, keyed by name in data-offset order.
    #[napi(ts_return_type = "Record<string, Tensor>")]
    pub fn tensors(&self, env: Env, options: Option<GetOptions>) -> napi::Result<TensorRecord> {
        GetOptions::mode(&options, ReadAs::Native)
            .and_then(|mode| read_all(&self.inner, mode))
            .or_throw(&env)
    }

    #[napi(ts_return_type = "Promise<Record<string, Tensor>>")]
    pub fn tensors_async(&self, options: Option<GetOptions>) -> AsyncTask<CoreTask<TensorRecord>> {
        let st = Arc::clone(&self.inner);
        let mode = GetOptions::mode(&options, ReadAs::Native);
        CoreTask::new(move || read_all(&st, mode?))
    }
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

fn load_all(path: &str, mode: CoreResult<ReadMode>) -> CoreResult<TensorRecord> {
    let st = SafeTensors::open(Path::new(path), Backend::Mmap)?;
    read_all(&st, mode?)
}

/// Open a file and read every tensor.
#[napi(ts_return_type = "Record<string, Tensor>")]
pub fn load_file(
    env: Env,
    path: String,
    options: Option<GetOptions>,
) -> napi::Result<TensorRecord> {
    load_all(&path, GetOptions::mode(&options, ReadAs::Native)).or_throw(&env)
}

#[napi(ts_return_type = "Promise<Record<string, Tensor>>")]
pub fn load_file_async(
    path: String,
    options: Option<GetOptions>,
) -> AsyncTask<CoreTask<TensorRecord>> {
    let mode = GetOptions::mode(&options, ReadAs::Native);
    CoreTask::new(move || load_all(&path, mode))
}
