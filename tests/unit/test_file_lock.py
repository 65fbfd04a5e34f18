"""The lock around hub_commits.yaml (`vicurl.runtime.io.exclusive`) where the file system refuses ``flock`` (Lustre,
some NFS mounts: ENOLCK, EOPNOTSUPP): an exclusively created lock file instead, taken over when stale."""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import yaml

from vicurl.models.fetch import keep_commit, read_commits
from vicurl.runtime import io


@pytest.fixture
def no_flock(monkeypatch):
    def refuse(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", refuse)


def test_commits_are_kept_where_flock_is_refused(tmp_path, no_flock):
    path = tmp_path / "hub_commits.yaml"
    keep_commit(path, "org/a", None, "1" * 40)
    keep_commit(path, "org/b", "v2", "2" * 40)
    assert read_commits(path) == {"org/a": {"main": "1" * 40}, "org/b": {"v2": "2" * 40}}
    assert not (tmp_path / ".hub_commits.yaml.lock.held").exists()


def test_fetches_at_once_lose_no_commit_without_flock(tmp_path):
    """Three processes, flock refused in each, keep 20 commits each in one file: all 60 are there."""
    path = tmp_path / "hub_commits.yaml"
    script = textwrap.dedent(f"""
        import errno, fcntl, sys
        def refuse(fd, op):
            raise OSError(errno.EOPNOTSUPP, "Operation not supported")
        fcntl.flock = refuse
        from vicurl.models.fetch import keep_commit
        for i in range(20):
            keep_commit({str(path)!r}, f"org/m{{sys.argv[1]}}_{{i}}", None, sys.argv[1] * 40)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(k)]) for k in range(3)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0, 0]
    commits = yaml.safe_load(path.read_text())
    assert len(commits) == 60 and commits["org/m2_19"] == {"main": "2" * 40}


def test_a_stale_lock_file_is_taken_over_and_a_live_one_waited_for(tmp_path, no_flock, monkeypatch):
    lock = tmp_path / ".x.lock"
    held = tmp_path / ".x.lock.held"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    held.write_text(f"{socket.gethostname()} {dead.pid} {time.time():.3f}\n")  # a dead holder of this host
    with io.exclusive(lock):
        assert held.read_text().split()[1] == str(os.getpid())
    assert not held.exists()
    held.write_text(f"another-host 1 {time.time() - io.LOCK_STALE_SECONDS - 1:.3f}\n")  # too old
    with io.exclusive(lock):
        pass

    held.write_text(f"{socket.gethostname()} {os.getpid()} {time.time():.3f}\n")  # a live holder
    threading.Timer(0.5, held.unlink).start()
    t0 = time.monotonic()
    with io.exclusive(lock, poll=0.05):
        assert time.monotonic() - t0 >= 0.5
    monkeypatch.setattr(io, "LOCK_GUARD_SECONDS", 0.2)
    held.write_text(f"{socket.gethostname()} {os.getpid()} {time.time():.3f}\n")
    with pytest.raises(TimeoutError, match=r"\.x\.lock\.held: held by"):
        with io.exclusive(lock, poll=0.05):
            pass


def test_another_flock_error_is_raised(tmp_path, monkeypatch):
    def broken(fd, op):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(fcntl, "flock", broken)
    with pytest.raises(OSError, match="Input/output"):
        with io.exclusive(tmp_path / ".y.lock"):
            pass
