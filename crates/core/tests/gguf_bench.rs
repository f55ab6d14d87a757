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
