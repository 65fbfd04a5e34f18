"""The train job's guard over verl's loop (`vicurl.runtime.supervise`) on real processes shaped like
a verl run's: a loop process whose helpers sit in process groups of their own and ignore SIGTERM (as
Ray's workers do), and a process titled as vLLM's engine core. verl's own loop under the guard, a
broken rollout engine and an interrupted run, are in tests/gpu_path/test_verl_fit.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from vicurl.runtime import supervise

# The loop: a helper in a process group of its own that ignores SIGTERM, optionally an "engine"
# (a process titled VLLM::EngineCore whose parent, the "actor", logs to a Ray-like session folder),
# then `touches` progress every `every` seconds, `steps` times, then sleeps `tail` seconds and exits `rc`.
LOOP = textwrap.dedent("""
    import json, os, signal, subprocess, sys, time
    a = json.loads(sys.argv[1])
    helper = subprocess.Popen([sys.executable, "-c",
        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
        "if sys.argv[1]:\\n"  # shared memory, as vLLM's engine makes its message queues (a resource tracker's),
        "    import multiprocessing\\n"  # and a named semaphore, as vLLM's worker makes one (spawned: named)
        "    from multiprocessing import shared_memory\\n"
        "    shm = shared_memory.SharedMemory(create=True, size=1 << 20)\\n"
        "    lock = multiprocessing.get_context('spawn').Lock()\\n"
        "    open(sys.argv[1], 'w').write(f'{shm.name} sem.{lock._semlock.name[1:]}')\\n"
        "if sys.argv[2]:\\n"  # shared memory it no longer maps, left to its resource tracker to unlink
        "    from multiprocessing import shared_memory\\n"
        "    left = shared_memory.SharedMemory(create=True, size=1 << 20)\\n"
        "    left.close()\\n"
        "    open(sys.argv[2], 'w').write(left.name)\\n"
        "time.sleep(600)", a.get("shm", ""), a.get("unmapped", "")], process_group=0)
    pids = {"loop": os.getpid(), "helper": helper.pid}
    if a.get("kill_helper_group_after"):  # as vLLM's shutdown ends an engine: SIGKILL, its resource tracker with it
        time.sleep(a["kill_helper_group_after"])
        os.killpg(helper.pid, signal.SIGKILL)
    if a.get("engine"):
        logs = a["engine"]  # .../session_x/logs, named on the loop's command line as Ray's processes name theirs
        with open(os.path.join(logs, f"worker-abc-01000000-{os.getpid()}.out"), "w") as f:
            f.write("INFO starting\\nERROR 11-26 [core.py:1] RuntimeError: Worker failed with error 'boom'\\n")
        engine = subprocess.Popen(["bash", "-c", "exec -a VLLM::EngineCore sleep 600"])
        pids["engine"] = engine.pid
    with open(a["pids"], "w") as f:
        json.dump(pids, f)
    if a.get("kill_engine_after"):
        time.sleep(a["kill_engine_after"])
        engine.kill()
        engine.wait()
    for _ in range(a.get("steps", 0)):
        time.sleep(a["every"])
        with open(a["progress"], "a") as f:
            f.write("{}\\n")
    time.sleep(a.get("tail", 600))
    sys.exit(a.get("rc", 0))
""")


def loop_cmd(tmp_path: Path, **args) -> list[str]:
    args = {"pids": str(tmp_path / "pids.json"), "progress": str(tmp_path / "metrics.jsonl"), **args}
    return [sys.executable, "-c", LOOP, json.dumps(args)]


def pids(tmp_path: Path, timeout: float = 30) -> dict[str, int]:
    path = tmp_path / "pids.json"
    deadline = time.time() + timeout
    while time.time() < deadline:
        if path.exists() and path.read_text():
            return json.loads(path.read_text())
        time.sleep(0.1)
    raise AssertionError("the loop wrote no pids")


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def assert_all_ended(tmp_path: Path) -> None:
    left = {k: p for k, p in pids(tmp_path).items() if alive(p)}
    assert not left, left


def test_a_loop_that_ends_well_returns_and_a_failing_one_raises_with_its_code(tmp_path):
    """Either way no process of the loop's session is left: its helper (which outlives the loop, as a
    process Ray's shutdown missed would) is ended too."""
    supervise.run(loop_cmd(tmp_path, tail=0), progress=tmp_path / "metrics.jsonl", step_timeout=60, poll=0.2,
                  end_grace=1)
    assert_all_ended(tmp_path)
    with pytest.raises(supervise.LoopFailed, match="exited with code 3"):
        supervise.run(loop_cmd(tmp_path, tail=0, rc=3), progress=tmp_path / "metrics.jsonl", step_timeout=60, poll=0.2)
    assert_all_ended(tmp_path)  # the helper too: it was in the loop's session


