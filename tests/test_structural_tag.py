"""corral.Grammar.from_structural_tag: xgrammar structural tags, checked against xgrammar.

xgrammar (0.2.8, installed for tests) is the reference: for every tag below, corral and
xgrammar's ``GrammarMatcher`` must agree on whether each string is accepted in full. The
strings are hand-written positives and negatives (each also asserted directly, so a test
fails even if both implementations were wrong the same way) plus mutations of the positives
(deletions, insertions, duplications, truncations). Where xgrammar's matcher is inexact, the
test states the difference and asserts corral's (exact) answer.

Mask tests run on Llama 3's tokenizer (skipped when the shared tokenizer data is missing):
triggers split across tokens, and corral's allowed-token sets against xgrammar's after each
token of several tool-call texts.
"""

from __future__ import annotations

import functools
import json
import random
from typing import Any, Iterable, List, Optional

import pytest

import corral

xgr = pytest.importorskip("xgrammar")
from xgrammar.testing import _is_grammar_accept_string  # noqa: E402

BYTES = corral.Vocabulary.from_bytes([bytes([i]) for i in range(256)] + [b""], eos_token_ids=[256])


def wrap(fmt: dict) -> dict:
    return {"type": "structural_tag", "format": fmt}


@functools.lru_cache(maxsize=None)
def _corral(tag_json: str) -> corral.CompiledGrammar:
    return corral.CompiledGrammar(corral.Grammar.from_structural_tag(tag_json), BYTES)


@functools.lru_cache(maxsize=None)
def _xgr(tag_json: str) -> Any:
    return xgr.Grammar.from_structural_tag(tag_json)


def corral_accepts(tag: dict, text: str) -> bool:
    m = corral.Matcher(_corral(json.dumps(tag)))
    return m.accept_bytes(text.encode()) and m.is_accepting()


def xgr_accepts(tag: dict, text: str) -> bool:
    return _is_grammar_accept_string(_xgr(json.dumps(tag)), text)


def mutations(s: str, rng: random.Random, k: int = 12) -> List[str]:
    """Near misses of ``s``: deleted, inserted, duplicated characters and truncations."""
    out = set()
    alphabet = list('<>/{}":, \n=abfx1') + ["é"]
    for _ in range(k):
        if not s:
            out.add(rng.choice(alphabet))
            continue
        i = rng.randrange(len(s))
        op = rng.randrange(4)
        if op == 0:
            out.add(s[:i] + s[i + 1 :])
        elif op == 1:
            out.add(s[:i] + rng.choice(alphabet) + s[i:])
        elif op == 2:
            out.add(s[:i] + s[i] + s[i:])
        else:
            out.add(s[:i])
    return sorted(out)


def check(tag: dict, positives: Iterable[str], negatives: Iterable[str], seed: int = 0, mutate: bool = True) -> None:
    """Positives accepted and negatives refused by both; mutants judged alike by both."""
    for s in positives:
        assert corral_accepts(tag, s), f"corral refuses {s!r}"
        assert xgr_accepts(tag, s), f"xgrammar refuses {s!r} (test expectation wrong?)"
    for s in negatives:
        assert not corral_accepts(tag, s), f"corral accepts {s!r}"
        assert not xgr_accepts(tag, s), f"xgrammar accepts {s!r} (test expectation wrong?)"
    rng = random.Random(seed)
    for s in positives if mutate else []:
        for m in mutations(s, rng):
            assert corral_accepts(tag, m) == xgr_accepts(tag, m), f"disagree on {m!r}: corral {corral_accepts(tag, m)}"


# ---------------------------------------------------------------------------------------
# Tools and their JSON schemas
# ---------------------------------------------------------------------------------------

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"],
}
SEARCH = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "filters": {"type": "array", "items": {"type": "string"}}},
    "required": ["query", "filters"],
}
TOOLS = {"get_weather": WEATHER, "search": SEARCH}


def hermes(choice: str = "auto") -> dict:
    """vLLM's hermes builder (``_hermes_style_structural_tag``), two tools."""
    tags = []
    for name, params in TOOLS.items():
        for begin, end in [('<tool_call>\n{"name": "', "}\n</tool_call>"), ('<tool_call>{"name": "', "}</tool_call>")]:
            tags.append({"type": "tag", "begin": begin + name + '", "arguments": ', "content": {"type": "json_schema", "json_schema": params}, "end": end})
    if choice == "auto":
        return wrap({"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": tags})
    if choice == "forced":
        return wrap({"type": "tags_with_separator", "tags": tags, "separator": "", "at_least_one": True, "stop_after_first": True})
    return wrap({"type": "tags_with_separator", "tags": tags, "separator": "", "at_least_one": True})


def llama() -> dict:
    """xgrammar's builtin llama tag (what vLLM's llama parser gets)."""
    tags = [
        {"type": "tag", "begin": '{"name": "' + n + '", "parameters": ', "content": {"type": "json_schema", "json_schema": p, "style": "json", "any_order": False, "excludes": []}, "end": "}"}
        for n, p in TOOLS.items()
    ]
    return wrap({"type": "triggered_tags", "triggers": ['{"name": '], "tags": tags, "excludes": ["<think>", "</think>"]})


DS_CALLS_BEGIN, DS_CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
DS_CALL_BEGIN, DS_CALL_END, DS_SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"


def deepseek_r1() -> dict:
    """xgrammar's builtin deepseek_r1 tag: a calls block of calls separated by newlines."""
    calls = [
        {"type": "tag", "begin": DS_CALL_BEGIN + "function" + DS_SEP + n + "\n```json\n", "content": {"type": "json_schema", "json_schema": p}, "end": "\n```" + DS_CALL_END}
        for n, p in TOOLS.items()
    ]
    block = {"type": "tag", "begin": DS_CALLS_BEGIN, "content": {"type": "tags_with_separator", "tags": calls, "separator": "\n", "at_least_one": True}, "end": DS_CALLS_END}
    return wrap({"type": "triggered_tags", "triggers": [DS_CALLS_BEGIN], "tags": [block], "excludes": ["<think>", "</think>"]})


def deepseek_v3_1() -> dict:
    calls = [
        {"type": "tag", "begin": DS_CALL_BEGIN + n + DS_SEP, "content": {"type": "json_schema", "json_schema": p}, "end": DS_CALL_END}
        for n, p in TOOLS.items()
    ]
    block = {"type": "tag", "begin": DS_CALLS_BEGIN, "content": {"type": "tags_with_separator", "tags": calls, "separator": "", "at_least_one": True}, "end": DS_CALLS_END}
    return wrap({"type": "triggered_tags", "triggers": [DS_CALLS_BEGIN], "tags": [block], "excludes": ["<think>", "</think>"]})


def hermes_call(name: str, args: dict, newline: bool = True) -> str:
    a = json.dumps(args, ensure_ascii=False)
    if newline:
        return f'<tool_call>\n{{"name": "{name}", "arguments": {a}}}\n</tool_call>'
    return f'<tool_call>{{"name": "{name}", "arguments": {a}}}</tool_call>'


W1 = {"city": "Paris"}
W2 = {"city": "Tōkyō \"east\"", "days": 3}
S1 = {"query": "corral", "filters": ["a", "b"]}


# ---------------------------------------------------------------------------------------
# vLLM / xgrammar builder shapes
# ---------------------------------------------------------------------------------------


def test_hermes_auto():
    tag = hermes("auto")
    pos = [
        "",
        "I'll check the weather.",
        hermes_call("get_weather", W1),
        "Sure. " + hermes_call("get_weather", W2) + "\n" + hermes_call("search", S1, newline=False) + " done",
        "no tool <tool_call",
        '{"name": "get_weather"}',
    ]
    neg = [
        "<tool_call>",
        hermes_call("get_time", W1),  # unknown tool
        hermes_call("get_weather", {"town": "Paris"}),  # wrong key
        hermes_call("get_weather", {"city": 3}),  # wrong type
        hermes_call("get_weather", {"city": "P", "days": 0}),  # minimum
        hermes_call("search", {"query": "x"}),  # missing required
        hermes_call("get_weather", W1)[:-3],  # missing end tag
        hermes_call("get_weather", W1).replace("</tool_call>", "</tool>"),
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "P"}\n</tool_call>',  # unclosed
        '<tool_call>\n{"name": "get_weather", "arguments":  {"city": "P"}}\n</tool_call>',  # begin is exact
    ]
    check(tag, pos, neg)


@pytest.mark.parametrize("choice", ["forced", "required"])
def test_hermes_forced_and_required(choice):
    tag = hermes(choice)
    one = hermes_call("get_weather", W1)
    two = one + hermes_call("search", S1, newline=False)
    pos = [one, two] if choice == "required" else [one]
    neg = ["", "text " + one, one + " text"] + ([two] if choice == "forced" else [])
    check(tag, pos, neg)


def test_llama_json_calls():
    tag = llama()
    c1 = '{"name": "get_weather", "parameters": ' + json.dumps(W1) + "}"
    c2 = '{"name": "search", "parameters": ' + json.dumps(S1) + "}"
    pos = ["", "plain answer", c1, "x " + c1 + "; " + c2, '{"name"', '{"name":"x"}']
    neg = ['{"name": "nope", "parameters": {}}', "<think>hmm</think>", "a <think>", c1[:-1], '{"name": "search", "parameters": {"query": "q"}}']
    check(tag, pos, neg)


