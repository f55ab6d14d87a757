//! The weights-only unpickler on arbitrary pickles: run alone (zip and legacy persistent
//! ids), then as the `data.pkl` of a torch zip with four 256-byte storages behind it, so
//! accepted pickles go on to tensor rebuilding, naming and reading. Nothing may panic; every
//! refusal carries a checkpoint error code; every listed tensor reads as its listed length.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stcore::format::pytorch::pickle::{unpickle, Limits, PersistentIds};
use stcore::format::pytorch::PyTorchFile;
use stcore::format::safetensors::Memory;
use std::sync::Arc;

fuzz_target!(|pkl: &[u8]| {
    for ids in [
        PersistentIds::Zip,
        PersistentIds::Legacy,
        PersistentIds::Refused,
    ] {
        if let Err(e) = unpickle(pkl, 0, ids, Limits::default()) {
            assert!(fuzz_oracles::CHECKPOINT_CODES.contains(&e.code()), "{e}");
        }
    }
    let zip = fuzz_oracles::torch_zip_with_storages(pkl);
    let len = zip.len();
    match PyTorchFile::from_memory(Arc::new(Memory::Owned(zip))) {
        Ok(f) => {
            fuzz_oracles::check_listing(f.tensors(), len, |n| f.fetch(n));
            let _ = f.shared_groups();
        }
        Err(e) => assert!(fuzz_oracles::CHECKPOINT_CODES.contains(&e.code()), "{e}"),
    }
});
