//! Peak memory of parsing a large `weights.mlx`: it must stay near the decoded tensor bytes,
//! far below what a JSON tree of the file would take (32+ bytes per number).
//!
//! This file holds a single test so that no other test shares the process while the peak
//! resident set size (VmHWM) is measured. `MLX_MEMORY_TEST_NUMBERS` overrides the size of the
//! main tensor (default 4 million numbers, about 45 MB of JSON).

use stcore::format::mlx;
use stcore::DType;
use std::fs::File;
use std::io::{BufWriter, Write};

/// Deterministic f32 values covering many magnitudes (and so many JSON text lengths).
fn value(i: usize) -> f32 {
    let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    let mantissa = (x % 2_000_001) as f32 / 1_000_000.0 - 1.0;
    mantissa * 10f32.powi((x >> 40) as i32 % 9 - 6)
}

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn parsing_a_large_file_needs_about_the_decoded_bytes() {
    let numbers: usize = std::env::var("MLX_MEMORY_TEST_NUMBERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4_000_000);
    // A second tensor lists `data` before `dtype`, so its numbers wait as f64.
    let late_numbers = numbers / 4;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weights.mlx");
    {
        let mut w = BufWriter::new(File::create(&path).unwrap());
        write!(w, r#"{{"version": "1", "weights": {{"big": {{"shape": [{numbers}], "dtype": "float32", "data": ["#).unwrap();
        for i in 0..numbers {
            if i > 0 {
                w.write_all(b",").unwrap();
            }
            write!(w, "{}", value(i)).unwrap();
        }
        w.write_all(br#"]}, "late": {"data": ["#).unwrap();
        for i in 0..late_numbers {
            if i > 0 {
                w.write_all(b",").unwrap();
            }
            write!(w, "{}", value(i + numbers)).unwrap();
        }
        write!(
            w,
            r#"], "dtype": "float16", "shape": [{late_numbers}]}}}}}}"#
        )
        .unwrap();
        w.flush().unwrap();
    }
    let json_bytes = std::fs::metadata(&path).unwrap().len();

    // Writing "5" resets VmHWM to the current RSS (Linux >= 4.0); without it the peak of
    // earlier work would hide the parse's own.
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let rss_before = status_kib("VmRSS:");
    let started = std::time::Instant::now();
    let weights = mlx::read_mlx(&path).unwrap();
    let elapsed = started.elapsed();
    let peak = status_kib("VmHWM:");

    let big = &weights.tensors[0];
    assert_eq!(
        (big.name.as_str(), big.dtype, big.shape.clone()),
        ("big", DType::F32, vec![numbers])
    );
    for (i, bytes) in big.data.chunks_exact(4).enumerate() {
        assert_eq!(
            f32::from_le_bytes(bytes.try_into().unwrap()),
            value(i),
            "element {i}"
        );
    }
    let late = &weights.tensors[1];
    assert_eq!(
        (late.name.as_str(), late.dtype, late.shape.clone()),
        ("late", DType::F16, vec![late_numbers])
    );
    for (i, bytes) in late.data.chunks_exact(2).enumerate().step_by(997) {
        // The file holds the decimal text, and that is what rounds to f16 (an f32 lying
        // exactly on an f16 tie may have a shortest text just beside it).
        let text: f64 = format!("{}", value(i + numbers)).parse().unwrap();
        let expected = stcore::cast::encode_f64(&[text], DType::F16).unwrap();
        assert_eq!(bytes, expected.as_slice(), "late element {i}");
    }

    let decoded = (numbers * 4 + late_numbers * 2) as u64;
    // While "late" streams, its f64 wait alongside the finished "big": the highest need.
    let expected_need = (numbers * 4 + late_numbers * (8 + 2)) as u64;
    match (reset, rss_before, peak) {
        (true, Some(before), Some(peak)) => {
            let growth = (peak.saturating_sub(before)) * 1024;
            eprintln!(
                "parsed {json_bytes} bytes of JSON ({} numbers) in {elapsed:?}: peak RSS grew by \
                 {growth} bytes; decoded tensors {decoded} bytes, expected need {expected_need}",
                numbers + late_numbers
            );
            // A JSON tree would need 32+ bytes per number; allow the expected need plus 16 MiB
            // of allocator and buffer slack.
            assert!(
                growth <= expected_need + (16 << 20),
                "peak RSS grew by {growth} bytes for {expected_need} bytes of expected need"
            );
        }
        _ => eprintln!("VmHWM cannot be reset here: peak memory not measured"),
    }
}
