//! Ordered parallel encoding: the pieces of a stream are encoded on every core and handed to
//! a sink in order, on the calling thread, while later pieces are still being encoded.
//!
//! This is how a conversion overlaps its compute with its writes. The previous design —
//! split each chunk over threads, join, then write — had two costs that profiles showed:
//! the writes ran with the other core idle, and every join waited for the slowest thread, so
//! a helper scheduled late (or placed on the busy core) stalled the whole chunk (per 8M
//! elements, Q4_0 took 3.5 ms in the good case and up to 10 ms). Here threads claim small
//! pieces from a shared counter, so a late thread simply claims fewer of them.

use crate::error::{CoreError, Result};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Condvar, Mutex, MutexGuard};

/// More threads than this only fight over memory bandwidth.
const MAX_THREADS: usize = 8;

/// Threads worth using here: the cores available, at most [`MAX_THREADS`]. Asked once per
/// process: `available_parallelism` reads cgroup files on Linux (~20 system calls), which
/// profiles showed dominating conversions made of many small calls.
pub fn default_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |p| p.get())
            .min(MAX_THREADS)
    })
}

struct Slot {
    /// The bytes of piece `ready` once it is encoded; an empty buffer to reuse otherwise.
    buf: Vec<u8>,
    ready: Option<usize>,
}

struct State {
    /// The next piece nobody has claimed.
    next: usize,
    /// Pieces handed to the sink so far.
    written: usize,
    /// Piece `i` is encoded into `slots[i % slots.len()]`, which piece `i - window` (already
    /// written) has given back.
    slots: Vec<Slot>,
    error: Option<CoreError>,
}

impl State {
    fn can_claim(&self, n: usize) -> bool {
        self.error.is_none() && self.next < n && self.next < self.written + self.slots.len()
    }
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // No code that can panic runs while the lock is held; recover the state regardless.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn wait<'a>(&self, guard: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed
            .wait(guard)
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Claim the next piece (the caller checked [`State::can_claim`]) and take its buffer.
    fn claim(&self, mut state: MutexGuard<'_, State>) -> (usize, Vec<u8>) {
        let i = state.next;
        state.next += 1;
        let window = state.slots.len();
        let buf = std::mem::take(&mut state.slots[i % window].buf);
        (i, buf)
    }

    /// Store the result of encoding piece `i`, or the first error.
    fn finish(&self, i: usize, buf: Vec<u8>, result: Result<()>) {
        let mut state = self.lock();
        let window = state.slots.len();
        match result {
            Ok(()) => {
                state.slots[i % window] = Slot {
                    buf,
                    ready: Some(i),
                }
            }
            Err(e) => {
                state.error.get_or_insert(e);
            }
        }
        drop(state);
        self.changed.notify_all();
    }
}

/// Run `f`, turning a panic into an error (ERR_IO, as the binding reports panics) so that
/// no thread is left waiting for a piece that will never come.
fn guarded(f: impl FnOnce() -> Result<()>) -> Result<()> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(CoreError::new(
            crate::error::ErrorKind::Io,
            "internal error: a conversion thread panicked",
        ))
    })
}

