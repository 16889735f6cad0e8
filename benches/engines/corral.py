"""corral: ``Grammar.from_ebnf`` / ``Grammar.from_json_schema`` -> ``CompiledGrammar`` -> ``Matcher``.

JSON Schema: ``Grammar.from_json_schema(schema_text)`` with corral's defaults (flexible
whitespace up to 20 characters, ``strict=True``, ``property_order="any"``: declared properties in
any order, each at most once); ``--corral-schema-option KEY=VALUE`` passes
other keyword arguments. Skipped (``Unsupported``) while ``from_json_schema`` does not exist.
"Any JSON": ``grammars/json.ebnf``. GBNF: ``Grammar.from_ebnf``. Lark: ``Grammar.from_lark``.
Structural tag (xgrammar's format, ``spec["tag"]``): ``Grammar.from_structural_tag``.
"""

from __future__ import annotations

import os

import corral

from .base import Engine as _Base
from .base import Unsupported

JSON_EBNF = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "grammars", "json.ebnf")



class Engine(_Base):
    name = "corral"

    def __init__(self, tok, options):
        super().__init__(tok, options)
        self.version = corral.__version__
        # The same token table xgrammar and outlines-core get (corral's from_tiktoken /
        # from_huggingface adapters build the same bytes; see benches/vocabs.py).
        self.vocab = corral.Vocabulary.from_bytes(
            tok.token_bytes, eos_token_ids=tok.eos_ids, special_token_ids=tok.special_ids,
            vocab_size=tok.vocab_size,
        )
        assert self.vocab.size == tok.vocab_size, (self.vocab.size, tok.vocab_size)
        with open(JSON_EBNF, encoding="utf-8") as f:
            self.json_ebnf = f.read()
        self.has_schema = hasattr(corral.Grammar, "from_json_schema")
        # --corral-schema-option KEY=VALUE: keyword arguments of Grammar.from_json_schema
        # (default: none, i.e. corral's defaults).
        self.schema_kw = dict(options.get("corral_schema_options") or {})

    def allocate_mask(self, vocab_size):
        # What corral's vLLM and SGLang adapters fill: a tensor over a numpy array corral
        # holds, so a repeat fill reads one data pointer (a plain torch.from_numpy tensor: two).
        return corral.allocate_token_bitmask(1, vocab_size)

    def _compiled(self, grammar):
        # Not corral.compile(): it caches by (source, vocabulary) and a repeated schema would
        # be a cache hit. The token-set cache inside the Vocabulary is part of corral's design
        # and stays on (it is shared across grammars, like a serving process would share it).
        try:
            return corral.CompiledGrammar(grammar, self.vocab)
        except TypeError:
            return corral.CompiledGrammar(grammar, self.vocab._native)

    def compile(self, spec):
        kind = spec["kind"]
        if kind == "schema":
            if not self.has_schema:
                raise Unsupported("corral.Grammar.from_json_schema does not exist yet")
            try:
                g = corral.Grammar.from_json_schema(spec["text"], **self.schema_kw)
            except TypeError:
                g = corral.Grammar.from_json_schema(spec["schema"], **self.schema_kw)
        elif kind == "json":
            g = corral.Grammar.from_ebnf(self.json_ebnf)
        elif kind == "gbnf":
            g = corral.Grammar.from_ebnf(spec["text"])
        elif kind == "lark":
            g = corral.Grammar.from_lark(spec["text"])
        elif kind == "structural_tag":
            g = corral.Grammar.from_structural_tag(spec["tag"])
        else:
            raise Unsupported(kind)
        return self._compiled(g)

    def matcher(self, compiled):
        return corral.Matcher(compiled)

    def fill(self, m):
        m.fill_next_token_bitmask(self.mask, 0)

    def accept(self, m, token_id):
        return m.accept_token(token_id)
