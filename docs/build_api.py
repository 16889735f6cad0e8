"""Builds the API reference (HTML) from corral's docstrings with pdoc: `make docs`.

    python docs/build_api.py OUTPUT_DIR

Names that `corral` re-exports from its Rust extension (`Grammar`, `Matcher`, ...) take their
docstrings and signatures from `python/corral/_native.pyi`, as the extension's own page would:
pdoc applies a stub file only to the module it sits next to. Run with `-W error::UserWarning`
so that any pdoc warning fails the build.
"""

from __future__ import annotations

import __future__
import sys
import types
from pathlib import Path
from unittest import mock

import pdoc
import pdoc.doc
import pdoc.doc_pyi as doc_pyi

MODULES = ["corral", "corral.hf", "corral.vllm", "corral.sglang"]
EXTENSION = "corral._native"

_include = doc_pyi.include_typeinfo_from_stub_files


def _load_stub() -> tuple[types.ModuleType, pdoc.doc.Module]:
    """The extension's stub as a module; its annotations name classes defined later in it, so
    they are evaluated lazily (pdoc's own stub import would fail on them)."""
    stub_file = doc_pyi.find_stub_file(EXTENSION)
    if stub_file is None:
        raise SystemExit(f"no stub file for {EXTENSION}")
    stub_module = types.ModuleType(EXTENSION)
    stub_module.__file__ = str(stub_file)
    flags = __future__.annotations.compiler_flag
    exec(compile(stub_file.read_text(), str(stub_file), "exec", flags=flags), stub_module.__dict__)
    return stub_module, pdoc.doc.Module(stub_module)


def _include_with_extension_stub(module: pdoc.doc.Module) -> None:
    if str(getattr(module.obj, "__file__", "")).endswith(".pyi"):
        return  # the stub itself
    if module.modulename not in ("corral", EXTENSION):
        _include(module)
        return
    if module.modulename == "corral":
        _include(module)
    stub_module, stub = _load_stub()
    members = [
        m for m in module.members.values()
        if isinstance(m, (pdoc.doc.Class, pdoc.doc.Function))
        and getattr(m.obj, "__module__", None) == EXTENSION
        and stub.get(m.name) is not None
    ]
    for member in members:
        if isinstance(member, pdoc.doc.Class):
            doc_pyi._prepare_module(member)
    with mock.patch.dict("sys.modules", {EXTENSION: stub_module}):
        for member in members:
            doc_pyi._patch_doc(member, stub)


doc_pyi.include_typeinfo_from_stub_files = _include_with_extension_stub


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "build/docs")
    pdoc.pdoc(*MODULES, output_directory=out)
    print(f"API reference: {out}/index.html")


if __name__ == "__main__":
    main()
