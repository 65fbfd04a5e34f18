"""math-verify in worker processes with a hard per-item timeout.

Why processes: math-verify's own timeouts use ``signal.alarm``, which fails outside the main thread,
and its ``TimeoutException`` is a ``BaseException`` (``except Exception`` misses it); sympy can spend
minutes in C code (``9^{9^{9^{9}}}``) where no signal gets through, so the only timeout that always
holds is killing the worker (the pool starts a fresh one). Why not ``multiprocessing``: its spawn /
forkserver methods re-import the parent's ``__main__``, for a Snakemake ``script:`` the rule's
script; ``python -m vicurl.grading._worker`` imports nothing of the caller. Protocol: one JSON
object a line, ``{"op": "equiv", "pred", "gold"}`` (``verify(parse(gold), parse(pred))``) or
``{"op": "float", "expr"}`` (a LaTeX value, for TheoremQA); a worker prints ``ready`` after its
imports, and an item's clock starts when a ready worker gets it. The safety
measures (LaTeX parsing only, ``parse_expr`` disabled, memory capped) are in ``_worker``; settings
(``configure``, ``VICURL_GRADER_WORKERS``, ``VICURL_GRADER_TIMEOUT``): docs/evaluation.md.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Sequence

DEFAULT_TIMEOUT = float(os.environ.get("VICURL_GRADER_TIMEOUT", 10))
DEFAULT_WORKERS = int(os.environ.get("VICURL_GRADER_WORKERS", min(4, os.cpu_count() or 1)))
STARTUP_TIMEOUT = 120.0  # seconds for a fresh worker to import sympy + math-verify (a loaded machine)


class _Worker:
    """One worker process and its half-read output."""

    def __init__(self, timeout: float):
        src = str(Path(__file__).resolve().parents[2])  # the folder holding the vicurl package
        env = dict(os.environ)
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(var, "1")  # one thread each; BLAS pools would also eat the capped address space
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vicurl.grading._worker", str(timeout)],
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
    """A fixed number of lazily started workers; each item gets at most ``timeout`` seconds."""

    def __init__(self, workers: int = DEFAULT_WORKERS, timeout: float = DEFAULT_TIMEOUT):
        self.n_workers = max(1, int(workers))
        self.timeout = float(timeout)
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self.stats = {"items": 0, "timeouts": 0, "crashes": 0, "started": 0}

    # ---------------------------------------------------------------- public

    def equiv(self, pairs: Sequence[tuple[str, str]], timeout: float | None = None) -> list[bool]:
        """math-verify's verdict for each (pred, gold); False on timeout, crash or parse failure."""
        res = self.run([{"op": "equiv", "pred": p, "gold": g} for p, g in pairs], timeout)
        return [bool(r.get("ok")) for r in res]

    def to_float(self, exprs: Sequence[str], timeout: float | None = None) -> list[float | None]:
        """Numeric value of each LaTeX expression (None when it has none)."""
        res = self.run([{"op": "float", "expr": e} for e in exprs], timeout)
        return [r.get("value") for r in res]

    def run(self, requests: Sequence[dict[str, Any]], timeout: float | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return self._run(list(requests), self.timeout if timeout is None else float(timeout))

    def start(self) -> None:
        """Start every worker and wait until each has imported math-verify, so that what follows is
        timed without a worker's start (seconds of imports on a loaded machine)."""
        with self._lock:
            self._run([], self.timeout, until_ready=True)

    def close(self) -> None:
        with self._lock:
            for w in self._workers:
                w.close()
            self._workers = []

    # ---------------------------------------------------------------- scheduling

    def _spawn(self) -> _Worker:
        self.stats["started"] += 1
        return _Worker(self.timeout)

    def _run(self, requests: list[dict[str, Any]], timeout: float, until_ready: bool = False) -> list[dict[str, Any]]:
        results: list[dict[str, Any] | None] = [None] * len(requests)
        if not requests and not until_ready:
            return []
        while len(self._workers) < (self.n_workers if until_ready else min(self.n_workers, len(requests))):
            self._workers.append(self._spawn())
        pending = deque(range(len(requests)))
        busy: dict[int, tuple[int, float]] = {}  # worker slot -> (request index, deadline)
        failed_starts = 0
        while pending or busy or (until_ready and not all(w.ready for w in self._workers)):
            now = time.monotonic()
            for slot, w in enumerate(self._workers):
                if pending and w.ready and slot not in busy:
                    i = pending.popleft()
                    try:
                        w.send(requests[i])
                        busy[slot] = (i, now + timeout)
                    except OSError:  # died while idle: replace it, retry the item
                        pending.appendleft(i)
                        self._replace(slot)
            waiting = [w for slot, w in enumerate(self._workers) if slot in busy or not w.ready]
            deadlines = [dl for _, dl in busy.values()]
            deadlines += [w.started + STARTUP_TIMEOUT for w in self._workers if not w.ready]
            wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else 0.0
            readable, _, _ = select.select([w.fd for w in waiting], [], [], wait)
            for slot, w in enumerate(list(self._workers)):
                if w.fd not in readable:
                    continue
                lines = w.read_lines()
                if lines is None:  # crashed (e.g. killed by the OS): the item scores False
                    self.stats["crashes"] += 1
                    if slot in busy:
                        i, _ = busy.pop(slot)
                        results[i] = {"ok": False, "error": "worker exited"}
                    elif not w.ready:
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
            for slot, (i, dl) in list(busy.items()):
                if now >= dl:  # stuck: kill it, score the item False, start a fresh worker
                    busy.pop(slot)
                    results[i] = {"ok": False, "error": "timeout"}
                    self.stats["timeouts"] += 1
                    self._replace(slot)
            for slot, w in enumerate(self._workers):
                if not w.ready and now >= w.started + STARTUP_TIMEOUT:
                    raise RuntimeError(f"a grading worker did not start within {STARTUP_TIMEOUT:.0f} s")
        self.stats["items"] += len(requests)
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


def configure(workers: int | None = None, timeout: float | None = None) -> SymbolicPool:
    """Replace the process-wide pool with one of the given size / per-item timeout."""
    global _POOL
    old = _POOL
    _POOL = SymbolicPool(workers or (old.n_workers if old else DEFAULT_WORKERS),
                         timeout or (old.timeout if old else DEFAULT_TIMEOUT))
    if old is not None:
        old.close()
    return _POOL


@atexit.register
def _close_pool() -> None:
    if _POOL is not None:
        _POOL.close()
