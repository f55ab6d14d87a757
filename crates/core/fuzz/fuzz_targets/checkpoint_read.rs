//! Whole checkpoint files on arbitrary bytes: the zip reader, torch zip and legacy
//! checkpoints, `.npy` and `.npz`. Nothing may panic; every refusal carries a checkpoint
//! error code; every listed tensor reads as its listed length.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stcore::format::numpy::NumpyFile;
use stcore::format::pytorch::PyTorchFile;
use stcore::format::safetensors::Memory;
use stcore::format::zip::ZipArchive;
use std::sync::Arc;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(zip) = ZipArchive::parse(bytes) {
        for e in zip.entries() {
            assert!(e.data_range().end <= bytes.len());
            match e.read(bytes, 1 << 24) {
                Ok(data) => assert_eq!(data.len() as u64, e.uncompressed_len),
                Err(err) => assert!(
                    fuzz_oracles::CHECKPOINT_CODES.contains(&err.code()),
                    "{err}"
                ),
            }
            let _ = e.read_prefix(bytes, 64);
        }
    }
    let memory = Arc::new(Memory::Owned(bytes.to_vec()));
    match PyTorchFile::from_memory(memory.clone()) {
        Ok(f) => fuzz_oracles::check_listing(f.tensors(), bytes.len(), |n| f.fetch(n)),
        Err(e) => assert!(fuzz_oracles::CHECKPOINT_CODES.contains(&e.code()), "{e}"),
    }
    match NumpyFile::from_memory(memory) {
        Ok(f) => fuzz_oracles::check_listing(f.tensors(), bytes.len(), |n| f.fetch(n)),
        Err(e) => assert!(fuzz_oracles::CHECKPOINT_CODES.contains(&e.code()), "{e}"),
    }
});
