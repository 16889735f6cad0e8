"""Markers shared by the suite: `torch` tests are skipped where torch is not installed (the
numpy-only runs on the oldest and newest Python, from the wheels: `make test-wheels`)."""

from __future__ import annotations

import importlib.util

import pytest

HAVE_TORCH = importlib.util.find_spec("torch") is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAVE_TORCH:
        return
    skip = pytest.mark.skip(reason="needs torch (not installed)")
    for item in items:
        if "torch" in item.keywords:
            item.add_marker(skip)
