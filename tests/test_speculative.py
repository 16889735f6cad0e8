"""corral.speculative: grammar-aware verification, drafters, metrics, policy, decode loop."""

from __future__ import annotations

import logging
import math
import random
from collections import Counter

import numpy as np
import pytest
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import corral
import corral.generate as generate_module
import corral.speculative as spec
from corral.sampling import SamplingParams, probabilities

GREEDY = SamplingParams(temperature=0.0)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def gpt2() -> corral.Vocabulary:
    return corral.builtin_vocabulary()


@pytest.fixture(scope="module")
def json_compiled(gpt2):
    return corral.compile(corral.builtin_grammar(), gpt2)


# ---------------------------------------------------------------------------- helpers / models

TINY = [b"a", b"b", b"c", b"ab", b"ba", b"bc", b""]
TINY_EOS = 6


def tiny():
    vocab = corral.Vocabulary.from_bytes(TINY, eos_token_ids=[TINY_EOS])
    g = corral.Grammar.from_regex("a[ab]{0,6}c|b[bc]{0,6}a")
    return vocab, corral.compile(g, vocab)


class HashModel:
    """Deterministic random logits per context (any vocabulary width)."""

    def __init__(self, width: int, seed: int = 0, scale: float = 1.0) -> None:
        self.width, self.seed, self.scale = width, seed, scale
        self.calls = 0
        self.cache: dict = {}

    def __call__(self, ids) -> torch.Tensor:
        self.calls += 1
        key = tuple(int(i) for i in ids)
        hit = self.cache.get(key)
        if hit is None:
            g = torch.Generator().manual_seed(hash((self.seed, key)) % (2**63))
            hit = self.cache[key] = torch.randn(self.width, generator=g) * self.scale
        return hit.clone()


class LowRankBigram:
    """A fixed random bigram model over a large vocabulary (rank-``d`` logits table)."""

    def __init__(self, size: int, seed: int = 0, d: int = 16) -> None:
        g = torch.Generator().manual_seed(seed)
        self.e = torch.randn(size, d, generator=g)
        self.w = torch.randn(d, size, generator=g) * 2.0
        self.calls = 0

    def __call__(self, ids) -> torch.Tensor:
        self.calls += 1
        last = ids[-1] if ids else 0
        return self.e[last] @ self.w


class CopyModel:
    """Prefers the next token of ``target`` while the output follows it; else a bigram model."""

    def __init__(self, vocab, prompt_len: int, target: bytes, seed: int = 0) -> None:
        self.tokens = vocab.encode(target) + [vocab.eos_token_ids[0]]
        self.prompt_len = prompt_len
        self.fallback = LowRankBigram(vocab.size, seed)
        self.size = vocab.size

    def __call__(self, ids) -> torch.Tensor:
        out = list(ids[self.prompt_len :])
        logits = self.fallback(ids)
        if out == self.tokens[: len(out)] and len(out) < len(self.tokens):
            logits[self.tokens[len(out)]] += 100.0
        return logits


def greedy_reference(compiled, model, ctx_out, n):
    """Non-speculative constrained greedy decoding with corral.sample: up to n tokens."""
    m = corral.Matcher(compiled)
    for t in ctx_out:
        assert m.accept_token(t)
    size = compiled.vocab.size
    bm = corral.allocate_token_bitmask(1, size)
    out = []
    while len(out) < n and not m.is_terminated():
        m.fill_next_token_bitmask(bm)
        logits = model(list(ctx_out) + out)[:size].unsqueeze(0)
        t = int(corral.sample(logits, GREEDY, bitmask=bm)[0])
        assert m.accept_token(t)
        out.append(t)
    return out


def random_walk(compiled, rng, steps):
    """A random grammar-legal prefix."""
    m = corral.Matcher(compiled)
    size = compiled.vocab.size
    bm = corral.allocate_token_bitmask(1, size)
    eos = set(compiled.vocab.eos_token_ids)
    out = []
    for _ in range(steps):
        m.fill_next_token_bitmask(bm)
        allowed = [t for t in corral.allowed_token_ids(bm[0], size) if t not in eos]
        if not allowed:
            break
        t = rng.choice(allowed)
        m.accept_token(t)
        out.append(t)
    return m, out