def test_a_stalled_loop_ends_with_every_process_of_its_session(tmp_path):
    """No step within step_timeout: the error says so, and the loop and its helper (own process group,
    deaf to SIGTERM: SIGKILL after the grace) are gone."""
    start = time.time()
    with pytest.raises(supervise.LoopFailed, match=r"no training step finished in 0.05 minutes since it started"):
        supervise.run(loop_cmd(tmp_path), progress=tmp_path / "metrics.jsonl", step_timeout=3, poll=0.2, end_grace=1)
    assert time.time() - start < 30  # the timeout, a grace of 1 s and 12 s at most after it (`processes.end`)
    assert_all_ended(tmp_path)


def test_an_ended_loop_leaves_no_shared_memory(tmp_path):
    """A process of the loop deaf to SIGTERM holds POSIX shared memory, as vLLM's engine holds its message
    queues, and a semaphore (mapped under the name glibc created it with, unlinked since): the SIGKILL that ends it ends its resource tracker too, which would have unlinked it; the guard
    removes it (/dev/shm is the node's memory, and a killed run's stayed there)."""
    with pytest.raises(supervise.LoopFailed, match="no training step finished"):
        supervise.run(loop_cmd(tmp_path, shm=str(tmp_path / "shm")), progress=tmp_path / "metrics.jsonl",
                      step_timeout=3, poll=0.2, end_grace=1)
    assert_all_ended(tmp_path)
    names = (tmp_path / "shm").read_text().split()
    assert len(names) == 2 and not [n for n in names if os.path.exists(f"/dev/shm/{n}")], names


def test_a_loop_that_ends_well_leaves_no_shared_memory_its_processes_were_killed_with(tmp_path):
    """The loop ends well after a process holding shared memory was SIGKILLed with its resource tracker (as
    vLLM's and Ray's shutdowns end engine processes; a 4-rank run left 8 of vLLM's queues, 1.7 GB nominal, and
    verl's runs their vLLM workers' semaphores): the guard noted the memory while the process ran and removes it."""
    supervise.run(loop_cmd(tmp_path, shm=str(tmp_path / "shm"), kill_helper_group_after=4, tail=0),
                  progress=tmp_path / "metrics.jsonl", step_timeout=60, poll=0.2, end_grace=1)
    assert_all_ended(tmp_path)
    names = (tmp_path / "shm").read_text().split()
    assert len(names) == 2 and not [n for n in names if os.path.exists(f"/dev/shm/{n}")], names


def test_the_resource_trackers_outlive_the_run_and_clean_up_after_it(tmp_path):
    """A process of the run, deaf to SIGTERM, leaves shared memory it no longer maps (nothing to note) to its
    resource tracker, as the libraries' processes leave their semaphores and queues: the guard SIGKILLs the
    process but spares the tracker, which then unlinks what its process registered and exits by itself
    (SIGKILLed with it, as before, the tracker left it in /dev/shm)."""
    with pytest.raises(supervise.LoopFailed, match="no training step finished"):
        supervise.run(loop_cmd(tmp_path, unmapped=str(tmp_path / "left")), progress=tmp_path / "metrics.jsonl",
                      step_timeout=3, poll=0.2, end_grace=1)
    assert_all_ended(tmp_path)
    name = (tmp_path / "left").read_text()
    assert name and not os.path.exists(f"/dev/shm/{name}")
    helper = pids(tmp_path)["helper"]
    orphans = []  # its tracker, had it been spared and never ended
    for p in psutil.process_iter():
        try:
            if p.ppid() in (1, helper) and p.status() != psutil.STATUS_ZOMBIE and "resource_tracker" in " ".join(p.cmdline()):
                orphans.append(p.pid)
        except psutil.Error:
            pass
    assert not orphans, orphans


def test_steps_reset_the_clock(tmp_path):
    """Eight steps a second apart, each within the 5 s bound (4 s for a loaded machine's slips), 8 s in all:
    no stall."""
    supervise.run(loop_cmd(tmp_path, steps=8, every=1.0, tail=0), progress=tmp_path / "metrics.jsonl",
                  step_timeout=5, poll=0.2)
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 8


def test_a_lost_engine_ends_the_run_naming_the_engines_log(tmp_path):
    """The engine process ends while the loop runs on: after the grace the run ends, the error names the
    log of the engine's parent (the actor, Ray's worker-*-<pid>.out) and quotes its errors."""
    logs = tmp_path / "ray" / "session_2026-11-26_00-00-00_1_1" / "logs"
    logs.mkdir(parents=True)
    with pytest.raises(supervise.LoopFailed) as e:
        supervise.run(loop_cmd(tmp_path, engine=str(logs), kill_engine_after=1), progress=tmp_path / "metrics.jsonl",
                      step_timeout=60, poll=0.2, engine_grace=1, end_grace=1)
    msg = str(e.value)
    assert "vLLM's VLLM::EngineCore" in msg and "the rollout engine is gone" in msg
    loop = pids(tmp_path)["loop"]
    assert f"The rollout engine's log: {logs}/worker-abc-01000000-{loop}.out" in msg
    assert "RuntimeError: Worker failed with error 'boom'" in msg and "INFO starting" not in msg
    assert_all_ended(tmp_path)


