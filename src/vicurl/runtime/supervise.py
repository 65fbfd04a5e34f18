"""The train job's guard over verl's loop: a run that cannot finish ends, all of it, in bounded time.

verl's loop runs in a process of its own, in a session of its own: Ray's processes (gcs_server,
raylet, the worker actors) and vLLM's (engine core, workers) are all of that session. ``run`` waits
for it and ends the whole session when

- no training step finishes within ``step_timeout`` seconds (the first step includes loading the
  models and starting vLLM): verl 0.9.1 waits forever when its rollout engine fails during a weight
  sync (the actor's sender blocks on a reply the failed receiver never sends);
- a vLLM engine process of the run ended while the loop still runs, and the loop did not end itself
  within ``engine_grace`` seconds;
- the job is told to stop (SIGTERM, SIGINT as Ctrl-C sends it, SIGHUP);
- the process that started the job ended (``exit_with_parent``: Snakemake killed; the job's outputs
  would never be recorded, and a rerun would start a second trainer on the same work folder).

The error names the rollout engine's log (Ray's log of the actor holding vLLM's engine) and quotes
its last errors. Ending is SIGTERM to every process of the session, then SIGKILL to what remains,
then the shared memory they left is removed (`vicurl.runtime.processes`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Sequence

from vicurl.runtime import processes

log = logging.getLogger(__name__)

ENGINE_PREFIX = "VLLM::"  # vLLM's process titles: VLLM::EngineCore, VLLM::Worker...
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class LoopFailed(RuntimeError):
    """verl's loop failed, stalled or lost its rollout engine; its processes are ended."""


class _Stop(BaseException):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def run(cmd: Sequence[str], *, progress: str | Path, step_timeout: float, env: dict[str, str] | None = None,
        exit_with_parent: bool = False, poll: float = 5.0, engine_grace: float = 60.0, end_grace: float = 10.0) -> None:
    """Run ``cmd`` (verl's loop) in a new session and wait for it; ``progress``: a file the loop touches
    each step. Raises `LoopFailed` (exit code, stall, lost engine, lost parent), KeyboardInterrupt on
    SIGINT and SystemExit(128 + signal) on SIGTERM or SIGHUP, each after ending every process of the
    run; a loop that ends well leaves none either. Ending takes ``end_grace`` seconds at most before SIGKILL and
    12 more at most after it (`vicurl.runtime.processes.end`), so that a stopped job is gone, its temp folder
    and shared memory removed, within SLURM's default KillWait (30 s)."""
    watch = _Watch(Path(progress), step_timeout, engine_grace, os.getppid() if exit_with_parent else None)
    # a signal while the loop starts is held until it has started (the default would end this process and
    # leave the loop running), then acted on as any other
    held: list[int] = []
    previous = _trap_signals(lambda signum, frame: held.append(signum))
    proc = subprocess.Popen(list(cmd), env=env, start_new_session=True)
    log.info("verl's loop started (pid %d); a step may take %g minutes (verl.step_timeout)", proc.pid, step_timeout / 60)
    shared = processes.SharedMemoryNotes()  # vLLM's queues: Ray's shutdown SIGKILLs engines, which leaves them
    stop_watching = shared.watch(lambda: [p.pid for p in run_processes(proc)])  # the processes end_session ends
    try:
        _trap_signals(_raise_stop)
        if held:
            raise _Stop(held[0])
        while True:
            try:
                rc = proc.wait(timeout=poll)
                break
            except subprocess.TimeoutExpired:
                pass
            reason = watch.check(proc.pid)
            if reason:
                raise LoopFailed(reason)
        if rc != 0:
            raise LoopFailed(f"verl's training loop exited with code {rc}; its error is above in this log"
                             + watch.engine_report(proc.pid))
        left = end_session(proc, end_grace, shared)  # what Ray's shutdown left running, if anything
        if left:
            log.warning("verl's loop ended and left %d processes running: ended them", left)
    except BaseException as e:
        _trap_signals(_log_signal)  # a signal while the processes are ended is only logged
        n = end_session(proc, end_grace, shared)
        if isinstance(e, LoopFailed):
            log.error("%s\nEnded verl's loop (%d processes).", e, n)
        if not isinstance(e, _Stop):
            raise
        log.error("%s: ended verl's loop (%d processes)", signal.Signals(e.signum).name, n)
        raise _stopped_by(e.signum) from None
    finally:
        stop_watching()
        _restore_signals(previous)


