//! Threads and memory: the kept pools of judging threads and [`parallel_map`] over them, work
//! put on a thread of its own ([`Deferred`]), and giving freed pages back to the system
//! ([`trim`]). Nothing here knows the spec: the rooms above decide what runs where.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

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

/// Free what is left of a large fold's events on a thread of its own (~0.6 µs an event), while
/// the caller decodes the state, and give their pages back.
pub fn free_later<T: Send + 'static>(events: T, count: usize) {
    if count >= TRIM_FROM {
        std::thread::spawn(move || {
            drop(events);
            trim();
        });
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

    /// `compute` on a thread of its own when `on_a_thread` (worth it when it takes much more than
    /// the ~20 µs of starting one), else at once.
    pub fn start(on_a_thread: bool, compute: impl FnOnce() -> T + Send + 'static) -> Self {
        if on_a_thread {
            Deferred {
                ready: None,
                running: Some(std::thread::spawn(compute)),
            }
        } else {
            Deferred::ready(compute())
        }
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
/// thread idles while another has several items left. One thread, or one item: the caller's
/// alone, with no hand-off.
pub fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    chunk: usize,
    each: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    if threads <= 1 || items.len() < 2 {
        return items.iter().map(each).collect();
    }
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
    pool(threads - 1).in_place_scope(|scope| {
        for _ in 1..threads {
            scope.spawn(|_| {
                let part = take();
                parts.lock().expect("a lock no thread panics under").push(part);
            });
        }
        let part = take();
        parts.lock().expect("a lock no thread panics under").push(part);
    });
    let mut results: Vec<Option<R>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    for (at, result) in parts
        .into_inner()
        .expect("a lock no thread panics under")
        .into_iter()
        .flatten()
    {
        results[at] = Some(result);
    }
    results
        .into_iter()
        .map(|result| result.expect("every item taken once"))
        .collect()
}

/// The pool of `threads` threads, made on first use and kept: starting threads for each fold
/// would cost more than a small fold's work. A process made by `fork` gets pools of its own
/// (the threads of the parent's do not exist in the child).
fn pool(threads: usize) -> Arc<ThreadPool> {
    static POOLS: OnceLock<Pools> = OnceLock::new();
    let key = (std::process::id(), threads);
    let mut pools = POOLS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    pools
        .entry(key)
        .or_insert_with(|| {
            Arc::new(
                ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|index| format!("pith-merge-judge-{index}"))
                    .build()
                    .expect("starting the judging threads"),
            )
        })
        .clone()
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
    fn a_deferred_value_is_the_same_on_a_thread_or_not() {
        assert_eq!(Deferred::start(true, || 6 * 7).wait(), Some(&42));
        assert_eq!(Deferred::start(false, || 6 * 7).wait(), Some(&42));
    }
}
