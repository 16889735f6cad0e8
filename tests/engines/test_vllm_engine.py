"""corral inside vLLM 0.33.0, installed, driven through its own classes (``make test-engines``).

Requests go through vLLM's front end (``InputProcessor``: validation, ``choice`` rewriting,
backend selection) into its ``StructuredOutputManager`` (``grammar_init``, the async
compile, ``grammar_bitmask``, ``accept_tokens``, ``validate_tokens``, ``clear_backend``),
exactly as the engine core calls them. Every bitmask row vLLM returns is compared with the row
a corral matcher computes directly at the same position.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

vllm = pytest.importorskip("vllm", reason="vLLM is not installed here (make test-engines runs these)")

import corral  # noqa: E402
import corral.vllm as cv  # noqa: E402

from .vllm_harness import MODEL_VOCAB, Engine, allowed, use_cpu_platform, write_model  # noqa: E402

if vllm.__version__ not in cv.SUPPORTED_VLLM_VERSIONS:
    pytest.skip(f"vLLM {vllm.__version__} is not a supported version", allow_module_level=True)

EOS = 50256
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


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    use_cpu_platform()
    cv.patch_vllm()
    return write_model(tmp_path_factory.mktemp("model"), tool_markers=True)


@pytest.fixture(scope="module")
def engine(model):
    # max_num_seqs above 128 builds the manager's parallel fill path.
    return Engine.build(model, max_num_seqs=160)


@pytest.fixture(scope="module")
def vocab(engine):
    return corral.Vocabulary.from_huggingface(engine.tokenizer, vocab_size=MODEL_VOCAB)


def encode(engine, text: str) -> list[int]:
    return engine.tokenizer.encode(text, add_special_tokens=False)


class Direct:
    """A corral matcher built without vLLM, for the rows vLLM must return."""

    def __init__(self, grammar, vocab, stop_ids=None):
        self.m = corral.Matcher(corral.compile(grammar, vocab))
        self.stop = set(stop_ids) if stop_ids is not None else None

    def row(self) -> set[int]:
        mask = corral.allocate_token_bitmask(1, MODEL_VOCAB)
        self.m.fill_next_token_bitmask(mask, 0)
        ids = allowed(mask[0].numpy(), MODEL_VOCAB)
        if self.stop is not None:
            ids -= {EOS}
            ids = (ids - self.stop) | (self.stop if self.m.is_accepting() else set())
        return ids

    def accept(self, t: int) -> None:
        assert self.m.accept_token(t), t


def walk(engine, req, direct: Direct, tokens: list[int], end: int = EOS) -> None:
    """Feeds ``tokens`` then ``end`` the way the scheduler does; each row vLLM returns must
    equal the direct matcher's and allow the next token."""
    for t in tokens + [end]:
        row = allowed(engine.bitmask([req])[0], MODEL_VOCAB)
        assert row == direct.row()
        assert t in row, (t, engine.tokenizer.decode([t]))
        assert engine.accept(req, [t])
        if t != end:
            direct.accept(t)
    assert req.structured_output_request.grammar.is_terminated()


def test_backend_is_corral_and_stop_ids_arrive(engine, vocab):
    """The first request builds the backend: corral's, whatever vLLM's name for it. Before the
    fix, compile_grammar raised TypeError on the new ``stop_token_ids`` keyword."""
    req = engine.submit(structured_outputs={"regex": "[0-9]{2}"})
    g = req.structured_output_request.grammar
    assert isinstance(engine.manager.backend, cv.CorralBackend) and isinstance(g, cv.CorralGrammar)
    assert engine.manager.backend_name == "xgrammar"
    assert req.sampling_params.structured_outputs._backend == "xgrammar"
    walk(engine, req, Direct(corral.Grammar.from_regex("[0-9]{2}"), vocab), encode(engine, "42"))