@pytest.mark.parametrize("builder", [deepseek_r1, deepseek_v3_1])
def test_deepseek(builder):
    tag = builder()
    if builder is deepseek_r1:
        call = lambda n, a: DS_CALL_BEGIN + "function" + DS_SEP + n + "\n```json\n" + json.dumps(a) + "\n```" + DS_CALL_END  # noqa: E731
        sep = "\n"
    else:
        call = lambda n, a: DS_CALL_BEGIN + n + DS_SEP + json.dumps(a) + DS_CALL_END  # noqa: E731
        sep = ""
    block1 = DS_CALLS_BEGIN + call("get_weather", W1) + DS_CALLS_END
    block2 = DS_CALLS_BEGIN + call("get_weather", W2) + sep + call("search", S1) + DS_CALLS_END
    pos = ["", "thinking done.", block1, "ok " + block2 + " bye"]
    neg = [
        DS_CALLS_BEGIN + DS_CALLS_END,  # at_least_one call
        DS_CALLS_BEGIN + call("get_weather", {"city": 1}) + DS_CALLS_END,
        DS_CALLS_BEGIN + call("get_weather", W1),  # missing end marker
        DS_CALLS_BEGIN + call("get_weather", W1) + sep + " " + call("search", S1) + DS_CALLS_END,
        "<think>",
    ]
    check(tag, pos, neg)


def minimax(choice: str = "auto") -> dict:
    """vLLM's minimax builder: minimax_xml arguments inside <invoke> tags in a calls block."""
    tags = [
        {"type": "tag", "begin": f'<invoke name="{n}">\n', "content": {"type": "json_schema", "json_schema": p, "style": "minimax_xml"}, "end": "</invoke>\n"}
        for n, p in TOOLS.items()
    ]
    calls = {"type": "tags_with_separator", "tags": tags, "separator": "", "at_least_one": True}
    if choice == "auto":
        return wrap({"type": "triggered_tags", "triggers": ["<minimax:tool_call>"], "excludes": ["<think>", "</think>"],
                     "tags": [{"type": "tag", "begin": "<minimax:tool_call>\n", "content": calls, "end": "</minimax:tool_call>"}]})
    return wrap({"type": "sequence", "elements": [{"type": "const_string", "value": "\n<minimax:tool_call>\n"}, calls, {"type": "const_string", "value": "</minimax:tool_call>"}]})


def test_minimax():
    inv = '<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n<parameter name="days">2</parameter>\n</invoke>\n'
    inv2 = '<invoke name="search">\n<parameter name="query">q</parameter><parameter name="filters">["x"]</parameter></invoke>\n'
    block = "<minimax:tool_call>\n" + inv + inv2 + "</minimax:tool_call>"
    check(minimax("auto"), ["", "Sure. " + block, block + " ok"],
          ["<minimax:tool_call>\n</minimax:tool_call>", block.replace("days", "hours"), block.replace('["x"]', '"x"'), "<think>"])
    check(minimax("required"), ["\n" + block], [block, "\n<minimax:tool_call>\n</minimax:tool_call>"])


GLM_EXCLUDES = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"]


def glm_4_7() -> dict:
    """vLLM's glm_4_7 builder for non-strict tools: keys and basic value types pinned, any
    order (a star over the pairs), string values as any_text with excludes."""
    def value(prop):
        if prop.get("type") in (None, "string"):
            return {"type": "any_text", "excludes": GLM_EXCLUDES}
        return {"type": "json_schema", "json_schema": {"type": prop["type"]}}

    tags = []
    for n, p in TOOLS.items():
        pairs = [{"type": "sequence", "elements": [
            {"type": "const_string", "value": f"<arg_key>{k}</arg_key><arg_value>"}, value(prop), {"type": "const_string", "value": "</arg_value>"}]}
            for k, prop in p["properties"].items()]
        tags.append({"type": "tag", "begin": f"<tool_call>{n}", "content": {"type": "star", "content": {"type": "or", "elements": pairs}}, "end": "</tool_call>"})
    return wrap({"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": tags, "excludes": [e for e in GLM_EXCLUDES if e != "<tool_call>"]})


def test_glm_4_7():
    call = "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Par is</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>"
    check(glm_4_7(), ["", "hi " + call, call + call, "<tool_call>search</tool_call>"],
          [call.replace("3", "x"), call.replace("Par is", "a</tool_call>"), "x</think>", "<tool_call>get_weather<arg_key>town</arg_key><arg_value>P</arg_value></tool_call>"])


def test_builtin_tags_from_xgrammar_compile():
    """The text-level builtin tags xgrammar builds for two tools compile in corral."""
    from xgrammar.builtin_structural_tag import get_model_structural_tag

    tools = [{"type": "function", "function": {"name": n, "parameters": p}} for n, p in TOOLS.items()]
    compiled = 0
    for model in ["llama", "deepseek_r1", "deepseek_v3_1", "qwen_3", "qwen_3_coder", "kimi", "harmony"]:
        tag = get_model_structural_tag(model, tools=tools, tool_choice="auto", reasoning=False).model_dump(mode="json", exclude_none=True)
        corral.Grammar.from_structural_tag(tag)
        compiled += 1
    assert compiled == 7


# ---------------------------------------------------------------------------------------
# Each format type
# ---------------------------------------------------------------------------------------


def test_const_sequence_or_repeat():
    tag = wrap({"type": "sequence", "elements": [
        {"type": "const_string", "value": "A:"},
        {"type": "or", "elements": [{"type": "const_string", "value": "yes"}, {"type": "const_string", "value": "no"}]},
        {"type": "optional", "content": {"type": "const_string", "value": "!"}},
        {"type": "star", "content": {"type": "const_string", "value": "."}},
        {"type": "plus", "content": {"type": "const_string", "value": "x"}},
        {"type": "repeat", "min": 1, "max": 2, "content": {"type": "const_string", "value": "y"}},
        {"type": "repeat", "min": 2, "max": -1, "content": {"type": "const_string", "value": "z"}},
    ]})
    check(tag, ["A:yesxyzz", "A:no!...xxyyzzz"], ["A:yes", "A:maybexyzz", "A:yesxyyyzz", "A:yesxyz", "A:yes!!xyzz"])


def test_regex_and_grammar():
    tag = wrap({"type": "sequence", "elements": [
        {"type": "regex", "pattern": "[A-Z]{3}-[0-9]{2,4}"},
        {"type": "const_string", "value": " "},
        {"type": "grammar", "grammar": 'root ::= item ("," item)*\nitem ::= "a" | "b" item'},
    ]})
    check(tag, ["ABC-12 a", "XYZ-1234 bba,a,ba"], ["AB-12 a", "ABC-12345 a", "ABC-12 c", "ABC-12 a,"])


def test_json_schema_layout():
    tag = wrap({"type": "json_schema", "json_schema": WEATHER})
    pos = ['{"city": "P"}', '{"city":"P","days":2}', '{ "city" : "P" ,\n "days": 2 }', '{"city": "P"' + " " * 40 + "}"]
    neg = [' {"city": "P"}', '{"city": "P"} ', '{"days": 2, "city": "P"}', '{"city": "P", "x": 1}', '{"city": "P", "city": "Q"}']
    check(tag, pos, neg)


def test_json_schema_max_whitespace():
    tag = wrap({"type": "json_schema", "json_schema": WEATHER, "max_whitespace_cnt": 2})
    check(tag, ['{"city": "P"}', '{  "city":  "P"  }'], ['{   "city": "P"}', '{"city":   "P"}'])


def test_json_schema_true_and_nested_strict():
    check(wrap({"type": "json_schema", "json_schema": True}), ["1", '{"a": [1, "x"]}', "null"], ["", "{", " 1"])
    nested = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "integer"}}}}}
    check(wrap({"type": "json_schema", "json_schema": nested}), ['{"a": {"b": 1}}', "{}", '{"a": {}}'], ['{"a": {"c": 1}}', '{"b": 1}'])
    # No properties: any object (xgrammar's strict mode closes only objects with properties).
    check(wrap({"type": "json_schema", "json_schema": {"type": "object"}}), ["{}", '{"x": [1]}'], ["[]"])
    # prefixItems without items: nothing after the prefix.
    tup = {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]}
    check(wrap({"type": "json_schema", "json_schema": tup}), ['[1, "a"]', "[1]", "[]"], ['[1, "a", 2]', '["a"]'])


def test_json_escaped_property_names():
    """corral takes a property name in any JSON spelling ('\\u0063ity' is 'city');
    xgrammar only the literal one: a difference (corral's is JSON's meaning)."""
    tag = wrap({"type": "json_schema", "json_schema": WEATHER})
    assert corral_accepts(tag, '{"\\u0063ity": "P"}') and not xgr_accepts(tag, '{"\\u0063ity": "P"}')
    # Likewise integers: JSON Schema counts 2.0 as an integer; xgrammar takes digits only.
    for s in ['{"city": "P", "days": 2.0}', '{"city": "P", "days": 2.00}']:
        assert corral_accepts(tag, s) and not xgr_accepts(tag, s)


def test_json_schema_value_differences():
    """A lone surrogate escape is not a Unicode string (corral refuses, xgrammar takes it); a
    schema without "type" is not assumed to be an object (xgrammar assumes it when it has
    properties)."""
    t = wrap({"type": "json_schema", "json_schema": {"type": "string"}})
    assert not corral_accepts(t, '"\\ude00"') and xgr_accepts(t, '"\\ude00"')
    assert corral_accepts(t, '"\\ud83d\\ude00"') and xgr_accepts(t, '"\\ud83d\\ude00"')
    t = wrap({"type": "json_schema", "json_schema": {"properties": {"a": {"type": "integer"}}}})
    assert corral_accepts(t, "1") and not xgr_accepts(t, "1")
    assert not corral_accepts(t, '{"b": 1}') and not xgr_accepts(t, '{"b": 1}')


def test_json_schema_any_order_is_exact():
    """any_order: keys in any order. corral keeps JSON Schema's meaning (required keys present,
    no duplicates); xgrammar's any_order drops both checks (documented there): a difference."""
    tag = wrap({"type": "json_schema", "json_schema": SEARCH, "any_order": True})
    for s in ['{"query": "q", "filters": []}', '{"filters": ["x"], "query": "q"}']:
        assert corral_accepts(tag, s) and xgr_accepts(tag, s)
    for s in ['{"query": "q", "query": "r"}', '{"filters": [], "filters": []}']:
        assert xgr_accepts(tag, s), "xgrammar's any_order no longer accepts duplicates: update docs"
        assert not corral_accepts(tag, s)
    assert not corral_accepts(tag, '{"query": "q"}') and not xgr_accepts(tag, '{"query": "q"}')


