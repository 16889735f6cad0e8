"""xgrammar: ``TokenizerInfo`` + ``GrammarCompiler`` (cache off) -> ``GrammarMatcher``.

JSON Schema: ``compile_json_schema(schema)`` with its defaults (``any_whitespace=True``,
``strict_mode=True`` -- no properties/items beyond the schema's -- and ``any_order=False``);
``--xgrammar-nonstrict`` passes ``strict_mode=False``,
``--xgrammar-any-order`` passes ``any_order=True``. "Any JSON": ``compile_builtin_json_grammar``
(an object or an array at top level). GBNF: ``Grammar.from_ebnf`` + ``compile_grammar``.
Lark: ``Grammar.from_lark`` + ``compile_grammar``. Structural tag: ``compile_structural_tag``.
"""

from __future__ import annotations

import json
from importlib.metadata import version

import xgrammar as xgr

from .base import Engine as _Base
from .base import Unsupported



class Engine(_Base):
    name = "xgrammar"

    def __init__(self, tok, options):
        super().__init__(tok, options)
        self.version = version("xgrammar")
        # Raw bytes per id (special tokens b"": xgrammar treats empty tokens as special).
        self.info = xgr.TokenizerInfo(
            tok.token_bytes, xgr.VocabType.RAW, vocab_size=tok.vocab_size, stop_token_ids=tok.eos_ids
        )
        threads = options.get("threads")
        kw = {"max_threads": threads} if threads else {}
        self.compiler = xgr.GrammarCompiler(self.info, cache_enabled=False, **kw)
        self.schema_kw = {"strict_mode": not options.get("xgrammar_nonstrict", False)}
        if options.get("xgrammar_any_order"):
            self.schema_kw["any_order"] = True

    def allocate_mask(self, vocab_size):
        # What vLLM's xgrammar backend fills.
        return xgr.allocate_token_bitmask(1, vocab_size)

    def compile(self, spec):
        kind = spec["kind"]
        if kind == "schema":
            return self.compiler.compile_json_schema(spec["text"], **self.schema_kw)
        if kind == "json":
            return self.compiler.compile_builtin_json_grammar()
        if kind == "gbnf":
            return self.compiler.compile_grammar(xgr.Grammar.from_ebnf(spec["text"]))
        if kind == "lark":
            return self.compiler.compile_grammar(xgr.Grammar.from_lark(spec["text"]))
        if kind == "structural_tag":
            return self.compiler.compile_structural_tag(json.dumps(spec["tag"]))
        raise Unsupported(kind)

    def matcher(self, compiled):
        return xgr.GrammarMatcher(compiled)

    def fill(self, m):
        m.fill_next_token_bitmask(self.mask, 0)

    def accept(self, m, token_id):
        return m.accept_token(token_id)
