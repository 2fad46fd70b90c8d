//! A wake-up that one thread waits on and another gives, once (`merge.store.base`'s group
//! commit: each waiting append's, and the gathering leader's): a flag under a mutex with a
//! condition variable, so that a Python thread can wait and be woken without holding the GIL.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Closed until [`Latch::open`]; then open for good.
#[derive(Default)]
pub struct Latch {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Latch {
    /// Open it and wake whoever waits (at most one thread waits on a latch of the store's).
    pub fn open(&self) {
        *self.open.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.opened.notify_all();
    }

    /// Wait until it is open, at most `timeout` (`None`: for as long as it takes); whether it is.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let deadline = timeout.map(|timeout| Instant::now() + timeout);
        while !*open {
            open = match deadline {
                None => self.opened.wait(open).unwrap_or_else(PoisonError::into_inner),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return false;
                    }
                    self.opened
                        .wait_timeout(open, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_latch_wakes_its_waiter_once_opened_and_times_out_before() {
        let latch = Arc::new(Latch::default());
        assert!(!latch.wait(Some(Duration::from_millis(1))));
        let waiter = {
            let latch = Arc::clone(&latch);
            std::thread::spawn(move || latch.wait(None))
        };
        latch.open();
        assert!(waiter.join().unwrap());
        assert!(latch.wait(Some(Duration::ZERO)));
    }
}
