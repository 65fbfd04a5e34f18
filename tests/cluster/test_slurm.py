"""The SLURM profile on a real SLURM.

tests/cluster/cluster.sh starts a private one-node cluster (Debian's slurm-wlm with its accounting
database, as root); the smoke config's jobs go through snakemake-executor-plugin-slurm with
slurm-a100/config.yaml exactly as a user copies it (its placeholder account and partitions exist in the
test cluster), and tests/cluster/profile layered on top (status checks sooner). Checked in
`scontrol show job`: the resources each job asked for, its state, and the retries: a training job cancelled with `scancel` or failed by a signal comes back as a second
attempt with the profile's doubled runtime and resumes from its `_work/` checkpoint. And the status
command (`vicurl.status`) reading SLURM's record of a training job (`sacct`): queued, running, failed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from vicurl.engines.workdir import PROGRESS
from vicurl.status import incomplete

from harness import DEMO_CONFIG, PROFILE, REPO, SMOKE_CONFIG, snakemake_cmd

HERE = Path(__file__).resolve().parent
CLUSTER = HERE / "cluster.sh"
PER_CHECKPOINT = HERE / "per_checkpoint.yaml"  # GPU clusters: a generation job per checkpoint
# the user's command (`--profile slurm-a100`) with the test profile over it, and the smoke config
PROFILES = ("--profile", "slurm-a100", "--profile", str(HERE / "profile"))
CONFIGS = [DEMO_CONFIG, SMOKE_CONFIG, PER_CHECKPOINT]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def slurm_env(tmp_path_factory):
    """The environment that points SLURM's commands at a private cluster; the cluster is stopped after."""
    pytest.importorskip("snakemake_executor_plugin_slurm")
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    state = tmp_path_factory.mktemp("slurm")
    up = subprocess.run(["bash", str(CLUSTER), "up", str(state)], capture_output=True, text=True, timeout=900)
    if up.returncode != 0:
        pytest.skip(f"a SLURM test cluster could not start here (tests/cluster/cluster.sh up): {up.stderr[-2000:]}")
    lines = subprocess.run(["bash", str(CLUSTER), "env", str(state)], capture_output=True, text=True, check=True).stdout
    env = dict(os.environ)
    for name, value in re.findall(r"^export (\w+)=(.*)$", lines, re.M):
        env[name] = subprocess.run(["bash", "-c", f"printf %s {value}"], capture_output=True, text=True,
                                   env=env, check=True).stdout
    try:
        yield env
    finally:
        subprocess.run(["bash", str(CLUSTER), "down", str(state)], capture_output=True, text=True, timeout=120)


def slurm_jobs(env) -> list[dict[str, str]]:
    """Every job the cluster knows (MinJobAge keeps finished ones an hour), as scontrol's key=value fields."""
    out = subprocess.run(["scontrol", "show", "job", "-o"], capture_output=True, text=True, env=env).stdout
    jobs = []
    for line in out.splitlines():
        if "JobId=" in line:
            jobs.append(dict(m.groups() for m in re.finditer(r"(\w[\w/:]*)=(\S*)", line)))
    return sorted(jobs, key=lambda j: int(j["JobId"]))


def of_rule(jobs, name: str, wildcard: str = "") -> list[dict[str, str]]:
    """The jobs of one rule (or group), by the comment the plugin gives them."""
    return [j for j in jobs if j.get("Comment", "").startswith(f"rule_{name}") and wildcard in j.get("Comment", "")]


def minutes(limit: str) -> int:
    """scontrol's TimeLimit ([D-]HH:MM:SS) in minutes."""
    days, _, hms = limit.rpartition("-")
    h, m, s = (int(x) for x in hms.split(":"))
    return (int(days or 0) * 24 + h) * 60 + m + (s > 0)


def megabytes(memory: str) -> int:
    """scontrol's MinMemoryNode (8000M, 62.50G) in MB."""
    return round(float(memory[:-1]) * {"M": 1, "G": 1024, "T": 1024**2}[memory[-1]])


def runtime(rule: str, attempt: int, model: str = "tiny") -> int:
    """The profile's runtime (minutes) of one rule's job at an attempt."""
    expr = PROFILE["set-resources"].get(rule, {}).get("runtime", PROFILE["default-resources"]["runtime"])
    return int(eval(str(expr), {"attempt": attempt, "wildcards": SimpleNamespace(model=model)}))


