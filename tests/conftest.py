"""Shared by the suite: tests that need an optional package skip where it is not installed.

The numpy-only runs from the wheels (`make test-wheels`: Python 3.10 and 3.13, no torch) rely on
this. Tests marked `torch` skip without torch; any test whose body imports an optional package
that is missing (``ModuleNotFoundError`` naming it) is reported as skipped, not failed."""

from __future__ import annotations

import importlib.util
from collections.abc import Generator

import pytest

HAVE_TORCH = importlib.util.find_spec("torch") is not None

#: Packages corral's tests use only when present (none is a dependency of corral itself).
OPTIONAL = {"torch", "triton", "transformers", "tokenizers", "sentencepiece", "tiktoken", "xgrammar", "vllm", "sglang"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAVE_TORCH:
        return
    skip = pytest.mark.skip(reason="needs torch (not installed)")
    for item in items:
        if "torch" in item.keywords:
            item.add_marker(skip)


def _skip_if_optional_missing(e: ModuleNotFoundError) -> None:
    root = (e.name or "").split(".")[0]
    if root in OPTIONAL and importlib.util.find_spec(root) is None:
        pytest.skip(f"needs {root} (not installed)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    try:
        return (yield)
    except ModuleNotFoundError as e:
        _skip_if_optional_missing(e)
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    try:
        return (yield)
    except ModuleNotFoundError as e:
        _skip_if_optional_missing(e)
        raise
