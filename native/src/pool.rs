//! Threads and memory: the kept pools of judging threads and [`parallel_map`] over them, work
//! put on a thread of its own ([`Deferred`]), giving freed pages back to the system ([`trim`]),
//! and large buffers reserved fallibly ([`vec_with_capacity`], [`ensure_room`]). Nothing here
//! knows the spec: the rooms above decide what runs where.
//!
//! No resource limit makes a fold panic or abort (issue 29): a pool or a thread that cannot be
//! started leaves its work to the caller's thread, and a large buffer that cannot be had
//! unwinds with [`OutOfMemory`], which `py` turns into a `MemoryError`. (Rust aborts when a
//! small allocation fails, and stable Rust cannot change that: [`ensure_room`] checks up front
//! that a fold's peak fits.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rayon::{ThreadPool, ThreadPoolBuilder};

use crate::maps::HashMap;

/// Inputs from which a fold gives freed memory back to the system (see [`trim`]): a few ms, which
/// a small fold would not make up for.
const TRIM_FROM: usize = 2048;

/// The kept pools, by (process id, size).
type Pools = Mutex<HashMap<(u32, usize), Arc<ThreadPool>>>;

/// Give the pages of freed memory back to the system. The judging threads allocate each event's
/// data in their own malloc arenas, which keep freed memory mapped: without this the state and
/// the Python objects decoded from it come on top (docs/performance.md, peak memory).
fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// [`trim`] after a fold of `count` inputs or events, when there are enough of them to pay for it.
pub fn trim_from(count: usize) {
    if count >= TRIM_FROM {
        trim();
    }
}

/// What a fold unwinds with when a large buffer cannot be had: `py` makes it a `MemoryError`.
/// It is raised with [`std::panic::resume_unwind`], which runs no panic hook (nothing printed).
pub struct OutOfMemory {
    /// The bytes asked for.
    pub bytes: usize,
}

/// Unwind with [`OutOfMemory`] of `bytes`.
pub fn out_of_memory(bytes: usize) -> ! {
    std::panic::resume_unwind(Box::new(OutOfMemory { bytes }))
}

/// An empty vector with room for `capacity` items, or [`OutOfMemory`]: for the buffers sized from
/// a fold's input count or bytes, which a memory limit (`RLIMIT_AS`) may not leave room for.
pub fn vec_with_capacity<T>(capacity: usize) -> Vec<T> {
    let mut vec = Vec::new();
    if vec.try_reserve_exact(capacity).is_err() {
        out_of_memory(capacity.saturating_mul(std::mem::size_of::<T>()));
    }
    vec
}

/// An empty map with room for `capacity` entries, or [`OutOfMemory`] (see [`vec_with_capacity`]).
pub fn map_with_capacity<K: Eq + std::hash::Hash, V>(capacity: usize) -> HashMap<K, V> {
    let mut map = HashMap::default();
    if map.try_reserve(capacity).is_err() {
        out_of_memory(capacity.saturating_mul(std::mem::size_of::<(K, V)>()));
    }
    map
}

/// `items` collected, into a vector reserved fallibly for all of them at once.
pub fn collect_exact<T>(items: impl ExactSizeIterator<Item = T>) -> Vec<T> {
    let mut vec = vec_with_capacity(items.len());
    vec.extend(items);
    vec
}

/// [`OutOfMemory`] unless `bytes` could be had now: checked before a fold whose peak is about
/// that, so that the many small allocations it makes later (which abort when they fail) find
/// room. The room is given back at once; reserving without touching costs no page.
///
/// On Linux the room is asked of the kernel itself (an anonymous mapping, which counts against
/// `RLIMIT_AS` as any allocation does), not of malloc: glibc takes a freed mapping of up to 32
/// MB as the size from which to map and keep memory, so that a fold's freed pages would
/// stay with the process (peak memory, issue 26).
pub fn ensure_room(bytes: usize) {
    #[cfg(target_os = "linux")]
    {
        if bytes == 0 {
            return;
        }
        // SAFETY: a fresh private mapping that nothing reads or writes, unmapped at once.
        let mapped = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if mapped == libc::MAP_FAILED {
            out_of_memory(bytes);
        }
        // SAFETY: the mapping made above, of that length.
        unsafe { libc::munmap(mapped, bytes) };
    }
    #[cfg(not(target_os = "linux"))]
    drop(vec_with_capacity::<u8>(bytes));
}