@pytest.mark.parametrize(
    "kind,spec,text",
    [
        ("json", PERSON, '{"name": "Ada", "age": 36}'),
        ("json", json.dumps(PERSON), '{"age": 1, "name": ""}'),
        # xgrammar refuses this schema (a pattern with length bounds): corral decides now.
        ("json", {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5}, '"abc"'),
        ("json_object", True, '{"k": [1, {"x": null}]}'),
        ("regex", r"(yes|no)[!?]", "no?"),
        ("grammar", 'root ::= "(" [a-z]+ ")"', "(abc)"),
        ("grammar", 'start: "(" WORD ")"\nWORD: /[a-z]+/\n', "(abc)"),
    ],
    ids=["json-dict", "json-str", "json-corral-only", "json_object", "regex", "gbnf", "lark"],
)
def test_request_kinds_rows_equal_direct_matchers(engine, vocab, kind, spec, text):
    req = engine.submit(structured_outputs={kind: spec})
    so = req.sampling_params.structured_outputs
    if kind == "json":
        grammar = corral.Grammar.from_json_schema(spec)
    elif kind == "json_object":
        grammar = corral.Grammar.from_json_schema('{"type": "object"}')
    elif kind == "regex":
        grammar = corral.Grammar.from_regex(spec)
    elif "::=" in spec:
        grammar = corral.Grammar.from_ebnf(spec)
    else:
        grammar = corral.Grammar.from_lark(spec)
    assert so._backend == "xgrammar"
    walk(engine, req, Direct(grammar, vocab), encode(engine, text))


def test_choice_is_rewritten_and_served(engine, vocab):
    """The front end rewrites ``choice`` into a GBNF grammar (vLLM's own rewriting)."""
    req = engine.submit(structured_outputs={"choice": ["red", "green", 'say "hi"\n']})
    so = req.sampling_params.structured_outputs
    assert so.choice is None and so.grammar.startswith("root ::= ")
    walk(engine, req, Direct(corral.Grammar.from_ebnf(so.grammar), vocab), encode(engine, 'say "hi"\n'))


@pytest.mark.parametrize(
    "so,needle",
    [
        ({"json": {"type": "object", "properties": {"a": {"type": "string", "format": "hostname", "maxLength": 10}}}}, "/properties/a"),
        ({"json": {"type": "string", "pattern": "(?<=a)b"}}, "pattern"),
        ({"grammar": 'root ::= "a" undefined_rule'}, "undefined_rule"),
        ({"grammar": 'start: "a" (\n'}, "line 1"),
        ({"regex": "a(b"}, "regex"),
    ],
    ids=["schema-pointer", "schema-keyword", "gbnf-rule", "lark-linecol", "regex"],
)
def test_refused_requests_fail_with_corrals_message(engine, so, needle):
    """corral's error, raised by the front end: no fallback to another backend (the engine is
    already on corral and would refuse it anyway)."""
    with pytest.raises(corral.CorralError) as err:
        engine.submit(structured_outputs=so)
    assert "corral" in str(err.value) and needle in str(err.value), str(err.value)


def test_stop_token_ids_masked_until_the_grammar_ends(engine, vocab):
    """``SamplingParams(stop_token_ids=...)`` reaches compile_grammar: a user stop id is
    allowed only where the grammar can end, and accepting it terminates the grammar."""
    stop = encode(engine, ";")[0]
    req = engine.submit(structured_outputs={"regex": "[a-c]+"}, stop_token_ids=[stop])
    g = req.structured_output_request.grammar
    assert g.stop_ids == frozenset({EOS, stop})
    direct = Direct(corral.Grammar.from_regex("[a-c]+"), vocab, stop_ids={EOS, stop})
    row = allowed(engine.bitmask([req])[0], MODEL_VOCAB)
    assert row == direct.row() and stop not in row and EOS not in row
    walk(engine, req, direct, encode(engine, "abc"), end=stop)


