"""What a process that starts vLLM sets first (`vicurl.runtime.vllm_env`), in real processes: vLLM's children
spawned (a forked child of a process whose OpenMP threads exist hangs), a temp folder that exists, one
private temp folder however often it is asked for, torch's compile cache outside it, and nothing left when the job
is stopped. The engine's
own start after a parallel op, through vLLM's CPU build: tests/gpu_path/test_vllm_engine.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vicurl.runtime import processes, vllm_env

# a forked child's first parallel op after the parent's: GNU OpenMP's threads are not in the child
FORK_AFTER_PARALLEL = r"""
import multiprocessing, sys, torch
torch.set_num_threads(2)
a = torch.randn(1500, 1500)
float((a @ a).sum())  # the parent's OpenMP pool now has its threads

def child(ready):
    ready.set()
    torch.zeros((1024, 3300))

if __name__ == "__main__":
    ctx = multiprocessing.get_context(sys.argv[1])
    ready = ctx.Event()
    p = ctx.Process(target=child, args=(ready,))
    p.start()
    ready.wait(300)  # a spawned child imports torch first, which a loaded machine can take 10 s and more for
    p.join(10)
    print("hung" if p.is_alive() else "done", flush=True)
    p.kill()
"""


def test_vllms_children_are_spawned_because_a_fork_after_parallel_work_hangs(tmp_path):
    """Forked after the parent's parallel op, a child hangs at its first parallel op (what stalled the Qwen2
    evaluation's engine start on an H200: the parent had converted the model on the CPU); spawned, it runs. So
    every process that starts vLLM asks for spawn, unless its environment says otherwise."""
    script = tmp_path / "fork.py"
    script.write_text(FORK_AFTER_PARALLEL)
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    out = {m: subprocess.run([sys.executable, str(script), m], env=env, capture_output=True, text=True, timeout=120)
           for m in ("fork", "spawn")}
    assert out["fork"].stdout.split() == ["hung"] and out["spawn"].stdout.split() == ["done"], out
    assert vllm_env.environment({})["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"
    assert "VLLM_WORKER_MULTIPROC_METHOD" not in vllm_env.environment({"VLLM_WORKER_MULTIPROC_METHOD": "fork"})


def test_a_tmpdir_missing_on_the_node_gives_the_systems_temp_folder(tmp_path, caplog, monkeypatch):
    """sbatch hands the job the submitting shell's TMPDIR, which the node may lack: the job runs in the
    system's temp folder and says so once."""
    missing = str(tmp_path / "login-node-session" / "tmp")
    with caplog.at_level("WARNING", logger="vicurl.runtime.vllm_env"):
        assert vllm_env.temp_folder({"TMPDIR": missing}) == "/tmp"
        assert vllm_env.temp_folder({"TMPDIR": missing}) == "/tmp"
    assert [r.getMessage() for r in caplog.records].count(
        f"TMPDIR={missing} does not exist on this node or is not writable (sbatch passes on the submitting "
        f"shell's TMPDIR): using /tmp") == 1
    assert vllm_env.temp_folder({"TMPDIR": str(tmp_path)}) == str(tmp_path)
    monkeypatch.chdir(tmp_path.parent)  # a relative one names the same folder in processes started elsewhere
    assert vllm_env.temp_folder({"TMPDIR": tmp_path.name}) == str(tmp_path)
    code = ("import tempfile; from vicurl.runtime import vllm_env; vllm_env.prepare(); "
            "print(tempfile.NamedTemporaryFile(delete=False).name)")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TMPDIR": missing}, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    made = Path(out.stdout.strip())
    assert made.parent.parent == Path("/tmp") and made.parent.name.startswith("vicurl-") and not made.parent.exists()


def test_preparing_twice_keeps_one_private_folder(tmp_path):
    """A second call (a user's session that evaluates twice) neither nests a folder in the first nor replaces it,
    and the folder goes at exit. (In a process of its own: `prepare` sets a SIGTERM handler for the process's
    life, which this test process must not take on.)"""
    code = ("import json, os; from vicurl.runtime import vllm_env; vllm_env.prepare(); first = os.environ['TMPDIR']; "
            "vllm_env.prepare(); print(json.dumps([first, os.environ['TMPDIR'], os.listdir(os.path.dirname(first))]))")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TMPDIR": str(tmp_path)}, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    first, second, listed = json.loads(out.stdout)
    assert second == first and Path(first).parent == tmp_path and listed == [Path(first).name]
    assert list(tmp_path.iterdir()) == []


