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

/// `parse_header` over every prefix of a file: it asks for more until it has the whole
/// header (never for less than it has, never past the data section), then gives exactly
/// what `GgufFile::parse` gives; every error of a bad file is the same as `parse`'s.
#[test]
fn header_from_prefixes() {
    use crate::tensor::TensorView;
    let values: Vec<f32> = (0..96).map(|i| i as f32 / 7.0).collect();
    let specs = [
        GgufTensorSpec::new("a", vec![3, 32], GgmlType::Q8_0),
        GgufTensorSpec::new("b", vec![96], GgmlType::F32),
    ];
    let views = [
        TensorView::from_f32("a", vec![3, 32], &values).unwrap(),
        TensorView::from_f32("b", vec![96], &values).unwrap(),
    ];
    let mut metadata = standard_metadata("test", "t", &specs);
    metadata.push((
        "tokens".into(),
        GgufValue::Array(GgufArray::String(
            (0..50).map(|i| format!("token{i}")).collect(),
        )),
    ));
    let mut bytes = Vec::new();
    write_gguf(&mut bytes, &metadata, &specs, |i, _| Ok(views[i].clone())).unwrap();
    let whole = GgufFile::parse(&bytes).unwrap().into_parts();
    let len = bytes.len() as u64;
    let mut k = 0;
    let mut requests = 0;
    let parts = loop {
        match parse_header(&bytes[..k], len).unwrap() {
            GgufHeader::NeedBytes(n) => {
                assert!(n > k && n <= whole.data_offset, "asked {n} with {k}");
                requests += 1;
                k = n;
            }
            GgufHeader::Parsed(p) => break p,
        }
    };
    assert!(requests > 10 && k <= whole.data_offset);
    assert_eq!(format!("{parts:?}"), format!("{whole:?}"));
    for k in 0..=bytes.len() {
        match parse_header(&bytes[..k], len).unwrap() {
            GgufHeader::NeedBytes(n) => assert!(n > k),
            GgufHeader::Parsed(p) => assert_eq!(p.data_offset, whole.data_offset),
        }
    }
    // A file cut short: the header alone tells (the last tensor runs past the end), with
    // `parse`'s error, whatever prefix is given.
    let cut = &bytes[..bytes.len() - 8];
    let want = GgufFile::parse(cut).unwrap_err().to_string();
    let got = parse_header(&cut[..whole.data_offset], cut.len() as u64).unwrap_err();
    assert_eq!(got.to_string(), want);
    assert_eq!(got.tensor(), Some("b"));
    // A lying count is refused against the whole file's length, before any byte is wanted.
    let mut lying = bytes.clone();
    lying[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert_eq!(
        parse_header(&lying[..24], len).unwrap_err().code(),
        "ERR_INVALID_GGUF"
    );
    assert_eq!(
        parse_header(&bytes[..10], 5).unwrap_err().code(),
        "ERR_INVALID_ARGUMENT"
    );
}