class _Watch:
    """What ``run`` checks every ``poll`` seconds while the loop runs."""

    def __init__(self, progress: Path, step_timeout: float, engine_grace: float, parent: int | None):
        self.progress, self.step_timeout, self.engine_grace, self.parent = progress, step_timeout, engine_grace, parent
        self.start = time.time()
        self.engines: dict[int, tuple[str, int]] = {}  # pid -> (title, parent pid), every engine process seen
        self.gone: dict[int, float] = {}  # engine pid -> when it was first missed

    def check(self, sid: int) -> str | None:
        """Why the loop must end now, or None."""
        now = time.time()
        if self.parent is not None and os.getppid() != self.parent:
            return f"the process that started this job (pid {self.parent}) ended"
        alive = set()
        for p in session_processes(sid):
            title = _title(p)
            if title.startswith(ENGINE_PREFIX):
                alive.add(p.pid)
                if p.pid not in self.engines:
                    self.engines[p.pid] = (title, _ppid(p))
                    log.info("vLLM engine process of the run: %s (pid %d)", title, p.pid)
        for pid, (title, _) in self.engines.items():
            if pid not in alive:
                when = self.gone.setdefault(pid, now)
                if now - when >= self.engine_grace:
                    return (f"vLLM's {title} (pid {pid}) ended {now - when:.0f} s ago and verl's loop is still "
                            f"running: the rollout engine is gone" + self.engine_report(sid))
        try:
            last = max(self.start, self.progress.stat().st_mtime)
        except FileNotFoundError:
            last = self.start
        if now - last > self.step_timeout:
            since = "it started" if last == self.start else f"its last step ({self.progress})"
            return (f"no training step finished in {self.step_timeout / 60:g} minutes since {since} "
                    f"(verl.step_timeout): verl's loop is stalled" + self.engine_report(sid))
        return None

    def engine_report(self, sid: int) -> str:
        """Where the rollout engine logged (Ray's log files of the actor that started vLLM's engine
        core) and its last error lines, as the end of an error message."""
        logs = _ray_logs_dir(sid)
        actors = {ppid for title, ppid in self.engines.values() if "EngineCore" in title}
        files = sorted(f for pid in actors if logs for f in logs.glob(f"worker-*-{pid}.*"))
        if not files:  # none found (the session already gone): the caller says where its copies are
            return f"\nRay's logs: {logs}" if logs else ""
        errors = [line for f in files for line in _error_lines(f)][-12:]
        return ("\nThe rollout engine's log: " + ", ".join(map(str, files))
                + ("\nIts last errors:\n  " + "\n  ".join(errors) if errors else ""))


def session_processes(sid: int):
    """The processes of session ``sid`` (psutil.Process), this one excluded."""
    import psutil

    out = []
    for p in psutil.process_iter():
        try:
            if p.pid != os.getpid() and os.getsid(p.pid) == sid:
                out.append(p)
        except (ProcessLookupError, PermissionError, psutil.Error):
            pass
    return out


def run_processes(proc: subprocess.Popen) -> list:
    """The processes of ``proc``'s session and of its process tree, ``proc`` included (psutil.Process)."""
    import psutil

    procs = {p.pid: p for p in session_processes(proc.pid)}
    procs.update({p.pid: p for p in processes.children(proc.pid)})
    try:
        procs.setdefault(proc.pid, psutil.Process(proc.pid))
    except psutil.NoSuchProcess:
        pass
    return list(procs.values())