def test_a_test_that_prepares_leaves_the_process_as_it_found_it(tmp_path, monkeypatch):
    """A test whose code calls `prepare` in the test process (an evaluation through a stand-in engine) leaves
    nothing of it to the next (tests/conftest.py, `_as_found`): the stop handlers, the environment and the temp
    folder as they were, its private folder removed and its shared-memory watcher stopped."""
    import tempfile
    import threading

    from conftest import _as_found

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    handler, env = signal.getsignal(signal.SIGTERM), dict(os.environ)
    watching = lambda: sum(t.name == "vicurl-shared-memory-notes" for t in threading.enumerate())  # noqa: E731
    before = watching()
    scope = _as_found()
    next(scope)
    vllm_env.prepare()
    private = Path(os.environ["TMPDIR"])
    assert private.parent == tmp_path and signal.getsignal(signal.SIGTERM) is vllm_env._on_stop
    assert watching() == before + 1
    with pytest.raises(StopIteration):
        next(scope)
    assert signal.getsignal(signal.SIGTERM) is handler and dict(os.environ) == env and not vllm_env._prepared
    assert not vllm_env._kin
    assert not private.exists() and tempfile.tempdir != str(private)
    assert watching() == before  # stopping the watcher waits for its thread


def test_torchs_compile_cache_outlives_the_jobs_temp_folder(tmp_path):
    """torch keeps its compiled kernels (inductor's, Triton's) in ``<temp>/torchinductor_<user>``: in a job's
    private temp folder they would go with it, and every job would compile them again. With the job's folder the
    cache is where torch puts it without, and stays. torch's precompiled C++ headers, which it builds in
    ``<temp>/torchinductor_<user>`` whatever the cache folder (each process, before it loads a cached CPU kernel),
    are off: they would be built again in every job's folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHINDUCTOR_")} | {"TMPDIR": str(tmp_path)}
    code = ("from torch._inductor.runtime.cache_dir_utils import cache_dir\n"
            "from torch._inductor import codecache, config\n"
            "print(cache_dir(), codecache._HEADER_DIR if config.cpp_cache_precompile_headers else None)")
    run = lambda env: subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,  # noqa: E731
                                     timeout=120).stdout.split()
    torchs, headers = run(env)
    assert Path(headers).is_relative_to(tmp_path)  # torch's defaults: both in the temp folder
    with vllm_env.private_temp(env) as temp:
        assert Path(temp["TMPDIR"]).parent == tmp_path
        ours, headers = run({**env, **temp})
        assert headers == "None"  # (torch would have put them in temp["TMPDIR"])
    assert ours == torchs and Path(ours).parent == tmp_path and Path(ours).is_dir(), (ours, torchs)
    own = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "own"), "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS": "1"}
    assert vllm_env.compile_cache({**env, **own}) == {}  # the user's


# a job that prepared vLLM's environment and has a child holding shared memory and a file in the private folder,
# as an evaluation with vLLM's engine core running has
STOPPED_JOB = r"""
import json, subprocess, sys, tempfile, time
from vicurl.runtime import vllm_env
vllm_env.prepare()
child = subprocess.Popen([sys.executable, "-c",
    "import signal, sys, tempfile, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"  # ended by the SIGKILL after the grace
    "from multiprocessing import shared_memory\n"
    "shm = shared_memory.SharedMemory(create=True, size=1 << 20)\n"
    "tempfile.NamedTemporaryFile(delete=False).write(b'x')\n"
    "print(shm.name, flush=True)\n"
    "time.sleep(600)"], stdout=subprocess.PIPE, text=True)
