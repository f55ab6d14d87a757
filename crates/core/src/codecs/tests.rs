//! Unit tests of the codecs: golden Q8_0/Q4_0 blocks computed by hand from ggml's formulas,
//! every fast kernel against its reference, the type table. The comparisons with the peers
//! (gguf-py, ggml's C) are in `crates/core/tests/ggml_peer.rs`.

use super::simd::Kernel;
use super::*;
use half::f16;

/// A small deterministic generator (splitmix64), so tests need no extra crate.
struct Rng(u64);
impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// Values of several shapes: uniform, wide dynamic range, exact halves (rounding ties),
/// repeated magnitudes of both signs (Q4_0 tie-breaking), zeros and tiny values.
fn test_values(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|i| match (i / 32) % 6 {
            0 => rng.unit(),
            1 => rng.unit() * 10f32.powi((rng.next_u64() % 12) as i32 - 6),
            2 => ((rng.next_u64() % 255) as f32 - 127.0) * 0.5,
            3 => [3.0, -3.0, 1.5, -1.5][(rng.next_u64() % 4) as usize],
            4 => 0.0,
            _ => rng.unit() * 1e-30,
        })
        .collect()
}

fn q8(x: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; x.len() / QK * Q8_0_BLOCK_BYTES];
    quantize_q8_0_ref(x, &mut out).unwrap();
    out
}

fn q4(x: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; x.len() / QK * Q4_0_BLOCK_BYTES];
    quantize_q4_0_ref(x, &mut out).unwrap();
    out
}

#[test]
fn q8_0_golden_ties_round_away_from_zero() {
    // amax = 127 gives d = 1 (f16 0x3C00) and id = 1, so q = round(x) exactly.
    let mut x = [0f32; 32];
    x[..10].copy_from_slice(&[
        127.0,
        0.5,
        -0.5,
        1.5,
        2.5,
        -2.5,
        0.499_999_97,
        3.0,
        -127.0,
        126.5,
    ]);
    let mut expected = vec![0x00, 0x3C];
    let q: [i8; 10] = [127, 1, -1, 2, 3, -3, 0, 3, -127, 127];
    expected.extend(q.iter().map(|&v| v as u8));
    expected.extend([0u8; 22]);
    assert_eq!(q8(&x), expected);
}

#[test]
fn q8_0_golden_scale_is_f32_before_f16() {
    // amax = 1: d = 1/127 ≈ 0.0078740157, stored as f16 0x2008 (1.0078125 × 2^-7). id comes
    // from the f32 d (≈ 127), so 0.7913 → 100.4951 → 100; an id from the f16 d (≈ 127.0078)
    // would give 100.5012 → 101.
    let mut x = [0f32; 32];
    x[0] = 1.0;
    x[1] = 0.7913;
    x[2] = -1.0;
    let out = q8(&x);
    assert_eq!(&out[..2], &[0x08, 0x20]);
    assert_eq!(out[2] as i8, 127);
    assert_eq!(out[3] as i8, 100);
    assert_eq!(out[4] as i8, -127);
}

#[test]
fn q4_0_golden_negative_max_truncation_and_cap() {
    // max = -8 (first of the ±8 tie) gives d = 1 and id = 1: q = min(15, trunc(x + 8.5)).
    let mut x = [0f32; 32];
    x[..7].copy_from_slice(&[-8.0, 7.0, 7.4, -0.6, 3.49, 0.5, -0.5]);
    x[16] = 2.5;
    x[17] = -3.2;
    x[31] = 8.0;
    // Elements 0..16: 0, 15, 15 (15.9 truncated), 7 (7.9 truncated, rounding would give 8),
    // 11 (11.99), 9, 8, then 8s. Elements 16..32: 11, 5, 8s, and 16.5 → 16 → capped 15.
    let mut expected = vec![0x00, 0x3C, 0xB0, 0x5F, 0x8F, 0x87, 0x8B, 0x89];
    expected.extend([0x88; 9]);
    expected.push(0xF8);
    assert_eq!(q4(&x), expected);
}

