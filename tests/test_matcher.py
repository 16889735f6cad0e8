"""Matcher API behaviour through the Python bindings: bitmask buffers, batch fills, threads."""

from __future__ import annotations

import threading

import numpy as np
import pytest
try:
    import torch
except ImportError:  # the numpy-only runs (make test-wheels-suite)
    torch = None  # type: ignore[assignment]

import corral

TOKENS = [b"{", b"}", b"[", b"]", b'"', b",", b":", b" ", b"a", b"ab", b'"a', b'a"', b"1", b"12", b"true", b"null", b'{"', b'"}', b"\xc3", b"\xa9"]
EOS = len(TOKENS)


@pytest.fixture(scope="module")
def vocab() -> corral.Vocabulary:
    return corral.Vocabulary.from_bytes(TOKENS + [b""], eos_token_ids=[EOS], vocab_size=64)


@pytest.fixture(scope="module")
def compiled(vocab):
    return corral.compile(corral.builtin_grammar("json"), vocab)


def allowed(m: corral.Matcher, size: int) -> list[int]:
    mask = corral.allocate_token_bitmask(1, size)
    m.fill_next_token_bitmask(mask)
    return corral.allowed_token_ids(mask[0], size)


def test_padding_ids_never_allowed_and_eos_at_end(vocab, compiled):
    m = corral.Matcher(compiled)
    ids = allowed(m, vocab.size)
    assert all(i < len(TOKENS) for i in ids)
    assert TOKENS.index(b"{") in ids and TOKENS.index(b"}") not in ids
    assert m.accept_bytes(b'{"a": 1}')
    assert allowed(m, vocab.size)[-1] == EOS
    assert m.accept_token(EOS) and m.is_terminated()
    assert allowed(m, vocab.size) == [EOS]
    assert not m.accept_token(TOKENS.index(b" "))


def test_split_utf8_tokens(vocab, compiled):
    m = corral.Matcher(compiled)
    assert m.accept_bytes(b'"')
    assert TOKENS.index(b"\xc3") in allowed(m, vocab.size)
    assert m.accept_token(TOKENS.index(b"\xc3"))
    # Only a continuation byte may follow a lead byte.
    assert allowed(m, vocab.size) == [TOKENS.index(b"\xa9")]


def test_compiled_grammar_keeps_the_vocabulary_object(vocab, compiled):
    # compile() caches by fingerprint, so an equal vocabulary may be the one kept.
    assert isinstance(compiled.vocab, corral.Vocabulary)
    assert compiled.vocab.fingerprint == vocab.fingerprint
    direct = corral.CompiledGrammar(corral.builtin_grammar("json"), vocab)
    assert direct.vocab is vocab
    with pytest.raises(corral.UsageError, match="expected a corral.Vocabulary"):
        corral.CompiledGrammar(corral.builtin_grammar("json"), object())


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.zeros((1, 2), dtype=np.int64), "dtype int32"),
        *(
            [
                (torch.zeros((1, 2), dtype=torch.float32), "dtype torch.int32"),
                (torch.zeros((2, 4), dtype=torch.int32)[:, ::2], "contiguous"),
            ]
            if torch is not None
            else []
        ),
        (np.zeros((1, 1), dtype=np.int32), "needs 2"),
        (np.zeros((1, 1, 2), dtype=np.int32), "1-D or 2-D"),
        ([0, 0], "numpy array or a CPU torch tensor"),
    ],
)
def test_bad_bitmask_buffers(compiled, bad, message):
    m = corral.Matcher(compiled)
    with pytest.raises(corral.UsageError, match=message):
        m.fill_next_token_bitmask(bad)


def test_index_out_of_range_and_readonly(compiled):
    m = corral.Matcher(compiled)
    with pytest.raises(corral.UsageError, match="out of range"):
        m.fill_next_token_bitmask(corral.allocate_token_bitmask(2, 64), 2)
    ro = np.zeros((1, 2), dtype=np.int32)
    ro.setflags(write=False)
    with pytest.raises(corral.UsageError, match="read-only"):
        m.fill_next_token_bitmask(ro)


def test_unknown_token_id_is_an_error(compiled):
    m = corral.Matcher(compiled)
    with pytest.raises(corral.UsageError, match="out of range"):
        m.accept_token(64)
    with pytest.raises(corral.UsageError):
        m.accept_token(-1)
    # A padding id inside vocab_size is simply not allowed.
    assert m.accept_token(40) is False


def test_rollback_too_far(compiled):
    m = corral.Matcher(compiled)
    m.accept_bytes(b"[")
    with pytest.raises(corral.UsageError, match="only 1"):
        m.rollback(2)


@pytest.mark.torch  # (allocate_token_bitmask is a tensor)
def test_numpy_and_1d_buffers(vocab, compiled):
    m = corral.Matcher(compiled)
    a = np.zeros(2, dtype=np.int32)
    m.fill_next_token_bitmask(a)
    t = corral.allocate_token_bitmask(1, vocab.size)
    m.fill_next_token_bitmask(t)
    assert np.array_equal(a, t[0].numpy())


