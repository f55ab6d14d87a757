//! Peak memory of reading every hostile PyTorch/NumPy file, each in its own child process
//! (this test binary re-run on one file): refusing a hostile file may not cost more than
//! reading a small valid one, whatever its numbers claim (2^63-byte strings, 4 GiB members,
//! 100,000-deep nesting, 2^64 shared paths).

use stcore::format::numpy::NumpyFile;
use stcore::format::pytorch::PyTorchFile;
use stcore::source::WholeFile;
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

// ---------------------------------------------------------------------------------------
// Converting a checkpoint to SafeTensors streams it: about one tensor resident at a time.

const CONVERT_VAR: &str = "STN_CONVERT_PROBE_DIR";
/// Tensors of the generated checkpoint, and elements (f32) of each: 12 × 16 MiB.
const TENSORS: usize = 12;
const ELEMENTS: usize = 4 << 20;

/// A `torch.save` zip checkpoint written here, as torch writes one (an OrderedDict of
/// `_rebuild_tensor_v2` over `FloatStorage`s, storages stored and 64-byte aligned), with
/// `lm_head.weight` tied to `embed.weight` (one storage for both).
fn write_checkpoint(path: &Path) {
    let mut pkl: Vec<u8> = vec![0x80, 2];
    let global = |p: &mut Vec<u8>, module: &str, name: &str| {
        p.push(b'c');
        p.extend_from_slice(format!("{module}\n{name}\n").as_bytes());
    };
    let unicode = |p: &mut Vec<u8>, s: &str| {
        p.push(b'X');
        p.extend_from_slice(&(s.len() as u32).to_le_bytes());
        p.extend_from_slice(s.as_bytes());
    };
    let int = |p: &mut Vec<u8>, v: u32| {
        p.push(b'J');
        p.extend_from_slice(&v.to_le_bytes());
    };
    global(&mut pkl, "collections", "OrderedDict");
    pkl.extend_from_slice(b")R(");
    let mut names: Vec<(String, usize)> = (0..TENSORS - 1)
        .map(|i| (format!("layers.{i}.weight"), i))
        .collect();
    names[0].0 = "embed.weight".to_string();
    names.push(("lm_head.weight".to_string(), 0));
    for (name, storage) in &names {
        unicode(&mut pkl, name);
        global(&mut pkl, "torch._utils", "_rebuild_tensor_v2");
        pkl.extend_from_slice(b"((");
        unicode(&mut pkl, "storage");
        global(&mut pkl, "torch", "FloatStorage");
        unicode(&mut pkl, &storage.to_string());
        unicode(&mut pkl, "cpu");
        int(&mut pkl, ELEMENTS as u32);
        pkl.extend_from_slice(b"tQ");
        int(&mut pkl, 0);
        int(&mut pkl, 1024);
        int(&mut pkl, (ELEMENTS / 1024) as u32);
        pkl.push(0x86); // TUPLE2: size
        int(&mut pkl, (ELEMENTS / 1024) as u32);
        int(&mut pkl, 1);
        pkl.push(0x86); // stride
        pkl.push(0x89); // requires_grad False
        global(&mut pkl, "collections", "OrderedDict");
        pkl.extend_from_slice(b")Rt");
        pkl.push(b'R');
    }
    pkl.extend_from_slice(b"u.");

    let mut members: Vec<(String, Vec<u8>)> = vec![("archive/data.pkl".to_string(), pkl)];
    for i in 0..TENSORS - 1 {
        let data: Vec<u8> = (0..ELEMENTS)
            .flat_map(|j| ((i * 7 + j) as f32 * 0.25).to_le_bytes())
            .collect();
        members.push((format!("archive/data/{i}"), data));
    }
    members.push(("archive/byteorder".to_string(), b"little".to_vec()));
    let mut out: Vec<u8> = Vec::new();
    let mut central: Vec<u8> = Vec::new();
    for (name, data) in &members {
        // Pad with an extra field so the data starts 64-byte aligned, as torch does.
        let header_end = out.len() + 30 + name.len();
        let pad = (64 - (header_end + 4) % 64) % 64 + 4;
        let offset = out.len() as u32;
        let crc = stcore::format::zip::crc32(data);
        let fields = |sig: &[u8], central: bool| {
            let mut h = sig.to_vec();
            if central {
                h.extend_from_slice(&20u16.to_le_bytes());
            }
            h.extend_from_slice(&20u16.to_le_bytes());
            h.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]); // flags, method, time, date
            h.extend_from_slice(&crc.to_le_bytes());
            h.extend_from_slice(&(data.len() as u32).to_le_bytes());
            h.extend_from_slice(&(data.len() as u32).to_le_bytes());
            h.extend_from_slice(&(name.len() as u16).to_le_bytes());
            h
        };
        out.extend_from_slice(&fields(b"PK\x03\x04", false));
        out.extend_from_slice(&(pad as u16).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&0xCAFEu16.to_le_bytes());
        out.extend_from_slice(&((pad - 4) as u16).to_le_bytes());
        out.extend(std::iter::repeat_n(0u8, pad - 4));
        out.extend_from_slice(data);
        central.extend_from_slice(&fields(b"PK\x01\x02", true));
        central.extend_from_slice(&[0; 12]); // extra, comment, disk, attributes
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let central_at = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(b"PK\x05\x06\0\0\0\0");
    out.extend_from_slice(&(members.len() as u16).to_le_bytes());
    out.extend_from_slice(&(members.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&central_at.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    std::fs::write(path, out).unwrap();
}

/// The child: `convert` the checkpoint in the directory the environment names (or, with
/// `list`, only open it and list its tensors), report the peak.
#[test]
fn convert_probe() {
    let Ok(dir) = std::env::var(CONVERT_VAR) else {
        return;
    };
    let dir = Path::new(&dir);
    let input = dir.join("pytorch_model.bin");
    let outcome = if std::env::var("STN_CONVERT_PROBE_LIST").is_ok() {
        PyTorchFile::open(&input).map(|f| f.tensors().len())
    } else {
        stcore::convert::convert(
            &input,
            &dir.join("model.safetensors"),
            stcore::convert::Target::SafeTensors,
            None,
            stcore::fsutil::WriteOptions::default(),
        )
        .map(|r| r.tensors)
    };
    let code = match outcome {
        Ok(n) => format!("OK{n}"),
        Err(e) => e.to_string().replace(' ', "_"),
    };
    println!("PROBE {code} {}", status_kib("VmHWM:").unwrap_or(0));
}

fn convert_peak(dir: &Path, list_only: bool) -> (String, u64) {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--exact",
            "convert_probe",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CONVERT_VAR, dir);
    if list_only {
        command.env("STN_CONVERT_PROBE_LIST", "1");
    }
    let out = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("PROBE ").map(|(_, rest)| rest))
        .unwrap_or_else(|| {
            panic!(
                "no probe output: {stdout} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let (code, kib) = line.split_once(' ').unwrap();
    (code.to_string(), kib.parse().unwrap())
}

#[test]
fn converting_a_checkpoint_holds_about_one_tensor_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    write_checkpoint(&dir.path().join("pytorch_model.bin"));
    let (code, listed) = convert_peak(dir.path(), true);
    assert_eq!(code, format!("OK{TENSORS}"));
    let (code, converted) = convert_peak(dir.path(), false);
    // lm_head.weight is embed.weight: written once.
    assert_eq!(code, format!("OK{}", TENSORS - 1));
    let tensor_kib = (ELEMENTS * 4 / 1024) as u64;
    eprintln!("peak RSS: open + list {listed} KiB, convert {converted} KiB");
    let file_kib = std::fs::metadata(dir.path().join("pytorch_model.bin"))
        .unwrap()
        .len()
        / 1024;
    // Without page release the conversion (write + read-back) maps the whole checkpoint and
    // the whole output: ~2 × 176 MiB. Streaming holds a few tensors at most.
    assert!(
        converted <= listed + 3 * tensor_kib,
        "converting a {file_kib} KiB checkpoint peaked at {converted} KiB, opening it at {listed} KiB"
    );
    let back = stcore::format::safetensors::SafeTensors::open(
        &dir.path().join("model.safetensors"),
        Default::default(),
    )
    .unwrap();
    use stcore::source::TensorSource;
    let layer = back.fetch("layers.3.weight").unwrap();
    assert_eq!(
        &layer.as_slice()[4..8],
        &((3 * 7 + 1) as f32 * 0.25).to_le_bytes()
    );
    assert_eq!(
        back.metadata()
            .and_then(|m| m.get("lm_head.weight"))
            .map(String::as_str),
        Some("embed.weight")
    );
}
