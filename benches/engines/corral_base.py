"""corral from another build of its extension: the ``.so`` file named by ``CORRAL_BASE_SO``
(e.g. a copy of ``python/corral/_native.abi3.so`` made before a change), loaded as
``corral._native`` before ``corral`` is imported, so that the Python layer of this checkout runs
on that build. Otherwise the same adapter as ``engines/corral.py``; for before/after runs of
a change in one benchmark run (``grammar_bench.py --corral-base FILE``). The Python layer and
the bindings must be the same in both builds.
"""

from __future__ import annotations

import importlib.util
import os
import sys

_so = os.environ.get("CORRAL_BASE_SO")
if not _so:
    raise SystemExit("engines.corral_base needs CORRAL_BASE_SO=<path of a _native .so>")
if "corral" in sys.modules:
    raise SystemExit("engines.corral_base must be imported before corral")
_spec = importlib.util.spec_from_file_location("corral._native", _so)
_mod = importlib.util.module_from_spec(_spec)
sys.modules["corral._native"] = _mod
_spec.loader.exec_module(_mod)

from .corral import Engine as _Corral  # noqa: E402


class Engine(_Corral):
    name = "corral_base"

    def __init__(self, tok, options):
        super().__init__(tok, options)
        self.version = f"{self.version} ({os.path.basename(_so)})"