def test_any_text():
    check(wrap({"type": "any_text"}), ["", "anything <at> all é 😀"], [])
    check(wrap({"type": "any_text", "excludes": ["ab", "</x>"]}), ["", "a b", "ba", "</y>"], ["ab", "xaby", "1</x>"])
    check(wrap({"type": "any_text", "max_chars": 3}), ["", "abc", "ééé", "a😀b"], ["abcd", "éééé"])
    check(wrap({"type": "any_text", "max_chars": 4, "excludes": ["xy"]}), ["abcd", "xxxx", "yx"], ["abcde", "axyb"])
    # An empty exclude leaves only the empty text (every string contains "").
    check(wrap({"type": "any_text", "excludes": [""]}), [""], ["a"])


def test_bounded_text_in_tag_limits():
    """max_chars inside a tag: exact, and a clean limit error when the automaton is large."""
    small = wrap({"type": "tag", "begin": "<think>", "content": {"type": "any_text", "max_chars": 5}, "end": "</think>"})
    check(small, ["<think></think>", "<think>a</ c</think>", "<think>ééééé</think>"], ["<think>abcdef</think>", "<think></think></think>"])
    big = wrap({"type": "tag", "begin": "<think>", "content": {"type": "any_text", "max_chars": 4096}, "end": "</think>"})
    with pytest.raises(corral.LimitExceededError):
        corral.Grammar.from_structural_tag(big)
    g = corral.Grammar.from_structural_tag(big, limits={"max_dfa_states": 100_000})
    m = corral.Matcher(corral.CompiledGrammar(g, BYTES))
    assert m.accept_bytes(b"<think>" + b"a" * 4096 + b"</think>") and m.is_accepting()


def test_tag_end_detection():
    """An unlimited format inside a tag stops at the tag's end: the text may not contain it."""
    think = wrap({"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"})
    check(think, ["<think></think>", "<think>a < b </thin k></think>"], ["<think>a</think>b</think>", "<think>", "<think>a</think> "])
    # Self-overlapping end: the content holds no "aa"; "<" "a" "aa" is fine.
    overlap = wrap({"type": "tag", "begin": "<", "content": {"type": "any_text"}, "end": "aa"})
    check(overlap, ["<aa", "<aaa", "<baa", "<abaa"], ["<aaaa", "<xaab", "<aba a"])
    # End alternatives are all excluded; through sequence and or; the nearest tag counts.
    ends = wrap({"type": "tag", "begin": "[", "content": {"type": "any_text"}, "end": ["]", "}"]})
    check(ends, ["[a]", "[a}"], ["[a}]", "[a]}"])
    seq = wrap({"type": "tag", "begin": "[", "content": {"type": "sequence", "elements": [{"type": "any_text"}, {"type": "const_string", "value": "x"}]}, "end": "]"})
    check(seq, ["[ax]", "[x]", "[xxx]"], ["[a]x]", "[a]"])
    inner = wrap({"type": "tag", "begin": "[", "content": {"type": "tag", "begin": "(", "content": {"type": "any_text"}, "end": ")"}, "end": "]"})
    check(inner, ["[(a)]", "[(a])]"], ["[(a)b]", "[(a))]"])


TT = {"type": "triggered_tags", "triggers": ["<f="], "tags": [
    {"type": "tag", "begin": "<f=a>", "content": {"type": "const_string", "value": "X"}, "end": "</f>"},
    {"type": "tag", "begin": "<f=bb>", "content": {"type": "json_schema", "json_schema": {"type": "integer"}}, "end": "</f>"},
]}


@pytest.mark.parametrize("flags", [(False, False), (True, False), (False, True), (True, True)])
def test_triggered_tags_flags(flags):
    at_least_one, stop_after_first = flags
    tag = wrap(dict(TT, at_least_one=at_least_one, stop_after_first=stop_after_first))
    A, B = "<f=a>X</f>", "<f=bb>12</f>"
    cases = {
        "": not at_least_one,
        "hi": not at_least_one,
        "hi" + A: not at_least_one,
        A: True,
        A + "bye": not stop_after_first,
        A + B: not stop_after_first,
        A + " and " + B + " end": not stop_after_first,
        "hi" + A + B: not at_least_one and not stop_after_first,
    }
    pos = [s for s, ok in cases.items() if ok]
    neg = [s for s, ok in cases.items() if not ok] + ["<f=c>X</f>", "hi <f=", "<f=a>Y</f>", "<f=bb>1.5</f>", "<f=a>X"]
    check(tag, pos, neg)


def test_unlimited_formats_in_compositions():
    """Unlimited formats followed by more text, outside and inside tags."""
    check(wrap({"type": "sequence", "elements": [TT, {"type": "const_string", "value": "END"}]}),
          ["END", "hiEND", "hi<f=a>X</f>ENDEND", "hi<f=a>X</f>END"], ["<f=a>X</f>", "hi"])
    check(wrap({"type": "tag", "begin": "[", "content": {"type": "or", "elements": [{"type": "any_text"}, {"type": "const_string", "value": "]]"}]}, "end": "]"}),
          ["[a]", "[]]]"], ["[a]a]"])
    check(wrap({"type": "tag", "begin": "[", "content": {"type": "sequence", "elements": [dict(TT, stop_after_first=True), {"type": "const_string", "value": "!"}]}, "end": "]"}),
          ["[!]", "[a!]", "[a<f=a>X</f>!]"], ["[a]!]", "[<f=a>X</f>b!]"])
    check(wrap({"type": "sequence", "elements": [{"type": "any_text"}, {"type": "const_string", "value": "x"}]}), ["x", "axbx", "ax"], [""])


def test_triggered_tags_excludes_and_end():
    tag = wrap(dict(TT, excludes=["bad"]))
    check(tag, ["ba d", "<f=a>X</f>ok"], ["bad", "<f=a>X</f>bad"])
    # An exclude that is a prefix of the trigger wins: the tag can never start.
    tag = wrap({"type": "triggered_tags", "triggers": ["<f"], "excludes": ["<"], "tags": [{"type": "tag", "begin": "<f>", "content": {"type": "const_string", "value": ""}, "end": "."}]})
    check(tag, ["abc"], ["<f>.", "a<f>.", "a<"])
    # Inside a tag, free text stops at the tag's end.
    tag = wrap({"type": "tag", "begin": "[", "content": TT, "end": "]"})
    check(tag, ["[]", "[hi]", "[hi<f=a>X</f>]"], ["[a]b]", "[a", "[<f=a>X</f>]x"])


def test_triggered_tags_first_occurrence():
    """A trigger starts a tag at its first occurrence: 'aaab!' is free text 'a' + 'aa' found
    at 0, which then needs 'b'."""
    tag = wrap({"type": "triggered_tags", "triggers": ["aa"], "tags": [{"type": "tag", "begin": "aab", "content": {"type": "const_string", "value": ""}, "end": "!"}]})
    check(tag, ["aab!", "xaab!", "a", "aab!aab!"], ["aaab!", "aa", "aab"])
    # Triggers ending at the same byte: the longest one is dispatched.
    tag = wrap({"type": "triggered_tags", "triggers": ["b", "ab"], "tags": [
        {"type": "tag", "begin": "b1", "content": {"type": "const_string", "value": ""}, "end": "."},
        {"type": "tag", "begin": "ab2", "content": {"type": "const_string", "value": ""}, "end": "."},
    ]})
    check(tag, ["b1.", "ab2.", "xab2.", "a", "cb1."], ["ab1.", "ab", "b2."])
    # Several tags per trigger, begins prefixes of one another.
    tag = wrap({"type": "triggered_tags", "triggers": ["<f"], "tags": [
        {"type": "tag", "begin": "<f", "content": {"type": "const_string", "value": "1"}, "end": "."},
        {"type": "tag", "begin": "<fa", "content": {"type": "const_string", "value": "2"}, "end": "."},
    ]})
    check(tag, ["<f1.", "<fa2.", "z<f1.<fa2."], ["<fa1.", "<f2."])


def _no_pending(triggers: List[str], others: List[str]) -> bool:
    """No trigger occurs inside another pattern except at its very end (so no trigger ever
    waits for a longer pattern: the configurations where xgrammar's matcher is consistent)."""
    pats = triggers + others
    return all(t not in q[:-1] for t in triggers for q in pats if q != t)


@pytest.mark.parametrize("seed", range(4))
def test_random_triggered_tags_match_xgrammar(seed):
    """Random triggered_tags over a three-letter alphabet (random triggers, begins, ends,
    contents, excludes, flags, an enclosing tag), random strings: corral and xgrammar agree."""
    rng = random.Random(seed)
    alphabet = "ab<"

    def rs(lo: int, hi: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))

    compared = 0
    while compared < 8:
        triggers = sorted({rs(1, 3) for _ in range(rng.randint(1, 2))})
        tags = []
        for t in triggers:
            for _ in range(rng.randint(1, 2)):
                begin = t + rs(0, 2)
                if sum(begin.startswith(u) for u in triggers) == 1:
                    tags.append({"type": "tag", "begin": begin, "content": {"type": "const_string", "value": rs(0, 1)}, "end": rs(1, 2)})
        if not all(any(tg["begin"].startswith(t) for tg in tags) for t in triggers):
            continue
        fmt: dict = {"type": "triggered_tags", "triggers": triggers, "tags": tags, "at_least_one": rng.random() < 0.3, "stop_after_first": rng.random() < 0.3}
        others = []
        if rng.random() < 0.4:
            fmt["excludes"] = [rs(1, 3)]
            others += fmt["excludes"]
        prefix = ""
        if rng.random() < 0.3:
            end = rs(1, 2)
            others.append(end)
            fmt = {"type": "tag", "begin": "[", "content": fmt, "end": end}
            prefix = "["
        if not _no_pending(triggers, others):
            continue
        tag = wrap(fmt)
        compared += 1
        for n in range(7):
            for _ in range(25 if n > 3 else 8):
                s = prefix + rs(n, n)
                assert corral_accepts(tag, s) == xgr_accepts(tag, s), f"{json.dumps(fmt)} on {s!r}: corral {corral_accepts(tag, s)}"


