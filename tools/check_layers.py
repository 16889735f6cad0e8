#!/usr/bin/env python3
"""Checks that the module graphs of corral-core, corral-schema and the Python package are acyclic
and that corral-core's layers import one way only.

Rust: every `crate::…` path counts, in `use` lines (brace groups included) and inline, as does
`super::x` from a module in a layer folder; comments, string literals and `#[cfg(test)]` items
are left out. A module is a file (`layer/module.rs`); in corral-schema, a top-level module with
its folder (`compile/…` is `compile`). corral-core's layers and the ones each may import are
declared in LAYERS below.

Python: every `import corral.x` / `from corral[.x] import …` / `from .x import …` between the
modules of python/corral, inside functions too (imports of the package's `__init__`, its
public facade, are not counted).

Usage: python3 tools/check_layers.py [--repo DIR]   (exit status 1 and a list of problems if any)
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

# corral-core: each layer (a folder of src/) and the layers it may import. Runtime is beneath
# all; data flows front ends -> automata -> parser | vocabulary -> masks -> applying, and each
# layer imports only those before it.
LAYERS: dict[str, set[str]] = {
    "runtime": set(),
    "frontend": {"runtime"},
    "automata": {"runtime", "frontend"},
    "parser": {"runtime", "frontend", "automata"},
    "vocab": {"runtime", "frontend", "automata"},
    "masks": {"runtime", "frontend", "automata", "parser", "vocab"},
    "apply": {"runtime", "frontend", "automata", "parser", "vocab", "masks"},
}

# Modules at the top of corral-core's src that sit outside the layers: lib.rs re-exports from
# every layer; testutil (test support, behind cfg(test) / the `testing` feature) may read any.
CORE_UNLAYERED = {"testutil"}


# ---------------------------------------------------------------------------------------------
# Rust source: comments and literals blanked, cfg(test) items removed, crate paths collected.

def blank_comments_and_strings(src: str) -> str:
    """The source with comments and the contents of string and char literals replaced by
    spaces (newlines kept, so offsets and line numbers still hold)."""
    out = list(src)
    i, n = 0, len(src)

    def blank(a: int, b: int) -> None:
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif c == "r" and re.match(r'r#*"', src[i:i + 258]) and not (i and (src[i - 1].isalnum() or src[i - 1] == "_")) or (
            c == "b" and src.startswith("br", i) and re.match(r'br#*"', src[i:i + 258]) and not (i and (src[i - 1].isalnum() or src[i - 1] == "_"))
        ):
            m = re.match(r'b?r(#*)"', src[i:])
            hashes = m.group(1)
            start = i + m.end()
            end = src.find('"' + hashes, start)
            end = n if end < 0 else end + 1 + len(hashes)
            blank(start, end - 1 - len(hashes))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            blank(i + 1, j)
            i = j + 1
        elif c == "'":
            # A char literal ('x', '\n', '\u{..}', '"') or a lifetime ('a).
            m = re.match(r"'(\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'])'", src[i:i + 12], re.S)
            if m:
                blank(i + 1, i + m.end() - 1)
                i += m.end()
            else:
                i += 1
        else:
            i += 1
    return "".join(out)


CFG_TEST = re.compile(r"#\[cfg\(\s*(?:test|all\(\s*test\b[^\]]*\))\s*\)\]")


def strip_cfg_test(code: str) -> str:
    """Removes each item under `#[cfg(test)]` (or `#[cfg(all(test, …))]`): up to its `;` or
    the brace that closes its body."""
    out = list(code)
    for m in reversed(list(CFG_TEST.finditer(code))):
        j = m.end()
        depth = 0
        while j < len(code):
            ch = code[j]
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            elif ch == ";" and depth == 0:
                j += 1
                break
            elif ch == "{" and depth == 0:
                d = 1
                j += 1
                while j < len(code) and d:
                    d += {"{": 1, "}": -1}.get(code[j], 0)
                    j += 1
                break
            j += 1
        for k in range(m.start(), min(j, len(code))):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)


TOKEN = re.compile(r"\s*(::|\{|\}|,|\*|[A-Za-z_][A-Za-z0-9_]*(?:\s+as\s+[A-Za-z_][A-Za-z0-9_]*)?)")


def parse_tree(code: str, pos: int) -> list[list[str]]:
    """The paths of a use tree starting at `pos` (just after `crate::` or `super::`): each a list
    of segments, `{a::b, c}` groups expanded."""

    def tok(p: int):
        m = TOKEN.match(code, p)
        return (m.group(1), m.end()) if m else (None, p)

    def tree(p: int) -> tuple[list[list[str]], int]:
        t, q = tok(p)
        if t == "{":
            paths: list[list[str]] = []
            while True:
                t2, q2 = tok(q)
                if t2 == "}":
                    return paths, q2
                if t2 == ",":
                    q = q2
                    continue
                sub, q = tree(q)
                paths.extend(sub)
        if t is None or t in ("}", ",", "::"):
            return [], p
        seg = t.split()[0]
        t2, q2 = tok(q)
        if t2 == "::":
            sub, q3 = tree(q2)
            return ([[seg] + s for s in sub] or [[seg]]), q3
        return [[seg]], q

    paths, _ = tree(pos)
    return paths


def rust_edges(code: str) -> list[tuple[list[str], int]]:
    """Every `crate::…` path in `code` with its line number; `super::…` paths too, marked by a
    leading "super" segment."""
    found = []
    for m in re.finditer(r"(?<![A-Za-z0-9_:])(crate|super)::", code):
        line = code.count("\n", 0, m.start()) + 1
        for p in parse_tree(code, m.end()):
            found.append(([m.group(1)] + p, line))
    return found


def rust_module_graph(src: Path, depth: int, root_names: dict[str, str]) -> tuple[dict[str, dict[str, int]], dict[str, Path]]:
    """Module -> {imported module: first line} for the crate under `src`. A module is named by
    the first `depth` folders/file stems of its path ("automata::dfa"; with depth 1, "compile")."""
    files: dict[str, list[Path]] = {}
    for f in sorted(src.rglob("*.rs")):
        rel = f.relative_to(src).with_suffix("").parts
        if rel == ("lib",):
            continue
        if rel[-1] == "mod":
            rel = rel[:-1]
        files.setdefault("::".join(rel[:depth]), []).append(f)
    modules = set(files)
    graph: dict[str, dict[str, int]] = {m: {} for m in modules}
    where: dict[str, Path] = {m: fs[0] for m, fs in files.items()}

    def resolve(segs: list[str]) -> str | None:
        for k in range(min(depth, len(segs)), 0, -1):
            name = "::".join(segs[:k])
            if name in modules:
                return name
        return root_names.get(segs[0])

    for mod, fs in files.items():
        for f in fs:
            code = strip_cfg_test(blank_comments_and_strings(f.read_text(encoding="utf-8")))
            rel = f.relative_to(src).with_suffix("").parts
            parent = list(rel[:-1]) if rel[-1] != "mod" else list(rel[:-2])
            for path, line in rust_edges(code):
                if path[0] == "super":
                    segs = path[1:]
                    base = list(parent)
                    while segs and segs[0] == "super":
                        segs, base = segs[1:], base[:-1]
                    segs = base + segs
                else:
                    segs = path[1:]
                target = resolve(segs)
                if target and target != mod:
                    graph[mod].setdefault(target, line)
    return graph, where


def root_reexports(lib: Path, depth: int) -> dict[str, str]:
    """Names that lib.rs re-exports (`pub use a::b::{X, Y}`), mapped to their module."""
    names: dict[str, str] = {}
    code = strip_cfg_test(blank_comments_and_strings(lib.read_text(encoding="utf-8")))
    for m in re.finditer(r"\bpub\s+use\s+", code):
        for p in parse_tree(code, m.end()):
            if p and p[0] == "crate":
                p = p[1:]
            if len(p) > depth:
                names[p[-1].split()[-1]] = "::".join(p[:depth])
    return names


# ---------------------------------------------------------------------------------------------
# Python package.

def python_module_graph(pkg: Path) -> tuple[dict[str, dict[str, int]], dict[str, Path]]:
    """Module -> {imported module: first line} for the modules of package `pkg`. Every import
    counts, those inside functions included (a deferred import is still a dependency: cli and
    demo importing each other's helpers is a cycle). Imports of the package itself (`import
    corral`, `from corral import X` for a name that is not a module) reach its `__init__`,
    the public facade, and are not counted."""
    name = pkg.name
    mods = {f.stem: f for f in pkg.glob("*.py") if f.stem != "__init__"}
    graph: dict[str, dict[str, int]] = {m: {} for m in mods}
    for mod, f in mods.items():
        tree = ast.parse(f.read_text(encoding="utf-8"), str(f))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name.split(".")[1] for a in node.names if a.name.startswith(name + ".")]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level == 1:
                    targets = [base.split(".")[0]] if base else [a.name for a in node.names]
                elif node.level == 0 and (base == name or base.startswith(name + ".")):
                    rest = base[len(name) + 1:]
                    targets = [rest.split(".")[0]] if rest else [a.name for a in node.names]
            for t in targets:
                if t in mods and t != mod:
                    graph[mod].setdefault(t, node.lineno)
    return graph, mods


# ---------------------------------------------------------------------------------------------
# Checks.

def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def describe_cycle(comp: list[str], graph, where) -> str:
    inside = set(comp)
    edges = [f"    {a} -> {b} ({where[a]}:{graph[a][b]})" for a in comp for b in sorted(graph[a]) if b in inside]
    return "cycle: " + " <-> ".join(comp) + "\n" + "\n".join(edges)


def check_core(src: Path) -> list[str]:
    problems = []
    graph, where = rust_module_graph(src, 2, root_reexports(src / "lib.rs", 2))
    for comp in cycles(graph):
        problems.append("corral-core " + describe_cycle(comp, graph, where))
    for mod in sorted(graph):
        layer = mod.split("::")[0]
        if mod in CORE_UNLAYERED:
            continue
        if layer not in LAYERS:
            problems.append(f"corral-core: module {mod} ({where[mod]}) is in no declared layer")
            continue
        for dep, line in sorted(graph[mod].items()):
            dl = dep.split("::")[0]
            if dep in CORE_UNLAYERED:
                problems.append(f"corral-core: {mod} imports test support {dep} outside cfg(test) ({where[mod]}:{line})")
            elif dl != layer and dl not in LAYERS[layer]:
                problems.append(f"corral-core: layer {layer} may not import layer {dl}: {mod} -> {dep} ({where[mod]}:{line})")
    return problems


def check_schema(src: Path) -> list[str]:
    graph, where = rust_module_graph(src, 1, root_reexports(src / "lib.rs", 1))
    return ["corral-schema " + describe_cycle(c, graph, where) for c in cycles(graph)]


def check_python(pkg: Path) -> list[str]:
    graph, where = python_module_graph(pkg)
    return ["python " + describe_cycle(c, graph, where) for c in cycles(graph)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parent.parent)
    args = ap.parse_args(argv)
    repo = args.repo
    problems = []
    checked = []
    for name, fn, path in (
        ("corral-core", check_core, repo / "rust/corral-core/src"),
        ("corral-schema", check_schema, repo / "rust/corral-schema/src"),
        ("python/corral", check_python, repo / "python/corral"),
    ):
        if path.is_dir():
            checked.append(name)
            problems += fn(path)
    if not checked:
        print(f"check_layers: nothing to check under {repo}", file=sys.stderr)
        return 2
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check_layers: {', '.join(checked)}: no import cycles, layers one way")
    return 0


if __name__ == "__main__":
    sys.exit(main())
