//! The GGUF reader against hostile and broken files: every one must fail with
//! ERR_INVALID_GGUF, without panicking and without a large allocation. A counting global
//! allocator records the largest single request made while parsing.

use stcore::format::gguf::{standard_metadata, write_gguf, GgmlType, GgufFile, GgufTensorSpec};
use stcore::TensorView;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only records sizes in a thread-local cell.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = LARGEST.try_with(|l| l.set(l.get().max(layout.size())));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = LARGEST.try_with(|l| l.set(l.get().max(new_size)));
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Parse `bytes`, expect ERR_INVALID_GGUF, and check no allocation exceeded `limit` bytes.
fn rejects(bytes: &[u8], limit: usize) -> stcore::CoreError {
    LARGEST.with(|l| l.set(0));
    let result = GgufFile::parse(bytes);
    let largest = LARGEST.with(|l| l.get());
    let err = result.expect_err("hostile input was accepted");
    assert_eq!(err.code(), "ERR_INVALID_GGUF", "{err}");
    assert!(largest <= limit, "allocated {largest} bytes for: {err}");
    err
}

/// Builds GGUF bytes field by field, lies included.
#[derive(Default, Clone)]
struct Raw(Vec<u8>);
impl Raw {
    fn header(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        let mut r = Raw(b"GGUF".to_vec());
        r.u32(version).u64(n_tensors).u64(n_kv);
        r
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    fn tensor(&mut self, name: &str, ne: &[u64], ty: u32, offset: u64) -> &mut Self {
        self.str(name).u32(ne.len() as u32);
        for &d in ne {
            self.u64(d);
        }
        self.u32(ty).u64(offset)
    }
    /// Pad to 32 and append `data_len` zero bytes of data.
    fn data(&mut self, data_len: usize) -> Vec<u8> {
        let mut b = self.0.clone();
        b.resize(b.len().next_multiple_of(32) + data_len, 0);
        b
    }
}

const SMALL: usize = 64 * 1024;

#[test]
fn a_well_formed_raw_file_parses() {
    // Sanity check of the builder: the same shapes as the hostile cases, told truthfully.
    let mut r = Raw::header(3, 2, 1);
    r.str("general.alignment").u32(4).u32(32);
    r.tensor("a", &[8], 0, 0).tensor("b", &[32, 2], 8, 32);
    let bytes = r.data(32 + 68);
    let file = GgufFile::parse(&bytes).unwrap();
    assert_eq!(file.tensors()[1].shape, vec![2, 32]);
    assert_eq!(file.tensor("b").unwrap().data.len(), 64 * 4);
    // Version 2 is read too.
    let mut r = Raw::header(2, 0, 0);
    assert!(GgufFile::parse(&r.data(0)).is_ok());
    let _ = r.u32(0);
}

#[test]
fn bad_magic_and_versions() {
    rejects(b"", SMALL);
    rejects(b"GGU", SMALL);
    rejects(b"GGML\x03\0\0\0", SMALL);
    for version in [0u32, 1, 4, 0x0300_0000] {
        let e = rejects(&Raw::header(version, 0, 0).data(0), SMALL);
        assert!(e.detail().contains("version"), "{e}");
    }
    assert!(rejects(&Raw::header(0x0300_0000, 0, 0).data(0), SMALL)
        .detail()
        .contains("big-endian"));
}

#[test]
fn lying_counts_allocate_nothing_large() {
    for (t, k) in [
        (u64::MAX, 0),
        (0, u64::MAX),
        (1 << 40, 1 << 40),
        (1000, 0),
        (0, 1000),
        (u64::MAX / 24, 2),
    ] {
        rejects(&Raw::header(3, t, k).data(64), SMALL);
    }
}

#[test]
fn huge_lengths_are_bounded_by_the_file() {
    // Key length 2^64 - 1 and 2^32.
    for len in [u64::MAX, 1 << 32, 100] {
        let mut r = Raw::header(3, 0, 1);
        r.u64(len).u32(0);
        rejects(&r.0, SMALL);
    }
    // A string value longer than the file.
    let mut r = Raw::header(3, 0, 1);
    r.str("k").u32(8).u64(u64::MAX - 3);
    rejects(&r.0, SMALL);
    // Arrays of every element type claiming 2^64 - 1, 2^40 or a few more elements than fit.
    for item in 0u32..13 {
        for n in [u64::MAX, 1 << 40, 17] {
            let mut r = Raw::header(3, 0, 1);
            r.str("k").u32(9).u32(item).u64(n);
            r.0.extend_from_slice(&[0u8; 16]);
            rejects(&r.0, SMALL);
        }
    }
    // Nested arrays, each level claiming a huge length.
    let mut r = Raw::header(3, 0, 1);
    r.str("k").u32(9);
    for _ in 0..5 {
        r.u32(9).u64(1 << 50);
    }
    rejects(&r.0, SMALL);
    // Arrays of arrays, even one truthful level of one element: ggml's reader refuses them.
    let mut r = Raw::header(3, 0, 1);
    r.str("k\x1b]0;title\x07")
        .u32(9)
        .u32(9)
        .u64(1)
        .u32(4)
        .u64(1)
        .u32(7);
    let e = rejects(&r.0, SMALL);
    assert!(e.detail().contains("array of arrays"), "{e}");
    // The key is named with its controls escaped.
    assert!(e.detail().contains("'k\\x1b]0;title\\x07'"), "{e}");
    // An unknown value type and an array of an unknown type.
    let mut r = Raw::header(3, 0, 1);
    r.str("k").u32(13).u32(0);
    rejects(&r.0, SMALL);
    let mut r = Raw::header(3, 0, 1);
    r.str("k").u32(9).u32(99).u64(0);
    rejects(&r.0, SMALL);
}

#[test]
fn metadata_rules() {
    // Duplicate and empty keys; key not UTF-8.
    let mut r = Raw::header(3, 0, 2);
    r.str("k").u32(4).u32(1).str("k").u32(4).u32(2);
    assert!(rejects(&r.0, SMALL).detail().contains("duplicate"));
    let mut r = Raw::header(3, 0, 1);
    r.str("").u32(4).u32(1);
    rejects(&r.0, SMALL);
    let mut r = Raw::header(3, 0, 1);
    r.u64(2);
    r.0.extend_from_slice(&[0xFF, 0xFE]);
    r.u32(4).u32(1);
    rejects(&r.0, SMALL);
    // general.alignment: zero, not a power of two, too large, wrong type.
    for a in [0u32, 3, 48, 1 << 21] {
        let mut r = Raw::header(3, 0, 1);
        r.str("general.alignment").u32(4).u32(a);
        rejects(&r.0, SMALL);
    }
    let mut r = Raw::header(3, 0, 1);
    r.str("general.alignment").u32(10).u64(32);
    assert!(rejects(&r.0, SMALL).detail().contains("UINT32"));
}

#[test]
fn tensor_info_rules() {
    let case = |name: &str, ne: &[u64], ty: u32, offset: u64, data_len: usize| {
        let mut r = Raw::header(3, 1, 0);
        r.tensor(name, ne, ty, offset);
        rejects(&r.data(data_len), SMALL)
    };
    let e = case("w", &[1, 1, 1, 1, 1], 0, 0, 64);
    assert_eq!(e.tensor(), Some("w"));
    case("w", &[1 << 63], 0, 0, 64); // negative as int64
    case("w", &[u64::MAX], 0, 0, 64);
    case("w", &[1 << 32, 1 << 32], 0, 0, 64); // product overflows int64
    case("w", &[1 << 31, 1 << 31, 4], 0, 0, 64);
    case("w", &[8], 4, 0, 64); // removed type
    case("w", &[8], 99, 0, 64); // unknown type
    case("w", &[33], 8, 0, 64); // row not a whole number of Q8_0 blocks
    case("w", &[8], 0, 1, 64); // misaligned offset
    case("w", &[8], 0, 16, 64); // misaligned for 32
    case("w", &[8], 0, 32, 40); // data past the end
    case("w", &[8], 0, u64::MAX - 31, 64); // offset arithmetic overflows
    case("w", &[1 << 40], 0, 0, 64); // size far beyond the file
                                     // Names of 64 bytes and more: ggml's GGML_MAX_NAME (64) counts the NUL. The name is
                                     // shown escaped and, when long, cut.
    let e = case(&"\x1b[2J".repeat(16), &[8], 0, 0, 64);
    assert_eq!(e.tensor().map(str::len), Some(64));
    assert!(e.detail().contains("a name of 64 bytes"), "{e}");
    assert!(!e.to_string().contains('\x1b'), "{e}");
    assert!(e.to_string().contains("tensor '\\x1b[2J\\x1b[2J"), "{e}");
    let mut r = Raw::header(3, 1, 0);
    r.tensor(&"n".repeat(1 << 20), &[8], 0, 0);
    let e = rejects(&r.data(64), 4 << 20);
    assert!(e.to_string().len() < 400, "{e}");
    assert!(e.to_string().contains("… (1048576 bytes)"), "{e}");
    let e = case("w", &[8], 0, 0, 31); // truncated data
    assert_eq!(e.tensor(), Some("w"));

    // Names ggml reads: 63 bytes, empty, with a NUL (ggml cuts it there; ours reads it whole).
    for name in ["n".repeat(63), String::new(), "a\0b".to_string()] {
        let mut r = Raw::header(3, 1, 0);
        r.tensor(&name, &[8], 0, 0);
        let bytes = r.data(64);
        let file = GgufFile::parse(&bytes).unwrap();
        assert_eq!(file.tensors()[0].name, name);
    }

    // Duplicate names, overlapping data.
    let mut r = Raw::header(3, 2, 0);
    r.tensor("w", &[8], 0, 0).tensor("w", &[8], 0, 32);
    assert!(rejects(&r.data(64), SMALL).detail().contains("duplicate"));
    let mut r = Raw::header(3, 2, 0);
    r.tensor("a", &[16], 0, 0).tensor("b", &[8], 0, 32);
    let e = rejects(&r.data(96), SMALL);
    assert!(e.detail().contains("overlaps"), "{e}");
    let mut r = Raw::header(3, 2, 0);
    r.tensor("a", &[8], 0, 32).tensor("b", &[8], 0, 32);
    rejects(&r.data(96), SMALL);
    // The data section itself past the end of the file.
    let mut r = Raw::header(3, 1, 0);
    r.tensor("w", &[0], 0, 0);
    rejects(&r.0, SMALL);
}

fn sample_file() -> Vec<u8> {
    let specs = [
        GgufTensorSpec::new("a", vec![2, 64], GgmlType::Q8_0),
        GgufTensorSpec::new("b", vec![64], GgmlType::F16),
        GgufTensorSpec::new("c", vec![2, 32], GgmlType::Q4_0),
    ];
    let mut metadata = standard_metadata("llama", "sample", &specs);
    metadata.push(("v".into(), vec!["x".to_string(), "yz".to_string()].into()));
    let mut out = Vec::new();
    write_gguf(&mut out, &metadata, &specs, |_, s| {
        let n: usize = s.shape.iter().product();
        let v: Vec<f32> = (0..n).map(|i| i as f32 * 0.37 - 3.0).collect();
        TensorView::from_f32(&s.name, s.shape.clone(), &v)
    })
    .unwrap();
    out
}

#[test]
fn every_truncation_is_rejected() {
    let bytes = sample_file();
    let file = GgufFile::parse(&bytes).unwrap();
    let last = file
        .tensors()
        .iter()
        .map(|t| t.offset as usize + t.byte_len)
        .max()
        .unwrap();
    let data_end = file.data_offset() + last;
    for cut in 0..data_end {
        rejects(&bytes[..cut], SMALL);
    }
    // The trailing padding is not needed to read the data.
    assert!(GgufFile::parse(&bytes[..data_end]).is_ok());
}

#[test]
fn random_corruption_never_panics() {
    let bytes = sample_file();
    let mut state = 0x1234_5678_9ABC_DEF0u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..20_000 {
        let mut b = bytes.clone();
        for _ in 0..(next() % 4 + 1) {
            let i = (next() % b.len() as u64) as usize;
            b[i] = match next() % 3 {
                0 => next() as u8,
                1 => 0xFF,
                _ => 0,
            };
        }
        LARGEST.with(|l| l.set(0));
        if let Ok(file) = GgufFile::parse(&b) {
            for t in file.tensors() {
                let _ = file.tensor(&t.name);
            }
        }
        let largest = LARGEST.with(|l| l.get());
        assert!(largest <= 1 << 20, "allocated {largest}");
    }
}

/// Every block type, with a lying file: rows that are not whole blocks, data one byte short
/// of what the shape needs, dimension products that overflow — ERR_INVALID_GGUF naming the
/// tensor. A well-formed tensor of the type opens, and decodes (every bit pattern of its
/// blocks is valid, NaN scales included) or is ERR_UNSUPPORTED_DTYPE.
#[test]
fn every_block_type_lies_are_rejected_and_blocks_decode() {
    for &ty in GgmlType::ALL.iter().filter(|t| t.is_quantized()) {
        let (block, bytes) = (ty.block_size() as u64, ty.type_size());
        let case = |ne: &[u64], data_len: usize| {
            let mut r = Raw::header(3, 1, 0);
            r.tensor("w", ne, ty.id(), 0);
            let e = rejects(&r.data(data_len), SMALL);
            assert_eq!(e.tensor(), Some("w"), "{ty}: {e}");
        };
        case(&[block + 1], 2 * bytes); // a row that is not whole blocks
        case(&[block / 2], bytes); // half a block
        case(&[block * 2, 3], 6 * bytes - 1); // one byte short
        case(&[block, 1 << 62, 4], 64); // the element count overflows
        case(&[block * (1 << 40)], 64); // far beyond the file

        // Two rows of two blocks, every byte 0xFF: f16 scales are NaN, quants at their maxima.
        let mut r = Raw::header(3, 1, 0);
        r.tensor("w", &[block * 2, 2], ty.id(), 0);
        let mut bytes_ = r.data(4 * bytes);
        let n = bytes_.len();
        bytes_[n - 4 * bytes..].fill(0xFF);
        let file = GgufFile::parse(&bytes_).unwrap();
        match file.tensor("w") {
            Ok(view) => {
                assert!(ty.can_decode(), "{ty}");
                assert_eq!(view.shape, vec![2, block as usize * 2]);
                assert_eq!(view.data.len(), 4 * block as usize * 4);
            }
            Err(e) => {
                assert!(!ty.can_decode(), "{ty}: {e}");
                assert_eq!(e.code(), "ERR_UNSUPPORTED_DTYPE", "{ty}");
                assert_eq!(e.tensor(), Some("w"));
            }
        }
    }
}
