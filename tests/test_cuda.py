"""The decoding layer on CUDA tensors: the same answers as on CPU, and no host synchronisation
where none is needed (skipped without a GPU; tests/test_logits.py has the kernel's own CUDA
tests).

* masking at the Llama 3 vocabulary size (128,256), padded and strided logits, every float
  dtype, the Triton kernel and the torch fallback: bit-identical to the CPU kernel;
* :func:`corral.sample` / :func:`corral.probabilities` on CUDA: the same distribution as on CPU
  (mask -> penalties -> temperature -> truncation), draws only from it, and the whole pipeline
  runs without a host sync (``torch.cuda.set_sync_debug_mode("error")``);
* speculative :func:`speculative.verify` on CUDA logits: the CPU's greedy result;
* the adapters (HF ``generate`` with a model on the GPU, vLLM's per-request processor,
  SGLang's mask calls) on CUDA logits give valid output / the CPU's masks.
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
torch = pytest.importorskip("torch")

import corral
import corral.logits as L
from corral import speculative
from corral.sampling import SamplingParams, probabilities, sample
from test_logits import use_kernel

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

LLAMA3 = 128256


def random_mask(rows: int, vocab: int, density: float, seed: int) -> torch.Tensor:
    """int32 bitmask with bits set with probability ``density`` (padding bits clear); row 0 is
    all-disallowed, row 1 all-allowed when there are enough rows."""
    rng = np.random.default_rng(seed)
    words = (vocab + 31) // 32
    bits = rng.random((rows, words * 32)) < density
    if rows > 2:
        bits[0] = False
        bits[1] = True
    bits[:, vocab:] = False
    return torch.from_numpy(np.packbits(bits, axis=1, bitorder="little").view(np.int32).reshape(rows, words).copy())


class NoHostSync:
    """Any host synchronisation inside the block raises (torch's sync debug mode)."""

    def __enter__(self) -> "NoHostSync":
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        return self

    def __exit__(self, *exc) -> None:
        torch.cuda.set_sync_debug_mode("default")


# ------------------------------------------------------------------ masking


@pytest.mark.parametrize("triton", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_llama3_size_padded_strided_rows_match_cpu(triton, dtype, monkeypatch):
    use_kernel(triton, monkeypatch)
    rows, width = 37, LLAMA3 + 64  # padded model width
    mask = random_mask(rows, LLAMA3, 0.3, seed=11).pin_memory()
    # A row-strided view (the logits of a wider buffer), as engines slice their outputs.
    big = torch.randn(rows, width + 96).to(dtype)
    cpu = big[:, :width].clone()
    gpu_big = big.cuda()
    gpu = gpu_big[:, :width]
    sel = [0, 3, 4, 17, 36]
    with NoHostSync():
        corral.apply_token_bitmask_inplace(gpu, mask, indices=sel, vocab_size=LLAMA3, check_empty=False)
        corral.apply_token_bitmask_inplace(gpu[2], mask[2].cuda(non_blocking=True), vocab_size=LLAMA3, check_empty=False)
    corral.apply_token_bitmask_inplace(cpu, mask, indices=sel, vocab_size=LLAMA3, check_empty=False)
    corral.apply_token_bitmask_inplace(cpu[2], mask[2], vocab_size=LLAMA3, check_empty=False)
    assert torch.equal(gpu.cpu(), cpu)
    assert torch.equal(gpu_big[:, width:].cpu(), big[:, width:]), "columns past the view were written"
    assert torch.isneginf(gpu[0]).all().item(), "row 0 allows nothing"
    if triton:
        assert not L._TRITON.get("disabled")


def test_every_row_masked_in_one_call_and_empty_rows_reported_when_asked():
    rows = 64
    mask = random_mask(rows, LLAMA3, 0.01, seed=3)
    base = torch.randn(rows, LLAMA3)
    gpu, dev_mask = base.cuda(), mask.cuda()
    with NoHostSync():
        corral.apply_token_bitmask_inplace(gpu, dev_mask, check_empty=False)
    cpu = base.clone()
    corral.apply_token_bitmask_inplace(cpu, mask, check_empty=False)
    assert torch.equal(gpu.cpu(), cpu)
    with pytest.raises(corral.EmptyMaskError, match="row 0"):
        corral.apply_token_bitmask_inplace(base.cuda(), mask.cuda(), check_empty=True)


# ------------------------------------------------------------------ sampling


def mixed_params(rows: int) -> list[SamplingParams]:
    kinds = [
        SamplingParams(temperature=0.0),
        SamplingParams(temperature=0.7, top_k=20),
        SamplingParams(temperature=1.3, top_p=0.9),
        SamplingParams(min_p=0.05),
        SamplingParams(repetition_penalty=1.3, presence_penalty=0.5, frequency_penalty=0.2, top_p=0.95),
        SamplingParams(temperature=0.9, seed=1234, top_k=50),
    ]
    return [kinds[i % len(kinds)] for i in range(rows)]


def test_sampling_pipeline_runs_without_host_sync():
    rows, vocab = 24, LLAMA3
    mask = random_mask(rows, vocab, 0.2, seed=5)
    mask[0] = mask[2]  # no empty row: sampled rows must have something to draw
    mask = mask.pin_memory()
    logits = torch.randn(rows, vocab + 64, device="cuda")
    params = mixed_params(rows)
    out_ids = [[(r * 7 + j * 13) % vocab for j in range(r % 5)] for r in range(rows)]
    torch.cuda.synchronize()
    with NoHostSync():
        toks = sample(logits, params, bitmask=mask, output_ids=out_ids)
        probs = probabilities(logits, params, bitmask=mask, output_ids=out_ids)
    assert toks.device.type == "cuda" and probs.device.type == "cuda"
    for r, t in enumerate(toks.tolist()):
        assert 0 <= t < vocab and (int(mask[r, t // 32]) >> (t % 32)) & 1, f"row {r}: token {t} is masked"
        assert probs[r, t].item() > 0, f"row {r}: token {t} has probability 0"


def test_probabilities_match_cpu():
    rows, vocab = 30, 4096
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(rows, vocab, generator=gen) * 3
    mask = random_mask(rows, vocab, 0.5, seed=9)
    mask[0] = mask[2]
    params = mixed_params(rows)
    out_ids = [[(r * 31 + j * 17) % vocab for j in range(r % 7)] for r in range(rows)]
    cpu = probabilities(logits, params, bitmask=mask, output_ids=out_ids)
    gpu = probabilities(logits.cuda(), params, bitmask=mask.cuda(), output_ids=out_ids).cpu()
    assert torch.equal(cpu > 0, gpu > 0), "different tokens survive the mask and truncation"
    torch.testing.assert_close(gpu, cpu, atol=2e-6, rtol=1e-4)
    # Tensor output_ids on the GPU (validated with one host sync) agree with lists.
    padded = torch.full((rows, 7), -1, dtype=torch.long)
    for r, ids in enumerate(out_ids):
        padded[r, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    gpu_t = probabilities(logits.cuda(), params, bitmask=mask.cuda(), output_ids=padded.cuda()).cpu()
    torch.testing.assert_close(gpu_t, gpu, atol=0, rtol=0)


def test_greedy_rows_equal_cpu_argmax():
    rows, vocab = 16, LLAMA3
    logits = torch.randn(rows, vocab)
    mask = random_mask(rows, vocab, 0.3, seed=2)
    mask[0] = mask[3]
    g = SamplingParams(temperature=0.0)
    assert sample(logits.cuda(), g, bitmask=mask.cuda()).tolist() == sample(logits, g, bitmask=mask).tolist()


def test_cuda_draws_follow_the_cpu_distribution():
    vocab, n = 64, 60000
    gen = torch.Generator().manual_seed(1)
    row = torch.randn(1, vocab, generator=gen)
    mask = random_mask(1, vocab, 0.6, seed=4)
    p = SamplingParams(temperature=0.8, top_p=0.9)
    expected = probabilities(row, p, bitmask=mask)[0]
    logits = row.expand(n, vocab).contiguous().cuda()
    draws = sample(logits, p, bitmask=mask.expand(n, -1).contiguous().cuda(), generator=torch.Generator("cuda").manual_seed(7))
    counts = Counter(draws.tolist())
    assert all(expected[t] > 0 for t in counts), "a token outside the distribution was drawn"
    freq = torch.tensor([counts.get(t, 0) / n for t in range(vocab)])
    # 60k draws: each frequency within ~5 standard deviations of its probability.
    sd = (expected * (1 - expected) / n).sqrt()
    assert ((freq - expected).abs() <= 5 * sd + 1e-9).all(), (freq - expected).abs().max()


def test_seeded_rows_replay_on_cuda():
    logits = torch.randn(4, 1000, device="cuda")
    p = SamplingParams(seed=99, temperature=1.5)
    a = sample(logits, p).tolist()
    p.reseed()
    assert sample(logits, p).tolist() == a


# ------------------------------------------------------------------ speculative verification


@pytest.mark.parametrize("seed", range(10))
def test_verify_on_cuda_equals_cpu_greedy(seed):
    from test_speculative import GREEDY, LowRankBigram, greedy_reference, make_drafts, random_walk, verify_logits

    vocab = corral.builtin_vocabulary()
    compiled = corral.compile(corral.builtin_grammar(), vocab)
    rng = random.Random(500 + seed)
    model = LowRankBigram(vocab.size, seed=seed)
    m_cpu, ctx = random_walk(compiled, rng, rng.randrange(1, 8))
    m_gpu = corral.Matcher(compiled)
    assert m_gpu.validate_tokens(ctx) == len(ctx) and all(m_gpu.accept_token(t) for t in ctx)
    k = rng.randrange(1, 8)
    ref = greedy_reference(compiled, model, ctx, k + 1)
    drafts = make_drafts(ref, rng, k, vocab.size, p_follow=0.8)
    logits = verify_logits(model, ctx, drafts)
    r_cpu = speculative.verify(logits, drafts, m_cpu, GREEDY)
    r_gpu = speculative.verify(logits.cuda(), drafts, m_gpu, GREEDY)
    assert r_gpu.tokens == r_cpu.tokens and r_gpu.accepted == r_cpu.accepted
    assert m_gpu.num_accepted == m_cpu.num_accepted


def test_verify_sampling_on_cuda_emits_legal_tokens():
    vocab = corral.builtin_vocabulary()
    compiled = corral.compile(corral.builtin_grammar(), vocab)
    m = corral.Matcher(compiled)
    gen = torch.Generator("cuda").manual_seed(3)
    for _ in range(20):
        if m.is_terminated():
            break
        logits = torch.randn(5, vocab.size, device="cuda") * 4
        drafts = [int(t) for t in torch.randint(0, vocab.size, (4,))]
        before = m.num_accepted
        r = speculative.verify(logits, drafts, m, SamplingParams(temperature=1.0, top_k=40), generator=gen)
        assert m.num_accepted == before + r.emitted and r.emitted >= 1 or r.terminated


# ------------------------------------------------------------------ adapters


def test_hf_generate_with_model_on_cuda():
    transformers = pytest.importorskip("transformers")
    from transformers import GPT2Config, GPT2LMHeadModel, LogitsProcessorList

    import corral.hf

    vocab = corral.builtin_vocabulary()
    grammar = corral.Grammar.from_ebnf(r'''root ::= "{\"n\": " [1-9] [0-9]{0,3} ", \"tag\": \"" [a-z]{1,8} "\"}"''')
    compiled = corral.compile(grammar, vocab)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=vocab.size)).eval().cuda()
    proc = corral.hf.LogitsProcessor(compiled)
    prompt = torch.tensor([[50256, 90], [50256, 50256]], device="cuda")
    with torch.no_grad():
        out = model.generate(
            input_ids=prompt,
            attention_mask=torch.ones_like(prompt),
            logits_processor=LogitsProcessorList([proc]),
            max_new_tokens=40,
            do_sample=True,
            top_k=50,
            pad_token_id=50256,
            eos_token_id=50256,
        )
    for row in out[:, prompt.shape[1] :].tolist():
        body = row[: row.index(50256)] if 50256 in row else row
        n = corral.Matcher(compiled).validate_tokens(body + ([50256] if 50256 in row else []))
        assert n == len(body) + (1 if 50256 in row else 0), f"invalid output {row}"


def test_vllm_processor_on_cuda_logits_matches_cpu():
    from corral.vllm import LogitsProcessor

    vocab = corral.builtin_vocabulary()
    compiled = corral.compile(corral.builtin_grammar(), vocab)
    gpu_proc, cpu_proc = LogitsProcessor(compiled), LogitsProcessor(compiled)
    ids: list[int] = []
    gen = torch.Generator().manual_seed(0)
    for _ in range(30):
        base = torch.randn(vocab.size + 47, generator=gen)
        gpu = gpu_proc(ids, base.cuda())
        cpu = cpu_proc(ids, base.clone())
        assert torch.equal(gpu.cpu(), cpu)
        if cpu_proc.matcher.is_terminated():
            break
        ids.append(int(cpu.argmax()))


def test_sglang_mask_calls_on_cuda_match_cpu():
    from corral.sglang import CorralGrammar

    vocab = corral.builtin_vocabulary()
    compiled = corral.compile(corral.builtin_grammar(), vocab)
    grammars = [CorralGrammar(corral.Matcher(compiled), vocab) for _ in range(3)]
    for g, prefix in zip(grammars, [b"", b'{"a": [1, ', b'{"key']):
        for t in vocab.encode(prefix) if prefix else []:
            g.accept_token(t)
    mask = grammars[0].allocate_vocab_mask(vocab_size=vocab.size, batch_size=3, device="cuda")
    assert mask.is_pinned()
    CorralGrammar.fill_vocab_masks(grammars, mask)
    dev_mask = CorralGrammar.move_vocab_mask(mask, "cuda")
    base = torch.randn(3, vocab.size + 64)
    gpu = base.cuda()
    with NoHostSync():
        CorralGrammar.apply_vocab_mask(gpu, dev_mask)
    cpu = base.clone()
    CorralGrammar.apply_vocab_mask(cpu, mask)
    assert torch.equal(gpu.cpu(), cpu)
