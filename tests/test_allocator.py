"""The extension's allocator returns freed memory to the OS 100 ms after it is freed (see
`PURGE_DELAY_MS` in rust/corral-py/src/lib.rs): never doing so let the memory budget's
evictions grow the process; doing so at once cost about a millisecond inside fills."""

import os
import subprocess
import sys

import corral._native as native


def test_freed_memory_is_purged_after_100_ms_by_default():
    if "MIMALLOC_PURGE_DELAY" in os.environ:
        assert native._allocator_purge_delay() == int(os.environ["MIMALLOC_PURGE_DELAY"])
    else:
        assert native._allocator_purge_delay() == 100


def test_environment_overrides_the_purge_delay():
    env = dict(os.environ, MIMALLOC_PURGE_DELAY="250")
    out = subprocess.run([sys.executable, "-c", "import corral._native as n; print(n._allocator_purge_delay())"],
                         env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "250"