@pytest.mark.parametrize("seed", range(3))
def test_random_any_text_in_tags_match_xgrammar(seed):
    """Random any_text (excludes, max_chars) inside tags with one or two random ends, and
    dispatch with random patterns: corral and xgrammar agree on random strings."""
    rng = random.Random(100 + seed)
    alphabet = "ab<"

    def rs(lo: int, hi: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))

    for _ in range(6):
        text: dict = {"type": "any_text"}
        if rng.random() < 0.5:
            text["excludes"] = [rs(1, 3)]
        if rng.random() < 0.3:
            text["max_chars"] = rng.randint(0, 4)
        ends = [rs(1, 3) for _ in range(rng.randint(1, 2))]
        tag = wrap({"type": "tag", "begin": "[", "content": text, "end": ends if len(ends) > 1 else ends[0]})
        pats = sorted({rs(1, 2) for _ in range(rng.randint(1, 2))})
        if not _no_pending(pats, []):
            pats = pats[:1]
        disp = wrap({"type": "dispatch", "rules": [[p, {"type": "const_string", "value": rs(0, 2)}] for p in pats], "loop": rng.random() < 0.6})
        for t, prefix in [(tag, "["), (disp, "")]:
            for n in range(8):
                for _ in range(20 if n > 3 else 6):
                    s = prefix + rs(n, n)
                    assert corral_accepts(t, s) == xgr_accepts(t, s), f"{json.dumps(t)} on {s!r}: corral {corral_accepts(t, s)}"


def test_triggered_tags_pending_trigger_difference():
    """xgrammar defers a trigger that is a suffix of a longer trigger's prefix ('b' inside
    'ab' while 'abc' may follow) and, at the end of the text, accepts the free text 'ab' that
    contains the trigger 'b', and 'abx' too. corral dispatches the pending trigger as soon as
    the longer one cannot complete: 'ab' holds a trigger occurrence, so a tag must follow.
    Where a tag follows, both agree."""
    tag = wrap({"type": "triggered_tags", "triggers": ["b", "abc"], "tags": [
        {"type": "tag", "begin": "b1", "content": {"type": "const_string", "value": ""}, "end": "."},
        {"type": "tag", "begin": "abc2", "content": {"type": "const_string", "value": ""}, "end": "."},
    ]})
    check(tag, ["ab1.", "abc2.", "a"], ["abc2", "b"], mutate=False)
    # xgrammar also takes 'ab' and 'abx' as free text (the trigger 'b' occurs, no tag follows);
    # corral does not.
    for s in ["ab", "abx", "cab"]:
        assert xgr_accepts(tag, s) and not corral_accepts(tag, s), s


def test_tags_with_separator():
    base = {"type": "tags_with_separator", "tags": [
        {"type": "tag", "begin": "<a>", "content": {"type": "const_string", "value": "1"}, "end": "</a>"},
        {"type": "tag", "begin": "<b>", "content": {"type": "json_schema", "json_schema": {"type": "boolean"}}, "end": "</b>"},
    ], "separator": ","}
    one, two = "<a>1</a>", "<a>1</a>,<b>true</b>"
    check(wrap(base), ["", one, two, two + ",<a>1</a>"], ["<a>1</a>,", " <a>1</a>", "<a>1</a><b>true</b>"])
    check(wrap(dict(base, at_least_one=True)), [one, two], [""])
    check(wrap(dict(base, stop_after_first=True)), ["", one], [two])
    check(wrap(dict(base, stop_after_first=True, at_least_one=True)), [one], ["", two])


def test_dispatch():
    d = {"type": "dispatch", "rules": [["<f>", {"type": "const_string", "value": "X"}], ["<g>", {"type": "json_schema", "json_schema": {"type": "integer"}}]]}
    check(wrap(d), ["", "a", "<f>X", "a<f>Xb<g>12c"], ["<f>", "<f>Y", "<g>x"])
    check(wrap(dict(d, loop=False)), ["", "a", "a<f>X", "<g>7"], ["a<f>Xb", "a<f>X<f>X"])
    check(wrap({"type": "tag", "begin": "[", "content": dict(d, excludes=["]"]), "end": "]"}), ["[a]", "[<f>X]"], ["[a]b]"])


def test_legacy_form():
    tag = {
        "structures": [
            {"begin": "<function=get_weather>", "schema": WEATHER, "end": "</function>"},
            {"begin": "<function=search>", "schema": json.dumps(SEARCH), "end": "</function>"},
        ],
        "triggers": ["<function="],
    }
    g = corral.Grammar.from_structural_tag(tag)
    assert g.num_rules > 0
    # SGLang sends it with "type": "structural_tag"; the JSON text is read too.
    assert corral.Grammar.from_structural_tag(json.dumps(dict(tag, type="structural_tag"))).source_key == corral.Grammar.from_structural_tag(json.dumps(dict(tag, type="structural_tag"))).source_key
    items = [xgr.StructuralTagItem(begin=s["begin"], schema=s["schema"] if isinstance(s["schema"], dict) else json.loads(s["schema"]), end=s["end"]) for s in tag["structures"]]
    ref = xgr.Grammar.from_structural_tag(items, tag["triggers"])
    cg = corral.CompiledGrammar(g, BYTES)
    pos = ["", "hello", '<function=get_weather>{"city": "P"}</function>', 'a<function=search>{"query": "q", "filters": []}</function>b']
    neg = ['<function=get_weather>{"town": "P"}</function>', "<function=", '<function=other>{}</function>']
    rng = random.Random(1)
    for s in pos + neg + [m for p in pos for m in mutations(p, rng)]:
        m = corral.Matcher(cg)
        mine = m.accept_bytes(s.encode()) and m.is_accepting()
        assert mine == _is_grammar_accept_string(ref, s), s
        if s in pos or s in neg:
            assert mine == (s in pos), s


# ---------------------------------------------------------------------------------------
# XML argument styles
# ---------------------------------------------------------------------------------------

XS = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}}, "required": ["a"]}


def xml(schema: Any, style: str = "qwen_xml", **kw: Any) -> dict:
    return wrap(dict({"type": "json_schema", "json_schema": schema, "style": style}, **kw))


def test_qwen_xml_parameters():
    tag = xml(XS)
    pos = [
        "<parameter=a>1</parameter>",
        "<parameter=a>\n1\n</parameter>\n<parameter=b>\nx y\n</parameter>\n",
        "\r<parameter=a>1</parameter>\t<parameter=c>true</parameter>",
        "<parameter=a>1</parameter><parameter=b>a</parameter b \"q\" é</parameter>",
        "<parameter=a> 1 </parameter><parameter=b></parameter><parameter=c>false</parameter>",
    ]
    neg = [
        "",
        "<parameter=b>x</parameter><parameter=a>1</parameter>",  # declared order
        "<parameter=a>1</parameter><parameter=b></parameter></parameter>",
        "<parameter=a>x</parameter>",
        "<parameter=a>1</parameter><parameter=d>1</parameter>",  # closed (strict mode)
        "<parameter=a>1",
    ]
    check(tag, pos, neg)
    check(xml(XS, max_whitespace_cnt=1), ["<parameter=a> 1 </parameter>\n<parameter=c>true</parameter>", "<parameter=a>1</parameter><parameter=b>  x  </parameter>"],
          ["<parameter=a>1</parameter>\n\n<parameter=c>true</parameter>", "<parameter=a>  1  </parameter>"])


def test_qwen_xml_values():
    schema = {"type": "object", "properties": {
        "o": {"type": "object", "properties": {"k": {"type": "integer"}}},
        "l": {"type": "array", "items": {"type": "string"}},
        "e": {"enum": ["x y", 1, None]},
        "k": {"const": "hi"},
        "t": {"type": ["string", "null"]},
        "u": {"anyOf": [{"type": "string", "pattern": "^[a-z]+$"}, {"type": "integer"}]},
        "s": {"type": "string", "minLength": 2, "maxLength": 3},
        "r": {"$ref": "#/$defs/n"},
        "x": {},
    }, "$defs": {"n": {"type": "number"}}}
    tag = xml(schema)
    pos = [
        '<parameter=o>{"k": 1}</parameter>', '<parameter=o> {"k":1} </parameter>', '<parameter=l>["a"]</parameter>',
        "<parameter=e>x y</parameter>", "<parameter=e> 1 </parameter>", "<parameter=e>null</parameter>", "<parameter=k> hi</parameter>",
        "<parameter=t>null</parameter>", "<parameter=t>abc</parameter>", "<parameter=u>abc</parameter>", "<parameter=u> 12 </parameter>",
        "<parameter=s></p</parameter>", "<parameter=r>1.5</parameter>", "<parameter=x>abc</parameter>", "<parameter=x> [1] </parameter>",
    ]
    neg = ['<parameter=o>{"z": 1}</parameter>', '<parameter=e>"x y"</parameter>', "<parameter=u>ab1</parameter>", "<parameter=s>a</parameter>",
           "<parameter=s>abcd</parameter>", "<parameter=r>x</parameter>", '<parameter=l>"a"</parameter>']
    check(tag, pos, neg)


