"""What a process that starts vLLM (the evaluation, prompt_stats, verl's rollouts) sets first.

* vLLM's processes spawned, not forked, where vLLM would fork: the offline evaluation's engine (the evaluation
  and prompt_stats jobs). There vLLM forks its engine core (and its workers) unless CUDA is already
  initialized. A process that did multi-threaded torch work on the CPU first (a dtype conversion, a model
  built or exported: anything that started torch's OpenMP threads) then forks a child whose first parallel
  op waits forever for threads that do not exist in it (GNU OpenMP after fork): the engine never starts,
  silently, until vLLM's start timeout, or forever. ``VLLM_WORKER_MULTIPROC_METHOD=spawn`` starts each child
  afresh, whatever its parent did, for the cost of importing vLLM there (docs/gpu.md, "How vLLM starts its
  processes"). Inside Ray actors (verl's rollouts) vLLM 0.24 always spawns, and exports ``RAY_ADDRESS`` to the
  spawned processes so that they find the run's Ray; with the variable already set it skips both, so the
  train job leaves it unset (``environment(ray=True)``). vLLM's CPU build always spawns: a CPU test shows
  the variable in the environment that starts the engine, not its effect.
* No kernel compiled at run time. FlashInfer's wheel ships no sampling kernels: vLLM's FlashInfer top-p /
  top-k sampler JIT-compiles them at its first use (requests with top_p < 1, and vLLM's start-up dummy
  run), which needs nvcc and a C++ compiler on the compute node, and many have neither.
  ``VLLM_USE_FLASHINFER_SAMPLER=0`` gives vLLM's own torch sampler (docs/gpu.md, "What a job compiles").
* Unix socket paths within 107 bytes. vLLM's ZMQ sockets are ``<VLLM_RPC_BASE_PATH>/<uuid4>`` (default: the
  temp folder; verl's weight-sync socket goes there too, `vicurl.engines.verl.patches.colocate_socket`) and Ray's ``<temp>/ray/session_.../sockets/plasma_store``; SLURM's per-job TMPDIRs are often
  long, and then vLLM or Ray fails to start (verl issue #1120). ``short_sockets`` gives both a short link.
* Nothing left in the temp folder. vLLM (its sockets, its file stores ``vllm_dist_*``), Ray (its session,
  logs included) and verl (its checkpoint locks ``ckpt_*.lock``) write to the temp folder and leave there
  what a killed process does not remove, thousands of files over a study on a node whose /tmp no job
  cleans. ``private_temp`` gives a job a folder of its own there (torch's compile cache stays outside it, for
  the node's next jobs), removed when the job ends, or stopped
  (SIGTERM, as SLURM's time limit, a preemption or scancel send it: ``prepare``'s handler ends the
  process's vLLM processes and removes the folder within seconds, inside SLURM's default 30 s KillWait).
* A temp folder that exists. sbatch carries the submitting shell's TMPDIR to the job (``--export=ALL``), and
  a login node's per-session folder does not exist on the compute node: ``temp_folder`` then takes the
  system's, saying so once in the job's log.
"""

from __future__ import annotations

import contextlib
import getpass
import logging
import os
import re
import secrets
import shutil
import signal
import tempfile
import threading

log = logging.getLogger(__name__)

DEFAULTS = {"VLLM_USE_FLASHINFER_SAMPLER": "0", "VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
RAY_CHOOSES = ("VLLM_WORKER_MULTIPROC_METHOD",)  # what vLLM sets itself inside a Ray actor, with RAY_ADDRESS

UNIX_PATH_MAX = 107
# the bytes that follow the folder in a socket's path: vLLM's "/<uuid4>" (37) or, longer, verl's weight-sync
# socket (`vicurl.engines.verl.patches.colocate_socket`: the run's 12-character token, replica and rank up to 999);
# Ray's, with a 7-digit pid
VLLM_SOCKET_TAIL = len("/rl-colocate-zmq-tttttttttttt-01000000-replica-000-rank-000.sock")
RAY_SOCKET_TAIL = len("/ray/session_2026-11-26_07-15-38_159736_1234567/sockets/plasma_store")


def environment(env: dict[str, str] | None = None, ray: bool = False) -> dict[str, str]:
    """``DEFAULTS`` less what ``env`` (default: this process's) already sets: a node with a CUDA toolkit may
    ask for FlashInfer's sampler explicitly. ``ray``: for processes whose vLLM runs in Ray actors, which leave
    ``RAY_CHOOSES`` to vLLM."""
    env = os.environ if env is None else env
    return {k: v for k, v in DEFAULTS.items() if k not in env and not (ray and k in RAY_CHOOSES)}


_warned: set[str] = set()


def temp_folder(env: dict[str, str]) -> str:
    """The temp folder of a process with environment ``env``: $TMPDIR where it is a folder this process may
    write in (absolute: a relative one would name another folder in the processes that start elsewhere), else
    the system's (a warning, once per folder)."""
    folder = env.get("TMPDIR")
    if folder and os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK):
        return os.path.abspath(folder)
    system = system_temp()
    if folder and folder not in _warned:
        _warned.add(folder)
        log.warning("TMPDIR=%s does not exist on this node or is not writable (sbatch passes on the submitting "
                    "shell's TMPDIR): using %s", folder, system)
    return system


