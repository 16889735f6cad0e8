"""Mask fills must stay fast where the segmentations of a token into terminals multiply.

Found by the random search of ``test_exactness.py`` (seed 1032105460): on the cyclic, highly
ambiguous grammar below, many terminals end at almost every byte of the vocabulary's 37-byte
token, and the level-wise fill (``rust/corral-core/src/masks/mask_fill.rs``) pushed one parser row per
sequence of terminal ends, about 2.3x more per level: the very first fill ran for over six
minutes. The fill now takes the plain trie walk (one parser row per trie node) once the levels
have pushed ``MIN_LEVEL_ROWS`` rows and more would take longer than a few plain walks; the
masks must stay exact.

The fills run in a child process, so that a fill that never ends fails the test instead of
hanging it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

TESTS = os.path.dirname(os.path.abspath(__file__))

GRAMMAR = (
    'root ::= (x_3 | [^\\]\\U0001f389\u4e00-\u6587] | item-2){0,1} |\n    item-2 |\n    item-2\n'
    'r1 ::= x_3{1,3} |\n    (x_3 | . | "\\\\\\U0001F600") "]"\n'
    'item-2 ::= root x_3 "a"\n'
    'x_3 ::= ("x\\u6587a"{0,1} | "" | root [^0-9\\x00-\\x1F\u0800-\uffff] [\\\\]) |\n'
    '    "\\n\\n" |\n    ((. | [\u4e2d]){0,1} | (r1 | root) | .*)\n'
)

# The vocabulary test_exactness.make_vocab drew for that seed (ids 2 and 44 EOS, 15 special,
# 45 logits); token 18 is the 37-byte one.
TOKENS = [
    "f48fbfbf", "20", "3c2f733e", "", "f0", "9c", "c080", "f1", "5c", "610a0a", "0a", "90", "ff", "e4b8", "63",
    "3c733e", "80", "80805c61", "0a0a610a0a610a0a610a0a610a0a610a0a610a0a610a0a61f19c88a15c", "a1", "610a0a61",
    "610a", "61", "e4", "e69687", "c39f", "9f", "88", "9f5c", "c39f5c", "e4", "f09f9880", "c3",
]

_SCRIPT = textwrap.dedent(
    """
    import json, random, sys, time
    import numpy as np
    sys.path.insert(0, {tests!r})
    import corral
    import test_exactness as T
    from reference import Reference

    grammar, tokens = json.loads(sys.argv[1])
    vocab = T.Vocab([bytes.fromhex(t) for t in tokens], eos=[2, 44], special=[15], size=45)
    ref = Reference(grammar)
    m = corral.Matcher(corral.compile(corral.Grammar.from_ebnf(grammar), vocab.corral))
    rng = random.Random(1032105460)
    out = b""
    for step in range(12):
        mask = np.zeros((1, corral.bitmask_words(vocab.n)), dtype=np.int32)  # numpy: no torch import
        t = time.time()
        m.fill_next_token_bitmask(mask, 0)
        took = time.time() - t
        print(json.dumps(["fill", step, took]), flush=True)
        T.check_step(ref, m, vocab, out, grammar)  # exact: equal to the reference's mask
        allowed = [i for i in corral.allowed_token_ids(mask[0], vocab.n) if i not in vocab.eos]
        if not allowed:
            break
        tok = 18 if step == 0 else rng.choice(allowed)  # the long token first: the deepest fills
        assert m.accept_token(tok)
        out += vocab.tokens[tok]
    """
)


def test_fill_on_multiplying_segmentations_is_fast_and_exact():
    code = _SCRIPT.format(tests=TESTS)
    timeout = 120
    try:
        proc = subprocess.run([sys.executable, "-c", code, json.dumps([GRAMMAR, TOKENS])], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        raise AssertionError(f"the fills ran over {timeout} s; finished: {out.splitlines()}") from None
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    fills = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(fills) >= 2, proc.stdout
    for _, step, took in fills:
        assert took < 1.0, f"fill {step} took {took:.2f} s"