#[test]
fn q4_0_golden_positive_max_gives_negative_scale() {
    // max = +8 (before -8): d = -1 (f16 0xBC00), id = -1.
    let mut x = [0f32; 32];
    x[..4].copy_from_slice(&[8.0, -8.0, -7.9, 1.0]);
    // 0.5 → 0; 16.5 → 15; 16.4 → 15; 7.5 → 7; zeros → 8.
    let mut expected = vec![0x00, 0xBC, 0x80, 0x8F, 0x8F, 0x87];
    expected.extend([0x88; 12]);
    assert_eq!(q4(&x), expected);
}

#[test]
fn zero_blocks() {
    let x = [0f32; 32];
    let mut expected = vec![0u8; 34];
    assert_eq!(q8(&x), expected);
    // Q4_0: d = +0 / -8 = -0.0, f16 0x8000; id = 0 so every element is trunc(8.5) = 8.
    expected = vec![0x00, 0x80];
    expected.extend([0x88; 16]);
    assert_eq!(q4(&x), expected);
    // Negative zeros do not change the maximum's sign (|-0| is not > 0).
    assert_eq!(q4(&[-0.0; 32]), expected);
}

#[test]
fn dequantize_formulas() {
    let mut block = vec![0x00, 0x40]; // d = 2.0
    block.extend((0..32).map(|i| (i as i8 - 16) as u8));
    let mut out = [0f32; 32];
    dequantize_q8_0_ref(&block, &mut out).unwrap();
    for (i, v) in out.iter().enumerate() {
        assert_eq!(*v, 2.0 * (i as f32 - 16.0));
    }
    let mut block = vec![0x00, 0xC0]; // d = -2.0
    block.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    dequantize_q4_0_ref(&block, &mut out).unwrap();
    for j in 0..16 {
        assert_eq!(out[j], -2.0 * (j as f32 - 8.0));
        assert_eq!(out[j + 16], -2.0 * (7.0 - j as f32));
    }
}

#[test]
fn length_mismatches_are_errors() {
    let mut out = vec![0u8; 34];
    assert_eq!(
        quantize_q8_0(&[0.0; 31], &mut out).unwrap_err().code(),
        "ERR_INVALID_ARGUMENT"
    );
    assert!(quantize_q4_0_ref(&[0.0; 32], &mut out).is_err());
    assert!(dequantize_q8_0(&[0u8; 33], &mut [0.0; 32]).is_err());
    assert!(quantize_q8_0(&[], &mut []).is_ok());
}

fn kernels() -> Vec<Kernel> {
    let mut k = vec![Kernel::Portable];
    if Kernel::best() != Kernel::Portable {
        k.push(Kernel::best());
    }
    k
}

