"""Grammar-aware speculative decoding on tiny GPT-2-shaped models (CPU, no downloads).

    python benches/speculative_bench.py            # ~1 min (+ ~1 min training on the first run)

Two tasks, each decoded greedily under a JSON Schema with ``corral.generate`` (no speculation)
and with ``corral.speculative.generate`` (``NgramDrafter`` with several ``k``, ``k = 0`` as a
control: the speculative loop without drafts, and ``AdaptivePolicy`` with its default
``extra_token_cost`` and with one closer to this CPU):

* **extract** (echo-heavy): the prompt holds one worked example and a JSON record; the output
  is a JSON object (schema: name, email, city, notes; ``additionalProperties: false``) whose
  values are copied from the record.
* **free text**: the prompt names a product; the output is ``{"description": "..."}`` (a
  string of at most 300 characters): three sentences that appear nowhere in the prompt.

The target models (transformers ``GPT2LMHeadModel``, built here, run in float64 so that the
one-pass verification logits and the token-by-token logits agree to ~1e-12 and greedy ties
cannot flip):

* **copier** (extract): 2 layers, 4 heads, 512 dims, weights *written* in code rather than
  learned: four previous-token heads in layer 1 and an induction head in layer 2 continue the
  longest earlier match of the last four tokens (ties: the most recent), i.e. the model
  copies from its prompt the way trained LLMs do. (Training a tiny GPT-2 to copy was tried
  first: after 600 steps, several CPU minutes, it copied names but no induction head had
  formed for free-text values.)
* **describer** (free text): 2 layers, 4 heads, 64 dims, trained here (seeded, 300 full-batch
  steps, ~1 min on 2 cores) to write a fixed description per product; cached in
  ``benches/.cache/`` (gitignored).

Both see a compact vocabulary: the GPT-2 ids of their synthetic data (other ids map to one
unknown id and get logit -1e4); corral works over the full built-in GPT-2 vocabulary.

Every speculative output is asserted token-for-token identical to the plain output. Each
target forward pass is one call of ``model_fn`` (plain) or ``verify_fn`` (speculative: one
KV-cached pass over the drafts; rejected drafts are cropped from the cache). ``pred``
columns: :func:`corral.speculative.expected_speedup` (free drafter, ``size_ratio = inf``) at
the measured acceptance rate, for the nominal ``k`` and for the drafts each pass actually had.
Seconds are the best of ``--repeat`` rounds; CPU seconds are the process's (less disturbed by
other jobs than wall time).
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import math
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch

import corral
import corral.speculative as spec

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
GREEDY = corral.SamplingParams(temperature=0.0)

# ------------------------------------------------------------------------------------------
# synthetic data

FIRST = ("Maria James Aiko Omar Lena Pavel Sofia Diego Nina Tariq Elena Marco Yuki Ahmed Clara Felix Ingrid Hugo "
         "Priya Sven Leila Rafael Mei Oscar Zara Tomas Anya Kwame Greta Luis Hana Ivan Rosa Emil Fatima Jonas Alma "
         "Nikolai Chloe Mateo Vera Samir Julia Karim Ada Bruno Lucia Otto Noor Pablo").split()
LAST = ("Lopez Smith Tanaka Haddad Fischer Novak Rossi Garcia Petrova Khan Ivanova Bianchi Sato Hassan Moreau Weber "
        "Larsen Dubois Sharma Berg Nasser Silva Chen Olsen Malik Horvat Kowalski Mensah Lindqvist Torres Kim Popov "
        "Costa Meyer Aziz Schmidt Ortega Volkov Martin Navarro Keller Rahman Wagner Eriksen Romano Castro Vogel "
        "Qureshi Ramos").split()
CITIES = ("Berlin Lisbon Osaka Cairo Vienna Prague Milan Madrid Warsaw Lahore Sofia Turin Kyoto Dubai Lyon Munich "
          "Oslo Paris Mumbai Bergen Amman Porto Taipei Aarhus Karachi Zagreb Krakow Accra Malmo Seville Busan Riga "
          "Recife Hamburg Tunis Leipzig Bilbao Tallinn Graz Quito").split()
DOMAINS = "example.com mail.org post.net inbox.io corp.co letters.dev".split()
NOTE_WORDS = ("prefers calls after noon and asks for invoices by email only visited the office twice last spring with "
              "a broken laptop ordered spare parts paid late once likes quick replies speaks three languages works "
              "night shifts at the harbour needs parking permit reported billing error that was fixed in march wants "
              "newsletter print moved from old address june referred two new clients allergic to cats meetings on "
              "fridays travels often work owns small bakery near station").split()
EXTRACT_KEYS = ["name", "email", "city", "notes"]
EXTRACT_SCHEMA = {
    "type": "object",
    "properties": {k: {"type": "string"} for k in EXTRACT_KEYS},
    "required": EXTRACT_KEYS,
    "additionalProperties": False,
}

ADJ = "quiet bright sturdy compact elegant rugged soft gentle smart classic modern tiny warm cool silky bold".split()
NOUN = "frame handle base shade cover panel finish cushion strap lid edge grip surface body switch dial".split()
MATERIAL = "oak walnut steel brass linen leather ceramic glass bamboo copper wool cork marble canvas".split()
VERB = "glows folds rests stays turns slides holds opens clicks hums shines locks".split()
ADVERB = "softly smoothly firmly evenly silently gently neatly".split()
PRODUCTS = ["Aurora lamp", "Nimbus chair", "Tidal kettle", "Ember heater", "Atlas backpack", "Orbit clock",
            "Willow desk", "Summit boots", "Harbor mug", "Cedar shelf", "Comet speaker", "Meadow rug",
            "Falcon bike", "Lumen torch", "Quill pen", "Breeze fan", "Pebble radio", "Canyon tent",
            "Glacier bottle", "Maple bench", "Echo headphones", "Prism vase", "Drift hammock", "Nova blender"]
DESCRIBE_SCHEMA = {
    "type": "object",
    "properties": {"description": {"type": "string", "maxLength": 300}},
    "required": ["description"],
    "additionalProperties": False,
}
SEPARATORS = (", ", ": ")  # json.dumps' defaults, as in the prompts


def record(r: random.Random) -> dict:
    f, l = r.choice(FIRST), r.choice(LAST)
    return {
        "id": r.randrange(10000, 99999),
        "phone": f"+1-555-{r.randrange(1000, 9999)}",
        "name": f"{f} {l}",
        "email": f"{f.lower()}.{l.lower()}@{r.choice(DOMAINS)}",
        "city": r.choice(CITIES),
        "notes": " ".join(r.sample(NOTE_WORDS, r.randrange(8, 15))),
    }


def extract_example(r: random.Random) -> tuple[str, str]:
    """(prompt, the output a perfect extractor writes)."""
    ex, rec = record(r), record(r)

    def sub(x: dict) -> str:
        return json.dumps({k: x[k] for k in EXTRACT_KEYS})

    prompt = ("Extract name, email, city and notes from the record as JSON.\n"
              f"Record: {json.dumps(ex)}\nJSON:\n{sub(ex)}\n\nRecord: {json.dumps(rec)}\nJSON:\n")
    return prompt, sub(rec)


def description(i: int) -> str:
    r = random.Random(1000 + i)
    return " ".join(
        f"{r.choice(ADJ).capitalize()} {r.choice(NOUN)} made of {r.choice(MATERIAL)} {r.choice(VERB)} "
        f"{r.choice(ADVERB)} with a {r.choice(ADJ)} {r.choice(NOUN)} and {r.choice(ADJ)} {r.choice(NOUN)}."
        for _ in range(3)
    )


def describe_example(i: int) -> tuple[str, str]:
    return (f"Product: {PRODUCTS[i]}\nWrite a description as JSON.\nJSON:\n",
            json.dumps({"description": description(i)}))


# ------------------------------------------------------------------------------------------
# models


def gpt2(vocab_size: int, n_layer: int, n_head: int, n_embd: int, n_positions: int, **kw) -> "torch.nn.Module":
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_embd, n_positions=n_positions, vocab_size=vocab_size,
                     bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     activation_function="gelu", **kw)
    return GPT2LMHeadModel(cfg)


def copier(C: int, seed: int = 0, n_ctx: int = 4, d_t: int = 80, d_p: int = 28, beta: float = 40.0,
           gamma: float = 20.0, ctx_w: float = 0.8, recency: float = 0.05,
           n_positions: int = 1024) -> "torch.nn.Module":
    """A GPT-2 (2 layers, 4 heads, 512 dims) whose weights continue the longest earlier match
    of the last ``n_ctx`` tokens.

    Residual layout (every written vector has zero mean, so LayerNorm only rescales): T (the
    token: a random unit vector, d_t dims), V1..Vn (the tokens 1..n back), O (the copied
    token), P (sinusoidal position), R (position, linear: recency), K (a constant from a
    LayerNorm bias). Layer 1, head k-1: attends from i to i-k (query = position rotated by k)
    and writes the token into Vk. Layer 2, head 0: query T + w V1 + ... + w^(n-1) V(n-1)
    against key V1 + w V2 + ... + w^(n-1) Vn (the n tokens before j), plus ``recency`` per
    position toward later j; writes the token at j into O. The LM head reads O (logit
    ``gamma`` for the copied token). MLPs (shrunk to 128 units) and the other heads are zero.
    """
    hd = 128
    D = (2 + n_ctx) * d_t + d_p + 3
    D += (-D) % hd
    H = D // hd
    assert H >= n_ctx, (D, H, n_ctx)
    model = gpt2(C, 2, H, D, n_positions, n_inner=128, tie_word_embeddings=False, scale_attn_weights=False,
                 layer_norm_epsilon=1e-12)  # the MLPs are unused (zero): n_inner=128 keeps them cheap
    g = torch.Generator().manual_seed(seed)
    T = slice(0, d_t)
    V = [slice((k + 1) * d_t, (k + 2) * d_t) for k in range(n_ctx)]
    O = slice((n_ctx + 1) * d_t, (n_ctx + 2) * d_t)
    p0 = (n_ctx + 2) * d_t
    P = slice(p0, p0 + d_p)
    R1, R2, K = p0 + d_p, p0 + d_p + 1, p0 + d_p + 2
    A = 0.3  # amplitude of the linear position coordinate
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for ln in [model.transformer.ln_f] + [m for b in model.transformer.h for m in (b.ln_1, b.ln_2)]:
            ln.weight.fill_(1.0)
        e = torch.randn(C, d_t, generator=g, dtype=torch.float64)
        e -= e.mean(1, keepdim=True)
        e /= e.norm(dim=1, keepdim=True)
        model.transformer.wte.weight[:, T] = e.float()
        nf = d_p // 2
        w = torch.exp(torch.linspace(math.log(0.35), math.log(2.9), nf, dtype=torch.float64))
        ang = torch.arange(n_positions, dtype=torch.float64)[:, None] * w[None]
        pe = torch.zeros(n_positions, d_p, dtype=torch.float64)
        pe[:, 0::2], pe[:, 1::2] = torch.cos(ang), torch.sin(ang)
        pe -= pe.mean(1, keepdim=True)
        pe /= pe.norm(dim=1, keepdim=True)
        wpe = model.transformer.wpe.weight
        wpe[:, P] = pe.float()
        lin = torch.arange(n_positions, dtype=torch.float32) * (A / n_positions)
        wpe[:, R1], wpe[:, R2] = lin, -lin

        def qkv(layer: int):
            W = model.transformer.h[layer].attn.c_attn.weight  # Conv1D: x @ W, (D, 3D)
            return W[:, :D], W[:, D:2 * D], W[:, 2 * D:], model.transformer.h[layer].attn.c_proj.weight

        s1 = math.sqrt(D / 2)  # LayerNorm gain on token + position (unit vectors each)
        a1 = math.sqrt(beta * nf) / s1
        Wq, Wk, Wv, Wo = qkv(0)
        for k in range(1, n_ctx + 1):
            h0 = (k - 1) * hd
            Rot = torch.zeros(d_p, d_p, dtype=torch.float64)  # p_i -> p_(i-k)
            for f in range(nf):
                c, s = math.cos(k * w[f]), math.sin(k * w[f])
                Rot[2 * f, 2 * f], Rot[2 * f, 2 * f + 1], Rot[2 * f + 1, 2 * f], Rot[2 * f + 1, 2 * f + 1] = c, s, -s, c
            Wq[P, h0:h0 + d_p] = (a1 * Rot.T).float()
            Wk[P, h0:h0 + d_p] = a1 * torch.eye(d_p)
            Wv[T, h0:h0 + d_t] = torch.eye(d_t) / s1
            Wo[h0:h0 + d_t, V[k - 1]] = torch.eye(d_t)
        s2 = math.sqrt(D / (2 + n_ctx))
        a2 = math.sqrt(beta) / s2
        Wq, Wk, Wv, Wo = qkv(1)
        for r, (src_q, src_k) in enumerate(zip([T] + V[:-1], V)):
            Wq[src_q, 0:d_t] = a2 * ctx_w ** r * torch.eye(d_t)
            Wk[src_k, 0:d_t] = a2 * ctx_w ** r * torch.eye(d_t)
        model.transformer.h[1].ln_1.bias[K] = 1.0
        Wq[K, d_t] = 1.0
        Wk[R1, d_t] = recency * n_positions / (s2 * A)
        Wv[T, 0:d_t] = torch.eye(d_t) / s2
        Wo[0:d_t, O] = torch.eye(d_t)
        model.lm_head.weight[:, O] = (e * gamma / math.sqrt(D / (3 + n_ctx))).float()
    return model.eval()


@dataclass
class Compact:
    """GPT-2 ids <-> a model's compact ids (0: unknown)."""

    ids: list
    vocab_size: int

    def __post_init__(self) -> None:
        self.to_compact = torch.zeros(self.vocab_size, dtype=torch.long)
        self.to_compact[torch.tensor(self.ids)] = torch.arange(1, len(self.ids) + 1)
        self.full = torch.tensor(self.ids)

    @property
    def size(self) -> int:
        return len(self.ids) + 1


