"""config/gpu_smoke.yaml without the Hub: its whole DAG on stand-ins (`vicurl.rehearsal.stand_ins`: a
tiny model in Qwen2.5-Instruct's chat format, made-up DeepScaleR and AMC 2023 rows), on a GPU with
the GPU path's own settings, or on a CPU with vLLM's CPU build. What differs between the two is
config/gpu_smoke_cpu.yaml and `vicurl.rehearsal.cpu` (the CPU's settings and environment), nothing
else (docs/rehearsal.md).

    python -m vicurl.rehearsal gpu [SNAKEMAKE ARGS]   # make rehearse-gpu -> results/gpu_smoke_offline/
    python -m vicurl.rehearsal cpu [SNAKEMAKE ARGS]   # make rehearse     -> results/gpu_smoke_cpu/
    python -m vicurl.rehearsal stand-ins DIR          # the stand-in model and data files

``stand_ins``  the stand-in model and data files
``cpu``        the GPU path on a CPU: the settings and environment vLLM's CPU build and verl need there
               (``python -m vicurl.rehearsal.cpu env | alias-vllm``)
``verl_cpu``   verl on a CPU: a platform named ``cpu`` and the patches of verl internals that assume a GPU
``vllm_cpu``   vLLM's CPU build under verl's weight sync: each linear layer computes with its own weight
``__main__``   ``python -m vicurl.rehearsal``
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
STAND_INS = Path("results") / "stand_ins"  # where config/gpu_smoke_offline.yaml reads them
CONFIGS = {  # laid over one another in this order
    "gpu": ("gpu_smoke.yaml", "gpu_smoke_offline.yaml"),
    "cpu": ("gpu_smoke.yaml", "gpu_smoke_offline.yaml", "gpu_smoke_cpu.yaml"),
}
DEFAULT_ARGS = ("all", "--cores", "all")


def config_files(device: str) -> list[Path]:
    if device not in CONFIGS:
        raise ValueError(f"device must be one of {sorted(CONFIGS)}, got {device!r}")
    return [REPO / "config" / name for name in CONFIGS[device]]


def command(device: str, workdir: str | Path = ".", args=DEFAULT_ARGS) -> tuple[list[str], dict[str, str]]:
    """Snakemake's command and environment for the rehearsal on ``device`` in ``workdir`` (results under
    ``workdir/results/<scenario>``), one GPU job at a time as on a one-GPU node; the stand-ins are
    written first where missing. ``args``: targets and further Snakemake options. The command ends
    in its config files."""
    configs = config_files(device)
    workdir = Path(workdir)
    if not (workdir / STAND_INS).exists():
        from vicurl.rehearsal import stand_ins

        stand_ins.write(workdir / STAND_INS)
    env = dict(os.environ)
    if device == "cpu":
        from vicurl.rehearsal.cpu import environment

        env.update(environment())
    cmd = [sys.executable, "-m", "snakemake", *args, "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--resources", "gpu=1", "--configfile", *map(str, configs)]
    return cmd, env


def rehearse(device: str, workdir: str | Path = ".", args=DEFAULT_ARGS, **run_kw) -> subprocess.CompletedProcess:
    """`command` run to its end (``run_kw``: more of ``subprocess.run``'s arguments)."""
    cmd, env = command(device, workdir, args)
    return subprocess.run(cmd, env=env, **run_kw)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["gpu"], ["cpu"]):
        sys.exit(rehearse(args[0], ".", args[1:] or DEFAULT_ARGS).returncode)
    elif len(args) == 2 and args[0] == "stand-ins":
        from vicurl.rehearsal import stand_ins

        for what, path in stand_ins.write(args[1]).items():
            print(f"{what}: {path}")
    else:
        raise SystemExit("usage: python -m vicurl.rehearsal gpu|cpu [SNAKEMAKE ARGS] | stand-ins DIR")
