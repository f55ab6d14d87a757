//! A tensor's bytes in the form `getTensor`'s `as` asks for, as the native addon gives them
//! (src/typed.rs): the stored type's own elements, F32 / F64 conversions, or the raw bytes.

use stcore::cast;
use stcore::{CoreError, DType};

/// `options.as`, numbered as `wasm/index.mjs` passes it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ReadAs {
    Native,
    F32,
    F64,
    Raw,
}

impl ReadAs {
    pub fn from_code(code: u32) -> stcore::Result<ReadAs> {
        Ok(match code {
            0 => ReadAs::Native,
            1 => ReadAs::F32,
            2 => ReadAs::F64,
            3 => ReadAs::Raw,
            _ => return Err(CoreError::invalid_argument(format!("bad read mode {code}"))),
        })
    }
}

/// The typed array a result becomes (`Json`: the result is UTF-8 JSON text).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[repr(u32)]
pub enum ArrayKind {
    #[default]
    Json = 0,
    F32 = 1,
    F64 = 2,
    I8 = 3,
    U8 = 4,
    I16 = 5,
    U16 = 6,
    I32 = 7,
    U32 = 8,
    I64 = 9,
    U64 = 10,
}

enum Data {
    Bytes(Vec<u8>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// A call's answer: its bytes and what they are.
pub struct Output {
    data: Data,
    pub kind: ArrayKind,
}

impl Default for Output {
    fn default() -> Self {
        Output {
            data: Data::Bytes(Vec::new()),
            kind: ArrayKind::Json,
        }
    }
}

impl Output {
    pub fn json(v: &serde_json::Value) -> Output {
        Output {
            data: Data::Bytes(v.to_string().into_bytes()),
            kind: ArrayKind::Json,
        }
    }

    pub fn bytes(v: Vec<u8>) -> Output {
        Output::of(ArrayKind::U8, v)
    }

    fn of(kind: ArrayKind, v: Vec<u8>) -> Output {
        Output {
            data: Data::Bytes(v),
            kind,
        }
    }

    pub fn f32(v: Vec<f32>) -> Output {
        Output {
            data: Data::F32(v),
            kind: ArrayKind::F32,
        }
    }

    pub fn f64(v: Vec<f64>) -> Output {
        Output {
            data: Data::F64(v),
            kind: ArrayKind::F64,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        match &self.data {
            Data::Bytes(v) => v,
            Data::F32(v) => cast::element_bytes(v),
            Data::F64(v) => cast::element_bytes(v),
        }
    }
}

/// The stored type's own elements (a copy): what `as: 'native'` gives for plain types.
fn native(dtype: DType, bytes: &[u8]) -> stcore::Result<Output> {
    let kind = match dtype {
        DType::F32 | DType::C64 => ArrayKind::F32,
        DType::F64 => ArrayKind::F64,
        DType::I8 => ArrayKind::I8,
        DType::U8 | DType::BOOL => ArrayKind::U8,
        DType::I16 => ArrayKind::I16,
        DType::U16 => ArrayKind::U16,
        DType::I32 => ArrayKind::I32,
        DType::U32 => ArrayKind::U32,
        DType::I64 => ArrayKind::I64,
        DType::U64 => ArrayKind::U64,
        d if d.upcasts_to_f32() => return to_f32(d, bytes),
        // F4 / F6: packed sub-byte values have no JS number type: the stored bytes.
        _ => ArrayKind::U8,
    };
    Ok(Output::of(kind, copy(bytes)?))
}

fn copy(bytes: &[u8]) -> stcore::Result<Vec<u8>> {
    let mut v = stcore::buffer::zeroed::<u8>(bytes.len())?;
    v.copy_from_slice(bytes);
    Ok(v)
}

fn to_f32(dtype: DType, bytes: &[u8]) -> stcore::Result<Output> {
    let mut out = stcore::buffer::zeroed::<f32>(cast::element_count(dtype, bytes)?)?;
    cast::to_f32(dtype, bytes, &mut out)?;
    Ok(Output::f32(out))
}

fn to_f64(dtype: DType, bytes: &[u8]) -> stcore::Result<Output> {
    let mut out = stcore::buffer::zeroed::<f64>(cast::element_count(dtype, bytes)?)?;
    cast::to_f64(dtype, bytes, &mut out)?;
    Ok(Output::f64(out))
}

/// A plain type's bytes in the form `mode` asks for.
pub fn typed(dtype: DType, bytes: &[u8], mode: ReadAs) -> stcore::Result<Output> {
    match mode {
        ReadAs::Native => native(dtype, bytes),
        ReadAs::Raw => Ok(Output::bytes(copy(bytes)?)),
        ReadAs::F32 if dtype == DType::F32 => native(dtype, bytes),
        ReadAs::F64 if dtype == DType::F64 => native(dtype, bytes),
        ReadAs::F32 => to_f32(dtype, bytes),
        ReadAs::F64 => to_f64(dtype, bytes),
    }
}
