//! A tensor's bytes in the form `getTensor`'s `as` asks for, by the core's table
//! ([`stcore::read_as`]) that the native addon follows too: the stored type's own elements,
//! F32 / F64 conversions, or the raw bytes.

use stcore::cast;
pub use stcore::read_as::ReadAs;
use stcore::read_as::{self, Elements, Form};
use stcore::{CoreError, DType};

/// `options.as` from the number `wasm/index.mjs` passes (its `AS` table).
pub fn read_as(code: u32) -> stcore::Result<ReadAs> {
    Ok(match code {
        0 => ReadAs::Native,
        1 => ReadAs::F32,
        2 => ReadAs::F64,
        3 => ReadAs::Raw,
        _ => return Err(CoreError::invalid_argument(format!("bad read mode {code}"))),
    })
}

enum Data {
    Bytes(Vec<u8>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// A call's answer: its bytes and what they are (`None`: UTF-8 JSON text).
pub struct Output {
    data: Data,
    pub kind: Option<Elements>,
}

impl Output {
    /// The kind as `wasm/index.mjs`'s `KINDS` numbers it: 0 for JSON text.
    pub fn kind_code(&self) -> u32 {
        self.kind.map_or(0, |e| e as u32)
    }
}

impl Default for Output {
    fn default() -> Self {
        Output {
            data: Data::Bytes(Vec::new()),
            kind: None,
        }
    }
}

impl Output {
    pub fn json(v: &serde_json::Value) -> Output {
        Output {
            data: Data::Bytes(v.to_string().into_bytes()),
            kind: None,
        }
    }

    pub fn bytes(v: Vec<u8>) -> Output {
        Output::of(Elements::U8, v)
    }

    fn of(kind: Elements, v: Vec<u8>) -> Output {
        Output {
            data: Data::Bytes(v),
            kind: Some(kind),
        }
    }

    pub fn f32(v: Vec<f32>) -> Output {
        Output {
            data: Data::F32(v),
            kind: Some(Elements::F32),
        }
    }

    pub fn f64(v: Vec<f64>) -> Output {
        Output {
            data: Data::F64(v),
            kind: Some(Elements::F64),
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

/// A plain type's bytes in the form `mode` asks for ([`read_as::form`]).
pub fn typed(dtype: DType, bytes: &[u8], mode: ReadAs) -> stcore::Result<Output> {
    match read_as::form(dtype, mode) {
        Form::Stored(kind) => Ok(Output::of(kind, copy(bytes)?)),
        Form::ToF32 => to_f32(dtype, bytes),
        Form::ToF64 => to_f64(dtype, bytes),
    }
}