def test_xml_open_objects_and_other_styles():
    check(xml({"type": "object"}), ["", "<parameter=x>1</parameter><parameter=y> [2] </parameter>"], ["<parameter=9>1</parameter>", "<parameter=a-b>1</parameter>"])
    check(xml(True), ["", "<parameter=x>1</parameter>"], ["x"])
    extra = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "integer"}}
    check(xml(extra), ["<parameter=a>1</parameter><parameter=zz>2</parameter>", "<parameter=zz>2</parameter>"], ["<parameter=zz>x</parameter>"], mutate=False)
    check(xml(XS, "minimax_xml"), ['<parameter name="a">1</parameter>\n<parameter name="b">x y</parameter>'], ["<parameter=a>1</parameter>"])
    check(xml(XS, "glm_xml"), ["<arg_key>a</arg_key>\n<arg_value>1</arg_value><arg_key>b</arg_key><arg_value>x</arg_value>", "<arg_key>a</arg_key> <arg_value> 1 </arg_value>"],
          ["<arg_key>b</arg_key><arg_value>x</arg_value>"])


@pytest.mark.parametrize("style, dsml", [("deepseek_xml", "<｜DSML｜parameter"), ("deepseek_v4_1_xml", "<｜DSML｜ parameter")])
def test_deepseek_xml(style, dsml):
    """DeepSeek XML: string="true" before a raw string value, "false" before a JSON one."""
    close = "</" + dsml[1:] + ">"

    def p(name, kind, value):
        return f'{dsml} name="{name}" string="{kind}">{value}{close}'

    schema = {"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": "string"}, "t": {"type": ["string", "integer"]},
        "e": {"enum": ["x", 1]}, "x": {},
    }, "required": ["a"]}
    tag = xml(schema, style)
    pos = [p("a", "false", "1"), p("a", "false", " 1 ") + "\n" + p("b", "true", "x y"), p("a", "false", "1") + p("t", "true", "1") + p("e", "false", "1"),
           p("a", "false", "2") + p("t", "false", "3") + p("e", "true", "x") + p("x", "false", "[1]"), p("a", "false", "2") + p("x", "true", "[1]")]
    neg = [p("a", "true", "1"), p("a", "false", "1") + p("b", "false", "x"), p("a", "false", "1") + p("t", "false", "abc"), p("a", "false", "1") + p("e", "true", "1"),
           p("b", "true", "x")]
    check(tag, pos, neg)


def test_xml_differences():
    """Other keys may not repeat a declared name (xgrammar's XML key pattern takes any name, so
    '<parameter=a>' may appear again, as an 'other' key, after the declared ones); any_order
    keeps required keys required and forbids duplicates (xgrammar drops both)."""
    extra = xml({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "integer"}})
    s = "<parameter=a>1</parameter><parameter=a>2</parameter>"
    assert xgr_accepts(extra, s) and not corral_accepts(extra, s)
    s = "<parameter=zz>2</parameter><parameter=a>1</parameter>"
    assert xgr_accepts(extra, s) and not corral_accepts(extra, s)
    tag = xml(XS, any_order=True)
    for s in ["<parameter=c>true</parameter><parameter=a>1</parameter>", "<parameter=b>x</parameter> <parameter=a>1</parameter>\n"]:
        assert corral_accepts(tag, s) and xgr_accepts(tag, s), s
    for s in ["<parameter=c>true</parameter>", "<parameter=a>1</parameter><parameter=a>1</parameter>"]:
        assert xgr_accepts(tag, s) and not corral_accepts(tag, s), s


# The recursive XML styles (cohere_xml, minimax_m3_xml) and kimi_k3_xml
M3 = "]<]minimax[>["


def m3(k: str, v: str) -> str:
    return f"{M3}<{k}>{v}{M3}</{k}>"


def coh(k: str, t: str, v: str) -> str:
    return f'<cofl:value name="{k}" type="{t}">{v}</cofl:value>'


def coh_item(t: str, v: str) -> str:
    return f'<cofl:value type="{t}">{v}</cofl:value>'


def kimi(k: str, t: str, v: str) -> str:
    return f'<|open|>argument key="{k}" type="{t}"<|sep|>{v}<|close|>argument<|sep|>'


# Nested objects and arrays, bounds, type lists, anyOf, a $ref to an enum.
NESTED = {"type": "object", "properties": {
    "l": {"type": "array", "items": {"type": "object", "properties": {"q": {"type": "integer"}, "r": {"type": "boolean"}}, "required": ["r"]}, "minItems": 1, "maxItems": 2},
    "x": {"type": "number", "minimum": 2},
    "t": {"type": ["string", "null"]},
    "u": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
    "r": {"$ref": "#/$defs/d"},
}, "$defs": {"d": {"enum": ["p", "q"]}}}


def test_minimax_m3_xml():
    """Parameters nested by the namespace marker, no whitespace around values, arrays as
    <item> parameters, an object without parameters is empty (not whitespace)."""
    item = m3("item", m3("q", "1") + m3("r", "false"))
    pos = ["", m3("l", m3("item", m3("r", "true"))), m3("l", " " + item + "\n" + m3("item", m3("r", "true")) + " "),
           m3("x", "2.5") + m3("t", "null") + m3("u", "true") + m3("r", "q"), " " + m3("t", "a b <x>") + "\n" + m3("u", "7") + " "]
    neg = [" ", m3("x", "1"), m3("x", " 3"), m3("l", ""), m3("l", item * 3), m3("r", "z"), m3("u", "1") + m3("t", "a"),
           m3("t", "a" + M3 + "b")]
    check(xml(NESTED, "minimax_m3_xml"), pos, neg)
    check(xml(NESTED, "minimax_m3_xml", max_whitespace_cnt=1), [m3("x", "3") + " " + m3("t", "a")], [m3("x", "3") + "  " + m3("t", "a")])
    check(xml(WEATHER, "minimax_m3_xml", any_order=True), [m3("days", "2") + m3("city", "P"), m3("city", "P")], [m3("city", "P") + " " + m3("x", "1")], mutate=False)


def test_cohere_xml():
    """A type attribute per value (raw, json, dict, list), list items without names and
    without separators, attribute-escaped names, other keys other than the declared ones."""
    dict_item = coh_item("dict", " " + coh("q", "json", "1") + coh("r", "json", "false"))
    pos = ["", coh("l", "list", coh_item("dict", coh("r", "json", "true"))), coh("l", "list", "  " + dict_item + coh_item("dict", coh("r", "json", "true")) + " "),
           coh("x", "json", " 2.5 ") + coh("t", "json", "null") + coh("u", "json", "true") + coh("r", "raw", " q"),
           coh("t", "raw", "a b") + coh("u", "json", "7")]
    neg = [coh("l", "list", ""), coh("l", "list", dict_item + " " + dict_item), coh("x", "raw", "3"), coh("t", "raw", "a</cofl:value>"), coh("r", "json", "q")]
    check(xml(NESTED, "cohere_xml"), pos, neg)
    extra = {"type": "object", "properties": {"a": {"type": "integer"}, 'b&"<': {"type": "string"}}, "additionalProperties": {"type": "boolean"}}
    check(xml(extra, "cohere_xml"), [coh("a", "json", "1") + coh("zz", "json", "true"), coh("b&amp;&quot;&lt;", "raw", "x"), coh("é&amp;", "json", "false")],
          [coh("a", "json", "1") + coh("a", "json", "true"), coh('b&"<', "raw", "x"), coh("z&x", "json", "true")])
    anything = coh("x", "raw", "a") + coh("y", "list", coh_item("json", "1") + coh_item("dict", coh("z", "list", ""))) + coh("w", "dict", coh("v", "json", "null"))
    check(xml(True, "cohere_xml"), ["", anything], [coh("x", "json", "[1]"), coh("x", "dict", "a")])


def test_kimi_k3_xml():
    """A type attribute per parameter: the schema's type (integer written number), the type of
    its const/enum values, or any type name when the schema does not fix one."""
    pos = ["", kimi("l", "array", '[{"r":true}]'), kimi("x", "number", "2.5") + kimi("t", "string", "null") + kimi("u", "integer", "true") + kimi("r", "string", "q"),
           kimi("t", "null", "abc") + kimi("u", "boolean", " 7 ") + kimi("r", "number", " p ")]
    neg = [kimi("x", "integer", "3"), kimi("l", "list", '[{"r":true}]'), kimi("l", "array", "[]"), kimi("x", "number", "1"), kimi("t", "text", "a")]
    check(xml(NESTED, "kimi_k3_xml"), pos, neg)
    consts = {"type": "object", "properties": {"k": {"const": 1}, "e": {"enum": ["a", "b"]}, "m": {"enum": ["a", 1]}, "o": {"type": "object"}}, "required": ["k"]}
    check(xml(consts, "kimi_k3_xml"), [kimi("k", "number", "1") + kimi("e", "string", "a") + kimi("m", "null", "1") + kimi("o", "object", '{"z": [1]}')],
          [kimi("k", "integer", "1"), kimi("k", "number", "1") + kimi("e", "number", "a")])
    check(xml(True, "kimi_k3_xml"), ["", kimi("x", "null", "a") + kimi("y", "array", "[1]")], [kimi("x-y", "null", "a")])


def test_recursive_xml_differences():
    """cohere_xml: an array without items takes any items in corral (xgrammar: the empty
    array only); minimax_m3_xml: any_order keeps required keys required and forbids repeated
    keys (xgrammar drops both, as in the other styles)."""
    tag = xml({"type": "object", "properties": {"l": {"type": "array"}}}, "cohere_xml")
    s = coh("l", "list", coh_item("raw", "q") + coh_item("json", "1"))
    assert corral_accepts(tag, s) and not xgr_accepts(tag, s)
    assert corral_accepts(tag, coh("l", "list", "")) and xgr_accepts(tag, coh("l", "list", ""))
    tag = xml(WEATHER, "minimax_m3_xml", any_order=True)
    for s in [m3("city", "P") + m3("city", "Q"), m3("days", "2")]:
        assert xgr_accepts(tag, s) and not corral_accepts(tag, s), s


def excl(schema: Any, excludes: List[str], style: str = "json") -> dict:
    return wrap({"type": "json_schema", "json_schema": schema, "style": style, "excludes": excludes})


