"""Pathological answers: every grading ends with a verdict (True, False or a timeout at the item's CPU budget),
none needs the pool's hang guard, and nothing runs.

The per-item CPU budget is 3 s here (10 s by default). tests/unit/test_grading_under_load.py shows the
verdicts do not depend on the machine's load.
"""

import builtins
import os
import signal
import threading

import pytest

from vicurl.algos.rewards import Group, majority_vote, semantic
from vicurl.grading import equiv, symbolic
from vicurl.grading.graders import ANSWER_TYPES, grade_batch
from vicurl.grading.verdicts import TIMEOUT

BUDGET = 3.0


@pytest.fixture(scope="module")
def pool():
    p = symbolic.configure(workers=2, cpu_seconds=BUDGET)
    yield p
    p.close()


def pathological(marker: str) -> dict[str, str]:
    payload = f"__import__('os').system('touch {marker}')"
    return {
        "tower": "\\boxed{9^{9^{9^{9}}}}",
        "tower2": "\\boxed{10^{10^{10^{10^{10}}}}}",
        "big_power": "\\boxed{123456789^{123456789}}",
        "100kb_sum": "\\boxed{" + "1+" * 50_000 + "1}",
        "100kb_digits": "\\boxed{" + "7" * 100_000 + "}",
        "100kb_text": "x" * 100_000 + " the answer is " + "y" * 100_000,
        "unbalanced": "\\boxed{\\frac{1}{2",
        "unbalanced2": "}}}\\boxed{{{{1}",
        "deep_nesting": "\\boxed{" + "{" * 5000 + "1" + "}" * 5000 + "}",
        "empty_box": "\\boxed{}",
        "payload": f"\\boxed{{{payload}}}",
        "payload_eval": f"\\boxed{{eval(\"{payload}\")}}",
        "payload_exec": f"\\boxed{{exec(\"{payload}\")}}",
        "payload_text": f"\\boxed{{\\text{{{payload}}}}}",
        "payload_dollars": f"The answer is ${payload}$",
        "payload_plain": f"The answer is {payload}",
    }


@pytest.fixture
def no_eval_in_process(monkeypatch):
    """Record any eval/exec in this process whose argument mentions the payload."""
    seen = []
    real_eval, real_exec = builtins.eval, builtins.exec

    def spy(real):
        def f(src, *a, **k):
            if "touch" in str(src):
                seen.append(src)
            return real(src, *a, **k)
        return f

    monkeypatch.setattr(builtins, "eval", spy(real_eval))
    monkeypatch.setattr(builtins, "exec", spy(real_exec))
    return seen


@pytest.mark.parametrize("answer_type", sorted(ANSWER_TYPES))
def test_pathological_inputs_end_with_a_verdict_and_execute_nothing(pool, tmp_path, answer_type, no_eval_in_process):
    marker = tmp_path / "pwned_xyz"
    cases = pathological(str(marker))
    golds = ["1", "(x+1)^2", "\\frac{1}{2}", "9^{9^{9^{9}}}"]  # a pathological gold too
    hung = pool.stats["hung"]
    for name, text in cases.items():
        for gold in golds:
            problem = {"answer": gold, "answer_type": answer_type, "options": ["a", "b", "c", "d"]}
            (extracted, correct), = grade_batch([text], [problem])
            assert isinstance(correct, bool) or correct is TIMEOUT, f"{name} vs {gold!r} ({answer_type}): {correct!r}"
            if name == "empty_box":
                assert extracted is None and correct is False
    assert pool.stats["hung"] == hung, "an item needed the wall-clock guard"
    assert not marker.exists(), "model text was executed"
    assert no_eval_in_process == []


