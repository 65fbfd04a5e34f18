"""The weight-sync socket of a verl run named after the run, so that two runs on one machine never share it.

verl 0.9.1 hands the trainer's weights to each colocated vLLM worker over a ZMQ socket named
``/tmp/rl-colocate-zmq-{Ray job id}-replica-{r}-rank-{local rank}.sock``: the sender in
``vllm_rollout.py`` (``ServerAdapter.__init__``), the receiver in ``utils.py``
(``vLLMColocateWorkerExtension._get_zmq_handle``). Every run starts a Ray cluster of its own, whose first
job id is always ``01000000``, so two runs on one node (two 1-GPU jobs that SLURM places together, the GPU
smoke config with ``--resources gpu=2``) bind the same path: one run's workers load the other's weights,
or wait forever. Both ends here add the run's token (``TOKEN``, which the launcher sets for every process
of the run) after ``rl-colocate-zmq-`` and move the socket from /tmp into the run's socket folder (vLLM's,
``VLLM_RPC_BASE_PATH``, else the run's temp folder): a killed run's socket file goes with its temp folder
instead of staying in the node's /tmp (`vicurl.runtime.vllm_env.short_sockets` keeps the path within 107 bytes).

verl imports this module in every process of a run (the launcher names it in ``VERL_USE_EXTERNAL_MODULES``),
vLLM's worker processes included; it patches verl's two modules when they are imported (both import vLLM,
which most of a run's processes never need). ``PATCHES`` names the lines this answers.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import os
import sys
import tempfile

TOKEN = "VICURL_RUN_TOKEN"  # set by the launcher (vicurl.engines.verl.launch.verl_environment)
NAME = "rl-colocate-zmq-"
PREFIX = f"/tmp/{NAME}"
SENDER = "verl.workers.rollout.vllm_rollout.vllm_rollout"
RECEIVER = "verl.workers.rollout.vllm_rollout.utils"

# (module, function, the line of verl 0.9.1 this answers)
PATCHES = (
    (SENDER, "ServerAdapter.__init__",
     'self.zmq_handle = f"ipc:///tmp/rl-colocate-zmq-{job_id}-replica-{self.replica_rank}-rank-{local_rank}.sock"'),
    (RECEIVER, "vLLMColocateWorkerExtension._get_zmq_handle",
     'return f"ipc:///tmp/rl-colocate-zmq-{job_id}-replica-{replica_rank}-rank-{trainer_rank}.sock"'),
)


def of_run(handle: str, token: str | None = None) -> str:
    """verl's socket address with the run's token after its prefix, in the run's socket folder (unchanged
    without a token: a process no launcher started)."""
    token = os.environ.get(TOKEN) if token is None else token
    if not token:
        return handle
    folder = os.environ.get("VLLM_RPC_BASE_PATH") or tempfile.gettempdir()
    return handle.replace(PREFIX, f"{folder}/{NAME}{token}-", 1)


def _patch_sender(module) -> None:
    cls = module.ServerAdapter
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.zmq_handle = of_run(self.zmq_handle)

    cls.__init__ = __init__


def _patch_receiver(module) -> None:
    cls = module.vLLMColocateWorkerExtension
    handle = cls._get_zmq_handle

    @functools.wraps(handle)
    def _get_zmq_handle(self) -> str:
        return of_run(handle(self))

    cls._get_zmq_handle = _get_zmq_handle


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``patches[name](module)`` right after module ``name`` is executed."""

    def __init__(self, patches):
        self.patches = patches

    def find_spec(self, name, path, target=None):
        patch = self.patches.get(name)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            patch(module)

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    patches = {SENDER: _patch_sender, RECEIVER: _patch_receiver}
    for name in list(patches):
        if name in sys.modules:  # imported before this module: patched now
            patches.pop(name)(sys.modules[name])
    if patches and not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(patches))


install()
