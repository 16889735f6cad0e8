"""SGLang 0.5.23 on CPU, built the way its scheduler builds it, for corral's engine tests.

Real SGLang objects throughout: ``ServerArgs`` (``device="cpu"``, ``grammar_backend="corral"``)
published to SGLang's runtime context, ``ModelConfig.from_server_args``, SGLang's
``get_tokenizer``, the ``GrammarManager`` (``create_grammar_backend`` through the backend
registry, ``process_req_with_grammar``, ``get_ready_grammar_requests``), ``Req`` with
``SamplingParams``, and ``SamplingBatchInfo`` (``update_regex_vocab_mask`` ->
``fill_vocab_mask_batched``, ``apply_logits_bias`` on CPU logits).

For step-by-step control these tests do not build the ``Scheduler`` (its constructor loads a
model, allocates memory pools and starts ZMQ sockets; :func:`write_gpt2_model` and
:func:`run_engine` below run it, inside the whole engine). :class:`SchedulerParts` holds
exactly the attributes ``GrammarManager.__init__`` reads from the scheduler -- the real ``ServerArgs``,
tokenizer and ``ModelConfig`` (with ``think_end_ids`` set by the scheduler's own code), and
a one-rank data/tensor-parallel group (``world_size`` 1: the manager then skips its
all-gather, as a one-GPU server does). The decode step after sampling replays
``BatchResultProcessor``'s order: the token joins ``req.output_ids``,
``req.update_finish_state``, the grammar accepts it (a ``ValueError`` aborts that request),
``req.grammar.finished = req.finished()``.

The model folder is the vLLM harness's: a Llama config (never run) and GPT-2's tokenizer from
``../shared/data/tokenizers/gpt2`` with ``<think>``, ``</think>``, ``<tool_call>``,
``</tool_call>`` added.

:func:`write_gpt2_model` and :func:`run_engine` run the whole ``sglang.Engine`` instead
(tokenizer manager, scheduler process, model runner, sampler) on CPU: a one-layer GPT-2 with
dummy weights -- GPT-2 has no rotary embedding, whose CPU path in SGLang's PyPI build needs
vLLM's or a CPU ``sgl_kernel``'s custom ops -- served by SGLang's torch-native attention.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import numpy as np
import torch

from .vllm_harness import MODEL_VOCAB, write_model  # noqa: F401  (same model folder)


def write_gpt2_model(folder: Path) -> Path:
    """A one-layer GPT-2 config (dummy weights) with the harness's tokenizer in ``folder``."""
    import json

    write_model(folder)
    (folder / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["GPT2LMHeadModel"],
                "model_type": "gpt2",
                "vocab_size": MODEL_VOCAB,
                "n_embd": 64,
                "n_layer": 1,
                "n_head": 2,
                "n_positions": 1024,
                "n_ctx": 1024,
                "bos_token_id": 50256,
                "eos_token_id": 50256,
                "torch_dtype": "float32",
                "layer_norm_epsilon": 1e-5,
                "activation_function": "gelu_new",
            }
        )
    )
    return folder


