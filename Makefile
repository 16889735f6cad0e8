# corral — developer commands. `make demo` and `make test` do all set-up on a fresh machine.
PY ?= python3
PIP_FLAGS ?= -q --disable-pip-version-check

.PHONY: setup deps build docs test check-layers test-rust test-py test-stubs test-wheels wheels test-engines fuzz-smoke demo bench clean

## Install Python dependencies (torch included; a no-op once installed) and build the extension.
setup: deps build

deps:
	$(PY) -m pip install $(PIP_FLAGS) -r requirements-dev.txt

build:
	$(PY) -m pip install $(PIP_FLAGS) --no-build-isolation -e .

## Every test: the module-graph check, the API reference builds without warnings, the Rust
## crates, the Python suite (docstring examples included: tests/test_docstrings.py), the stubs,
## the wheels (built, installed without Rust, the numpy-only suite on the oldest and newest
## Python), a short smoke run of each fuzz target.
test: setup check-layers docs test-rust test-py test-stubs test-wheels fuzz-smoke

## No import cycle in corral-core, corral-schema or the Python package, and corral-core's layers
## import one way only (the order is declared in the script; tests/test_check_layers.py tests it).
check-layers:
	$(PY) tools/check_layers.py

DOCS_DIR ?= build/docs
## The API reference, generated from the docstrings by pdoc into $(DOCS_DIR) (git-ignored).
## A pdoc warning (a bad module spec, an unparsable annotation or docstring) fails it.
docs: setup
	rm -rf $(DOCS_DIR)
	$(PY) -W error::UserWarning docs/build_api.py $(DOCS_DIR)

test-rust:
	cargo test -p corral-core
	# Schema compilation recurses over the schema; the Python binding runs it on a 64 MiB stack, so the tests do too.
	RUST_MIN_STACK=67108864 cargo test --release -p corral-schema
	# Lark and structural tags embed JSON Schemas: the same stack.
	RUST_MIN_STACK=67108864 cargo test --release -p corral-formats

FUZZ_SECONDS ?= 10
## Each cargo-fuzz target for a few seconds (needs the nightly toolchain; cargo-fuzz is
## installed on first use). Skipped, with a message, where no nightly toolchain exists.
fuzz-smoke:
	@if ! rustup run nightly rustc --version >/dev/null 2>&1; then \
		echo "fuzz-smoke: no nightly toolchain here; skipped"; \
	else \
		command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz; \
		for t in $$(cargo +nightly fuzz list); do \
			dict=; if [ $$t = json_schema ]; then dict=-dict=fuzz/json.dict; fi; \
			cargo +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 $$dict || exit 1; \
		done; \
	fi

test-py:
	$(PY) -m pytest

## corral._native against python/corral/_native.pyi (mypy.stubtest), and mypy --strict on the package.
test-stubs:
	$(PY) -m mypy.stubtest corral._native
	$(PY) -m mypy --strict python/corral

## The x86_64 wheel for CPython 3.10-3.13 (one abi3 wheel: docs/install.md says why), compatible
## with manylinux_2_28 or older: maturin cross-links with zig against the old glibc (no Docker
## needed). maturin, ziglang and auditwheel come from PyPI into $(WHEEL_TOOLS) on first use.
WHEEL_DIR ?= dist
WHEEL_COMPAT ?= manylinux_2_28
WHEEL_TOOLS ?= build/wheel-tools
WHEEL_BIN = $(abspath $(WHEEL_TOOLS))/bin

$(WHEEL_TOOLS)/.installed:
	$(PY) -m venv $(WHEEL_TOOLS)
	$(WHEEL_TOOLS)/bin/pip install $(PIP_FLAGS) "maturin>=1.5,<2" ziglang auditwheel
	touch $@

wheels: $(WHEEL_TOOLS)/.installed
	rm -f $(WHEEL_DIR)/corral-*.whl
	# PATH first: maturin finds zig through `python3 -m ziglang`.
	PATH=$(WHEEL_BIN):$$PATH maturin build --release --strip --zig --compatibility $(WHEEL_COMPAT) -o $(WHEEL_DIR) -i python3.10
	# Each wheel must be manylinux_2_28 or older (auditwheel reads the symbols it links).
	@for w in $(WHEEL_DIR)/corral-*.whl; do \
		out=$$($(WHEEL_BIN)/auditwheel show $$w) || exit 1; \
		tag=$$(echo "$$out" | grep -o 'manylinux_2_[0-9]*_x86_64' | head -1); \
		glibc=$$(echo $$tag | sed 's/manylinux_2_\([0-9]*\)_x86_64/\1/'); \
		if [ -z "$$tag" ] || [ $$glibc -gt 28 ]; then echo "$$out"; echo "$$w: not manylinux_2_28 or older"; exit 1; fi; \
		echo "$$(basename $$w): consistent with $$tag"; \
	done

## Installs the wheel into a fresh venv of each Python 3.10-3.13 (no Rust on PATH, no torch) and
## smoke-tests it; runs the numpy-only suite from it on Python 3.10 and 3.13 (tests/test_wheels.py).
test-wheels: wheels
	$(PY) -m pytest -m wheel tests/test_wheels.py -rs

## corral inside vLLM 0.33.0 and SGLang 0.5.23 installed from PyPI, one venv per engine under
## ~/.cache/corral/engines (about 10 GB and 10 minutes each the first time; reused after).
test-engines: setup
	PY=$(PY) tests/engines/run.sh

## The main job on the built-in default.
demo: setup
	$(PY) -m corral demo

## Side-by-side comparison with xgrammar, llguidance and outlines-core (see benches/README.md).
bench: setup
	$(PY) benches/compare.py

clean:
	cargo clean
	rm -rf python/corral/*.so build dist .pytest_cache