def make_drafts(greedy, rng, k, size, p_follow=0.7):
    """Drafts that follow the greedy continuation with probability p_follow per position."""
    drafts = []
    for i in range(k):
        if i < len(greedy) and rng.random() < p_follow:
            drafts.append(greedy[i])
        else:
            drafts.append(rng.randrange(size))
    return drafts


def verify_logits(model, ctx, drafts, size=None):
    rows = [model(list(ctx) + drafts[:i]) for i in range(len(drafts) + 1)]
    return torch.stack(rows)


class CountingMatcher:
    """A proxy that counts mask fills (the native class cannot be subclassed)."""

    def __init__(self, inner) -> None:
        self.inner, self.fills = inner, 0

    def fill_next_token_bitmask(self, *a, **kw):
        self.fills += 1
        return self.inner.fill_next_token_bitmask(*a, **kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def chi2_quantile(df: int, z: float = 3.72) -> float:
    """Wilson-Hilferty approximation of the chi-square quantile (z=3.72: p = 1e-4)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def chi2_pvalue(stat: float, df: int) -> float:
    """Upper tail P(X >= stat) for X ~ chi-square(df), Wilson-Hilferty approximation."""
    if math.isinf(stat):
        return 0.0
    z = ((stat / df) ** (1 / 3) - (1 - 2 / (9 * df))) / math.sqrt(2 / (9 * df))
    return 0.5 * math.erfc(z / math.sqrt(2))


def chi2_test(counts: Counter, expected: dict, n: int) -> dict:
    """Pearson's chi-square of ``counts`` (n samples) against ``expected`` probabilities.

    Outcomes expected fewer than 5 times are lumped into one cell. Returns ``ok`` (not
    rejected at p = 1e-4), ``stat``, ``df``, ``quantile`` (the rejection threshold),
    ``p_value`` and ``impossible`` (samples of outcomes with zero probability: any makes
    ``stat`` infinite)."""
    stat, df, lump_obs, lump_exp = 0.0, -1, 0, 0.0
    for key, p in expected.items():
        e = p * n
        if e < 5:
            lump_obs += counts.get(key, 0)
            lump_exp += e
            continue
        stat += (counts.get(key, 0) - e) ** 2 / e
        df += 1
    if lump_exp > 0:
        stat += (lump_obs - lump_exp) ** 2 / max(lump_exp, 1e-9)
        df += 1
    impossible = sum(v for k, v in counts.items() if k not in expected or expected[k] == 0)
    if impossible:
        stat = math.inf
    df = max(df, 1)
    q = chi2_quantile(df)
    return dict(ok=stat < q, stat=stat, df=df, quantile=q, p_value=chi2_pvalue(stat, df), impossible=impossible)


def chi2_ok(counts: Counter, expected: dict, n: int) -> tuple[bool, float, float]:
    t = chi2_test(counts, expected, n)
    assert t["impossible"] == 0, f"outcomes with zero probability were sampled: {t['impossible']}"
    return t["ok"], t["stat"], t["quantile"]


# ---------------------------------------------------------------------------- verify: greedy


@pytest.mark.parametrize("seed", range(40))
def test_verify_greedy_matches_constrained_greedy_tiny(seed):
    vocab, compiled = tiny()
    rng = random.Random(seed)
    model = HashModel(vocab.size + 3, seed=seed, scale=2.0)  # padded logits
    m, ctx = random_walk(compiled, rng, rng.randrange(0, 4))
    k = rng.randrange(0, 6)
    ref = greedy_reference(compiled, model, ctx, k + 1)
    drafts = make_drafts(ref, rng, k, vocab.size)
    logits = verify_logits(model, ctx, drafts)
    before = logits.clone()
    r = spec.verify(logits, drafts, m, GREEDY)
    assert torch.equal(logits, before)
    assert r.tokens == ref[: len(r.tokens)]
    lcp = 0
    while lcp < min(k, len(ref)) and drafts[lcp] == ref[lcp]:
        lcp += 1
    assert r.accepted == lcp
    assert len(r.tokens) == min(lcp + 1, len(ref))
    assert r.emitted == len(r.tokens) and r.proposed == k
    assert m.num_accepted == len(ctx) + len(r.tokens)
    assert m.last_tokens(len(r.tokens)) == r.tokens if r.tokens else True
    assert r.terminated == m.is_terminated()


@pytest.mark.parametrize("seed", range(12))
def test_verify_greedy_matches_constrained_greedy_json(seed, json_compiled, gpt2):
    rng = random.Random(1000 + seed)
    model = LowRankBigram(gpt2.size, seed=seed)
    m, ctx = random_walk(json_compiled, rng, rng.randrange(1, 8))
    k = rng.randrange(1, 8)
    ref = greedy_reference(json_compiled, model, ctx, k + 1)
    drafts = make_drafts(ref, rng, k, gpt2.size, p_follow=0.8)
    r = spec.verify(verify_logits(model, ctx, drafts), drafts, m, GREEDY)
    assert r.tokens == ref[: len(r.tokens)]
    assert m.num_accepted == len(ctx) + r.emitted


def test_illegal_drafts_are_dropped_before_scoring():
    vocab, compiled = tiny()
    m = corral.Matcher(compiled)
    logits = torch.zeros(5, vocab.size)
    logits[:, 0] = 5.0  # always 'a'
    logits[1, 3] = 9.0  # 'ab' preferred after 'a'
    # 'a', then 'c' (legal: ends), then 'a' (illegal after 'ac') -> dropped with what follows
    r = spec.verify(logits, [0, 2, 0, 0], m, GREEDY)
    assert r.scored == 2 and r.proposed == 4
    assert r.tokens == [0, 3]  # 'a' accepted, 'c' rejected: the target's 'ab'
    assert m.num_accepted == 2


def test_eos_draft_stops_without_bonus_and_fills():
    vocab, compiled = tiny()
    inner = corral.Matcher(compiled)
    m = CountingMatcher(inner)
    logits = torch.zeros(6, vocab.size)
    logits[0, 0] = 5  # 'a'
    logits[1, 2] = 5  # 'c'
    logits[2, TINY_EOS] = 5
    r = spec.verify(logits, [0, 2, TINY_EOS, 1, 1], m, GREEDY)
    assert r.tokens == [0, 2, TINY_EOS] and r.accepted == 3 and not r.bonus
    assert r.terminated and inner.is_terminated()
    assert m.fills == 3  # rows 0..2: nothing after the EOS
    r2 = spec.verify(logits, [1], m, GREEDY)  # terminated: no fill at all
    assert r2.tokens == [] and r2.terminated and m.fills == 3


def test_all_accepted_emits_bonus_and_bonus_false_does_not():
    vocab, compiled = tiny()
    logits = torch.zeros(3, vocab.size)
    logits[:, 1] = 4.0  # 'b' everywhere
    m = corral.Matcher(compiled)
    r = spec.verify(logits, [1, 1], m, GREEDY)
    assert r.tokens == [1, 1, 1] and r.bonus and r.accepted == 2
    m = corral.Matcher(compiled)
    r = spec.verify(logits[:2], [1, 1], m, GREEDY, bonus=False)
    assert r.tokens == [1, 1] and not r.bonus and m.num_accepted == 2


def test_verify_validates_inputs():
    vocab, compiled = tiny()
    m = corral.Matcher(compiled)
    with pytest.raises(corral.UsageError, match="rows"):
        spec.verify(torch.zeros(2, vocab.size), [0, 1], m, GREEDY)
    with pytest.raises(corral.UsageError, match="columns"):
        spec.verify(torch.zeros(3, 2), [0, 1], m, GREEDY)
    with pytest.raises(corral.UsageError):
        spec.verify(torch.zeros(3, vocab.size, dtype=torch.long), [0, 1], m, GREEDY)
    assert m.num_accepted == 0


def test_numpy_logits_and_penalties_use_drafts_as_output():
    vocab, compiled = tiny()
    params = SamplingParams(temperature=0.0, repetition_penalty=3.0, presence_penalty=2.0)

    def model(ids):
        x = torch.zeros(vocab.size)
        x[1] = 1.0  # 'b' favoured, but penalized once it was used
        x[2] = 0.9
        x[0] = 0.5
        return x

    m = corral.Matcher(compiled)
    ctx = []
    drafts = [1, 1, 1]
    logits = verify_logits(model, ctx, drafts).numpy()
    r = spec.verify(logits, drafts, m, params, output_ids=[])
    # reference loop with the same penalties
    ref_m = corral.Matcher(compiled)
    out = []
    bm = corral.allocate_token_bitmask(1, vocab.size)
    while len(out) < len(r.tokens):
        ref_m.fill_next_token_bitmask(bm)
        t = int(corral.sample(model(out).unsqueeze(0), params, bitmask=bm, output_ids=[out])[0])
        ref_m.accept_token(t)
        out.append(t)
    assert r.tokens == out and len(out) >= 2


# ---------------------------------------------------------------------------- verify: sampling


def _sampling_setup():
    vocab, compiled = tiny()
    target = HashModel(vocab.size, seed=11, scale=1.5)
    draft = HashModel(vocab.size, seed=12, scale=1.5)
    params = SamplingParams(temperature=0.8, top_p=0.95, repetition_penalty=1.3)
    return vocab, compiled, target, draft, params


def _exact_joint(compiled, model, params, n_tokens):
    """Exact distribution of the first n_tokens of constrained sampling from ``model``."""
    size = compiled.vocab.size
    bm = corral.allocate_token_bitmask(1, size)
    dist = {}

    def rec(m, out, prob):
        if len(out) == n_tokens or m.is_terminated():
            dist[tuple(out)] = dist.get(tuple(out), 0.0) + prob
            return
        m.fill_next_token_bitmask(bm)
        p = probabilities(model(out).unsqueeze(0), params, bitmask=bm, output_ids=[out])[0]
        for t in np.flatnonzero(p.numpy() > 0):
            m2 = m.copy()
            assert m2.accept_token(int(t))
            rec(m2, out + [int(t)], prob * float(p[t]))

    rec(corral.Matcher(compiled), [], 1.0)
    return dist


def _spec_run(compiled, target, draft_fn, params, n_tokens, k, gen):
    """Speculative loop (verify only) until n_tokens are emitted."""
    m = corral.Matcher(compiled)
    out = []
    while len(out) < n_tokens and not m.is_terminated():
        drafts, q = draft_fn(m, out, min(k, n_tokens - len(out) - 1) if n_tokens - len(out) > 1 else 0)
        logits = verify_logits(target, out, drafts)
        r = spec.verify(logits, drafts, m, params, draft_probs=q, generator=gen, output_ids=out)
        out.extend(r.tokens)
    return tuple(out[:n_tokens])


SAMPLING_TRIALS = 2000


def sampling_check(kind: str, trials: int = SAMPLING_TRIALS, seed: int = 1234) -> dict:
    """The distribution check: ``trials`` speculative runs of 3 tokens (k = 2, drafter
    ``kind``) against the exact distribution of constrained sampling from the target.
    Returns :func:`chi2_test`'s dict plus ``tv`` (total variation distance) and ``counts``."""
    vocab, compiled, target, draft, params = _sampling_setup()
    n_tokens, k = 3, 2
    exact = _exact_joint(compiled, target, params, n_tokens)
    gen = torch.Generator().manual_seed(seed)
    size = vocab.size
    bm = corral.allocate_token_bitmask(1, size)
    point_gen = torch.Generator().manual_seed(seed + 1)

    def prob_drafter(m, out, kk):
        # a different model; drafts sampled from its *unmasked* distribution (so some drafts
        # are illegal and q needs masking inside verify)
        toks, rows = [], []
        for _ in range(kk):
            q = torch.softmax(draft(out + toks), dim=-1)
            t = int(torch.multinomial(q, 1, generator=gen)[0])
            toks.append(t)
            rows.append(q)
        return toks, (torch.stack(rows) if rows else None)

    def point_drafter(m, out, kk):
        # proposals passed as point masses (draft_probs=None): the masked argmax chain of
        # 2 * target + draft-model logits + Gumbel noise from the drafter's own generator. The
        # point-mass rule only needs proposals independent of verify's coins (given draft d,
        # "accept with p(d), else sample p without d" yields p exactly), and the noise makes the
        # proposals -- and so the rows where rejections and bonus tokens happen -- vary: a plain
        # argmax chain always proposes the same first drafts, whose bonus row is grammar-forced
        # here, so a wrong bonus rule would go unseen.
        toks = []
        mm = m.copy()
        for _ in range(kk):
            if mm.is_terminated():
                break
            mm.fill_next_token_bitmask(bm)
            gumbel = -torch.log(-torch.log(torch.rand(size, generator=point_gen)))
            x = (2.0 * target(out + toks) + draft(out + toks) + gumbel).unsqueeze(0)
            corral.apply_token_bitmask_inplace(x, bm)
            t = int(x.argmax())
            mm.accept_token(t)
            toks.append(t)
        return toks, None

    fn = prob_drafter if kind == "probabilistic" else point_drafter
    counts = Counter(_spec_run(compiled, target, fn, params, n_tokens, k, gen) for _ in range(trials))
    res = chi2_test(counts, exact, trials)
    res["tv"] = 0.5 * sum(abs(counts.get(key, 0) / trials - p) for key, p in exact.items()) + \
        0.5 * sum(v for key, v in counts.items() if exact.get(key, 0) == 0) / trials
    res["counts"] = counts
    res["exact"] = exact
    return res


@pytest.mark.parametrize("kind", ["probabilistic", "point-mass"])
def test_sampling_distribution_equals_constrained_sampling(kind):
    r = sampling_check(kind)
    exact = r["exact"]
    print(f"real rule / {kind}: chi2 {r['stat']:.1f} (df {r['df']}, reject above {r['quantile']:.1f}), "
          f"p = {r['p_value']:.3g}, tv = {r['tv']:.3f}")
    assert r["impossible"] == 0
    assert r["ok"], (f"chi-square {r['stat']:.1f} >= {r['quantile']:.1f}; {r['counts'].most_common(8)} vs "
                     f"{sorted(exact.items(), key=lambda kv: -kv[1])[:8]}")
    assert r["tv"] < 0.07


# Mutation check of the test above: each mutant gets one step of the rejection rule wrong
# (swapped in through the private hook corral.speculative._sampling_rule); the same check, at
# the same seed and sample size, must reject every one of them.


class AcceptQOverP(spec._SamplingRule):
    """Accepts with min(1, q/p) instead of min(1, p/q)."""

    def accept(self, u, p_d, q_d):
        return u * p_d < q_d


class ResidualFromP(spec._SamplingRule):
    """Resamples a rejected position from p instead of normalise(max(0, p - q))."""

    def residual(self, p, q, d):
        return p.clone()


class BonusOffByOne(spec._SamplingRule):
    """Draws the bonus token from row m - 1 (the last draft's position) instead of row m.

    Restricted to the tokens legal at row m, so that the mutant's output stays grammar-valid
    (unrestricted, it is caught by the matcher: InternalError) and only the statistics can
    catch it."""

    def bonus(self, p, m):
        if m == 0:
            return p[0]
        r = p[m - 1] * (p[m] > 0)
        return r if float(r.sum()) > 0 else p[m]


MUTANTS = {"accept-q-over-p": AcceptQOverP, "residual-from-p": ResidualFromP, "bonus-off-by-one": BonusOffByOne}


@pytest.mark.parametrize("kind", ["probabilistic", "point-mass"])
@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_sampling_check_rejects_mutated_rules(mutant, kind, monkeypatch):
    monkeypatch.setattr(spec, "_sampling_rule", MUTANTS[mutant]())
    r = sampling_check(kind)
    print(f"{mutant} / {kind}: chi2 {r['stat']:.1f} (df {r['df']}, reject above {r['quantile']:.1f}), "
          f"p = {r['p_value']:.3g}, tv = {r['tv']:.3f}, impossible outcomes {r['impossible']}")
    assert not r["ok"], f"the distribution check missed the {mutant} mutant: chi2 {r['stat']:.1f} < {r['quantile']:.1f}"


def test_sampling_rule_hook_is_the_real_rule_by_default():
    assert type(spec._sampling_rule) is spec._SamplingRule


def test_first_token_distribution_with_fixed_logits_and_bad_draft():
    """A draft distribution far from the target still yields the target's distribution."""
    vocab, compiled = tiny()
    params = SamplingParams(temperature=1.0)
    target = torch.tensor([0.0, 1.0, -5.0, 0.5, 0.2, 0.0, 3.0])  # EOS (illegal at start) high
    q_row = torch.tensor([0.7, 0.05, 0.05, 0.1, 0.05, 0.0, 0.05])
    m0 = corral.Matcher(compiled)
    bm = corral.allocate_token_bitmask(1, vocab.size)
    m0.fill_next_token_bitmask(bm)
    p = probabilities(target.unsqueeze(0), params, bitmask=bm)[0]
    gen = torch.Generator().manual_seed(7)
    counts = Counter()
    trials = 3000
    for _ in range(trials):
        d = int(torch.multinomial(q_row, 1, generator=gen)[0])
        m = corral.Matcher(compiled)
        logits = torch.stack([target, torch.zeros(vocab.size)])
        r = spec.verify(logits, [d], m, params, draft_probs=q_row.unsqueeze(0), generator=gen)
        counts[(r.tokens[0],)] += 1
    ok, stat, q = chi2_ok(counts, {(t,): float(p[t]) for t in range(vocab.size)}, trials)
    assert ok, (stat, q, counts)


def test_zero_draft_probability_is_an_error():
    vocab, compiled = tiny()
    q = torch.zeros(1, vocab.size)
    q[0, 1] = 1.0
    with pytest.raises(corral.UsageError, match="zero probability"):
        spec.verify(torch.zeros(2, vocab.size), [0], corral.Matcher(compiled), SamplingParams(), draft_probs=q)


def test_seeded_params_replay():
    vocab, compiled, target, _, _ = _sampling_setup()
    logits = verify_logits(target, [], [0, 3])
    runs = []
    for _ in range(2):
        p = SamplingParams(seed=5)
        runs.append([spec.verify(logits, [0, 3], corral.Matcher(compiled), p).tokens for _ in range(10)])
    assert runs[0] == runs[1]


# ---------------------------------------------------------------------------- drafters


def test_ngram_lookup_falls_back_to_shorter_ngrams():
    d = spec.NgramDrafter(n=3, k=4)
    assert d.lookup([1, 2, 3, 9, 9, 1, 2, 3], 4) == [9, 9, 1, 2]
    assert d.lookup([5, 2, 3, 7, 8, 6, 2, 3], 2) == [7, 8]  # trigram misses, bigram hits
    assert d.lookup([4, 1, 5, 6, 1], 3) == [5, 6, 1]  # unigram
    assert d.lookup([1, 2, 3], 3) == []
    assert d.lookup([], 3) == [] and d.lookup([1, 1], 0) == []
    assert d.lookup([1, 2, 1, 3, 1], 1) == [3]  # the most recent occurrence wins


def test_ngram_drafter_truncates_at_grammar(gpt2, json_compiled):
    text = gpt2.encode(b'{"a": 1} {"b": 2}')  # {" a ": ' 1' } ' {"' b ": ' 2' }
    ctx = text + text[:3]
    m = corral.Matcher(json_compiled)
    for t in text[:3]:
        assert m.accept_token(t)
    raw = spec.NgramDrafter(3, 8).lookup(ctx, 8)
    toks, probs = spec.NgramDrafter(3, 8).propose(m, ctx, 8)
    assert probs is None and toks == raw[: len(toks)]
    assert len(toks) < len(raw)  # ': 1}' then ' {"b"...' is illegal after the document
    assert b"".join(gpt2.token_bytes(t) for t in toks) == b" 1}"
    assert m.num_accepted == 3 and m.validate_tokens(toks) == len(toks)


def test_model_drafter_refuses_other_vocabulary(gpt2, json_compiled):
    vocab, compiled = tiny()
    with pytest.raises(corral.TokenizerError, match="same tokenizer"):
        spec.ModelDrafter(HashModel(vocab.size), vocab, target_vocab=gpt2)
    d = spec.ModelDrafter(HashModel(vocab.size), vocab)
    with pytest.raises(corral.TokenizerError):
        d.propose(corral.Matcher(json_compiled), [], 3)
    with pytest.raises(corral.TokenizerError):
        spec.generate(HashModel(gpt2.size), [], json_compiled, gpt2, GREEDY, 5, drafter=d)
    assert isinstance(d, spec.Drafter) and isinstance(spec.NgramDrafter(), spec.Drafter)


def test_model_drafter_masks_its_proposals(gpt2, json_compiled):
    bad = gpt2.encode(b"hello")[0]

    def loves_bad(ids):
        x = torch.zeros(gpt2.size)
        x[bad] = 100.0
        return x

    m = corral.Matcher(json_compiled)
    toks, q = spec.ModelDrafter(loves_bad, gpt2).propose(m, [], 5)
    assert len(toks) == 5 and bad not in toks[:1]
    assert m.num_accepted == 0 and m.validate_tokens(toks) == 5
    assert q.shape == (5, gpt2.size) and torch.allclose(q.sum(1), torch.ones(5))
    sampled, q2 = spec.ModelDrafter(loves_bad, gpt2, SamplingParams(seed=1)).propose(m, [], 4)
    assert m.validate_tokens(sampled) == len(sampled) and q2.shape[0] == len(sampled)


# ---------------------------------------------------------------------------- metrics / policy


def test_expected_speedup():
    assert spec.expected_speedup(0.5, 0, 5.0) == 1.0
    assert spec.expected_speedup(1.0, 4, float("inf")) == 5.0
    assert spec.expected_speedup(1.0, 4, 4.0) == pytest.approx(5 / 2)
    near = spec.expected_speedup(1 - 1e-9, 4, 4.0)
    assert near == pytest.approx(spec.expected_speedup(1.0, 4, 4.0), rel=1e-6)
    a, k, r = 0.7, 3, 8.0
    assert spec.expected_speedup(a, k, r) == pytest.approx(((1 - a ** (k + 1)) / (1 - a)) / (1 + k / r))
    for bad in [(-0.1, 2, 1.0), (1.1, 2, 1.0), (0.5, -1, 1.0), (0.5, 1.5, 1.0), (0.5, 2, 0.0), (0.5, 2, float("nan")), ("x", 1, 1.0)]:
        with pytest.raises(corral.UsageError):
            spec.expected_speedup(*bad)


def test_adaptive_policy():
    pol = spec.AdaptivePolicy(k_max=6, size_ratio=20.0)
    for _ in range(40):
        pol.observe(5, 5)
    assert pol.acceptance > 0.9 and pol.k(1) >= 4
    assert pol.k(batch_size=100_000) == 0  # compute-bound: verification is not free
    for _ in range(60):
        pol.observe(0, 4)
    assert pol.acceptance < 0.15
    ks = [pol.k() for _ in range(32)]
    assert ks.count(0) == 30 and ks.count(pol.probe_k) == 2  # off, with periodic probes
    pol.observe(0, 0)  # no drafts: ignored
    with pytest.raises(corral.UsageError):
        spec.AdaptivePolicy(decay=2.0)
    with pytest.raises(corral.UsageError):
        pol.k(batch_size=0)
    # thresholds are parameters
    keen = spec.AdaptivePolicy(size_ratio=20.0, min_speedup=0.5)
    for _ in range(60):
        keen.observe(0, 4)
    assert keen.k() > 0


def test_metrics_dict_and_logging(gpt2, json_compiled, caplog):
    met = spec.SpeculativeMetrics()
    met.update(spec.VerifyResult(tokens=[1, 2, 3], accepted=2, emitted=3, proposed=4, scored=3))
    d = met.as_dict()
    assert d["proposed"] == 3 and d["dropped"] == 1 and d["acceptance_rate"] == pytest.approx(2 / 3)
    assert d["tokens_per_pass"] == 3.0 and d["verify_passes"] == 1
    with caplog.at_level(logging.DEBUG, logger="corral.speculative"):
        spec.generate(LowRankBigram(gpt2.size), [], json_compiled, gpt2, GREEDY, 10)
    assert any("acceptance_rate" in rec.getMessage() for rec in caplog.records)


# ---------------------------------------------------------------------------- decode loop


def _prompt_and_model(gpt2, seed):
    rng = random.Random(seed)
    names = ["alice", "bob", "carol", "dave"]
    doc = {"name": rng.choice(names), "age": rng.randrange(90), "tags": ["x", "y"], "ok": True}
    import json

    src = json.dumps(doc).encode()
    doc["age"] += 1
    doc["tags"].append("z")
    tgt = json.dumps(doc).encode()
    prompt = gpt2.encode(b"Update: " + src + b"\nResult: ")
    return prompt, CopyModel(gpt2, len(prompt), tgt, seed), tgt


@pytest.mark.parametrize("seed", range(6))
def test_generate_greedy_equals_corral_generate(seed, gpt2, json_compiled):
    prompt, model, _ = _prompt_and_model(gpt2, seed)
    ref = corral.generate(model, prompt, json_compiled, gpt2, GREEDY, max_tokens=60)
    for drafter, k in [(None, 4), (spec.NgramDrafter(2, 8), 8), (spec.ModelDrafter(LowRankBigram(gpt2.size, 99), gpt2), 3)]:
        res = spec.generate(model, prompt, json_compiled, gpt2, GREEDY, 60, drafter=drafter, k=k)
        assert res.token_ids == ref.token_ids and res.finished == ref.finished and res.data == ref.data
        assert res.forced + res.metrics.emitted == len(res.token_ids)
    # a pure bigram model (no copying: low acceptance) and short budgets
    bigram = LowRankBigram(gpt2.size, seed)
    for max_tokens in (1, 7, 33):
        ref = corral.generate(bigram, prompt, json_compiled, gpt2, GREEDY, max_tokens=max_tokens)
        res = spec.generate(bigram, prompt, json_compiled, gpt2, GREEDY, max_tokens, k=5,
                            policy=spec.AdaptivePolicy(k_max=5))
        assert res.token_ids == ref.token_ids


def test_generate_greedy_with_penalties_and_verify_fn(gpt2, json_compiled):
    prompt, model, _ = _prompt_and_model(gpt2, 42)
    p = SamplingParams(temperature=0.0, repetition_penalty=1.2, frequency_penalty=0.3)
    ref = corral.generate(model, prompt, json_compiled, gpt2, p, max_tokens=50, penalize_prompt=True)
    passes = []

    def verify_fn(ids, n):
        passes.append(n)
        return torch.stack([model(ids[: len(ids) - n + 1 + j]) for j in range(n)])

    res = spec.generate(model, prompt, json_compiled, gpt2, p, 50, verify_fn=verify_fn, penalize_prompt=True)
    assert res.token_ids == ref.token_ids
    assert len(passes) == res.metrics.verify_passes == res.steps


def test_generate_ngram_pays_on_json_copy(gpt2, json_compiled):
    prompt, model, tgt = _prompt_and_model(gpt2, 3)
    res = spec.generate(model, prompt, json_compiled, gpt2, GREEDY, 80, k=6)
    ref = corral.generate(model, prompt, json_compiled, gpt2, GREEDY, max_tokens=80)
    assert res.data == tgt and res.finished
    met = res.metrics
    assert met.verify_passes < ref.steps  # fewer target passes than plain decoding
    assert met.acceptance_rate > 0.4 and met.tokens_per_pass > 1.5


def test_generate_sampling_is_valid(gpt2, json_compiled):
    import json

    prompt, model, _ = _prompt_and_model(gpt2, 5)
    for seed in range(3):
        res = spec.generate(model, prompt, json_compiled, gpt2, SamplingParams(temperature=0.7, seed=seed), 80)
        if res.finished:
            json.loads(res.data)
        m = corral.Matcher(json_compiled)
        assert m.validate_tokens(res.token_ids) == len(res.token_ids)


def test_generate_validates(gpt2, json_compiled):
    with pytest.raises(corral.UsageError):
        spec.generate(LowRankBigram(gpt2.size), [], json_compiled, gpt2, GREEDY, -1)
    with pytest.raises(corral.UsageError):
        spec.generate(LowRankBigram(gpt2.size), [], json_compiled, gpt2, GREEDY, 5, k=-2)
    assert generate_module  # the reference module is importable alongside


NAME_AGE = r'root ::= "{\"name\": \"" [a-z]{1,8} "\", \"age\": " [0-9]{1,3} "}"'


@pytest.mark.parametrize("seed", range(4))
def test_generate_commits_forced_runs_like_corral_generate(seed, gpt2):
    compiled = corral.compile(corral.Grammar.from_ebnf(NAME_AGE), gpt2)
    model = LowRankBigram(gpt2.size, seed)
    prompt = gpt2.encode(b'{"name": "bob", "age": 42}\n')
    ref = corral.generate(model, prompt, compiled, gpt2, GREEDY, max_tokens=40)
    res = spec.generate(model, prompt, compiled, gpt2, GREEDY, 40, k=4)
    assert res.token_ids == ref.token_ids and res.finished == ref.finished
    assert res.metrics.forced == res.forced > 0
    assert res.forced + res.metrics.emitted == len(res.token_ids)
    assert res.metrics.verify_passes <= ref.steps


def test_doctests():
    import doctest

    assert doctest.testmod(spec, optionflags=doctest.ELLIPSIS).failed == 0
