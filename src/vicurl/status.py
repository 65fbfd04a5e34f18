"""Where a study stands, without starting a job: each run's state, progress and speed, and the GPU hours
spent against the plan's estimate; or, given a target, what the target builds and what it costs.

    python -m vicurl.status                                   # the demo (config/demo.yaml) in this folder
    python -m vicurl.status --configfile config/paper.yaml   # the config files as Snakemake was given them
        [--workdir DIR] [--csv PATH] [--no-estimate]
    python -m vicurl.status study_curriculum_ablation --configfile config/paper.yaml   # a target's plan

A target's plan (``vicurl.planning.target``): Snakemake's own dry run of it, its jobs per rule, those a cluster
profile sends to the cluster, and the estimated A100 hours of everything it builds (``vicurl.planning.cost``),
the jobs of other studies it borrows among them.

Per training run: its state, step t of T and seconds a step (from its ``_work/metrics.jsonl``, one row a
finished step, stamped with its time and its job's start: the wall time between the current job's rows,
generation, saves and all), the estimated finish of a running run, its last reward and accuracy, and the GPU
hours its jobs took. Per study and in all: jobs done of planned (train, generate_checkpoint, grade, probe, and
prompt_stats in all) and the GPU hours spent, against the cost model's estimate (A100 hours,
`vicurl.planning.cost`; for configs of the verl engine, its models' sizes known). Printed as tables, which also go to ``<results>/status.csv`` (the
runs) and ``<results>/status_studies.csv`` (the studies).

A run's state:
  done      its outputs are there (provenance.json, written last)
  changed   its outputs are there, trained with other settings than the config's now (train_config.json):
            Snakemake trains it again
  running   a job of it began and has not ended, and SLURM says the job runs (``sacct``), or a Snakemake
            alive on this machine marked the run's outputs incomplete after it started, as it does when it
            starts a job (a mark an earlier, killed Snakemake left is older); run the command where
            Snakemake runs (for SLURM: the login node)
  queued    SLURM holds its job (PENDING, requeued or suspended)
  stopped   a job of it began and ended without finishing (killed with Snakemake, stopped by a signal,
            SLURM's time limit): the next job resumes it from its last save
  failed    its last job failed (Snakemake unmarked it and kept the log, which ends in the error; or SLURM
            says FAILED, OUT_OF_MEMORY, NODE_FAIL)
  waiting   nothing of it has run yet
Snakemake marks a job's outputs incomplete in ``.snakemake/incomplete`` while the job runs (and keeps the
mark when Snakemake dies with it), with the SLURM job id from the submission until the job starts (then the
job's own Snakemake marks them again, without it); a job SLURM runs names its id in the run's log. GPU hours,
per job: SLURM's elapsed time times the GPUs it gave the job where SLURM ran it; else, times the rule's GPUs,
from the job's first line in the log to its last line or its last progress row, whichever is later (to now
for a running job); the evaluation's and the probes' jobs by Snakemake's benchmark files.
"""

from __future__ import annotations

import argparse
import base64
import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

from vicurl.config import runs as runs_lib
from vicurl.engines import workdir as workdir_lib
from vicurl.runtime.errors import ConfigError
from vicurl.runtime.workflow import NEW_JOB  # the line between two jobs' lines in a run's log

