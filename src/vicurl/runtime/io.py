"""Crash-safe file writing: outputs appear whole or not at all; a lock several processes of a study share."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary sibling path; rename it onto ``path`` only if the block succeeds.

    Works for files and directories. The rename is atomic on POSIX within one filesystem,
    so a killed job leaves either the old output or none, never half of a new one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    target = tmp / path.name
    try:
        yield target
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        os.replace(target, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def link_or_copy(src: str | Path, dst: str | Path) -> None:
    """A hard link of file ``src`` at ``dst`` (no copy of big checkpoints), a copy across file systems."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def write_json(path: str | Path, obj: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


LOCK_STALE_SECONDS = 300.0  # a held lock file older than this is a dead holder's (the sections it guards take ms)
LOCK_GUARD_SECONDS = 1800.0  # waiting longer for a lock is a hang: an error naming the lock file
_NO_FLOCK = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)  # Lustre, some NFS mounts


@contextlib.contextmanager
def exclusive(lock: str | Path, poll: float = 0.2) -> Iterator[None]:
    """Hold ``lock`` exclusively for the block, across processes and hosts: ``fcntl.flock`` where the file
    system takes it; where it refuses (Lustre and some NFS mounts: ENOLCK, EOPNOTSUPP), a lock file created
    exclusively beside it (``<lock>.held``, holding host, pid and time), removed at the end. A held file is
    stale, and taken over, once its holder is a dead process of this host or it is older than
    ``LOCK_STALE_SECONDS``."""
    import fcntl

    lock = Path(lock)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX)
        except OSError as e:
            if e.errno not in _NO_FLOCK:
                raise
        else:
            yield
            return
    held = lock.with_name(lock.name + ".held")
    start = time.monotonic()
    while True:
        try:
            fd = os.open(held, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if _stale(held):
                with contextlib.suppress(FileNotFoundError):
                    held.unlink()
                continue
            if time.monotonic() - start > LOCK_GUARD_SECONDS:
                raise TimeoutError(f"{held}: held by {held.read_text().strip()!r} for more than "
                                   f"{LOCK_GUARD_SECONDS:.0f} s; remove it if that process has ended") from None
            time.sleep(poll)
            continue
        with os.fdopen(fd, "w") as f:
            f.write(f"{socket.gethostname()} {os.getpid()} {time.time():.3f}\n")
        try:
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                held.unlink()
        return


def _stale(held: Path) -> bool:
    try:
        host, pid, since = held.read_text().split()
        age = time.time() - float(since)
    except (OSError, ValueError):  # being written, or gone: look again
        return False
    if host == socket.gethostname() and not _alive(int(pid)):
        return True
    return age > LOCK_STALE_SECONDS


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
