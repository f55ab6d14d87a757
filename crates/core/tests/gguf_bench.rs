//! Rough timing of the quantizers on 64 Mi elements (ignored; run in release):
//! `cargo test --release -p safetensors-node-core --test gguf_bench -- --ignored --nocapture`.
//! Compare with gguf-py: `python -c "import gguf, numpy as np, time; x = np.random.rand(1 << 26)
//! .astype(np.float32); t = time.time(); gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0);
//! print(time.time() - t)"`.

use stcore::format::gguf::{
    dequantize_q4_0, dequantize_q8_0, quantize_q4_0, quantize_q4_0_ref, quantize_q8_0,
    quantize_q8_0_ref, Q4_0_BLOCK_BYTES, Q8_0_BLOCK_BYTES, QK,
};
use std::time::Instant;

#[test]
#[ignore = "timing, not a check; run in release"]
fn quantize_64m_elements() {
    let n = 1usize << 26;
    let x: Vec<f32> = (0..n)
        .map(|i| ((i as u32).wrapping_mul(2_654_435_761) >> 8) as f32 / (1 << 24) as f32 - 0.5)
        .collect();
    let mut q8 = vec![0u8; n / QK * Q8_0_BLOCK_BYTES];
    let mut q4 = vec![0u8; n / QK * Q4_0_BLOCK_BYTES];
    let mut back = vec![0f32; n];
    let time = |label: &str, f: &mut dyn FnMut()| {
        f(); // warm up: page in the buffers
        let start = Instant::now();
        f();
        println!(
            "{label:>24}: {:8.1} ms",
            start.elapsed().as_secs_f64() * 1e3
        );
    };
    time("quantize_q8_0", &mut || quantize_q8_0(&x, &mut q8).unwrap());
    time("quantize_q8_0_ref", &mut || {
        quantize_q8_0_ref(&x, &mut q8).unwrap()
    });
    time("quantize_q4_0", &mut || quantize_q4_0(&x, &mut q4).unwrap());
    time("quantize_q4_0_ref", &mut || {
        quantize_q4_0_ref(&x, &mut q4).unwrap()
    });
    time("dequantize_q8_0", &mut || {
        dequantize_q8_0(&q8, &mut back).unwrap()
    });
    time("dequantize_q4_0", &mut || {
        dequantize_q4_0(&q4, &mut back).unwrap()
    });
}

/// In-memory decoding of every block type, 16 Mi values each (the size of `npm run bench`
/// row 6), on all threads and on one. Compare with gguf-py: `gguf.quants.dequantize` of the
/// same blocks (row 6's gguf-py column). `GGUF_BENCH_TYPES=Q2_K,IQ3_S` times only those.
#[test]
#[ignore = "timing, not a check; run in release"]
fn decode_every_type_16m_values() {
    use stcore::codecs::{self, GgmlType};
    let n = 1usize << 24;
    let only = std::env::var("GGUF_BENCH_TYPES").ok();
    let wanted = |t: &GgmlType| match only.as_deref() {
        Some(list) => list.split(',').any(|name| name.trim() == t.name()),
        None => true,
    };
    for &ty in GgmlType::ALL
        .iter()
        .filter(|t| t.is_quantized() && t.can_decode() && wanted(t))
    {
        let (block, bytes) = (ty.block_size(), ty.type_size());
        let mut blocks: Vec<u8> = (0..n / block * bytes)
            .map(|i| ((i as u32).wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        // Finite f16 scales at the front of most layouts (timing does not depend on them).
        for b in blocks.chunks_exact_mut(bytes) {
            b[1] &= 0x3b;
        }
        let mut out = vec![0f32; n];
        codecs::decode(ty, &blocks, &mut out).unwrap(); // warm up: page in the buffers
        let mut median_of_9 = |decode: &dyn Fn(&mut [f32])| {
            let mut times: Vec<f64> = (0..9)
                .map(|_| {
                    let start = Instant::now();
                    decode(&mut out);
                    start.elapsed().as_secs_f64() * 1e3
                })
                .collect();
            times.sort_by(f64::total_cmp);
            (times[4], times[0])
        };
        let (all, all_min) = median_of_9(&|o| codecs::decode(ty, &blocks, o).unwrap());
        let (one, one_min) = median_of_9(&|o| codecs::decode_here(ty, &blocks, o).unwrap());
        println!(
            "{:>8} decode 16M values: {all:7.1} ms (min {all_min:5.1}) all threads, \
             {one:7.1} ms (min {one_min:5.1}) one thread; medians of 9",
            ty.name(),
        );
    }
}

/// Each K-quant encoder on 4 Mi values on one thread: the fast kernel (scale searches side by
/// side) against the reference (one sub-block at a time); both give the same bytes.
#[test]
#[ignore = "timing, not a check; run in release"]
fn encode_k_quants_4m_values_one_thread() {
    use stcore::codecs::{self, GgmlType};
    let n = 1usize << 22;
    let x: Vec<f32> = (0..n)
        .map(|i| ((i as u32).wrapping_mul(2_654_435_761) >> 8) as f32 / (1 << 24) as f32 - 0.5)
        .collect();
    for ty in [
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
    ] {
        let mut fast = vec![0u8; n / ty.block_size() * ty.type_size()];
        let mut reference = fast.clone();
        let time = |f: &mut dyn FnMut()| {
            f(); // warm up: page in the buffers
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e3
        };
        let t_fast = time(&mut || codecs::encode_here(ty, &x, &mut fast).unwrap());
        let t_ref = time(&mut || codecs::encode_ref(ty, &x, &mut reference).unwrap());
        assert!(fast == reference, "{ty}: the fast encoder's bytes differ");
        println!(
            "{:>8} encode 4M values: {t_fast:7.1} ms (reference {t_ref:7.1} ms)",
            ty.name()
        );
    }
}
