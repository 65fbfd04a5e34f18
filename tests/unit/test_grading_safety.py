"""Pathological answers: every grading returns within the timeout with a score, and nothing runs.

The per-item timeout is 3 s here (10 s by default); each check allows that plus a margin.
"""

import builtins
import os
import signal
import time

import pytest

from vicurl.grading import equiv, symbolic
from vicurl.grading.graders import ANSWER_TYPES, grade_batch
from vicurl.rewards import Group, majority_vote, semantic

TIMEOUT = 3.0
MARGIN = 4.0  # the caller's own parsing and the kill; a replaced worker's restart is waited for untimed (start)


@pytest.fixture(scope="module")
def pool():
    p = symbolic.configure(workers=2, timeout=TIMEOUT)
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
def test_pathological_inputs_return_in_time_and_execute_nothing(pool, tmp_path, answer_type, no_eval_in_process):
    marker = tmp_path / "pwned_xyz"
    cases = pathological(str(marker))
    golds = ["1", "(x+1)^2", "\\frac{1}{2}", "9^{9^{9^{9}}}"]  # a pathological gold too
    for name, text in cases.items():
        for gold in golds:
            problem = {"answer": gold, "answer_type": answer_type, "options": ["a", "b", "c", "d"]}
            pool.start()  # a worker killed by the last item restarts outside the timed check
            t0 = time.monotonic()
            (extracted, correct), = grade_batch([text], [problem])
            took = time.monotonic() - t0
            assert took < TIMEOUT + MARGIN, f"{name} vs {gold!r} ({answer_type}) took {took:.1f} s"
            assert isinstance(correct, bool)
            if name == "empty_box":
                assert extracted is None and correct is False
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
    pool.start()  # workers an earlier test's timeouts replaced: their imports are not what is timed
    for fn in (majority_vote, semantic):
        t0 = time.monotonic()
        r = fn(Group(texts=texts))
        assert len(r.rewards) == len(texts)
        # every distinct pair may cost the timeout at worst; in practice math-verify gives up first
        assert time.monotonic() - t0 < 30
    assert not marker.exists()


def test_a_stuck_worker_is_killed_and_replaced(pool):
    """An item that never returns (sympy inside C code) costs the timeout; the pool carries on."""
    pool.start()  # the workers the last test's timeouts replaced: their imports are not what is timed
    started = pool.stats["started"]
    t0 = time.monotonic()
    res = pool.run([{"op": "block"}, {"op": "equiv", "pred": "2/4", "gold": "0.5"}, {"op": "block"}])
    took = time.monotonic() - t0
    assert res[0]["error"] == res[2]["error"] == "timeout" and res[1]["ok"] is True
    assert took < 2 * TIMEOUT + MARGIN
    assert pool.stats["started"] == started + 2  # each stuck worker killed and replaced
    timeouts = pool.stats["timeouts"]
    # fresh workers answer (a cheap pair: the test pool's math-verify alarms are 1 s of wall time, which an
    # expansion like (a+b)^2 overran under CI's full load)
    assert pool.equiv([("2x", "x+x")]) == [True]
    assert pool.stats["timeouts"] == timeouts


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