def train_describer(vocab: corral.Vocabulary, steps: int, seed: int, threads: int, log) -> tuple:
    """Trains the free-text model (full batch: the 24 products); cached by its settings."""
    exs = [(vocab.encode(p.encode()), vocab.encode(o.encode()) + [vocab.eos_token_ids[0]])
           for p, o in map(describe_example, range(len(PRODUCTS)))]
    cmp = Compact(sorted({t for a, b in exs for t in a + b}), vocab.size)
    settings = dict(v=1, steps=steps, seed=seed, data=[a + b for a, b in exs], torch=torch.__version__.split("+")[0])
    key = hashlib.sha256(json.dumps(settings).encode()).hexdigest()[:16]
    path = CACHE / f"describer-{key}.pt"
    model = gpt2(cmp.size, 2, 4, 64, 256)
    if path.exists():
        model.load_state_dict(torch.load(path, weights_only=True))
        log(f"describer: loaded {path.relative_to(HERE.parent)}")
        return model.eval(), cmp, 0.0
    n = torch.get_num_threads()
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    model = gpt2(cmp.size, 2, 4, 64, 256)
    L = max(len(a) + len(b) for a, b in exs)
    ids = torch.zeros(len(exs), L, dtype=torch.long)
    lab = torch.full((len(exs), L), -100)
    for j, (a, b) in enumerate(exs):
        s = cmp.to_compact[torch.tensor(a + b)]
        ids[j, : len(s)] = s
        lab[j, len(a) - 1 : len(s) - 1] = s[len(a):]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps, pct_start=0.1)
    t0 = time.perf_counter()
    for step in range(steps):
        logits = model(input_ids=ids).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cmp.size), lab.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 100 == 0 or step == steps - 1:
            log(f"describer: step {step + 1}/{steps}, loss {loss.item():.3f}, {time.perf_counter() - t0:.0f} s")
    torch.set_num_threads(n)
    CACHE.mkdir(exist_ok=True)
    torch.save(model.state_dict(), path)
    return model.eval(), cmp, time.perf_counter() - t0