/// The value under `lock`, even when a thread unwound while holding it: every value kept under
/// a lock here is whole between two statements (a verdict cache, a list of results).
pub fn locked<T>(lock: &Mutex<T>) -> MutexGuard<'_, T> {
    lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Free what is left of a large fold's events on a thread of its own (~0.6 µs an event), while
/// the caller decodes the state, and give their pages back; on the caller's thread when no
/// thread can be started (a failed start drops the events with the closure).
pub fn free_later<T: Send + 'static>(events: T, count: usize) {
    if count >= TRIM_FROM {
        let started = std::thread::Builder::new().spawn(move || {
            drop(events);
            trim();
        });
        if started.is_err() {
            trim();
        }
    }
}

/// A value computed at once, or on a thread of its own meanwhile (see [`Deferred::start`]).
pub struct Deferred<T> {
    ready: Option<T>,
    running: Option<JoinHandle<T>>,
}

impl<T: Send + 'static> Deferred<T> {
    /// A value computed already.
    pub fn ready(value: T) -> Self {
        Deferred {
            ready: Some(value),
            running: None,
        }
    }

    /// `compute(&input)` on a thread of its own when `on_a_thread` (worth it when it takes much
    /// more than the ~20 µs of starting one), else, or when no thread can be started, at once.
    pub fn start<I: Send + Sync + 'static>(on_a_thread: bool, input: Arc<I>, compute: fn(&I) -> T) -> Self {
        if on_a_thread {
            let theirs = input.clone();
            if let Ok(running) = std::thread::Builder::new().spawn(move || compute(&theirs)) {
                return Deferred {
                    ready: None,
                    running: Some(running),
                };
            }
        }
        Deferred::ready(compute(&input))
    }

    /// The value, waiting for its thread if it is still running; `None` when that thread panicked.
    pub fn wait(&mut self) -> Option<&T> {
        if let Some(running) = self.running.take() {
            self.ready = running.join().ok();
        }
        self.ready.as_ref()
    }
}

/// `each` of every item, in order, on `threads` threads: the calling thread and `threads - 1` of
/// a kept pool. Each takes the next `chunk` items as it finishes its last, so the caller starts
/// at once (a small fold does not wait for a pool thread to wake before its first item), and no
/// thread idles while another has several items left. One thread, or one item, or no pool to be
/// had (a thread limit): the caller's alone, with no hand-off.
pub fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    chunk: usize,
    each: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let pool = match threads {
        _ if items.len() < 2 => None,
        0 | 1 => None,
        _ => pool(threads - 1),
    };
    let Some(pool) = pool else {
        return collect_exact(items.iter().map(each));
    };
    let next = AtomicUsize::new(0);
    let take = || {
        let mut done: Vec<(usize, R)> = Vec::new();
        loop {
            let start = next.fetch_add(chunk, Ordering::Relaxed);
            if start >= items.len() {
                return done;
            }
            let end = (start + chunk).min(items.len());
            done.extend((start..end).map(|at| (at, each(&items[at]))));
        }
    };
    let parts = Mutex::new(Vec::with_capacity(threads));
    HANDED_OUT.fetch_add(1, Ordering::Relaxed); // a thread kept awake (`stay_awake`) comes to it
                                                // A thread that unwinds (OutOfMemory) makes the scope unwind too, once all have stopped.
    pool.in_place_scope(|scope| {
        for _ in 1..threads {
            scope.spawn(|_| {
                let part = take();
                locked(&parts).push(part);
            });
        }
        let part = take();
        locked(&parts).push(part);
    });
    stay_awake(&pool, threads - 1);
    let mut results: Vec<Option<R>> = collect_exact(std::iter::repeat_with(|| None).take(items.len()));
    let parts = parts.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
    for (at, result) in parts.into_iter().flatten() {
        results[at] = Some(result);
    }
    collect_exact(results.into_iter().map(|result| result.expect("every item taken once")))
}