REPO = Path(__file__).resolve().parents[2]
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+ ", re.M)  # a log line's time (vicurl.runtime.workflow.setup)
STOPPED = re.compile(r"SIG[A-Z]+: ended verl's loop")  # vicurl.runtime.supervise, stopped by a signal
SLURM_JOB = re.compile(r" vicurl INFO SLURM job (\d+)$", re.M)  # vicurl.runtime.workflow.setup, in a job SLURM runs
SLURM_FAILED = {"FAILED", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE"}
SLURM_WAITING = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SUSPENDED", "RESV_DEL_HOLD"}  # to run (again)


@dataclass
class RunStatus:
    study: str
    model: str
    setting: str
    seed: int
    state: str
    step: int
    steps: int
    s_per_step: float
    finish: str  # the estimated finish of a running run (local time), else ""
    reward: float
    accuracy: float
    gpu_hours: float
    slurm_job: str


# ---------------------------------------------------------------- the config, Snakemake's and SLURM's records


def load_config(configfiles: list[Path], overrides: list[str] = ()) -> dict[str, Any]:
    """The config as Snakemake reads it: the files laid over one another in order (nested keys merged), then
    ``overrides`` (``KEY=VALUE``, as Snakemake's ``--config`` parses them), checked, defaults filled; the demo's
    when no file is given."""
    import yaml
    from snakemake.cli import parse_config
    from snakemake.utils import update_config

    from vicurl.config import checks

    config: dict[str, Any] = {}
    for path in configfiles or [REPO / "config" / "demo.yaml"]:
        update_config(config, yaml.safe_load(Path(path).read_text()) or {})
    update_config(config, parse_config(list(overrides)))
    return checks.read(config, REPO / "config" / "schema.yaml")


RULES = ("prompt_stats", "train", "generate_checkpoint", "grade", "probe")  # the jobs counted, in the DAG's order

MARKED = "marked_at"  # a mark's time (Snakemake writes it when it starts the job)


def incomplete(workdir: Path) -> dict[str, dict]:
    """Snakemake's incomplete marks: output path -> its record (``external_jobid``: SLURM's job id) and when it
    was written (``MARKED``)."""
    root = workdir / ".snakemake" / "incomplete"
    out = {}
    for folder, _, files in os.walk(root):
        parts = Path(folder).relative_to(root).parts
        for name in files:
            if name == "migration_underway":
                continue
            encoded = "".join(p.removeprefix("@") for p in (*parts, name))  # long names are split into folders
            try:
                key = base64.urlsafe_b64decode(encoded.encode()).decode()
                mark = Path(folder) / name
                out[key] = {**json.loads(mark.read_text() or "{}"), MARKED: mark.stat().st_mtime}
            except (ValueError, UnicodeDecodeError):
                continue  # not a mark of this Snakemake's
            except FileNotFoundError:
                continue  # its job ended meanwhile
    return out


def sacct(job_ids: Iterable[str]) -> dict[str, tuple[str, float, int]]:
    """SLURM's record of each job: (state, elapsed seconds, GPUs); empty where there is no SLURM. An array
    task (the SLURM plugin's ``--slurm-array-jobs``: Snakemake marks its jobs ``<array id>_<task>``) is found
    under that name and under its own job id (SLURM_JOB_ID inside it, which its log names)."""
    ids = {str(j) for j in job_ids if j}
    ids |= {j.split("_")[0] for j in ids if "_" in j}  # an array's waiting tasks are one line of the array's id
    if not ids or shutil.which("sacct") is None:
        return {}
    try:
        out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", ",".join(sorted(ids)),
                              "--format=JobID,JobIDRaw,State,ElapsedRaw,AllocTRES"],
                             capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        print("sacct did not answer within 60 s: the states below are Snakemake's only", file=sys.stderr)
        return {}
    return sacct_records(out.stdout)


def sacct_records(text: str) -> dict[str, tuple[str, float, int]]:
    """``sacct -X -n -P --format=JobID,JobIDRaw,State,ElapsedRaw,AllocTRES``'s lines, by job name: a job by its id,
    an array task by ``<array id>_<task>`` and by its raw id, and the tasks of an array still pending as one
    line (``<array id>_[0-3,7%2]``) each by its name."""
    records = {}
    for line in text.splitlines():
        name, raw, state, elapsed, tres = (line.split("|") + [""] * 5)[:5]
        gpus = re.search(r"gres/gpu(?::[^=,]*)?=(\d+)", tres)
        record = (state.split()[0] if state else "", float(elapsed or 0), int(gpus.group(1)) if gpus else 0)
        for job in (*array_tasks(name), raw):
            if job:
                records[job] = record
    return records


def array_tasks(name: str) -> list[str]:
    """A sacct JobID as job names: ``123`` and ``123_4`` as they are, ``123_[0-2,5%2]`` as each task."""
    m = re.fullmatch(r"(\d+)_\[([\d,-]+)(?:%\d+)?\]", name)
    if not m:
        return [name]
    tasks = []
    for part in m.group(2).split(","):
        first, _, last = part.partition("-")
        tasks += [f"{m.group(1)}_{t}" for t in range(int(first), int(last or first) + 1)]
    return tasks


# ---------------------------------------------------------------- one run


@dataclass
class LogJob:
    """One job of a run, as its train log tells it (`vicurl.runtime.workflow.setup` separates the jobs' lines)."""
    seconds: float  # from its first to its last time-stamped line
    slurm_job: str  # the SLURM job it ran as ("" where SLURM did not run it)
    end: str  # "stopped" (a signal ended verl's loop: SLURM, a user), "failed" (an error), or "" (no end
    #          written: it runs, or was killed with Snakemake)
    start: float = math.nan  # its first line's time (Unix seconds; the log's stamps are local time)


