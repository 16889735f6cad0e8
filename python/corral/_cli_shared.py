"""What the command line (:mod:`corral.cli`) and the demo (:mod:`corral.demo`) share: the
error they report to the user (:class:`CliError`), loading a vocabulary from a tokenizer path
(:func:`load_vocabulary`) and a grammar from a JSON Schema, and output helpers.

Kept apart from both so that neither imports the other's helpers.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence


#: Pre-tokenization pattern of Llama 3 (tiktoken), used for tiktoken rank files whose
#: ``special_tokens.json`` gives no ``pat_str``. It does not affect masks: a vocabulary is
#: token id -> bytes only.
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


class CliError(Exception):
    """A failure to report on stderr (already worded for the user), with an exit status."""

    def __init__(self, message: str, code: int = 1, *, about_file: bool = False) -> None:
        super().__init__(message)
        self.code = code
        #: The message starts with the file it is about ("FILE: ..."): printed as is.
        self.about_file = about_file


def _micro() -> str:
    """The microsecond symbol, or ``us`` when stdout cannot encode it."""
    enc = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        "\u00b5".encode(enc)
    except (UnicodeEncodeError, LookupError):
        return "us"
    return "\u00b5s"


def _json_schema_grammar(path: Path, text: str) -> Any:
    import corral

    factory = getattr(corral.Grammar, "from_json_schema", None)
    if factory is None:
        raise CliError(
            f"{path}: JSON Schema support is not available in this version of corral "
            f"({corral.__version__}: corral.Grammar.from_json_schema does not exist); "
            "convert the schema to an EBNF grammar or upgrade corral",
            2,
        )
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as e:
        line_text = text.splitlines()[e.lineno - 1] if text.splitlines() else ""
        raise CliError(
            f"{path}: invalid JSON in the schema: {e.msg} at line {e.lineno}, column {e.colno}:\n"
            f"  {line_text}\n  {' ' * (e.colno - 1)}^",
            about_file=True,
        ) from None
    import warnings

    with warnings.catch_warnings():
        # Loosened keywords are listed by `check` itself (Grammar.schema_warnings).
        warnings.simplefilter("ignore", corral.SchemaWarning)
        return factory(schema, strict=not _NON_STRICT[0])


#: set by `check --non-strict` (JSON Schema only)
_NON_STRICT = [False]


@dataclass
class LoadedVocab:
    vocab: Any  # corral.Vocabulary
    label: str
    seconds: float  # tokenizer load + vocabulary build


_TIKTOKEN_LINE = re.compile(rb"[A-Za-z0-9+/]+={0,2} [0-9]+\r?")


def _is_tiktoken_file(path: Path) -> bool:
    """Whether the file's first line looks like ``<base64> <rank>`` (tiktoken BPE ranks)."""
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return False
    first = head.split(b"\n", 1)[0]
    return _TIKTOKEN_LINE.fullmatch(first) is not None


