//! `getTensor`'s `as` option: the form a tensor's bytes are handed to JavaScript in. One
//! table for every binding (the napi addon, the WebAssembly build), so a tensor reads the
//! same in both: which typed-array element type a stored type's own elements are, and when
//! values are converted instead.

use crate::dtype::DType;
use crate::error::{CoreError, Result};

/// What the caller asked for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ReadAs {
    /// The stored type's own elements; types with no JS number type (BF16, FP8, …) upcast to
    /// F32, packed sub-byte types (F4, F6) stay bytes.
    Native,
    /// Values as F32 (a conversion unless stored as F32).
    F32,
    /// Values as F64 (a conversion unless stored as F64).
    F64,
    /// The stored bytes.
    Raw,
}

impl ReadAs {
    /// The option's spelling, as the API documents it.
    pub fn parse(name: &str) -> Result<ReadAs> {
        Ok(match name {
            "native" => ReadAs::Native,
            "F32" => ReadAs::F32,
            "F64" => ReadAs::F64,
            "raw" => ReadAs::Raw,
            other => {
                return Err(CoreError::invalid_argument(format!(
                    "options.as must be 'native', 'F32', 'F64' or 'raw', not '{other}'"
                )))
            }
        })
    }
}

/// A typed array's element type. The numbering is the WebAssembly build's result kind
/// (0 is its JSON text), kept in step with `wasm/index.mjs`'s `KINDS`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum Elements {
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

/// How a tensor's bytes become the answer.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Form {
    /// The stored bytes, as these elements: a copy, or a view where the caller allows one.
    Stored(Elements),
    /// Values converted to F32 ([`crate::cast::to_f32`]).
    ToF32,
    /// Values converted to F64 ([`crate::cast::to_f64`]).
    ToF64,
}

/// The form `as_` gives a tensor stored as `dtype`.
pub fn form(dtype: DType, as_: ReadAs) -> Form {
    match as_ {
        ReadAs::Native => native(dtype),
        ReadAs::Raw => Form::Stored(Elements::U8),
        ReadAs::F32 if dtype == DType::F32 => native(dtype),
        ReadAs::F64 if dtype == DType::F64 => native(dtype),
        ReadAs::F32 => Form::ToF32,
        ReadAs::F64 => Form::ToF64,
    }
}

fn native(dtype: DType) -> Form {
    Form::Stored(match dtype {
        // A complex number is two F32s.
        DType::F32 | DType::C64 => Elements::F32,
        DType::F64 => Elements::F64,
        DType::I8 => Elements::I8,
        DType::U8 | DType::BOOL => Elements::U8,
        DType::I16 => Elements::I16,
        DType::U16 => Elements::U16,
        DType::I32 => Elements::I32,
        DType::U32 => Elements::U32,
        DType::I64 => Elements::I64,
        DType::U64 => Elements::U64,
        d if d.upcasts_to_f32() => return Form::ToF32,
        // F4 / F6: packed sub-byte values have no JS number type: the stored bytes.
        _ => Elements::U8,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_and_the_error() {
        for (s, a) in [
            ("native", ReadAs::Native),
            ("F32", ReadAs::F32),
            ("F64", ReadAs::F64),
            ("raw", ReadAs::Raw),
        ] {
            assert_eq!(ReadAs::parse(s).unwrap(), a);
        }
        let e = ReadAs::parse("f32").unwrap_err();
        assert!(e.to_string().contains("not 'f32'"), "{e}");
    }

    #[test]
    fn forms() {
        assert_eq!(form(DType::BF16, ReadAs::Native), Form::ToF32);
        assert_eq!(form(DType::BF16, ReadAs::Raw), Form::Stored(Elements::U8));
        assert_eq!(form(DType::F32, ReadAs::F32), Form::Stored(Elements::F32));
        assert_eq!(
            form(DType::C64, ReadAs::Native),
            Form::Stored(Elements::F32)
        );
        assert_eq!(form(DType::C64, ReadAs::F32), Form::ToF32);
        assert_eq!(form(DType::I64, ReadAs::F64), Form::ToF64);
        assert_eq!(
            form(DType::I64, ReadAs::Native),
            Form::Stored(Elements::I64)
        );
        assert_eq!(form(DType::F64, ReadAs::F64), Form::Stored(Elements::F64));
        assert_eq!(
            form(DType::BOOL, ReadAs::Native),
            Form::Stored(Elements::U8)
        );
    }
}