#: A script run as ``python ENGINE_SCRIPT CONFIG.json``, CONFIG being ``{"model", "engine_args",
#: "requests", "out", "fill_log"}``: registers corral at module top level (SGLang spawns its
#: scheduler process, which re-runs this script as ``__mp_main__`` and so registers too, and
#: logs each corral batch fill's row count to ``fill_log``), runs ``sglang.Engine(device="cpu",
#: load_format="dummy", grammar_backend="corral", **engine_args)`` over the requests (each
#: ``{"text", "sampling_params", "require_reasoning"?}``) concurrently, then the first one
#: again, and writes ``[{"output_ids", "text", "finish_reason"} or {"error"}]`` to ``out``.
ENGINE_SCRIPT = r"""
import asyncio, json, sys
import corral, corral.sglang

corral.sglang.register()
CONFIG = json.load(open(sys.argv[1]))
if __name__ == "__mp_main__":
    _real = corral._native.fill_next_token_bitmask_batch

    def _logged(matchers, bitmask, rows):
        with open(CONFIG["fill_log"], "a") as f:
            f.write(f"{len(rows)}\n")
        return _real(matchers, bitmask, rows)

    corral._native.fill_next_token_bitmask_batch = _logged

if __name__ == "__main__":
    import sglang

    requests = CONFIG["requests"]
    llm = sglang.Engine(
        model_path=CONFIG["model"], device="cpu", load_format="dummy", dtype="float32", grammar_backend="corral",
        max_total_tokens=4096, mem_fraction_static=0.3, random_seed=0, log_level="error", **CONFIG["engine_args"],
    )

    def summary(res):
        return {"output_ids": res["output_ids"], "text": res["text"], "finish_reason": res["meta_info"]["finish_reason"]}

    async def one(r):
        try:
            res = await llm.async_generate(
                prompt=r["text"], sampling_params=r["sampling_params"], require_reasoning=r.get("require_reasoning", False)
            )
        except Exception as e:  # the tokenizer manager raises an aborted request's message
            return {"error": f"{type(e).__name__}: {e}"}
        return summary(res)

    try:  # concurrently: the requests share the scheduler's batches
        results = llm.loop.run_until_complete(asyncio.gather(*[one(r) for r in requests]))
        results.append(llm.loop.run_until_complete(one(requests[0])))  # the engine still serves
    finally:
        llm.shutdown()
    json.dump(results, open(CONFIG["out"], "w"))
"""


