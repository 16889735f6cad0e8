"""tools/check_layers.py (run by `make check-layers`, part of `make test`): it passes on this
repository and fails on a tree with an import cycle or an import against the layer order, so it
is a check that can fail."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "tools" / "check_layers.py"


def run(repo: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--repo", str(repo)], capture_output=True, text=True)


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))


CORE = "rust/corral-core/src/"

# A small acyclic core crate laid out as the real one: runtime beneath automata beneath masks.
GOOD = {
    CORE + "lib.rs": """\
        mod automata;
        mod masks;
        mod runtime;
        pub use automata::dfa::Dfa;
    """,
    CORE + "runtime/mod.rs": "pub(crate) mod error;\n",
    CORE + "runtime/error.rs": "pub struct Error;\n",
    CORE + "automata/mod.rs": "pub(crate) mod dfa;\npub(crate) mod nfa;\n",
    CORE + "automata/nfa.rs": "use crate::runtime::error::Error;\npub struct Nfa;\n",
    CORE + "automata/dfa.rs": """\
        use crate::{automata::nfa::Nfa, runtime::error::Error};
        // crate::masks::matcher in a comment does not count
        const S: &str = "crate::masks::matcher in a string does not count";
        pub struct Dfa;
        #[cfg(test)]
        mod tests {
            use crate::masks::matcher::Matcher; // test code may reach up
        }
    """,
    CORE + "masks/mod.rs": "pub(crate) mod matcher;\n",
    CORE + "masks/matcher.rs": "use crate::automata::dfa::Dfa;\npub struct Matcher(crate::Dfa);\n",
    "rust/corral-schema/src/lib.rs": "mod compile;\nmod encode;\n",
    "rust/corral-schema/src/compile/mod.rs": "mod leaves;\nuse crate::encode::x;\n",
    "rust/corral-schema/src/compile/leaves.rs": "use super::super::encode::y;\n",
    "rust/corral-schema/src/encode.rs": "pub fn x() {}\n",
    "python/corral/__init__.py": "from .cli import main\n",
    "python/corral/cli.py": "import corral\nfrom ._shared import helper\n\ndef main():\n    from .demo import run\n",
    "python/corral/demo.py": "from ._shared import helper\n\ndef run():\n    import corral\n",
    "python/corral/_shared.py": "def helper():\n    pass\n",
}


def test_this_repository_passes():
    r = run(REPO)
    assert r.returncode == 0, r.stdout + r.stderr


def test_an_acyclic_tree_passes(tmp_path):
    write(tmp_path, GOOD)
    r = run(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_module_cycle_through_an_inline_path_fails(tmp_path):
    write(tmp_path, GOOD)
    # nfa -> dfa by an inline path; dfa -> nfa by its use line.
    write(tmp_path, {CORE + "automata/nfa.rs": "pub struct Nfa(Option<Box<crate::automata::dfa::Dfa>>);\n"})
    r = run(tmp_path)
    assert r.returncode == 1
    assert "corral-core cycle: automata::dfa <-> automata::nfa" in r.stdout


def test_an_upward_import_in_a_brace_group_fails(tmp_path):
    write(tmp_path, GOOD)
    write(tmp_path, {CORE + "runtime/error.rs": "use crate::{automata::{dfa::Dfa}};\npub struct Error;\n"})
    r = run(tmp_path)
    assert r.returncode == 1
    assert "layer runtime may not import layer automata: runtime::error -> automata::dfa" in r.stdout


def test_an_upward_import_through_a_root_reexport_fails(tmp_path):
    write(tmp_path, GOOD)
    write(tmp_path, {CORE + "runtime/error.rs": "pub struct Error(crate::Dfa);\n"})
    r = run(tmp_path)
    assert r.returncode == 1
    assert "runtime::error -> automata::dfa" in r.stdout


def test_test_code_outside_cfg_test_counts(tmp_path):
    write(tmp_path, GOOD)
    dfa = GOOD[CORE + "automata/dfa.rs"].replace("#[cfg(test)]\n", "")
    write(tmp_path, {CORE + "automata/dfa.rs": dfa})
    r = run(tmp_path)
    assert r.returncode == 1
    assert "automata::dfa -> masks::matcher" in r.stdout


def test_a_module_outside_the_declared_layers_fails(tmp_path):
    write(tmp_path, GOOD)
    write(tmp_path, {CORE + "extras/mod.rs": "pub(crate) mod thing;\n", CORE + "extras/thing.rs": "pub struct Thing;\n"})
    r = run(tmp_path)
    assert r.returncode == 1
    assert "extras::thing" in r.stdout and "no declared layer" in r.stdout


def test_a_schema_cycle_through_super_paths_fails(tmp_path):
    write(tmp_path, GOOD)
    write(tmp_path, {"rust/corral-schema/src/encode.rs": "pub fn x() { crate::compile::leaves::z() }\n"})
    r = run(tmp_path)
    assert r.returncode == 1
    assert "corral-schema cycle: compile <-> encode" in r.stdout


def test_a_python_cycle_through_a_function_level_import_fails(tmp_path):
    write(tmp_path, GOOD)
    write(tmp_path, {"python/corral/demo.py": "def run():\n    from .cli import _helper\n"})
    r = run(tmp_path)
    assert r.returncode == 1
    assert "python cycle: cli <-> demo" in r.stdout