class CachedLM:
    """``model_fn`` / ``verify_fn`` over one KV cache; counts target forward passes.

    A call feeds only what is not cached: the cache is cut back to the longest common prefix of
    the cached ids and the new ids (rejected drafts are dropped), never past the first
    position whose logits are asked for."""

    def __init__(self, model, cmp: Compact) -> None:
        self.model = model.double().eval()
        self.cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        self.cmp = cmp
        self.ids: list = []
        self.cache = None
        self.passes = 0
        self.fed = 0
        self.model_s = 0.0  # inside forward passes (incl. mapping the logits to the full vocabulary)
        self.drafts: list = []  # per verify pass: rows - 1

    def reset(self) -> None:
        self.ids, self.cache = [], None

    def _rows(self, ids, n: int) -> "torch.Tensor":
        from transformers import DynamicCache

        ids = [int(i) for i in ids]
        keep = 0
        if self.cache is not None:
            lim = min(len(self.ids), len(ids) - n)
            while keep < lim and self.ids[keep] == ids[keep]:
                keep += 1
        if keep == 0:
            self.cache = DynamicCache()
        elif keep < len(self.ids):
            self.cache.crop(keep - len(self.ids))  # negative: drop that many (old and new API)
        t0 = time.perf_counter()
        feed = self.cmp.to_compact[torch.tensor([ids[keep:]])]
        with torch.inference_mode():
            out = self.model(input_ids=feed, use_cache=True, **{self.cache_kw: self.cache})
        self.ids = ids  # the DynamicCache was updated in place
        self.passes += 1
        self.fed += len(ids) - keep
        rows = out.logits[0, -n:, 1:]
        full = torch.full((n, self.cmp.vocab_size), -1e4, dtype=torch.float64)
        full[:, self.cmp.full] = rows
        self.model_s += time.perf_counter() - t0
        return full

    def model_fn(self, ids) -> "torch.Tensor":
        return self._rows(ids, 1)[0]

    def verify_fn(self, ids, n: int) -> "torch.Tensor":
        self.drafts.append(n - 1)
        return self._rows(ids, n)


