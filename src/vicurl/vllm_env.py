"""What a process that starts vLLM (the evaluation, prompt_stats, verl's rollouts) sets first.

* No kernel compiled at run time. FlashInfer's wheel ships no sampling kernels: vLLM's FlashInfer top-p /
  top-k sampler JIT-compiles them at its first use (requests with top_p < 1, and vLLM's start-up dummy
  run), which needs nvcc and a C++ compiler on the compute node, and many have neither.
  ``VLLM_USE_FLASHINFER_SAMPLER=0`` gives vLLM's own torch sampler (docs/verl.md, "What a job compiles").
* Unix socket paths within 107 bytes. vLLM's ZMQ sockets are ``<VLLM_RPC_BASE_PATH>/<uuid4>`` (default: the
  temp folder) and Ray's ``<temp>/ray/session_.../sockets/plasma_store``; SLURM's per-job TMPDIRs are often
  long, and then vLLM or Ray fails to start (verl issue #1120). ``short_sockets`` gives both a short link.
* Nothing left in the temp folder. vLLM (its sockets, its file stores ``vllm_dist_*``), Ray (its session,
  logs included) and verl (its checkpoint locks ``ckpt_*.lock``) write to the temp folder and leave there
  what a killed process does not remove, thousands of files over a study on a node whose /tmp no job
  cleans. ``private_temp`` gives a job a folder of its own there, removed when the job ends.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile

NO_JIT = {"VLLM_USE_FLASHINFER_SAMPLER": "0"}

UNIX_PATH_MAX = 107
# the bytes that follow the folder in a socket's path: vLLM's "/<uuid4>"; Ray's, with a 7-digit pid
VLLM_SOCKET_TAIL = len("/") + 36
RAY_SOCKET_TAIL = len("/ray/session_2026-11-26_07-15-38_159736_1234567/sockets/plasma_store")


def environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """``NO_JIT`` less what ``env`` (default: this process's) already sets: a node with a CUDA toolkit may
    ask for FlashInfer's sampler explicitly."""
    env = os.environ if env is None else env
    return {k: v for k, v in NO_JIT.items() if k not in env}


def temp_folder(env: dict[str, str]) -> str:
    """The temp folder of a process with environment ``env``: $TMPDIR, else the system's."""
    return env.get("TMPDIR") or tempfile.gettempdir()


@contextlib.contextmanager
def short_sockets(env: dict[str, str] | None = None, ray: bool = False):
    """Yields the variables that keep vLLM's (and with ``ray``, Ray's) socket paths within 107 bytes:
    nothing where ``env`` (default: this process's) sets them or its temp folder ($TMPDIR, else the
    system's) is short enough; else VLLM_RPC_BASE_PATH (and RAY_TMPDIR), a short link in /tmp to a fresh
    folder in the temp folder, removed afterwards (the files stay where they belong)."""
    env = os.environ if env is None else env
    temp = temp_folder(env)
    tails = {"VLLM_RPC_BASE_PATH": VLLM_SOCKET_TAIL, **({"RAY_TMPDIR": RAY_SOCKET_TAIL} if ray else {})}
    need = [k for k, tail in tails.items() if k not in env and len(temp) + tail > UNIX_PATH_MAX]
    if not need:
        yield {}
        return
    target = tempfile.mkdtemp(prefix="sockets-", dir=temp)
    while True:
        link = f"/tmp/vicurl-{secrets.token_hex(4)}"
        try:
            os.symlink(target, link)
            break
        except FileExistsError:
            continue
    try:
        yield dict.fromkeys(need, link)
    finally:
        os.unlink(link)


@contextlib.contextmanager
def private_temp(env: dict[str, str] | None = None):
    """Yields ``{"TMPDIR": folder}``, a fresh folder in the temp folder of ``env`` (default: this process's) for
    the files the libraries of one job write there; it is removed afterwards, whatever is in it."""
    env = os.environ if env is None else env
    folder = tempfile.mkdtemp(prefix="vicurl-", dir=temp_folder(env))
    try:
        yield {"TMPDIR": folder}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def prepare() -> None:
    """Sets ``environment()``, a ``private_temp()`` (this process's temp folder from now on, and its children's)
    and ``short_sockets()`` in this process, before it starts a vLLM engine; the folder and the link are
    removed when the process exits (after vLLM's own exit handlers, registered later)."""
    import atexit

    os.environ.update(environment())
    stack = contextlib.ExitStack()
    os.environ.update(stack.enter_context(private_temp()))
    tempfile.tempdir = os.environ["TMPDIR"]  # gettempdir() keeps the folder it found first
    os.environ.update(stack.enter_context(short_sockets()))
    atexit.register(stack.close)