def test_terminated_requests_and_validate_tokens(engine, vocab):
    req = engine.submit(structured_outputs={"regex": "ok"})
    ids = encode(engine, "ok")
    assert engine.manager.validate_tokens(req, ids + [EOS, EOS]) == ids + [EOS]
    assert engine.manager.validate_tokens(req, encode(engine, "no")) == []
    assert engine.accept(req, ids + [EOS])
    g = req.structured_output_request.grammar
    assert g.is_terminated()
    # the manager fills terminated rows itself (all ones); accept_tokens ignores more tokens
    assert allowed(engine.bitmask([req])[0], MODEL_VOCAB) == set(range(MODEL_VOCAB))
    assert engine.manager.accept_tokens(req, [EOS])
    assert engine.manager.validate_tokens(req, [EOS]) == []
    bad = engine.submit(structured_outputs={"regex": "ok"})
    assert engine.manager.accept_tokens(bad, encode(engine, "x")) is False


def test_batch_above_the_parallel_threshold(engine, vocab):
    """More than 128 structured requests and no drafts: the manager's parallel path, whose
    batches of 16 reach corral's patched _fill_bitmasks as 4-tuples (this crashed with
    'too many values to unpack' before)."""
    assert engine.manager.fill_bitmask_parallel_threshold < 140
    texts = ['{"name": "', '{"name": "a", "age": 1', '{"age": 3', ""] * 35
    reqs, directs = [], []
    for t in texts:
        r = engine.submit(structured_outputs={"json": PERSON})
        d = Direct(corral.Grammar.from_json_schema(PERSON), vocab)
        ids = encode(engine, t)
        if ids:
            assert engine.accept(r, ids)
            for i in ids:
                d.accept(i)
        reqs.append(r)
        directs.append(d)
    rows = engine.bitmask(reqs)
    assert rows.shape[0] == len(reqs)
    for row, d in zip(rows, directs):
        assert allowed(row, MODEL_VOCAB) == d.row()