/// How long a pool's threads stay awake after a hand-off, waiting for the next one: a fold of a
/// small subject hands its pool work of a few hundred µs, and a thread that went to sleep takes
/// about as long to wake (a virtual machine halts an idle CPU), so that a loop of such folds
/// would use one core. Kept awake, a thread costs this much CPU at most after each hand-off.
const AWAKE_FOR: Duration = Duration::from_micros(1000);

/// Hand-offs to a pool so far: a thread kept awake stops waiting when the count moves.
static HANDED_OUT: AtomicUsize = AtomicUsize::new(0);

/// Keep `count` threads of `pool` awake for [`AWAKE_FOR`] or until the next hand-off, whichever
/// comes first (see [`AWAKE_FOR`]).
fn stay_awake(pool: &ThreadPool, count: usize) {
    let handed_out = HANDED_OUT.load(Ordering::Relaxed);
    for _ in 0..count {
        pool.spawn(move || {
            let started = Instant::now();
            while HANDED_OUT.load(Ordering::Relaxed) == handed_out && started.elapsed() < AWAKE_FOR {
                for _ in 0..64 {
                    std::hint::spin_loop();
                }
            }
        });
    }
}

/// The pool of `threads` threads, made on first use and kept: starting threads for each fold
/// would cost more than a small fold's work. A process made by `fork` gets pools of its own
/// (the threads of the parent's do not exist in the child). `None` when its threads cannot be
/// started (`RLIMIT_NPROC`, `RLIMIT_AS`, a container's pids limit): nothing is kept then, and a
/// later fold tries again.
fn pool(threads: usize) -> Option<Arc<ThreadPool>> {
    static POOLS: OnceLock<Pools> = OnceLock::new();
    let key = (std::process::id(), threads);
    let mut pools = locked(POOLS.get_or_init(Mutex::default));
    if let Some(pool) = pools.get(&key) {
        return Some(pool.clone());
    }
    let pool = ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|index| format!("pith-merge-judge-{index}"))
        .build()
        .ok()?;
    Some(pools.entry(key).or_insert(Arc::new(pool)).clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_map_keeps_the_order_on_any_threads_and_chunks() {
        let items: Vec<usize> = (0..1000).collect();
        let squares: Vec<usize> = items.iter().map(|n| n * n).collect();
        for (threads, chunk) in [(1, 1), (2, 1), (3, 7), (4, 256), (8, 2000)] {
            assert_eq!(parallel_map(&items, threads, chunk, |n| n * n), squares);
        }
        assert!(parallel_map(&[] as &[usize], 4, 1, |n| *n).is_empty());
    }

    #[test]
    fn a_buffer_that_cannot_be_had_unwinds_with_out_of_memory() {
        let unwound = std::panic::catch_unwind(|| vec_with_capacity::<u64>(usize::MAX / 4)).unwrap_err();
        let out_of_memory = unwound.downcast_ref::<OutOfMemory>().expect("an OutOfMemory");
        assert_eq!(out_of_memory.bytes, usize::MAX);
        assert!(std::panic::catch_unwind(|| ensure_room(usize::MAX)).is_err());
        assert_eq!(vec_with_capacity::<u64>(10).capacity(), 10);
    }

    #[test]
    fn a_deferred_value_is_the_same_on_a_thread_or_not() {
        assert_eq!(Deferred::start(true, Arc::new(6), |n| n * 7).wait(), Some(&42));
        assert_eq!(Deferred::start(false, Arc::new(6), |n| n * 7).wait(), Some(&42));
    }
}
