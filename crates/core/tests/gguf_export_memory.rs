//! Peak memory of a GGUF export (bench row 7's `convert(f16.gguf, q.gguf, {quantization:
//! 'Q4_K_M'})`, and the same input to SafeTensors): the input is mapped, and each tensor's
//! pages are given back once it is written, so the process holds about one tensor of the
//! input at a time, not the whole mapped model.
//!
//! Each conversion runs in a child process (this test binary re-run with the directory in
//! the environment) so that its peak resident set size (VmHWM) is its own.

use stcore::convert::{convert, Target};
use stcore::format::gguf::{
    standard_metadata, write_gguf_file, GgmlType, GgufSource, GgufTensorSpec, Preset,
};
use stcore::source::TensorSource;
use stcore::tensor::TensorView;
use stcore::DType;
use std::path::Path;
use std::process::Command;

const DIR_VAR: &str = "STN_GGUF_EXPORT_PROBE_DIR";
const WHAT_VAR: &str = "STN_GGUF_EXPORT_PROBE_WHAT";
/// Tensors of the generated model, and their shape (F16): 12 × 16 MiB.
const TENSORS: usize = 12;
const ROWS: usize = 2048;
const COLS: usize = 4096;

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Element `j` of tensor `i`: small values an F16 holds exactly, varying along each row.
fn value(i: usize, j: usize) -> f32 {
    (((i * 7 + j) % 509) as f32 - 254.0) / 64.0
}

/// A GGUF of `TENSORS` 2-D F16 tensors whose rows are whole 256-blocks.
fn write_input(path: &Path) {
    let specs: Vec<GgufTensorSpec> = (0..TENSORS)
        .map(|i| {
            GgufTensorSpec::new(
                format!("layers.{i}.weight"),
                vec![ROWS, COLS],
                GgmlType::F16,
            )
        })
        .collect();
    let metadata = standard_metadata("memtest", "memtest", &specs);
    write_gguf_file(path, &metadata, &specs, Default::default(), |i, spec| {
        let bytes: Vec<u8> = (0..ROWS * COLS)
            .flat_map(|j| half::f16::from_f32(value(i, j)).to_le_bytes())
            .collect();
        TensorView::new(spec.name.clone(), DType::F16, spec.shape.clone(), bytes)
    })
    .unwrap();
}

/// The child: open (and list) the input, or convert it, as the environment says; report the
/// peak.
#[test]
fn export_probe() {
    let Ok(dir) = std::env::var(DIR_VAR) else {
        return;
    };
    let dir = Path::new(&dir);
    let input = dir.join("f16.gguf");
    let outcome = match std::env::var(WHAT_VAR).as_deref() {
        Ok("list") => GgufSource::open(&input, &mut Default::default()).map(|s| s.tensors().len()),
        Ok("Q4_K_M") => convert(
            &input,
            &dir.join("q.gguf"),
            Target::Gguf,
            Some(Preset::Q4_K_M),
            Default::default(),
        )
        .map(|r| r.tensors),
        Ok("safetensors") => convert(
            &input,
            &dir.join("out.safetensors"),
            Target::SafeTensors,
            None,
            Default::default(),
        )
        .map(|r| r.tensors),
        other => panic!("{WHAT_VAR}={other:?}"),
    };
    let code = match outcome {
        Ok(n) => format!("OK{n}"),
        Err(e) => e.to_string().replace(' ', "_"),
    };
    println!("PROBE {code} {}", status_kib("VmHWM:").unwrap_or(0));
}

fn peak(dir: &Path, what: &str) -> (String, u64) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "export_probe",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(DIR_VAR, dir)
        .env(WHAT_VAR, what)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("PROBE ").map(|(_, rest)| rest))
        .unwrap_or_else(|| {
            panic!(
                "{what}: no probe output: {stdout} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let (code, kib) = line.split_once(' ').unwrap();
    (code.to_string(), kib.parse().unwrap())
}

#[test]
fn a_gguf_export_holds_about_one_input_tensor_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    write_input(&dir.path().join("f16.gguf"));
    let tensor_kib = (ROWS * COLS * 2 / 1024) as u64;
    let input_kib = TENSORS as u64 * tensor_kib;
    let (code, listed) = peak(dir.path(), "list");
    assert_eq!(code, format!("OK{TENSORS}"));

    // Without page release the whole 192 MiB input stays mapped to the end.
    let (code, quantized) = peak(dir.path(), "Q4_K_M");
    assert_eq!(code, format!("OK{TENSORS}"));
    eprintln!("peak RSS: open + list {listed} KiB, Q4_K_M {quantized} KiB ({input_kib} KiB input)");
    assert!(
        quantized <= listed + 3 * tensor_kib,
        "Q4_K_M of a {input_kib} KiB input peaked at {quantized} KiB, opening it at {listed} KiB"
    );
    let q = GgufSource::open(&dir.path().join("q.gguf"), &mut Default::default()).unwrap();
    let t = q.info("layers.5.weight").unwrap();
    assert_eq!((&*t.stored, t.shape.clone()), ("Q4_K", vec![ROWS, COLS]));
    let decoded: Vec<f32> = q
        .fetch("layers.5.weight")
        .unwrap()
        .as_slice()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    // Q4_K keeps each value within a sixteenth of its block's range (here 254/64 each way).
    for j in [0, 1, 255, 256, 4095, 4096, ROWS * COLS - 1] {
        assert!(
            (decoded[j] - value(5, j)).abs() <= 8.0 / 16.0,
            "element {j}: {} for {}",
            decoded[j],
            value(5, j)
        );
    }

    // F16 → SafeTensors: a copy of each tensor's bytes, released the same way.
    let (code, copied) = peak(dir.path(), "safetensors");
    assert_eq!(code, format!("OK{TENSORS}"));
    eprintln!("peak RSS: to SafeTensors {copied} KiB");
    assert!(
        copied <= listed + 3 * tensor_kib,
        "SafeTensors copy of a {input_kib} KiB input peaked at {copied} KiB, opening it at {listed} KiB"
    );
}
