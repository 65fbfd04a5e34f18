"""A seed for every rollout verl asks vLLM for, so that a run's samples follow from its seed.

verl 0.9.1 samples every rollout from its vLLM engine's one random stream (the engine is seeded,
the requests are not): which numbers a rollout gets depends on the order in which the agent-loop
workers' requests reach the engine, and a run resumed after a preemption restarts the stream, so it
samples other rollouts than the run it continues. Where the config asks for it (``reproducible``),
each request carries its own seed,

    seed(run seed, step, call of the step, prompt id, k)    (k: the prompt's k-th rollout in the call)

(``rollout_seed``), so the G rollouts of a prompt differ, and a step's samples are the same however
the requests are scheduled and whether or not the run was resumed before it, where the engine's
logits do not depend on the batch: on a CPU (tested), on a GPU with vLLM's batch-invariant mode,
which ``reproducible`` turns on there (verl's ``rollout.full_determinism``). Seeded requests cost: vLLM
then draws each request's noise with its own generator, a kernel launch per request and decode step
(docs/gpu.md, "Reproducibility"), so where reproducibility is not asked the requests go unseeded.

``SeededRollouts`` wraps the trainer's rollout manager and writes the seeds into the batch (field
``vicurl_seed``); ``SeededSingleTurnAgentLoop``, verl's single-turn agent loop, puts a request's seed
into its sampling parameters (registered through ``agent_loops.yaml``, the launcher's
``rollout.agent.agent_loop_config_path``; the default agent loop in ``vicurl_ppo_trainer.yaml``).
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable

import numpy as np

FIELD = "vicurl_seed"
AGENT_LOOPS = Path(__file__).resolve().parents[1] / "agent_loops.yaml"


def rollout_seed(seed: int, step: int, call: int, prompt_id: str, k: int) -> int:
    """A 31-bit seed of one rollout, the same on every machine and Python (not ``hash``)."""
    digest = hashlib.sha256(f"vicurl-rollout:{int(seed)}:{int(step)}:{int(call)}:{prompt_id}:{int(k)}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def engine_seed(seed: int, start_step: int) -> int:
    """vLLM's engine seed for a job of the run of seed ``seed`` that starts after step ``start_step``
    (verl's ``rollout.seed``; replica r takes it + r). It seeds the stream unseeded requests draw from (the
    default): each training seed its own stream (verl's default, 42, gave every seed the same), and a
    resumed job a stream of its own, not the one its run started with."""
    return rollout_seed(seed, start_step, -1, "vllm-engine", 0)


def batch_seeds(seed: int, step: int, call: int, prompt_ids: list[str]) -> list[int]:
    """The seed of each row of a generation batch (rows of one prompt numbered in batch order)."""
    seen: Counter = Counter()
    out = []
    for pid in prompt_ids:
        out.append(rollout_seed(seed, step, call, pid, seen[pid]))
        seen[pid] += 1
    return out


class SeededRollouts:
    """verl's rollout manager, except that ``generate_sequences`` seeds every request (``batch_seeds``)
    where ``seeded`` (the config's ``reproducible``; else the requests go unseeded, as in verl, and vLLM
    keeps its batched sampler), and times each step's generation."""

    def __init__(self, manager, seed: int, step_of: Callable[[], int], seeded: bool = True):
        self._manager, self._seed, self._step_of, self._seeded = manager, int(seed), step_of, bool(seeded)
        self._calls: dict[int, int] = defaultdict(int)
        self.seconds: dict[int, float] = defaultdict(float)  # each step's generation time (time/rollout_s)

    def generate_sequences(self, batch):
        step = int(self._step_of())
        call = self._calls[step]
        self._calls[step] += 1
        if self._seeded:
            ids = [str((info or {}).get("id")) for info in batch.non_tensor_batch["extra_info"]]
            batch.non_tensor_batch[FIELD] = np.array(batch_seeds(self._seed, step, call, ids), dtype=object)
        t0 = time.perf_counter()
        out = self._manager.generate_sequences(batch)
        self.seconds[step] += time.perf_counter() - t0
        batch.non_tensor_batch.pop(FIELD, None)
        out.non_tensor_batch.pop(FIELD, None)
        return out

    def __getattr__(self, name):
        return getattr(self._manager, name)


def token_builder_model_type(tokenizer, hf_model_type: str | None) -> str | None:
    """The model type verl's agent loop picks its token builder by: the config's, unless that builder
    cannot be made for this tokenizer. DeepSeek-R1-Distill's config says ``qwen2``, whose builder
    requires Qwen's ``<|im_end|>``, a token R1-Distill's tokenizer replaced by its own (``<｜Assistant｜>``
    has its id). The model-specific builders only join turns of a multi-turn dialogue; these rollouts
    are single-turn prompts the project renders itself, for which verl's default builder is the same."""
    from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

    key = (id(tokenizer), hf_model_type)
    if key not in _BUILDER_TYPES:  # an agent loop is built for every request: decided once per tokenizer
        try:
            create_continuous_token_builder(tokenizer, hf_model_type=hf_model_type)
            _BUILDER_TYPES[key] = hf_model_type
        except ValueError as e:
            if "does not define required token" not in str(e):
                raise
            _BUILDER_TYPES[key] = None
    return _BUILDER_TYPES[key]


_BUILDER_TYPES: dict[tuple[int, str | None], str | None] = {}


def _agent_loop_class():
    from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop

    class SeededSingleTurnAgentLoop(SingleTurnAgentLoop):
        """verl's single-turn agent loop with the request's seed in its sampling parameters (and a token
        builder the tokenizer supports: `token_builder_model_type`)."""

        def __init__(self, *args, hf_model_type: str | None = None, **kwargs):
            hf_model_type = token_builder_model_type(kwargs["tokenizer"], hf_model_type)
            super().__init__(*args, hf_model_type=hf_model_type, **kwargs)

        async def run(self, sampling_params: dict[str, Any], priority: int = 0, **kwargs):
            seed = kwargs.pop(FIELD, None)
            if seed is not None:
                sampling_params = {**sampling_params, "seed": int(seed)}
            return await super().run(sampling_params, priority=priority, **kwargs)

    return SeededSingleTurnAgentLoop


def __getattr__(name):  # the agent loop is built on first use: verl's agent-loop module is heavy
    if name == "SeededSingleTurnAgentLoop":
        cls = _agent_loop_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)
