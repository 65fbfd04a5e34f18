"""A verdict depends on the response, the gold, the answer type and the software, never on the machine's load.

Every item has a budget of its worker's CPU time (``vicurl.grading.symbolic``): the same batch graded on an
idle pool, on a machine with more busy processes than cores (started here, ended here), and with the workers
slowed (paused with SIGSTOP in the middle of their items, over and over) gets the same verdicts; a
pathological item is a timeout at its CPU budget idle and loaded alike; an item paused for longer than its
budget in wall time is still graded; a training step's oracle rewards are the same idle and under load. The
batch: tests/unit/test_grading_parts.py's CASES, a pathological answer, and real (response, gold) pairs of
the benchmark files (or, without them, of the schema fixtures).
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import pytest
import torch

from vicurl.engines import step as engine_step
from vicurl.grading import equiv, graders, symbolic
from vicurl.grading.graders import grade_batch
from vicurl.grading.verdicts import TIMEOUT

import real_benchmarks as rb  # tests/real_benchmarks.py
from grading_cases import CASES  # tests/grading_cases.py

BUDGET = 3.0  # CPU seconds an item; the default's a third, so that the timeouts here cost little
TOWER = "\\boxed{9^{9^{9^{9}}}}"


def cpu_of_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@contextmanager
def saturated():
    """More busy processes than the machine has cores, for as long as the block runs."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range((os.cpu_count() or 1) + 2)]
    try:
        time.sleep(0.5)  # every spinner running
        yield
    finally:
        for p in spinners:
            p.kill()
            p.wait()


@contextmanager
def slowed(pool: symbolic.SymbolicPool, pause: float = 0.4, gap: float = 0.2):
    """The pool's workers paused (SIGSTOP ... SIGCONT) over and over while the block runs (at the lowest priority
    too, a worker under CI's load could wait past the hang guard for its share of a core); yields the pauses made so far (a list, one entry per pause of a worker that was busy or idle)."""
    pauses: list[int] = []
    done = threading.Event()

    def pause_workers():
        while not done.is_set():
            pids = [w.proc.pid for w in list(pool._workers) if w.proc.poll() is None]
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGSTOP)
                    pauses.append(pid)
                except ProcessLookupError:  # replaced meanwhile
                    pass
            done.wait(pause)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            done.wait(gap)

    thread = threading.Thread(target=pause_workers, daemon=True)
    thread.start()
    try:
        yield pauses
    finally:
        done.set()
        thread.join()
        for w in pool._workers:  # none left stopped
            if w.proc.poll() is None:
                os.kill(w.proc.pid, signal.SIGCONT)


def fresh_pool() -> symbolic.SymbolicPool:
    """A new pool with empty caches, so that every condition computes every verdict itself."""
    equiv.cache_clear()
    graders._float_cache.clear()
    pool = symbolic.configure(workers=2, cpu_seconds=BUDGET)
    pool.start()
    return pool


def real_pairs(minimum: int) -> tuple[list[str], list[dict]]:
    """(response, problem) pairs of the real benchmark files: each gold written as a model would, rewritten,
    and against the next problem's gold; the schema fixtures' where no benchmark file is found."""
    names = rb.available() or rb.fixtures()
    texts, problems = [], []
    for name in names:
        rows = rb.load(name)
        for i, p in enumerate(rows[:60]):
            other = rows[(i + 1) % len(rows)]
            texts += [rb.as_model_would(p["answer"]), rb.rewritten(p["answer"], p["answer_type"]),
                      rb.as_model_would(other["answer"])]
            problems += [p, p, p]
    if rb.available():
        assert len(texts) >= minimum, f"only {len(texts)} real pairs"
    return texts, problems


@pytest.fixture(scope="module")
def batch():
    texts = [c[0] for c in CASES] + [TOWER]
    problems = [{"answer": c[1], "answer_type": c[2]} for c in CASES] + [{"answer": "1", "answer_type": "math"}]
    more_texts, more_problems = real_pairs(minimum=500)
    return texts + more_texts, problems + more_problems


@pytest.fixture(autouse=True, scope="module")
def _default_pool_after():
    yield
    symbolic.configure(workers=2, cpu_seconds=symbolic.CPU_SECONDS)


