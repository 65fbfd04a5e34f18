"""The one switch between the two generators (config ``eval.engine``), for every rule that samples
from a saved model: ``generate`` / ``generate_checkpoint`` and ``prompt_stats``.

transformers  ``vicurl.evaluation.generate`` (the CPU demo; one GPU when present, ``device``)
vllm          ``vicurl.evaluation.vllm_generate`` (GPU clusters; envs/gpu.yaml under --sdm conda)

Both return the same records (``vicurl.evaluation.records``). The generators are imported only
when chosen: vLLM exists only in the GPU environment.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from vicurl.config.settings import SamplingSettings

ENGINES = ("transformers", "vllm")


def generate_sets_with(
    engine: str,
    model_dir: str,
    problem_sets: dict[str, pd.DataFrame],
    sampling: SamplingSettings,
    *,
    batch_size: int = 64,
    threads: int = 1,
    device: str = "auto",
    vllm_args: dict[str, Any] | None = None,
) -> dict[str, pd.DataFrame]:
    """The records of each problem set, by name, from ``engine``, both generators sampling with
    ``sampling``; ``batch_size``, ``threads`` and ``device`` are the transformers generator's,
    ``vllm_args`` (``eval.vllm``) ``vllm.LLM``'s."""
    if engine == "vllm":
        from vicurl.evaluation.vllm_generate import generate_sets_vllm

        return generate_sets_vllm(model_dir, problem_sets, sampling, engine_args=vllm_args)
    if engine == "transformers":
        from vicurl.evaluation.generate import generate_sets

        return generate_sets(model_dir, problem_sets, sampling, batch_size=batch_size, threads=threads, device=device)
    raise ValueError(f"eval.engine must be one of {ENGINES}, got {engine!r}")