#[test]
fn fast_quantizers_equal_reference_bit_for_bit() {
    // The largest size crosses the threshold for splitting over threads.
    for (i, &blocks) in [0usize, 1, 2, 7, 33, 1000, (1 << 14) + 5]
        .iter()
        .enumerate()
    {
        let x = test_values(blocks * QK, 42 + i as u64);
        let want8 = q8(&x);
        let want4 = q4(&x);
        for kernel in kernels() {
            let mut got = vec![0u8; want8.len()];
            q8_0::quantize_q8_0_with(kernel, &x, &mut got).unwrap();
            assert!(got == want8, "Q8_0 {kernel:?} differs at {blocks} blocks");
            let mut got = vec![0u8; want4.len()];
            q4_0::quantize_q4_0_with(kernel, &x, &mut got).unwrap();
            assert!(got == want4, "Q4_0 {kernel:?} differs at {blocks} blocks");

            let mut want = vec![0f32; x.len()];
            let mut got = vec![0f32; x.len()];
            dequantize_q8_0_ref(&want8, &mut want).unwrap();
            q8_0::dequantize_q8_0_with(kernel, &want8, &mut got).unwrap();
            assert!(bits(&got) == bits(&want));
            dequantize_q4_0_ref(&want4, &mut want).unwrap();
            q4_0::dequantize_q4_0_with(kernel, &want4, &mut got).unwrap();
            assert!(bits(&got) == bits(&want));
        }
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

#[test]
fn fast_quantizers_equal_reference_on_non_finite_input() {
    let specials = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e-40,
        -1e-42,
        f32::MAX,
        -0.0,
    ];
    let mut rng = Rng(7);
    let x: Vec<f32> = (0..QK * 200)
        .map(|_| {
            if rng.next_u64().is_multiple_of(5) {
                specials[(rng.next_u64() % specials.len() as u64) as usize]
            } else {
                rng.unit()
            }
        })
        .collect();
    for kernel in kernels() {
        let mut got = vec![0u8; x.len() / QK * Q8_0_BLOCK_BYTES];
        q8_0::quantize_q8_0_with(kernel, &x, &mut got).unwrap();
        assert_eq!(got, q8(&x));
        let mut got = vec![0u8; x.len() / QK * Q4_0_BLOCK_BYTES];
        q4_0::quantize_q4_0_with(kernel, &x, &mut got).unwrap();
        assert_eq!(got, q4(&x));
    }
}

/// Blocks built to reach every branch of the kernels: the maximum magnitude at each of the
/// 32 positions with either sign, ties between +m and -m in both orders (Q4_0 keeps the
/// first), scales whose reciprocal overflows (d subnormal) or whose f16 underflows or
/// overflows, and all-zero, all-NaN and signed-zero blocks; then blocks of random bit
/// patterns (every NaN payload, infinity and subnormal is a possible value).
#[test]
fn fast_quantizers_equal_reference_on_edge_blocks_and_random_bits() {
    let mut rng = Rng(99);
    let mut x: Vec<f32> = Vec::new();
    let mut block = |f: &mut dyn FnMut(usize) -> f32| x.extend((0..QK).map(f));
    for pos in 0..QK {
        for m in [
            2.5f32,
            -2.5,
            1e-41,
            -3e-39,
            7e4,
            -1e5,
            f32::MAX,
            f32::INFINITY,
        ] {
            block(&mut |j| {
                if j == pos {
                    m
                } else {
                    (j as f32 - 16.0) * 1e-3 * m.signum()
                }
            });
            // +m first and -m later, and the other way round.
            let later = (pos + 7) % QK;
            block(&mut |j| match j {
                _ if j == pos.min(later) => m,
                _ if j == pos.max(later) => -m,
                _ => 0.0,
            });
        }
    }
    block(&mut |_| 0.0);
    block(&mut |_| -0.0);
    block(&mut |_| f32::NAN);
    block(&mut |j| if j % 2 == 0 { f32::NAN } else { -1e-45 });
    block(&mut |j| (j as f32 - 15.5) * 127.0 / 15.5); // values on both sides of ±127
    for _ in 0..4000 {
        let mut bits = || f32::from_bits(rng.next_u64() as u32);
        block(&mut |_| bits());
    }
    type Quantizer = fn(Kernel, &[f32], &mut [u8]) -> crate::Result<()>;
    let formats: [(&str, Quantizer, usize, Vec<u8>); 2] = [
        ("Q8_0", q8_0::quantize_q8_0_with, Q8_0_BLOCK_BYTES, q8(&x)),
        ("Q4_0", q4_0::quantize_q4_0_with, Q4_0_BLOCK_BYTES, q4(&x)),
    ];
    for kernel in kernels() {
        for (format, quantize, block_bytes, want) in &formats {
            let mut got = vec![0u8; want.len()];
            quantize(kernel, &x, &mut got).unwrap();
            for (b, (g, w)) in got
                .chunks(*block_bytes)
                .zip(want.chunks(*block_bytes))
                .enumerate()
            {
                assert_eq!(
                    g,
                    w,
                    "{format} {kernel:?} block {b}: {:?}",
                    &x[b * QK..][..QK]
                );
            }
        }
    }
}

#[test]
fn dequantized_error_is_within_half_a_step() {
    let x = test_values(QK * 600, 3);
    let mut back = vec![0f32; x.len()];
    let enc8 = q8(&x);
    dequantize_q8_0(&enc8, &mut back).unwrap();
    for (b, (xs, ys)) in x.chunks(QK).zip(back.chunks(QK)).enumerate() {
        let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let d16 = f16::from_f32(d).to_f32();
        let bound = d / 2.0 + 127.0 * (d - d16).abs() + amax * 1e-6;
        for (a, y) in xs.iter().zip(ys) {
            assert!(
                (a - y).abs() <= bound,
                "Q8_0 block {b}: {a} vs {y}, bound {bound}"
            );
        }
    }
    let enc4 = q4(&x);
    dequantize_q4_0(&enc4, &mut back).unwrap();
    for (b, (xs, ys)) in x.chunks(QK).zip(back.chunks(QK)).enumerate() {
        let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 8.0;
        let d16 = f16::from_f32(d).to_f32();
        let bound = d + 8.0 * (d - d16).abs() + amax * 1e-6;
        for (a, y) in xs.iter().zip(ys) {
            assert!(
                (a - y).abs() <= bound,
                "Q4_0 block {b}: {a} vs {y}, bound {bound}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Every codec of the table.

#[test]
fn table_ids_and_names_are_unique_and_round_trip() {
    let mut ids = std::collections::HashSet::new();
    let mut names = std::collections::HashSet::new();
    for &t in GgmlType::ALL {
        assert!(ids.insert(t.id()), "{t}: duplicate id");
        assert!(names.insert(t.name()), "{t}: duplicate name");
        assert_eq!(GgmlType::from_id(t.id()), Some(t));
        assert_eq!(GgmlType::from_name(&t.name().to_lowercase()), Some(t));
        assert_eq!(t.codec().ty, t);
        // Plain types are their own dtype; block types decode to F32 or are unsupported.
        match (t.codec().native, t.is_quantized()) {
            (Some(d), false) => assert_eq!(d.size(), Some(t.type_size()), "{t}"),
            (None, true) => {}
            other => panic!("{t}: {other:?}"),
        }
    }
    for removed in [4, 5, 31, 32, 33, 36, 37, 38, 43, u32::MAX] {
        assert_eq!(GgmlType::from_id(removed), None);
    }
}

#[test]
fn types_without_a_codec_are_explicitly_unsupported() {
    for &t in GgmlType::ALL {
        let (block, bytes) = (t.block_size(), t.type_size());
        let mut values = vec![0f32; block * 3];
        let data = vec![0u8; bytes * 3];
        match decode(t, &data, &mut values) {
            Ok(()) => assert!(t.can_decode()),
            Err(e) => {
                assert!(!t.can_decode(), "{t}: {e}");
                assert_eq!(e.code(), "ERR_UNSUPPORTED_DTYPE");
                assert!(e.to_string().contains(t.name()), "{e}");
            }
        }
        let mut out = vec![0u8; bytes * 3];
        match encode(t, &values, &mut out) {
            Ok(()) => assert!(t.can_encode()),
            Err(e) => {
                assert!(!t.can_encode(), "{t}: {e}");
                assert_eq!(e.code(), "ERR_UNSUPPORTED_DTYPE");
            }
        }
    }
}

#[test]
fn lengths_that_are_not_whole_blocks_are_errors() {
    for &t in GgmlType::ALL.iter().filter(|t| t.can_decode()) {
        let (block, bytes) = (t.block_size(), t.type_size());
        let mut values = vec![0f32; block * 2];
        let e = decode(t, &vec![0u8; bytes * 2 - 1], &mut values).unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_ARGUMENT", "{t}");
        assert!(decode(t, &vec![0u8; bytes], &mut values).is_err(), "{t}");
        if block > 1 {
            let mut short = vec![0f32; block * 2 - 1];
            assert!(decode(t, &vec![0u8; bytes * 2], &mut short).is_err(), "{t}");
        }
    }
    for &t in GgmlType::ALL.iter().filter(|t| t.can_encode()) {
        let (block, bytes) = (t.block_size(), t.type_size());
        let mut out = vec![0u8; bytes * 2];
        if block > 1 {
            let e = encode(t, &vec![0f32; block * 2 - 1], &mut out).unwrap_err();
            assert_eq!(e.code(), "ERR_INVALID_ARGUMENT", "{t}");
        }
        assert!(encode(t, &vec![0f32; block], &mut out).is_err(), "{t}");
    }
}

/// Random block bytes with the f16 scales drawn from every class of value.
fn random_blocks(t: GgmlType, n_blocks: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed);
    (0..n_blocks * t.type_size())
        .map(|_| rng.next_u64() as u8)
        .collect()
}

#[test]
fn every_fast_decoder_equals_its_reference() {
    for &t in GgmlType::ALL.iter().filter(|t| t.can_decode()) {
        // The largest count crosses the threshold for splitting over threads.
        for (i, n) in [1usize, 3, 17, (PARALLEL_MIN_VALUES / t.block_size()) + 3]
            .into_iter()
            .enumerate()
        {
            let data = random_blocks(t, n, 100 + i as u64);
            let mut want = vec![0f32; n * t.block_size()];
            let mut got = vec![0f32; n * t.block_size()];
            decode_ref(t, &data, &mut want).unwrap();
            decode(t, &data, &mut got).unwrap();
            assert!(bits(&got) == bits(&want), "{t}, {n} blocks");
        }
    }
}

#[test]
fn every_fast_encoder_equals_its_reference() {
    let specials = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e-40,
        -0.0,
        7e4,
        f32::MAX,
    ];
    for &t in GgmlType::ALL.iter().filter(|t| t.can_encode()) {
        for (i, n) in [1usize, 5, (PARALLEL_MIN_VALUES / t.block_size()) + 3]
            .into_iter()
            .enumerate()
        {
            let mut x = test_values(n * t.block_size(), 7 + i as u64);
            let mut rng = Rng(i as u64);
            for v in x.iter_mut().step_by(97) {
                *v = specials[(rng.next_u64() % specials.len() as u64) as usize];
            }
            let mut want = vec![0u8; n * t.type_size()];
            let mut got = vec![0u8; n * t.type_size()];
            encode_ref(t, &x, &mut want).unwrap();
            encode(t, &x, &mut got).unwrap();
            assert!(got == want, "{t}, {n} blocks");
            encode_here(t, &x, &mut got).unwrap();
            assert!(got == want, "{t}, {n} blocks, one thread");
        }
    }
}

/// Encoding and decoding again stays within a few quantization steps of each sub-block's
/// range (a sanity check of the layouts; exactness is checked against the peers).
#[test]
fn encoded_blocks_decode_close_to_the_input() {
    let steps = |t: GgmlType| match t {
        GgmlType::F32 => 0.0,
        GgmlType::F16 | GgmlType::BF16 => 1.0 / 128.0,
        GgmlType::Q8_0 | GgmlType::Q6_K => 1.0 / 16.0,
        GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q5_K => 1.0 / 8.0,
        GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q4_K => 1.0 / 4.0,
        GgmlType::Q3_K => 1.0 / 2.0,
        _ => 1.0,
    };
    let mut rng = Rng(5);
    for &t in GgmlType::ALL.iter().filter(|t| t.can_encode()) {
        let n = 64 * QK_K;
        let x: Vec<f32> = (0..n).map(|_| rng.unit()).collect();
        let mut enc = vec![0u8; n / t.block_size() * t.type_size()];
        encode(t, &x, &mut enc).unwrap();
        let mut back = vec![0f32; n];
        decode(t, &enc, &mut back).unwrap();
        let err = x
            .iter()
            .zip(&back)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(
            err <= steps(t),
            "{t}: max error {err} over values in [-1, 1)"
        );
    }
}

/// The K-quant encoders search every sub-block's scale side by side (one vector lane each);
/// sub-blocks that take the scalar search's early exits (all values equal, positive or not;
/// all zero; below GROUP_MAX_EPS) must come out as the reference's, next to ordinary ones.
#[test]
fn k_quant_lanes_equal_the_sub_block_by_sub_block_search() {
    let mut rng = Rng(11);
    let mut x = Vec::new();
    for b in 0..400 {
        for sub in 0..16 {
            let v = rng.unit();
            let kind = (b + sub * 7) % 8;
            x.extend((0..16).map(|i| match kind {
                0 => 2.5,
                1 => -0.75,
                2 => 0.0,
                3 => 1e-16 * rng.unit(),
                4 if i == 3 => 9.0,
                4 => 0.0,
                5 => v + i as f32 * 1e-3,
                6 => f32::from_bits(rng.next_u64() as u32),
                _ => rng.unit() * 10f32.powi((rng.next_u64() % 9) as i32 - 4),
            }));
        }
    }
    for ty in [
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
    ] {
        let mut want = vec![0u8; x.len() / QK_K * ty.type_size()];
        let mut got = want.clone();
        encode_ref(ty, &x, &mut want).unwrap();
        encode_here(ty, &x, &mut got).unwrap();
        for (b, (g, w)) in got
            .chunks(ty.type_size())
            .zip(want.chunks(ty.type_size()))
            .enumerate()
        {
            assert_eq!(g, w, "{ty} block {b}: {:?}", &x[b * QK_K..][..QK_K]);
        }
    }
}
