//! The element types of the SafeTensors format.
//!
//! The variants are declared in the order of the reference implementation's `Dtype` enum
//! (increasing alignment); the writer sorts tensors by this order, descending, so that
//! every tensor in a written file is aligned for its element size.

use crate::error::{CoreError, Result};
use std::fmt;

#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DType {
    BOOL,
    F4,
    F6_E2M3,
    F6_E3M2,
    U8,
    I8,
    F8_E5M2,
    F8_E4M3,
    F8_E8M0,
    F8_E4M3FNUZ,
    F8_E5M2FNUZ,
    I16,
    U16,
    F16,
    BF16,
    I32,
    U32,
    F32,
    C64,
    F64,
    I64,
    U64,
}

impl DType {
    pub const ALL: [DType; 22] = [
        DType::BOOL,
        DType::F4,
        DType::F6_E2M3,
        DType::F6_E3M2,
        DType::U8,
        DType::I8,
        DType::F8_E5M2,
        DType::F8_E4M3,
        DType::F8_E8M0,
        DType::F8_E4M3FNUZ,
        DType::F8_E5M2FNUZ,
        DType::I16,
        DType::U16,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::U32,
        DType::F32,
        DType::C64,
        DType::F64,
        DType::I64,
        DType::U64,
    ];

    /// Size of one element in bits (F4 and F6 pack below a byte).
    pub fn bits(self) -> usize {
        match self {
            DType::F4 => 4,
            DType::F6_E2M3 | DType::F6_E3M2 => 6,
            DType::BOOL
            | DType::U8
            | DType::I8
            | DType::F8_E5M2
            | DType::F8_E4M3
            | DType::F8_E8M0
            | DType::F8_E4M3FNUZ
            | DType::F8_E5M2FNUZ => 8,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 16,
            DType::I32 | DType::U32 | DType::F32 => 32,
            DType::C64 | DType::F64 | DType::I64 | DType::U64 => 64,
        }
    }

    /// Size of one element in whole bytes, or `None` for the sub-byte types.
    pub fn size(self) -> Option<usize> {
        let bits = self.bits();
        bits.is_multiple_of(8).then_some(bits / 8)
    }

    /// The alignment a zero-copy view of this dtype needs (C64 is a pair of f32).
    pub fn alignment(self) -> usize {
        match self {
            DType::C64 => 4,
            other => other.size().unwrap_or(1),
        }
    }

    /// Bytes taken by `numel` elements, with the reference's rule that the bit count must
    /// land on a byte boundary. `None` on overflow or a partial byte.
    pub fn byte_len(self, numel: usize) -> Option<usize> {
        let bits = numel.checked_mul(self.bits())?;
        bits.is_multiple_of(8).then_some(bits / 8)
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::BOOL => "BOOL",
            DType::F4 => "F4",
            DType::F6_E2M3 => "F6_E2M3",
            DType::F6_E3M2 => "F6_E3M2",
            DType::U8 => "U8",
            DType::I8 => "I8",
            DType::F8_E5M2 => "F8_E5M2",
            DType::F8_E4M3 => "F8_E4M3",
            DType::F8_E8M0 => "F8_E8M0",
            DType::F8_E4M3FNUZ => "F8_E4M3FNUZ",
            DType::F8_E5M2FNUZ => "F8_E5M2FNUZ",
            DType::I16 => "I16",
            DType::U16 => "U16",
            DType::F16 => "F16",
            DType::BF16 => "BF16",
            DType::I32 => "I32",
            DType::U32 => "U32",
            DType::F32 => "F32",
            DType::C64 => "C64",
            DType::F64 => "F64",
            DType::I64 => "I64",
            DType::U64 => "U64",
        }
    }

    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Parse a dtype given by a caller; unknown names are ERR_INVALID_ARGUMENT.
    pub fn parse_arg(name: &str) -> Result<DType> {
        DType::from_name(name)
            .ok_or_else(|| CoreError::invalid_argument(format!("unknown dtype '{name}'")))
    }

    /// Real numbers that convert exactly or by rounding to f32/f64 (`as: 'F32' | 'F64'`).
    /// Excludes the packed sub-byte types and complex numbers.
    pub fn is_real_numeric(self) -> bool {
        !matches!(
            self,
            DType::F4 | DType::F6_E2M3 | DType::F6_E3M2 | DType::C64
        )
    }

    /// Floating-point types narrower than f32 whose native JS form is an upcast Float32Array.
    pub fn upcasts_to_f32(self) -> bool {
        matches!(
            self,
            DType::F16
                | DType::BF16
                | DType::F8_E5M2
                | DType::F8_E4M3
                | DType::F8_E8M0
                | DType::F8_E4M3FNUZ
                | DType::F8_E5M2FNUZ
        )
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_order_matches_reference() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
        }
        let mut sorted = DType::ALL;
        sorted.sort();
        assert_eq!(sorted, DType::ALL);
        assert_eq!(DType::from_name("f32"), None);
    }

    #[test]
    fn byte_len_rules() {
        assert_eq!(DType::F32.byte_len(3), Some(12));
        assert_eq!(DType::F4.byte_len(2), Some(1));
        assert_eq!(DType::F4.byte_len(3), None);
        assert_eq!(DType::F6_E2M3.byte_len(4), Some(3));
        assert_eq!(DType::U64.byte_len(usize::MAX), None);
    }
}