def test_json_schema_excludes():
    """Excluded strings in string values (nested ones too), enum values and property names;
    not in strings with a pattern; in XML styles, raw strings and other keys."""
    schema = {"type": "object", "properties": {
        "s": {"type": "string"}, "l": {"type": "array", "items": {"type": "string", "maxLength": 4}},
        "p": {"type": "string", "pattern": "^[a-z]+$"}, "e": {"enum": ["ab", "x", 1]}, "abc": {"type": "integer"},
        "o": {"type": "object", "properties": {"q": {"type": ["string", "null"]}}},
    }}
    check(excl(schema, ["ab", "<|"]), ['{"s":"xa"}', '{"l":["a","b a"],"p":"xab","e":1}', '{"e":"x","o":{"q":"<"}}', '{"o":{"q":null}}'],
          ['{"s":"xaby"}', '{"l":["cab"]}', '{"e":"ab"}', '{"abc":1}', '{"o":{"q":"a<|"}}', '{"l":["abcde"]}'])
    xs = {"type": "object", "properties": {"s": {"type": "string"}, "t": {"type": "string", "maxLength": 3}, "j": {"type": "object", "properties": {"q": {"type": "string"}}}},
          "additionalProperties": {"type": "integer"}}
    check(excl(xs, ["ab"], "qwen_xml"), ["<parameter=s>xa b</parameter>", '<parameter=j>{"q":"a"}</parameter><parameter=zz>1</parameter>', "<parameter=t>a</parameter>"],
          ["<parameter=s>xaby</parameter>", '<parameter=j>{"q":"ab"}</parameter>', "<parameter=zab>1</parameter>", "<parameter=t>cab</parameter>"])


def test_json_schema_excludes_differences():
    """corral matches excluded strings against the decoded JSON string, so an escaped
    spelling is refused too (xgrammar matches the escaped text); length bounds stay enforced
    (xgrammar drops them when it filters a string)."""
    tag = excl({"type": "object", "properties": {"s": {"type": "string"}, "t": {"type": "string", "maxLength": 2}}}, ["ab"])
    for s in ['{"s":"a\\u0062"}', '{"t":"xyz"}']:
        assert xgr_accepts(tag, s) and not corral_accepts(tag, s), s


def test_kimi_k3_builtin():
    """xgrammar's builtin kimi_k3 tag: a response, then kimi_k3_xml tool calls whose raw and
    JSON strings exclude the markers <|open|>, <|close|>, <|sep|>."""
    tag = _builtin("kimi_k3")
    def call(tool, i, args):
        return f'<|open|>call tool="{tool}" index="{i}"<|sep|>' + args + "<|close|>call<|sep|>"
    w = call("get_weather", 0, kimi("city", "string", "Paris") + kimi("days", "number", "2"))
    s = call("search", 1, kimi("query", "string", "q") + kimi("filters", "array", '["a", "b"]'))
    end = "<|close|>message<|sep|>"
    pos = ["Hi<|close|>response<|sep|>" + end, "ok<|close|>response<|sep|><|open|>tools<|sep|>" + w + s + "<|close|>tools<|sep|>" + end]
    neg = ["ok<|close|>response<|sep|><|open|>tools<|sep|>" + w.replace("Paris", "Pa<|sep|>ris") + "<|close|>tools<|sep|>" + end,
           "ok<|close|>response<|sep|><|open|>tools<|sep|>" + s.replace('"a"', '"<|open|>"') + "<|close|>tools<|sep|>" + end]
    check(tag, pos, neg)


@pytest.mark.parametrize("model", ["cohere", "minimax_m3"])
def test_recursive_xml_builtins(model):
    """xgrammar's builtin cohere and minimax_m3 tool-call tags compile and agree with xgrammar."""
    tag = _builtin(model)
    if model == "cohere":
        call = '<cofl:tool_call id="3" name="get_weather">' + coh("city", "raw", "Paris") + coh("days", "json", "2") + "</cofl:tool_call>"
        search = '<cofl:tool_call id="4" name="search">' + coh("query", "raw", "q") + coh("filters", "list", coh_item("raw", "a")) + "</cofl:tool_call>"
        block = "<cofl:tool_calls>" + call + search + "</cofl:tool_calls>"
        check(tag, ["", "Sure. " + block], [block.replace('"2"', '"x"').replace(">2<", ">x<"), "<cofl:tool_calls></cofl:tool_calls>", "<|START_THINKING|>" + block])
    else:
        call = f'{M3}<invoke name="get_weather">' + m3("city", "Paris") + m3("days", "2") + f"{M3}</invoke>\n"
        search = f'{M3}<invoke name="search">' + m3("query", "q") + m3("filters", m3("item", "a")) + f"{M3}</invoke>\n"
        block = f"{M3}<tool_call>\n" + call + search + f"{M3}</tool_call>"
        check(tag, ["", "Sure. " + block], [block.replace("<days>2", "<days>x"), f"{M3}<tool_call>\n{M3}</tool_call>"])


def _builtin(model: str, choice: str = "auto") -> dict:
    from xgrammar.builtin_structural_tag import get_model_structural_tag

    tools = [{"type": "function", "function": {"name": n, "parameters": p}} for n, p in TOOLS.items()]
    return get_model_structural_tag(model, tools=tools, tool_choice=choice, reasoning=False).model_dump(mode="json", exclude_none=True)


def test_kimi_and_harmony_builtins():
    """xgrammar's builtin kimi (regex call index, excludes) and harmony (channels, any_text
    with an end list, a separator) tags."""
    kimi = _builtin("kimi")
    call = "<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>" + json.dumps(W1) + "<|tool_call_end|>"
    block = "<|tool_calls_section_begin|>" + call + call.replace(":0", ":12") + "<|tool_calls_section_end|>"
    check(kimi, ["", "ok " + block], [block.replace(":0", ":x"), "<|tool_calls_section_begin|><|tool_calls_section_end|>", "a<|tool_call_begin|>"])
    harmony = _builtin("harmony")
    final = "<|channel|>final<|message|>Hello there<|return|>"
    fcall = "<|channel|>commentary to=functions.get_weather<|constrain|>json<|message|>" + json.dumps(W1) + "<|call|>"
    check(harmony, ["", final, fcall + "<|start|>assistant" + final], [final + final, "<|channel|>final<|message|>a<|end|>b<|return|>", fcall.replace("Paris", "1")[:-7]])


def test_qwen_3_coder_builtin():
    """xgrammar's builtin Qwen3-Coder tag (qwen_xml tool calls after a trigger)."""
    from xgrammar.builtin_structural_tag import get_model_structural_tag

    tools = [{"type": "function", "function": {"name": n, "parameters": p}} for n, p in TOOLS.items()]
    tag = get_model_structural_tag("qwen_3_coder", tools=tools, tool_choice="auto", reasoning=False).model_dump(mode="json", exclude_none=True)
    call = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
    pos = ["", "Let me look.\n" + call, call + "\nDone."]
    neg = [call.replace("days", "weeks"), call.replace("3", "x"), "<tool_call>\n<function=nope>\n</function>\n</tool_call>", "<think>"]
    check(tag, pos, neg)


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tag, pointer",
    [
        ({"type": "structural_tag"}, ""),
        ({"type": "structural_tag", "format": {"type": "const_string"}}, "/format"),
        ({"type": "structural_tag", "format": {"type": "nope"}}, "/format/type"),
        (wrap({"type": "sequence", "elements": []}), "/format/elements"),
        (wrap({"type": "or", "elements": [{"type": "const_string", "value": 1}]}), "/format/elements/0/value"),
        (wrap({"type": "repeat", "min": 3, "max": 2, "content": {"type": "const_string", "value": "a"}}), "/format/max"),
        (wrap({"type": "triggered_tags", "triggers": [], "tags": []}), "/format/triggers"),
        (wrap({"type": "triggered_tags", "triggers": ["<f"], "tags": [{"type": "tag", "begin": "<g>", "content": {"type": "const_string", "value": ""}, "end": "."}]}), "/format/tags/0/begin"),
        (wrap({"type": "triggered_tags", "triggers": ["<", "<f"], "tags": [{"type": "tag", "begin": "<f>", "content": {"type": "const_string", "value": ""}, "end": "."}]}), "/format/tags/0/begin"),
        (wrap({"type": "tag", "begin": "<", "content": {"type": "any_text"}, "end": ""}), "/format/content"),
        (wrap({"type": "json_schema", "json_schema": {}, "style": "yaml"}), "/format/style"),
        ({"structures": [{"begin": "<a>", "end": "</a>"}], "triggers": ["<a"]}, "/structures/0"),
    ],
)
def test_invalid_tags(tag, pointer):
    with pytest.raises(corral.InvalidStructuralTagError) as ei:
        corral.Grammar.from_structural_tag(tag)
    assert ei.value.pointer == pointer


def _mutate_json(v: Any, rng: random.Random) -> Any:
    """One random structural change somewhere in ``v`` (drop a key, swap a value's type...)."""
    junk = [None, 0, -1, 2**40, "", "x", [], {}, [1], {"type": "nope"}, True, 1.5]
    if isinstance(v, dict) and v and rng.random() < 0.7:
        k = rng.choice(sorted(v))
        w = dict(v)
        r = rng.random()
        if r < 0.25:
            del w[k]
        elif r < 0.5:
            w[k] = rng.choice(junk)
        else:
            w[k] = _mutate_json(v[k], rng)
        return w
    if isinstance(v, list) and v and rng.random() < 0.7:
        i = rng.randrange(len(v))
        w = list(v)
        if rng.random() < 0.3:
            del w[i]
        else:
            w[i] = _mutate_json(v[i], rng)
        return w
    return rng.choice(junk)


def test_mutated_tags_never_crash():
    """Randomly broken tags compile or raise one of corral's grammar errors (never a panic or
    an internal error)."""
    rng = random.Random(7)
    seeds = [hermes("auto"), hermes("forced"), llama(), deepseek_r1(), minimax("auto"), glm_4_7(), xml(XS), wrap(TT),
             wrap({"type": "dispatch", "rules": [["<f>", {"type": "any_text", "max_chars": 3}]], "excludes": ["x"]})]
    outcomes = {"ok": 0, "error": 0}
    for _ in range(400):
        tag = _mutate_json(rng.choice(seeds), rng)
        try:
            corral.Grammar.from_structural_tag(tag)
            outcomes["ok"] += 1
        except (corral.GrammarError, corral.LimitExceededError):
            outcomes["error"] += 1
    assert outcomes["ok"] > 0 and outcomes["error"] > 100, outcomes