def log_jobs(log: Path) -> list[LogJob]:
    """Each job of a train log, in order."""
    if not log.exists():
        return []
    jobs = []
    for text in log.read_text(errors="replace").split(NEW_JOB):
        stamps = STAMP.findall(text)
        times = [datetime.strptime(t, "%Y-%m-%d %H:%M:%S") for t in (stamps[:1] + stamps[-1:])]
        slurm = SLURM_JOB.search(text)
        tail = text[-20000:]
        end = "stopped" if STOPPED.search(tail) else (
            "failed" if "Traceback (most recent call last)" in tail or " ERROR " in tail else "")
        if stamps or slurm:
            jobs.append(LogJob((times[-1] - times[0]).total_seconds() if times else 0.0,
                               slurm.group(1) if slurm else "", end, times[0].timestamp() if times else math.nan))
    return jobs


def rows_by_job(rows: list[dict[str, Any]]) -> dict[float, list[dict[str, Any]]]:
    """Progress rows by the start of the job that wrote them (``time/job``), in order; rows without the stamps
    (written before them) left out."""
    jobs: dict[float, list[dict[str, Any]]] = {}
    for r in rows:
        if isinstance(r.get("time/job"), (int, float)) and isinstance(r.get("time/finished"), (int, float)):
            jobs.setdefault(r["time/job"], []).append(r)
    return jobs


def with_progress(jobs: list[LogJob], rows: list[dict[str, Any]], now: float | None = None) -> list[LogJob]:
    """``jobs`` with each one's seconds reaching its last progress row (a verl job writes no log line while it
    trains, so a job killed without a last line, by SIGKILL or a reboot, would count its start-up alone) and,
    given ``now``, the last job's reaching now (a running job's hours so far). A job's progress rows are those
    whose job stamp (``time/job``) falls between its first line and the next job's."""
    ends = {job: max(r["time/finished"] for r in rs) for job, rs in rows_by_job(rows).items()}
    out = []
    for i, j in enumerate(jobs):
        if math.isnan(j.start):
            out.append(j)
            continue
        following = jobs[i + 1].start if i + 1 < len(jobs) and not math.isnan(jobs[i + 1].start) else math.inf
        seconds = max([j.seconds] + [end - j.start for t, end in ends.items() if j.start - 1 <= t < following - 1])
        if now is not None and i == len(jobs) - 1:
            seconds = max(seconds, now - j.start)
        out.append(replace(j, seconds=seconds))
    return out


def snakemake_started(workdir: Path) -> float | None:
    """When the oldest Snakemake running in ``workdir`` on this machine started (Unix seconds; None: none runs)."""
    import psutil

    here, started = workdir.resolve(), []
    for p in psutil.process_iter(["cmdline", "cwd", "create_time"]):
        try:
            argv = p.info["cmdline"] or []
            names = [Path(a).name for a in argv]
            # `snakemake ...`, `python .../bin/snakemake ...`, `python [-u ...] -m snakemake ...` (its jobs' too)
            entry = bool(names) and (names[0] == "snakemake" or ("python" in names[0] and (
                names[1:2] == ["snakemake"]
                or any(argv[i:i + 2] == ["-m", "snakemake"] for i in range(1, len(argv) - 1)))))
            if entry and p.info["cwd"] and Path(p.info["cwd"]) == here:
                started.append(p.info["create_time"])
        except (psutil.Error, OSError):
            continue
    return min(started) if started else None


def seconds_per_step(rows: list[dict[str, Any]]) -> float:
    """Wall seconds a step, from progress rows as written (`workdir.last_records`): between the first and the last
    row of the latest job that wrote two or more (generation, saves and all; not the job's start); else the
    rows' own step times."""
    jobs = rows_by_job(rows)
    for job in sorted(jobs, reverse=True):
        first, last = jobs[job][0], jobs[job][-1]
        if last["step"] > first["step"]:
            return (last["time/finished"] - first["time/finished"]) / (last["step"] - first["step"])
    recent = [float(r["time/step_s"]) for r in rows[-5:] if isinstance(r.get("time/step_s"), (int, float))]
    return sum(recent) / len(recent) if recent else math.nan


