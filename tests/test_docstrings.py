"""Every public name has a docstring with an example, and the examples run.

* ``corral.__all__``: each name's docstring (the one the API reference shows: the stub's in
  ``python/corral/_native.pyi`` for names of the Rust extension, else the object's own) must
  exist and hold an example (``>>>`` or a code block).
* Every doctest in the public modules' docstrings, and in the stub's docstrings, runs. A doctest
  that needs a GPU or a serving engine is skipped where that is missing.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import inspect
from pathlib import Path

import pytest

import corral

STUB = Path(corral.__file__).with_name("_native.pyi")

# Public modules whose docstrings are collected (cli and demo are programs, not API).
MODULES = [
    "corral",
    "corral.bitmask",
    "corral.compiler",
    "corral.errors",
    "corral.fill_guard",
    "corral.forced",
    "corral.generate",
    "corral.grammars",
    "corral.hf",
    "corral.logits",
    "corral.sampling",
    "corral.speculative",
    "corral.vocab",
    "corral.vllm",
    "corral.sglang",
]

# A doctest that fails mentioning one of these, where it is missing, is skipped.
NEEDS = {
    "cuda": lambda: _has_cuda(),
    "vllm": lambda: _importable("vllm"),
    "sglang": lambda: _importable("sglang"),
}


#: Optional packages a docstring example may use (torch for tensors, tokenizer libraries).
OPTIONAL = ("torch", "tiktoken", "sentencepiece", "tokenizers", "transformers")


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        return False


def _importable(name: str) -> bool:
    try:
        importlib.import_module(name)
        return True
    except Exception:  # noqa: BLE001
        return False


def _stub_docs() -> dict[str, str]:
    """Qualified name -> docstring, for every documented definition of the stub."""
    out: dict[str, str] = {}
    tree = ast.parse(STUB.read_text())

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef)):
                name = prefix + child.name
                doc = ast.get_docstring(child, clean=True)
                if doc:
                    out[name] = doc
                walk(child, name + ".")

    walk(tree, "")
    return out


STUB_DOCS = _stub_docs()


def _public_doc(name: str) -> str | None:
    obj = getattr(corral, name)
    if getattr(obj, "__module__", None) == "corral._native" and name in STUB_DOCS:
        return STUB_DOCS[name]
    return inspect.getdoc(obj)


def _has_example(doc: str) -> bool:
    return ">>>" in doc or "```" in doc or "::\n" in doc


@pytest.mark.parametrize("name", corral.__all__)
def test_public_name_has_docstring_with_example(name: str) -> None:
    doc = _public_doc(name)
    assert doc and doc.strip(), f"corral.{name} has no docstring"
    assert _has_example(doc), f"corral.{name}'s docstring has no example (>>> or a code block)"


def _module_tests() -> list[tuple[str, doctest.DocTest | None, str]]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    items: list[tuple[str, doctest.DocTest | None, str]] = []
    for modname in MODULES:
        try:
            mod = importlib.import_module(modname)
        except Exception as e:  # noqa: BLE001 - an engine module without its engine
            items.append((modname, None, f"cannot import {modname}: {e}"))
            continue
        for test in finder.find(mod, modname):
            if test.examples:
                items.append((test.name, test, ""))
    parser = doctest.DocTestParser()
    for qual, doc in STUB_DOCS.items():
        test = parser.get_doctest(doc, {}, f"corral._native.{qual}", str(STUB), 0)
        if test.examples:
            items.append((test.name, test, ""))
    return items


ITEMS = _module_tests()


def test_doctests_were_collected() -> None:
    names = {name for name, test, _ in ITEMS if test is not None}
    assert len(names) >= 40, sorted(names)


@pytest.mark.parametrize("name,test,skip", ITEMS, ids=[i[0] for i in ITEMS])
def test_doctest(name: str, test: doctest.DocTest | None, skip: str) -> None:
    if test is None:
        pytest.skip(skip)
    # Stub docstrings run in the extension's namespace, module docstrings in their module's.
    base = vars(corral._native) if name.startswith("corral._native.") else {}
    test.globs = {**base, **test.globs}
    test.globs.setdefault("corral", corral)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out: list[str] = []
    runner.run(test, out=out.append)
    report = "".join(out)
    if runner.failures:
        # Skipped only when what failed is a missing GPU or engine.
        for key, available in NEEDS.items():
            if key in report.lower() and not available():
                pytest.skip(f"needs {key}")
        # ... or an optional package missing where it is (the numpy-only wheel test venvs).
        for pkg in OPTIONAL:
            if f"No module named '{pkg}'" in report and not _importable(pkg):
                pytest.skip(f"needs {pkg}")
    assert runner.failures == 0, report


def test_readme_quickstart_runs() -> None:
    """The README's quickstart block runs as written and prints one of the schema's values."""
    import contextlib
    import io
    import re

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme.split("## Quickstart", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(code, "README.md#quickstart", "exec"), {})
    assert buf.getvalue().strip() in ("{'answer': 'yes'}", "{'answer': 'no'}"), buf.getvalue()
