//! Every ggml codec against its peers, bit for bit:
//!
//! * decoders against gguf-py's `gguf.quants.dequantize` (llama.cpp's Python package, whose
//!   numpy code fixes the order of the float operations), on random blocks whose scales take
//!   every kind of f16 value (subnormal, NaN with various payloads, ±Inf), and on GGUF files
//!   that gguf-py's own writer produced;
//! * encoders against ggml's reference quantizers (`quantize_row_*_ref` of `ggml-quants.c`,
//!   compiled unchanged by `scripts/peers/ggml.mjs`), and the 32-element types also against
//!   gguf-py's `quantize`, on random, edge and non-finite inputs.
//!
//! Ignored by default: they need the project's Python environment (`scripts/ggml_oracle.py`,
//! `$STCORE_PYTHON` or `<repo>/.venv/bin/python`) and a C compiler. `npm test` runs them.

use stcore::codecs::{self, GgmlType};
use stcore::format::gguf::GgufFile;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn repo_root() -> PathBuf {
    std::env::var_os("STCORE_REPO_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

fn python() -> PathBuf {
    std::env::var_os("STCORE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv/bin/python"))
}

/// Run a batch of gguf-py jobs (see `scripts/ggml_oracle.py`).
fn oracle(dir: &Path, jobs: serde_json::Value) {
    let path = dir.join(format!("jobs-{}.json", rand_name()));
    std::fs::write(&path, jobs.to_string()).unwrap();
    let out = Command::new(python())
        .arg(repo_root().join("scripts/ggml_oracle.py"))
        .arg("batch")
        .arg(&path)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "ggml_oracle.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn rand_name() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// ggml's C reference, built once per llama.cpp version.
fn ggml_peer() -> &'static Path {
    static PEER: OnceLock<PathBuf> = OnceLock::new();
    PEER.get_or_init(|| {
        let out = Command::new("node")
            .arg(repo_root().join("scripts/peers/ggml.mjs"))
            .output()
            .expect("run node");
        assert!(
            out.status.success(),
            "building ggml-peer failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
}

fn c_quantize(dir: &Path, ty: GgmlType, x: &[f32]) -> Vec<u8> {
    let (input, output) = (
        dir.join(format!("c-{}.f32", rand_name())),
        dir.join(format!("c-{}.bin", rand_name())),
    );
    std::fs::write(&input, f32_bytes(x)).unwrap();
    let out = Command::new(ggml_peer())
        .args(["quantize", ty.name()])
        .arg(&input)
        .arg(&output)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(output).unwrap()
}

fn f32_bytes(x: &[f32]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// Byte offsets of the f16 scales in one block of `ty` (where the format has them).
fn f16_scale_offsets(ty: GgmlType) -> &'static [usize] {
    use GgmlType::*;
    match ty {
        F16 | Q4_0 | Q5_0 | Q8_0 | IQ2_XXS | IQ2_XS | IQ2_S | IQ3_XXS | IQ3_S | IQ1_S | IQ4_NL
        | IQ4_XS => &[0],
        Q4_1 | Q5_1 | Q4_K | Q5_K => &[0, 2],
        Q2_K => &[80, 82],
        Q3_K => &[108],
        Q6_K => &[208],
        TQ1_0 => &[52],
        TQ2_0 => &[64],
        // IQ1_M spreads its scale over four nibbles; MXFP4/NVFP4 have 8-bit scales; the
        // rest have no f16 scale.
        _ => &[],
    }
}

/// f16 scales of every kind: NaN (quiet, signalling, negative, other payloads), ±Inf,
/// subnormals, ±0, the largest finite, ordinary values.
const SPECIAL_F16: [u16; 14] = [
    0x7E00, 0x7C01, 0xFE01, 0x7D55, 0x7C00, 0xFC00, 0x0001, 0x83FF, 0x0000, 0x8000, 0x7BFF, 0x3C00,
    0xBC00, 0x2E66,
];

/// `n` random blocks of `ty`; every fourth block gets special f16 scales.
fn random_blocks(ty: GgmlType, n: usize, rng: &mut Rng) -> Vec<u8> {
    let size = ty.type_size();
    let mut data: Vec<u8> = (0..n * size).map(|_| rng.next() as u8).collect();
    for (b, block) in data.chunks_exact_mut(size).enumerate() {
        if b % 4 == 0 {
            for &o in f16_scale_offsets(ty) {
                let v = SPECIAL_F16[rng.below(SPECIAL_F16.len())];
                block[o..o + 2].copy_from_slice(&v.to_le_bytes());
            }
        }
    }
    data
}

fn decodable() -> Vec<GgmlType> {
    GgmlType::ALL
        .iter()
        .copied()
        .filter(|t| t.can_decode())
        .collect()
}

fn first_difference(ours: &[f32], theirs: &[f32]) -> Option<String> {
    if ours.len() != theirs.len() {
        return Some(format!("{} values, gguf-py {}", ours.len(), theirs.len()));
    }
    ours.iter()
        .zip(theirs)
        .position(|(a, b)| a.to_bits() != b.to_bits())
        .map(|i| {
            format!(
                "value {i}: ours {:#010x} ({}), theirs {:#010x} ({})",
                ours[i].to_bits(),
                ours[i],
                theirs[i].to_bits(),
                theirs[i]
            )
        })
}

#[test]
#[ignore = "needs the Python environment with the gguf package"]
fn the_table_matches_gguf_py_and_ggml() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = dir.path().join("sizes.json");
    oracle(
        dir.path(),
        serde_json::json!([{"op": "sizes", "output": sizes}]),
    );
    let theirs: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&sizes).unwrap()).unwrap();
    for (name, v) in &theirs {
        if name == "Q8_1" {
            // gguf-py 0.19 lists 40 bytes; ggml's block_q8_1 is 36 (checked below against
            // ggml's own sizes... which do not list it: ggml has no Q8_1 reference code).
            continue;
        }
        let ty = GgmlType::from_name(name).unwrap_or_else(|| panic!("{name} missing"));
        let want = (
            v[0].as_u64().unwrap(),
            v[1].as_u64().unwrap(),
            v[2].as_u64().unwrap(),
        );
        let ours = (
            ty.id() as u64,
            ty.block_size() as u64,
            ty.type_size() as u64,
        );
        assert_eq!(ours, want, "{name}: (id, block, bytes)");
    }
    // ggml itself knows a few more (Q2_0 is newer than gguf-py 0.19).
    let out = Command::new(ggml_peer()).arg("types").output().unwrap();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let ty = GgmlType::from_name(f[0]).unwrap();
        assert_eq!(ty.block_size().to_string(), f[1], "{line}");
        assert_eq!(ty.type_size().to_string(), f[2], "{line}");
    }
    // Every type gguf-py dequantizes, we decode.
    for name in theirs.keys() {
        let ty = GgmlType::from_name(name).unwrap();
        let gguf_py_decodes = !matches!(name.as_str(), "Q8_1" | "Q8_K" | "Q1_0")
            && !matches!(
                ty,
                GgmlType::I8 | GgmlType::I16 | GgmlType::I32 | GgmlType::I64 | GgmlType::F64
            );
        assert_eq!(ty.can_decode(), gguf_py_decodes, "{name}");
    }
}

