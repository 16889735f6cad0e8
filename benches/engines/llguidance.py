"""llguidance: ``LLTokenizer`` (from the tiktoken encoding / tokenizer.json) -> ``LLMatcher``.

JSON Schema: ``LLMatcher.grammar_from_json_schema(schema)`` with its defaults (flexible
whitespace, "," and ":" separators). "Any JSON": the same with the schema ``{}``. GBNF:
``llguidance.grammar_from("gbnf", text)`` (GBNF -> Lark conversion). Lark:
``grammar_from("lark", text)``. Structural tag: ``StructTag.to_grammar`` over ``spec["llg_tags"]``
(trigger, begin, JSON Schema, end; the same tags as xgrammar's ``triggered_tags``). A matcher that enters
its error state while compiling counts as a compile error. The mask is written through
``LLMatcher.unsafe_compute_mask_ptr`` (what ``llguidance.torch.fill_next_token_bitmask`` calls,
without that wrapper's asserts).
"""

from __future__ import annotations


import llguidance
import llguidance.tiktoken

from .base import Engine as _Base
from .base import Unsupported



class Engine(_Base):
    name = "llguidance"

    def __init__(self, tok, options):
        super().__init__(tok, options)
        self.version = llguidance.__version__
        if tok.kind == "tiktoken":
            self.lltok = llguidance.tiktoken.lltokenizer_from_encoding(
                tok.obj, n_vocab=tok.vocab_size, eos_token=tok.eos_ids
            )
        else:
            self.lltok = llguidance.LLTokenizer(
                tok.obj.to_str(), n_vocab=tok.vocab_size, eos_token=tok.eos_ids
            )

    def compile(self, spec):
        kind = spec["kind"]
        if kind == "schema":
            g = llguidance.LLMatcher.grammar_from_json_schema(spec["text"])
        elif kind == "json":
            g = llguidance.LLMatcher.grammar_from_json_schema("{}")
        elif kind == "gbnf":
            g = llguidance.grammar_from("gbnf", spec["text"])
        elif kind == "lark":
            g = llguidance.grammar_from("lark", spec["text"])
        elif kind == "structural_tag":
            # llguidance's own structural tags: one StructTag per tag (lazy trigger in free
            # text). The trigger is plain text here, not a special token.
            tags = [llguidance.StructTag(trigger=t["trigger"], begin=t["begin"], grammar=t["schema"], end=t["end"])
                    for t in spec["llg_tags"]]
            g = llguidance.grammar_from("lark", llguidance.StructTag.to_grammar(tags, assume_special=False))
        else:
            raise Unsupported(kind)
        # Validate here so that an invalid grammar is a compile error, as with the others;
        # LLMatcher() itself never raises.
        m = llguidance.LLMatcher(self.lltok, g, log_level=0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return [g, m]

    def matcher(self, compiled):
        first = compiled[1]
        if first is not None:  # the matcher built while compiling serves the first walk
            compiled[1] = None
            return first
        return llguidance.LLMatcher(self.lltok, compiled[0], log_level=0)

    def fill(self, m):
        m.unsafe_compute_mask_ptr(self.mask_ptr, self.mask_words * 4)

    def accept(self, m, token_id):
        return m.consume_token(token_id)

    def error(self, m):
        return m.get_error() if m.is_error() else None
