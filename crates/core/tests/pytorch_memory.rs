//! Peak memory of reading every hostile PyTorch/NumPy file, each in its own child process
//! (this test binary re-run on one file): refusing a hostile file may not cost more than
//! reading a small valid one, whatever its numbers claim (2^63-byte strings, 4 GiB members,
//! 100,000-deep nesting, 2^64 shared paths).

use stcore::format::numpy::NumpyFile;
use stcore::format::pytorch::PyTorchFile;
use std::path::{Path, PathBuf};
use std::process::Command;

const FILE_VAR: &str = "STN_MEMORY_PROBE_FILE";

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The child: open the file named by the environment, read every tensor, report the peak.
#[test]
fn probe() {
    let Ok(path) = std::env::var(FILE_VAR) else {
        return;
    };
    let path = Path::new(&path);
    let numpy = path.extension().is_some_and(|e| e == "npy" || e == "npz");
    let outcome = if numpy {
        NumpyFile::open(path).and_then(|f| {
            for t in f.tensors() {
                f.fetch(&t.name)?;
            }
            Ok(())
        })
    } else {
        PyTorchFile::open(path).and_then(|f| {
            for t in f.tensors() {
                f.fetch(&t.name)?;
            }
            Ok(())
        })
    };
    let code = match outcome {
        Ok(()) => "OK".to_string(),
        Err(e) => e.code().to_string(),
    };
    println!("PROBE {code} {}", status_kib("VmHWM:").unwrap_or(0));
}

fn peak_of(file: &Path) -> (String, u64) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "probe", "--nocapture", "--test-threads", "1"])
        .env(FILE_VAR, file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("PROBE ").map(|(_, rest)| rest))
        .unwrap_or_else(|| {
            panic!(
                "{}: no probe output: {stdout} {}",
                file.display(),
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let (code, kib) = line.split_once(' ').unwrap();
    (code.to_string(), kib.parse().unwrap())
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e != "md"))
        .collect();
    v.sort();
    v
}

#[test]
fn refusing_a_hostile_file_costs_no_more_than_reading_a_small_valid_one() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let shared = root.join("../../../shared/fixtures/pytorch");
    let (code, baseline) = peak_of(&shared.join("zip/all_dtypes.pt"));
    assert_eq!(code, "OK");
    let mut hostile = files_in(&shared.join("hostile"));
    hostile.extend(files_in(&root.join("tests/data/pytorch/hostile")));
    assert!(hostile.len() >= 50);
    for file in hostile {
        let (code, peak) = peak_of(&file);
        assert!(code.starts_with("ERR_"), "{}: {code}", file.display());
        // The hostile files are at most a few hundred KiB; allow 16 MiB over the baseline.
        assert!(
            peak <= baseline + 16 * 1024,
            "{}: peak {peak} KiB vs {baseline} KiB reading a valid file",
            file.display()
        );
    }
}
