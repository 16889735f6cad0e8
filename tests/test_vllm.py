"""corral.vllm: the vLLM V1 structured-output backend and the V0-style logits processor.

vLLM is not installed in this environment (too large to install for tests), so these tests
do NOT run vLLM. They replay, against corral's classes, the call sequences of vLLM V1's
``StructuredOutputManager`` and scheduler (read from vllm-project/vllm:
``vllm/v1/structured_output/__init__.py`` at 8ae7ba4d, ``backend_xgrammar.py`` at 0b940c49,
``backend_types.py`` at d26c81b6; see docs/vllm.md):

* ``grammar_bitmask``: for each request, for each scheduled draft token then a final ``-1``:
  fill the row (all ones when terminated or not applying), accept the draft when not
  terminated; then ``rollback(state_advancements)``;
* scheduler: ``validate_tokens(drafts)`` keeps the valid prefix of proposed drafts;
  ``accept_tokens(req_id, new_token_ids)`` after each step;
* EOS: a terminated grammar's ``accept_tokens`` returns False and does nothing (xgrammar's
  behaviour); rows after termination are all ones; rollback un-terminates.

``patch_vllm`` is exercised against a stand-in ``vllm.v1.structured_output`` package
(a copy of the upstream interface: abstract base classes, module-level ``XgrammarBackend``,
``StructuredOutputManager._fill_bitmasks``), in a subprocess.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import corral
from corral.vllm import VLLM_AVAILABLE, CorralBackend, CorralGrammar, LogitsProcessor, StructuredOutputOptions

V = 50257
EOS = 50256
LIST = r'root ::= "[" [0-9] ("," [0-9]){0,3} "]"'
PERSON = r'root ::= "{\"name\": \"" [a-z]+ "\", \"age\": " [0-9]+ "}"'


@pytest.fixture(scope="module")
def vocab():
    return corral.builtin_vocabulary()


@pytest.fixture(scope="module")
def backend(vocab):
    return CorralBackend(None, vocab, V)


def direct_mask(compiled, ids):
    m = corral.Matcher(compiled)
    for t in ids:
        assert m.accept_token(t)
    mask = corral.allocate_token_bitmask(1, V)
    if not m.is_terminated():
        m.fill_next_token_bitmask(mask, 0)
    return mask[0]


def grammar_bitmask(bitmask, requests, spec_tokens):
    """Replay of StructuredOutputManager.grammar_bitmask (serial path; should_fill_bitmask
    True): ``requests`` is a list of (req_id, grammar)."""
    full = torch.tensor(-1, dtype=torch.int32)
    cumulative_index = 0
    for req_id, grammar in requests:
        apply_bitmask = True
        state_advancements = 0
        for token in itertools.chain(spec_tokens.get(req_id, ()), (-1,)):
            # _fill_bitmasks(((grammar, cumulative_index, apply_bitmask),))
            if apply_bitmask and not grammar.is_terminated():
                grammar.fill_bitmask(bitmask, cumulative_index)
            else:
                bitmask[cumulative_index].fill_(full)
            if token == -1:
                apply_bitmask = False
            if apply_bitmask and not grammar.is_terminated():
                assert grammar.accept_tokens(req_id, [token])
                state_advancements += 1
            cumulative_index += 1
        if state_advancements > 0:
            grammar.rollback(state_advancements)
    return bitmask[:cumulative_index].numpy()


def test_module_imports_without_vllm_and_patch_names_it():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["vllm"] = None          # as if vLLM were not installed
        import corral, corral.vllm as v
        assert not v.VLLM_AVAILABLE
        v.CorralBackend(None, corral.builtin_vocabulary(), 50257)
        try:
            v.patch_vllm()
        except corral.UsageError as e:
            assert "vLLM" in str(e) and "vllm" in str(e), e
            print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


@pytest.mark.skipif(VLLM_AVAILABLE, reason="vLLM is installed")
def test_patch_without_vllm_raises():
    with pytest.raises(corral.UsageError, match="vLLM"):
        corral.vllm.patch_vllm()


def test_spec_decode_lifecycle_rows_and_rollback(backend, vocab):
    """Three requests: r1 with 3 valid drafts, r2 with drafts ending in EOS followed by a
    draft that is never reached (rows after EOS are all ones), r3 without drafts. Each row
    equals a direct Matcher's mask at that prefix, and every grammar is back where it was."""
    enc = lambda s: vocab.encode(s)  # noqa: E731
    g1 = backend.compile_grammar(StructuredOutputOptions.GRAMMAR, LIST)
    g2 = backend.compile_grammar(StructuredOutputOptions.REGEX, r"(yes|no)!")
    g3 = backend.compile_grammar(StructuredOutputOptions.GRAMMAR, PERSON)
    assert g1.accept_tokens("r1", enc(b"[1"))
    assert g2.accept_tokens("r2", enc(b"yes"))
    assert g3.accept_tokens("r3", enc(b'{"name'))
    proposed = {"r1": enc(b",2,") + enc(b"x"), "r2": enc(b"!") + [EOS] + enc(b"!"), "r3": []}
    # the scheduler trims drafts to the valid prefix (update_draft_token_ids)
    spec = {r: g.validate_tokens(proposed[r]) for r, g in (("r1", g1), ("r2", g2), ("r3", g3))}
    assert spec["r1"] == enc(b",2,") and spec["r2"] == enc(b"!") + [EOS] and spec["r3"] == []
    n_before = [g.num_processed_tokens for g in (g1, g2, g3)]
    bitmask = backend.allocate_token_bitmask(8 * 4)
    out = grammar_bitmask(bitmask, [("r1", g1), ("r2", g2), ("r3", g3)], spec)
    assert out.shape == (len(spec["r1"]) + 1 + len(spec["r2"]) + 1 + 1, (V + 31) // 32)
    rows = torch.from_numpy(out)
    c1, c2, c3 = g1.matcher.compiled, g2.matcher.compiled, g3.matcher.compiled
    p1, p2, p3 = enc(b"[1"), enc(b"yes"), enc(b'{"name')
    r = 0
    for k in range(len(spec["r1"]) + 1):
        assert torch.equal(rows[r], direct_mask(c1, p1 + spec["r1"][:k])), k
        r += 1
    assert torch.equal(rows[r], direct_mask(c2, p2))
    assert torch.equal(rows[r + 1], direct_mask(c2, p2 + enc(b"!")))
    assert torch.equal(rows[r + 1], direct_mask(c2, p2 + enc(b"!")))
    assert corral.allowed_token_ids(rows[r + 1], V) == [EOS]
    assert int((rows[r + 2] != -1).sum()) == 0  # after the draft EOS: all ones (bonus row)
    r += 3
    assert torch.equal(rows[r], direct_mask(c3, p3))
    # state restored
    assert [g.num_processed_tokens for g in (g1, g2, g3)] == n_before
    assert not g2.is_terminated()
    for g, p in ((g1, p1), (g2, p2), (g3, p3)):
        m = backend.allocate_token_bitmask(1)
        g.fill_bitmask(m, 0)
        assert torch.equal(m[0], direct_mask(g.matcher.compiled, p))


def test_scheduler_accepts_then_terminates(backend, vocab):
    """After verification the scheduler accepts the accepted drafts plus the bonus token; a
    request whose output reached EOS is terminated: accept_tokens returns False and changes
    nothing, fill_bitmask gives all ones, validate_tokens gives []; rollback un-terminates."""
    g = backend.compile_grammar(StructuredOutputOptions.REGEX, r"(yes|no)!")
    assert g.accept_tokens("r", vocab.encode(b"no!") + [EOS])
    assert g.is_terminated() and g.num_processed_tokens == len(vocab.encode(b"no!")) + 1
    assert g.accept_tokens("r", [EOS]) is False
    assert g.num_processed_tokens == len(vocab.encode(b"no!")) + 1
    assert g.validate_tokens([EOS]) == []
    m = backend.allocate_token_bitmask(2)
    m[1] = 0
    g.fill_bitmask(m, 1)
    assert int((m[1] != -1).sum()) == 0
    g.rollback(1)
    assert not g.is_terminated() and g.validate_tokens([EOS, EOS]) == [EOS]
    # a rejected token: False, the state is unchanged
    g.reset()
    assert g.num_processed_tokens == 0 and not g.is_terminated()
    assert g.accept_tokens("r", vocab.encode(b"maybe")) is False
    assert g.matcher.num_accepted == 0


def test_accept_stops_at_termination_within_a_chunk(backend, vocab):
    """A committed speculative chunk can continue past the EOS that ends the grammar: the
    rest is ignored (True), nothing after EOS is consumed, validate_tokens gives []."""
    g = backend.compile_grammar(StructuredOutputOptions.REGEX, r"(yes|no)!")
    ids = vocab.encode(b"yes!")
    trailing = vocab.encode(b" ")[0]
    assert g.accept_tokens("r", ids + [EOS, trailing, trailing])
    assert g.is_terminated() and g.num_processed_tokens == len(ids) + 1
    assert g.matcher.num_accepted == len(ids) + 1
    assert g.validate_tokens([trailing]) == []
    g.rollback(0)
    g.rollback(-1)
    assert g.is_terminated()


def test_draft_eos_mid_window_and_padded_drafts(backend, vocab):
    """Unvalidated drafts [EOS, " ", " ", " "] (EOS mid-window) and drafts padded with -1
    (vLLM pads invalid drafts): N+1 rows, rows after termination / padding all ones (the
    pinned manager's logic), the grammar ends where it started."""
    g = backend.compile_grammar(StructuredOutputOptions.REGEX, r"(yes|no)!")
    assert g.accept_tokens("r", vocab.encode(b"no!"))
    sp = vocab.encode(b" ")[0]
    for drafts in ([EOS, sp, sp, sp], [-1, -1, -1, -1]):
        bm = backend.allocate_token_bitmask(5)
        bm.fill_(0)
        out = torch.from_numpy(grammar_bitmask(bm, [("r", g)], {"r": drafts}))
        assert out.shape[0] == len(drafts) + 1
        assert corral.allowed_token_ids(out[0], V) == [EOS]
        for row in out[1:]:
            assert int((row != -1).sum()) == 0
        assert not g.is_terminated() and g.num_processed_tokens == len(vocab.encode(b"no!"))


def test_compile_grammar_request_types(backend, vocab):
    def first_allowed(g):
        m = backend.allocate_token_bitmask(1)
        g.fill_bitmask(m, 0)
        return set(corral.allowed_token_ids(m[0], V))

    g = backend.compile_grammar(StructuredOutputOptions.CHOICE, '["red", "green", "a.b"]')
    assert g.validate_tokens(vocab.encode(b"a.b")) == vocab.encode(b"a.b")
    assert g.validate_tokens(vocab.encode(b"axb")) != vocab.encode(b"axb")
    g = backend.compile_grammar(StructuredOutputOptions.JSON_OBJECT, "")
    firsts = first_allowed(g)
    assert vocab.encode(b"{")[0] in firsts and vocab.encode(b"[")[0] not in firsts
    assert g.accept_tokens("r", vocab.encode(b'{"a": [1, 2]}') + [EOS]) and g.is_terminated()
    with pytest.raises(ValueError, match="STRUCTURAL_TAG"):
        backend.compile_grammar(StructuredOutputOptions.STRUCTURAL_TAG, "{}")
    with pytest.raises(corral.GrammarSyntaxError):
        backend.compile_grammar(StructuredOutputOptions.GRAMMAR, "root ::= (")
    a = backend.compile_grammar(StructuredOutputOptions.REGEX, "[a-z]+")
    b = backend.compile_grammar(StructuredOutputOptions.REGEX, "[a-z]+")
    assert a.matcher.compiled is b.matcher.compiled and a.matcher is not b.matcher
    schema = '{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}'
    if hasattr(corral.Grammar, "from_json_schema"):
        g = backend.compile_grammar(StructuredOutputOptions.JSON, schema)
        assert g.accept_tokens("r", vocab.encode(b'{"a": 1}') + [EOS]) and g.is_terminated()
        with pytest.raises(corral.GrammarError):
            backend.compile_grammar(StructuredOutputOptions.JSON, '{"type": 12}')

        class Cfg:  # vllm_config.structured_outputs_config.disable_any_whitespace
            class structured_outputs_config:
                disable_any_whitespace = True

        compact = CorralBackend(Cfg(), vocab, V)
        g = compact.compile_grammar(StructuredOutputOptions.JSON, schema)
        assert g.validate_tokens(vocab.encode(b'{"a":1}')) == vocab.encode(b'{"a":1}')
        assert g.validate_tokens(vocab.encode(b'{"a": 1}')) != vocab.encode(b'{"a": 1}')
        g = compact.compile_grammar(StructuredOutputOptions.JSON_OBJECT, "")
        assert g.validate_tokens(vocab.encode(b"{ }")) == vocab.encode(b"{")
    else:
        with pytest.raises(ValueError, match="from_json_schema"):
            backend.compile_grammar(StructuredOutputOptions.JSON, schema)


def test_fill_bitmasks_batch_equals_single_fills(backend, vocab):
    texts = [b"", b'{"na', b'{"name": "x', b'{"name": "x", "age": 1', b'{"name": "x", "age": 1}']
    gs = []
    for t in texts:
        g = backend.compile_grammar(StructuredOutputOptions.GRAMMAR, PERSON)
        assert g.accept_tokens("r", vocab.encode(t))
        gs.append(g)
    assert gs[4].accept_tokens("r", [EOS])
    batch = [(gs[0], 0, True), (gs[1], 1, True), (gs[2], 2, False), (gs[3], 3, True), (gs[4], 4, True)]
    bm = backend.allocate_token_bitmask(5)
    bm.fill_(0)
    CorralBackend.fill_bitmasks(batch, bm)
    single = backend.allocate_token_bitmask(5)
    for g, i, apply in batch:
        if apply:
            g.fill_bitmask(single, i)
    assert torch.equal(bm, single)
    assert int((bm[2] != -1).sum()) == 0 and int((bm[4] != -1).sum()) == 0


def test_logits_processor_generates_valid_output(vocab):
    """SamplingParams(logits_processors=[...]) calls proc(output_ids, logits) per step with
    a 1-D logits row (possibly wider than the vocabulary)."""
    g = corral.Grammar.from_ebnf(LIST)
    for form in ("2", "3"):
        proc = LogitsProcessor(corral.compile(g, vocab))
        gen = torch.Generator().manual_seed(1)
        out: list[int] = []
        for _ in range(20):
            logits = torch.randn(V + 64, generator=gen)
            logits = proc(out, logits) if form == "2" else proc([1, 2, 3], out, logits)
            t = int(logits.argmax())
            assert t < V
            if t == EOS:
                break
            out.append(t)
        text = b"".join(vocab.token_bytes(t) for t in out)
        m = corral.Matcher(corral.compile(g, vocab))
        assert m.accept_bytes(text) and m.is_accepting(), text
        # a new generation (shorter ids) restarts the state
        logits = proc([], torch.zeros(V))
        assert torch.isfinite(logits).nonzero().flatten().tolist() == [vocab.encode(b"[")[0]]
    with pytest.raises(corral.UsageError, match="not allowed"):
        proc(vocab.encode(b"]"), torch.zeros(V))


def test_patch_vllm_against_stand_in_package(tmp_path):
    """patch_vllm() on a stand-in vllm.v1.structured_output with upstream's interfaces: the
    module-level XgrammarBackend becomes CorralBackend (constructed as vLLM does), corral's
    classes satisfy the abstract base classes, and _fill_bitmasks batches corral rows."""
    pkg = tmp_path / "vllm" / "v1" / "structured_output"
    pkg.mkdir(parents=True)
    (tmp_path / "vllm" / "__init__.py").write_text("")
    (tmp_path / "vllm" / "v1" / "__init__.py").write_text("")
    (pkg / "backend_types.py").write_text(
        textwrap.dedent(
            """
            import enum
            from abc import ABC, abstractmethod
            from dataclasses import dataclass
            from typing import Any

            class StructuredOutputOptions(enum.Enum):
                JSON = enum.auto(); JSON_OBJECT = enum.auto(); REGEX = enum.auto()
                GRAMMAR = enum.auto(); CHOICE = enum.auto(); STRUCTURAL_TAG = enum.auto()

            class StructuredOutputGrammar(ABC):
                @abstractmethod
                def accept_tokens(self, request_id, tokens): ...
                @abstractmethod
                def validate_tokens(self, tokens): ...
                @abstractmethod
                def rollback(self, num_tokens): ...
                @abstractmethod
                def fill_bitmask(self, bitmask, batch_index): ...
                @abstractmethod
                def is_terminated(self): ...
                @abstractmethod
                def reset(self): ...

            @dataclass
            class StructuredOutputBackend(ABC):
                vllm_config: Any
                tokenizer: Any
                vocab_size: int
                @abstractmethod
                def compile_grammar(self, request_type, grammar_spec): ...
                @abstractmethod
                def allocate_token_bitmask(self, max_num_seqs): ...
                @abstractmethod
                def destroy(self): ...
            """
        )
    )
    (pkg / "__init__.py").write_text(
        textwrap.dedent(
            """
            import torch
            from vllm.v1.structured_output.backend_types import StructuredOutputBackend

            class XgrammarBackend(StructuredOutputBackend):
                pass

            class StructuredOutputManager:
                def __init__(self, vocab):
                    self.backend = None
                    self.vocab = vocab
                    self._grammar_bitmask = None
                    self._full_mask = torch.tensor(-1, dtype=torch.int32)
                def grammar_init(self, key):
                    if self.backend is None:
                        self.backend = XgrammarBackend(None, tokenizer=self.vocab, vocab_size=50257)
                        self._grammar_bitmask = self.backend.allocate_token_bitmask(4)
                    return self.backend.compile_grammar(*key)
                def _fill_bitmasks(self, batch):
                    for grammar, index, apply_bitmask in batch:
                        if apply_bitmask and not grammar.is_terminated():
                            grammar.fill_bitmask(self._grammar_bitmask, index)
                        else:
                            self._grammar_bitmask[index].fill_(self._full_mask)
            """
        )
    )
    code = textwrap.dedent(
        """
        import corral, torch
        import corral.vllm as cv
        assert cv.VLLM_AVAILABLE
        from vllm.v1.structured_output import backend_types as bt
        assert issubclass(cv.CorralBackend, bt.StructuredOutputBackend)
        cv.vllm_plugin()
        cv.patch_vllm()  # idempotent
        import vllm.v1.structured_output as so
        assert so.XgrammarBackend is cv.CorralBackend
        mgr = so.StructuredOutputManager(corral.builtin_vocabulary())
        g = mgr.grammar_init((bt.StructuredOutputOptions.REGEX, "(yes|no)"))
        assert isinstance(g, cv.CorralGrammar) and isinstance(g, bt.StructuredOutputGrammar)
        mgr._grammar_bitmask.fill_(0)
        mgr._fill_bitmasks([(g, 0, True), (g, 1, False)])
        ids = corral.allowed_token_ids(mgr._grammar_bitmask[0], 50257)
        v = corral.builtin_vocabulary()
        assert v.encode(b"yes")[0] in ids and len(ids) < 10, ids
        assert int((mgr._grammar_bitmask[1] != -1).sum()) == 0
        print("ok")
        """
    )
    env = {**__import__("os").environ, "PYTHONPATH": f"{tmp_path}:" + __import__("os").environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_validate_tokens_does_not_advance(backend, vocab):
    g = backend.compile_grammar(StructuredOutputOptions.GRAMMAR, LIST)
    ids = vocab.encode(b"[1,2]")
    assert g.validate_tokens(ids + [EOS, EOS]) == ids + [EOS]
    assert g.matcher.num_accepted == 0 and g.num_processed_tokens == 0
    assert g.validate_tokens([]) == []
    assert isinstance(np.asarray(backend.allocate_token_bitmask(2)), np.ndarray)


# Every split of the text into runs: a fill after this text runs far past 1 ms (test_limits.py).
AMBIGUOUS = 'root ::= [a-z ]* (root | "")'
SLOW_TEXT = " the cat sat on the mat and then it went away to sleep for a while"


def test_fill_past_budget_ends_only_that_request(vocab, caplog):
    """A fill past ``max_fill_ms`` inside the engine's step does not raise: its row allows only
    EOS, its grammar ends (rollback does not revive it), the log says why, and the other rows
    of the batch are filled as usual."""
    tight = corral.compile(corral.Grammar.from_ebnf(AMBIGUOUS, limits={"max_fill_ms": 1}), vocab)
    slow = CorralGrammar(matcher=corral.Matcher(tight), vocab_size=V)
    assert slow.accept_tokens("slow", vocab.encode(SLOW_TEXT))
    backend = CorralBackend(None, vocab, V)
    fine = backend.compile_grammar(StructuredOutputOptions.GRAMMAR, LIST)
    bm = backend.allocate_token_bitmask(2)
    with caplog.at_level("ERROR", logger="corral"):
        CorralBackend.fill_bitmasks([(slow, 0, True), (fine, 1, True)], bm)
    assert corral.allowed_token_ids(bm[0], V) == [EOS]
    assert "max_fill_ms" in caplog.text and "ended with EOS" in caplog.text
    assert torch.equal(bm[1], direct_mask(fine.matcher.compiled, []))
    assert slow.is_terminated() and not slow.accept_tokens("slow", [EOS])
    slow.rollback(1)
    assert slow.is_terminated(), "an ended request stays ended"
    # The single-row path does the same.
    again = CorralGrammar(matcher=corral.Matcher(tight), vocab_size=V)
    assert again.accept_tokens("again", vocab.encode(SLOW_TEXT))
    one = backend.allocate_token_bitmask(1)
    again.fill_bitmask(one, 0)
    assert corral.allowed_token_ids(one[0], V) == [EOS] and again.is_terminated()
    again.reset()
    assert not again.is_terminated()


def test_fill_guard_doctest():
    import doctest

    import corral.fill_guard

    assert doctest.testmod(corral.fill_guard).attempted > 0 and doctest.testmod(corral.fill_guard).failed == 0


def test_logits_processor_fill_past_budget_ends_the_sequence(vocab, caplog):
    """The V0-style processor runs inside the engine too: a fill past ``max_fill_ms`` leaves
    only EOS (now and on later calls, which do not feed EOS to the grammar) instead of raising."""
    tight = corral.compile(corral.Grammar.from_ebnf(AMBIGUOUS, limits={"max_fill_ms": 1}), vocab)
    proc = LogitsProcessor(tight)
    ids = vocab.encode(SLOW_TEXT)
    with caplog.at_level("ERROR", logger="corral"):
        out = proc(ids, torch.zeros(V))
    assert torch.isfinite(out).nonzero().flatten().tolist() == [EOS] and "max_fill_ms" in caplog.text
    out = proc(ids + [EOS], torch.zeros(V))
    assert torch.isfinite(out).nonzero().flatten().tolist() == [EOS]
