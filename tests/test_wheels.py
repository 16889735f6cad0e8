"""The built wheels (`make wheels`, in dist/) install and work without Rust and without torch.

Each wheel goes into a fresh venv made by the interpreter it is for, with a PATH holding no
Rust toolchain (no cargo, rustc or maturin: the wheel must not be built from source) and with
numpy as its only dependency. A smoke script then compiles a JSON Schema, fills a mask into a
numpy array and applies it to numpy logits.

Run with ``make test-wheels`` (or ``pytest -m wheel``); skipped when dist/ holds no wheel or the
interpreter a wheel is for is not on this machine. Set ``CORRAL_WHEEL_DIR`` to test another
folder of wheels.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WHEEL_DIR = Path(os.environ.get("CORRAL_WHEEL_DIR", ROOT / "dist"))

pytestmark = pytest.mark.wheel

SMOKE = textwrap.dedent(
    """
    import importlib.util, shutil, sys
    import numpy as np
    import corral
    assert importlib.util.find_spec("torch") is None, "torch must not be installed here"
    assert "torch" not in sys.modules, "import corral must not import torch"
    for tool in ("cargo", "rustc", "maturin"):
        assert shutil.which(tool) is None, tool + " is on PATH"
    vocab = corral.Vocabulary.from_bytes([b"{", b"}", b'"', b"a", b":", b" ", b"1", b"<eos>"], eos_token_ids=[7])
    g = corral.Grammar.from_json_schema({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    m = corral.Matcher(corral.compile(g, vocab))
    mask = np.zeros((1, corral.bitmask_words(vocab.size)), dtype=np.int32)
    m.fill_next_token_bitmask(mask)
    allowed = corral.allowed_token_ids(mask[0], vocab.size)
    assert list(allowed) == [0, 5], allowed  # "{" or leading whitespace
    logits = np.zeros((1, vocab.size), dtype=np.float32)
    corral.apply_token_bitmask_inplace(logits, mask)
    assert np.isfinite(logits[0]).nonzero()[0].tolist() == [0, 5], logits
    assert m.accept_string('{"a": 1}') and m.is_accepting()
    print("ok", corral.__file__, sys.version.split()[0])
    """
)


def wheels() -> list[Path]:
    return sorted(WHEEL_DIR.glob("corral-*.whl"))


def interpreter_for(wheel: Path, version: str | None = None) -> str | None:
    """The python3.X executable for `version`, else the one the wheel's tag (cp3X, or abi3 from
    cp3X up) asks for."""
    m = re.search(r"-cp3(\d+)-(cp3\d+|abi3)-", wheel.name)
    if not m:
        return None
    minor = version.split(".")[1] if version else m.group(1)
    found = shutil.which(f"python3.{minor}")
    for cand in [*sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/3.{minor}.*/bin/python3.{minor}"))), found]:
        if cand and os.path.exists(cand):
            return cand
    return None


def clean_path(venv_bin: Path) -> str:
    """PATH with the venv first and every folder holding a Rust toolchain or maturin left out."""
    keep = [str(venv_bin)]
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not d or any(os.path.exists(os.path.join(d, t)) for t in ("cargo", "rustc", "maturin")):
            continue
        if ".pyenv/shims" in d:  # shims would find maturin/python elsewhere
            continue
        keep.append(d)
    return os.pathsep.join(keep)


def make_venv(wheel: Path, tmp: Path, extra: list[str], version: str | None = None) -> tuple[Path, dict[str, str]]:
    py = interpreter_for(wheel, version)
    if py is None:
        pytest.skip(f"no Python {version or ''} for {wheel.name} on this machine")
    venv = tmp / "venv"
    subprocess.run([py, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CARGO", "RUSTUP", "PYTHON", "VIRTUAL_ENV", "PYENV"))}
    env["PATH"] = clean_path(venv / "bin")
    # --only-binary: nothing may be built from source (there is no Rust here to build it).
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--only-binary", ":all:", str(wheel), *extra],
        check=True,
        env=env,
    )
    return venv, env


#: Every supported Python: each installs its wheel (the one abi3 wheel serves them all).
PYTHONS = ("3.10", "3.11", "3.12", "3.13")


@pytest.mark.parametrize("version", PYTHONS)
def test_wheel_installs_and_works_without_rust_or_torch(version: str, tmp_path: Path) -> None:
    wheel = wheel_for(version)
    if wheel is None:
        pytest.skip(f"no wheel for Python {version} in {WHEEL_DIR}; run make wheels")
    venv, env = make_venv(wheel, tmp_path, [], version)
    out = subprocess.run([str(venv / "bin" / "python"), "-c", SMOKE], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("ok "), out.stdout
    assert str(venv) in out.stdout, "corral was imported from the wheel"
    assert out.stdout.split()[-1].startswith(version + "."), out.stdout


#: The oldest and newest supported Pythons: the numpy-only part of the suite runs on each, from
#: its wheel (torch is absent there, so the `torch` tests skip).
SUITE_PYTHONS = ("3.10", "3.13")
# (regex: the built-in GPT-2 vocabulary's encoder where tiktoken is absent.)
SUITE_DEPS = ["pytest", "hypothesis", "jsonschema", "lark", "pydantic", "tokenizers", "regex"]


def wheel_for(version: str) -> Path | None:
    minor = version.split(".")[1]
    for w in wheels():
        m = re.search(r"-cp3(\d+)-(cp3\d+|abi3)-", w.name)
        if m and (m.group(1) == minor or (m.group(2) == "abi3" and int(m.group(1)) <= int(minor))):
            return w
    return None


@pytest.mark.parametrize("version", SUITE_PYTHONS)
def test_numpy_suite_from_wheel(version: str, tmp_path: Path) -> None:
    wheel = wheel_for(version)
    if wheel is None:
        pytest.skip(f"no wheel for Python {version} in {WHEEL_DIR}; run make wheels")
    venv, env = make_venv(wheel, tmp_path, SUITE_DEPS, version)
    env["CORRAL_WHEEL_SUITE"] = "1"
    # From the repository root, so pyproject.toml's pytest settings apply; python/ is not on
    # sys.path there, so `import corral` is the wheel's.
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not wheel and not torch", "tests"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    tail = (out.stdout + out.stderr)[-6000:]
    assert out.returncode == 0, tail
    print(tail.splitlines()[-1])
