//! Rough timing of a PyTorch → SafeTensors conversion through the core (ignored; run in
//! release): `PYTORCH_BENCH_FILE=/path/pytorch_model.bin cargo test --release -p
//! safetensors-node-core --test pytorch_bench -- --ignored --nocapture`. Compare with
//! convert.py's path: `torch.load(weights_only=True)` + `safe_open`'s `save_file`.

use stcore::format::pytorch::PyTorchFile;
use stcore::format::safetensors::{save_streaming, TensorBytes, TensorSpec};
use stcore::fsutil::WriteOptions;
use stcore::source::WholeFile;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Instant;

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
#[ignore = "timing, not a check; needs PYTORCH_BENCH_FILE"]
fn convert_a_checkpoint() {
    let Ok(input) = std::env::var("PYTORCH_BENCH_FILE") else {
        return;
    };
    let out = std::path::PathBuf::from(format!("{input}.bench.safetensors"));
    let started = Instant::now();
    let f = PyTorchFile::open(std::path::Path::new(&input)).unwrap();
    let opened = started.elapsed();
    let drop = f.tied_duplicates(&["lm_head.weight"]).unwrap();
    let mut metadata = BTreeMap::from([("format".to_string(), "pt".to_string())]);
    for (kept, dropped) in &drop {
        metadata.insert(dropped.clone(), kept.clone());
    }
    let keep: Vec<_> = f
        .tensors()
        .iter()
        .filter(|t| !drop.iter().any(|(_, d)| d == &t.name))
        .collect();
    let specs: Vec<TensorSpec> = keep
        .iter()
        .map(|t| TensorSpec::new(t.name.clone(), t.dtype, t.shape.clone()).unwrap())
        .collect();
    // With STN_RELEASE=1: drop the previous tensor's pages from this process (they stay in
    // the page cache) before serving the next, so RSS holds about one tensor.
    let release = std::env::var("STN_RELEASE").is_ok();
    let mut previous: Option<(usize, usize)> = None;
    save_streaming(
        &out,
        &specs,
        Some(&metadata),
        WriteOptions::default(),
        &mut |i| {
            if let (true, Some((ptr, len))) = (release, previous.take()) {
                let page = 4096;
                let start = ptr.div_ceil(page) * page;
                let end = (ptr + len) / page * page;
                if end > start {
                    // SAFETY: a range inside the live private mapping, no longer referenced.
                    unsafe {
                        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED)
                    };
                }
            }
            Ok(match f.fetch(&keep[i].name)? {
                TensorBytes::Shared { memory, start, len } => {
                    let bytes = &memory[start..start + len];
                    previous = Some((bytes.as_ptr() as usize, len));
                    Cow::Borrowed(bytes)
                }
                TensorBytes::Owned(v) => Cow::Owned(v),
            })
        },
    )
    .unwrap();
    println!(
        "ours: open {:.3} s, total {:.2} s, peak RSS {} MiB, {} tensors written, dropped {:?}",
        opened.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        status_kib("VmHWM:").unwrap_or(0) / 1024,
        specs.len(),
        drop
    );
}

/// `NPZ_BENCH_FILE=/path/x.npz …`: open and read every array (compare with `numpy.load` and
/// touching every array).
#[test]
#[ignore = "timing, not a check; needs NPZ_BENCH_FILE"]
fn load_an_npz() {
    let Ok(input) = std::env::var("NPZ_BENCH_FILE") else {
        return;
    };
    let started = Instant::now();
    let f = stcore::format::numpy::NumpyFile::open(std::path::Path::new(&input)).unwrap();
    let mut sum = 0u64;
    for t in f.tensors() {
        let b = f.fetch(&t.name).unwrap();
        // Touch every page, as a consumer of the data would.
        sum += b
            .as_slice()
            .iter()
            .step_by(4096)
            .map(|&x| x as u64)
            .sum::<u64>();
    }
    println!(
        "ours: {} arrays in {:.3} s, peak RSS {} MiB ({sum})",
        f.tensors().len(),
        started.elapsed().as_secs_f64(),
        status_kib("VmHWM:").unwrap_or(0) / 1024
    );
}