@pytest.fixture(scope="module")
def spec_engine(model):
    return Engine.build(model, max_num_seqs=8, speculative_config={"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1})


def test_speculative_drafts_rows_and_rollback(spec_engine, vocab):
    """n-gram drafts: validate_tokens trims proposals; grammar_bitmask fills one row per
    draft plus the bonus row (a draft EOS terminates: later rows all ones; -1 padding: rows
    unconstrained) and rolls back, leaving each grammar where it was."""
    e = spec_engine
    assert e.config.num_speculative_tokens == 3
    r1 = e.submit(structured_outputs={"regex": "(yes|no)! [0-9]+"})
    r2 = e.submit(structured_outputs={"regex": "(yes|no)!"})
    r3 = e.submit(structured_outputs={"json": PERSON})
    g1 = corral.Grammar.from_regex("(yes|no)! [0-9]+")
    d1, d2, d3 = Direct(g1, vocab), Direct(corral.Grammar.from_regex("(yes|no)!"), vocab), Direct(corral.Grammar.from_json_schema(PERSON), vocab)
    for r, d, t in ((r1, d1, "yes"), (r2, d2, "no"), (r3, d3, '{"name')):
        ids = encode(e, t)
        assert e.accept(r, ids)
        for i in ids:
            d.accept(i)
    bang, sp, one = encode(e, "!")[0], encode(e, " ")[0], encode(e, "1")[0]
    x = encode(e, "x")[0]
    proposed = {r1.request_id: [bang, sp, x], r2.request_id: [bang, EOS, bang], r3.request_id: [-1, -1, -1]}
    spec = {rid: e.manager.validate_tokens(e.requests[rid], toks) for rid, toks in proposed.items()}
    assert spec[r1.request_id] == [bang, sp] and spec[r2.request_id] == [bang, EOS] and spec[r3.request_id] == []
    spec[r3.request_id] = [-1, -1, -1]  # as the n-gram proposer pads a request without drafts
    rows = e.bitmask([r1, r2, r3], spec)
    stride = 4
    assert rows.shape[0] == 3 * stride
    # r1: rows at "yes", "yes!", "yes! " (bonus)
    exp = [d1.row()]
    d1.accept(bang)
    exp.append(d1.row())
    d1.accept(sp)
    exp.append(d1.row())
    for k in range(3):
        assert allowed(rows[k], MODEL_VOCAB) == exp[k], k
    # r2: "no", "no!" (only EOS), after the draft EOS the bonus row is all ones
    assert allowed(rows[stride], MODEL_VOCAB) == d2.row()
    d2.accept(bang)
    assert allowed(rows[stride + 1], MODEL_VOCAB) == d2.row() == {EOS}
    assert allowed(rows[stride + 2], MODEL_VOCAB) == set(range(MODEL_VOCAB))
    # r3: padded drafts: the first row is constrained, rows after the padding are not
    assert allowed(rows[2 * stride], MODEL_VOCAB) == d3.row()
    for k in range(1, 4):
        assert allowed(rows[2 * stride + k], MODEL_VOCAB) == set(range(MODEL_VOCAB))
    # everything rolled back
    for r in (r1, r2, r3):
        assert not r.structured_output_request.grammar.is_terminated()
    assert e.manager.validate_tokens(r1, [bang, sp, one]) == [bang, sp, one]
    # the verified tokens and the bonus token are accepted as one chunk
    assert e.accept(r2, [bang, EOS, bang]) and r2.structured_output_request.grammar.is_terminated()


def test_rejected_draft_rows_reuse_the_last_valid_row(spec_engine, vocab):
    """A draft the grammar rejects (drafts unvalidated, as vLLM allows): later rows copy the
    row of the last valid state and the grammar is rolled back."""
    e = spec_engine
    r = e.submit(structured_outputs={"regex": "[0-9]+"})
    d = Direct(corral.Grammar.from_regex("[0-9]+"), vocab)
    one, x = encode(e, "1")[0], encode(e, "x")[0]
    rows = e.bitmask([r], {r.request_id: [one, x, one]})
    first = d.row()
    d.accept(one)
    second = d.row()
    assert allowed(rows[0], MODEL_VOCAB) == first
    assert allowed(rows[1], MODEL_VOCAB) == second
    for k in (2, 3):
        assert allowed(rows[k], MODEL_VOCAB) == second
    assert r.structured_output_request.grammar.validate_tokens([one]) == [one]


@pytest.fixture(scope="module")
def reasoning_engine(model):
    return Engine.build(model, max_num_seqs=8, reasoning_parser="deepseek_r1")


def test_reasoning_rows_unconstrained_until_think_end(reasoning_engine, vocab):
    """With a reasoning parser, rows before ``</think>`` allow everything; the grammar starts
    after it."""
    e = reasoning_engine
    r = e.submit(structured_outputs={"regex": "[0-9]+"})
    think_end = e.tokenizer.convert_tokens_to_ids("</think>")
    assert allowed(e.bitmask([r])[0], MODEL_VOCAB) == set(range(MODEL_VOCAB))
    assert e.accept(r, encode(e, "let me think"))
    assert allowed(e.bitmask([r])[0], MODEL_VOCAB) == set(range(MODEL_VOCAB))
    assert e.accept(r, [think_end])
    d = Direct(corral.Grammar.from_regex("[0-9]+"), vocab)
    walk(e, r, d, encode(e, "12"))


@pytest.fixture(scope="module")
def qwen3_engine(model):
    return Engine.build(model, max_num_seqs=8, reasoning_parser="qwen3")


def test_implicit_reasoning_end_masked_while_reasoning(qwen3_engine, vocab):
    """An engine-based reasoning parser (qwen3) ends reasoning implicitly at ``<tool_call>``:
    while reasoning, such tokens that the grammar cannot start with are masked (the
    masked_ids of the manager's 4-tuples)."""
    e = qwen3_engine
    r = e.submit(structured_outputs={"regex": "[0-9]+"})
    reasoner = e.manager._get_reasoner(r)
    implicit = set(getattr(reasoner, "implicit_reasoning_end_token_ids", ()))
    if not implicit:
        pytest.skip("this reasoning parser has no implicit reasoning ends for the test tokenizer")
    row = allowed(e.bitmask([r])[0], MODEL_VOCAB)
    assert row == set(range(MODEL_VOCAB)) - implicit


def test_clear_backend_and_reuse(model, vocab):
    e = Engine.build(model, max_num_seqs=4)
    r = e.submit(structured_outputs={"regex": "a+"})
    assert allowed(e.bitmask([r])[0], MODEL_VOCAB) == Direct(corral.Grammar.from_regex("a+"), vocab).row()
    e.manager.clear_backend()
    assert e.manager.backend is None


# ----------------------------------------------------------------------------- tool calling

TOOL_TEXTS = {
    "hermes": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    "llama": '{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}',
    "deepseek_r1": "ok</think>\u003c\uff5ctool\u2581calls\u2581begin\uff5c\u003e\u003c\uff5ctool\u2581call\u2581begin\uff5c\u003efunction\u003c\uff5ctool\u2581sep\uff5c\u003eget_weather\n```json\n{\"city\": \"Paris\"}\n```\u003c\uff5ctool\u2581call\u2581end\uff5c\u003e\u003c\uff5ctool\u2581calls\u2581end\uff5c\u003e",
    "qwen_3_coder": "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
}
BAD_TOOL_TEXTS = {
    "hermes": '<tool_call>\n{"name": "get_weather", "arguments": {"town": "Paris"}}\n</tool_call>',
    "llama": '{"name": "get_weather", "parameters": {"days": 2}}',
    "deepseek_r1": "ok</think>\u003c\uff5ctool\u2581calls\u2581begin\uff5c\u003e\u003c\uff5ctool\u2581call\u2581begin\uff5c\u003efunction\u003c\uff5ctool\u2581sep\uff5c\u003eget_time\n",
    "qwen_3_coder": "<tool_call>\n<function=get_weather>\n<parameter=town>\n",
}


def structural_tag(model_name: str, choice: str) -> str:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionToolsParam
    from vllm.tool_parsers.structural_tag_registry import get_model_structural_tag

    tag = get_model_structural_tag(model_name, [ChatCompletionToolsParam(**WEATHER_TOOL)], choice, reasoning=model_name == "deepseek_r1")
    return json.dumps(tag.model_dump(mode="json", exclude_none=True))


def accepts(grammar, vocab, text: str) -> bool:
    m = corral.Matcher(corral.compile(grammar, vocab))
    return m.accept_bytes(text.encode()) and m.is_accepting()


@pytest.mark.parametrize("model_name", sorted(TOOL_TEXTS))
@pytest.mark.parametrize("choice", ["auto", "required"])
def test_tool_call_structural_tags(engine, vocab, model_name, choice):
    """vLLM's own structural-tag builders (strict tools): the tag reaches corral through the
    front end, the tool-call text each parser extracts is accepted (after free text when the
    choice is auto), and a malformed call is rejected."""
    tag = structural_tag(model_name, choice)
    req = engine.submit(structured_outputs={"structural_tag": tag})
    grammar = corral.Grammar.from_structural_tag(tag)
    text = TOOL_TEXTS[model_name]
    if choice == "auto" and model_name in ("hermes", "qwen_3_coder"):
        text = "Let me check the weather. " + text
    assert accepts(grammar, vocab, text), text
    assert not accepts(grammar, vocab, BAD_TOOL_TEXTS[model_name])
    walk(engine, req, Direct(grammar, vocab), encode(engine, text))
    # vLLM's own tool parser for this format extracts the call from the text corral allowed.
    calls = extract_tool_calls(engine, TOOL_PARSERS[model_name], text.split("</think>")[-1])
    assert calls == [("get_weather", EXPECTED_ARGS[model_name])], calls


TOOL_PARSERS = {"hermes": "hermes", "llama": "llama3_json", "deepseek_r1": "deepseek_v3", "qwen_3_coder": "qwen3_coder"}
EXPECTED_ARGS = {"hermes": {"city": "Paris"}, "llama": {"city": "Paris", "days": 2}, "deepseek_r1": {"city": "Paris"}, "qwen_3_coder": {"city": "Paris"}}


def extract_tool_calls(engine, parser_name: str, text: str) -> list:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.tool_parsers import ToolParserManager

    request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "weather?"}], tools=[WEATHER_TOOL])
    parser = ToolParserManager.get_tool_parser(parser_name)(engine.tokenizer)
    info = parser.extract_tool_calls(text, request)
    assert info.tools_called, (parser_name, text)
    return [(c.function.name, json.loads(c.function.arguments)) for c in info.tool_calls]