def system_temp() -> str:
    """The system's temp folder, as Python chooses it when no variable names one."""
    for folder in ("/tmp", "/var/tmp", "/usr/tmp", os.getcwd()):
        if os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK):
            return folder
    raise RuntimeError("no writable temp folder: set TMPDIR to one")


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
    the files the libraries of one job write there; it is removed afterwards, whatever is in it. torch's compile
    cache stays where torch keeps it (``compile_cache``), for the node's next jobs."""
    env = os.environ if env is None else env
    folder = tempfile.mkdtemp(prefix="vicurl-", dir=temp_folder(env))
    try:
        yield {"TMPDIR": folder, **compile_cache(env)}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def compile_cache(env: dict[str, str]) -> dict[str, str]:
    """torch's compile cache kept out of a job's private temp folder, so that a kernel torch compiled for one job
    (verl's and vLLM's compiled functions) is not compiled again for each next one: TORCHINDUCTOR_CACHE_DIR where
    torch's default puts it for ``env`` (``<temp>/torchinductor_<user>``), unless ``env`` sets it. And no
    precompiled C++ headers: torch writes them into ``<temp>/torchinductor_<user>`` whatever the cache folder,
    and each process that loads a cached CPU kernel builds them there first (6-7 CPU-seconds, in the private
    folder again for every job), unless ``env`` asks for them."""
    out = {}
    if "TORCHINDUCTOR_CACHE_DIR" not in env:
        try:  # as torch names it (torch._inductor.runtime.cache_dir_utils.default_cache_dir)
            user = getpass.getuser()
        except (KeyError, OSError):  # a container's uid without a passwd entry
            user = f"uid_{os.getuid()}"
        user = re.sub(r'[\\/:*?"<>|]', "_", user)
        out["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(temp_folder(env), f"torchinductor_{user}")
    if "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS" not in env:
        out["TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS"] = "0"
    return out


_prepared: dict[str, str] = {}  # what ``prepare`` set in this process


def prepare() -> None:
    """Sets ``environment()``, a ``private_temp()`` (this process's temp folder from now on, and its children's)
    and ``short_sockets()`` in this process, before it starts a vLLM engine; when the process exits (after
    vLLM's own exit handlers, registered later) or is stopped by SIGTERM or SIGHUP (``stop_cleanly``), its
    descendants started since and still running are ended (orphans included), and the shared memory they left,
    the folder and the link removed. Called again while they are in place, it does nothing."""
    import atexit

    from vicurl.runtime import processes

    if _prepared and all(os.environ.get(k) == v for k, v in _prepared.items()):
        return
    set_now = environment()
    os.environ.update(set_now)
    stack = contextlib.ExitStack()  # closed newest first: the processes ended, then their files removed
    temp = stack.enter_context(private_temp())
    os.environ.update(temp)
    tempfile.tempdir = os.environ["TMPDIR"]  # gettempdir() keeps the folder it found first
    sockets = stack.enter_context(short_sockets())
    os.environ.update(sockets)
    # vLLM's message queues in /dev/shm: its shutdown SIGKILLs the engine core, which can leave them; and a
    # process of vLLM's that outlives its shutdown (a worker hung in a kernel ignores SIGTERM) is ended here
    shared, kin = processes.SharedMemoryNotes(), processes.Descendants()
    _kin.append(kin)
    stack.callback(shared.remove)
    stack.callback(processes.end, kin.note, grace=5, notes=shared)
    stack.callback(shared.watch(lambda: [p.pid for p in kin.note()]))  # stops watching, first
    owner = os.getpid()
    atexit.register(lambda: os.getpid() == owner and stack.close())  # not in a child forked meanwhile
    stop_cleanly(stack.close)
    _prepared.clear()
    _prepared.update({**set_now, **temp, **sockets})


_cleanups: list = []  # what ``stop_cleanly``'s handler calls, newest first
_kin: list = []  # every ``prepare``'s notes of the processes it saw started: the handler ends them at once


def stop_cleanly(cleanup) -> None:
    """On SIGTERM or SIGHUP (where the process has not set its own handler; only the main thread can set one):
    end this process's children (vLLM's engine core and workers: SIGTERM, 5 s, SIGKILL) and the orphans
    ``prepare`` noted, remove the shared memory they left, call ``cleanup`` (and those of earlier calls) and exit
    as stopped by the signal. Python's default for either signal ends the process at once, skipping every exit
    handler, and the children's sockets, files and shared memory stay on the node."""
    _cleanups.append(cleanup)
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, _on_stop)


def _on_stop(signum, frame):
    from vicurl.runtime import processes

    # one end for all, within SLURM's KillWait: the children, and the orphans of every prepare's notes
    processes.end(lambda: list({*processes.children(), *(p for kin in _kin for p in kin.note())}), grace=5)
    for cleanup in reversed(_cleanups):
        try:
            cleanup()
        except Exception:  # the next one still runs
            pass
    os._exit(128 + signum)
