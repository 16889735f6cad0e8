"""corral.vllm without vLLM: the backend's semantics, checked directly.

The real thing -- vLLM 0.33.0 installed, requests sent through its ``InputProcessor`` and
``StructuredOutputManager`` -- is tested in ``tests/engines/test_vllm_engine.py``
(``make test-engines``). These tests run in the main environment, where vLLM is not
installed, and pin the semantics vLLM 0.33's manager relies on (its xgrammar backend's):

* ``accept_tokens`` on a terminated grammar returns True and ignores the tokens; a chunk
  stops at the token that terminates the grammar;
* ``compile_grammar(..., stop_token_ids=...)``: the request's stop ids are allowed exactly
  where the grammar may end, and end it;
* ``_fill_bitmasks`` entries are ``(grammar, row, apply_bitmask, masked_ids)``: rows that do
  not apply allow every token except ``masked_ids``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import corral
from slow_fill import AMBIGUOUS, SLOW_TEXT
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
            assert "vLLM 0.33.0" in str(e), e
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


def test_plugin_does_nothing_unless_asked(monkeypatch):
    """The entry point corral installs must not take over vLLM unless CORRAL_VLLM=1."""
    monkeypatch.delenv("CORRAL_VLLM", raising=False)
    corral.vllm.vllm_plugin()  # no vLLM here: would raise if it tried to patch
    monkeypatch.setenv("CORRAL_VLLM", "1")
    if not VLLM_AVAILABLE:
        with pytest.raises(corral.UsageError):
            corral.vllm.vllm_plugin()


def test_compile_grammar_accepts_stop_token_ids(backend, vocab):
    """vLLM 0.33 calls compile_grammar(kind, spec, stop_token_ids=...): this raised TypeError
    before the adapter knew the keyword."""
    g = backend.compile_grammar(StructuredOutputOptions.REGEX, r"(yes|no)!", stop_token_ids={EOS})
    assert g.stop_ids is None  # the vocabulary's own EOS set: nothing to fix
    assert g.accept_tokens("r", vocab.encode(b"no!") + [EOS]) and g.is_terminated()


def test_stop_ids_masked_until_the_grammar_can_end(backend, vocab):
    """A user stop id (here the token for "." and an id past the text tokens) is allowed
    exactly where the grammar may end; the vocabulary's EOS is not a stop id of this request,
    so it is never allowed; accepting a stop id terminates; rollback undoes it."""
    dot = vocab.encode(b".")[0]
    g = backend.compile_grammar(StructuredOutputOptions.REGEX, r"(yes|no)!", stop_token_ids=[dot, 13])
    assert g.stop_ids == frozenset({dot, 13})
    bm = backend.allocate_token_bitmask(1)
    g.fill_bitmask(bm, 0)
    allowed = set(corral.allowed_token_ids(bm[0], V))
    assert dot not in allowed and 13 not in allowed and EOS not in allowed
    assert g.accept_tokens("r", vocab.encode(b"no"))
    assert g.validate_tokens([dot]) == []
    assert g.accept_tokens("r", vocab.encode(b"!"))
    g.fill_bitmask(bm, 0)
    assert corral.allowed_token_ids(bm[0], V) == sorted({dot, 13})
    assert g.validate_tokens([13, dot]) == [13]
    assert g.validate_tokens([EOS]) == []
    n = g.num_processed_tokens
    assert g.accept_tokens("r", [dot, dot]) and g.is_terminated() and g.num_processed_tokens == n + 1
    g.rollback(1)
    assert not g.is_terminated() and g.num_processed_tokens == n
    assert g.accept_tokens("r", [EOS]) is False and not g.is_terminated()
    batch = backend.allocate_token_bitmask(2)
    CorralBackend.fill_bitmasks([(g, 1, True, ())], batch)
    assert corral.allowed_token_ids(batch[1], V) == sorted({dot, 13})


def test_terminated_grammar_ignores_tokens(backend, vocab):
    """vLLM 0.33: accept_tokens on a terminated grammar returns True and changes nothing;
    fill_bitmask gives all ones, validate_tokens gives []; rollback un-terminates."""
    g = backend.compile_grammar(StructuredOutputOptions.REGEX, r"(yes|no)!")
    assert g.accept_tokens("r", vocab.encode(b"no!") + [EOS])
    n = len(vocab.encode(b"no!")) + 1
    assert g.is_terminated() and g.num_processed_tokens == n
    assert g.accept_tokens("r", [EOS]) is True and g.num_processed_tokens == n
    assert g.validate_tokens([EOS]) == []
    m = backend.allocate_token_bitmask(2)
    m[1] = 0
    g.fill_bitmask(m, 1)
    assert int((m[1] != -1).sum()) == 0
    g.rollback(1)
    assert not g.is_terminated() and g.validate_tokens([EOS, EOS]) == [EOS]
    g.reset()
    assert g.num_processed_tokens == 0 and not g.is_terminated()
    assert g.accept_tokens("r", vocab.encode(b"maybe")) is False
    assert g.matcher.num_accepted == 0


def test_accept_stops_at_termination_within_a_chunk(backend, vocab):
    g = backend.compile_grammar(StructuredOutputOptions.REGEX, r"(yes|no)!")
    ids = vocab.encode(b"yes!")
    trailing = vocab.encode(b" ")[0]
    assert g.accept_tokens("r", ids + [EOS, trailing, trailing])
    assert g.is_terminated() and g.num_processed_tokens == len(ids) + 1
    assert g.matcher.num_accepted == len(ids) + 1
    g.rollback(0)
    g.rollback(-1)
    assert g.is_terminated()


def test_fill_bitmasks_takes_vllm_033_entries(backend, vocab):
    """vLLM 0.33's _fill_bitmasks passes (grammar, index, apply_bitmask, masked_ids): the
    adapter unpacked three and raised ValueError. Rows that apply equal single fills; rows
    that do not allow everything but masked_ids."""
    texts = [b"", b'{"na', b'{"name": "x', b'{"name": "x", "age": 1', b'{"name": "x", "age": 1}']
    gs = []
    for t in texts:
        g = backend.compile_grammar(StructuredOutputOptions.GRAMMAR, PERSON)
        assert g.accept_tokens("r", vocab.encode(t))
        gs.append(g)
    assert gs[4].accept_tokens("r", [EOS])
    masked = (vocab.encode(b"{")[0], 100, EOS)
    batch = [(gs[0], 0, True, ()), (gs[1], 1, True, ()), (gs[2], 2, False, masked), (gs[3], 3, True, ()), (gs[4], 4, True, ())]
    bm = backend.allocate_token_bitmask(5)
    bm.fill_(0)
    CorralBackend.fill_bitmasks(batch, bm)
    single = backend.allocate_token_bitmask(5)
    for g, i, apply, _ in batch:
        if apply:
            g.fill_bitmask(single, i)
    assert torch.equal(bm[[0, 1, 3, 4]], single[[0, 1, 3, 4]])
    assert set(range(V)) - set(corral.allowed_token_ids(bm[2], V)) == set(masked)
    assert int((bm[4] != -1).sum()) == 0
    npm = np.zeros((1, bm.shape[1]), dtype=np.int32)
    CorralBackend.fill_bitmasks([(gs[0], 0, False, (5,))], npm)
    assert set(range(V)) - set(corral.allowed_token_ids(torch.from_numpy(npm[0]), V)) == {5}


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
    with pytest.raises(corral.GrammarSyntaxError):
        backend.compile_grammar(StructuredOutputOptions.GRAMMAR, "root ::= (")
    a = backend.compile_grammar(StructuredOutputOptions.REGEX, "[a-z]+")
    b = backend.compile_grammar(StructuredOutputOptions.REGEX, "[a-z]+")
    assert a.matcher.compiled is b.matcher.compiled and a.matcher is not b.matcher
    schema = '{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}'
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


def test_grammar_kind_is_told_apart_as_vllm_does():
    """A GRAMMAR without ``::=`` outside comments is Lark (vLLM's grammar_is_likely_lark)."""
    from corral.vllm import _likely_lark

    assert _likely_lark('start: "a"') and _likely_lark('start: "a" // x ::= y')
    assert not _likely_lark('root ::= "a"') and not _likely_lark('# c\nroot ::= "a"')


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


def test_validate_tokens_does_not_advance(backend, vocab):
    g = backend.compile_grammar(StructuredOutputOptions.GRAMMAR, LIST)
    ids = vocab.encode(b"[1,2]")
    assert g.validate_tokens(ids + [EOS, EOS]) == ids + [EOS]
    assert g.matcher.num_accepted == 0 and g.num_processed_tokens == 0
    assert g.validate_tokens([]) == []
    assert isinstance(np.asarray(backend.allocate_token_bitmask(2)), np.ndarray)


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
    assert slow.is_terminated() and slow.accept_tokens("slow", [EOS])
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
