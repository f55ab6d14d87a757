//! A whole SafeTensors file as raw bytes: `SafeTensors::from_bytes` (verdict and code equal
//! to the reference implementation's), then every tensor through `view`, `to_f32_vec`,
//! `to_f64_vec` and `slice` with ranges derived from the input.
#![no_main]

use fuzz_oracles::{check_against_reference, exercise_tensors, fnv};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|file: &[u8]| {
    if let Some(st) = check_against_reference(file) {
        exercise_tensors(&st, fnv(file));
    }
});
