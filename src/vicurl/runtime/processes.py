"""Ending a job's processes so that they leave nothing on the node.

A job that starts vLLM or Ray has child processes (vLLM's engine core and workers, Ray's daemons and
actors). Ending them is SIGTERM, a grace period, then SIGKILL for what remains. What a killed process
does not remove stays on the node: vLLM's message queues are POSIX shared memory (``/dev/shm/psm_*``,
170-250 MB each, nominal), which their creator unlinks at exit or its resource tracker does once the
creator is gone, and a SIGKILL to every process ends the tracker too (it ignores SIGTERM); vLLM's and Ray's own
shutdowns SIGKILL engine processes too. /dev/shm is memory that outlives the job. So ``end`` spares the
resource trackers its signals (each cleans up after its processes once they are gone, then exits, and is killed
only if it lingers), and ``SharedMemoryNotes`` notes the shared memory a job's processes map while they run and
removes what no process maps any more once they are gone.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

log = logging.getLogger(__name__)

SHM = "/dev/shm/"


class SharedMemoryNotes:
    """The POSIX shared memory some processes mapped, noted while they run; ``remove`` unlinks what is left of
    it once no process maps it."""

    def __init__(self):
        self.files: set[int] = set()  # their inodes (`shared_memory_of`)
        self._lock = threading.RLock()  # a stop signal's handler may note while its thread holds it

    def note(self, pids) -> None:
        found = shared_memory_of(pids)
        with self._lock:
            self.files |= found

    def watch(self, pids, every: float = 2.0):
        """Note what the processes ``pids()`` names map, every ``every`` seconds, in a thread of its own, until
        the function returned is called (it returns once the thread has ended)."""
        stop = threading.Event()

        def loop():
            while not stop.is_set():
                try:
                    self.note(pids())
                except Exception:  # a process list read while processes come and go
                    pass
                stop.wait(every)

        thread = threading.Thread(target=loop, name="vicurl-shared-memory-notes", daemon=True)
        thread.start()

        def end() -> None:
            stop.set()
            thread.join(timeout=10)

        return end

    def remove(self) -> list[str]:
        with self._lock:
            files = set(self.files)
        return remove_shared_memory(files)


def end(members, grace: float, reap=None, notes: SharedMemoryNotes | None = None) -> int:
    """SIGTERM to every process ``members()`` returns (psutil.Process objects, called again before each
    signal: processes started meanwhile are included), SIGKILL to those left after ``grace`` seconds, then
    the shared memory they mapped and left removed (with what ``notes`` noted earlier). Resource trackers are
    waited for instead, and killed only if they linger; this process's own is left to clean up after it.
    ``reap``: called while waiting (a Popen's ``poll``). Returns how many processes there were."""
    import psutil

    seen: set[int] = set()
    notes = notes or SharedMemoryNotes()
    own = own_tracker()  # it cannot exit before this process does, and cleans up after it then: left alone
    trackers = lambda: [p for p in members() if p.pid != own and _is_tracker(p)]  # noqa: E731
    others = lambda: [p for p in members() if not _is_tracker(p)]  # noqa: E731
    # at most grace + 12 seconds: a job stopped by SLURM (grace 10) is gone within its default KillWait (30 s)
    for group, signals in ((others, ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0))),
                           (trackers, ((None, 5.0), (signal.SIGKILL, 2.0)))):  # the trackers clean up and exit
        for sig, wait in signals:
            procs = group()
            seen.update(p.pid for p in procs)
            notes.note(p.pid for p in procs)
            for p in procs if sig is not None else ():
                try:
                    p.send_signal(sig)
                except psutil.Error:
                    pass
            deadline = time.time() + wait
            while time.time() < deadline and any(_running(p) for p in group()):
                if reap is not None:
                    reap()
                time.sleep(0.2)
    notes.remove()
    return len(seen)


def own_tracker() -> int | None:
    """The pid of this process's own resource tracker, where it has started one."""
    from multiprocessing import resource_tracker

    return getattr(resource_tracker._resource_tracker, "_pid", None)


def _is_tracker(p) -> bool:
    """Whether ``p`` is a multiprocessing resource tracker (it unlinks its processes' leftovers once they end)."""
    try:
        return any(part.startswith("from multiprocessing.resource_tracker import main") for part in p.cmdline())
    except Exception:
        return False


def children(pid: int | None = None) -> list:
    """Every descendant of process ``pid`` (default: this one), as psutil.Process objects."""
    import psutil

    try:
        return psutil.Process(pid or os.getpid()).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


class Descendants:
    """The descendants this process starts from now on, noted as they come (``note``, called now and then while
    they run and once more at the end), so that those still running at the end are found, orphans included: a
    process whose parent exited belongs to init's tree, not to this one's (a vLLM worker hung in a kernel, left
    when its engine core was ended, keeps its GPU memory and its message queues). Processes this one had
    started before are not its business (a grading pool, another engine's). psutil.Process objects: a reused pid
    is not taken for one of them."""

    def __init__(self):
        # by identity, not by start time: psutil's start times count from a boot time rounded to the second
        self._before = set(children())
        self._seen: set = set()
        self._lock = threading.RLock()  # a stop signal's handler may note while its thread holds it

    def note(self) -> list:
        """Note the descendants started since and running now; returns every one noted that still runs
        (psutil.Process); those gone are forgotten, so that the notes stay as small as what runs."""
        found = [p for p in children() if p not in self._before]
        with self._lock:
            self._seen = {p for p in self._seen.union(found) if _running(p)}
            return list(self._seen)


def _running(p) -> bool:
    import psutil

    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def shared_memory_of(pids) -> set[int]:
    """The POSIX shared memory files (in ``/dev/shm``) the processes ``pids`` have mapped, by inode: a
    semaphore is mapped under the name it was created with (glibc's ``sem_open`` makes ``sem.XXXXXX``, links it
    to ``sem.<name>`` and unlinks the first), so the maps name a file that is gone."""
    found = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    fields = line.rstrip("\n").split(maxsplit=5)
                    if len(fields) == 6 and fields[5].startswith(SHM):
                        found.add(int(fields[4]))
        except OSError:  # gone, or not ours to read
            pass
    return found


def shared_memory_files(inodes) -> dict[str, int]:
    """The files of /dev/shm whose inodes are among ``inodes`` (from `shared_memory_of`): path -> inode."""
    inodes = set(inodes)
    found = {}
    for name in os.listdir(SHM) if inodes else ():
        try:
            inode = os.stat(SHM + name, follow_symlinks=False).st_ino
        except OSError:  # removed meanwhile
            continue
        if inode in inodes:
            found[SHM + name] = inode
    return found


def remove_shared_memory(files) -> list[str]:
    """Unlink the files of /dev/shm whose inodes are among ``files`` (from `shared_memory_of`, noted while their
    processes ran) and that no process maps any more; returns the paths removed."""
    left = shared_memory_files(files)
    if not left:
        return []
    in_use = shared_memory_of(int(d) for d in os.listdir("/proc") if d.isdigit())
    removed = []
    for path in sorted(p for p, inode in left.items() if inode not in in_use):
        try:
            os.unlink(path)
            removed.append(path)
        except OSError:
            pass
    if removed:
        log.info("removed %d shared memory files the ended processes left: %s", len(removed), " ".join(removed))
    return removed
