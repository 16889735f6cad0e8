"""The ``corral`` command line: check grammars, inspect token masks, measure mask fills.

Subcommands (``corral SUBCOMMAND --help`` for details)::

    corral check grammars/json.ebnf                 # does the grammar compile?
    corral mask --prefix '{"a": '                   # which tokens may come next?
    corral stats                                    # mask statistics on built-in JSON documents
    corral demo                                     # constrained generation end to end

Exit status: 0 success; 1 the input is wrong (grammar error, unreadable file, rejected prefix,
unusable tokenizer); 2 bad command line or a feature missing from this version.

Also runnable as ``python -m corral``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ._cli_shared import (  # shared with the demo (demo.py)
    LLAMA3_PATTERN,
    _NON_STRICT,
    CliError,
    LoadedVocab,
    _describe_vocab,
    _json_schema_grammar,
    _micro,
    load_vocabulary,
)
from .errors import CorralError

__all__ = ["main", "EXAMPLE_DOCUMENTS", "LLAMA3_PATTERN"]


_FORMATS = ("ebnf", "regex", "lark", "json-schema", "structural-tag")
_EXTENSIONS = {
    ".ebnf": "ebnf",
    ".gbnf": "ebnf",
    ".regex": "regex",
    ".re": "regex",
    ".lark": "lark",
    # a structural tag when the object is one (see corral.compiler.is_structural_tag)
    ".json": "json-schema",
}

# --------------------------------------------------------------------------------------------
# Built-in example documents for `corral stats` (valid JSON; each exercises different parts of
# the JSON grammar).

EXAMPLE_DOCUMENTS: dict[str, str] = {
    "api-response": """{
  "status": "ok",
  "data": {
    "user": {
      "id": 48213,
      "login": "ada.lovelace",
      "display_name": "Ada Lovelace",
      "email": "ada@example.com",
      "roles": ["admin", "editor"],
      "verified": true,
      "avatar_url": null,
      "created_at": "2023-11-04T09:15:22Z"
    },
    "permissions": {"read": true, "write": true, "delete": false}
  },
  "meta": {"request_id": "req_7f3a9c2e", "elapsed_ms": 12.75, "rate_limit": {"limit": 5000, "remaining": 4987}}
}""",
    "config": r"""{
	"name": "Café \"Zürich\" ☕",
	"version": "2.4.1-rc.3",
	"paths": {"home": "C:\\Users\\zoë\\AppData", "log": "/var/log/app/日本語.log", "url": "https:\/\/example.com\/a?b=c&d=e"},
	"greeting": "Grüße, мир! \u00e9\u4e2d\ud83d\ude80 \b\f\n\r\t",
	"limits": {"max_connections": 1024, "timeout_s": 30.0, "backoff": [0.5, 1, 2.5e0, 1E+1], "min_temp_c": -273.15, "avogadro": 6.02214076e23, "epsilon": 1e-9},
	"features": {"beta": false, "experimental": {"nested": {"deeper": {"deepest": [[1, [2, [3, []]]], {}]}}}},
	"empty": {"list": [], "object": {}, "string": ""},
	"zero": 0, "negative_zero": -0, "big": 18446744073709551615
}""",
    "records": """[
  {"id": 1, "sku": "KB-0042", "title": "Mechanical keyboard", "price": 89.99, "tags": ["peripheral", "usb-c"], "in_stock": true},
  {"id": 2, "sku": "MS-1107", "title": "Wireless mouse", "price": 24.5, "tags": [], "in_stock": false},
  {"id": 3, "sku": "MN-2719", "title": "27\\" 4K monitor", "price": 329, "tags": ["display"], "in_stock": true},
  {"id": 4, "sku": "CB-0001", "title": "USB cable (1 m)", "price": 4.99, "tags": ["cable", "usb-c", "bulk"], "in_stock": null}
]""",
    "chat-tool-call": """{"role":"assistant","content":null,"tool_calls":[{"id":"call_Qw3rTy","type":"function","function":{"name":"get_weather","arguments":"{\\"city\\": \\"Paris\\", \\"unit\\": \\"celsius\\"}"}}],"usage":{"prompt_tokens":182,"completion_tokens":27,"total_tokens":209}}""",
}


# --------------------------------------------------------------------------------------------
# Errors and output helpers


def _fmt_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _token_repr(data: bytes) -> str:
    return repr(data.decode("utf-8", errors="backslashreplace"))


# --------------------------------------------------------------------------------------------
# Grammars


@dataclass
class LoadedGrammar:
    grammar: Any  # corral.Grammar
    label: str  # file name, or "built-in json"
    format: str
    seconds: float  # time to parse and lower the grammar


def _guess_format(path: Path, fmt: str | None) -> str:
    if fmt:
        return fmt
    guessed = _EXTENSIONS.get(path.suffix.lower())
    if guessed is None:
        raise CliError(
            f"cannot tell the grammar format of {path} from its extension "
            f"(known: {', '.join(sorted(_EXTENSIONS))}); pass --format {'|'.join(_FORMATS)}",
            2,
        )
    return guessed


def load_grammar_file(path: str | os.PathLike[str] | None, fmt: str | None = None, root: str | None = None) -> LoadedGrammar:
    """Reads and compiles a grammar file (the built-in JSON grammar when ``path`` is None).

    Raises CliError with the message to print (file name first) and the exit status.
    """
    import corral

    if path is None:
        from .grammars import builtin_grammar_text

        if fmt not in (None, "ebnf") or root not in (None, "root"):
            raise CliError("--format/--root need --grammar FILE", 2)
        text = builtin_grammar_text("json")
        t0 = time.perf_counter()
        g = corral.Grammar.from_ebnf(text, "root")
        return LoadedGrammar(g, "the built-in JSON grammar", "ebnf", time.perf_counter() - t0)

    p = Path(path)
    try:
        data = p.read_bytes()
    except IsADirectoryError:
        raise CliError(f"{p}: is a directory, not a grammar file", about_file=True) from None
    except OSError as e:
        raise CliError(f"{p}: cannot read the grammar file: {e.strerror or e}", about_file=True) from None
    fmt = _guess_format(p, fmt)
    if root is not None and fmt != "ebnf":
        raise CliError(f"--root only applies to EBNF grammars, not {fmt}", 2)
    t0 = time.perf_counter()
    try:
        if fmt in ("json-schema", "structural-tag"):
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as e:
                raise CliError(f"{p}: the JSON is not UTF-8 (byte {e.start})", about_file=True) from None
            from .compiler import is_structural_tag

            try:
                obj = json.loads(text)
            except json.JSONDecodeError:
                obj = None  # worded by _json_schema_grammar
            if fmt == "structural-tag" or is_structural_tag(obj):
                if obj is None:
                    _json_schema_grammar(p, text)
                fmt = "structural-tag"
                g = corral.Grammar.from_structural_tag(obj)
            else:
                g = _json_schema_grammar(p, text)
        elif fmt == "lark":
            g = corral.Grammar.from_lark(data)
        else:
            g = corral.load_grammar(p, fmt, root=root or "root")
    except corral.CorralError as e:
        raise CliError(f"{p}: {e}", about_file=True) from None
    return LoadedGrammar(g, str(p), fmt, time.perf_counter() - t0)


# --------------------------------------------------------------------------------------------
# Vocabularies


def _compile(grammar: Any, vocab: Any, fresh: bool = False) -> tuple[Any, float]:
    """(compiled grammar, seconds). ``fresh`` bypasses corral.compile's cache."""
    import corral

    t0 = time.perf_counter()
    if fresh:
        compiled = corral.CompiledGrammar(grammar, vocab._native)
    else:
        compiled = corral.compile(grammar, vocab)
    return compiled, time.perf_counter() - t0


def _new_mask(vocab_size: int) -> np.ndarray:
    from .bitmask import bitmask_words

    # numpy, not allocate_token_bitmask(): importing torch would cost more than the whole run.
    return np.full((1, bitmask_words(vocab_size)), -1, dtype=np.int32)


def _allowed_count(mask_row: np.ndarray, vocab_size: int) -> int:
    bits = np.unpackbits(mask_row.view(np.uint8), bitorder="little")
    return int(np.count_nonzero(bits[:vocab_size]))


def _reject_offset(matcher: Any, data: bytes) -> int | None:
    """First byte offset of ``data`` that a copy of ``matcher`` rejects, fed byte by byte."""
    probe = matcher.copy()
    for i in range(len(data)):
        if not probe.accept_bytes(data[i : i + 1]):
            return i
    return None


def _caret(data: bytes, offset: int) -> str:
    shown = data.decode("utf-8", errors="backslashreplace")
    before = data[:offset].decode("utf-8", errors="backslashreplace")
    line_start = before.rfind("\n") + 1
    line_end = shown.find("\n", len(before))
    line = shown[line_start : line_end if line_end >= 0 else len(shown)]
    return f"  {line}\n  {' ' * (len(before) - line_start)}^"


# --------------------------------------------------------------------------------------------
# Subcommands


def cmd_check(args: argparse.Namespace) -> int:
    _NON_STRICT[0] = bool(getattr(args, "non_strict", False))
    lg = load_grammar_file(args.file, args.format, args.root)
    g = lg.grammar
    print(
        f"ok: {lg.label}: {g.num_rules} rules, {g.num_terminals} terminals, "
        f"{g.num_productions} productions, {g.num_dfa_states} DFA states ({lg.format})"
    )
    keywords = getattr(g, "schema_keywords", None)
    if keywords is not None:
        print(f"keywords used: {', '.join(keywords) if keywords else '(none)'}")
        for pointer, keyword, message in getattr(g, "schema_warnings", []):
            print(f"not enforced exactly: {pointer or '/'} ({keyword}): {message}")
    return 0


_PROBE_CHARS = [chr(c) for c in range(0x20, 0x7F)] + ["\n", "\t", "\r", "é", "中", "😀"]
#: The order example continuations try characters in: closing punctuation first (the shortest
#: way to a complete text), then letters and digits, other punctuation, whitespace last.
_EXTEND_ORDER = list("\"')]}>;") + [c for c in _PROBE_CHARS if c.isalnum()] + [
    c for c in _PROBE_CHARS if not c.isalnum() and not c.isspace() and c not in "\"')]}>;"
] + [c for c in _PROBE_CHARS if c.isspace()]


def _expected_here(matcher: Any, limit: int = 6) -> tuple[list[str], list[str]]:
    """What the grammar takes next from ``matcher``'s state: the characters it allows (probed
    over printable ASCII, whitespace and a few non-ASCII characters) and up to ``limit``
    example continuations (each extended greedily until the grammar may end)."""
    allowed = [c for c in _PROBE_CHARS if matcher.copy().accept_bytes(c.encode())]
    examples = []
    # One example per kind of first character: each punctuation mark, one letter, one digit.
    firsts = [c for c in allowed if not c.isspace() and not c.isalnum()]
    firsts += [next(c for c in allowed if test(c)) for test in (str.isalpha, str.isdigit) if any(test(c) for c in allowed)]
    firsts = firsts or allowed
    for first in firsts[:limit]:
        m = matcher.copy()
        m.accept_bytes(first.encode())
        text = first
        for _ in range(24):
            if m.is_accepting():
                break
            forced = m.forced_bytes()
            if forced:
                if not m.accept_bytes(forced):
                    break
                text += forced.decode("utf-8", errors="replace")
                continue
            nxt = next((c for c in _EXTEND_ORDER if m.copy().accept_bytes(c.encode())), None)
            if nxt is None:
                break
            m.accept_bytes(nxt.encode())
            text += nxt
        examples.append(text + ("" if m.is_accepting() else "…"))
    return allowed, examples


def _char_summary(chars: list[str]) -> str:
    """``['0', '1', ..., '9', '"']`` -> ``0-9 '"'``: runs of consecutive characters as ranges."""
    out, i = [], 0
    while i < len(chars):
        j = i
        while j + 1 < len(chars) and ord(chars[j + 1]) == ord(chars[j]) + 1 and chars[j + 1].isalnum() == chars[i].isalnum():
            j += 1
        a, b = _show_char(chars[i]), _show_char(chars[j])
        out.append(a if i == j else f"{a}-{b}" if j > i + 1 else f"{a} {b}")
        i = j + 1
    return " ".join(out)


def _show_char(c: str) -> str:
    return "space" if c == " " else repr(c)[1:-1]


def _line_col(data: bytes, offset: int) -> tuple[int, int]:
    before = data[:offset].decode("utf-8", errors="replace")
    line = before.count("\n") + 1
    return line, len(before) - (before.rfind("\n") + 1) + 1


def cmd_validate(args: argparse.Namespace) -> int:
    """Whether the grammar accepts each text; where and why not."""
    import corral

    try:
        lg = load_grammar_file(args.grammar, args.format, args.root)
    except CliError as e:
        e.code = 2
        raise
    compiled = corral.compile(lg.grammar, corral.builtin_vocabulary())
    texts: list[tuple[str, bytes]] = []
    for t in args.text or []:
        texts.append(("--text", t.encode("utf-8")))
    for f in args.files:
        try:
            data = sys.stdin.buffer.read() if f == "-" else Path(f).read_bytes()
        except OSError as e:
            raise CliError(f"{f}: cannot read: {e.strerror or e}", 2, about_file=True) from None
        if args.strip_final_newline and data.endswith(b"\n"):
            data = data[:-2] if data.endswith(b"\r\n") else data[:-1]
        texts.append(("<stdin>" if f == "-" else f, data))
    if not texts:
        raise CliError("give at least one FILE (or --text TEXT)", 2)
    failed = 0
    for name, data in texts:
        m = corral.Matcher(compiled)
        if m.accept_bytes(data) and m.is_accepting():
            print(f"{name}: ok")
            continue
        failed += 1
        off = _reject_offset(corral.Matcher(compiled), data)
        probe = corral.Matcher(compiled)
        if off is None:
            probe.accept_bytes(data)
            line, col = _line_col(data, len(data))
            allowed, examples = _expected_here(probe)
            print(f"{name}:{line}:{col}: rejected: the text ends before the grammar does")
        else:
            probe.accept_bytes(data[:off])
            line, col = _line_col(data, off)
            end = off + 1
            while end < len(data) and end - off < 4 and (data[end] & 0xC0) == 0x80:
                end += 1
            char = data[off:end].decode("utf-8", errors="backslashreplace")
            allowed, examples = _expected_here(probe)
            print(f"{name}:{line}:{col}: rejected: unexpected {char!r}")
            print(_caret(data, off))
            if off == len(data) - 1 and data.endswith(b"\n"):
                print("  (the file's final newline: --strip-final-newline drops it)")
        if probe.is_accepting():
            print("  the text could end here")
        if allowed:
            print(f"  expected one of: {_char_summary(allowed)}")
            print(f"  for example: {', '.join(repr(x) for x in examples)}")
        elif not probe.is_accepting():
            print("  expected: nothing (the grammar allows no further character)")
    return 1 if failed else 0


def cmd_mask(args: argparse.Namespace) -> int:
    import corral

    lv = load_vocabulary(args.tokenizer, args.eos, args.vocab_size)
    lg = load_grammar_file(args.grammar, args.format, args.root)
    vocab = lv.vocab
    compiled, _ = _compile(lg.grammar, vocab)
    matcher = corral.Matcher(compiled)
    prefix = args.prefix.encode("utf-8")
    if prefix and not matcher.accept_bytes(prefix):
        off = _reject_offset(matcher, prefix)
        if off is None:
            raise CliError(
                f"the prefix {args.prefix!r} is rejected as a whole although each of its bytes is accepted "
                "one at a time (this is a corral bug: please report it)"
            )
        raise CliError(
            f"the prefix is rejected by {lg.label}: it fails at byte offset {off} "
            f"(byte {prefix[off:off + 1]!r}; the first {off} bytes are accepted):\n{_caret(prefix, off)}"
        )
    mask = _new_mask(vocab.size)
    t0 = time.perf_counter_ns()
    matcher.fill_next_token_bitmask(mask)
    first_ns = time.perf_counter_ns() - t0
    t0 = time.perf_counter_ns()
    matcher.fill_next_token_bitmask(mask)
    again_ns = time.perf_counter_ns() - t0
    allowed = corral.allowed_token_ids(mask[0], vocab.size)
    eos_allowed = [i for i in vocab.eos_token_ids if i in set(allowed)]
    us = _micro()

    print(f"grammar:      {lg.label} ({lg.format})")
    print(f"vocabulary:   {_describe_vocab(lv)}")
    print(f"prefix:       {_token_repr(prefix)} ({len(prefix)} bytes)")
    print(f"allowed:      {len(allowed)} of {vocab.size} tokens")
    print(f"eos allowed:  {'yes ' + str(eos_allowed) if eos_allowed else 'no'}")
    print(f"complete:     {'yes' if matcher.is_accepting() else 'no'} (the prefix is{'' if matcher.is_accepting() else ' not'} a complete sentence)")
    print(f"forced bytes: {_token_repr(matcher.forced_bytes())}")
    print(f"fill time:    {first_ns / 1000:.1f} {us} (first fill), {again_ns / 1000:.1f} {us} (repeated)")
    limit = len(allowed) if args.limit < 0 else args.limit
    if limit:
        shown = allowed[:limit]
        more = f" of {len(allowed)}" if len(shown) < len(allowed) else ""
        print(f"first {len(shown)}{more} allowed tokens (id, bytes):")
        eos = set(vocab.eos_token_ids)
        for i in shown:
            print(f"{i}\t{_token_repr(vocab.token_bytes(i))}{'  <EOS>' if i in eos else ''}")
    return 0


@dataclass
class _Walk:
    name: str
    num_bytes: int
    steps: int = 0  # mask fills (one per token, EOS included)
    tokens: int = 0  # grammar tokens accepted (EOS excluded)


def _token_table(vocab: Any) -> tuple[dict[bytes, list[int]], int]:
    """bytes -> ids (ordinary tokens only), and the longest token length."""
    table: dict[bytes, list[int]] = {}
    longest = 0
    for i in range(vocab.num_tokens):
        b = vocab.token_bytes(i)
        if b:
            table.setdefault(b, []).append(i)
            if len(b) > longest:
                longest = len(b)
    return table, longest


def cmd_stats(args: argparse.Namespace) -> int:
    import corral

    us = _micro()
    lv = load_vocabulary(args.tokenizer, args.eos, None, fresh=True)
    lg = load_grammar_file(args.grammar, args.format, args.root)
    vocab = lv.vocab
    compiled, compile_s = _compile(lg.grammar, vocab, fresh=True)
    mem_compiled = compiled.memory_bytes

    if args.document:
        docs = {}
        for d in args.document:
            try:
                docs[d] = Path(d).read_bytes()
            except OSError as e:
                raise CliError(f"{d}: cannot read the document: {e.strerror or e}") from None
    else:
        docs = {name: text.encode("utf-8") for name, text in EXAMPLE_DOCUMENTS.items()}
    hint = "" if args.document else " (the built-in documents are JSON: pass --document FILE for other grammars)"

    table, longest = _token_table(vocab)
    size = vocab.size
    eos_ids = vocab.eos_token_ids
    mask = _new_mask(size)
    words = mask[0].view(np.uint32)
    fill_ns: list[int] = []
    allowed_counts: list[int] = []
    walks: list[_Walk] = []
    first_fill_ns: int | None = None

    def allowed(i: int) -> bool:
        return bool((int(words[i >> 5]) >> (i & 31)) & 1)

    for name, doc in docs.items():
        walk = _Walk(name, len(doc))
        walks.append(walk)
        m = corral.Matcher(compiled)
        pos = 0
        while True:
            t0 = time.perf_counter_ns()
            m.fill_next_token_bitmask(mask)
            dt = time.perf_counter_ns() - t0
            if first_fill_ns is None:
                first_fill_ns = dt
            fill_ns.append(dt)
            allowed_counts.append(_allowed_count(mask[0], size))
            walk.steps += 1
            if pos == len(doc):
                eos = next((i for i in eos_ids if allowed(i)), None)
                if eos is None:
                    raise CliError(
                        f"document {name}: the grammar does not allow EOS after the whole document "
                        f"({len(doc)} bytes): it is not a complete sentence of {lg.label}{hint}"
                    )
                m.accept_token(eos)
                break
            pick = None
            for k in range(min(longest, len(doc) - pos), 0, -1):
                ids = table.get(doc[pos : pos + k])
                if ids:
                    pick = next((i for i in ids if allowed(i)), None)
                    if pick is not None:
                        break
            if pick is None:
                raise CliError(
                    f"document {name}: no allowed token continues it at byte offset {pos} "
                    f"(it is not in the language of {lg.label}){hint}:\n{_caret(doc, pos)}"
                )
            if not m.accept_token(pick):
                raise CliError(f"document {name}: token {pick} is in the mask but accept_token refused it (corral bug)")
            walk.tokens += 1
            pos += len(vocab.token_bytes(pick))

    mem_after = compiled.memory_bytes
    vocab_mem = getattr(vocab._native, "memory_bytes", None)
    fills_us = sorted(t / 1000 for t in fill_ns)
    p99 = fills_us[min(len(fills_us) - 1, max(0, int(round(0.99 * len(fills_us))) - 1))]
    steps = len(fill_ns)

    print(f"grammar:     {lg.label} ({lg.format}): {lg.grammar.num_rules} rules, {lg.grammar.num_terminals} terminals, "
          f"{lg.grammar.num_productions} productions, {lg.grammar.num_dfa_states} DFA states")
    print(f"vocabulary:  {_describe_vocab(lv)}")
    print("tokenization: deterministic greedy longest match driven by the matcher (at each step the longest "
          "allowed token whose bytes start the rest of the document; not the tokenizer's own BPE)")
    print("documents:")
    for w in walks:
        print(f"  {w.name:<16} {w.num_bytes:>5} bytes  {w.tokens:>4} tokens + EOS  ({w.num_bytes / max(w.tokens, 1):.2f} bytes/token)")
    print(f"steps:       {steps} mask fills ({sum(w.tokens for w in walks)} tokens + {len(walks)} EOS)")
    print(f"allowed tokens per step: min {min(allowed_counts)}, median {statistics.median(allowed_counts):g}, "
          f"max {max(allowed_counts)} (of {size})")
    print(f"fill time per step: median {statistics.median(fills_us):.1f} {us}, p99 {p99:.1f} {us}, "
          f"max {fills_us[-1]:.1f} {us}, mean {statistics.fmean(fills_us):.1f} {us} "
          f"(first fill {(first_fill_ns or 0) / 1000:.1f} {us})")
    print(f"grammar parse: {lg.seconds * 1000:.2f} ms")
    print(f"compile time: {compile_s * 1000:.2f} ms (grammar x vocabulary; per-state tables are built lazily on first fills)")
    print(f"vocabulary build time: {lv.seconds * 1000:.1f} ms")
    mem = f"memory:      compiled grammar {_fmt_bytes(mem_compiled)} after compile, {_fmt_bytes(mem_after)} after the walk"
    if isinstance(vocab_mem, int):
        mem += f"; vocabulary {_fmt_bytes(vocab_mem)}"
    print(mem)
    ms = corral.memory_stats()
    budget = "unlimited" if ms["budget"] is None else _fmt_bytes(ms["budget"])
    print(f"caches:      {_fmt_bytes(ms['total_bytes'])} of a {budget} budget ({_fmt_bytes(ms['pinned_bytes'])} pinned in use"
          f"{', more than the budget' if ms['pinned_over_budget'] else ''}; corral.memory_stats())")
    for name, c in ms["caches"].items():
        print(f"  {name:<18} {_fmt_bytes(c['bytes']):>10} cached, {_fmt_bytes(c['pinned_bytes']):>10} pinned, "
              f"{c['hits']} hits, {c['misses']} misses, {c['evictions']} evictions")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import main as demo_main

    return demo_main(args)


# --------------------------------------------------------------------------------------------
# Argument parsing


class _Formatter(argparse.RawDescriptionHelpFormatter):
    pass


def _add_grammar_args(p: argparse.ArgumentParser, *, positional: bool, required: bool = False) -> None:
    if positional:
        p.add_argument("file", metavar="FILE", help="grammar file (.ebnf/.gbnf, .regex/.re, .lark, .json schema or structural tag)")
    else:
        p.add_argument(
            "--grammar", "-g", metavar="FILE", required=required,
            help="grammar file (.ebnf/.gbnf, .regex/.re, .lark, .json schema or structural tag); default: the built-in JSON grammar",
        )
    p.add_argument(
        "--format", "-f", choices=_FORMATS, default=None,
        help="grammar format (default: guessed from the extension: .ebnf/.gbnf -> ebnf, "
             ".regex/.re -> regex, .lark -> lark, .json -> structural-tag when the object is one, else json-schema)",
    )
    p.add_argument("--root", metavar="NAME", default=None, help="start rule of an EBNF grammar (default: root)")


def _add_vocab_args(p: argparse.ArgumentParser, *, vocab_size: bool) -> None:
    p.add_argument(
        "--tokenizer", "-t", metavar="PATH", default=None,
        help="tokenizer: a Hugging Face tokenizer.json, a SentencePiece .model, a tiktoken rank file "
             "(*.tiktoken, or a tokenizer.model whose lines are 'base64 rank'; special tokens from a "
             "special_tokens.json beside it), or a directory holding tokenizer.json or tokenizer.model "
             "(default: the built-in GPT-2 vocabulary)",
    )
    p.add_argument("--eos", metavar="ID", type=int, nargs="+", default=None,
                   help="end-of-sequence token ids (default: detected from the tokenizer)")
    if vocab_size:
        p.add_argument("--vocab-size", metavar="N", type=int, default=None,
                       help="model-side vocabulary size (logits width) when larger than the tokenizer")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="corral",
        description="corral: exact grammar-constrained decoding. Check grammars, inspect token masks, "
                    "measure mask fills.",
        epilog="examples:\n"
               "  corral check grammars/json.ebnf\n"
               "  corral mask --grammar grammars/json.ebnf --prefix '{\"a\": '\n"
               "  corral validate grammars/json.ebnf doc.json\n"
               "  corral stats --tokenizer path/to/tokenizer.json\n\n"
               "Run 'corral SUBCOMMAND --help' for the options of each subcommand.\n"
               "Exit status: 0 ok, 1 invalid input (grammar, file, prefix, tokenizer), "
               "2 bad usage or unavailable feature.",
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"corral {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="SUBCOMMAND", title="subcommands")

    p = sub.add_parser(
        "check", help="compile a grammar and print its size",
        description="Compile a grammar file and print a one-line summary (rules, terminals, productions, "
                    "DFA states), or the error with its line, column and a caret.",
        epilog="examples:\n  corral check grammars/json.ebnf\n"
               "  ok: grammars/json.ebnf: 12 rules, 12 terminals, 24 productions, 403 DFA states (ebnf)\n"
               "  corral check --format regex pattern.txt",
        formatter_class=_Formatter,
    )
    _add_grammar_args(p, positional=True)
    p.add_argument("--non-strict", action="store_true",
                   help="JSON Schema only: loosen keywords that cannot be enforced exactly (listed) instead of failing")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser(
        "mask", help="show which tokens the grammar allows after a prefix",
        description="Compile a grammar against a tokenizer's vocabulary, accept a text prefix, fill the "
                    "next-token mask and print the allowed tokens, EOS, completeness, forced bytes and "
                    "the fill time.",
        epilog="examples:\n  corral mask --grammar grammars/json.ebnf --prefix '{\"a\": ' --limit 5\n"
               "  corral mask -g grammars/json.ebnf -t /path/to/llama3/tokenizer.model --prefix '[1, '",
        formatter_class=_Formatter,
    )
    _add_grammar_args(p, positional=False)
    _add_vocab_args(p, vocab_size=True)
    p.add_argument("--prefix", "-p", metavar="TEXT", default="", help="text already generated (UTF-8; default: empty)")
    p.add_argument("--limit", "-n", metavar="N", type=int, default=20,
                   help="how many allowed tokens to list (default 20; -1 for all)")
    p.set_defaults(func=cmd_mask)

    p = sub.add_parser(
        "validate", help="test texts against a grammar: accepted, or where and why not",
        description="Compile a grammar and say, for each text, whether the grammar accepts it (the whole "
                    "text, as a complete sentence). A rejected text gets the line:col where it fails, the "
                    "offending character, the characters the grammar expected there and example "
                    "continuations. Exit status: 0 when every text is accepted, 1 otherwise, 2 for a "
                    "grammar that does not compile or a file that cannot be read.",
        epilog="examples:\n  corral validate grammars/json.ebnf doc1.json doc2.json\n"
               "  corral validate tool.lark --text 'call(x)'\n"
               "  echo -n '{\"a\": 1}' | corral validate schema.json -",
        formatter_class=_Formatter,
    )
    p.add_argument("grammar", metavar="GRAMMAR", help="grammar file (.ebnf/.gbnf, .regex/.re, .lark, .json schema or structural tag)")
    p.add_argument("files", metavar="FILE", nargs="*", help="text files to test ('-' reads standard input)")
    p.add_argument("--text", metavar="TEXT", action="append", help="a text to test (repeatable)")
    p.add_argument("--format", "-f", choices=_FORMATS, default=None, help="grammar format (default: from the extension)")
    p.add_argument("--root", metavar="NAME", default=None, help="start rule of an EBNF grammar (default: root)")
    p.add_argument("--strip-final-newline", action="store_true", help="drop one newline at the end of each file")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "stats", help="mask statistics while walking example JSON documents",
        description="Compile a grammar (default: the built-in JSON grammar) against a vocabulary "
                    "(default: built-in GPT-2), walk built-in example JSON documents token by token "
                    "(greedy longest allowed token, driven by the matcher) and print mask statistics: "
                    "allowed tokens per step, fill time per step, compile and vocabulary build time, "
                    "memory.",
        epilog="examples:\n  corral stats\n  corral stats --tokenizer /path/to/mistral/tokenizer.model\n"
               "  corral stats --grammar my.gbnf --document sample1.txt --document sample2.txt",
        formatter_class=_Formatter,
    )
    _add_grammar_args(p, positional=False)
    _add_vocab_args(p, vocab_size=False)
    p.add_argument("--document", "-d", metavar="FILE", action="append", default=None,
                   help="walk this document instead of the built-in JSON examples (repeatable)")
    p.set_defaults(func=cmd_stats)

    from .demo import add_arguments as add_demo_arguments

    p = sub.add_parser(
        "demo", help="generate JSON under a JSON Schema with a small model, end to end",
        description="Run a real constrained generation end to end, with no downloads: the example JSON "
                    "Schemas shipped with corral (or --schema FILE), the built-in GPT-2 vocabulary (or "
                    "--tokenizer PATH) and a tiny model with seeded random weights created on the spot (or "
                    "--model DIR, a local transformers model). Prints each JSON document produced and a "
                    "report: tokens, forced tokens and decode steps saved, mask time per decode step "
                    "(median, p99), compile time. Falls back to the built-in JSON grammar (and says so) "
                    "when this build has no JSON Schema support.",
        epilog="examples:\n  corral demo\n  corral demo --example tool_call --temperature 0\n"
               "  corral demo --schema my.schema.json --tokenizer path/to/tokenizer.json --model path/to/model",
        formatter_class=_Formatter,
    )
    add_demo_arguments(p)
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status (0 ok, 1 invalid input, 2 usage)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, usage errors
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return 2
    if getattr(args, "limit", 0) < -1:
        print(f"corral {args.command}: error: --limit must be -1 (all) or more", file=sys.stderr)
        return 2
    try:
        rc: int = args.func(args)
        return rc
    except CliError as e:
        # "<file>: <error>" when the error is about a file (compiler style), else "corral CMD: error: ..."
        print(str(e) if e.about_file else f"corral {args.command}: error: {e}", file=sys.stderr)
        return e.code
    except CorralError as e:  # anything the library raises that the subcommand did not word itself
        print(f"corral {args.command}: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `corral mask -n -1 | head`
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