def run_status(config: dict, run: runs_lib.Run, workdir: Path, marks: dict[str, dict],
               slurm: dict[str, tuple[str, float, int]], jobs: list[LogJob], started: float | None,
               now: float) -> RunStatus:
    """One run's row; ``jobs``: its train log's jobs (`log_jobs`), ``slurm``: SLURM's record (`sacct`),
    ``started``: `snakemake_started`."""
    R = runs_lib.results_dir(config)
    out = f"{R}/runs/{run.path}"
    work, log = workdir / out / "_work", workdir / f"{R}/logs/train/{run.path}.log"
    rows = workdir_lib.last_records(work / workdir_lib.PROGRESS)  # as written: the last is the latest step
    steps = int(runs_lib.train_settings(config, run)["total_steps"])
    step = int(rows[-1]["step"]) if rows else 0
    per = seconds_per_step(rows)
    mark = next((m for key, m in marks.items() if key.startswith(out + "/")), None)
    job = current_slurm_job(out, marks, jobs)
    state_slurm = slurm.get(job, ("", 0.0, 0))[0]
    if (workdir / out / "provenance.json").exists():
        state = "done" if trained_as_planned(workdir / out, config, run) else "changed"
    elif mark is not None:
        # a job of the live Snakemake: marked since it started (a killed Snakemake's marks stay, older)
        held = started is not None and mark.get(MARKED, 0.0) >= started - 1
        if state_slurm in SLURM_WAITING:
            state = "queued"
        elif state_slurm in ("RUNNING", "COMPLETING") or (not state_slurm and held):
            state = "running"
        else:
            state = "failed" if state_slurm in SLURM_FAILED else "stopped"
    elif state_slurm in SLURM_FAILED:  # the job's own Snakemake unmarked it (a kill leaves no error in the log)
        state = "failed"
    elif jobs and jobs[-1].end:
        state = jobs[-1].end
    elif rows or log.exists():
        state = "stopped"
    else:
        state = "waiting"
    finish = ""
    if state == "running" and not math.isnan(per):
        finish = datetime.fromtimestamp(now + (steps - step) * per).strftime("%Y-%m-%d %H:%M")
    # each job's GPU hours: SLURM's elapsed time times the GPUs it gave the job, else its own times the rule's
    seconds = gpu_seconds(with_progress(jobs, rows, now if state == "running" else None), slurm, run_gpus(config, run))
    latest = rows[-1] if rows else {}
    return RunStatus(run.study, run.model, run.setting, run.seed, state, step, steps, per, finish,
                     _num(latest.get("reward/mean")), _num(latest.get("reward/oracle_acc")), seconds / 3600, job)


def trained_as_planned(out: Path, config: dict, run: runs_lib.Run) -> bool:
    """Whether the finished run in ``out`` trained with the settings the config gives it now (its
    ``train_config.json``); a changed one Snakemake trains again."""
    try:
        written = json.loads((out / "train_config.json").read_text())
    except (OSError, ValueError):
        return True  # older outputs: nothing to compare
    return written == json.loads(json.dumps(runs_lib.train_settings(config, run)))


def gpu_seconds(jobs: list[LogJob], slurm: dict[str, tuple[str, float, int]], n_gpus: int) -> float:
    """A run's GPU seconds: each job's SLURM elapsed time times the GPUs SLURM gave it, else its log's seconds
    times the rule's GPUs. SLURM keeps a requeued job's id and reports its last run only: the earlier runs of
    that id count by their log."""
    last = {j.slurm_job: i for i, j in enumerate(jobs)}
    seconds = 0.0
    for i, j in enumerate(jobs):
        _, elapsed, gpus = slurm.get(j.slurm_job, ("", 0.0, 0))
        seconds += elapsed * gpus if gpus and last[j.slurm_job] == i else j.seconds * n_gpus
    return seconds


def current_slurm_job(out: str, marks: dict[str, dict], jobs: list[LogJob]) -> str:
    """The SLURM job id of a run's last job ("" where none): Snakemake's incomplete mark holds it from the
    submission until the job starts, when the job's own Snakemake marks the outputs again (on the shared
    disk) without it; the job's log names it from then on."""
    submitted = [str(m["external_jobid"]) for key, m in marks.items() if key.startswith(out + "/") and m.get("external_jobid")]
    return submitted[0] if submitted else (jobs[-1].slurm_job if jobs else "")


def run_gpus(config: dict, run: runs_lib.Run) -> int:
    if config["engine"] != "verl":
        return 0
    v = runs_lib.verl_settings(config, run.model)
    return int(v.n_gpus_per_node) * int(v.nnodes)