def run_engine(tmp_path: Path, model: Path, requests: list, **engine_args: Any) -> tuple[list, list[int]]:
    """Runs :data:`ENGINE_SCRIPT` in a fresh interpreter; returns its results and the row counts
    of the scheduler's corral fill calls."""
    import json
    import subprocess
    import sys

    script, config = tmp_path / "run_engine.py", tmp_path / "engine.json"
    out, log = tmp_path / "out.json", tmp_path / "fills.log"
    script.write_text(ENGINE_SCRIPT)
    config.write_text(json.dumps({"model": str(model), "engine_args": engine_args, "requests": requests, "out": str(out), "fill_log": str(log)}))
    proc = subprocess.run([sys.executable, str(script), str(config)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [int(x) for x in log.read_text().split()] if log.exists() else []
    return json.loads(out.read_text()), rows


@dataclass
class SchedulerParts:
    """What ``GrammarManager(scheduler)`` reads from the scheduler (see the module docstring)."""

    server_args: Any
    tokenizer: Any
    model_config: Any
    dp_tp_group: Any = field(default_factory=lambda: SimpleNamespace(world_size=1, first_rank=0, is_first_rank=True, rank_in_group=0))
    dp_tp_cpu_group: Any = None
    pp_group: Any = None


def publish_server_args(**kwargs: Any) -> Any:
    """A ``ServerArgs`` on CPU, published to SGLang's runtime context as the launcher
    publishes it for a scheduler process."""
    from sglang.srt.runtime_context import SpawnRanks, publish
    from sglang.srt.server_args import ServerArgs

    args = dict(device="cpu")
    args.update(kwargs)
    server_args = ServerArgs(**args)
    # One scheduler, rank 0 of a one-process world: the launcher's placement.
    publish(server_args, role="scheduler", ranks=SpawnRanks(world_rank=0))
    return server_args


@dataclass
class Server:
    """A scheduler's grammar path: ``GrammarManager`` + ``Req`` + ``SamplingBatchInfo``."""

    server_args: Any
    tokenizer: Any
    model_config: Any
    manager: Any
    _n: int = 0

    @classmethod
    def build(cls, model: Path, **server_args: Any) -> "Server":
        from sglang.srt.configs.model_config import ModelConfig
        from sglang.srt.constrained.grammar_manager import GrammarManager
        from sglang.srt.parser.reasoning_parser import ReasoningParser
        from sglang.srt.utils.hf_transformers_utils import get_tokenizer

        sa = publish_server_args(model_path=str(model), **server_args)
        model_config = ModelConfig.from_server_args(sa)
        tokenizer = get_tokenizer(str(model))
        if sa.reasoning_parser:  # the scheduler's own setup (Scheduler.__init__)
            parser = ReasoningParser(model_type=sa.reasoning_parser, stream_reasoning=False, tokenizer=tokenizer)
            think_end_ids = parser.detector.get_think_end_token_ids(tokenizer)
            if think_end_ids:
                model_config.think_end_ids = think_end_ids
        manager = GrammarManager(SchedulerParts(sa, tokenizer, model_config))
        return cls(sa, tokenizer, model_config, manager)

    @property
    def backend(self) -> Any:
        return self.manager.grammar_backend

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def make_req(self, prompt: str = "Hello", *, require_reasoning: bool = False, **sampling: Any) -> Any:
        from sglang.srt.managers.schedule_batch import Req
        from sglang.srt.sampling.sampling_params import SamplingParams

        sampling.setdefault("max_new_tokens", 256)
        params = SamplingParams(**sampling)
        params.normalize(self.tokenizer)
        self._n += 1
        return Req(
            f"req-{self._n}",
            prompt,
            array("q", self.encode(prompt)),
            params,
            eos_token_ids=set(self.model_config.hf_eos_token_id or ()),
            vocab_size=self.model_config.vocab_size,
            require_reasoning=require_reasoning,
        )

    def submit(self, *reqs: Any, timeout: float = 120.0) -> list:
        """``process_req_with_grammar`` for each request, then ``get_ready_grammar_requests``
        until the grammar queue is empty (as the scheduler's loop polls it). Returns the
        requests, their ``grammar`` compiled (or ``None`` and ``to_finish`` set: aborted)."""
        import time

        for r in reqs:
            self.manager.process_req_with_grammar(r)
        deadline = time.monotonic() + timeout
        while self.manager.has_waiting_grammars():
            self.manager.get_ready_grammar_requests()
            assert time.monotonic() < deadline, "grammar compilation did not finish"
        return list(reqs)

    def sampling_info(self, reqs: list) -> Any:
        """``SamplingBatchInfo`` for a greedy decode batch of ``reqs`` on CPU, with the grammars
        the forward batch hands it (``[req.grammar for req in batch.reqs]``)."""
        from sglang.srt.sampling.sampling_batch_info import SamplingBatchInfo

        n = len(reqs)
        return SamplingBatchInfo(
            temperatures=torch.ones(n, 1),
            top_ps=torch.ones(n),
            top_ks=torch.ones(n, dtype=torch.int32),
            min_ps=torch.zeros(n),
            is_all_greedy=True,
            is_any_greedy=True,
            need_top_p_sampling=False,
            need_top_k_sampling=False,
            need_min_p_sampling=False,
            vocab_size=self.model_config.vocab_size,
            grammars=[r.grammar for r in reqs],
            device="cpu",
        )

    def step_mask(self, reqs: list) -> tuple[Any, Optional[np.ndarray]]:
        """``update_regex_vocab_mask`` for the batch: the ``SamplingBatchInfo`` and a copy of
        its vocab mask (None when no request has a grammar)."""
        info = self.sampling_info(reqs)
        if not any(info.grammars):
            info.grammars = None
        info.update_regex_vocab_mask()
        mask = None if info.grammar_mask is None else info.grammar_mask.vocab_mask.numpy().copy()
        return info, mask

    def accept(self, req: Any, token: int) -> None:
        """``BatchResultProcessor``'s decode step for one sampled token (non-speculative)."""
        req.output_ids.extend([token])
        req.update_finish_state(1)
        if req.grammar is not None:
            try:
                req.grammar.accept_token(token)
            except ValueError as e:
                from sglang.srt.managers.schedule_batch import FINISH_ABORT

                req.to_finish = FINISH_ABORT(f"Grammar accept_token failed: {e}")
            req.grammar.finished = req.finished()


def allowed(row: np.ndarray, n: int = MODEL_VOCAB) -> set[int]:
    """Token ids whose bit is set in one int32 bitmask row, below ``n``."""
    bits = np.unpackbits(np.ascontiguousarray(row).view(np.uint8), bitorder="little")[:n]
    return set(np.flatnonzero(bits).tolist())
