//! Unit tests of the writer's type policy and helpers. The codecs are tested in
//! `crate::codecs`; round trips through files and hostile inputs in `crates/core/tests/gguf_*.rs`.

use super::*;

#[test]
fn ggml_type_table() {
    assert_eq!(GgmlType::from_id(8), Some(GgmlType::Q8_0));
    assert_eq!(GgmlType::Q8_0.type_size(), 34);
    assert_eq!(GgmlType::Q4_0.block_size(), 32);
    assert_eq!(GgmlType::from_name("bf16"), Some(GgmlType::BF16));
    assert_eq!(GgmlType::from_id(4), None);
    assert_eq!(GgmlType::from_id(42), Some(GgmlType::Q2_0));
    assert_eq!(GgmlType::from_id(43), None);
    assert_eq!(GgmlType::Q8_0.byte_len(64), Some(68));
    assert_eq!(GgmlType::Q8_0.byte_len(33), None);
    assert_eq!(GgmlType::F32.byte_len(usize::MAX), None);
    assert_eq!(
        GgmlType::from_name("Q4_K").map(|t| t.type_size()),
        Some(144)
    );
}

#[test]
fn choose_type_policy() {
    use Preset::*;
    assert_eq!(choose_type(&[4096, 4096], Q8_0), GgmlType::Q8_0);
    assert_eq!(choose_type(&[8, 4096, 64], Q4_0), GgmlType::Q4_0);
    assert_eq!(choose_type(&[4096], Q8_0), GgmlType::F32);
    assert_eq!(choose_type(&[], Q4_0), GgmlType::F32);
    assert_eq!(choose_type(&[4096], F16), GgmlType::F16);
    assert_eq!(choose_type(&[10, 33], Q8_0), GgmlType::F16);
    assert_eq!(choose_type(&[33, 10], F32), GgmlType::F32);
    // K presets: the main type, falling back as llama-quantize does for short rows.
    assert_eq!(choose_type(&[64, 512], Q4_K_M), GgmlType::Q4_K);
    assert_eq!(choose_type(&[64, 96], Q4_K_S), GgmlType::Q5_0);
    assert_eq!(choose_type(&[64, 96], Q6_K), GgmlType::Q8_0);
    assert_eq!(choose_type(&[64, 96], Q5_K_M), GgmlType::Q5_1);
    assert_eq!(choose_type(&[64, 96], Q2_K), GgmlType::Q4_0);
    assert_eq!(choose_type(&[64, 100], Q3_K_L), GgmlType::F16);
    assert_eq!(Preset::parse("q4_0").unwrap(), Q4_0);
    assert_eq!(Preset::parse("q4_k").unwrap(), Q4_K_M);
    assert_eq!(
        Preset::parse("q4_2").unwrap_err().code(),
        "ERR_INVALID_ARGUMENT"
    );
}

#[test]
fn align_up_rounds_to_power_of_two() {
    assert_eq!(align_up(0, 32), Some(0));
    assert_eq!(align_up(1, 32), Some(32));
    assert_eq!(align_up(64, 32), Some(64));
    assert_eq!(align_up(u64::MAX, 32), None);
}
