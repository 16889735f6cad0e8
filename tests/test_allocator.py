"""The extension's allocator keeps freed memory mapped (see `keep_freed_memory` in
rust/corral-py/src/lib.rs): returning it to the OS cost about a millisecond inside fills."""

import os
import subprocess
import sys

import corral._native as native


def test_freed_memory_stays_mapped_by_default():
    if "MIMALLOC_PURGE_DELAY" in os.environ:
        assert native._allocator_purge_delay() == int(os.environ["MIMALLOC_PURGE_DELAY"])
    else:
        assert native._allocator_purge_delay() == -1


def test_environment_overrides_the_purge_delay():
    env = dict(os.environ, MIMALLOC_PURGE_DELAY="250")
    out = subprocess.run([sys.executable, "-c", "import corral._native as n; print(n._allocator_purge_delay())"],
                         env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "250"
