# Set-up and checks. `make demo` and `make test` are the two commands of the README.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint typecheck check bench stress wheels clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The compiled per-event path (native/, Rust through PyO3; docs/performance.md), built where
# cargo is, with cargo's progress shown (pip -v passes on the build's output). Without a Rust
# toolchain it is not built here: see install below.
NATIVE_SOURCES := native/Cargo.toml native/Cargo.lock native/pyproject.toml native/pith_merge_native.pyi $(wildcard native/src/*.rs native/src/*/*.rs)
$(VENV)/.installed-native: $(NATIVE_SOURCES) | $(BIN)/python
	@if command -v cargo >/dev/null 2>&1; then \
		echo "building the compiled path (native/, cargo: about a minute the first time)"; \
		$(BIN)/python -m pip install --verbose ./native; \
	else \
		echo "no cargo on PATH: the compiled path is not built here"; \
	fi
	touch $@

# $(call install,EXTRAS): pith-merge, editable, with the extras EXTRAS (e.g. [dev]). A checkout's
# install never requires pith-merge-native (hatch_build.py: only a release's wheel does); the
# compiled path is the one built above, where cargo is.
define install
$(BIN)/python -m pip install --quiet -e '.$(1)'
endef

# Runtime install: what a user of the command gets.
$(VENV)/.installed: pyproject.toml $(VENV)/.installed-native | $(BIN)/python
	$(call install,)
	touch $@

# Development install: dev tools, the optional Dask engine, PostgreSQL store, strategies and the
# example service's servers (tested in CI).
DEV_EXTRAS := [dev,dask,postgres,testing,monitor,service]
$(VENV)/.installed-dev: pyproject.toml $(VENV)/.installed-native | $(BIN)/python
	$(call install,$(DEV_EXTRAS))
	touch $@ $(VENV)/.installed

# The whole job on examples/: `pith-merge verify`, `replay` and `explain`, run by merge/demo.py.
demo: $(VENV)/.installed
	$(BIN)/python -m merge.demo

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@# native/'s Rust, where cargo and its rustfmt and clippy components are there.
	@if cargo fmt --version >/dev/null 2>&1; then cd native && cargo fmt --check; fi
	@if cargo clippy --version >/dev/null 2>&1; then cd native && cargo clippy --quiet --release -- -D warnings; fi

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

# The suite, with the coverage gate on the core ([tool.coverage] in pyproject.toml).
# Where the compiled path is built, the suite runs on it (the default); then the fold's, the
# bundles' and the audit's own suites run again on the pure path, the reference
# (PITH_MERGE_PURE=1), so both stay tested.
PURE_SUITES := tests/test_conformance.py tests/test_edge_vectors.py tests/test_batch.py tests/test_bundle.py tests/test_external_vectors.py tests/test_audit.py tests/test_audit_store.py property_tests
test: lint typecheck
	@# native/'s own unit tests (Rust), where cargo is.
	@if command -v cargo >/dev/null 2>&1; then cd native && cargo test --quiet; fi
	$(BIN)/python -m pytest --cov --cov-report=term
	@if $(BIN)/python -c "import pith_merge_native" 2>/dev/null; then \
		echo "the fold's suites again, on the pure path (PITH_MERGE_PURE=1)"; \
		PITH_MERGE_PURE=1 $(BIN)/python -m pytest -q $(PURE_SUITES); \
	fi

# Benchmarks (docs/performance.md), never part of `make test`: `make bench BENCH_ARGS=--quick`.
bench: $(VENV)/.installed-dev
	$(BIN)/python -m bench $(BENCH_ARGS)

# The pictures of docs/cli.md (`pith-merge graph`; needs Graphviz's dot).
.PHONY: docs-images
docs-images: $(VENV)/.installed
	mkdir -p docs/images
	$(BIN)/pith-merge graph --bundle tests/vectors/golden/pith-2303.04759.bundle.json --format svg -o docs/images/golden.svg
	$(BIN)/pith-merge graph --bundle examples/example.bundle.json --format svg -o docs/images/equivocation.svg

# The API reference (docs/api.md): HTML from the docstrings, into out/api/ (make test builds it
# too, warnings as errors: tests/test_api_docs.py).
.PHONY: docs-api
docs-api: $(VENV)/.installed-dev
	$(BIN)/python docs/build_api.py out/api

# The long fault tests (docs/security.md §5), never part of `make test`: store writers killed with
# SIGKILL (`make stress STRESS_ARGS="--kills 1000 --seconds 1800"`), and writers of 8 threads
# sharing one store object and its commits, killed the same way; PostgreSQL backends stopped
# with SIGSTOP under real store commands (`SILENT_ARGS="--rounds 10 --seconds 1800"`; skipped
# without the PostgreSQL server binaries); a running monitor killed at random moments
# (`MONITOR_STRESS_ARGS="--kills 500"`: about 9 minutes); and bundle texts fuzzed against both
# paths (fuzz/fuzz_bundles.py, fuzz/README.md): coverage-guided with atheris for
# `BUNDLE_FUZZ_ARGS` (default 10 minutes, corpus kept in fuzz/bundle-corpus/), a seeded run of
# 50,000 texts where atheris is not installed; and every compiled/pure pair on mutated event
# texts in every input form (fuzz/fuzz_paths.py, `PATHS_FUZZ_ARGS`: 20,000 seeded runs, about
# 6 minutes).
BUNDLE_FUZZ_ARGS ?= -max_total_time=600 -timeout=60 -artifact_prefix=fuzz/ fuzz/bundle-corpus
PATHS_FUZZ_ARGS ?= --seed 2 --runs 20000 --artifacts fuzz
stress: $(VENV)/.installed-dev
	$(BIN)/python -m tests.store.soak $(STRESS_ARGS)
	$(BIN)/python -m tests.store.soak --threads 8 $(STRESS_ARGS)
	$(BIN)/python -m tests.store.silent_server $(SILENT_ARGS)
	$(BIN)/python -m tests.monitor.soak $(MONITOR_STRESS_ARGS)
	@if $(BIN)/python -c "import atheris" 2>/dev/null; then \
		mkdir -p fuzz/bundle-corpus && $(BIN)/python fuzz/fuzz_bundles.py $(BUNDLE_FUZZ_ARGS); \
	else \
		$(BIN)/python fuzz/fuzz_bundles.py --seed 2 --runs 50000 --artifacts fuzz; \
	fi
	$(BIN)/python fuzz/fuzz_paths.py $(PATHS_FUZZ_ARGS)

# The packages of a release, into $(DIST) (docs/performance.md, "Installing the compiled path"):
# pith-merge's sdist and pure wheel (python -m build, hatchling), and pith-merge-native's sdist
# and abi3 wheel for manylinux2014: maturin links it with zig against glibc 2.17's symbols, so
# the tag manylinux_2_17_x86_64 is true (a plain build links against this box's glibc and is
# tagged for it), and auditwheel shows that it agrees. Needs cargo; tests/test_wheels.py runs it.
DIST ?= dist
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' merge/_version.py)
wheels: $(VENV)/.installed-dev
	PITH_MERGE_RELEASE=1 $(BIN)/python -m build --outdir $(DIST) .
	cd native && PATH="$(abspath $(BIN)):$$PATH" maturin build --release --zig --compatibility manylinux2014 --out $(abspath $(DIST))
	cd native && PATH="$(abspath $(BIN)):$$PATH" maturin sdist --out $(abspath $(DIST))
	$(BIN)/auditwheel show $(DIST)/pith_merge_native-$(VERSION)-*.whl

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis native/target $(DIST)