def end_session(proc: subprocess.Popen, grace: float, shared: processes.SharedMemoryNotes | None = None) -> int:
    """SIGTERM to every process of ``proc``'s session and of its process tree, SIGKILL to those left
    after ``grace`` seconds, the shared memory they left removed, with what ``shared`` noted while they ran
    (`vicurl.runtime.processes.end`); ``proc`` reaped. Returns how many processes there were."""
    n = processes.end(lambda: run_processes(proc), grace, reap=proc.poll, notes=shared)
    try:
        proc.wait(timeout=3)  # SIGKILLed already: a moment, unless it is stuck in the kernel
    except subprocess.TimeoutExpired:
        pass
    return n


def keep_logs(temp: str | Path, dest: str | Path, tail: int = 4_000_000) -> dict[str, str]:
    """Copy the logs of every Ray session under the run's temp folder ``temp`` (``session_*/logs``: Ray's,
    its workers' and so vLLM's engine's, whose actor logs there) into ``dest/<session>``, each file's last
    ``tail`` bytes, before the temp folder is removed. Returns each session's logs folder -> its copy."""
    kept = {}
    for logs in sorted({p.resolve() for p in Path(temp).rglob("session_*/logs")}):  # session_latest: a link
        if not logs.is_dir():
            continue
        copy = Path(dest) / logs.parent.name
        for f in logs.rglob("*"):
            if f.is_file() and not f.is_symlink():
                target = copy / f.relative_to(logs)
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(f, "rb") as src, open(target, "wb") as out:
                    src.seek(max(0, f.stat().st_size - tail))
                    out.write(src.read())
        kept[str(logs)] = str(copy)
    return kept


def _title(p) -> str:
    try:
        cmd = p.cmdline()
        return cmd[0] if cmd else p.name()
    except Exception:
        return ""


def _ppid(p) -> int:
    try:
        return p.ppid()
    except Exception:
        return -1


def _ray_logs_dir(sid: int) -> Path | None:
    """Ray's session log folder, from the command line of a Ray process of the session."""
    for p in session_processes(sid):
        m = re.search(r"(/\S*/session_[^/\s]+)/", " ".join(_cmdline(p)))
        if m and Path(m.group(1), "logs").is_dir():
            return Path(m.group(1), "logs").resolve()  # not through the launcher's short link to it
    return None


def _cmdline(p) -> list[str]:
    try:
        return p.cmdline()
    except Exception:
        return []


def _error_lines(path: Path, tail: int = 2_000_000) -> list[str]:
    """The lines of a log's last ``tail`` bytes that report an error."""
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - tail))
        text = f.read().decode(errors="replace")
    return [line.strip() for line in text.splitlines() if re.search(r"\bERROR\b|Error\b|Exception\b", line)]


@contextlib.contextmanager
def stops_unwind():
    """In this block SIGTERM and SIGHUP raise SystemExit(128 + signal) and SIGINT KeyboardInterrupt, so that every
    ``finally`` and ``with`` around the caller's work runs (a job's temp folder removed): Python's default for
    SIGTERM and SIGHUP ends the process at once. `run` sets its own handlers inside it."""
    previous = _trap_signals(_unwind)
    try:
        yield
    finally:
        _restore_signals(previous)


def _unwind(signum, frame):
    raise _stopped_by(signum)


def _stopped_by(signum: int) -> BaseException:
    """What a process stopped by ``signum`` raises: KeyboardInterrupt for SIGINT, as Python's default does, else
    SystemExit(128 + signal), the exit code of a process a signal ended."""
    return KeyboardInterrupt() if signum == signal.SIGINT else SystemExit(128 + signum)


def _raise_stop(signum, frame):
    raise _Stop(signum)


def _log_signal(signum, frame):
    log.warning("%s: already ending verl's loop", signal.Signals(signum).name)


def _trap_signals(handler) -> dict[int, object]:
    """``handler`` for SIGTERM, SIGINT and SIGHUP; returns the handlers it replaced. Only the main
    thread can set them: elsewhere nothing is trapped."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.signal(s, handler) for s in STOP_SIGNALS}


def _restore_signals(previous: dict[int, object]) -> None:
    for s, handler in previous.items():
        signal.signal(s, handler)