print(json.dumps({"temp": tempfile.gettempdir(), "child": child.pid, "shm": child.stdout.readline().strip()}), flush=True)
time.sleep(600)
"""


def test_a_stopped_job_leaves_neither_its_temp_folder_nor_its_childrens_shared_memory(tmp_path):
    """SIGTERM (SLURM's time limit, a preemption, scancel) to a process that prepared vLLM's environment:
    within SLURM's default KillWait (30 s) its children are ended, the shared memory they held and its private
    temp folder are removed, and it exits as stopped by SIGTERM. Python's default handler would leave all three."""
    import psutil

    job = subprocess.Popen([sys.executable, "-c", STOPPED_JOB], env={**os.environ, "TMPDIR": str(tmp_path)},
                           stdout=subprocess.PIPE, text=True)
    made = json.loads(job.stdout.readline())
    assert Path(made["temp"]).parent == tmp_path and os.path.exists(f"/dev/shm/{made['shm']}")
    start = time.time()
    job.send_signal(signal.SIGTERM)
    assert job.wait(timeout=30) == 128 + signal.SIGTERM
    assert time.time() - start < 30
    assert not psutil.pid_exists(made["child"]) or psutil.Process(made["child"]).status() == psutil.STATUS_ZOMBIE
    assert not os.path.exists(f"/dev/shm/{made['shm']}") and list(tmp_path.iterdir()) == []


# a job whose engine core exited and left a worker behind, hung where SIGTERM cannot reach it, holding shared
# memory (vLLM's worker in a kernel that never returns, as an evaluation ends with EngineDeadError)
ORPHAN_JOB = r"""
import json, subprocess, sys, time
from vicurl.runtime import vllm_env
vllm_env.prepare()
core = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time\n"
    "worker = subprocess.Popen([sys.executable, '-c', "
    "'import signal, time\\n'"
    "'signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n'"
    "'from multiprocessing import shared_memory\\n'"
    "'shm = shared_memory.SharedMemory(create=True, size=1 << 20)\\n'"
    "'print(shm.name, flush=True)\\n'"
    "'time.sleep(120)'], stdout=subprocess.PIPE, text=True)\n"
    "print(worker.pid, worker.stdout.readline().strip(), flush=True)\n"
    "time.sleep(10)"], stdout=subprocess.PIPE, text=True)  # the job notes its descendants every 2 s, 5 times here
worker, shm = core.stdout.readline().split()
print(json.dumps({"worker": int(worker), "shm": shm}), flush=True)
core.wait()  # the worker is an orphan now: init's child, outside this process's tree
"""


def test_a_job_that_ends_ends_what_its_engine_left_running(tmp_path):
    """A process that prepared vLLM's environment exits (normally, or on an error such as EngineDeadError) while
    a process it started outlives vLLM's shutdown, orphaned and deaf to SIGTERM (a worker hung in a kernel: on a
    GPU it would keep its memory from the node's next job): the job ends it on its way out and removes the shared
    memory it held."""
    import psutil

    log = tmp_path.with_name(tmp_path.name + ".stderr")  # not a pipe: the orphan holds the job's stderr
    with open(log, "w") as err:
        job = subprocess.Popen([sys.executable, "-c", ORPHAN_JOB], env={**os.environ, "TMPDIR": str(tmp_path)},
                               stdout=subprocess.PIPE, stderr=err, text=True)
    made = json.loads(job.stdout.readline())
    worker = psutil.Process(made["worker"])  # this one, not a later process given its pid
    try:
        assert job.wait(timeout=120) == 0, log.read_text()[-3000:]
        deadline = time.time() + 20  # the job ended it on its way out (a zombie until init reaps it)
        while processes._running(worker) and time.time() < deadline:
            time.sleep(0.2)
        assert not processes._running(worker)
        assert not os.path.exists(f"/dev/shm/{made['shm']}")
        assert list(tmp_path.iterdir()) == []
    finally:
        if worker.is_running():
            worker.kill()
        if job.poll() is None:
            job.kill()
        Path(f"/dev/shm/{made['shm']}").unlink(missing_ok=True)


OWN_SEMAPHORES_JOB = r"""
import json, multiprocessing as mp, time
from vicurl.runtime import vllm_env
vllm_env.prepare()
ctx = mp.get_context("spawn")  # as vLLM starts its engine core: a resource tracker of this process's own
sems = [ctx.Semaphore(), ctx.Lock()]  # named semaphores in /dev/shm, registered with that tracker
child = ctx.Process(target=time.sleep, args=(600,))
child.start()
print(json.dumps({"sems": [s._semlock.name for s in sems], "child": child.pid}), flush=True)
time.sleep(600)
"""


def test_a_stopped_job_leaves_its_own_semaphores_to_its_resource_tracker(tmp_path):
    """SIGTERM to a process that prepared vLLM's environment and holds multiprocessing objects of its own
    beside a spawned child: its own resource tracker is not ended with the children (it cannot exit before its
    parent does: the stop waited 5 s for it, then killed it) and unlinks the process's semaphores once the
    process has exited, as at a normal exit."""
    job = subprocess.Popen([sys.executable, "-c", OWN_SEMAPHORES_JOB], env={**os.environ, "TMPDIR": str(tmp_path)},
                           stdout=subprocess.PIPE, text=True)
    made = json.loads(job.stdout.readline())
    files = [Path("/dev/shm") / f"sem.{name.lstrip('/')}" for name in made["sems"]]
    assert all(f.exists() for f in files), files
    job.send_signal(signal.SIGTERM)
    assert job.wait(timeout=30) == 128 + signal.SIGTERM
    deadline = time.time() + 20  # the tracker reads its parent's end, then unlinks
    while any(f.exists() for f in files) and time.time() < deadline:
        time.sleep(0.2)
    try:
        assert not any(f.exists() for f in files), files
    finally:
        for f in files:
            f.unlink(missing_ok=True)


@pytest.mark.parametrize("stage", ["environment", "temp folder"])
def test_tests_find_the_environment_as_the_last_test_left_it_before(stage):
    """tests/conftest.py restores the environment after each test: this test sets what `prepare` sets, the next
    parameter finds none of it."""
    if stage == "environment":
        os.environ["VICURL_LEAK_CHECK"] = "set by a test"
    else:
        assert "VICURL_LEAK_CHECK" not in os.environ