# The job: `supervise.run` on LOOP in a process of its own (a train job under Snakemake)
JOB = textwrap.dedent("""
    import sys
    from vicurl.runtime import supervise
    supervise.run(sys.argv[1:], progress="no-progress-file", step_timeout=600, poll=0.2,
                  exit_with_parent=True, end_grace=2)
""")


@pytest.mark.parametrize("sig, codes", [(signal.SIGTERM, {128 + signal.SIGTERM}), (signal.SIGINT, {-signal.SIGINT, 130}),
                                        (signal.SIGHUP, {128 + signal.SIGHUP})])
def test_a_stopped_job_ends_its_loop(tmp_path, sig, codes):
    """SIGTERM (SLURM, kill), SIGINT (Ctrl-C) or SIGHUP to the job: every process of the loop ends, and the
    job exits as stopped by that signal."""
    job = subprocess.Popen([sys.executable, "-c", JOB, *loop_cmd(tmp_path)])
    pids(tmp_path)
    job.send_signal(sig)
    assert job.wait(timeout=30) in codes
    assert_all_ended(tmp_path)


JOB_SIGNALLED_AS_THE_LOOP_STARTS = textwrap.dedent("""
    import os, signal, subprocess, sys
    from vicurl.runtime import supervise
    started = subprocess.Popen

    def popen(*args, **kwargs):  # the signal comes as soon as the loop has started, before anything else
        proc = started(*args, **kwargs)
        print(proc.pid, flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        return proc

    subprocess.Popen = popen
    supervise.run(sys.argv[1:], progress="no-progress-file", step_timeout=600, poll=0.2, end_grace=2)
""")


def test_a_signal_as_the_loop_starts_ends_it_too(tmp_path):
    """SIGTERM between the loop's start and the job's own handlers (a loaded node, SLURM's signal early): it is
    held until the loop has started, then the loop's session is ended as for any stop, and the job exits as
    stopped by it. (Python's default had ended the job alone and left the loop running.)"""
    job = subprocess.Popen([sys.executable, "-c", JOB_SIGNALLED_AS_THE_LOOP_STARTS, *loop_cmd(tmp_path)],
                           stdout=subprocess.PIPE, text=True)
    loop = int(job.stdout.readline())
    assert job.wait(timeout=60) == 128 + signal.SIGTERM
    left = []
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) == loop and p.status() != psutil.STATUS_ZOMBIE:
                left.append(p.pid)
        except (ProcessLookupError, psutil.Error):
            pass
    assert not left, left


def test_a_job_stopped_by_slurm_is_gone_within_its_kill_wait(tmp_path):
    """SIGTERM with the job's own grace (10 s) to a loop whose process ignores SIGTERM and holds shared memory
    and a named semaphore, as vLLM's engine does: the job has ended it, the trackers have cleaned up and the job
    has exited within SLURM's default KillWait (30 s), after which SLURM SIGKILLs what is left of the job."""
    job = subprocess.Popen([sys.executable, "-c", JOB.replace(", end_grace=2", ""),
                            *loop_cmd(tmp_path, shm=str(tmp_path / "shm"))])
    pids(tmp_path)
    while not (tmp_path / "shm").exists():
        time.sleep(0.1)
    start = time.time()
    job.send_signal(signal.SIGTERM)
    assert job.wait(timeout=60) == 128 + signal.SIGTERM
    assert time.time() - start < 30
    assert_all_ended(tmp_path)
    names = (tmp_path / "shm").read_text().split()
    assert len(names) == 2 and not [n for n in names if os.path.exists(f"/dev/shm/{n}")], names


def test_a_job_whose_parent_died_ends_its_loop(tmp_path):
    """The job's parent (Snakemake) is killed: the job notices, ends its loop and exits."""
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                               "print(subprocess.Popen(sys.argv[1:]).pid, flush=True); time.sleep(600)",
                               sys.executable, "-c", JOB, *loop_cmd(tmp_path)], stdout=subprocess.PIPE, text=True)
    job = int(parent.stdout.readline())
    pids(tmp_path)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 30
    while alive(job) and time.time() < deadline:
        time.sleep(0.2)
    assert not alive(job)
    assert_all_ended(tmp_path)


def test_a_stop_outside_the_loop_still_removes_the_jobs_temp_folder(tmp_path):
    """SIGTERM while the train job works outside `supervise.run` (a failed run's logs being copied, the temp
    folder being made): the job unwinds, its temp folder removed, and exits as stopped by it. (Python's
    default ends the process at once and the folder stays on the node.)"""
    job = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        from vicurl.runtime import vllm_env
        from vicurl.runtime import supervise
        with supervise.stops_unwind(), vllm_env.private_temp({"TMPDIR": sys.argv[1]}) as temp:
            print(temp["TMPDIR"], flush=True)
            time.sleep(60)
        """), str(tmp_path)], stdout=subprocess.PIPE, text=True)
    folder = Path(job.stdout.readline().strip())
    assert folder.is_dir() and folder.parent == tmp_path
    job.send_signal(signal.SIGTERM)
    assert job.wait(timeout=30) == 128 + signal.SIGTERM
    assert not folder.exists()
