//! Every thread this crate starts, in two shapes sharing one thread cap
//! ([`default_threads`]) and one panic policy (a panic in a worker is a bug: it becomes
//! ERR_INTERNAL naming it, never ERR_IO or ERR_INVALID_ARGUMENT, and never takes the process
//! down or leaves a thread waiting):
//!
//! - [`for_chunks`]: one piece of work over matching contiguous chunks of a source and a
//!   destination (casts, block codecs, predictions), cut into several chunks per thread,
//!   each taken by whichever thread is free.
//! - [`encode_ordered`]: the pieces of a stream encoded on every core and handed to a sink
//!   in order, on the calling thread, while later pieces are still being encoded — how a
//!   conversion overlaps its compute with its writes.

use crate::error::{CoreError, Result};
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// More threads than this only fight over memory bandwidth.
const MAX_THREADS: usize = 8;

/// [`for_chunks`] cuts its work into this many chunks per thread, so that the threads that
/// run freely take over the chunks of one that is held up.
const CHUNKS_PER_THREAD: usize = 4;

/// Threads worth using here: the cores available, at most [`MAX_THREADS`]. Asked once per
/// process (`available_parallelism` reads cgroup files on Linux, ~20 system calls).
/// Without the `threads` feature: 1, so every helper here runs on the calling thread.
pub fn default_threads() -> usize {
    #[cfg(not(feature = "threads"))]
    return 1;
    #[cfg(feature = "threads")]
    {
        static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        *THREADS.get_or_init(|| {
            std::thread::available_parallelism()
                .map_or(1, |p| p.get())
                .min(MAX_THREADS)
        })
    }
}

/// Run `f`, turning a panic into ERR_INTERNAL, so that a bug in one worker is reported as
/// one and no thread is left waiting for work that will never come.
fn guarded<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|payload| Err(CoreError::panicked("a worker thread", payload.as_ref())))
}

thread_local! {
    /// Whether this thread is running a chunk of [`for_chunks`] (see [`Split::threads`]).
    static IN_CHUNK: Cell<bool> = const { Cell::new(false) };
}

