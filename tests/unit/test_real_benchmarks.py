"""Every real gold answer, written as a model would, grades correct against itself (also rewritten)
and wrong against another problem's gold. The files go through the project's own dataset
preparation, so the graders see what evaluation will see. measurements/grading.py prints the
per-file rates and the speed."""

import pytest

from vicurl.grading import equiv
from vicurl.grading.graders import grade_batch

import real_benchmarks as rb  # tests/real_benchmarks.py

pytestmark = pytest.mark.usefixtures("small_pool")  # conftest.py


def check(name):
    problems = rb.load(name)
    assert problems and all(str(p["answer"]).strip() for p in problems), "every problem has a gold answer"
    texts = [rb.as_model_would(p["answer"]) for p in problems]

    misses = [(p["id"], p["answer"], ex) for p, (ex, ok) in zip(problems, grade_batch(texts, problems)) if not ok]
    assert misses == []

    rewritten = [rb.rewritten(p["answer"], p["answer_type"]) for p in problems]
    misses = [(p["id"], t[-60:]) for p, t, (_, ok) in zip(problems, rewritten, grade_batch(rewritten, problems)) if not ok]
    assert misses == []

    others = [problems[(i + 1) % len(problems)] for i in range(len(problems))]
    # graded correct against another problem only when the two golds are the same value
    wrong = [(p["answer"], q["answer"]) for p, q, (_, ok) in zip(problems, others, grade_batch(texts, others))
             if ok and not equiv.fast_equiv(p["answer"], q["answer"])]
    assert wrong == []


@pytest.mark.skipif(not rb.available(), reason=f"no benchmark files in {rb.BENCH_DIR}")
@pytest.mark.parametrize("name", rb.available() or ["none"])
def test_real_files(name):
    check(name)


@pytest.mark.parametrize("name", rb.fixtures())
def test_schema_fixtures(name):
    """MMLU-Pro (up to 10 options), GPQA (4, shuffled), WebInstruct (every answer type, text kept)."""
    check(name)
