"""corral inside SGLang 0.5.23, installed, driven through its own classes (``make test-engines``).

``--grammar-backend corral`` after :func:`corral.sglang.register`: requests are SGLang ``Req``
objects whose ``SamplingParams`` carry ``json_schema`` / ``regex`` / ``ebnf`` /
``structural_tag``; SGLang's ``GrammarManager`` builds the backend through its registry,
queues the compiles and hands the requests back as its scheduler loop does; each decode step
is SGLang's ``SamplingBatchInfo.update_regex_vocab_mask`` (``fill_vocab_mask_batched``) and
``apply_logits_bias`` on CPU logits. Every mask row SGLang builds is compared with the row a
corral matcher computes directly at the same position (see ``sglang_harness.py`` for what is
built and how).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
torch = pytest.importorskip("torch")

sglang = pytest.importorskip("sglang", reason="SGLang is not installed here (make test-engines runs these)")

import corral  # noqa: E402
import corral.sglang as cs  # noqa: E402

from .sglang_harness import MODEL_VOCAB, Server, allowed, run_engine, write_gpt2_model, write_model  # noqa: E402
from slow_fill import AMBIGUOUS, SLOW_TEXT  # noqa: E402

if sglang.__version__ not in cs.SUPPORTED_SGLANG_VERSIONS:
    pytest.skip(f"SGLang {sglang.__version__} is not a supported version", allow_module_level=True)

EOS = 50256
ALL = set(range(MODEL_VOCAB))
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]},
        "strict": True,
    },
}


def _structural_tags_unsupported() -> bool:
    """True while this corral build's Grammar.from_structural_tag refuses every input (the
    grammar-formats work is not merged yet)."""
    probes = [
        {"structures": [{"begin": "<a>", "schema": {"type": "integer"}, "end": "</a>"}], "triggers": ["<a>"]},
        {"type": "structural_tag", "format": {"type": "const_string", "value": "x"}},
    ]
    for p in probes:
        try:
            corral.Grammar.from_structural_tag(json.dumps(p))
            return False
        except corral.UnsupportedGrammarError:
            continue
        except corral.CorralError:
            return False
    return True


needs_structural_tags = pytest.mark.xfail(
    _structural_tags_unsupported(), reason="needs Grammar.from_structural_tag (grammar-formats issue)", strict=False
)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    cs.register()
    return write_model(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def server(model):
    return Server.build(model, grammar_backend="corral")


@pytest.fixture(scope="module")
def vocab(server):
    return corral.Vocabulary.from_huggingface(server.tokenizer, vocab_size=MODEL_VOCAB)


class Direct:
    """A corral matcher built without SGLang, for the rows SGLang must build."""

    def __init__(self, grammar, vocab):
        self.m = corral.Matcher(corral.compile(grammar, vocab))

    def row(self) -> set[int]:
        mask = corral.allocate_token_bitmask(1, MODEL_VOCAB)
        self.m.fill_next_token_bitmask(mask, 0)
        return allowed(mask[0].numpy())

    def accept(self, t: int) -> None:
        assert self.m.accept_token(t), t


def finite(info, n: int) -> list[set[int]]:
    """``apply_logits_bias`` (the grammar mask applied by SGLang's ``GrammarMask``) on zero CPU
    logits: the ids left finite, per row."""
    logits = torch.zeros(n, MODEL_VOCAB)
    info.apply_logits_bias(logits)
    return [set(torch.isfinite(logits[i]).nonzero().flatten().tolist()) for i in range(n)]


def walk(server, req, direct: Direct, tokens: list[int], end: int = EOS) -> None:
    """Decodes ``tokens`` then ``end`` the way the scheduler does; each row SGLang builds equals
    the direct matcher's, the masked logits leave exactly that row, and it allows the token."""
    for t in tokens + [end]:
        info, mask = server.step_mask([req])
        row = allowed(mask[0])
        assert row == direct.row()
        assert finite(info, 1)[0] == row
        assert t in row, (t, server.tokenizer.decode([t]))
        server.accept(req, t)
        if t != end:
            direct.accept(t)
    assert req.grammar.is_terminated() and req.finished() and req.grammar.finished


# ----------------------------------------------------------------------------- the backend


def test_registered_backend_is_built_by_sglang(server, model):
    """``create_grammar_backend`` finds corral in SGLang's registry; ``--grammar-backend
    corral`` parses with SGLang's own CLI parser."""
    import argparse

    from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES
    from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY
    from sglang.srt.server_args import ServerArgs

    assert GRAMMAR_BACKEND_REGISTRY["corral"] is cs.init_backend
    assert type(server.backend) is cs.CorralGrammarBackend
    assert "corral" in GRAMMAR_BACKEND_CHOICES
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    ns = parser.parse_args(["--model-path", str(model), "--grammar-backend", "corral"])
    assert ns.grammar_backend == "corral"


@pytest.mark.parametrize(
    "kind,spec,text",
    [
        ("json_schema", json.dumps(PERSON), '{"name": "Ada", "age": 36}'),
        # response_format {"type": "json_object"}: SGLang's OpenAI layer sends this schema
        ("json_schema", '{"type": "object"}', '{"k": [1, {"x": null}]}'),
        ("regex", r"(yes|no)[!?]", "no?"),
        ("ebnf", 'root ::= "(" [a-z]+ ")"', "(abc)"),
        ("ebnf_full_assistant", 'root ::= "<tool_call>" [a-z]+ "</tool_call>"', "<tool_call>abc</tool_call>"),
    ],
    ids=["json_schema", "json_object", "regex", "ebnf", "full_assistant_ebnf"],
)
def test_request_kinds_rows_equal_direct_matchers(server, vocab, kind, spec, text):
    if kind == "ebnf_full_assistant":
        req = server.make_req(ebnf=spec, ebnf_full_assistant=True)
    else:
        req = server.make_req(**{kind: spec})
    (req,) = server.submit(req)
    assert isinstance(req.grammar, cs.CorralGrammar) and req.to_finish is None
    if kind == "json_schema":
        grammar = corral.Grammar.from_json_schema(spec)
    elif kind == "regex":
        grammar = corral.Grammar.from_regex(spec)
    else:
        grammar = corral.Grammar.from_ebnf(spec)
    walk(server, req, Direct(grammar, vocab), server.encode(text))


def test_cache_hit_is_a_fresh_copy(server, vocab):
    """The second request with the same key is SGLang's cache hit (``value.copy()``): its own
    state, at the start."""
    a = server.make_req(regex="[0-9]{3}")
    server.submit(a)
    server.accept(a, server.encode("1")[0])
    b = server.make_req(regex="[0-9]{3}")
    assert server.manager.process_req_with_grammar(b) is False  # no queue: a cache hit
    assert isinstance(b.grammar, cs.CorralGrammar) and b.grammar is not a.grammar
    assert b.grammar.grammar_stats.is_cache_hit
    _, mask = server.step_mask([a, b])
    d = Direct(corral.Grammar.from_regex("[0-9]{3}"), vocab)
    assert allowed(mask[1]) == d.row()
    d.accept(server.encode("1")[0])
    assert allowed(mask[0]) == d.row()


def test_batch_is_one_parallel_corral_call(server, vocab, monkeypatch):
    """A batch of mixed requests: ``update_regex_vocab_mask`` reaches corral's own
    ``fill_vocab_mask_batched``, which fills every constrained row in ONE
    ``fill_next_token_bitmask_batch`` call (no per-row ``fill_vocab_mask``); rows of a request
    without a grammar and of a terminated one stay all ones."""
    specs = [
        ({"json_schema": json.dumps(PERSON)}, corral.Grammar.from_json_schema(PERSON), '{"name": "'),
        ({"regex": "[a-c]+d"}, corral.Grammar.from_regex("[a-c]+d"), "ab"),
        ({"ebnf": 'root ::= "x" [0-9]*'}, corral.Grammar.from_ebnf('root ::= "x" [0-9]*'), ""),
        ({}, None, "free text"),
        ({"json_schema": json.dumps(PERSON)}, corral.Grammar.from_json_schema(PERSON), '{"age": 3'),
        ({"regex": "ok"}, corral.Grammar.from_regex("ok"), "ok"),
    ]
    reqs, directs = [], []
    for params, grammar, text in specs:
        req = server.make_req(**params)
        server.submit(req)
        d = Direct(grammar, vocab) if grammar is not None else None
        for t in server.encode(text):
            server.accept(req, t)
            if d is not None:
                d.accept(t)
        reqs.append(req)
        directs.append(d)
    server.accept(reqs[5], EOS)  # terminated
    assert reqs[5].grammar.is_terminated() and reqs[3].grammar is None

    calls = []
    real = corral._native.fill_next_token_bitmask_batch

    def counting(matchers, bitmask, rows):
        calls.append(list(rows))
        return real(matchers, bitmask, rows)

    def per_row(*a, **k):
        raise AssertionError("per-row fill_vocab_mask used")

    monkeypatch.setattr(corral._native, "fill_next_token_bitmask_batch", counting)
    monkeypatch.setattr(cs.CorralGrammar, "fill_vocab_mask", per_row)
    info, mask = server.step_mask(reqs)
    assert type(info.grammar_mask.grammar).fill_vocab_mask_batched is cs._fill_batched
    assert calls == [[0, 1, 2, 4]]
    rows = [allowed(r) for r in mask]
    for i, d in enumerate(directs):
        assert rows[i] == (ALL if i in (3, 5) else d.row()), i
    assert finite(info, len(reqs)) == rows


def test_termination_then_rows_unconstrained(server, vocab):
    """EOS where the grammar may end finishes the request (SGLang's own finish check) and
    terminates the grammar; later tokens are ignored, as for xgrammar."""
    req = server.make_req(regex="ab|abc")
    server.submit(req)
    d = Direct(corral.Grammar.from_regex("ab|abc"), vocab)
    walk(server, req, d, server.encode("ab"))
    n = req.grammar.matcher.num_accepted
    req.grammar.accept_token(server.encode("c")[0])
    assert req.grammar.matcher.num_accepted == n
    # a rejected token aborts only its request (BatchResultProcessor's ValueError path)
    bad = server.make_req(regex="ab")
    other = server.make_req(regex="ab")
    server.submit(bad, other)
    server.accept(bad, server.encode("x")[0])
    bad.update_finish_state(0)
    assert bad.finished() and "not allowed" in bad.finished_reason.message
    _, mask = server.step_mask([other])
    assert allowed(mask[0]) == Direct(corral.Grammar.from_regex("ab"), vocab).row()


def test_rollback_through_sglangs_speculative_tree(server, vocab):
    """SGLang's ``generate_token_bitmask`` (EAGLE's draft tree: accept_token / fill_vocab_mask /
    rollback(1) depth first): each visited node's row equals a direct matcher's at that node,
    a draft the parent row rejects is skipped, a draft EOS terminates (no row), and the grammar
    ends where it started. Then rollback over EOS un-terminates."""
    from sglang.srt.speculative.spec_utils import generate_token_bitmask

    req = server.make_req(ebnf='root ::= "[" [0-9] ("," [0-9]){0,3} "]"')
    server.submit(req)
    enc = lambda s: server.encode(s)[0]  # noqa: E731
    prefix = [enc("["), enc("1")]
    for t in prefix:
        server.accept(req, t)
    #          0         1         2         3         4     5
    draft = [enc(","), enc("2"), enc("x"), enc("]"), EOS, enc(",")]
    nxt = [1, 3, -1, 4, -1, -1]
    sib = [-1, 2, -1, 5, -1, -1]
    req.grammar.accept_token(draft[0])  # the verified root token
    before = Direct(corral.Grammar.from_ebnf('root ::= "[" [0-9] ("," [0-9]){0,3} "]"'), vocab)
    for t in prefix + draft[:1]:
        before.accept(t)
    bitmask, grammar = generate_token_bitmask(
        [req], torch.tensor([nxt]), torch.tensor([sib]), torch.tensor([draft]), MODEL_VOCAB
    )
    assert grammar is req.grammar
    rows = [allowed(r) for r in bitmask.numpy()]

    def at(path):
        d = Direct(corral.Grammar.from_ebnf('root ::= "[" [0-9] ("," [0-9]){0,3} "]"'), vocab)
        for t in prefix + path:
            d.accept(t)
        return d.row()

    assert rows[0] == at(draft[:1])
    assert rows[1] == at(draft[:2])
    assert rows[2] == ALL  # "x" is not in row 0: never visited
    assert rows[3] == at([draft[0], draft[1], draft[3]])
    assert rows[4] == ALL  # EOS terminated the grammar: no row filled
    assert rows[5] == at([draft[0], draft[1], draft[5]])
    assert not req.grammar.is_terminated() and req.grammar.accepted_tokens == prefix + draft[:1]
    _, mask = server.step_mask([req])
    assert allowed(mask[0]) == before.row()
    # rollback over EOS
    for t in [enc("2"), enc("]"), EOS]:
        req.grammar.accept_token(t)
    assert req.grammar.is_terminated()
    req.grammar.rollback(1)
    assert not req.grammar.is_terminated()
    req.grammar.rollback(2)
    _, mask = server.step_mask([req])
    assert allowed(mask[0]) == before.row()


def test_jump_forward_methods(server, vocab):
    """The 0.5.23 scheduler no longer calls jump-forward; the grammar object's methods keep
    SGLang's contract: forced text, then retokenize and ``jump_and_retokenize``."""
    spec = 'root ::= "hello" ", \\"world\\": " [0-9]+'
    req = server.make_req(ebnf=spec)
    server.submit(req)
    g = req.grammar
    old = server.encode("he") + server.encode("llo")
    for t in old:
        server.accept(req, t)
    helper = g.try_jump_forward(server.tokenizer)
    assert helper is not None
    ids, text = helper
    assert text == ', "world": '
    assert ids and text.startswith(server.tokenizer.decode(ids))
    jump_str, state = g.jump_forward_str_state(helper)
    new = server.encode("hello" + jump_str)
    g.jump_and_retokenize(old, new, state)
    assert g.accepted_tokens == new
    d = Direct(corral.Grammar.from_ebnf(spec), vocab)
    for t in new:
        d.accept(t)
    _, mask = server.step_mask([req])
    assert allowed(mask[0]) == d.row()
    assert g.try_jump_forward(server.tokenizer) is None  # digits: nothing forced


@pytest.mark.parametrize(
    "params,needle",
    [
        ({"json_schema": json.dumps({"type": "object", "properties": {"a": {"type": "string", "format": "hostname", "maxLength": 10}}})}, "/properties/a"),
        ({"json_schema": '{"type": "object", "properties": {'}, "JSON"),
        ({"ebnf": 'root ::= "a" undefined_rule'}, "undefined_rule"),
        ({"ebnf": 'root ::= "a" (\n'}, "line 1"),
        ({"regex": "a(b"}, "regex"),
    ],
    ids=["schema-pointer", "schema-syntax", "ebnf-rule", "ebnf-linecol", "regex"],
)
def test_refused_request_aborts_alone(server, vocab, params, needle):
    """A request corral refuses becomes SGLang's ``InvalidGrammarObject`` with corral's
    message: the manager aborts that request (``Failed to compile ...: corral: ...``), the
    others in the same queue are served; the same key again is a cached invalid grammar."""
    good = server.make_req(regex="[0-9]+")
    bad = server.make_req(**params)
    good2 = server.make_req(json_schema=json.dumps(PERSON))
    server.submit(good, bad, good2)
    assert bad.grammar is None and bad.to_finish is not None
    msg = bad.to_finish.message
    assert msg.startswith("Failed to compile") and "corral" in msg and needle in msg, msg
    again = server.make_req(**params)
    server.submit(again)
    assert again.to_finish is not None and again.to_finish.message == msg
    _, mask = server.step_mask([good, good2])
    assert allowed(mask[0]) == Direct(corral.Grammar.from_regex("[0-9]+"), vocab).row()
    assert allowed(mask[1]) == Direct(corral.Grammar.from_json_schema(PERSON), vocab).row()


def test_fill_past_its_budget_ends_only_that_request(server, vocab, caplog):
    """A grammar whose fill runs past its ``max_fill_ms`` inside SGLang's batch fill: no
    exception out of ``update_regex_vocab_mask``; its row allows only EOS (SGLang's own finish
    check then ends the request), the other rows are filled."""
    tight = corral.compile(corral.Grammar.from_ebnf(AMBIGUOUS, limits={"max_fill_ms": 1}), vocab)
    slow = server.make_req(regex="[a-z ]+")
    fine = server.make_req(regex="[0-9]+")
    server.submit(slow, fine)
    slow.grammar = cs.CorralGrammar(corral.Matcher(tight), vocab, ("ebnf", AMBIGUOUS))
    for t in server.encode(SLOW_TEXT):
        server.accept(slow, t)
    with caplog.at_level("ERROR", logger="corral"):
        info, mask = server.step_mask([slow, fine])
    assert allowed(mask[0]) == {EOS} and "max_fill_ms" in caplog.text
    assert allowed(mask[1]) == Direct(corral.Grammar.from_regex("[0-9]+"), vocab).row()
    assert finite(info, 2)[0] == {EOS}
    server.accept(slow, EOS)
    assert slow.finished() and slow.grammar.is_terminated()


# ----------------------------------------------------------------------------- options


def test_json_whitespace_options_pass_through(model, vocab):
    """``--constrained-json-disable-any-whitespace``: compact JSON; ``--constrained-json-max-
    whitespace-cnt N``: at most N whitespace characters in a row (corral's max_whitespace)."""
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    compact = Server.build(model, grammar_backend="corral", constrained_json_disable_any_whitespace=True)
    assert compact.backend.any_whitespace is False
    (r,) = compact.submit(compact.make_req(json_schema=schema))
    walk(compact, r, Direct(corral.Grammar.from_json_schema(schema, whitespace="compact"), vocab), compact.encode('{"a":1}'))
    bounded = Server.build(model, grammar_backend="corral", constrained_json_max_whitespace_cnt=2)
    assert bounded.backend.max_whitespace == 2
    (r,) = bounded.submit(bounded.make_req(json_schema=schema))
    d = Direct(corral.Grammar.from_json_schema(schema, max_whitespace=2), vocab)
    sp = bounded.encode(" ")[0]
    walk(bounded, r, d, bounded.encode("{") + [sp, sp] + bounded.encode('"a": 1}'))
    (r2,) = bounded.submit(bounded.make_req(json_schema=schema))
    for t in bounded.encode("{") + [sp, sp]:
        bounded.accept(r2, t)
    _, mask = bounded.step_mask([r2])
    assert sp not in allowed(mask[0])


# ----------------------------------------------------------------------------- reasoning


@pytest.mark.parametrize("parser", ["deepseek-r1", "qwen3"])
def test_reasoning_unconstrained_until_think_end(model, vocab, parser, monkeypatch):
    """``--reasoning-parser``: SGLang does not wrap registered backends, so corral's
    ``init_backend`` wraps itself in SGLang's own ``ReasonerGrammarBackend``: a reasoning
    request's rows allow everything until ``</think>``, then the grammar applies; a request
    without reasoning is constrained from its first token; both rows come from the one
    parallel corral call."""
    from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarBackend, ReasonerGrammarObject

    s = Server.build(model, grammar_backend="corral", reasoning_parser=parser)
    assert isinstance(s.backend, ReasonerGrammarBackend) and isinstance(s.backend.grammar_backend, cs.CorralGrammarBackend)
    think_end = s.tokenizer.convert_tokens_to_ids("</think>")
    assert list(s.backend.think_end_ids) == [think_end] == list(s.model_config.think_end_ids)
    thinking = s.make_req(regex="[0-9]+", require_reasoning=True)
    plain = s.make_req(regex="[0-9]+", require_reasoning=False)
    s.submit(thinking, plain)
    cached = s.make_req(regex="[0-9]+", require_reasoning=True)  # cache hit: maybe_init_reasoning
    s.submit(cached)
    for r in (thinking, plain, cached):
        assert isinstance(r.grammar, ReasonerGrammarObject) and isinstance(r.grammar.grammar, cs.CorralGrammar)
    calls = []
    real = corral._native.fill_next_token_bitmask_batch
    monkeypatch.setattr(corral._native, "fill_next_token_bitmask_batch", lambda m, b, r: (calls.append(list(r)), real(m, b, r))[1])
    fresh = Direct(corral.Grammar.from_regex("[0-9]+"), vocab).row()
    info, mask = s.step_mask([thinking, plain, cached])
    assert [allowed(r) for r in mask] == [ALL, fresh, ALL] == finite(info, 3)
    assert calls == [[1]]
    for t in s.encode("let me think 12 abc"):
        s.accept(thinking, t)
        assert allowed(s.step_mask([thinking])[1][0]) == ALL
    s.accept(thinking, think_end)
    d = Direct(corral.Grammar.from_regex("[0-9]+"), vocab)
    calls.clear()
    _, mask = s.step_mask([thinking, plain])
    assert [allowed(r) for r in mask] == [d.row(), fresh] and calls == [[0, 1]]
    walk(s, thinking, d, s.encode("42"))
    # rolling back over the think-end token reopens the reasoning
    cached_ids = s.encode("hmm") + [think_end] + s.encode("7")
    for t in cached_ids:
        s.accept(cached, t)
    cached.grammar.rollback(2)
    assert allowed(s.step_mask([cached])[1][0]) == ALL


def test_strict_thinking_needs_token_filters(model):
    """Token filters are left at SGLang's default (unsupported): ``--enable-strict-thinking``
    with a parser that excludes tokens while thinking is refused at startup by SGLang's own
    wrapper, with its own message."""
    with pytest.raises(ValueError, match="does not support token filtering"):
        Server.build(model, grammar_backend="corral", reasoning_parser="qwen3", enable_strict_thinking=True)


# ----------------------------------------------------------------------------- tool calls


def legacy_tag(parser_name: str, choice: str) -> tuple[str, dict]:
    """The structural tag SGLang's OpenAI layer sends for strict tools (its own builder and
    serialization); these parsers build the legacy ``structures``/``triggers`` form."""
    from sglang.srt.entrypoints.openai.protocol import Tool
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.utils import convert_json_schema_to_str

    kind, value = FunctionCallParser([Tool(**WEATHER_TOOL)], parser_name).get_structure_constraint(choice)
    assert kind == "structural_tag"
    text = convert_json_schema_to_str(value.model_dump(by_alias=True))
    tag = json.loads(text)
    assert tag["structures"] and tag["triggers"], tag
    return text, tag


def accepts(grammar, vocab, text: str) -> bool:
    m = corral.Matcher(corral.compile(grammar, vocab))
    return m.accept_bytes(text.encode()) and m.is_accepting()


@needs_structural_tags
@pytest.mark.parametrize("parser_name", ["qwen25", "hermes", "llama3", "mistral"])
@pytest.mark.parametrize("choice", ["auto", "required"])
def test_tool_call_legacy_structural_tags(server, vocab, parser_name, choice):
    """Tool calls arrive as legacy structural tags: corral serves them (it refused them
    before). The call each parser expects is accepted -- after free text when the choice is
    auto -- a call with a wrong argument is not, and every row equals a direct matcher's."""
    text, tag = legacy_tag(parser_name, choice)
    req = server.make_req(structural_tag=text)
    server.submit(req)
    assert isinstance(req.grammar, cs.CorralGrammar), getattr(req.to_finish, "message", None)
    grammar = corral.Grammar.from_structural_tag(text)
    s = tag["structures"][0]
    call = s["begin"] + '{"city": "Paris"}' + s["end"]
    if choice == "auto":
        call = "Let me check the weather. " + call
    assert accepts(grammar, vocab, call), call
    assert not accepts(grammar, vocab, s["begin"] + '{"town": "Paris"}' + s["end"])
    walk(server, req, Direct(grammar, vocab), server.encode(call))


# ----------------------------------------------------------------------------- the whole engine


def test_whole_engine_on_cpu(tmp_path, vocab):
    """``sglang.Engine(grammar_backend="corral")`` end to end on CPU: SGLang's tokenizer
    manager, its scheduler process (corral registered there by the spawned ``__mp_main__``),
    its model runner (a dummy-weight GPT-2) and sampler. Every output is a token-by-token
    valid prefix of its grammar, and complete when it stopped at EOS; the refused request
    (sent concurrently with the others) is aborted with corral's message while the rest are
    served, and the engine serves a request after it; the scheduler's batch fills put several
    rows into one corral call."""
    model = write_gpt2_model(tmp_path / "gpt2")
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": False}
    specs = [
        ({"regex": "(yes|no)!"}, corral.Grammar.from_regex("(yes|no)!")),
        ({"regex": "[0-9]{1,3}(,[0-9]{1,3}){0,2}"}, corral.Grammar.from_regex("[0-9]{1,3}(,[0-9]{1,3}){0,2}")),
        ({"json_schema": json.dumps(schema)}, corral.Grammar.from_json_schema(schema, max_whitespace=2)),
        ({"ebnf": 'root ::= "<" [a-c]{1,4} ">"'}, corral.Grammar.from_ebnf('root ::= "<" [a-c]{1,4} ">"')),
        ({"json_schema": '{"type": "object", "properties": {"a": {"type": "string", "format": "hostname", "maxLength": 10}}}'}, None),
        ({"regex": "(yes|no)!"}, corral.Grammar.from_regex("(yes|no)!")),
    ]
    requests = [
        {"text": f"Question {i}:", "sampling_params": dict(params, max_new_tokens=24, temperature=1.0)} for i, (params, _) in enumerate(specs)
    ]
    # The JSON request's whitespace runs bounded to 2: random weights reach EOS sooner.
    results, rows = run_engine(tmp_path, model, requests, constrained_json_max_whitespace_cnt=2)
    assert len(results) == len(specs) + 1
    for (params, grammar), res in zip(specs + specs[:1], results):
        if grammar is None:
            msg = res["error"]
            assert "Failed to compile json grammar: corral:" in msg and "/properties/a" in msg, msg
            continue
        reason = res["finish_reason"]
        m = corral.Matcher(corral.compile(grammar, vocab))
        ids = res["output_ids"]
        assert ids, res
        for t in ids:
            assert m.accept_token(t), (params, res)
        if reason["type"] == "stop":
            assert reason["matched"] == EOS and m.is_terminated(), res
        else:
            assert reason["type"] == "length" and len(ids) == 24, res
    assert sum(r.get("finish_reason", {}).get("type") == "stop" for r in results) >= 3  # (yes|no)! ends in 3 tokens
    assert rows and max(rows) >= 4, rows  # the batch's rows, in one corral call per step


def test_whole_engine_reasoning_on_cpu(tmp_path, vocab):
    """``--reasoning-parser deepseek-r1`` in the whole engine: a ``require_reasoning`` request
    is not constrained while it reasons (the dummy model never writes ``</think>``), the
    same request without reasoning is."""
    model = write_gpt2_model(tmp_path / "gpt2")
    params = {"regex": "[0-9]+", "max_new_tokens": 24, "temperature": 1.0}
    requests = [
        {"text": "Think:", "sampling_params": params, "require_reasoning": True},
        {"text": "Answer:", "sampling_params": params, "require_reasoning": False},
    ]
    results, rows = run_engine(tmp_path, model, requests, reasoning_parser="deepseek-r1")
    thinking, plain = results[0], results[1]
    assert len(thinking["output_ids"]) == 24 and "</think>" not in thinking["text"]
    assert not corral.Matcher(corral.compile(corral.Grammar.from_regex("[0-9]+"), vocab)).accept_bytes(thinking["text"].encode())
    m = corral.Matcher(corral.compile(corral.Grammar.from_regex("[0-9]+"), vocab))
    assert plain["output_ids"] and all(m.accept_token(t) for t in plain["output_ids"]), plain
    assert rows and all(r == 1 for r in rows)  # only the plain request's row is ever filled


# ----------------------------------------------------------------------------- enabling


def test_launcher_registers_in_a_fresh_process(model):
    """``python -m corral.sglang``: registers corral, then hands the arguments to SGLang's
    server entry point with ``--grammar-backend corral`` (``--help`` shows it among the
    choices and exits before a model is loaded)."""
    out = subprocess.run(
        [sys.executable, "-m", "corral.sglang", "--model-path", str(model), "--help"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "corral" in out.stdout.split("--grammar-backend", 1)[1][:300]
    # A scheduler process spawned by the launcher: multiprocessing's spawn re-runs the main
    # module by name as __mp_main__ (multiprocessing.spawn._fixup_main_from_name), which
    # registers corral in that process too.
    code = (
        "import runpy\n"
        "from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY as R\n"
        "assert 'corral' not in R\n"
        "runpy.run_module('corral.sglang', run_name='__mp_main__', alter_sys=True)\n"
        "import corral.sglang\n"
        "assert R['corral'] is corral.sglang.init_backend, R\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_launcher_serves_http_on_cpu(tmp_path, vocab):
    """The one command, for real: ``python -m corral.sglang --model-path M ...`` starts SGLang's
    HTTP server with corral as its grammar backend (dummy-weight GPT-2 on CPU); ``/generate``
    with a regex returns a matching, EOS-terminated output and an invalid grammar returns
    corral's message."""
    import socket
    import time
    import urllib.error
    import urllib.request

    model = write_gpt2_model(tmp_path / "gpt2")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["--model-path", str(model), "--device", "cpu", "--load-format", "dummy", "--dtype", "float32", "--host", "127.0.0.1",
            "--port", str(port), "--max-total-tokens", "4096", "--mem-fraction-static", "0.3", "--log-level", "error"]
    log = open(tmp_path / "server.log", "w")  # a file, not a pipe nobody reads while it runs
    proc = subprocess.Popen([sys.executable, "-m", "corral.sglang", *args], stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"

    def post(path, body):
        req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            return json.loads(e.read())

    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(base + "/health", timeout=5):
                    break
            except (urllib.error.URLError, ConnectionError, OSError):
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(2)
        with urllib.request.urlopen(base + "/get_server_info", timeout=30) as r:
            assert json.loads(r.read())["grammar_backend"] == "corral"
        ok = post("/generate", {"text": "Hi", "sampling_params": {"regex": "(yes|no)!", "max_new_tokens": 8}})
        m = corral.Matcher(corral.compile(corral.Grammar.from_regex("(yes|no)!"), vocab))
        assert ok["text"] in ("yes!", "no!") and ok["meta_info"]["finish_reason"]["matched"] == EOS, ok
        assert all(m.accept_token(t) for t in ok["output_ids"]) and m.is_terminated()
        bad = post("/generate", {"text": "Hi", "sampling_params": {"ebnf": "root ::= (", "max_new_tokens": 8}})
        assert "corral" in bad["error"]["message"] and "line 1, column 10" in bad["error"]["message"], bad
        # OpenAI layer: response_format json_object arrives as the schema {"type": "object"}
        chat = post(
            "/v1/chat/completions",
            {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "response_format": {"type": "json_object"}, "max_tokens": 16},
        )
        text = chat["choices"][0]["message"]["content"]
        m = corral.Matcher(corral.compile(corral.Grammar.from_json_schema('{"type": "object"}'), vocab))
        assert text and m.accept_bytes(text.encode()), chat
        if chat["choices"][0]["finish_reason"] == "stop":
            assert m.is_accepting(), chat
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        log.close()


def test_plugin_through_sglangs_loader(tmp_path):
    """``corral.sglang:sglang_plugin`` declared in the ``sglang.srt.plugins`` entry-point group
    (here by a throwaway distribution on the path; corral's own metadata does not declare it
    yet): SGLang's ``load_plugins()`` runs it in a fresh process and corral is registered."""
    dist = tmp_path / "corral_sglang_plugin_probe-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: corral-sglang-plugin-probe\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[sglang.srt.plugins]\ncorral = corral.sglang:sglang_plugin\n")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY as R\n"
        "from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES as C\n"
        "assert 'corral' not in R and 'corral' not in C\n"
        "from sglang.srt.plugins import load_plugins\n"
        "load_plugins()\n"
        "import corral.sglang\n"
        "assert R['corral'] is corral.sglang.init_backend and 'corral' in C\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_other_versions_are_refused(server, monkeypatch):
    """One UsageError naming the supported versions, nothing registered; a registration that
    bypassed register() is refused when SGLang builds the backend."""
    from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES
    from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY

    monkeypatch.setattr(sglang, "__version__", "0.5.22")
    with pytest.raises(corral.UsageError, match=r"0\.5\.23") as err:
        cs.register("corral-old")
    assert "0.5.22" in str(err.value)
    assert "corral-old" not in GRAMMAR_BACKEND_REGISTRY and "corral-old" not in GRAMMAR_BACKEND_CHOICES
    with pytest.raises(corral.UsageError, match=r"0\.5\.23"):
        cs.init_backend(server.server_args, server.tokenizer, MODEL_VOCAB, {EOS})
