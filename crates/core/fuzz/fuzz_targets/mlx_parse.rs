//! `parse_mlx` on arbitrary bytes: every rejection is ERR_INVALID_MLX; every accepted
//! document has tensors whose bytes match shape × dtype, and writes back (`write_mlx`) to a
//! document that parses to the same tensors and metadata.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stcore::format::mlx::{parse_mlx, write_mlx};
use stcore::tensor::checked_numel;

fuzz_target!(|bytes: &[u8]| {
    let weights = match parse_mlx(bytes) {
        Ok(w) => w,
        Err(e) => {
            assert_eq!(e.code(), "ERR_INVALID_MLX", "{e}");
            return;
        }
    };
    for t in &weights.tensors {
        let numel = checked_numel(&t.shape).expect("accepted shape");
        assert_eq!(Some(t.data.len()), t.dtype.byte_len(numel), "{}", t.name);
    }
    let mut out = Vec::new();
    write_mlx(&mut out, &weights.tensors, weights.metadata.as_ref())
        .unwrap_or_else(|e| panic!("an accepted document does not write back: {e}"));
    let again = parse_mlx(&out).unwrap_or_else(|e| {
        panic!(
            "written document does not parse: {e}\n{}",
            String::from_utf8_lossy(&out)
        )
    });
    assert_eq!(again.metadata, weights.metadata);
    // NaN is stored canonically on read, so a second pass is bit-exact.
    assert_eq!(again.tensors, weights.tensors);
});