def _need(module: str, extra: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise CliError(f"this tokenizer needs the {module.split('.')[0]} package: pip install 'corral[{extra}]'") from None


def _resolve_tokenizer(path: Path) -> tuple[str, Path]:
    """(kind, file): kind is 'huggingface', 'tiktoken' or 'sentencepiece'."""
    if path.is_dir():
        for name in ("tokenizer.json", "tokenizer.model"):
            if (path / name).is_file():
                return _resolve_tokenizer(path / name)
        ranks = sorted(path.glob("*.tiktoken"))
        if len(ranks) == 1:
            return "tiktoken", ranks[0]
        raise CliError(f"{path}: no tokenizer.json, tokenizer.model or single *.tiktoken file in this directory")
    if not path.exists():
        raise CliError(f"{path}: no such tokenizer file or directory")
    suffix = path.suffix.lower()
    if suffix == ".json":
        return "huggingface", path
    if suffix == ".tiktoken":
        return "tiktoken", path
    if _is_tiktoken_file(path):
        return "tiktoken", path
    if suffix == ".model":
        return "sentencepiece", path
    try:
        with open(path, "rb") as f:
            if f.read(64).lstrip().startswith(b"{"):
                return "huggingface", path
    except OSError as e:
        raise CliError(f"{path}: cannot read the tokenizer: {e.strerror or e}") from None
    return "sentencepiece", path


def _tiktoken_encoding(path: Path) -> Any:
    tiktoken = _need("tiktoken", "tiktoken")
    load = _need("tiktoken.load", "tiktoken")
    try:
        ranks = load.load_tiktoken_bpe(str(path))
    except Exception as e:  # noqa: BLE001 - report any parse failure of the rank file
        raise CliError(f"{path}: cannot read the tiktoken rank file: {e}") from None
    specials: dict[str, int] = {}
    pattern = LLAMA3_PATTERN
    side = path.parent / "special_tokens.json"
    if side.is_file():
        try:
            meta = json.loads(side.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise CliError(f"{side}: cannot read the special tokens: {e}") from None
        table = meta.get("special_tokens") if isinstance(meta, dict) else None
        if not isinstance(table, dict) or not all(isinstance(v, int) for v in table.values()):
            raise CliError(f'{side}: expected {{"special_tokens": {{name: id, ...}}}}')
        specials = dict(table)
        if isinstance(meta.get("pat_str"), str):
            pattern = meta["pat_str"]
    try:
        return tiktoken.Encoding(name=path.stem, pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)
    except Exception as e:  # noqa: BLE001
        raise CliError(f"{path}: cannot build a tiktoken encoding: {e}") from None


def _builtin_vocab(eos: Sequence[int] | None, vocab_size: int | None, fresh: bool) -> Any:
    from . import vocab as vocab_mod

    base = vocab_mod._builtin.__wrapped__("gpt2") if fresh else vocab_mod.builtin_vocabulary("gpt2")
    if eos is None and vocab_size is None:
        return base
    # builtin_vocabulary() takes no options: rebuild it token by token.
    eos_ids = list(eos) if eos is not None else base.eos_token_ids
    n = base.num_tokens
    tokens = [base.token_bytes(i) for i in range(n)]
    specials = [i for i in range(n) if base.is_special(i) and i not in eos_ids]
    for i in eos_ids:
        if i < n:
            tokens[i] = b""
    return vocab_mod.Vocabulary.from_bytes(tokens, eos_token_ids=eos_ids, special_token_ids=specials, vocab_size=vocab_size)


def load_vocabulary(
    tokenizer: str | os.PathLike[str] | None,
    eos: Sequence[int] | None = None,
    vocab_size: int | None = None,
    *,
    fresh: bool = False,
) -> LoadedVocab:
    """Builds the vocabulary of a tokenizer file/directory (built-in GPT-2 when None).

    ``fresh`` bypasses the per-process vocabulary caches so that the build can be timed.
    """
    import corral

    t0 = time.perf_counter()
    try:
        if tokenizer is None:
            v = _builtin_vocab(eos, vocab_size, fresh)
            return LoadedVocab(v, "built-in GPT-2", time.perf_counter() - t0)
        kind, path = _resolve_tokenizer(Path(tokenizer))
        if kind == "huggingface":
            tokenizers = _need("tokenizers", "hf")
            try:
                tok = tokenizers.Tokenizer.from_file(str(path))
            except Exception as e:  # noqa: BLE001
                raise CliError(f"{path}: not a Hugging Face tokenizer.json: {e}") from None
            v = corral.Vocabulary.from_huggingface(tok, eos_token_ids=eos, vocab_size=vocab_size)
            label = f"Hugging Face {path}"
        elif kind == "tiktoken":
            enc = _tiktoken_encoding(path)
            v = corral.Vocabulary.from_tiktoken(enc, eos_token_ids=eos, vocab_size=vocab_size)
            label = f"tiktoken {path}"
        else:
            spm = _need("sentencepiece", "sentencepiece")
            try:
                sp = spm.SentencePieceProcessor(model_file=str(path))
            except Exception as e:  # noqa: BLE001
                raise CliError(
                    f"{path}: not a SentencePiece model, Hugging Face tokenizer.json or tiktoken rank file ({e})"
                ) from None
            v = corral.Vocabulary.from_sentencepiece(sp, eos_token_ids=eos, vocab_size=vocab_size)
            label = f"SentencePiece {path}"
    except corral.CorralError as e:
        msg = str(e)
        if "eos_token_ids" in msg:
            msg += " (on the command line: --eos ID)"
        raise CliError(f"{tokenizer or 'built-in vocabulary'}: {msg}") from None
    return LoadedVocab(v, label, time.perf_counter() - t0)


def _describe_vocab(lv: LoadedVocab) -> str:
    v = lv.vocab
    size = f"{v.num_tokens} tokens" if v.size == v.num_tokens else f"{v.num_tokens} tokens, size {v.size}"
    return f"{lv.label} ({size}, EOS {v.eos_token_ids})"
