//! pith-merge's compiled per-event path (merge-v1), an optional accelerator of the pure-Python
//! engine, which stays the reference. Its rooms are `merge/`'s, under the same names, each
//! using only the rooms listed before it:
//! [`maps`], [`pool`] (threads and memory), [`wake`] (a thread's wake-up, waited on without
//! the GIL: the group commit's), [`reasons`], [`json`] and [`canonical`] (§1),
//! [`timestamps`] (§4), [`identifiers`] (§2), [`verify`] (§2's Ed25519, with libsodium's
//! verdicts), [`admission`] (§5), [`checks`] (§4, §6, §8), [`chains`] (§7), [`state`] (§9),
//! [`batch`] (the fold of many inputs), [`engine`] (the incremental engine's judging),
//! [`bundle`] (§10: reading a bundle's text, and judging one that passes), [`store`] (an input
//! prepared for an event store), and [`py`], the boundary with `merge.native`, one file per
//! service.

mod admission;
mod batch;
mod bundle;
mod canonical;
mod chains;
mod checks;
mod engine;
mod identifiers;
mod json;
mod maps;
mod pool;
mod py;
mod reasons;
mod state;
mod store;
mod timestamps;
mod verify;
mod wake;

use pyo3::prelude::*;

use reasons::Reason;

#[pymodule]
fn pith_merge_native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add("INTERFACE_VERSION", py::INTERFACE_VERSION)?;
    module.add_function(wrap_pyfunction!(py::fold::judge, module)?)?;
    module.add_function(wrap_pyfunction!(py::fold::judge_many, module)?)?;
    module.add_function(wrap_pyfunction!(py::fold::finish_many, module)?)?;
    module.add_function(wrap_pyfunction!(py::fold::release_memory, module)?)?;
    module.add_function(wrap_pyfunction!(py::verify::verify_signatures, module)?)?;
    module.add_function(wrap_pyfunction!(py::canonical::canonical_texts, module)?)?;
    module.add_function(wrap_pyfunction!(py::bundle::read_bundle, module)?)?;
    module.add_function(wrap_pyfunction!(py::store::prepare_inputs, module)?)?;
    module.add_function(wrap_pyfunction!(py::wake::open_all, module)?)?;
    module.add_function(wrap_pyfunction!(py::bundle::judge_bundles, module)?)?;
    module.add_class::<py::fold::Key>()?;
    module.add_class::<py::fold::ValidEvent>()?;
    module.add_class::<py::fold::Judgement>()?;
    module.add_class::<py::fold::VerdictCache>()?;
    module.add_class::<py::fold::StateDigest>()?;
    module.add_class::<py::fold::StateBytes>()?;
    module.add_class::<py::fold::Finished>()?;
    module.add_class::<py::bundle::BundleCache>()?;
    module.add_class::<py::bundle::BundleRead>()?;
    module.add_class::<py::bundle::JudgedBundle>()?;
    module.add_class::<py::engine::EventJudge>()?;
    module.add_class::<py::engine::JudgedInput>()?;
    module.add_class::<py::engine::KeyTable>()?;
    module.add_class::<py::wake::Gate>()?;
    module.add("REASONS", py::codes(Reason::ALL))?;
    module.add("CHECK_ORDER", py::codes(Reason::CHECK_ORDER))?;
    module.add("EVENT_TYPES", checks::EVENT_TYPES.to_vec())?;
    Ok(())
}