def test_invalid_json_text():
    with pytest.raises(corral.InvalidStructuralTagError):
        corral.Grammar.from_structural_tag("{not json")


@pytest.mark.parametrize(
    "fmt, construct, location",
    [
        ({"type": "sequence", "elements": [{"type": "any_text", "max_tokens": 10}]}, "max_tokens", "/format/elements/0/max_tokens"),
        ({"type": "json_schema", "json_schema": WEATHER, "excludes": ["a\\b"]}, "excludes", "/format/excludes/0"),
        ({"type": "json_schema", "json_schema": WEATHER, "style": "cohere_xml", "excludes": ["x"]}, "excludes", "/format/excludes"),
        ({"type": "json_schema", "json_schema": {"type": "object", "properties": {"x": {}}}, "excludes": ["zz"]}, "excludes", "/format/json_schema/properties/x"),
        ({"type": "json_schema", "json_schema": {"type": "object", "additionalProperties": {"type": "integer"}}, "excludes": ["zz"]}, "excludes", "/format/json_schema/additionalProperties"),
        ({"type": "json_schema", "json_schema": WEATHER, "excludes": ["it"]}, "excludes", "/format/json_schema/required/0"),
        ({"type": "json_schema", "json_schema": {"type": "object", "properties": {"e": {"enum": ["ab", "xab"]}}}, "excludes": ["ab"]}, "excludes", "/format/json_schema/properties/e/enum"),
        ({"type": "json_schema", "json_schema": True, "style": "minimax_m3_xml"}, "json_schema", "/format/json_schema"),
        ({"type": "json_schema", "json_schema": {"type": "object", "properties": {"x": {}}}, "style": "minimax_m3_xml"}, "json_schema", "/format/json_schema/properties/x"),
        ({"type": "json_schema", "json_schema": {"type": "object", "additionalProperties": True}, "style": "minimax_m3_xml"}, "additionalProperties", "/format/json_schema/additionalProperties"),
        ({"type": "json_schema", "json_schema": {"type": "object", "properties": {"s": {"type": "string", "maxLength": 3}}}, "style": "minimax_m3_xml"}, "maxLength", "/format/json_schema/properties/s/maxLength"),
        ({"type": "json_schema", "json_schema": {"type": "object", "properties": {"l": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}}}, "style": "cohere_xml"}, "uniqueItems", "/format/json_schema/properties/l/uniqueItems"),
        ({"type": "json_schema", "json_schema": {"type": "object", "properties": {"l": {"type": "array", "minItems": 3, "maxItems": 2, "items": {"type": "integer"}}}}, "style": "cohere_xml"}, "minItems", "/format/json_schema/properties/l/minItems"),
        ({"type": "json_schema", "json_schema": {"type": "object", "minProperties": 1}, "style": "qwen_xml"}, "minProperties", "/format/json_schema/minProperties"),
        ({"type": "json_schema", "json_schema": {"type": "object", "properties": {"d": {"type": "string", "format": "date"}}}, "style": "qwen_xml"}, "format", "/format/json_schema/properties/d/format"),
        ({"type": "json_schema", "json_schema": {"type": "object", "properties": {"d": {"anyOf": []}}}, "style": "qwen_xml"}, "anyOf", "/format/json_schema/properties/d/anyOf"),
        ({"type": "json_schema", "json_schema": {"type": "object", "properties": {"d": {"oneOf": [{"type": "integer"}]}}}, "style": "qwen_xml"}, "oneOf", "/format/json_schema/properties/d/oneOf"),
    ],
)
def test_unsupported(fmt, construct, location):
    with pytest.raises(corral.UnsupportedGrammarError) as ei:
        corral.Grammar.from_structural_tag(wrap(fmt))
    assert ei.value.construct == construct
    assert ei.value.location == location


def test_bad_embedded_schema_names_its_place():
    tag = wrap({"type": "tag", "begin": "<a>", "content": {"type": "json_schema", "json_schema": {"type": "object", "properties": {"x": {"type": "wat"}}}}, "end": "</a>"})
    with pytest.raises((corral.InvalidSchemaError, corral.UnsupportedSchemaError)) as ei:
        corral.Grammar.from_structural_tag(tag)
    assert ei.value.location == "/format/content/json_schema"
    assert "/format/content/json_schema" in str(ei.value)


def test_bad_embedded_grammar_and_regex():
    with pytest.raises(corral.GrammarError):
        corral.Grammar.from_structural_tag(wrap({"type": "grammar", "grammar": "root ::= ("}))
    with pytest.raises(corral.GrammarError):
        corral.Grammar.from_structural_tag(wrap({"type": "regex", "pattern": "a("}))


# ---------------------------------------------------------------------------------------
# Masks on a real tokenizer
# ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _llama3():
    from tokenizers_util import llama3

    enc = llama3()
    vocab = corral.Vocabulary.from_tiktoken(enc)
    n = vocab.size
    toks = [vocab.token_bytes(i) for i in range(n)]
    eos = vocab.eos_token_ids
    info = xgr.TokenizerInfo(toks, xgr.VocabType.RAW, vocab_size=n, stop_token_ids=eos)
    return enc, vocab, info


def _allowed_corral(m: corral.Matcher, n: int) -> set:
    import numpy as np

    words = (n + 31) // 32
    mask = np.zeros(words, dtype=np.int32)
    m.fill_next_token_bitmask(mask)
    bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[:n]
    return set(np.nonzero(bits)[0].tolist())


def _allowed_xgr(m: Any, n: int) -> set:
    import numpy as np

    bm = xgr.allocate_token_bitmask(1, n)
    m.fill_next_token_bitmask(bm, 0)
    bits = np.unpackbits(bm.numpy()[0].view(np.uint8), bitorder="little")[:n]
    return set(np.nonzero(bits)[0].tolist())


@functools.lru_cache(maxsize=None)
def _not_text_tokens() -> List[int]:
    _, vocab, _ = _llama3()
    out = []
    for i in range(vocab.size):
        if vocab.is_special(i) and i not in vocab.eos_token_ids:
            out.append(i)
            continue
        try:
            vocab.token_bytes(i).decode("utf-8")
        except UnicodeDecodeError:
            out.append(i)
    return out


def test_free_text_is_utf8():
    """corral's free text is UTF-8 text (Unicode scalar values). xgrammar's triggered_tags
    free text takes any bytes (a lone 0xff, a cut-off character at the end), and its any_text
    takes encoded surrogates (ED A0 80): differences, asserted here."""
    tag = wrap(TT)
    for bad in [b"\xff", b"ab\xc3", b"\xed\xa0\x80", b"\xa1"]:
        m = corral.Matcher(_corral(json.dumps(tag)))
        assert not (m.accept_bytes(bad) and m.is_accepting()), bad
    m = corral.Matcher(_corral(json.dumps(tag)))
    assert m.accept_bytes("é😀".encode()) and m.is_accepting()
    info = xgr.TokenizerInfo([bytes([i]) for i in range(256)] + [b"<eos>"], xgr.VocabType.RAW, vocab_size=257, stop_token_ids=[256])
    xm = xgr.GrammarMatcher(xgr.GrammarCompiler(info, cache_enabled=False).compile_structural_tag(json.dumps(tag)))
    assert xm.accept_token(0xFF) and xm.accept_token(256), "xgrammar's free text no longer takes any byte: update docs"


@pytest.mark.parametrize(
    "tag, text",
    [
        (hermes("auto"), "Let me check. " + hermes_call("get_weather", W2) + " Done."),
        (llama(), 'Answer: {"name": "search", "parameters": ' + json.dumps(S1) + "}"),
        (deepseek_v3_1(), "ok" + DS_CALLS_BEGIN + DS_CALL_BEGIN + "get_weather" + DS_SEP + json.dumps(W1) + DS_CALL_END + DS_CALLS_END),
        (wrap({"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"}), "<think>a </thin k> b</think>"),
        (minimax("auto"), 'Ok.<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Tōkyō</parameter>\n</invoke>\n</minimax:tool_call>'),
        (glm_4_7(), "Hm <tool_call>get_weather<arg_key>city</arg_key><arg_value>Par is</arg_value></tool_call> ok"),
    ],
)
def test_masks_match_xgrammar_llama3(tag, text):
    enc, vocab, info = _llama3()
    n = vocab.size
    # Compared: every token except special tokens and those that are not UTF-8 text on their
    # own (xgrammar's triggered_tags free text takes any bytes; corral's is UTF-8: see
    # test_free_text_is_utf8).
    skip = set(_not_text_tokens())
    ids = enc.encode(text, disallowed_special=())
    m = corral.Matcher(corral.CompiledGrammar(corral.Grammar.from_structural_tag(tag), vocab))
    x = xgr.GrammarMatcher(xgr.GrammarCompiler(info, cache_enabled=False).compile_structural_tag(json.dumps(tag)))
    # Tokens with a backslash are compared apart: corral also takes property names spelled with
    # JSON escapes ('"\\u0063ity"' is the key "city"), xgrammar only the literal spelling.
    # So are tokens starting with '.', 'e' or 'E': corral's integers include 3.0 (and the mask
    # keeps exponent forms open)
    # (JSON Schema: a number with a zero fraction is an integer), xgrammar's only digits.
    escapes = {i for i in range(n) if b"\\" in vocab.token_bytes(i) or vocab.token_bytes(i)[:1] in (b".", b"e", b"E")}
    out = b""
    for step, t in enumerate(ids + [None]):
        a, b = _allowed_corral(m, n) - skip, _allowed_xgr(x, n) - skip
        where = f"step {step} after {out!r}: only corral {sorted(a - b)[:10]}, only xgrammar {sorted(b - a)[:10]}"
        try:
            out.decode("utf-8")
            boundary = True
        except UnicodeDecodeError:
            boundary = False
        if boundary:
            assert a - escapes == b - escapes, where
            assert b & escapes <= a & escapes, where
        else:
            # Inside a character split across tokens, xgrammar's byte-level free text also takes
            # tokens that break the character; corral takes only those that continue it.
            assert a <= b, where
        if t is None:
            break
        out += vocab.token_bytes(t)
        assert m.accept_token(t) and x.accept_token(t)
    assert m.is_accepting()