def test_jobs_run_with_the_profiles_resources(slurm_env, tmp_path):
    """A smoke run's training, evaluation and grading: every job through sbatch with the partition,
    GPUs, CPUs, memory and time limit of the profile."""
    target = "results/smoke/eval/main/tiny/oracle-vicurl/seed0/scores.json"
    out = subprocess.run(snakemake_cmd(tmp_path, target, *PROFILES, configs=CONFIGS), cwd=REPO, capture_output=True,
                         text=True, env=slurm_env, timeout=900)
    assert out.returncode == 0, (out.stdout + out.stderr)[-5000:]
    assert (tmp_path / target).exists()
    jobs = slurm_jobs(slurm_env)
    res, default = PROFILE["set-resources"], PROFILE["default-resources"]
    (train,) = of_rule(jobs, "train", "oracle-vicurl")
    assert train["JobState"] == "COMPLETED" and train["Partition"] == res["train"]["slurm_partition"]
    assert train["TresPerJob"] == "gres:gpu:a100:1"  # the demo's local engine: the profile's GPU type, one GPU
    assert minutes(train["TimeLimit"]) == runtime("train", 1)
    gens = of_rule(jobs, "generate_checkpoint", "oracle-vicurl")
    assert len(gens) == 2  # the smoke run's evaluated steps 1 and 2, one GPU job each
    gen = res["generate_checkpoint"]
    for job in gens:
        assert job["JobState"] == "COMPLETED" and job["Partition"] == gen["slurm_partition"]
        assert job["TresPerJob"] == f"gres:gpu:{gen['gpu_model']}:{gen['gpu']}"
        assert int(job["NumCPUs"]) == gen["cpus_per_gpu"] * gen["gpu"]
        assert megabytes(job["MinMemoryNode"]) == gen["mem_mb"]
        assert minutes(job["TimeLimit"]) == runtime("generate_checkpoint", 1)
    (grade,) = of_rule(jobs, "grade", "oracle-vicurl")  # the run's checkpoints, on the CPU partition
    assert grade["JobState"] == "COMPLETED" and grade["Partition"] == default["slurm_partition"]
    assert "TresPerJob" not in grade and int(grade["NumCPUs"]) == res["grade"]["cpus_per_task"]
    assert megabytes(grade["MinMemoryNode"]) == eval(res["grade"]["mem_mb"], {"attempt": 1})
    assert minutes(grade["TimeLimit"]) == runtime("grade", 1)
    (data,) = of_rule(jobs, "synthetic_data")
    assert data["Partition"] == default["slurm_partition"] and "TresPerJob" not in data
    assert minutes(data["TimeLimit"]) == runtime("synthetic_data", 1)


def kill_rule_script(job_id: str, script: str) -> None:
    """SIGKILL the rule's script process inside a SLURM job (a crash or an out-of-memory kill)."""
    for proc in Path("/proc").iterdir():
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        if f"SLURM_JOB_ID={job_id}".encode() in environ and ".snakemake/scripts/" in cmdline and script in cmdline:
            os.kill(int(proc.name), 9)
            return
    raise AssertionError(f"no {script} process in SLURM job {job_id}")


RESUMED = re.compile(r"resumed from \S+ \(step (\d+)\)")


def interrupt_training(slurm_env, tmp_path, actions, configs) -> tuple[subprocess.CompletedProcess, list[dict], Path]:
    """Train one longer smoke run through SLURM; ``actions[k](job_id)`` ends attempt k + 1 once it has a
    checkpoint to resume from: the first once it saved one, each next one once it resumed. Returns the finished
    Snakemake run, this run's SLURM jobs and its folder."""
    run = tmp_path / "results/smoke/runs/main/tiny/oracle-vicurl/seed0"
    log = tmp_path / "results/smoke/logs/train/main/tiny/oracle-vicurl/seed0.log"
    earlier = {j["JobId"] for j in slurm_jobs(slurm_env)}  # the cluster's jobs from earlier tests
    ended: set[str] = set()
    proc = subprocess.Popen(snakemake_cmd(tmp_path, str((run / "metrics.jsonl").relative_to(tmp_path)), *PROFILES,
                                          configs=[*CONFIGS, *configs]),
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=slurm_env)
    deadline = time.time() + 600
    for k, action in enumerate(actions):
        while time.time() < deadline and proc.poll() is None:
            running = [j for j in of_rule(slurm_jobs(slurm_env), "train")
                       if j["JobState"] == "RUNNING" and j["JobId"] not in earlier | ended]
            ready = list((run / "_work").glob("ckpt_step*.pt")) if k == 0 else \
                log.exists() and len(RESUMED.findall(log.read_text())) >= k
            if running and ready:
                action(running[0]["JobId"])
                ended.add(running[0]["JobId"])
                break
            time.sleep(0.5)
        else:
            proc.kill()
            pytest.fail(f"attempt {k + 1} of the training job never ran with a checkpoint to resume from: "
                        f"{proc.communicate()[0][-3000:]}")
    try:
        output = proc.communicate(timeout=600)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"Snakemake did not finish within 10 minutes of the interruption: {proc.communicate()[0][-3000:]}")
    done = subprocess.CompletedProcess(proc.args, proc.returncode, output, "")
    return done, [j for j in of_rule(slurm_jobs(slurm_env), "train", "oracle-vicurl") if j["JobId"] not in earlier], run