def test_named_tool_choice_is_a_json_schema_request(engine, vocab):
    """tool_choice named/required with the default strict level arrive as JSON Schema."""
    params = WEATHER_TOOL["function"]["parameters"]
    req = engine.submit(structured_outputs={"json": params})
    walk(engine, req, Direct(corral.Grammar.from_json_schema(params), vocab), encode(engine, '{"city": "Oslo"}'))


# ----------------------------------------------------------------------------- enabling


def test_general_plugin_entry_point_loads(monkeypatch):
    """corral's ``vllm.general_plugins`` entry point is installed and vLLM's own plugin
    loader runs it; it patches only with CORRAL_VLLM=1."""
    from importlib.metadata import entry_points

    eps = {e.name: e for e in entry_points(group="vllm.general_plugins")}
    assert eps["corral"].value == "corral.vllm:vllm_plugin"
    from vllm.plugins import load_general_plugins, load_plugins_by_group

    loaded = load_plugins_by_group("vllm.general_plugins")
    assert loaded["corral"] is cv.vllm_plugin or loaded["corral"].__qualname__ == "vllm_plugin"
    monkeypatch.setenv("CORRAL_VLLM", "1")
    load_general_plugins()
    import vllm.v1.structured_output as so

    assert so.XgrammarBackend is cv.CorralBackend