def test_payload_reaches_the_symbolic_worker_and_runs_nothing(pool, tmp_path):
    """The payload is not filtered out before math-verify: it is parsed there, and still runs nothing."""
    marker = tmp_path / "pwned_worker"
    payload = f"__import__('os').system('touch {marker}')"
    equiv.cache_clear()
    before = pool.stats["items"]
    for pred, gold in [(payload, "1"), (f"eval(\"{payload}\")", "x"), ("1", payload), (payload, payload + " ")]:
        equiv.is_equiv(pred, gold)
    assert pool.stats["items"] > before  # the worker did see the payload
    assert pool.to_float([payload]) == [None]
    assert not marker.exists()


def test_rewards_on_pathological_groups(pool, tmp_path):
    marker = tmp_path / "pwned_reward"
    cases = pathological(str(marker))
    texts = [cases[k] for k in ("tower", "100kb_sum", "unbalanced", "empty_box", "payload", "payload_eval", "payload")]
    texts.append("\\boxed{1}")
    hung = pool.stats["hung"]
    for fn in (majority_vote, semantic):
        r = fn(Group(texts=texts))
        assert len(r.rewards) == len(texts)
    assert pool.stats["hung"] == hung
    assert not marker.exists()


def test_a_hung_worker_is_replaced_and_its_item_tried_once_more():
    """An item that neither answers nor uses CPU time (a deadlock) is ended by the wall-clock guard, tried again
    in a fresh worker, then counted as a timeout; the pool carries on. The guard is 2 s here (its default is
    far above any CPU budget: ``symbolic.guard_for``)."""
    pool = symbolic.SymbolicPool(workers=2, cpu_seconds=BUDGET, guard_seconds=2.0)
    try:
        pool.start()
        started = pool.stats["started"]
        res = pool.run([{"op": "block"}, {"op": "equiv", "pred": "2/4", "gold": "0.5"}, {"op": "block"}])
        assert res[0] == res[2] == {"timeout": True, "error": "hung"} and res[1]["ok"] is True
        assert pool.stats["hung"] == 4  # each block: the first worker and the one that tried again
        assert pool.stats["started"] == started + 4
        assert pool.equiv([("2x", "x+x")]) == [True]
    finally:
        pool.close()


def test_a_crashed_item_is_tried_once_more_in_a_fresh_worker(pool):
    """A worker that dies in the middle of an item (killed by the OS) loses nothing: a fresh one grades it."""
    pool.start()
    victim = pool._workers[0].proc
    threading.Timer(0.5, lambda: os.kill(victim.pid, signal.SIGKILL)).start()
    [res] = pool.run([{"op": "burn", "cpu": 1.5}])
    assert victim.returncode == -signal.SIGKILL and res["ok"] is True


def test_start_waits_until_every_worker_can_answer(pool):
    pool.close()
    pool.start()
    assert len(pool._workers) == 2 and all(w.ready for w in pool._workers)
    started = pool.stats["started"]
    assert pool.equiv([("2/4", "0.5"), ("2x", "x+x")]) == [True, True]
    assert pool.stats["started"] == started  # nothing left to start


def test_a_worker_killed_from_outside_does_not_break_the_caller(pool):
    pool.equiv([("x", "x+0")])
    victim = pool._workers[0].proc
    os.kill(victim.pid, signal.SIGKILL)  # our own child process, by id
    victim.wait()
    assert pool.equiv([("2x", "x+x"), ("3y", "y+y+y")]) == [True, True]


def test_the_trainers_grading_pool_follows_its_cpus(monkeypatch):
    """verl's trainer grades while the GPUs wait: one grader process per CPU it may run on (up to 32),
    not the default 4; VICURL_GRADER_WORKERS still wins where set."""
    import os

    from vicurl.grading import symbolic

    monkeypatch.delenv("VICURL_GRADER_WORKERS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    assert symbolic.cpu_workers() == 32 and symbolic.cpu_workers(cap=8) == 8
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert symbolic.cpu_workers() == 1
    monkeypatch.setenv("VICURL_GRADER_WORKERS", "3")
    assert symbolic.cpu_workers() == symbolic.DEFAULT_WORKERS