/// Encode pieces `0..n` on up to `threads` threads (the calling thread included) and hand
/// each piece's bytes to `sink` in order, on the calling thread. At most `window` pieces are
/// encoded ahead of the last one written, so memory stays bounded however long the stream.
///
/// `encode(i, scratch, out)` writes piece `i` into `out` (which holds an earlier piece's
/// bytes: resize or clear it); `scratch` is a buffer owned by the thread, for staging. The
/// first error, from either closure, stops every thread and is returned; pieces after it
/// are not given to `sink`.
pub fn encode_ordered<E, S>(
    n: usize,
    threads: usize,
    window: usize,
    encode: E,
    mut sink: S,
) -> Result<()>
where
    E: Fn(usize, &mut Vec<f32>, &mut Vec<u8>) -> Result<()> + Sync,
    S: FnMut(&[u8]) -> Result<()>,
{
    let threads = threads.clamp(1, MAX_THREADS).min(n);
    if threads <= 1 {
        let (mut scratch, mut out) = (Vec::new(), Vec::new());
        for i in 0..n {
            guarded(|| encode(i, &mut scratch, &mut out))?;
            guarded(|| sink(&out))?;
        }
        return Ok(());
    }
    let window = window.max(threads);
    let shared = Shared {
        state: Mutex::new(State {
            next: 0,
            written: 0,
            slots: (0..window)
                .map(|_| Slot {
                    buf: Vec::new(),
                    ready: None,
                })
                .collect(),
            error: None,
        }),
        changed: Condvar::new(),
    };
    let (shared, encode) = (&shared, &encode);
    std::thread::scope(|scope| {
        for _ in 1..threads {
            // A thread that cannot be started leaves its share to the others.
            let _ = std::thread::Builder::new().spawn_scoped(scope, move || {
                let mut scratch = Vec::new();
                loop {
                    let mut state = shared.lock();
                    while !state.can_claim(n) && state.error.is_none() && state.next < n {
                        state = shared.wait(state);
                    }
                    if !state.can_claim(n) {
                        return;
                    }
                    let (i, mut buf) = shared.claim(state);
                    let result = guarded(|| encode(i, &mut scratch, &mut buf));
                    shared.finish(i, buf, result);
                }
            });
        }
        // The calling thread writes whatever is ready, in order, and encodes otherwise.
        let mut scratch = Vec::new();
        let mut state = shared.lock();
        loop {
            if let Some(e) = state.error.take() {
                state.next = n; // the helpers see an error or nothing left, and stop
                drop(state);
                shared.changed.notify_all();
                return Err(e);
            }
            if state.written == n {
                return Ok(());
            }
            let window = state.slots.len();
            let slot = state.written % window;
            if state.slots[slot].ready == Some(state.written) {
                let buf = std::mem::take(&mut state.slots[slot].buf);
                drop(state);
                let result = guarded(|| sink(&buf));
                state = shared.lock();
                state.slots[slot] = Slot { buf, ready: None };
                match result {
                    Ok(()) => state.written += 1,
                    Err(e) => {
                        state.error.get_or_insert(e);
                    }
                }
                shared.changed.notify_all();
            } else if state.can_claim(n) {
                let (i, mut buf) = shared.claim(state);
                let result = guarded(|| encode(i, &mut scratch, &mut buf));
                shared.finish(i, buf, result);
                state = shared.lock();
            } else {
                state = shared.wait(state);
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use std::time::Duration;

    fn piece(i: usize) -> Vec<u8> {
        (0..(i % 7) + 1).map(|k| (i * 31 + k) as u8).collect()
    }

    /// Every piece arrives once, in order, whatever the thread count, window and timing.
    #[test]
    fn pieces_reach_the_sink_in_order() {
        for threads in [1, 2, 3, 8] {
            for window in [1, 2, 5] {
                for n in [0, 1, 2, 7, 50] {
                    let mut got = Vec::new();
                    encode_ordered(
                        n,
                        threads,
                        window,
                        |i, scratch, out| {
                            scratch.push(i as f32); // per-thread scratch is usable
                            if i % 3 == 0 {
                                std::thread::sleep(Duration::from_micros(200));
                            }
                            out.clear();
                            out.extend(piece(i));
                            Ok(())
                        },
                        |bytes| {
                            got.push(bytes.to_vec());
                            Ok(())
                        },
                    )
                    .unwrap();
                    let want: Vec<Vec<u8>> = (0..n).map(piece).collect();
                    assert_eq!(got, want, "threads {threads} window {window} n {n}");
                }
            }
        }
    }

    #[test]
    fn the_first_error_stops_the_stream() {
        for threads in [1, 2, 4] {
            let mut written = 0;
            let e = encode_ordered(
                40,
                threads,
                4,
                |i, _, out| {
                    if i == 9 {
                        return Err(CoreError::invalid_argument("bad piece 9"));
                    }
                    out.clear();
                    out.push(i as u8);
                    Ok(())
                },
                |bytes| {
                    assert_eq!(bytes, [written as u8]);
                    written += 1;
                    Ok(())
                },
            )
            .unwrap_err();
            assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
            assert!(written <= 9, "{written} pieces written past the error");

            let e = encode_ordered(
                40,
                threads,
                4,
                |_, _, out| {
                    out.clear();
                    out.push(1);
                    Ok(())
                },
                |_| Err(CoreError::new(ErrorKind::Io, "disk full")),
            )
            .unwrap_err();
            assert_eq!(e.code(), "ERR_IO");
        }
    }

    #[test]
    fn a_panicking_piece_is_an_error_not_a_hang() {
        for threads in [1, 2, 3] {
            let e = encode_ordered(
                20,
                threads,
                3,
                |i, _, out| {
                    assert!(i != 5, "piece 5 panics");
                    out.clear();
                    Ok(())
                },
                |_| Ok(()),
            )
            .unwrap_err();
            assert_eq!(e.code(), "ERR_IO");
            let e = encode_ordered(20, threads, 3, |_, _, _| Ok(()), |_| panic!("sink panics"))
                .unwrap_err();
            assert_eq!(e.code(), "ERR_IO");
        }
    }
}