/// Run `f` as a chunk of [`for_chunks`]: work it starts in turn stays on this thread.
fn in_chunk<T>(f: impl FnOnce() -> T) -> T {
    let outer = IN_CHUNK.with(|c| c.replace(true));
    let out = f();
    IN_CHUNK.with(|c| c.set(outer));
    out
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only `guarded` code runs while a lock is held elsewhere; recover the state regardless.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How [`for_chunks`] cuts its work into units (a value, a block, a row).
#[derive(Debug, Clone, Copy)]
pub struct Split {
    /// Source items per unit.
    pub src_per_unit: usize,
    /// Destination items per unit.
    pub dst_per_unit: usize,
    /// A thread is started only for at least this many units: below it one costs more than
    /// it saves (tens of microseconds to start).
    pub min_units_per_thread: usize,
    /// Every chunk but the last holds a multiple of this many units (e.g. to keep each
    /// chunk's source as aligned as the whole).
    pub align_units: usize,
}

impl Split {
    /// `src_per_unit` source and `dst_per_unit` destination items per unit; threads for at
    /// least 2^18 units each, chunks of any length.
    pub const fn new(src_per_unit: usize, dst_per_unit: usize) -> Split {
        Split {
            src_per_unit,
            dst_per_unit,
            min_units_per_thread: 1 << 18,
            align_units: 1,
        }
    }

    pub const fn min_units_per_thread(self, units: usize) -> Split {
        Split {
            min_units_per_thread: units,
            ..self
        }
    }

    pub const fn align_units(self, units: usize) -> Split {
        Split {
            align_units: units,
            ..self
        }
    }

    /// Threads for `units` units: one per `min_units_per_thread`, at most
    /// [`default_threads`], at least one — and one inside a chunk of another [`for_chunks`]
    /// (a conversion run per part on every core runs each part on its own thread).
    fn threads(&self, units: usize) -> usize {
        if IN_CHUNK.with(Cell::get) {
            return 1;
        }
        default_threads()
            .min(units / self.min_units_per_thread.max(1))
            .max(1)
    }
}

/// Run `f(first_unit, src_chunk, dst_chunk)` over matching contiguous chunks of `src` and
/// `dst` (as [`Split`] cuts them; `dst` holds `dst.len() / dst_per_unit` units): on several
/// threads when the input is large, else one call on the calling thread. Threads are started
/// once per call, and the work is cut into [`CHUNKS_PER_THREAD`] chunks per thread, each
/// taken by whichever thread is free next — the calling thread too — so a core busy with
/// something else (V8's garbage collector, another process) slows one chunk, not half the
/// work, and a thread that could not be started leaves nothing undone. Of several failing
/// chunks the error of the first is returned, so the result does not depend on scheduling.
pub fn for_chunks<S: Sync, D: Send>(
    split: Split,
    src: &[S],
    dst: &mut [D],
    f: impl Fn(usize, &[S], &mut [D]) -> Result<()> + Sync,
) -> Result<()> {
    let units = dst.len() / split.dst_per_unit.max(1);
    for_chunks_on(split.threads(units), split, src, dst, f)
}

/// [`for_chunks`] on (at most) `threads` threads.
fn for_chunks_on<S: Sync, D: Send>(
    threads: usize,
    split: Split,
    src: &[S],
    dst: &mut [D],
    f: impl Fn(usize, &[S], &mut [D]) -> Result<()> + Sync,
) -> Result<()> {
    let (sp, dp) = (split.src_per_unit, split.dst_per_unit);
    let units = dst.len() / dp.max(1);
    if threads <= 1 || sp == 0 || dp == 0 || units < 2 {
        return guarded(|| f(0, src, dst));
    }
    let per = units
        .div_ceil(threads * CHUNKS_PER_THREAD)
        .next_multiple_of(split.align_units.max(1));
    type Chunk<'a, S, D> = Mutex<Option<(usize, &'a [S], &'a mut [D])>>;
    let chunks: Vec<Chunk<S, D>> = src
        .chunks(per * sp)
        .zip(dst.chunks_mut(per * dp))
        .enumerate()
        .map(|(i, (s, d))| Mutex::new(Some((i * per, s, d))))
        .collect();
    let results: Vec<Mutex<Result<()>>> = chunks.iter().map(|_| Mutex::new(Ok(()))).collect();
    // Every thread takes the next chunk nobody has taken until none is left.
    let next = AtomicUsize::new(0);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(chunk) = chunks.get(i) else { break };
        if let Some((at, s, d)) = lock(chunk).take() {
            let result = in_chunk(|| guarded(|| f(at, s, d)));
            *lock(&results[i]) = result;
        }
    };
    let work = &work;
    std::thread::scope(|scope| {
        for _ in 1..threads.min(chunks.len()) {
            // A thread that cannot be started leaves its share to the others.
            let _ = std::thread::Builder::new().spawn_scoped(scope, work);
        }
        work();
    });
    results.into_iter().try_for_each(|r| {
        r.into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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
        lock(&self.state)
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
            assert_eq!(e.code(), "ERR_INTERNAL");
            assert!(e.detail().contains("piece 5 panics"), "{e}");
            let e = encode_ordered(20, threads, 3, |_, _, _| Ok(()), |_| panic!("sink panics"))
                .unwrap_err();
            assert_eq!(e.code(), "ERR_INTERNAL");
        }
    }

    /// Every unit is visited once, in the chunk that holds it, with matching source and
    /// destination ranges, whatever the thread count; chunks keep the alignment asked for.
    #[test]
    fn chunks_cover_every_unit_once() {
        for threads in [1, 2, 3, 8] {
            for (sp, dp, align) in [(1, 1, 1), (3, 2, 1), (2, 1, 4), (34, 32, 1)] {
                for units in [0, 1, 2, 5, 17, 100] {
                    let src: Vec<u32> = (0..units * sp).map(|i| i as u32).collect();
                    let mut dst = vec![u32::MAX; units * dp];
                    let split = Split::new(sp, dp).align_units(align);
                    for_chunks_on(threads, split, &src, &mut dst, |first, s, d| {
                        assert_eq!(s.len() / sp, d.len() / dp);
                        assert_eq!(
                            s.first().copied(),
                            (!s.is_empty()).then_some((first * sp) as u32)
                        );
                        if first > 0 {
                            assert_eq!(first % align, 0, "chunk at {first}");
                        }
                        for (u, out) in d.chunks_mut(dp).enumerate() {
                            out.fill((first + u) as u32);
                        }
                        Ok(())
                    })
                    .unwrap();
                    let want: Vec<u32> = (0..units * dp).map(|i| (i / dp) as u32).collect();
                    assert_eq!(dst, want, "threads {threads} per {sp}/{dp} units {units}");
                }
            }
        }
    }

    /// A thread held up in its chunk holds up only that chunk: the others take the rest, and
    /// no chunk is more than half a thread's share.
    #[test]
    fn a_held_up_thread_holds_up_one_small_chunk() {
        let units = 1024;
        let (src, mut dst) = (vec![0u8; units], vec![0u8; units]);
        // (chunks finished, whether one is held up)
        let state = (Mutex::new((0usize, false)), Condvar::new());
        let lens = Mutex::new(Vec::new());
        for_chunks_on(2, Split::new(1, 1), &src, &mut dst, |_, s, _| {
            lens.lock().unwrap().push(s.len());
            let mut st = state.0.lock().unwrap();
            if !st.1 {
                // The first chunk to start waits until every other one is done.
                st.1 = true;
                let n = units.div_ceil(units.div_ceil(2 * CHUNKS_PER_THREAD));
                let (st, timeout) = state
                    .1
                    .wait_timeout_while(st, std::time::Duration::from_secs(10), |st| st.0 < n - 1)
                    .unwrap();
                assert!(!timeout.timed_out(), "{} other chunks done", st.0);
            } else {
                st.0 += 1;
                state.1.notify_all();
            }
            Ok(())
        })
        .unwrap();
        let lens = lens.into_inner().unwrap();
        assert_eq!(lens.iter().sum::<usize>(), units);
        assert!(lens.iter().all(|&n| n <= units / 4), "{lens:?}");
    }

    /// Work started inside a chunk stays on that chunk's thread; outside, it splits again.
    #[test]
    fn work_inside_a_chunk_runs_on_its_thread() {
        let split = Split::new(1, 1).min_units_per_thread(1);
        let threads_of = |units: usize| split.threads(units);
        let src = vec![0u8; 64];
        let mut dst = vec![0u8; 64];
        let inner = Mutex::new(Vec::new());
        for_chunks_on(2, split, &src, &mut dst, |_, s, _| {
            inner.lock().unwrap().push(threads_of(s.len()));
            Ok(())
        })
        .unwrap();
        assert_eq!(inner.into_inner().unwrap(), [1; 2 * CHUNKS_PER_THREAD]);
        assert_eq!(threads_of(64), default_threads().min(64));
        assert!(
            !IN_CHUNK.with(Cell::get),
            "the calling thread's flag is restored"
        );
    }

    /// The error of the first failing chunk wins, so the result does not depend on which
    /// thread finishes first; a panic is ERR_INTERNAL (a bug), on any thread.
    #[test]
    fn chunk_errors_are_deterministic_and_panics_are_bugs() {
        let src = vec![0u8; 64];
        for threads in [1, 2, 4] {
            let mut dst = vec![0u8; 64];
            let e = for_chunks_on(threads, Split::new(1, 1), &src, &mut dst, |first, _, _| {
                if first > 0 {
                    std::thread::sleep(Duration::from_millis(2 * (8 - first as u64 / 8)));
                }
                Err(CoreError::invalid_argument(format!("chunk at {first}")))
            })
            .unwrap_err();
            assert_eq!(e.detail(), "chunk at 0");
            for panicking in [0, 63] {
                let e = for_chunks_on(threads, Split::new(1, 1), &src, &mut dst, |first, s, _| {
                    assert!(
                        first + s.len() <= panicking || first > panicking,
                        "unit {panicking}"
                    );
                    Ok(())
                })
                .unwrap_err();
                assert_eq!(e.code(), "ERR_INTERNAL", "{e}");
                assert!(e.detail().contains("this is a bug"), "{e}");
            }
        }
    }

    /// Small inputs stay on the calling thread: one call with everything.
    #[test]
    fn small_inputs_are_one_call() {
        let src = vec![1u8; 1000];
        let mut dst = vec![0u8; 1000];
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let caller = std::thread::current().id();
        for_chunks(Split::new(1, 1), &src, &mut dst, |first, s, d| {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            assert_eq!((first, s.len(), d.len()), (0, 1000, 1000));
            assert_eq!(std::thread::current().id(), caller);
            d.copy_from_slice(s);
            Ok(())
        })
        .unwrap();
        assert_eq!(calls.into_inner(), 1);
        assert_eq!(dst, src);
    }
}
