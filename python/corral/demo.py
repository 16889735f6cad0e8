"""``corral demo``: JSON Schema -> grammar -> constrained generation, end to end, no downloads.

By default it runs every example schema shipped with corral (``corral/grammars/examples``: a
contact record, a tool call, a calendar event) with the built-in GPT-2 vocabulary and a tiny
GPT-2-shaped transformer with seeded random weights created on the spot (a tiny pure-torch
model when transformers is missing). It prints each JSON document produced, checks it
(``json.loads``, and the schema with ``jsonschema`` when installed), then a report: tokens,
forced tokens and decode steps saved, mask time per decode step (median, p99), compile time.

``corral demo --schema FILE [--tokenizer PATH] [--model DIR]`` runs the same on your own
schema, tokenizer (same loaders as ``corral mask``) and local transformers model directory.

When ``corral.Grammar.from_json_schema`` does not exist (JSON Schema support still in
progress), the demo says so and falls back to the built-in JSON grammar, bounded so that a
random model finishes (nesting, items, string and number lengths); the schema is then not
enforced.

Example::

    >>> from corral.demo import example_schemas
    >>> sorted(example_schemas())
    ['contact', 'event', 'tool_call']
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any, Callable, Sequence

__all__ = ["main", "add_arguments", "example_schemas", "example_schema_text", "tiny_model", "BOUNDED_JSON_GRAMMAR"]

#: Example schema name -> file in ``corral/grammars/examples`` (same files as the repository's
#: ``grammars/examples``).
_EXAMPLES = {
    "contact": "contact.schema.json",
    "tool_call": "tool_call.schema.json",
    "event": "event.schema.json",
}

#: The fallback grammar when ``Grammar.from_json_schema`` is missing: the built-in JSON
#: grammar (``corral.builtin_grammar("json")``) with compact separators, an object at the top,
#: strings of at most 24 characters and numbers of at most 6 integer and 3 fraction digits, so
#: that a random-weight model finishes (nesting and item counts stay free: a random model closes
#: containers as often as it extends them).
BOUNDED_JSON_GRAMMAR = r"""
root   ::= object
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ( member ( ", " member )* )? "}"
member ::= string ": " value
array  ::= "[" ( value ( ", " value )* )? "]"
string ::= "\"" char{0,24} "\""
char   ::= [^"\\\x00-\x1F] | "\\" ["\\/bfnrt]
number ::= "-"? ( "0" | [1-9] [0-9]{0,5} ) ( "." [0-9]{1,3} )?
"""


def example_schemas() -> dict[str, str]:
    """Example schema name -> file name, shipped inside the package.

    >>> example_schemas()["contact"]
    'contact.schema.json'
    """
    return dict(_EXAMPLES)


def example_schema_text(name: str) -> str:
    """The text of an example schema (read with importlib.resources: works when installed).

    >>> import json
    >>> json.loads(example_schema_text("tool_call"))["title"]
    'ToolCall'
    """
    from .errors import UsageError

    fname = _EXAMPLES.get(name)
    if fname is None:
        raise UsageError(f"no example schema named {name!r}; available: {', '.join(sorted(_EXAMPLES))}")
    return (files("corral.grammars") / "examples" / fname).read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------
# Models


@dataclass
class DemoModel:
    """A ``model_fn`` for :func:`corral.generate` plus a description and its first token."""

    model_fn: Callable[[list[int]], Any]
    description: str
    bos_id: int
    seconds: float  # building the model (library imports excluded)
    import_seconds: float = 0.0  # importing transformers


def _prior(vocab: Any) -> Any:
    """A fixed logit prior for the random model: printable ASCII tokens +2, whitespace-only
    tokens -4 (so the random model writes compact, readable gibberish; the grammar decides
    what is allowed)."""
    import torch

    bias = torch.zeros(vocab.size)
    for i in range(vocab.num_tokens):
        b = vocab.token_bytes(i)
        if not b:
            continue
        if b.isspace():
            bias[i] = -4.0
        elif all(32 <= c < 127 for c in b):
            bias[i] = 2.0
    return bias


class _TinyTorchLM:
    """A tiny pure-torch language model (used when transformers is missing): the mean of the
    last 4 token embeddings through a 2-layer MLP, seeded random weights."""

    def __init__(self, vocab_size: int, seed: int, dim: int = 32) -> None:
        import torch

        g = torch.Generator().manual_seed(seed)
        self.emb = torch.randn(vocab_size, dim, generator=g) * 0.5
        self.w1 = torch.randn(dim, dim, generator=g) / dim**0.5
        self.out = torch.randn(dim, vocab_size, generator=g) / dim**0.5

    def __call__(self, ids: Sequence[int]) -> Any:
        import torch

        h = self.emb[torch.tensor(list(ids[-4:]) or [0])].mean(dim=0)
        return torch.tanh(h @ self.w1) @ self.out


def tiny_model(vocab: Any, seed: int = 0, *, prior: bool = True) -> DemoModel:
    """A tiny model with seeded random weights over ``vocab.size`` logits, built in well under
    a second: a GPT-2-shaped transformers model (2 layers, 2 heads, 64 dims) with a KV cache,
    or :class:`_TinyTorchLM` without transformers. ``prior`` adds :func:`_prior`.

    >>> import corral
    >>> m = tiny_model(corral.Vocabulary.from_bytes([b"a", b"b", b""], eos_token_ids=[2]))
    >>> tuple(m.model_fn([2, 0]).shape)
    (3,)
    """
    import torch

    t0 = time.perf_counter()
    bos = vocab.eos_token_ids[0]
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except Exception:  # noqa: BLE001 - no (working) transformers: pure torch
        import_s = time.perf_counter() - t0
        net = _TinyTorchLM(vocab.size, seed)
        fn: Callable[[list[int]], Any] = net
        desc = f"tiny pure-torch MLP language model (random weights, seed {seed}; transformers is not installed)"
    else:
        import_s = time.perf_counter() - t0
        from .hf import make_model_fn

        state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        try:
            cfg = GPT2Config(n_layer=2, n_head=2, n_embd=64, n_positions=2048, vocab_size=vocab.size,
                             bos_token_id=bos, eos_token_id=bos)
            model: Any = GPT2LMHeadModel(cfg)  # (transformers leaves .eval() untyped)
            model = model.eval()
        finally:
            torch.random.set_rng_state(state)
        fn = make_model_fn(model)
        desc = f"tiny GPT-2-shaped transformer (2 layers, 2 heads, 64 dims, random weights, seed {seed})"
    if prior:
        bias = _prior(vocab)
        inner = fn

        def fn(ids: list[int]) -> Any:  # noqa: F811 - the biased wrapper
            return inner(ids) + bias

        desc += "; fixed prior: printable-ASCII tokens +2, whitespace-only tokens -4"
    return DemoModel(fn, desc, bos, time.perf_counter() - t0 - import_s, import_s)


def _local_model(path: str, vocab: Any) -> DemoModel:
    from ._cli_shared import CliError

    t0 = time.perf_counter()
    try:
        import transformers
    except ImportError:
        raise CliError("--model needs the transformers package: pip install 'corral[hf]'") from None
    from .hf import make_model_fn

    p = Path(path)
    if not p.is_dir():
        raise CliError(f"{path}: not a directory (--model takes a local transformers model directory)")
    try:
        model: Any = transformers.AutoModelForCausalLM.from_pretrained(str(p), local_files_only=True)
        model = model.eval()
    except Exception as e:  # noqa: BLE001 - report any loading failure
        raise CliError(f"{path}: cannot load a causal language model: {type(e).__name__}: {e}") from None
    width = getattr(model.config, "vocab_size", None)
    if isinstance(width, int) and width < vocab.size:
        raise CliError(f"{path}: the model has {width} logits but the tokenizer has {vocab.size} tokens")
    bos = getattr(model.config, "bos_token_id", None)
    if not isinstance(bos, int):
        bos = vocab.eos_token_ids[0]
    return DemoModel(make_model_fn(model), f"{p} ({type(model).__name__})", bos, time.perf_counter() - t0)


# --------------------------------------------------------------------------------------------
# Grammars


@dataclass
class _DemoGrammar:
    grammar: Any
    label: str
    schema_enforced: bool
    build_s: float


def _schema_support() -> bool:
    import corral

    return hasattr(corral.Grammar, "from_json_schema")


def _grammar_for(schema_text: str, label: str) -> _DemoGrammar:
    import corral

    from ._cli_shared import _json_schema_grammar

    t0 = time.perf_counter()
    if _schema_support():
        g = _json_schema_grammar(Path(label), schema_text)
        return _DemoGrammar(g, f"JSON Schema {label}", True, time.perf_counter() - t0)
    g = corral.Grammar.from_ebnf(BOUNDED_JSON_GRAMMAR)
    return _DemoGrammar(g, "built-in JSON grammar, bounded (fallback)", False, time.perf_counter() - t0)


# --------------------------------------------------------------------------------------------
# The run


@dataclass
class _Run:
    name: str
    ok: bool
    tokens: int
    forced: int
    steps: int
    mask_us: list[float]
    compile_s: float
    gen_s: float


def _pct(sorted_vals: Sequence[float], q: float) -> float:
    """The q-quantile (nearest rank) of sorted values; 0 when empty."""
    if not sorted_vals:
        return 0.0
    return float(sorted_vals[min(len(sorted_vals) - 1, max(0, math.ceil(q * len(sorted_vals)) - 1))])


def _check(text: str, schema: Any, enforced: bool) -> tuple[bool, str]:
    """(ok, message) for the produced text."""
    try:
        value = json.loads(text)
    except ValueError as e:
        return False, f"NOT valid JSON ({e}): this is a corral bug, please report it"
    if not enforced:
        return True, "json.loads: ok (the schema is not enforced by the fallback grammar)"
    try:
        import jsonschema
    except ImportError:
        return True, "json.loads: ok (install jsonschema to also validate against the schema)"
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as e:
        return False, f"json.loads: ok, but INVALID against the schema ({e.message}): a corral bug, please report it"
    return True, "json.loads: ok; valid against the schema (jsonschema)"


def _prompt_ids(vocab: Any, bos: int, schema_text: str, use_prompt: bool) -> list[int]:
    ids = [bos]
    if use_prompt and vocab.can_encode:
        try:
            compact = json.dumps(json.loads(schema_text), separators=(",", ":"))
        except ValueError:
            compact = schema_text
        prompt = f"Write one JSON document that validates against this JSON Schema.\nSchema: {compact}\nJSON:"
        try:
            ids += vocab.encode(prompt.encode("utf-8"))
        except Exception:  # noqa: BLE001 - a prompt is optional
            pass
    return ids


def main(args: argparse.Namespace | Sequence[str] | None = None) -> int:
    """Runs the demo; returns the exit status (0: every output valid and complete).

    ``args`` is the namespace from ``corral demo`` (:func:`add_arguments`) or an argv list.

    >>> main(["--example", "tool_call", "--temperature", "0"])  # doctest: +SKIP
    corral demo: JSON Schema -> grammar -> constrained generation (no downloads)
    ...
    0
    """
    if not isinstance(args, argparse.Namespace):
        parser = argparse.ArgumentParser(prog="corral demo")
        add_arguments(parser)
        args = parser.parse_args(args)

    import corral

    from ._cli_shared import CliError, _describe_vocab, _micro, load_vocabulary

    try:
        import torch
    except ImportError:
        raise CliError("the demo needs torch: pip install 'corral[torch]'") from None

    us = _micro()
    t_start = time.perf_counter()
    print("corral demo: JSON Schema -> grammar -> constrained generation (no downloads)")

    # Schemas
    schemas: list[tuple[str, str]] = []
    if args.schema:
        for path in args.schema:
            try:
                schemas.append((path, Path(path).read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError) as e:
                raise CliError(f"{path}: cannot read the schema: {e}") from None
    else:
        names = [args.example] if args.example else list(_EXAMPLES)
        schemas = [(_EXAMPLES[n], example_schema_text(n)) for n in names]

    # Vocabulary and model
    tokenizer = args.tokenizer
    if tokenizer is None and args.model and Path(args.model).is_dir():
        tokenizer = args.model if any((Path(args.model) / f).is_file() for f in ("tokenizer.json", "tokenizer.model")) else None
    lv = load_vocabulary(tokenizer, args.eos)
    vocab = lv.vocab
    print(f"vocabulary:  {_describe_vocab(lv)}, built in {lv.seconds:.2f} s"
          f"{'' if vocab.can_encode else ' (no encoder: forced runs disabled)'}")
    threads = torch.get_num_threads()
    if args.model:
        model = _local_model(args.model, vocab)
    else:
        torch.set_num_threads(1)  # a tiny model: threads cost more than they bring
        model = tiny_model(vocab, args.seed, prior=not args.no_prior)
    print(f"model:       {model.description}; built in {model.seconds:.2f} s"
          + (f" (+ {model.import_seconds:.1f} s importing transformers)" if model.import_seconds > 0.05 else ""))
    if not args.model:
        print("             (random weights: the content is gibberish; the grammar guarantees the structure)")
    if not _schema_support():
        print("note:        corral.Grammar.from_json_schema is not available in this build of corral: falling back to "
              "the built-in JSON grammar (an object, compact, strings <= 24 characters, numbers <= 6 digits, "
              "so that a random model finishes); the schemas are NOT enforced")

    runs: list[_Run] = []
    try:
        for k, (label, text) in enumerate(schemas, 1):
            try:
                schema = json.loads(text)
            except ValueError as e:
                raise CliError(f"{label}: invalid JSON in the schema: {e}") from None
            title = schema.get("title") if isinstance(schema, dict) else None
            print()
            print(f"[{k}/{len(schemas)}] {label}" + (f" ({title})" if isinstance(title, str) else ""))
            dg = _grammar_for(text, label)
            t0 = time.perf_counter()
            compiled = corral.compile(dg.grammar, vocab)
            compile_s = dg.build_s + time.perf_counter() - t0
            print(f"grammar:     {dg.label}: {dg.grammar.num_rules} rules, {dg.grammar.num_terminals} terminals; "
                  f"compiled in {compile_s * 1000:.1f} ms (grammar {dg.build_s * 1000:.1f} ms + vocabulary "
                  f"{(compile_s - dg.build_s) * 1000:.1f} ms)")
            params = corral.SamplingParams(temperature=args.temperature, seed=args.seed + k - 1)
            prompt = _prompt_ids(vocab, model.bos_id, text, True)
            t0 = time.perf_counter()
            res = corral.generate(model.model_fn, prompt, compiled, vocab, params, args.max_tokens,
                                  use_forced=not args.no_forced)
            gen_s = time.perf_counter() - t0
            ok, message = _check(res.text, schema, dg.schema_enforced) if res.finished else (False, "")
            # Continuation lines of a multi-line document are indented to the value column.
            print("output:      " + res.text.replace("\n", "\n" + " " * 13))
            if not res.finished:
                print(f"check:       stopped at --max-tokens {args.max_tokens} before the document was complete "
                      "(the output is a valid prefix); raise --max-tokens")
            else:
                print(f"check:       {message}")
            n = len(res.token_ids)
            med, p99 = res.mask_time_stats()
            print(f"tokens:      {n} ({res.forced} forced, {res.steps} sampled); decode steps {res.steps}, "
                  f"saved {res.forced} ({100 * res.forced / max(n, 1):.0f}%)")
            print(f"mask time:   median {med:.1f} {us}, p99 {p99:.1f} {us} per decode step (fill + apply)")
            print(f"time:        {gen_s:.2f} s ({1000 * gen_s / max(n, 1):.1f} ms per token, model included)")
            runs.append(_Run(label, ok, n, res.forced, res.steps, list(res.mask_times_us), compile_s, gen_s))
    finally:
        torch.set_num_threads(threads)

    tokens = sum(r.tokens for r in runs)
    forced = sum(r.forced for r in runs)
    steps = sum(r.steps for r in runs)
    mask = sorted(t for r in runs for t in r.mask_us)
    med = statistics.median(mask) if mask else 0.0
    good = sum(r.ok for r in runs)
    print()
    print("report")
    print(f"  documents:           {len(runs)} ({good} complete and valid)")
    print(f"  tokens:              {tokens} generated, {forced} forced (appended without a decode step)")
    print(f"  decode steps:        {steps} model calls; {forced} saved ({100 * forced / max(tokens, 1):.0f}% of tokens)")
    print(f"  mask time:           median {med:.1f} {us}, p99 {_pct(mask, 0.99):.1f} {us} per decode step "
          f"(fill + apply, {vocab.size} tokens; includes the first, cold fill of each new grammar state)")
    print(f"  compile time:        {', '.join(f'{r.compile_s * 1000:.1f} ms' for r in runs)} "
          "(schema -> grammar -> vocabulary; per-state tables fill lazily)")
    print(f"  total time:          {time.perf_counter() - t_start:.1f} s")
    return 0 if good == len(runs) else 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Adds the ``corral demo`` options to ``p``.

    >>> p = argparse.ArgumentParser()
    >>> add_arguments(p)
    >>> p.parse_args(["--example", "event", "--max-tokens", "64"]).max_tokens
    64
    """
    p.add_argument("--schema", "-s", metavar="FILE", action="append", default=None,
                   help="JSON Schema file to generate for (repeatable; default: the example schemas shipped "
                        "with corral)")
    p.add_argument("--example", choices=sorted(_EXAMPLES), default=None,
                   help="run only this example schema")
    p.add_argument("--tokenizer", "-t", metavar="PATH", default=None,
                   help="tokenizer (same forms as `corral mask --tokenizer`: tokenizer.json, SentencePiece .model, "
                        "tiktoken file, or a directory); default: the built-in GPT-2 vocabulary, or the --model "
                        "directory's tokenizer")
    p.add_argument("--eos", metavar="ID", type=int, nargs="+", default=None,
                   help="end-of-sequence token ids (default: detected from the tokenizer)")
    p.add_argument("--model", "-m", metavar="DIR", default=None,
                   help="a local transformers causal-LM directory (no download); default: a tiny random model")
    p.add_argument("--max-tokens", metavar="N", type=int, default=512, help="token budget per document (default 512)")
    p.add_argument("--temperature", metavar="T", type=float, default=1.0, help="sampling temperature (default 1.0; 0 greedy)")
    p.add_argument("--seed", metavar="N", type=int, default=0,
                   help="seed for the model weights and sampling (document k samples with seed N + k - 1; default 0)")
    p.add_argument("--no-forced", action="store_true", help="decode every token (do not append forced runs)")
    p.add_argument("--no-prior", action="store_true", help="tiny model: no printable-ASCII/whitespace prior")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