def _num(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) else math.nan


# ---------------------------------------------------------------- the other jobs of the plan


def planned_jobs(config: dict) -> list[tuple[str, str, str, str, int]]:
    """(rule, study, output, benchmark file, GPUs) of every generate_checkpoint, grade, probe and
    prompt_stats job of the plan (the rules' paths: rules/eval.smk, probe.smk, train.smk)."""
    R = runs_lib.results_dir(config)
    vllm = config["eval"]["engine"] == "vllm"
    per_run = config["eval"].get("generate_per") == "run"  # one generation job per run, else per checkpoint
    jobs, seen = [], set()
    for study, model, setting, seed, step, _ in runs_lib.evaluations(config):
        run = runs_lib.Run.of(study, model, setting, seed)
        o = runs_lib.checkpoint_owner(config, run, step)
        where = o.path if per_run else f"{o.path}/step{step}"
        for job in (("generate_checkpoint", o.study, f"{R}/eval/{where}/samples.parquet",
                     f"{R}/timings/eval/{where}/generate.tsv", int(vllm)),
                    ("grade", study, f"{R}/eval/{run.path}/graded.parquet", "", 0)):
            if job[2] not in seen:
                seen.add(job[2])
                jobs.append(job)
    gpu = int(config["engine"] == "verl")
    jobs += [("probe", run.study, f"{R}/probes/{run.path}/step{step}.json", f"{R}/timings/probes/{run.path}/step{step}.tsv",
              gpu) for run, step in runs_lib.probes(config)]
    stats = {(run.model, config["studies"][run.study]["train_set"]) for run in runs_lib.runs(config)
             if runs_lib.needs_prompt_stats(config, run)}
    jobs += [("prompt_stats", "", f"{R}/prompt_stats/{m}/{d}.parquet", f"{R}/timings/prompt_stats/{m}/{d}.tsv",
              int(vllm)) for m, d in sorted(stats)]
    return jobs


def benchmark_seconds(path: Path) -> float:
    """A finished job's wall seconds, from Snakemake's benchmark file (0 where there is none)."""
    try:
        rows = list(csv.DictReader(path.read_text().splitlines(), delimiter="\t"))
        return float(rows[-1]["s"]) if rows else 0.0
    except (OSError, KeyError, ValueError):
        return 0.0


# ---------------------------------------------------------------- the plan's estimate


def estimate(config: dict, workdir: Path = Path(".")) -> tuple[float, dict[str, float]] | None:
    """The cost model's A100 hours of the GPU jobs, in all and per study; None for the CPU engine (no GPU). The
    jobs of a model or set whose size is not known are left out (``vicurl.planning.cost.unknown`` says which)."""
    from vicurl.planning import cost

    if config["engine"] != "verl":
        return None
    studies = cost.by_study(cost.jobs(config, workdir=workdir))
    return sum(studies.values()), studies


# ---------------------------------------------------------------- all of it


def status(config: dict, workdir: Path, with_estimate: bool = True) -> dict[str, Any]:
    """The runs' states and the per-study and overall counts (``main`` prints them)."""
    now = time.time()
    marks = incomplete(workdir)
    R = runs_lib.results_dir(config)
    plan = runs_lib.runs(config)
    logs = {run.path: log_jobs(workdir / f"{R}/logs/train/{run.path}.log") for run in plan}
    slurm = sacct([str(m["external_jobid"]) for m in marks.values() if m.get("external_jobid")]
                  + [j.slurm_job for jobs in logs.values() for j in jobs])
    started = snakemake_started(workdir) if marks else None
    runs = [run_status(config, run, workdir, marks, slurm, logs[run.path], started, now) for run in plan]
    studies: dict[str, dict[str, Any]] = {}

    def count(study: str, rule: str, done: bool, hours: float) -> None:
        for name in (study, "all") if study else ("all",):
            s = studies.setdefault(name, {"jobs": {}, "gpu_hours": 0.0})
            planned, finished = s["jobs"].get(rule, (0, 0))
            s["jobs"][rule] = (planned + 1, finished + int(done))
            s["gpu_hours"] += hours

    for r in runs:
        count(r.study, "train", r.state == "done", r.gpu_hours)
    for rule, study, output, timing, gpus in planned_jobs(config):
        done = (workdir / output).exists() and output not in marks
        count(study, rule, done, benchmark_seconds(workdir / timing) * gpus / 3600 if done and gpus else 0.0)
    est = estimate(config, workdir) if with_estimate else None
    return {"runs": runs, "studies": studies, "estimate": est}


