"""math-verify in worker processes, each item under a budget of the worker's CPU time.

Why processes: math-verify's own timeouts use ``signal.alarm``, which fails outside the main thread
and counts the wall clock (a busy machine would grade a correct answer wrong), and sympy can spend
minutes in C code (``9^{9^{9^{9}}}``) where no Python signal gets through. A worker counts each
item's CPU time (``_worker.within_budget``), so a verdict depends on the pair and the software, not
on the machine's load, and the kernel ends a worker whose item overran it inside C code. Why not
``multiprocessing``: its spawn / forkserver methods re-import the parent's ``__main__``, for a
Snakemake ``script:`` the rule's script; ``python -m vicurl.grading._worker`` imports nothing of the
caller. Protocol: one JSON object a line, ``{"op": "equiv", "pred", "gold"}``
(``verify(parse(gold), parse(pred))``) or ``{"op": "float", "expr"}`` (a LaTeX value, for
TheoremQA); a worker prints ``ready`` after its imports. The wall clock is only a guard: a worker
that neither answers nor exits within ``guard_seconds`` (a hang, far above any budget) is replaced and
its item tried once more in a fresh worker before it counts as a timeout. The safety measures (LaTeX
parsing only, ``parse_expr`` disabled, memory capped) are in ``_worker``; docs/evaluation.md.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Sequence

from vicurl.grading.verdicts import TIMEOUT, Verdict

CPU_SECONDS = 10.0  # an item's budget of CPU time: part of the grader, as its rules are (grading.version)
DEFAULT_WORKERS = int(os.environ.get("VICURL_GRADER_WORKERS", min(4, os.cpu_count() or 1)))
STARTUP_GUARD = 600.0  # wall seconds for a fresh worker to import sympy + math-verify: a hang guard only


def guard_for(cpu_seconds: float) -> float:
    """Wall seconds a busy worker may go without an answer before it counts as hung: far above what its CPU
    budget takes on a machine with many processes a core."""
    return max(120.0, 30.0 * cpu_seconds)


class _Worker:
    """One worker process and its half-read output."""

    def __init__(self, cpu_seconds: float):
        src = str(Path(__file__).resolve().parents[2])  # the folder holding the vicurl package
        env = dict(os.environ)
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(var, "1")  # one thread each; BLAS pools would also eat the capped address space
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vicurl.grading._worker", repr(float(cpu_seconds))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True,
        )
        self.fd = self.proc.stdout.fileno()
        self.buf = b""
        self.ready = False
        self.started = time.monotonic()

    def send(self, request: dict[str, Any]) -> None:
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()

    def read_lines(self) -> list[str] | None:
        """Complete lines available now; None when the worker has exited."""
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            return None
        self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        return [ln.decode() for ln in lines]

    def ran_out_of_cpu(self) -> bool:
        """Whether the worker, having exited, was ended by its RLIMIT_CPU (an item's budget overrun in C code)."""
        return self.proc.wait() == -signal.SIGXCPU

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class SymbolicPool:
    """A fixed number of lazily started workers; each item gets ``cpu_seconds`` of its worker's CPU time."""

    def __init__(self, workers: int = DEFAULT_WORKERS, cpu_seconds: float = CPU_SECONDS,
                 guard_seconds: float | None = None):
        self.n_workers = max(1, int(workers))
        self.cpu_seconds = float(cpu_seconds)
        self.guard_seconds = guard_for(self.cpu_seconds) if guard_seconds is None else float(guard_seconds)
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self.stats = {"items": 0, "timeouts": 0, "crashes": 0, "hung": 0, "started": 0}

    # ---------------------------------------------------------------- public

    def equiv(self, pairs: Sequence[tuple[str, str]]) -> list[Verdict]:
        """math-verify's verdict for each (pred, gold): True, False (also a parse failure or a crash) or TIMEOUT."""
        res = self.run([{"op": "equiv", "pred": p, "gold": g} for p, g in pairs])
        return [TIMEOUT if r.get("timeout") else bool(r.get("ok")) for r in res]

    def to_float(self, exprs: Sequence[str]) -> list[float | None | Verdict]:
        """Numeric value of each LaTeX expression (None when it has none, TIMEOUT when its budget ran out)."""
        res = self.run([{"op": "float", "expr": e} for e in exprs])
        return [TIMEOUT if r.get("timeout") else r.get("value") for r in res]

    def run(self, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The workers' answers, ``{"timeout": True}`` for an item whose budget ran out."""
        with self._lock:
            return self._run(list(requests))

    def start(self) -> None:
        """Start every worker and wait until each has imported math-verify."""
        with self._lock:
            self._run([], until_ready=True)

    def close(self) -> None:
        with self._lock:
            for w in self._workers:
                w.close()
            self._workers = []

    # ---------------------------------------------------------------- scheduling

    def _spawn(self) -> _Worker:
        self.stats["started"] += 1
        return _Worker(self.cpu_seconds)

    def _run(self, requests: list[dict[str, Any]], until_ready: bool = False) -> list[dict[str, Any]]:
        results: list[dict[str, Any] | None] = [None] * len(requests)
        if not requests and not until_ready:
            return []
        while len(self._workers) < (self.n_workers if until_ready else min(self.n_workers, len(requests))):
            self._workers.append(self._spawn())
        pending = deque(range(len(requests)))
        busy: dict[int, tuple[int, float]] = {}  # worker slot -> (request index, wall-clock guard)
        retried: set[int] = set()  # items a dead or hung worker lost once: tried again in a fresh worker
        failed_starts = 0

        def lost(i: int, result: dict[str, Any]) -> None:
            if i in retried:
                results[i] = result
            else:
                retried.add(i)
                pending.appendleft(i)

        while pending or busy or (until_ready and not all(w.ready for w in self._workers)):
            now = time.monotonic()
            for slot, w in enumerate(self._workers):
                if pending and w.ready and slot not in busy:
                    i = pending.popleft()
                    try:
                        w.send(requests[i])
                        busy[slot] = (i, now + self.guard_seconds)
                    except OSError:  # died while idle: replace it, retry the item
                        pending.appendleft(i)
                        self._replace(slot)
            waiting = [w for slot, w in enumerate(self._workers) if slot in busy or not w.ready]
            deadlines = [dl for _, dl in busy.values()]
            deadlines += [w.started + STARTUP_GUARD for w in self._workers if not w.ready]
            wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else 0.0
            readable, _, _ = select.select([w.fd for w in waiting], [], [], wait)
            for slot, w in enumerate(list(self._workers)):
                if w.fd not in readable:
                    continue
                lines = w.read_lines()
                if lines is None:  # exited: its CPU limit (a timeout), else a crash (e.g. killed by the OS)
                    if slot in busy:
                        i, _ = busy.pop(slot)
                        if w.ran_out_of_cpu():
                            results[i] = {"timeout": True}
                        else:
                            self.stats["crashes"] += 1
                            lost(i, {"ok": False, "error": "worker exited"})
                    elif not w.ready:
                        self.stats["crashes"] += 1
                        failed_starts += 1
                        if failed_starts >= 3:
                            raise RuntimeError("grading workers fail to start: run "
                                               f"`{sys.executable} -m vicurl.grading._worker 5` to see why")
                    self._replace(slot)
                    continue
                for line in lines:
                    if line == "ready":
                        w.ready = True
                    elif slot in busy:
                        i, _ = busy.pop(slot)
                        results[i] = json.loads(line)
            now = time.monotonic()
            for slot, (i, guard) in list(busy.items()):
                if now >= guard:  # hung (no answer, no exit, far past any CPU budget): a fresh worker tries again
                    busy.pop(slot)
                    self.stats["hung"] += 1
                    lost(i, {"timeout": True, "error": "hung"})
                    self._replace(slot)
            for slot, w in enumerate(self._workers):
                if not w.ready and now >= w.started + STARTUP_GUARD:
                    raise RuntimeError(f"a grading worker did not start within {STARTUP_GUARD:.0f} s")
        self.stats["items"] += len(requests)
        self.stats["timeouts"] += sum(bool(r and r.get("timeout")) for r in results)
        return results  # type: ignore[return-value]

    def _replace(self, slot: int) -> None:
        self._workers[slot].kill()
        self._workers[slot] = self._spawn()


_POOL: SymbolicPool | None = None


def pool() -> SymbolicPool:
    """The process-wide pool (workers start on first use and are closed at exit)."""
    global _POOL
    if _POOL is None:
        _POOL = SymbolicPool()
    return _POOL


def cpu_workers(cap: int = 32) -> int:
    """Workers for a process whose CPUs are otherwise idle while it grades (verl's trainer: the GPUs
    wait for the rewards): one per CPU the process may run on, up to ``cap``; ``VICURL_GRADER_WORKERS``
    wins where set."""
    if os.environ.get("VICURL_GRADER_WORKERS"):
        return DEFAULT_WORKERS
    return max(1, min(int(cap), len(os.sched_getaffinity(0))))


def configure(workers: int | None = None, cpu_seconds: float | None = None,
              guard_seconds: float | None = None) -> SymbolicPool:
    """Replace the process-wide pool with one of the given size / per-item CPU budget / hang guard."""
    global _POOL
    old = _POOL
    _POOL = SymbolicPool(workers or (old.n_workers if old else DEFAULT_WORKERS),
                         cpu_seconds or (old.cpu_seconds if old else CPU_SECONDS), guard_seconds)
    if old is not None:
        old.close()
    return _POOL


@atexit.register
def _close_pool() -> None:
    if _POOL is not None:
        _POOL.close()