# ------------------------------------------------------------------------------------------
# runs


@dataclass
class RecordingPolicy(spec.AdaptivePolicy):
    chosen: list = field(default_factory=list)

    def k(self, batch_size: int = 1) -> int:
        kk = super().k(batch_size)
        self.chosen.append(kk)
        return kk


@dataclass
class Row:
    task: str
    drafter: str
    k: str
    tokens: int = 0
    passes: int = 0
    forced: int = 0
    proposed: int = 0
    accepted: int = 0
    emitted: int = 0
    wall_s: float = 0.0
    model_s: float = 0.0  # of wall_s, inside target forward passes
    cpu_s: float = math.inf  # process CPU time (less sensitive to other jobs than wall time)
    fed: int = 0
    identical: int = 0
    prompts: int = 0
    pred_k: float = 0.0  # predicted tokens / pass, nominal k
    pred_d: float = 0.0  # predicted tokens / pass, actual drafts per pass
    exact: int = 0  # outputs equal to the ideal answer (plain rows)

    @property
    def acceptance(self) -> float:
        return self.accepted / self.proposed if self.proposed else 0.0


def run_task(name, lm: CachedLM, compiled, vocab, prompts, answers, ks, k_max, costs, max_tokens, repeat, log) -> list:
    """Plain decoding and each speculative configuration over all prompts, ``repeat`` rounds
    (after one untimed warm-up per configuration). Counters come from the first round (they are
    deterministic); wall time is each configuration's best round."""
    enc = [vocab.encode(p.encode()) for p in prompts]
    configs = [("none", 0, 0.0)] + [("ngram", k, 0.0) for k in ks] + [("adaptive", k_max, c) for c in costs]

    def one(kind: str, k: int, cost: float, ids: list):
        lm.reset()
        if kind == "none":
            return corral.generate(lm.model_fn, ids, compiled, vocab, GREEDY, max_tokens), None
        policy = RecordingPolicy(k_max=k, extra_token_cost=cost) if kind == "adaptive" else None
        res = spec.generate(lm.model_fn, ids, compiled, vocab, GREEDY, max_tokens,
                            drafter=spec.NgramDrafter(3, k), k=k, policy=policy, verify_fn=lm.verify_fn)
        return res, policy

    for kind, k, cost in configs:  # warm-up: first calls of each path (allocations, mask caches)
        one(kind, k, cost, enc[0])
    def label(kind: str, k: int, cost: float) -> str:
        if kind == "adaptive":
            return f"AdaptivePolicy(k_max={k}" + ("" if cost == 0.01 else f", extra_token_cost={cost:g}") + ")"
        if kind == "ngram" and k == 0:
            return "none (speculative loop, k=0)"
        return {"none": "none", "ngram": "NgramDrafter(3)"}[kind]

    ktext = {"none": "-", "adaptive": "adaptive"}
    rows = [Row(name, label(*cfg), ktext.get(cfg[0], str(cfg[1]))) for cfg in configs]
    chosen = [[] for _ in configs]
    drafts = [[] for _ in configs]
    best = [(math.inf, 0.0) for _ in configs]
    refs: list = []
    for rnd in range(repeat):  # rounds outermost: slow phases of a shared machine hit every configuration
        for c, ((kind, k, cost), row) in enumerate(zip(configs, rows)):
            wall, cpu, m_start = 0.0, 0.0, lm.model_s
            for j, ids in enumerate(enc):
                lm.drafts = []
                p0, f0 = lm.passes, lm.fed
                t0, c0 = time.perf_counter(), time.process_time()
                res, policy = one(kind, k, cost, ids)
                wall += time.perf_counter() - t0
                cpu += time.process_time() - c0
                passes = lm.passes - p0
                if kind == "none":
                    assert passes == res.steps
                    if rnd == 0:
                        refs.append(res.token_ids)
                else:
                    assert res.token_ids == refs[j], \
                        f"{name} {row.drafter} k={k}: speculative output differs from plain"
                    assert passes == res.metrics.verify_passes
                if rnd:
                    continue
                row.prompts += 1
                row.identical += 1
                row.tokens += len(res.token_ids)
                row.fed += lm.fed - f0
                if kind == "none":
                    row.passes += res.steps
                    row.forced += res.forced
                    row.emitted += res.steps
                    row.exact += res.data == answers[j].encode()
                    continue
                m = res.metrics
                row.passes += m.verify_passes
                row.forced += m.forced
                row.proposed += m.proposed
                row.accepted += m.accepted
                row.emitted += m.emitted
                drafts[c] += lm.drafts
                chosen[c] += policy.chosen if policy is not None else [k] * m.verify_passes
            if wall < best[c][0]:
                best[c] = (wall, lm.model_s - m_start)
            row.cpu_s = min(row.cpu_s, cpu)
            if rnd == 0:
                hist = ""
                if kind == "adaptive":
                    cnt = Counter(chosen[c])
                    hist = "; k chosen: " + ", ".join(f"{kk}: {cnt[kk]}" for kk in sorted(cnt))
                log(f"{name}: {row.drafter} k={row.k}: {row.passes} passes, acceptance {row.acceptance:.2f}, "
                    f"{wall:.2f} s{hist}")
    for c, row in enumerate(rows):
        row.wall_s, row.model_s = best[c]  # cpu_s: best round too (may be another round)
        if configs[c][0] != "none":
            a = row.acceptance
            row.pred_k = sum(spec.expected_speedup(a, kk, math.inf) for kk in chosen[c]) / max(1, len(chosen[c]))
            row.pred_d = sum(spec.expected_speedup(a, d, math.inf) for d in drafts[c]) / max(1, len(drafts[c]))
    return rows


