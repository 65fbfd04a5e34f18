"""Grader check and speed on the real benchmark answers.

    .venv/bin/python measurements/grading.py [--files math500.jsonl ...] [--no-speed] [--workers N]

1. Self / cross check, per file (prepared by the project's own `vicurl.data`, plus the schema
   fixtures of MMLU-Pro, GPQA and WebInstruct): each gold answer written as a model would
   (``... \\boxed{gold}``) is graded against its own problem (must be correct), the same answer
   rewritten (``real_benchmarks.rewritten``: ``a/b`` for ``\\frac``, "27.0", "x = 1.42", "\\text{Yes}", ...)
   against its own problem (should be correct), and the gold against the next problem's gold
   (must be wrong unless the two golds are the same value). Every miss is printed.
2. Speed: gradings per second on the same (response, gold) pairs, for the project's grader
   (``grade_batch``: fast paths, then math-verify in the worker pool; cold cache, warm workers)
   and for math-verify called directly in this process (``verify(parse(gold), parse(response))``
   with its default signal-based timeouts, LaTeX extraction); and the CPU seconds of the slowest comparison
   in the pool, against its budget.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

from vicurl.grading import equiv, symbolic
from vicurl.grading.graders import grade_batch

REPO = Path(__file__).resolve().parents[1]


def _helper():
    spec = importlib.util.spec_from_file_location("real_benchmarks", REPO / "tests" / "real_benchmarks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def self_cross(problems: list[dict], as_model_would, rewritten) -> dict:
    """Grade each gold against itself, rewritten, and against the next problem's gold."""
    n = len(problems)
    texts = [as_model_would(p["answer"]) for p in problems]
    self_res = grade_batch(texts, problems)
    variants = [rewritten(p["answer"], p["answer_type"]) for p in problems]
    var_res = grade_batch(variants, problems)
    var_miss = [(p["id"], p["answer"], v[-60:]) for p, v, (_, ok) in zip(problems, variants, var_res) if not ok]
    others = [problems[(i + 1) % n] for i in range(n)]
    cross_res = grade_batch(texts, others)
    self_miss = [(p["id"], p["answer"], ex) for p, (ex, ok) in zip(problems, self_res) if not ok]
    same_gold, cross_miss = 0, []
    for p, q, (ex, ok) in zip(problems, others, cross_res):
        if ok:
            if equiv.fast_equiv(p["answer"], q["answer"]):
                same_gold += 1  # two problems with the same answer: correct is right
            else:
                cross_miss.append((p["id"], p["answer"], q["answer"]))
    return {
        "n": n,
        "self_correct": (n - len(self_miss)) / n,
        "variant_correct": (n - len(var_miss)) / n,
        "variant_miss": var_miss,
        "cross_correct": sum(ok for _, ok in cross_res) / n,
        "cross_same_gold": same_gold,
        "self_miss": self_miss,
        "cross_miss": cross_miss,
    }


def mathverify_direct(pairs: list[tuple[str, str]]) -> float:
    """Gradings per second of math-verify in this process."""
    from math_verify import LatexExtractionConfig, parse, verify

    cfg = [LatexExtractionConfig()]
    t0 = time.perf_counter()
    for text, gold in pairs:
        try:
            verify(parse("\\boxed{" + gold + "}", extraction_config=cfg), parse(text, extraction_config=cfg))
        except BaseException as e:  # TimeoutException is a BaseException
            if isinstance(e, KeyboardInterrupt):
                raise
    return len(pairs) / (time.perf_counter() - t0)


def main() -> None:
    rb = _helper()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", nargs="*", default=rb.available() + rb.fixtures())
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    pool = symbolic.configure(workers=args.workers)
    print(f"benchmarks: {rb.BENCH_DIR} (prepared by vicurl.data), schema fixtures: {rb.FIXTURES}")
    print(f"grading workers: {pool.n_workers}, per-item budget {pool.cpu_seconds:.0f} CPU seconds\n")

    print(f"{'file':36s} {'n':>5s} {'self correct':>13s} {'rewritten':>10s} {'cross correct':>14s} {'same gold':>10s}")
    all_problems, all_texts = [], []
    for name in args.files:
        problems = rb.load(name)
        r = self_cross(problems, rb.as_model_would, rb.rewritten)
        print(f"{name:36s} {r['n']:5d} {100 * r['self_correct']:12.1f}% {100 * r['variant_correct']:9.1f}% "
              f"{100 * r['cross_correct']:13.1f}% {r['cross_same_gold']:10d}")
        for pid, gold, ex in r["self_miss"]:
            print(f"    SELF MISS  {pid}: gold {gold!r}, extracted {ex!r}")
        for pid, gold, v in r["variant_miss"]:
            print(f"    REWRITTEN MISS {pid}: gold {gold!r}, written {v!r}")
        for pid, gold, other in r["cross_miss"]:
            print(f"    CROSS MISS {pid}: {gold!r} graded equal to {other!r}")
        all_problems += problems
        all_texts += [rb.as_model_would(p["answer"]) for p in problems]
    print(f"\npool: {pool.stats}")

    if args.no_speed:
        return
    n = len(all_problems)
    others = [all_problems[(i + 1) % n] for i in range(n)]
    problems2 = all_problems + others
    texts2 = all_texts + all_texts
    equiv.cache_clear()
    t0 = time.perf_counter()
    grade_batch(texts2, problems2)
    ours = len(texts2) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    grade_batch(texts2, problems2)
    cached = len(texts2) / (time.perf_counter() - t0)
    math_pairs = [(t, p["answer"]) for t, p in zip(texts2, problems2)]
    direct = mathverify_direct(math_pairs)
    from vicurl.grading.extract import extract_boxed

    undecided = list(dict.fromkeys(
        (extract_boxed(t), p["answer"]) for t, p in zip(texts2, problems2)
        if p["answer_type"] == "math" and equiv.fast_equiv(extract_boxed(t), p["answer"]) is None))
    t0 = time.perf_counter()
    answers = pool.run([{"op": "equiv", "pred": p, "gold": g} for p, g in undecided])
    symbolic_rate = len(undecided) / (time.perf_counter() - t0)
    slowest = max(answers, key=lambda r: r.get("cpu", 0.0), default={})
    print(f"\nspeed on {len(texts2)} (response, gold) pairs of the files above (self + cross):")
    rows = [(f"project grader, cold cache, {pool.n_workers} worker(s)", ours),
            ("project grader, warm cache", cached),
            (f"worker pool alone ({len(undecided)} math pairs left by the fast paths)", symbolic_rate),
            ("math-verify directly, one process", direct)]
    for label, rate in rows:
        print(f"  {label:62s} {rate:10.1f} gradings/s")
    print(f"slowest comparison in the pool: {slowest.get('cpu', 0.0):.3f} CPU seconds of its {pool.cpu_seconds:g}"
          f"{' (timed out)' if slowest.get('timeout') else ''}")


if __name__ == "__main__":
    main()