def _fmt(x: float, spec: str) -> str:
    return "-" if isinstance(x, float) and math.isnan(x) else format(x, spec)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("targets", nargs="*", help="a target's plan instead of where the study stands (name it before "
                    "--configfile)")
    ap.add_argument("--configfile", nargs="+", type=Path, default=[], help="the config files, as given to Snakemake")
    ap.add_argument("--config", nargs="+", default=[], metavar="KEY=VALUE",
                    help="config overrides, as given to Snakemake's --config")
    ap.add_argument("--workdir", type=Path, default=Path("."), help="Snakemake's working directory")
    ap.add_argument("--csv", type=Path, help="the runs' table (default: <results>/status.csv; the studies' beside it, "
                    "status_studies.csv)")
    ap.add_argument("--no-estimate", action="store_true", help="leave out the cost model's estimate")
    a = ap.parse_args(argv)
    try:
        config = load_config(a.configfile, a.config)
    except (ConfigError, OSError, ValueError) as e:  # a config file missing or invalid, a key wrong
        ap.exit(2, f"vicurl.status: {e}\n")
    if a.targets:
        from vicurl.planning import target

        try:
            jobs = target.dry_run(a.targets, a.configfile, a.config, a.workdir)
        except target.DryRunFailed as e:
            ap.exit(2, f"vicurl.status: {e}\n")
        for line in target.render(target.plan(a.targets, config, jobs, a.workdir)):
            print(line)
        return
    result = status(config, a.workdir, not a.no_estimate)
    runs = result["runs"]
    head = f"{'study':<12}{'model':<20}{'setting':<30}{'seed':>5}  {'state':<8}{'step':>10}{'s/step':>9}  {'finish':<17}{'reward':>8}{'acc':>7}{'GPU h':>9}"
    print(head)
    for r in runs:
        print(f"{r.study:<12}{r.model:<20}{r.setting:<30}{r.seed:>5}  {r.state:<8}{f'{r.step}/{r.steps}':>10}"
              f"{_fmt(r.s_per_step, '.1f'):>9}  {r.finish:<17}{_fmt(r.reward, '.3f'):>8}{_fmt(r.accuracy, '.3f'):>7}"
              f"{r.gpu_hours:>9.1f}")
    states = {s: sum(r.state == s for r in runs)
              for s in ("done", "changed", "running", "queued", "stopped", "failed", "waiting")}
    print("\nruns: " + ", ".join(f"{n} {s}" for s, n in states.items() if n))
    est = result["estimate"]
    rules = [r for r in RULES if any(r in s["jobs"] for s in result["studies"].values())]
    print(f"\n{'study':<20}" + "".join(f"{r:>20}" for r in rules) + f"{'GPU h spent':>13}{'estimate':>10}")
    table = []
    for name, s in sorted(result["studies"].items(), key=lambda kv: kv[0] == "all"):
        cells = [f"{s['jobs'][r][1]}/{s['jobs'][r][0]}" if r in s["jobs"] else "-" for r in rules]  # done/planned
        jobs = "".join(f"{c:>20}" for c in cells)
        figure = (est[0] if name == "all" else est[1].get(name, math.nan)) if est else math.nan
        print(f"{name:<20}{jobs}{s['gpu_hours']:>13.1f}{_fmt(figure, ',.0f'):>10}")
        table.append({"study": name, **{f"{rule}_{what}": s["jobs"].get(rule, (0, 0))[i]
                                        for rule in rules for i, what in ((1, "done"), (0, "planned"))},
                      "gpu_hours": s["gpu_hours"], "estimate_a100_hours": figure})
    if est is None and not a.no_estimate:
        print("(no estimate: the CPU engine uses no GPU)")
    elif est is not None:
        from vicurl.planning import cost

        for why in cost.unknown(config, a.workdir).values():
            print(f"(not in the estimate: {why})")
    path = a.csv or a.workdir / runs_lib.results_dir(config) / "status.csv"
    _write_csv(path, [asdict(r) for r in runs], [fl.name for fl in fields(RunStatus)])
    _write_csv(path.with_name(path.stem + "_studies.csv"), table, list(table[0]) if table else ["study"])
    print(f"\nthe tables: {path}, {path.with_name(path.stem + '_studies.csv')}")


def _write_csv(path: Path, rows: list[dict[str, Any]], columns: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