def table(rows: list) -> str:
    hdr = ["task", "drafter", "k", "tokens", "forced", "target passes", "pred passes (k / drafts)", "proposed",
           "accepted", "acceptance", "tok/pass", "pred tok/pass (k / drafts)", "passes saved", "wall s",
           "target ms / pass", "wall speedup", "cpu s", "cpu speedup", "cpu speedup vs k=0", "identical"]
    out = ["| " + " | ".join(hdr) + " |", "|" + "|".join("---" if i < 3 else "---:" for i in range(len(hdr))) + "|"]
    base, control = {}, {}
    for r in rows:
        if r.drafter == "none":
            base[r.task] = r
        if r.k == "0":
            control[r.task] = r
        b = base[r.task]
        c0 = control.get(r.task)
        plain = r.drafter == "none"
        gen = r.tokens - r.forced  # tokens that needed a pass
        pk = gen / r.pred_k if r.pred_k else 0
        pd = gen / r.pred_d if r.pred_d else 0
        out.append("| " + " | ".join([
            r.task, r.drafter, r.k, str(r.tokens), str(r.forced), str(r.passes),
            "-" if plain else f"{pk:.0f} / {pd:.0f}",
            "-" if plain else str(r.proposed), "-" if plain else str(r.accepted),
            "-" if plain else f"{r.acceptance:.2f}",
            f"{r.emitted / r.passes:.2f}" if r.passes else "-",
            "-" if plain else f"{r.pred_k:.2f} / {r.pred_d:.2f}",
            "-" if plain else f"{b.passes / r.passes:.2f}x",
            f"{r.wall_s:.2f}",
            f"{1000 * r.model_s / r.passes:.1f}" if r.passes else "-",
            "-" if plain else f"{b.wall_s / r.wall_s:.2f}x",
            f"{r.cpu_s:.2f}",
            "-" if plain else f"{b.cpu_s / r.cpu_s:.2f}x",
            "-" if plain or c0 is None or c0 is r else f"{c0.cpu_s / r.cpu_s:.2f}x",
            f"{r.identical}/{r.prompts}",
        ]) + " |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=12, help="prompts per task (default 12; at most 24 for free text)")
    ap.add_argument("--ks", default="0,2,4,8",
                    help="NgramDrafter k values (default 0,2,4,8; k=0: the speculative loop without drafts)")
    ap.add_argument("--k-max", type=int, default=8, help="AdaptivePolicy k_max (default 8)")
    ap.add_argument("--extra-token-costs", default="0.01,0.25",
                    help="one AdaptivePolicy row per extra_token_cost (default 0.01 = the class default, and 0.25 "
                         "~ this CPU: a verify pass costs ~+25%% of a plain pass per extra token)")
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--train-steps", type=int, default=300, help="describer training steps (default 300)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads for training (decoding uses 1)")
    ap.add_argument("--repeat", type=int, default=2, help="timed rounds per configuration; best wall time (default 2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t_start:6.1f} s] {msg}", file=sys.stderr, flush=True)

    import transformers

    transformers.logging.set_verbosity_error()
    vocab = corral.builtin_vocabulary()
    ks = [int(x) for x in args.ks.split(",") if x]
    costs = [float(x) for x in args.extra_token_costs.split(",") if x]

    # extract: prompts, the copier over the ids of a large sample of records
    r = random.Random(args.seed)
    ex = [extract_example(r) for _ in range(args.prompts)]
    sample = random.Random(12345)
    seen = set()
    for p, o in ex + [extract_example(sample) for _ in range(3000)]:
        seen.update(vocab.encode(p.encode()))
        seen.update(vocab.encode(o.encode()))
    seen.update(i for i in range(vocab.num_tokens) if len(vocab.token_bytes(i)) == 1)  # forced runs may split
    cmp_a = Compact(sorted(seen), vocab.size)
    t0 = time.perf_counter()
    copy_lm = CachedLM(copier(cmp_a.size, seed=args.seed), cmp_a)
    log(f"copier: {cmp_a.size} compact ids, built in {time.perf_counter() - t0:.2f} s")

    # free text: the describer
    desc_model, cmp_b, train_s = train_describer(vocab, args.train_steps, args.seed, args.threads, log)
    desc_lm = CachedLM(desc_model, cmp_b)
    n_b = min(args.prompts, len(PRODUCTS))
    order = random.Random(args.seed).sample(range(len(PRODUCTS)), n_b)
    fx = [describe_example(i) for i in order]

    torch.set_num_threads(1)
    rows = []
    t0 = time.perf_counter()
    g_a = corral.compile(corral.Grammar.from_json_schema(EXTRACT_SCHEMA, separators=SEPARATORS), vocab)
    g_b = corral.compile(corral.Grammar.from_json_schema(DESCRIBE_SCHEMA, separators=SEPARATORS), vocab)
    log(f"schemas compiled in {time.perf_counter() - t0:.2f} s")
    rows += run_task("extract", copy_lm, g_a, vocab, [p for p, _ in ex], [o for _, o in ex], ks, args.k_max,
                     costs, args.max_tokens, args.repeat, log)
    rows += run_task("free text", desc_lm, g_b, vocab, [p for p, _ in fx], [o for _, o in fx], ks, args.k_max,
                     costs, args.max_tokens, args.repeat, log)

    print()
    print(f"corral {corral.__version__}, torch {torch.__version__}, transformers {transformers.__version__}, "
          f"1 thread; {args.prompts} extract prompts, {n_b} free-text prompts; greedy; "
          f"describer trained in {train_s:.0f} s" + (" (cached)" if train_s == 0 else ""))
    for t in ("extract", "free text"):
        b = next(x for x in rows if x.task == t and x.drafter == "none")
        print(f"{t}: the target's plain greedy output equals the ideal answer for {b.exact}/{b.prompts} prompts")
    print()
    print(table(rows))
    print()
    print(f"total {time.perf_counter() - t_start:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
