//! The SafeTensors header parser against the reference implementation. The input is the
//! header JSON alone; the file around it gets the data section the header claims (so the
//! fuzzer reaches the offset and size rules, not only the JSON ones), one byte short or long
//! for some inputs. Verdicts and error codes must equal the reference's; accepted files are
//! then read in full (casts and slices) through the shared oracles.
#![no_main]

use fuzz_oracles::{check_against_reference, exercise_tensors, fnv, header_claims};
use libfuzzer_sys::fuzz_target;

/// Larger claimed data sections are not materialised (the file is then simply truncated).
const MAX_DATA: u128 = 1 << 20;

fuzz_target!(|json: &[u8]| {
    let claimed = header_claims(json).map_or(0, |c| c.max_end);
    let hash = fnv(json);
    let mut data_len = if claimed <= MAX_DATA {
        claimed as usize
    } else {
        0
    };
    match hash % 16 {
        0 => data_len += 1,
        1 => data_len = data_len.saturating_sub(1),
        _ => {}
    }
    let mut file = Vec::with_capacity(8 + json.len() + data_len);
    file.extend_from_slice(&(json.len() as u64).to_le_bytes());
    file.extend_from_slice(json);
    file.extend(
        (0..data_len).map(|i| (i as u64).wrapping_mul(0x9E37_79B9).wrapping_add(hash) as u8),
    );
    if let Some(st) = check_against_reference(&file) {
        exercise_tensors(&st, hash);
    }
});