@pytest.fixture
def long_training(tmp_path):
    over = tmp_path / "long_training.yaml"
    over.write_text(yaml.safe_dump({"train": {"save_every": 2},
                                    "studies": {"main": {"train": {"total_steps": 40}, "eval_every": 40, "eval_steps": [2]},
                                                "mechanism": {"continues": None}}}))  # its own runs, not main's longer ones
    return [over]


def test_an_ended_training_job_is_retried_with_a_longer_runtime_and_resumes(slurm_env, tmp_path, long_training):
    """`scancel` (CANCELLED), then the training process killed inside the retried job (FAILED): Snakemake
    submits each next attempt with the profile's runtime for it (3 attempts: retries 2); each resumes from
    `_work/`, and every step is trained once."""
    longer = tmp_path / "longer.yaml"  # a step can take 0.1 s: long enough to be caught after its resume
    longer.write_text(yaml.safe_dump({"studies": {"main": {"train": {"total_steps": 200}, "eval_every": 200}}}))
    scancel = lambda job: subprocess.run(["scancel", job], check=True, env=slurm_env)  # noqa: E731
    kill = lambda job: kill_rule_script(job, "train.py")  # noqa: E731
    done, jobs, run = interrupt_training(slurm_env, tmp_path, [scancel, kill], [*long_training, longer])
    assert done.returncode == 0, done.stdout[-5000:]
    assert [j["JobState"] for j in jobs] == ["CANCELLED", "FAILED", "COMPLETED"], jobs
    assert [minutes(j["TimeLimit"]) for j in jobs] == [runtime("train", a) for a in (1, 2, 3)]
    log = (tmp_path / "results/smoke/logs/train/main/tiny/oracle-vicurl/seed0.log").read_text()
    resumed = [int(s) for s in RESUMED.findall(log)]
    assert len(resumed) == 2 and 2 <= resumed[0] <= resumed[1], log[-3000:]
    metrics = pd.read_json(run / "metrics.jsonl", lines=True)
    assert list(metrics["step"]) == list(range(1, 201))  # every step once: none lost, none twice


def run_state(slurm_env, tmp_path, configs, run: str) -> dict[str, str]:
    """`python -m vicurl.status` on the study in ``tmp_path``, as a user runs it beside SLURM: one run's row
    of its table (its CSV)."""
    table = tmp_path / "status.csv"
    out = subprocess.run([sys.executable, "-m", "vicurl.status", "--configfile", *map(str, configs), "--workdir",
                          str(tmp_path), "--no-estimate", "--csv", str(table)], capture_output=True, text=True,
                         env=slurm_env, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = pd.read_csv(table, dtype=str, keep_default_na=False)
    (row,) = [r for r in rows.to_dict("records") if f"{r['study']}/{r['model']}/{r['setting']}/seed{r['seed']}" == run]
    return row


def sacct_record(slurm_env, job_id: str) -> tuple[str, int, int]:
    """A job's state, elapsed seconds and GPUs in SLURM's record (("", 0, 0) before it reaches the record)."""
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", job_id, "--format=State,ElapsedRaw,AllocTRES"],
                         capture_output=True, text=True, env=slurm_env, check=True).stdout.strip()
    if not out:
        return "", 0, 0
    state, elapsed, tres = out.split("|")
    gpus = re.search(r"gres/gpu=(\d+)", tres)
    return state.split(" ")[0], int(elapsed), int(gpus.group(1)) if gpus else 0


def wait_until(what: str, check, proc: subprocess.Popen | None = None, timeout: float = 300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if result := check():
            return result
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"Snakemake ended before {what}: {proc.communicate()[0][-3000:]}")
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}")


