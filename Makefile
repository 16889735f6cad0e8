# corral — developer commands. `make demo` and `make test` do all set-up on a fresh machine.
PY ?= python3
PIP_FLAGS ?= -q --disable-pip-version-check

.PHONY: setup deps build test test-rust test-py demo bench clean

## Install Python dependencies (torch included; a no-op once installed) and build the extension.
setup: deps build

deps:
	$(PY) -m pip install $(PIP_FLAGS) -r requirements-dev.txt

build:
	$(PY) -m pip install $(PIP_FLAGS) --no-build-isolation -e .

## Every test: the Rust core crate, then the Python suite.
test: setup test-rust test-py

test-rust:
	cargo test -p corral-core

test-py:
	$(PY) -m pytest

## The main job on the built-in default.
demo: setup
	$(PY) -m corral stats

## Side-by-side comparison with xgrammar, llguidance and outlines-core (see benches/README.md).
bench: setup
	$(PY) benches/compare.py

clean:
	cargo clean
	rm -rf python/corral/*.so build dist .pytest_cache
