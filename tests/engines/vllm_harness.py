"""vLLM 0.33.0 on CPU, built the way a server builds it, for corral's engine tests.

vLLM's PyPI wheel is a CUDA build and finds no platform on a machine without a GPU; its CPU
platform is set by hand before the engine config is created. The model is a one-layer Llama
with dummy weights (never run: these tests drive the front end and the structured-output
manager, not the model). The tokenizer is GPT-2's (``../shared/data/tokenizers/gpt2``) with
four added tokens (``<think>``, ``</think>``, ``<tool_call>``, ``</tool_call>``, not special,
as in Qwen's tokenizers) so that reasoning parsers and tool-call tags find their tokens.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
GPT2 = REPO.parent / "shared" / "data" / "tokenizers" / "gpt2"
ADDED = ["<think>", "</think>", "<tool_call>", "</tool_call>"]
#: The markers vLLM's Llama 3 and DeepSeek tool parsers look up in the tokenizer.
TOOL_MARKERS = ["<|python_tag|>"] + [f"<\uff5c{m}\uff5c>" for m in ("tool\u2581calls\u2581begin", "tool\u2581calls\u2581end", "tool\u2581call\u2581begin", "tool\u2581call\u2581end", "tool\u2581sep")]
#: The model's vocabulary is wider than the tokenizer's (padding ids, never allowed).
MODEL_VOCAB = 50304


def write_model(folder: Path, *, tool_markers: bool = False) -> Path:
    """A Llama config and GPT-2's tokenizer (plus the added tokens, and with ``tool_markers``
    the tool-call markers of Llama 3 and DeepSeek, all as text, not special) in ``folder``."""
    from tokenizers import AddedToken, Tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer.from_file(str(GPT2 / "tokenizer.json"))
    added = ADDED + (TOOL_MARKERS if tool_markers else [])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in added])
    tok.save(str(folder / "tokenizer.json"))
    for f in ("vocab.json", "merges.txt"):
        shutil.copy(GPT2 / f, folder / f)
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "GPT2Tokenizer",
                "eos_token": "<|endoftext|>",
                "bos_token": "<|endoftext|>",
                "unk_token": "<|endoftext|>",
                "model_max_length": 2048,
                "chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}",
            }
        )
    )
    (folder / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "vocab_size": MODEL_VOCAB,
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "num_key_value_heads": 2,
                "max_position_embeddings": 2048,
                "bos_token_id": 50256,
                "eos_token_id": 50256,
                "torch_dtype": "float32",
                "rms_norm_eps": 1e-5,
            }
        )
    )
    return folder


def use_cpu_platform() -> None:
    import vllm.platforms
    from vllm.platforms.cpu import CpuPlatform

    vllm.platforms._current_platform = CpuPlatform()
    # Computed at import time, when the platform was still unknown (CUDA assumed): no pinned
    # memory on a machine without a GPU.
    import vllm.utils.torch_utils as torch_utils

    torch_utils.PIN_MEMORY = False


@dataclass
class Engine:
    """One engine config with its front end (``InputProcessor``) and ``StructuredOutputManager``."""

    config: Any
    processor: Any
    manager: Any
    requests: dict = field(default_factory=dict)
    _n: int = 0

    @classmethod
    def build(cls, model: Path, **engine_args: Any) -> "Engine":
        from vllm.engine.arg_utils import EngineArgs
        from vllm.v1.engine.input_processor import InputProcessor
        from vllm.v1.structured_output import StructuredOutputManager

        args = dict(model=str(model), tokenizer=str(model), load_format="dummy", enforce_eager=True, max_model_len=1024, dtype="float32")
        args.update(engine_args)
        config = EngineArgs(**args).create_engine_config()
        return cls(config, InputProcessor(config), StructuredOutputManager(config))

    @property
    def tokenizer(self) -> Any:
        return self.manager.tokenizer

    def submit(self, prompt: str = "Hello", **sampling: Any) -> Any:
        """Sends one request through the front end and ``grammar_init``; returns the
        scheduler's ``Request`` once its grammar is compiled (raises what the front end or
        the compile raised)."""
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams
        from vllm.v1.request import Request

        so = sampling.pop("structured_outputs", None)
        if isinstance(so, dict):
            so = StructuredOutputsParams(**so)
        params = SamplingParams(max_tokens=sampling.pop("max_tokens", 64), structured_outputs=so, **sampling)
        self._n += 1
        rid = f"req-{self._n}"
        core = self.processor.process_inputs(rid, prompt, params, supported_tasks=("generate",))
        req = Request.from_engine_core_request(core, block_hasher=None)
        self.manager.grammar_init(req)
        sor = req.structured_output_request
        fut = sor._grammar
        if hasattr(fut, "result"):
            fut.result(timeout=120)
        assert sor.is_grammar_ready
        self.requests[rid] = req
        return req

    def bitmask(self, reqs: list, spec: dict | None = None) -> np.ndarray:
        """``StructuredOutputManager.grammar_bitmask`` for ``reqs`` (in order), a copy."""
        ids = [r.request_id for r in reqs]
        out = self.manager.grammar_bitmask({r.request_id: r for r in reqs}, ids, spec or {})
        return None if out is None else np.array(out, copy=True)

    def accept(self, req: Any, tokens: list[int]) -> bool:
        """The scheduler's step after sampling: the tokens join the request, then the grammar."""
        req.append_output_token_ids(tokens) if hasattr(req, "append_output_token_ids") else req._output_token_ids.extend(tokens)
        return self.manager.accept_tokens(req, tokens)


def allowed(row: np.ndarray, n: int) -> set[int]:
    """Token ids whose bit is set in one int32 bitmask row, below ``n``."""
    bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:n]
    return set(np.flatnonzero(bits).tolist())