def test_other_versions_are_refused(monkeypatch):
    monkeypatch.setattr(vllm, "__version__", "0.32.0")
    monkeypatch.setitem(cv._PATCHED, "done", False)
    with pytest.raises(corral.UsageError, match="0.33.0"):
        cv.patch_vllm()


# ----------------------------------------------------------------------------- the logits-processor route


def test_logits_processor_route(engine, vocab):
    """corral.vllm:CorralLogitsProcessor loaded by vLLM's own loader (FQCN), fed vLLM's
    BatchUpdate: rows with a grammar in extra_args are masked exactly, others untouched;
    validate_params refuses a bad grammar with corral's message."""
    import torch
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate, build_logitsprocs

    procs = build_logitsprocs(engine.config, torch.device("cpu"), False, False, ["corral.vllm:CorralLogitsProcessor"])
    mine = [p for p in procs.non_argmax_invariant if isinstance(p, cv.CorralLogitsProcessor)]
    assert len(mine) == 1
    proc = mine[0]
    spec = json.dumps({"regex": "(yes|no)!"})
    p_json = SamplingParams(extra_args={"corral": {"json": PERSON}})
    p_regex = SamplingParams(extra_args={"corral": spec})  # as vllm_xargs carries it
    out0, out1, out2 = [], [], []
    proc.update_state(BatchUpdate(batch_size=3, removed=[], added=[(0, p_json, [1, 2], out0), (1, SamplingParams(), [1], out1), (2, p_regex, [3], out2)], moved=[]))
    d_json = Direct(corral.Grammar.from_json_schema(PERSON), vocab)
    d_regex = Direct(corral.Grammar.from_regex("(yes|no)!"), vocab)
    text = encode(engine, '{"name": "A", "age": 2}')
    yes = encode(engine, "yes!")
    for step in range(max(len(text), len(yes))):
        logits = torch.zeros(3, MODEL_VOCAB)
        proc.update_state(None)
        logits = proc.apply(logits)
        finite = [set(torch.isfinite(logits[i]).nonzero().flatten().tolist()) for i in range(3)]
        assert finite[1] == set(range(MODEL_VOCAB))
        if step < len(text):
            assert finite[0] == d_json.row()
            out0.append(text[step])
            d_json.accept(text[step])
        if step < len(yes):
            assert finite[2] == d_regex.row()
            out2.append(yes[step])
            d_regex.accept(yes[step])
    with pytest.raises(corral.CorralError, match="line 1|1:"):
        cv.CorralLogitsProcessor.validate_params(SamplingParams(extra_args={"corral": {"grammar": "root ::= ("}}))
    with pytest.raises(corral.UsageError):
        cv.CorralLogitsProcessor.validate_params(SamplingParams(extra_args={"corral": {"xml": "x"}}))
