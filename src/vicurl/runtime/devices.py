"""Where model work runs (sampling, scoring, per-rollout gradients), resolved once per job.

``auto`` is CUDA when present, else the CPU. On the CPU everything stays float32, so the demo and
the tests keep their exact numbers. On CUDA, models used only for sampling hold bf16 weights (as
the paper's vLLM rollouts do); models whose gradients or log-probabilities are compared keep
float32 (``vicurl.engines.rollout``).
"""

from __future__ import annotations

import re

import torch

NAMES = "auto, cpu, cuda or cuda:N"


def resolve(device: str | torch.device = "auto", key: str = "device") -> torch.device:
    """The device named by the setting ``key`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``).

    Errors name ``key``, so a typo in the config points at the setting to fix.
    """
    if isinstance(device, torch.device):
        return device
    name = str(device).strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name != "cpu" and not re.fullmatch(r"cuda(:\d+)?", name):
        raise ValueError(f"{key}: unknown device {device!r}; expected {NAMES}")
    resolved = torch.device(name)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{key}: {device!r} asked for but CUDA is not available here (use auto or cpu)")
    return resolved


def sampling_dtype(device: torch.device) -> torch.dtype:
    """Weights of a model that only samples: bf16 on CUDA (half the memory and KV cache, tensor
    cores); float32 on the CPU, where bf16 is slower and would change the demo's numbers."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32