def test_trigger_split_across_tokens_llama3():
    """A trigger spread over several tokens ('<', 'tool', '_call', '>'): once the free text
    ends with the trigger, only the tag's continuation is allowed; before, everything is."""
    enc, vocab, info = _llama3()
    n = vocab.size
    tag = hermes("auto")
    cg = corral.CompiledGrammar(corral.Grammar.from_structural_tag(tag), vocab)
    m = corral.Matcher(cg)
    for piece in ["Hello ", "<", "tool", "_c", "all"]:
        assert m.accept_bytes(piece.encode())
        assert len(_allowed_corral(m, n)) > 100_000  # free text: almost every token
    assert m.accept_bytes(b">")
    allowed = _allowed_corral(m, n)
    assert 0 < len(allowed) < 50
    for t in allowed:
        b = vocab.token_bytes(t)
        assert b'\n{"name": "'.startswith(b) or b.startswith(b'\n{"name": "') or b'{"name": "'.startswith(b) or b.startswith(b'{"name": "'), b
    assert not m.is_accepting()


# ---------------------------------------------------------------------------------------
# Token formats (special tokens), masks against xgrammar on Llama 3
# ---------------------------------------------------------------------------------------

PY_TAG, EOM = "<|python_tag|>", "<|eom_id|>"


def _py_call(content: Optional[dict] = None) -> dict:
    return {"type": "tag", "begin": {"type": "token", "token": PY_TAG},
            "content": content or {"type": "json_schema", "json_schema": WEATHER}, "end": {"type": "token", "token": EOM}}


@pytest.mark.parametrize(
    "fmt, pieces",
    [
        (_py_call(), [PY_TAG, json.dumps(W1), EOM]),
        ({"type": "token_triggered_tags", "trigger_tokens": [PY_TAG], "tags": [_py_call()]}, ["Sure. ", PY_TAG, json.dumps(W2, ensure_ascii=False), EOM, " Done."]),
        ({"type": "token_triggered_tags", "trigger_tokens": [PY_TAG], "tags": [_py_call()], "exclude_tokens": [EOM], "at_least_one": True}, [PY_TAG, json.dumps(W1), EOM, "ok"]),
        ({"type": "sequence", "elements": [{"type": "any_tokens", "exclude_tokens": [EOM, "<|eot_id|>"]}, {"type": "token", "token": EOM}]}, ["free text <|start_header_id|> here", EOM]),
        ({"type": "sequence", "elements": [{"type": "any_tokens", "max_tokens": 3}, {"type": "const_string", "value": "!"}]}, ["a b", "!"]),
        ({"type": "sequence", "elements": [{"type": "exclude_token", "exclude_tokens": [PY_TAG]}, {"type": "token", "token": 128008}]}, ["x", EOM]),
        ({"type": "token_dispatch", "rules": [[PY_TAG, {"type": "json_schema", "json_schema": SEARCH}]], "loop": False}, ["Let me search ", PY_TAG, json.dumps(S1)]),
    ],
)
def test_token_formats_match_xgrammar_llama3(fmt, pieces):
    """Named special tokens, 'any token' classes and a token budget, walked token by token on
    Llama 3: corral's allowed text tokens equal xgrammar's at every step. xgrammar knows a
    special token only by its text (its vocabulary must spell it), so it also allows special
    tokens as text (inside JSON strings, in free text); corral allows one only where a format
    names it or in a token class. So corral's allowed special tokens are a subset of
    xgrammar's, and equal to them inside token classes. Both run with <|eot_id|> as the
    only stop token: xgrammar cannot match a stop token named by a format (see
    test_named_stop_token_difference)."""
    enc, _, _ = _llama3()
    vocab = _llama3_eot_only()
    n = vocab.size
    specials = set(enc._special_tokens.values())
    info = _xgr_named_info(vocab.eos_token_ids)
    tag = wrap(fmt)
    ids: List[int] = []
    for p in pieces:
        ids += enc.encode(p, allowed_special="all")
    m = corral.Matcher(corral.CompiledGrammar(corral.Grammar.from_structural_tag(tag), vocab))
    x = xgr.GrammarMatcher(xgr.GrammarCompiler(info, cache_enabled=False).compile_structural_tag(json.dumps(tag)))
    # As in test_masks_match_xgrammar_llama3: escapes and number continuations inside JSON.
    escapes = {i for i in range(n) if b"\\" in vocab.token_bytes(i) or vocab.token_bytes(i)[:1] in (b".", b"e", b"E")}
    token_level = fmt["type"] in ("exclude_token", "any_tokens") or fmt["type"] == "sequence" and fmt["elements"][0]["type"] in ("exclude_token", "any_tokens")
    for step, t in enumerate(ids + [None]):
        a, b = _allowed_corral(m, n), _allowed_xgr(x, n)
        where = f"step {step} after {ids[:step]}: only corral {sorted(a - b)[:10]}, only xgrammar {sorted(b - a)[:10]}"
        text = b"".join(vocab.token_bytes(i) for i in ids[:step])
        try:
            text.decode("utf-8")
            assert (a - specials) - escapes == (b - specials) - escapes, where
        except UnicodeDecodeError:
            # Inside a character split across tokens (see test_masks_match_xgrammar_llama3).
            assert a <= b, where
        assert a & specials <= b & specials, where
        if token_level and step == 0:
            assert a & specials == b & specials, where
        if t is None:
            break
        assert m.accept_token(t), f"corral refuses token {t} at step {step}"
        assert x.accept_token(t), f"xgrammar refuses token {t} at step {step}"
    assert m.is_accepting()


@functools.lru_cache(maxsize=None)
def _llama3_eot_only() -> corral.Vocabulary:
    enc, _, _ = _llama3()
    return corral.Vocabulary.from_tiktoken(enc, eos_token_ids=[128009])


def _xgr_named_info(stop_token_ids: List[int]) -> Any:
    """Llama 3 for xgrammar with each special token spelled by its name (xgrammar finds a
    token format's token by its text)."""
    enc, vocab, _ = _llama3()
    names = {i: name for name, i in enc._special_tokens.items()}
    toks = [names[i].encode() if i in names else vocab.token_bytes(i) for i in range(vocab.size)]
    return xgr.TokenizerInfo(toks, xgr.VocabType.RAW, vocab_size=vocab.size, stop_token_ids=stop_token_ids)


def test_named_stop_token_difference():
    """Llama 3.1 ends a <|python_tag|> call with <|eom_id|>, one of its stop tokens. xgrammar
    0.2.8 never allows a stop token that a token format names (its tag cannot end); corral
    allows it there, and after the grammar ends allows the stop tokens as usual."""
    enc, vocab, _ = _llama3()
    tag = wrap(_py_call({"type": "const_string", "value": "x"}))
    x_ids = [128010, enc.encode("x")[0]]
    x = xgr.GrammarMatcher(xgr.GrammarCompiler(_xgr_named_info(vocab.eos_token_ids)).compile_structural_tag(json.dumps(tag)))
    assert all(x.accept_token(t) for t in x_ids)
    assert not x.accept_token(128008), "xgrammar now matches a named stop token: update docs"
    m = corral.Matcher(corral.CompiledGrammar(corral.Grammar.from_structural_tag(tag), vocab))
    assert all(m.accept_token(t) for t in x_ids)
    assert _allowed_corral(m, vocab.size) == {128008}
    assert m.accept_token(128008) and m.is_accepting() and not m.is_terminated()
    assert _allowed_corral(m, vocab.size) == set(vocab.eos_token_ids)


def test_special_tokens_only_where_named_llama3():
    """A text grammar never allows a special token; a tag naming <|python_tag|> allows it
    there and nowhere else, and its text spelled by ordinary tokens is not the token."""
    enc, vocab, _ = _llama3()
    n = vocab.size
    pt, eom = vocab.token_id(PY_TAG), vocab.token_id(EOM)
    assert vocab.is_special(pt) and vocab.is_special(eom)
    m = corral.Matcher(corral.CompiledGrammar(corral.Grammar.from_structural_tag(wrap(_py_call())), vocab))
    assert _allowed_corral(m, n) == {pt}
    assert not m.accept_bytes(PY_TAG.encode())
    assert m.accept_token(pt)
    assert pt not in _allowed_corral(m, n) and eom not in _allowed_corral(m, n)
    for t in enc.encode(json.dumps(W1)):
        assert m.accept_token(t)
    assert eom in _allowed_corral(m, n)
    assert m.accept_token(eom) and m.is_accepting()
    text = corral.Matcher(corral.CompiledGrammar(corral.Grammar.from_structural_tag(wrap({"type": "any_text"})), vocab))
    specials = set(enc._special_tokens.values())
    assert _allowed_corral(text, n) & specials == set(vocab.eos_token_ids), "text: no special token but EOS"


def test_unknown_token_names_fail_on_compile():
    _, vocab, _ = _llama3()
    g = corral.Grammar.from_structural_tag(wrap({"type": "token", "token": "<|no_such_token|>"}))
    with pytest.raises(corral.TokenizerError, match="no_such_token"):
        corral.CompiledGrammar(g, vocab)
    with pytest.raises(corral.TokenizerError, match="outside the vocabulary"):
        corral.CompiledGrammar(corral.Grammar.from_structural_tag(wrap({"type": "token", "token": 10**7})), vocab)