def test_the_same_verdicts_idle_loaded_and_slowed(batch):
    texts, problems = batch
    pool = fresh_pool()
    idle = grade_batch(texts, problems)
    assert pool.stats["hung"] == 0
    reached = pool.stats["items"]
    assert reached >= 20, "the batch hardly reaches the workers"
    assert [ok for _, ok in idle[: len(CASES)]] == [c[3] for c in CASES]
    assert idle[len(CASES)][1] is TIMEOUT  # the tower ran out of its budget

    pool = fresh_pool()
    with saturated():
        loaded = grade_batch(texts, problems)
    assert loaded == idle
    assert pool.stats["items"] == reached and pool.stats["hung"] == 0

    pool = fresh_pool()
    with slowed(pool) as pauses:
        paused = grade_batch(texts, problems)
    assert len(pauses) >= 2, "the workers were never paused while they graded"
    assert paused == idle
    assert pool.stats["hung"] == 0


@pytest.mark.parametrize("load", ["idle", "saturated"])
def test_a_pathological_item_ends_at_its_cpu_budget(load):
    """Python code (sympy's power tower) ends at the budget; C code that checks for no signal is ended by the
    worker's CPU limit a second or two later. Both are timeouts, whatever the load."""
    pool = fresh_pool()
    with saturated() if load == "saturated" else _nothing():
        [tower] = pool.run([{"op": "equiv", "pred": "9^{9^{9^{9}}}", "gold": "1"}])
        assert tower.get("timeout") is True
        assert BUDGET <= tower["cpu"] < BUDGET + 0.5

        worker = pool._workers[0]
        before = cpu_of_children() + _cpu_of(worker.proc.pid)  # what the worker had used before the item
        [in_c] = pool.run([{"op": "spin_in_c"}])
        assert in_c == {"timeout": True} and worker.proc.returncode == -signal.SIGXCPU
        used = cpu_of_children() - before
        assert BUDGET <= used < BUDGET + 2.5, f"the item used {used:.2f} CPU seconds"
        assert pool.equiv([(TOWER[7:-1], "1"), ("2x", "x+x")]) == [TIMEOUT, True]
    assert pool.stats["hung"] == 0


def test_an_item_paused_past_its_budget_in_wall_time_is_graded():
    """Half its budget in CPU time, paused for 1.5 budgets in the middle: a wall-clock limit would end it."""
    pool = fresh_pool()
    worker = pool._workers[0]
    timer = threading.Timer(0.3 * BUDGET, lambda: os.kill(worker.proc.pid, signal.SIGSTOP))
    resume = threading.Timer(1.8 * BUDGET, lambda: os.kill(worker.proc.pid, signal.SIGCONT))
    timer.start(), resume.start()
    t0 = time.monotonic()
    try:
        [res] = pool.run([{"op": "burn", "cpu": 0.5 * BUDGET}])
    finally:
        timer.cancel(), resume.cancel()
        os.kill(worker.proc.pid, signal.SIGCONT)
    assert time.monotonic() - t0 > 1.5 * BUDGET  # the pause did land in the item
    assert res["ok"] is True and res["cpu"] < BUDGET


def test_a_training_steps_oracle_rewards_are_the_same_idle_and_under_load(batch):
    """The step's scoring (what both engines call) on B prompts x G rollouts of real answers, the tower
    among them: the same rewards, and the same count of timeouts in the step's metrics."""
    texts, problems = batch
    g = 4
    b = min(len(texts) // g, 40)
    rows = [(t, problems[(i // g) * g]) for i, t in enumerate(texts[: b * g])]  # each group: one problem's gold
    rows[1] = (TOWER, rows[0][1])
    resp = [t for t, _ in rows]
    golds = [rows[j * g][1]["answer"] for j in range(b)]
    types = [rows[j * g][1]["answer_type"] for j in range(b)]
    options = [list(rows[j * g][1].get("options") or []) for j in range(b)]
    mask = torch.ones(b * g, 3)
    entropys = torch.full((b * g, 3), 0.5)

    def step():
        s = engine_step.score("oracle", {}, resp, mask, entropys, golds=golds, answer_types=types, options=options,
                              group_size=g, vocab_size=100)
        return s.rewards.tolist(), s.metrics["reward/timeouts"]

    fresh_pool()
    idle = step()
    assert idle[0][1] == 0.0 and idle[1] >= 1  # the tower: no reward, counted
    assert 0 < sum(idle[0]) < len(resp)
    fresh_pool()
    with saturated():
        assert step() == idle


@contextmanager
def _nothing():
    yield


def _cpu_of(pid: int) -> float:
    """A live process's CPU seconds (user + system), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
