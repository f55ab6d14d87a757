//! The cache of output mappings (`stcore::buffer::cache`), seen from outside: a dropped large
//! buffer's mapping is handed to the next one that fits, cut to size, and unmapped once idle.
//! Its own binary, one test: nothing else in the process takes or gives mappings meanwhile.

use stcore::buffer::{cache, LargeBuffer};

const MIB: usize = 1 << 20;

#[test]
fn a_dropped_mapping_is_reused_cut_to_size_and_given_back_when_idle() {
    if cache::limit() == 0 {
        return; // built without threads: nothing is kept
    }
    assert_eq!(cache::kept_bytes(), 0);

    // 8 MiB of u32, written, dropped: kept whole.
    let mut a = LargeBuffer::<u32>::for_overwrite(2 * MIB).unwrap();
    for (i, v) in a.as_mut_slice().iter_mut().enumerate() {
        *v = i as u32 ^ 0x5a5a_5a5a;
    }
    let at = a.as_mut_ptr() as usize;
    assert_eq!(at % (2 * MIB), 0, "outputs start on a huge-page boundary");
    drop(a);
    assert_eq!(cache::kept_bytes(), 8 * MIB);

    // The next output that fits gets the same memory, as it was left (not zeroed again).
    let mut b = LargeBuffer::<u32>::for_overwrite(MIB / 2).unwrap();
    assert_eq!(b.as_mut_ptr() as usize, at);
    assert!(b
        .as_slice()
        .iter()
        .enumerate()
        .all(|(i, &v)| v == i as u32 ^ 0x5a5a_5a5a));
    // It took one huge page's worth; the other 6 MiB stay kept, after it.
    assert_eq!(cache::kept_bytes(), 6 * MIB);
    let mut c = LargeBuffer::<u8>::for_overwrite(6 * MIB).unwrap();
    assert_eq!(c.as_mut_ptr() as usize, at + 2 * MIB);
    assert_eq!(cache::kept_bytes(), 0);

    // `zeroed` never takes a kept mapping.
    drop(c);
    let z = LargeBuffer::<u8>::zeroed(4 * MIB).unwrap();
    assert!(z.as_slice().iter().all(|&v| v == 0));
    assert_eq!(cache::kept_bytes(), 6 * MIB);

    // More than the limit is never kept.
    drop(z);
    drop(b);
    let kept = cache::kept_bytes();
    assert_eq!(kept, 12 * MIB);
    let big = LargeBuffer::<u8>::zeroed(cache::limit() + 1).unwrap();
    drop(big);
    assert_eq!(cache::kept_bytes(), kept);

    // Idle mappings are unmapped by the cache's thread.
    std::thread::sleep(cache::IDLE * 2 + std::time::Duration::from_millis(200));
    assert_eq!(cache::kept_bytes(), 0);

    // `cached` only takes: nothing kept, nothing made.
    assert!(LargeBuffer::<u8>::cached(4 * MIB).unwrap().is_none());
    drop(LargeBuffer::<u8>::for_overwrite(4 * MIB).unwrap());
    let again = LargeBuffer::<u8>::cached(3 * MIB)
        .unwrap()
        .expect("a kept mapping fits");
    assert_eq!((again.len(), cache::kept_bytes()), (3 * MIB, 0));

    // And `release` gives everything back at once.
    drop(again);
    assert_eq!(cache::release(), 4 * MIB);
    assert_eq!(cache::kept_bytes(), 0);
}