#[test]
#[ignore = "needs the Python environment with the gguf package"]
fn every_decoder_is_bit_exact_with_gguf_py_on_random_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(2024);
    let mut jobs = Vec::new();
    let mut cases = Vec::new();
    for ty in decodable() {
        // A block count that is a multiple of nothing convenient; enough IQ blocks for every
        // grid point and sign pattern to appear.
        let n = if ty.is_quantized() { 1009 } else { 70_001 };
        let data = random_blocks(ty, n, &mut rng);
        let (input, output) = (
            dir.path().join(format!("{ty}.bin")),
            dir.path().join(format!("{ty}.f32")),
        );
        std::fs::write(&input, &data).unwrap();
        jobs.push(serde_json::json!({"op": "dequantize", "type": ty.name(), "input": input, "output": output}));
        cases.push((ty, data, output));
    }
    // Every f16 bit pattern, as plain F16.
    let all_f16: Vec<u8> = (0..=u16::MAX).flat_map(|h| h.to_le_bytes()).collect();
    let all_out = dir.path().join("all-f16.f32");
    std::fs::write(dir.path().join("all-f16.bin"), &all_f16).unwrap();
    jobs.push(serde_json::json!({"op": "dequantize", "type": "F16", "input": dir.path().join("all-f16.bin"), "output": all_out}));
    cases.push((GgmlType::F16, all_f16, all_out));
    oracle(dir.path(), serde_json::Value::Array(jobs));

    let mut failures = Vec::new();
    for (ty, data, output) in cases {
        let theirs = f32s(&std::fs::read(&output).unwrap());
        let mut ours = vec![0f32; data.len() / ty.type_size() * ty.block_size()];
        codecs::decode(ty, &data, &mut ours).unwrap();
        if let Some(d) = first_difference(&ours, &theirs) {
            failures.push(format!("{ty} (fast): {d}"));
        }
        codecs::decode_ref(ty, &data, &mut ours).unwrap();
        if let Some(d) = first_difference(&ours, &theirs) {
            failures.push(format!("{ty} (reference): {d}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore = "needs the Python environment with the gguf package"]
fn files_written_by_gguf_py_decode_bit_exact() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(77);
    let gguf = dir.path().join("all-types.gguf");
    let mut tensors = Vec::new();
    let mut types = decodable();
    types.extend([
        GgmlType::I8,
        GgmlType::I16,
        GgmlType::I32,
        GgmlType::I64,
        GgmlType::F64,
    ]);
    for (i, &ty) in types.iter().enumerate() {
        // Odd row counts, rows of 3 blocks (or 3 × 11 plain values), one 3-D tensor.
        let shape: Vec<usize> = if i % 5 == 0 {
            vec![3, 5, ty.block_size() * 2]
        } else {
            vec![
                7 + i,
                ty.block_size() * if ty.is_quantized() { 3 } else { 33 },
            ]
        };
        let n: usize = shape.iter().product::<usize>() / ty.block_size();
        let data = random_blocks(ty, n, &mut rng);
        let input = dir.path().join(format!("{ty}.bin"));
        std::fs::write(&input, &data).unwrap();
        tensors.push(serde_json::json!({"name": format!("t.{}", ty.name()), "type": ty.name(), "shape": shape, "input": input}));
    }
    let expected = dir.path().join("expected");
    std::fs::create_dir(&expected).unwrap();
    oracle(
        dir.path(),
        serde_json::json!([
            {"op": "write_gguf", "output": gguf, "tensors": tensors},
            {"op": "read_gguf", "input": gguf, "output_dir": expected},
        ]),
    );
    let bytes = std::fs::read(&gguf).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    assert_eq!(file.tensors().len(), types.len());
    for (i, info) in file.tensors().iter().enumerate() {
        let ty = types[i];
        assert_eq!(info.name, format!("t.{}", ty.name()));
        assert_eq!(info.ggml_type, ty);
        let view = file.tensor(&info.name).unwrap();
        assert_eq!(view.shape, info.shape);
        if let Some(native) = ty.codec().native.filter(|_| !ty.can_decode()) {
            // Integers and F64 stay as stored.
            assert_eq!(view.dtype, native, "{ty}");
            let theirs = std::fs::read(expected.join(format!("{i}.raw"))).unwrap();
            assert!(
                view.data.as_ref() == theirs.as_slice(),
                "{ty}: stored bytes differ"
            );
        } else {
            assert_eq!(view.dtype, stcore::DType::F32, "{ty}");
            let theirs = f32s(&std::fs::read(expected.join(format!("{i}.f32"))).unwrap());
            if let Some(d) = first_difference(&f32s(&view.data), &theirs) {
                panic!("{ty}: {d}");
            }
        }
    }
}

/// Values that reach the branches of ggml's quantizers: ordinary blocks at many scales,
/// constant blocks, one spike among zeros, rounding ties, all-zero and signed-zero blocks,
/// values so small that a block's scale is subnormal (its inverse overflows), values near
/// f32::MAX, and blocks with NaN and infinities.
fn encoder_inputs(block: usize, rng: &mut Rng) -> Vec<f32> {
    let mut x = Vec::new();
    let mut push = |f: &mut dyn FnMut(usize) -> f32| x.extend((0..block).map(f));
    for k in 0..300 {
        let scale = 10f32.powi(k % 13 - 6);
        push(&mut |_| rng.unit() * scale);
    }
    for k in 0..60 {
        let skew = (k as f32) / 10.0;
        push(&mut |_| (rng.unit() + skew) * 3.0);
        push(&mut |_| rng.unit().powi(3) * 100.0);
    }
    push(&mut |_| 0.0);
    push(&mut |_| -0.0);
    push(&mut |_| 1.5);
    push(&mut |_| -7.25);
    for pos in [0, 1, block / 2, block - 1] {
        push(&mut |j| if j == pos { 3.0 } else { 0.0 });
        push(&mut |j| if j == pos { -3.0 } else { 1e-3 });
    }
    push(&mut |j| (j as f32 - block as f32 / 2.0) * 0.5);
    push(&mut |j| (j % 7) as f32 - 3.0);
    push(&mut |_| rng.unit() * 1e-38);
    push(&mut |_| rng.unit() * 1e-44);
    push(&mut |j| if j % 3 == 0 { 1e-39 } else { -1e-40 });
    push(&mut |_| rng.unit() * 3e38);
    push(&mut |j| {
        if j == 5 {
            f32::MAX
        } else {
            -f32::MAX / (j as f32 + 1.0)
        }
    });
    push(&mut |j| if j % 9 == 4 { f32::NAN } else { rng.unit() });
    push(&mut |j| if j == 0 { f32::INFINITY } else { rng.unit() });
    push(&mut |j| {
        if j % 2 == 0 {
            f32::NEG_INFINITY
        } else {
            rng.unit()
        }
    });
    push(&mut |_| f32::NAN);
    push(&mut |j| {
        if j % 5 == 0 {
            f32::from_bits(0xFFC0_1234)
        } else {
            -rng.unit()
        }
    });
    x
}

fn encodable_blocks() -> Vec<GgmlType> {
    GgmlType::ALL
        .iter()
        .copied()
        .filter(|t| t.can_encode() && t.is_quantized())
        .collect()
}

/// The first block whose bytes differ, with its input.
fn first_block_difference(ty: GgmlType, x: &[f32], ours: &[u8], theirs: &[u8]) -> Option<String> {
    if ours.len() != theirs.len() {
        return Some(format!("{} bytes, peer {}", ours.len(), theirs.len()));
    }
    let (size, block) = (ty.type_size(), ty.block_size());
    ours.chunks(size)
        .zip(theirs.chunks(size))
        .position(|(a, b)| a != b)
        .map(|b| {
            format!(
                "block {b}: ours {:02x?}\npeer {:02x?}\ninput {:?}",
                &ours[b * size..][..size],
                &theirs[b * size..][..size],
                &x[b * block..][..block]
            )
        })
}

#[test]
#[ignore = "needs a C compiler and the llama.cpp sources (scripts/peers/ggml.mjs)"]
fn every_encoder_is_byte_exact_with_ggmls_reference_quantizer() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(31337);
    let mut failures = Vec::new();
    for ty in encodable_blocks() {
        let x = encoder_inputs(ty.block_size(), &mut rng);
        let theirs = c_quantize(dir.path(), ty, &x);
        let mut ours = vec![0u8; theirs.len()];
        codecs::encode(ty, &x, &mut ours).unwrap();
        if let Some(d) = first_block_difference(ty, &x, &ours, &theirs) {
            failures.push(format!("{ty}: {d}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
#[ignore = "needs the Python environment with the gguf package"]
fn the_32_element_encoders_are_byte_exact_with_gguf_py_on_finite_input() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(4242);
    let x: Vec<f32> = encoder_inputs(32, &mut rng)
        .into_iter()
        .map(|v| if v.is_finite() { v } else { 0.5 })
        .collect();
    let input = dir.path().join("x.f32");
    std::fs::write(&input, f32_bytes(&x)).unwrap();
    let types = [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
    ];
    let jobs: Vec<serde_json::Value> = types
        .iter()
        .map(|t| serde_json::json!({"op": "quantize", "type": t.name(), "input": input, "output": dir.path().join(format!("{t}.bin"))}))
        .collect();
    oracle(dir.path(), serde_json::Value::Array(jobs));
    let mut failures = Vec::new();
    for ty in types {
        let mut theirs = std::fs::read(dir.path().join(format!("{ty}.bin"))).unwrap();
        let mut ours = vec![0u8; theirs.len()];
        codecs::encode(ty, &x, &mut ours).unwrap();
        // gguf-py's one known deviation from ggml's C: for a block of zeros, its scale
        // `max / -8` takes the first element's sign (argmax), C's the initial +0.0's: ggml
        // writes -0.0 (0x8000). We follow ggml; the rest of such a block must agree.
        if matches!(ty, GgmlType::Q4_0 | GgmlType::Q5_0) {
            let (size, block) = (ty.type_size(), ty.block_size());
            for (b, t) in theirs.chunks_mut(size).enumerate() {
                if x[b * block..][..block].iter().all(|v| *v == 0.0) && t[..2] == [0, 0] {
                    t[1] = 0x80;
                }
            }
        }
        if let Some(d) = first_block_difference(ty, &x, &ours, &theirs) {
            failures.push(format!("{ty}: {d}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
