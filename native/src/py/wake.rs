//! The group commit's wake-ups (`merge.native.store.Gate`, the twin of `wake`): a waiting
//! append sleeps without the GIL, and a commit's leader wakes all its members in one call
//! that gives the GIL up for the wake-ups (each a futex call), so the woken run meanwhile.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;

use super::guarded;
use crate::wake::Latch;

/// A wake-up given once: `wait` blocks (without the GIL) until `open` or `open_all` opens it.
#[pyclass(module = "pith_merge_native", frozen)]
pub struct Gate {
    latch: Arc<Latch>,
}

#[pymethods]
impl Gate {
    #[new]
    fn new() -> Self {
        Gate {
            latch: Arc::new(Latch::default()),
        }
    }

    /// Wait until the gate is open, at most `timeout` seconds (`None`, or more than a
    /// `Duration` holds: no limit; a negative or NaN one: none); whether it is.
    #[pyo3(signature = (timeout = None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> bool {
        let timeout = timeout.and_then(|seconds| Duration::try_from_secs_f64(seconds.max(0.0)).ok());
        let latch = Arc::clone(&self.latch);
        py.allow_threads(move || latch.wait(timeout))
    }

    /// Open the gate (its waiter goes on); opening an open gate does nothing.
    fn open(&self, py: Python<'_>) {
        let latch = Arc::clone(&self.latch);
        py.allow_threads(move || latch.open());
    }
}

/// Open every gate of `gates` with the GIL given up once, for all of them.
#[pyfunction]
pub fn open_all(py: Python<'_>, gates: Vec<PyRef<'_, Gate>>) -> PyResult<()> {
    guarded(py, || {
        let latches: Vec<Arc<Latch>> = gates.iter().map(|gate| Arc::clone(&gate.latch)).collect();
        py.allow_threads(move || latches.iter().for_each(|latch| latch.open()));
        Ok(())
    })
}
