"""outlines-core: ``Vocabulary(eos, {bytes: [ids]})`` -> ``Index(regex, vocabulary)`` -> ``Guide``.

JSON Schema: ``outlines_core.json_schema.build_regex_from_schema(schema)`` with its defaults
(whitespace ``[ ]?``, ``max_recursion_depth=3``). "Any JSON": the regex of the schema ``{}``
(nesting limited to that recursion depth). No GBNF. ``Vocabulary`` holds one EOS id (the first
of the tokenizer's); the other EOS ids are left out of the vocabulary.
"""

from __future__ import annotations

from importlib.metadata import version

import outlines_core as oc

from .base import Engine as _Base
from .base import Unsupported



class Engine(_Base):
    name = "outlines"

    def __init__(self, tok, options):
        super().__init__(tok, options)
        self.version = version("outlines_core")
        special = set(tok.special_ids)
        tokens: dict[bytes, list[int]] = {}
        for i, b in enumerate(tok.token_bytes):
            if b and i not in special:
                tokens.setdefault(b, []).append(i)
        self.vocab = oc.Vocabulary(tok.eos, tokens)

    def compile(self, spec):
        kind = spec["kind"]
        if kind == "schema":
            regex = oc.json_schema.build_regex_from_schema(spec["text"])
        elif kind == "json":
            regex = oc.json_schema.build_regex_from_schema("{}")
        else:
            raise Unsupported(f"outlines-core reads no {kind}")
        return oc.Index(regex, self.vocab)

    def matcher(self, compiled):
        return oc.Guide(compiled)

    def fill(self, m):
        m.write_mask_into(self.mask_ptr, self.mask_words, 4)

    def accept(self, m, token_id):
        try:
            m.advance(token_id, return_tokens=False)
        except ValueError:
            return False
        return True