def test_the_status_command_reads_slurms_record(slurm_env, tmp_path, long_training):
    """`python -m vicurl.status` on a training run that went to SLURM, each state from the accounting
    database (`sacct`) as on a production cluster: queued (the GPU partition down: PENDING), running
    (its step from the run's progress file, its GPU hours SLURM's elapsed time times the GPUs the job was
    given), and failed (Snakemake killed, then the job's script: FAILED)."""
    # long enough to be read while it runs: a step of the smoke config can take 0.1 s, and 40 ended in 5 s
    longer = tmp_path / "longer_still.yaml"
    longer.write_text(yaml.safe_dump({"studies": {"main": {"train": {"total_steps": 2000}, "eval_every": 2000}}}))
    configs = [*CONFIGS, *long_training, longer]
    run = "main/tiny/oracle-vicurl/seed0"
    partition = PROFILE["set-resources"]["train"]["slurm_partition"]
    scontrol = lambda state: subprocess.run(["scontrol", "update", f"PartitionName={partition}", f"State={state}"],  # noqa: E731
                                            check=True, env=slurm_env)
    scontrol("DOWN")
    proc = subprocess.Popen(snakemake_cmd(tmp_path, f"results/smoke/runs/{run}/metrics.jsonl", *PROFILES, configs=configs),
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=slurm_env)
    try:
        def submitted():
            marks = incomplete(tmp_path)
            ids = [m.get("external_jobid") for k, m in marks.items() if k.startswith(f"results/smoke/runs/{run}/")]
            return next((str(j) for j in ids if j and sacct_record(slurm_env, str(j))[0] == "PENDING"), None)

        job = wait_until("the training job pending in SLURM's record", submitted, proc)
        queued = run_state(slurm_env, tmp_path, configs, run)
        assert (queued["state"], queued["slurm_job"], queued["step"]) == ("queued", job, "0"), queued

        scontrol("UP")
        progress = tmp_path / f"results/smoke/runs/{run}/_work" / PROGRESS
        wait_until("the job running with a step done", lambda: sacct_record(slurm_env, job)[0] == "RUNNING"
                   and progress.exists() and progress.read_text().strip(), proc)
        before = sacct_record(slurm_env, job)
        running = run_state(slurm_env, tmp_path, configs, run)
        after = sacct_record(slurm_env, job)
        steps = yaml.safe_load(longer.read_text())["studies"]["main"]["train"]["total_steps"]
        assert (running["state"], running["slurm_job"], running["steps"]) == ("running", job, str(steps)), running
        assert int(running["step"]) >= 1 and float(running["s_per_step"]) > 0 and running["finish"], running
        assert before[2] == after[2] == 1  # the job's GPUs, as SLURM gave them (gres/gpu in AllocTRES)
        assert before[1] / 3600 - 1e-9 <= float(running["gpu_hours"]) <= after[1] / 3600 + 1e-9, (before, after, running)

        proc.kill()  # Snakemake gone (its incomplete marks stay), then the job's own process dies: FAILED
        proc.communicate(timeout=60)
        kill_rule_script(job, "train.py")
        wait_until("the job failed in SLURM's record", lambda: sacct_record(slurm_env, job)[0] == "FAILED")
        failed = run_state(slurm_env, tmp_path, configs, run)
        assert (failed["state"], failed["slurm_job"]) == ("failed", job), failed
    finally:
        scontrol("UP")
        if proc.poll() is None:
            proc.kill()


def test_the_status_command_reads_array_tasks(slurm_env, monkeypatch, tmp_path):
    """The SLURM plugin's --slurm-array-jobs submits a rule's jobs as one array and Snakemake marks each
    `<array id>_<task>`: SLURM's record of each task by that name, pending while the partition is down (sacct
    then reports the array's waiting tasks in one line), running once it is up, and by its own job id (what
    the task's log names)."""
    from vicurl.status import sacct

    for k, v in slurm_env.items():  # sacct of the test cluster
        monkeypatch.setenv(k, v)
    resources = PROFILE["default-resources"]
    partition = resources["slurm_partition"]
    scontrol = lambda state: subprocess.run(["scontrol", "update", f"PartitionName={partition}", f"State={state}"],  # noqa: E731
                                            check=True, env=slurm_env)
    scontrol("DOWN")
    array = None
    try:
        out = subprocess.run(["sbatch", "--parsable", "--array=0-2", "-p", partition, "-A", resources["slurm_account"],
                              "-t", "5", "--mem=100M", "-o", str(tmp_path / "%A_%a.out"),
                              "--wrap", "sleep 60"], capture_output=True, text=True,
                             env=slurm_env, check=True)
        array = out.stdout.strip().split(";")[0]
        tasks = [f"{array}_{t}" for t in range(3)]
        pending = wait_until("the array's tasks in SLURM's record", lambda: (r := sacct(tasks)) and len(r) >= 3 and r)
        assert {t: pending[t][0] for t in tasks} == dict.fromkeys(tasks, "PENDING"), pending
        scontrol("UP")
        running = wait_until("a task running", lambda: (r := sacct(tasks)) and r.get(tasks[0], ("",))[0] == "RUNNING" and r)
        raw = subprocess.run(["sacct", "-X", "-n", "-P", "-j", tasks[0], "--format=JobIDRaw"], capture_output=True,
                             text=True, env=slurm_env, check=True).stdout.split()[0]
        assert running[raw] == running[tasks[0]], (raw, running)
    finally:
        scontrol("UP")
        if array:
            subprocess.run(["scancel", array], env=slurm_env)
