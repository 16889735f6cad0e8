"""corral.sglang: the SGLang grammar backend, without SGLang.

These unit tests run in the main environment, where SGLang is not installed; the module then
subclasses local stand-ins with SGLang 0.5.23's method names. They replay the call sequences
SGLang 0.5.23's scheduler makes (``tests/engines/test_sglang_engine.py`` drives the installed
SGLang's own classes instead):

* compilation (``GrammarManager``): ``get_cached_or_future_value(key, require_reasoning)`` ->
  future -> ``result()`` -> ``set_cache(key, grammar.copy())``; a later request with the same
  key gets ``copy()``;
* each decode step (``SamplingBatchInfo.update_regex_vocab_mask``): ``allocate_vocab_mask``,
  ``fill_vocab_mask_batched([GrammarRow(row, grammar), ...], mask)`` for grammars that are
  neither ``finished`` nor terminated, ``move_vocab_mask``, ``apply_vocab_mask(logits, mask)``;
  then ``accept_token`` per request;
* speculative decoding (``traverse_tree`` in SGLang's ``spec_utils``): depth-first over the
  draft tree, accept_token / fill_vocab_mask / rollback(1), skipping drafts the parent row
  disallows;
* jump-forward (the grammar object's methods; the 0.5.23 scheduler no longer calls them):
  ``try_jump_forward`` -> ``jump_forward_str_state`` -> retokenize ->
  ``jump_and_retokenize(old_ids, new_ids, state)``.

Every mask is compared with the mask a directly driven :class:`corral.Matcher` gives.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from typing import Any, NamedTuple

import pytest
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import corral
from slow_fill import AMBIGUOUS, SLOW_TEXT
from corral.sglang import SGLANG_AVAILABLE, CorralGrammar, CorralGrammarBackend

V = 50257
EOS = 50256


class GrammarRow(NamedTuple):
    """SGLang 0.5.23's ``GrammarRow`` (``base_grammar_backend.py``): same fields, same order."""

    row: int
    grammar: Any

PERSON = r'root ::= "{\"name\": \"" [a-z]+ "\", \"age\": " [0-9]+ "}"'
LIST = r'root ::= "[" [0-9] ("," [0-9]){0,3} "]"'


@pytest.fixture(scope="module")
def vocab():
    return corral.builtin_vocabulary()


@pytest.fixture(scope="module")
def backend(vocab):
    return CorralGrammarBackend(vocab)


def direct_mask(compiled, ids):
    m = corral.Matcher(compiled)
    for t in ids:
        assert m.accept_token(t)
    mask = corral.allocate_token_bitmask(1, V)
    if not m.is_terminated():
        m.fill_next_token_bitmask(mask, 0)
    return mask[0]