@pytest.mark.torch
def test_batch_fill_equals_single_fills(vocab, compiled):
    prefixes = [b"", b'{"a": ', b"[1, ", b'"x', b'{"a": [true, {"b": nul']
    ms = []
    for p in prefixes:
        m = corral.Matcher(compiled)
        assert m.accept_bytes(p)
        ms.append(m)
    expected = corral.allocate_token_bitmask(len(ms), vocab.size)
    for i, m in enumerate(ms):
        m.fill_next_token_bitmask(expected, i)
    got = corral.allocate_token_bitmask(len(ms) + 1, vocab.size)
    corral.fill_next_token_bitmask_batch(ms, got, indices=list(range(len(ms), 0, -1)))
    for i in range(len(ms)):
        assert torch.equal(got[len(ms) - i], expected[i])
    assert bool((got[0] == -1).all()), "rows not named in indices are untouched"
    with pytest.raises(corral.UsageError, match="twice"):
        corral.fill_next_token_bitmask_batch([ms[0], ms[0]], got)
    with pytest.raises(corral.UsageError, match="appears twice"):
        corral.fill_next_token_bitmask_batch(ms[:2], got, indices=[1, 1])


def test_threads_share_a_compiled_grammar(vocab, compiled):
    """Many threads fill and accept concurrently on one compiled grammar; every mask equals
    the single-threaded one."""
    doc = b'{"a": [1, 12, true], "ab": {"a": null}}'
    reference = []
    m = corral.Matcher(compiled)
    for i in range(len(doc)):
        reference.append(allowed(m, vocab.size))
        assert m.accept_bytes(doc[i : i + 1])
    errors: list[str] = []

    def work() -> None:
        mm = corral.Matcher(compiled)
        buf = corral.allocate_token_bitmask(1, vocab.size)
        for _ in range(5):
            mm.reset()
            for i in range(len(doc)):
                mm.fill_next_token_bitmask(buf)
                if corral.allowed_token_ids(buf[0], vocab.size) != reference[i]:
                    errors.append(f"mismatch at byte {i}")
                    return
                mm.accept_bytes(doc[i : i + 1])

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.torch
def test_a_numpy_backed_bitmask_tensor_is_rechecked_when_it_points_elsewhere():
    """A tensor over a numpy array (``torch.from_numpy``, ``allocate_token_bitmask``) cannot be
    resized, so repeat fills check only its data pointer (its storage is held): re-pointing
    the tensor is still caught and checked from scratch."""
    import torch

    toks = [b"a", b"b", b"ab", b"{", b"}"]
    vocab = corral.Vocabulary.from_bytes(toks, eos_token_ids=[], vocab_size=len(toks))
    m = corral.Matcher(corral.CompiledGrammar(corral.Grammar.from_ebnf('root ::= "a" "b"'), vocab))
    for t in (torch.from_numpy(np.zeros((2, 1), dtype=np.int32)), corral.allocate_token_bitmask(2, len(toks))):
        assert not t.untyped_storage().resizable()
        m.fill_next_token_bitmask(t, 1)
        m.fill_next_token_bitmask(t, 1)  # the pointer-only repeat path
        assert t[1, 0].item() == 0b101  # "a", "ab"
        with pytest.raises(RuntimeError):
            t.resize_(4, 1)  # torch refuses: the storage is not resizable
        other = torch.zeros((3, 1), dtype=torch.int32)
        t.set_(other)  # same object, new storage: checked again
        m.fill_next_token_bitmask(t, 2)
        assert other[2, 0].item() == 0b101
        with pytest.raises(corral.UsageError, match="out of range"):
            m.fill_next_token_bitmask(t, 3)
        t.data = torch.from_numpy(np.zeros(2, dtype=np.float32))  # another dtype elsewhere
        with pytest.raises(corral.UsageError, match="int32"):
            m.fill_next_token_bitmask(t, 0)
    # Bytes swapped inside the held storage (share_memory_ moves them to shared memory and
    # frees the old ones): checked again, and the fill lands in the tensor's new bytes.
    t = torch.from_numpy(np.zeros((2, 1), dtype=np.int32))
    m.fill_next_token_bitmask(t, 0)
    m.fill_next_token_bitmask(t, 0)
    t.share_memory_()
    t.zero_()
    m.fill_next_token_bitmask(t, 1)
    assert t[1, 0].item() == 0b101


@pytest.mark.torch
def test_a_bitmask_tensor_changed_in_place_between_fills_is_checked_again():
    """Filling the same torch tensor again skips most checks (engines reuse one bitmask), but
    a tensor resized, re-pointed or made non-contiguous in place is checked from scratch."""
    import torch

    toks = [b"a", b"b", b"ab", b"{", b"}"]
    vocab = corral.Vocabulary.from_bytes(toks, eos_token_ids=[], vocab_size=len(toks))
    m = corral.Matcher(corral.CompiledGrammar(corral.Grammar.from_ebnf('root ::= "a" "b"'), vocab))
    t = torch.zeros((2, 1), dtype=torch.int32)
    m.fill_next_token_bitmask(t, 1)
    assert t[1, 0].item() == 0b101  # "a", "ab"
    m.fill_next_token_bitmask(t, 1)  # the repeat path
    t.resize_(1, 1)
    with pytest.raises(corral.UsageError, match="out of range"):
        m.fill_next_token_bitmask(t, 1)
    other = torch.zeros((3, 1), dtype=torch.int32)
    t.set_(other)  # same object, new storage
    m.fill_next_token_bitmask(t, 2)
    assert other[2, 0].item() == 0b101
    t.data = other.view(torch.float32)  # same memory, another dtype
    with pytest.raises(corral.UsageError, match="int32"):
        m.fill_next_token_bitmask(t, 2)
    t.data = other
    wide = torch.zeros((1, 4), dtype=torch.int32)
    t.set_(wide.untyped_storage(), 0, (1, 2), (1, 2))  # non-contiguous view of the same storage
    with pytest.raises(corral.UsageError, match="contiguous"):
        m.fill_next_token_bitmask(t, 0)
