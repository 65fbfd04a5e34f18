"""`vicurl.processes`' removal of the shared memory a job's processes leave in /dev/shm (the node's memory)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from vicurl import processes

# a process that makes a POSIX shared memory segment as vLLM's engine makes its message queues, says its name
# and waits; SIGKILLed with its process group (its resource tracker too), nothing unlinks the segment
MAKER = ("import sys, time\n"
         "from multiprocessing import shared_memory\n"
         "shm = shared_memory.SharedMemory(create=True, size=1 << 16)\n"
         "print(shm.name, flush=True)\n"
         "time.sleep(600)\n")


def make_segment() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", MAKER], stdout=subprocess.PIPE, text=True, process_group=0)
    return proc, proc.stdout.readline().strip()


def kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_a_segment_whose_maker_was_killed_before_any_note_is_removed():
    """An engine stopped within seconds of its start: its queue was made after the notes began and never noted
    (the notes are taken every 2 s); no process maps it, so it is the job's and goes. A segment made before the
    notes began and one a live process maps stay."""
    before, old = make_segment()
    kill(before)  # left before the job began: not the job's to remove
    time.sleep(0.05)  # the file's time before the notes' start, whatever the clock's resolution
    notes = processes.SharedMemoryNotes()
    killed, left = make_segment()
    kill(killed)
    live, mapped = make_segment()
    try:
        assert notes.files == set()  # nothing noted
        removed = notes.remove()  # (another process's leftovers made meanwhile would go too: nobody's either)
        assert f"/dev/shm/{left}" in removed and not os.path.exists(f"/dev/shm/{left}"), removed
        assert os.path.exists(f"/dev/shm/{old}") and os.path.exists(f"/dev/shm/{mapped}")
    finally:
        kill(live)
        for name in (old, left, mapped):
            if os.path.exists(f"/dev/shm/{name}"):
                os.unlink(f"/dev/shm/{name}")