def allowed(row, t):
    return bool((int(row[t // 32]) >> (t % 32)) & 1)


def refused(call, error, needle):
    """A request corral refuses: without SGLang the corral error is raised; with SGLang
    installed it is SGLang's InvalidGrammarObject carrying corral's message."""
    if not SGLANG_AVAILABLE:
        with pytest.raises(error, match=re.escape(needle)):
            call()
        return
    from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject

    g = call()
    assert isinstance(g, InvalidGrammarObject) and needle in g.error_message and "corral" in g.error_message


def compile_via_cache(backend, key):
    """SGLang's grammar manager: future on a miss, then set_cache(key, grammar.copy())."""
    value, hit = backend.get_cached_or_future_value(key, False)
    if hit:
        return value, True
    grammar = value.result()
    backend.set_cache(key, grammar.copy())
    return grammar, False


def test_module_imports_without_sglang_and_register_names_it():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["sglang"] = None          # as if SGLang were not installed
        import corral, corral.sglang as s
        assert not s.SGLANG_AVAILABLE
        g = s.CorralGrammarBackend(corral.builtin_vocabulary()).dispatch_regex("a|b")
        try:
            s.register()
        except corral.UsageError as e:
            assert "SGLang" in str(e) and "sglang" in str(e) and "0.5.23" in str(e), e
            print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


@pytest.mark.skipif(SGLANG_AVAILABLE, reason="SGLang is installed")
def test_register_without_sglang_raises():
    with pytest.raises(corral.UsageError, match="SGLang"):
        corral.sglang.register()


def test_scheduler_replay_masks_match_direct_matcher(backend, vocab):
    """Three requests (two share a grammar key: the second is a cache hit) decoded step by
    step the way SGLang's scheduler does, sampling the argmax of masked random logits biased
    toward a target text. Each filled row equals a direct Matcher's mask; rows of finished
    requests stay all ones."""
    keys = [("ebnf", PERSON), ("regex", r"(yes|no), (maybe|never)"), ("ebnf", PERSON)]
    targets = [b'{"name": "bob", "age": 42}', b"no, never", b'{"name": "al", "age": 7}']
    grammars, hits = [], []
    for key in keys:
        g, hit = compile_via_cache(backend, key)
        grammars.append(g)
        hits.append(hit)
    assert hits == [False, False, True]
    assert grammars[0] is not grammars[2] and grammars[0].matcher is not grammars[2].matcher
    plans = [vocab.encode(t) + [EOS] for t in targets]
    outputs = [[] for _ in keys]
    gen = torch.Generator().manual_seed(0)
    for step in range(max(map(len, plans)) + 2):
        # update_regex_vocab_mask (SGLang 0.5.23)
        mask = grammars[0].allocate_vocab_mask(vocab_size=V, batch_size=len(grammars), device="cpu")
        entries = [GrammarRow(i, g) for i, g in enumerate(grammars) if g and not g.finished and not g.is_terminated()]
        grammars[0].fill_vocab_mask_batched(entries, mask)
        mask = grammars[0].move_vocab_mask(mask, "cpu")
        for i, g in enumerate(grammars):
            if g.finished or g.is_terminated():
                assert int((mask[i] != -1).sum()) == 0, "a finished request's row must allow everything"
            else:
                expect = direct_mask(g.matcher.compiled, outputs[i])
                assert torch.equal(mask[i], expect), (i, step)
        logits = torch.randn(len(grammars), V, generator=gen)
        for i, plan in enumerate(plans):
            if len(outputs[i]) < len(plan):
                logits[i, plan[len(outputs[i])]] += 100.0
        grammars[0].apply_vocab_mask(logits=logits, vocab_mask=mask)
        nxt = logits.argmax(dim=1).tolist()
        for i, g in enumerate(grammars):
            if g.finished:
                continue
            assert torch.isfinite(logits[i, nxt[i]])
            g.accept_token(nxt[i])
            if nxt[i] == EOS:
                assert g.is_terminated()
                g.finished = True
            else:
                outputs[i].append(nxt[i])
    for i, t in enumerate(targets):
        assert b"".join(vocab.token_bytes(x) for x in outputs[i]) == t
        assert grammars[i].is_terminated()
    # accept_token after termination is a no-op (as in SGLang's xgrammar backend)
    n = grammars[0].matcher.num_accepted
    grammars[0].accept_token(vocab.encode(b"x")[0])
    assert grammars[0].matcher.num_accepted == n


def test_rejected_token_raises_and_keeps_state(backend, vocab):
    g = backend.dispatch_ebnf(LIST)
    g.accept_token(vocab.encode(b"[")[0])
    before = direct_mask(g.matcher.compiled, [vocab.encode(b"[")[0]])
    with pytest.raises(ValueError, match="not allowed"):
        g.accept_token(vocab.encode(b"x")[0])
    mask = g.allocate_vocab_mask(V, 1, "cpu")
    g.fill_vocab_mask(mask, 0)
    assert torch.equal(mask[0], before)


def eagle_traverse_tree(retrieve_next_token, retrieve_next_sibling, draft_tokens, grammar, bitmask):
    """Replay of SGLang's EAGLE ``traverse_tree``: node 0 is the token the target model
    already produced; a node is visited when its parent's row allows it."""
    bitmask.fill_(0)

    def dfs(curr, parent_pos):
        if curr == 0:
            accepted = True
        else:
            tok = draft_tokens[curr]
            accepted = allowed(bitmask[parent_pos], tok)
        if accepted:
            if curr != 0:
                grammar.accept_token(draft_tokens[curr])
            if not grammar.is_terminated():
                grammar.fill_vocab_mask(bitmask, curr)
                if retrieve_next_token[curr] != -1:
                    dfs(retrieve_next_token[curr], curr)
            if curr != 0:
                grammar.rollback(1)
        if retrieve_next_sibling[curr] != -1:
            dfs(retrieve_next_sibling[curr], parent_pos)

    dfs(0, -1)


def test_eagle_draft_tree_with_rejected_drafts_and_eos(backend, vocab):
    """Draft tree after "[1": node0 = "," ; children of node0: "2" (valid), "x" (rejected)
    ; child of "2": "]" (valid) whose child is EOS (terminates: its row is not filled) ;
    sibling of "]": "," . Rows equal direct masks, rejected/terminated rows stay zero, and
    the grammar ends exactly where it started (rollback restores the mask)."""
    enc = lambda s: vocab.encode(s)[0]  # noqa: E731
    g = backend.dispatch_ebnf(LIST)
    prefix = [enc(b"["), enc(b"1")]
    for t in prefix:
        g.accept_token(t)
    start = g.allocate_vocab_mask(V, 1, "cpu")
    g.fill_vocab_mask(start, 0)
    #          0           1          2            3           4       5
    draft = [enc(b","), enc(b"2"), enc(b"x"), enc(b"]"), EOS, enc(b",")]
    nxt = [1, 3, -1, 4, -1, -1]
    sib = [-1, 2, -1, 5, -1, -1]
    g.accept_token(draft[0])  # the verified token at the root is accepted by the scheduler first
    bm = g.allocate_vocab_mask(V, len(draft), "cpu")
    eagle_traverse_tree(nxt, sib, draft, g, bm)
    comp = g.matcher.compiled
    assert torch.equal(bm[0], direct_mask(comp, prefix + draft[:1]))
    assert torch.equal(bm[1], direct_mask(comp, prefix + draft[:2]))
    assert int(bm[2].abs().sum()) == 0  # "x" rejected by row 1... (its parent is node 0)
    assert torch.equal(bm[3], direct_mask(comp, prefix + [draft[0], draft[1], draft[3]]))
    assert int(bm[4].abs().sum()) == 0  # EOS terminated the grammar: no row
    assert torch.equal(bm[5], direct_mask(comp, prefix + [draft[0], draft[1], draft[5]]))
    assert not g.is_terminated()
    g.rollback(1)  # undo the root token: back to the start state
    again = g.allocate_vocab_mask(V, 1, "cpu")
    g.fill_vocab_mask(again, 0)
    assert torch.equal(again, start)


def test_rollback_restores_masks_and_termination(backend, vocab):
    g = backend.dispatch_regex(r"ab|abc")
    ids = vocab.encode(b"ab")
    masks = []
    for t in ids + [EOS]:
        m = g.allocate_vocab_mask(V, 1, "cpu")
        g.fill_vocab_mask(m, 0)
        masks.append(m.clone())
        g.accept_token(t)
    assert g.is_terminated()
    for k in range(len(masks) - 1, -1, -1):
        g.rollback(1)
        assert not g.is_terminated()
        m = g.allocate_vocab_mask(V, 1, "cpu")
        g.fill_vocab_mask(m, 0)
        assert torch.equal(m, masks[k])
    with pytest.raises(corral.UsageError):
        g.rollback(1)


def test_copy_is_independent(backend, vocab):
    g = backend.dispatch_ebnf(PERSON)
    for t in vocab.encode(b'{"name": "b'):
        g.accept_token(t)
    c = g.copy()
    m1 = g.allocate_vocab_mask(V, 2, "cpu")
    g.fill_vocab_mask(m1, 0)
    c.fill_vocab_mask(m1, 1)
    assert torch.equal(m1[0], m1[1])
    for t in vocab.encode(b'ob", "age'):
        c.accept_token(t)
    m2 = g.allocate_vocab_mask(V, 1, "cpu")
    g.fill_vocab_mask(m2, 0)
    assert torch.equal(m2[0], m1[0])
    assert c.accepted_tokens[: len(g.accepted_tokens)] == g.accepted_tokens


def test_jump_forward_and_retokenize(backend, vocab):
    """SGLang's jump-forward: the forced text is appended, the output retokenized, and the
    grammar rolled back to the common prefix and fed the new ids. Here the old output is a
    non-canonical split ("he" "llo") so the retokenized ids share no prefix with it."""
    g = backend.dispatch_ebnf(r'root ::= "hello" ", \"world\": " [0-9]+')
    old = vocab.encode(b"he") + vocab.encode(b"llo")
    assert len(old) == 2
    for t in old:
        g.accept_token(t)
    helper = g.try_jump_forward(tokenizer=None)
    assert helper is not None
    ids, text = helper
    assert text == ', "world": '
    forced = b"".join(vocab.token_bytes(i) for i in ids)
    assert forced and text.encode().startswith(forced)  # canonical tokens of a forced prefix
    jump_str, state = g.jump_forward_str_state(helper)
    assert jump_str == text
    new = vocab.encode(b"hello" + jump_str.encode())
    g.jump_and_retokenize(old, new, state)
    assert g.accepted_tokens == new
    m = g.allocate_vocab_mask(V, 1, "cpu")
    g.fill_vocab_mask(m, 0)
    assert torch.equal(m[0], direct_mask(g.matcher.compiled, new))
    assert g.try_jump_forward(None) is None  # digits: nothing forced


def test_batch_fill_matches_single_fills(backend, vocab):
    gs = [backend.dispatch_ebnf(PERSON) for _ in range(5)]
    texts = [b"", b'{"na', b'{"name": "x', b'{"name": "x", "age": 1', b'{"name": "x", "age": 1}']
    for g, t in zip(gs, texts):
        for i in vocab.encode(t):
            g.accept_token(i)
    gs[2].finished = True
    gs[4].accept_token(EOS)
    batch = gs[0].allocate_vocab_mask(V, 6, "cpu")
    CorralGrammar.fill_vocab_masks([gs[0], None, gs[1], gs[2], gs[3], gs[4]], batch)
    assert torch.equal(batch[0], direct_mask(gs[0].matcher.compiled, vocab.encode(texts[0])))
    assert int((batch[1] != -1).sum()) == 0
    assert torch.equal(batch[2], direct_mask(gs[1].matcher.compiled, vocab.encode(texts[1])))
    assert int((batch[3] != -1).sum()) == 0  # finished
    assert torch.equal(batch[4], direct_mask(gs[3].matcher.compiled, vocab.encode(texts[3])))
    assert int((batch[5] != -1).sum()) == 0  # terminated


def test_apply_vocab_mask_padded_logits(backend, vocab):
    g = backend.dispatch_regex(r"(yes|no)")
    mask = g.allocate_vocab_mask(V, 1, "cpu")
    g.fill_vocab_mask(mask, 0)
    logits = torch.zeros(1, V + 63)  # padded model
    CorralGrammar.apply_vocab_mask(logits, mask)
    ok = torch.isfinite(logits[0]).nonzero().flatten().tolist()
    assert ok == corral.allowed_token_ids(mask[0], V)
    assert vocab.encode(b"yes")[0] in ok and all(t < V for t in ok)


def test_dispatchers_and_cache(backend, vocab):
    a = backend.dispatch_regex(r"[0-9]+")
    b = backend.dispatch_regex(r"[0-9]+")
    assert a.matcher.compiled is b.matcher.compiled  # compiled once, cached
    anyjson = backend.dispatch_json("$$ANY$$")
    m = anyjson.allocate_vocab_mask(V, 1, "cpu")
    anyjson.fill_vocab_mask(m, 0)
    assert allowed(m[0], vocab.encode(b"[")[0]) and allowed(m[0], vocab.encode(b"{")[0])
    refused(lambda: backend.dispatch_ebnf("root ::= ("), corral.GrammarSyntaxError, "line 1, column 10")
    key = ("regex", "z+")
    g1, hit1 = compile_via_cache(backend, key)
    g2, hit2 = compile_via_cache(backend, key)
    assert (hit1, hit2) == (False, True)
    backend.reset()
    assert backend.cache == {}


def test_json_schema_dispatch(backend, vocab):
    schema = '{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}'
    if not hasattr(corral.Grammar, "from_json_schema"):
        with pytest.raises(corral.UsageError, match="from_json_schema"):
            backend.dispatch_json(schema)
        return
    g = backend.dispatch_json(schema)
    for t in vocab.encode(b'{"a": 1}'):
        g.accept_token(t)
    g.accept_token(EOS)
    assert g.is_terminated()
    # --constrained-json-disable-any-whitespace -> compact JSON
    compact = CorralGrammarBackend(vocab, any_whitespace=False).dispatch_json(schema)
    assert compact.matcher.validate_tokens(vocab.encode(b'{"a":1}')) == len(vocab.encode(b'{"a":1}'))
    assert compact.matcher.validate_tokens(vocab.encode(b'{"a": 1}')) < len(vocab.encode(b'{"a": 1}'))
    # an invalid schema: without SGLang (no INVALID_GRAMMAR_OBJ) the corral error propagates
    refused(lambda: backend.dispatch_json('{"type": 12}'), corral.GrammarError, "type")


def test_init_backend_reads_server_args(vocab):
    class Args:
        constrained_json_disable_any_whitespace = True
        constrained_json_max_whitespace_cnt = 3
        reasoning_parser = None

    b = corral.sglang.init_backend(Args(), vocab, V, {EOS})
    assert isinstance(b, CorralGrammarBackend) and b.vocab is vocab
    assert b.any_whitespace is False and b.max_whitespace == 3


def test_batched_fill_is_one_call_and_leaves_other_rows(backend, vocab, monkeypatch):
    """``fill_vocab_mask_batched``: the listed corral rows in one native call, terminated ones
    skipped; unlisted rows untouched (here: zeros stay zeros)."""
    gs = [backend.dispatch_ebnf(LIST) for _ in range(3)]
    for t in vocab.encode(b"[1"):
        gs[1].accept_token(t)
    gs[2].accept_token(vocab.encode(b"[")[0])
    for t in vocab.encode(b"1]"):
        gs[2].accept_token(t)
    gs[2].accept_token(EOS)
    calls = []
    real = corral._native.fill_next_token_bitmask_batch
    monkeypatch.setattr(corral._native, "fill_next_token_bitmask_batch", lambda m, b, r: (calls.append(list(r)), real(m, b, r))[1])
    mask = torch.zeros(5, corral.bitmask_words(V), dtype=torch.int32)
    CorralGrammar.fill_vocab_mask_batched([GrammarRow(3, gs[0]), GrammarRow(0, gs[1]), GrammarRow(4, gs[2])], mask)
    assert calls == [[3, 0]]
    assert torch.equal(mask[3], direct_mask(gs[0].matcher.compiled, []))
    assert torch.equal(mask[0], direct_mask(gs[1].matcher.compiled, vocab.encode(b"[1")))
    assert int(mask[1].abs().sum()) == int(mask[2].abs().sum()) == int(mask[4].abs().sum()) == 0
    CorralGrammar.reset_vocab_mask(mask)
    assert bool((mask == -1).all())


def test_build_grammar_kinds(vocab):
    from corral.sglang import build_grammar

    def ok(grammar, text):
        m = corral.Matcher(corral.compile(grammar, vocab))
        return m.accept_bytes(text) and m.is_accepting()

    assert ok(build_grammar("json", "$$ANY$$"), b"[1, {}]")
    assert ok(build_grammar("ebnf", 'root ::= "a"+'), b"aaa")
    assert ok(build_grammar("full_assistant_ebnf", 'root ::= "a"+'), b"aa")
    schema = '{"type": "array", "items": {"type": "integer"}}'
    assert ok(build_grammar("json", schema, max_whitespace=2), b"[1,  2]")
    assert not ok(build_grammar("json", schema, max_whitespace=2), b"[1,   2]")
    assert not ok(build_grammar("json", schema, any_whitespace=False), b"[1, 2]")
    with pytest.raises(corral.UsageError, match="key type"):
        build_grammar("lark", "start: 'a'")


def test_structural_tag_goes_to_corral(backend):
    """``structural_tag`` requests reach :meth:`corral.Grammar.from_structural_tag` (a missing
    ``schema`` becomes ``{}`` as in SGLang's xgrammar backend); what it raises, the backend
    raises (without SGLang; with SGLang it becomes the request's InvalidGrammarObject)."""
    from corral.sglang import _sanitize_structural_tag

    legacy = {"type": "structural_tag", "structures": [{"begin": "<f>", "schema": None, "end": "</f>"}], "triggers": ["<f>"]}
    fixed = json.loads(_sanitize_structural_tag(json.dumps(legacy)))
    assert fixed["structures"][0]["schema"] == {}
    new = {"type": "structural_tag", "format": {"type": "tag", "begin": "<f>", "content": {"type": "json_schema", "json_schema": None}, "end": "</f>"}}
    assert json.loads(_sanitize_structural_tag(json.dumps(new)))["format"]["content"]["json_schema"] == {}
    spec = json.dumps(fixed)
    try:
        direct = corral.Grammar.from_structural_tag(spec)
    except corral.CorralError as e:
        refused(lambda: backend.dispatch_structural_tag(spec), type(e), str(e)[:40])
        return
    g = backend.dispatch_structural_tag(spec)
    m = corral.Matcher(corral.compile(direct, g.vocab))
    text = b'say <f>{"a": 1}</f>'
    assert m.accept_bytes(text) and g.matcher.accept_bytes(text) and g.matcher.is_accepting() == m.is_accepting()


def test_fill_past_budget_ends_only_that_request(backend, vocab, caplog):
    """A fill past ``max_fill_ms`` in the scheduler's batch does not raise: its row allows only
    EOS, the grammar reports itself terminated (EOS is then accepted silently, copies keep the
    state), and the other rows are filled."""
    tight = corral.compile(corral.Grammar.from_ebnf(AMBIGUOUS, limits={"max_fill_ms": 1}), vocab)
    slow = CorralGrammar(corral.Matcher(tight), vocab)
    for t in vocab.encode(SLOW_TEXT):
        slow.accept_token(t)
    fine = compile_via_cache(backend, ("ebnf", LIST))[0]
    mask = fine.allocate_vocab_mask(V, 2, "cpu")
    with caplog.at_level("ERROR", logger="corral"):
        CorralGrammar.fill_vocab_masks([slow, fine], mask)
    assert corral.allowed_token_ids(mask[0], V) == [EOS] and "max_fill_ms" in caplog.text
    assert torch.equal(mask[1], direct_mask(fine.matcher.compiled, []))
    assert slow.is_terminated() and slow.copy().is_terminated()
    slow.accept_token(EOS)  # what the scheduler does with the sampled EOS: no error
    single = CorralGrammar(corral.Matcher(tight), vocab)
    for t in vocab.encode(SLOW_TEXT):
        single.accept_token(t)
    one = fine.allocate_vocab_mask(V, 1, "cpu")
    single.fill_vocab_mask(one, 0)
    assert corral.allowed_token_ids(one[0], V) == [EOS] and single.is_terminated()
