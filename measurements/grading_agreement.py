"""The project's math grader against math-verify on real solutions: accuracy, agreement, false accepts.

    .venv/bin/python measurements/grading_agreement.py [--show N]

Responses are the worked solutions of the real benchmark files (MATH-500, AIME 2024, Minerva
sample, DeepScaleR's AIME part: human-written, ending in ``\\boxed{}`` as the models are prompted
to), prepared by ``vicurl.data`` as the workflow prepares them, and variants built from them:

* ``own gold``      each solution against its own gold answer (correct);
* ``other gold``    each solution against the gold of the next problem whose gold is another
                    value (wrong): two plain numbers of different value, or two answers that are
                    not numbers and differ as normalized strings;
* ``near miss``     each solution with the first integer of its final box increased by one
                    (wrong: ``\\frac{3}{4}`` -> ``\\frac{4}{4}``, ``2\\sqrt{2}`` -> ``3\\sqrt{2}``);
* ``several parts`` every gold with several parts (``1,-2``, OlympiadBench's multi-answer rows):
                    the solution's final box rewritten as one box per part, in the gold's order
                    and reversed (correct), with a part left out or one part changed (wrong);
* ``matrices``      ``pmatrix`` golds: the final box rewritten as ``bmatrix`` / ``array``
                    (correct) and with an entry changed (wrong).

Each response is graded by the project (``grade_batch``: boxes of the final answer, fast paths,
math-verify in workers) and by math-verify alone on the whole response
(``verify(parse(gold), parse(response))``, LaTeX extraction, as its README shows). The truth is
the label above. Prints per group and overall: accuracy of each against the truth, their agreement,
false accepts (a wrong answer graded correct: a reward an RL run can exploit) and false rejects;
then the responses where either grader is wrong.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path

from vicurl.grading import equiv
from vicurl.grading.extract import extract_boxed, final_boxes, last_box
from vicurl.grading.graders import grade_batch
from vicurl.grading.parts import split_parts

REPO = Path(__file__).resolve().parents[1]

FILES = ["math500.jsonl", "aime24.jsonl", "minerva_math.sample.jsonl", "deepscaler_train_aime.json",
         "olympiadbench.sample.jsonl"]


def _real_benchmarks():
    spec = importlib.util.spec_from_file_location("real_benchmarks", REPO / "tests" / "real_benchmarks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _replace_final_box(solution: str, new: str) -> str:
    """The solution with its last box (command and argument) replaced by ``new``."""
    box = last_box(solution)
    if box is None:
        return solution.rstrip() + f"\n\nThe answer is {new}."
    return solution[: box[0]] + new + solution[box[1] :]


def _boxes(parts: list[str], joiner: str = ", ") -> str:
    return joiner.join(f"\\boxed{{{p}}}" for p in parts)


def _changed(part: str) -> str | None:
    """A different value: the first integer in the part plus one (None when it has no digit)."""
    m = re.search(r"\d+", part)
    return None if m is None else part[: m.start()] + str(int(m.group(0)) + 1) + part[m.end() :]


def cases(problems: list[dict]) -> list[tuple[str, str, dict, bool]]:
    """(group, response, problem, correct) for one file's problems."""
    out = []
    with_box = [p for p in problems if final_boxes(str(p.get("solution") or ""))]
    for i, p in enumerate(with_box):
        out.append(("own gold", p["solution"], p, True))
        box = extract_boxed(p["solution"])
        near = _changed(box)
        if near is not None:
            out.append(("near miss", _replace_final_box(p["solution"], f"\\boxed{{{near}}}"), p, False))
        a = equiv.to_number(p["answer"])
        for q in with_box[i + 1 :] + with_box[:i]:
            b = equiv.to_number(q["answer"])
            different = (a != b) if (a is not None and b is not None) else (
                a is None and b is None and equiv.normalize(p["answer"]) != equiv.normalize(q["answer"]))
            if different:
                out.append(("other gold", p["solution"], {**q, "solution": p["solution"]}, False))
                break
    for p in problems:
        sol = str(p.get("solution") or "")
        parts = split_parts(p["answer"])
        if len(parts) > 1:
            out.append(("several parts", _replace_final_box(sol, _boxes(parts)), p, True))
            out.append(("several parts", _replace_final_box(sol, _boxes(parts[::-1], " and ")), p, True))
            out.append(("several parts", _replace_final_box(sol, _boxes(parts[:-1])), p, False))
            changed = _changed(parts[0])
            if changed is not None and equiv.to_number(parts[0]) is not None:
                out.append(("several parts", _replace_final_box(sol, _boxes([changed] + parts[1:])), p, False))
        if "pmatrix" in p["answer"] and final_boxes(sol):
            gold = p["answer"]
            out.append(("matrices", _replace_final_box(sol, f"\\boxed{{{gold.replace('pmatrix', 'bmatrix')}}}"), p, True))
            cols = "c" * (gold.split("\\\\")[0].count("&") + 1)
            arr = gold.replace("\\begin{pmatrix}", f"\\left(\\begin{{array}}{{{cols}}}").replace(
                "\\end{pmatrix}", "\\end{array}\\right)")
            out.append(("matrices", _replace_final_box(sol, f"\\boxed{{{arr}}}"), p, True))
            changed = _changed(gold)
            if changed is not None:
                out.append(("matrices", _replace_final_box(sol, f"\\boxed{{{changed}}}"), p, False))
    return out


def math_verify(response: str, gold: str) -> bool:
    from math_verify import LatexExtractionConfig, parse, verify

    cfg = [LatexExtractionConfig()]
    try:
        return bool(verify(parse("\\boxed{" + gold + "}", extraction_config=cfg), parse(response, extraction_config=cfg)))
    except BaseException as e:  # its TimeoutException is a BaseException
        if isinstance(e, KeyboardInterrupt):
            raise
        return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--show", type=int, default=30, help="responses where a grader is wrong to print (default 30)")
    args = ap.parse_args()
    import logging

    logging.disable(logging.WARNING)  # math-verify logs every parse failure
    rb = _real_benchmarks()
    all_cases = []
    for name in FILES:
        if (rb.BENCH_DIR / name).exists():
            all_cases += [(name, *c) for c in cases(rb.load(name))]
    ours = [ok for _, ok in grade_batch([c[2] for c in all_cases], [c[3] for c in all_cases])]
    theirs = [math_verify(c[2], c[3]["answer"]) for c in all_cases]

    groups = ["own gold", "other gold", "near miss", "several parts", "matrices"]
    print(f"{len(all_cases)} responses from {', '.join(FILES)}\n")
    print(f"{'group':16s} {'n':>6s} {'project':>9s} {'math-verify':>12s} {'agree':>7s} "
          f"{'false acc (project / m-v)':>27s} {'false rej (project / m-v)':>27s}")
    for g in groups + ["all"]:
        idx = [i for i, c in enumerate(all_cases) if g == "all" or c[1] == g]
        if not idx:
            continue
        truth = [all_cases[i][4] for i in idx]
        o, t = [ours[i] for i in idx], [theirs[i] for i in idx]
        acc = lambda v: 100 * sum(a == b for a, b in zip(v, truth)) / len(idx)  # noqa: E731
        fa = lambda v: sum(a and not b for a, b in zip(v, truth))  # noqa: E731
        fr = lambda v: sum(b and not a for a, b in zip(v, truth))  # noqa: E731
        agree = 100 * sum(a == b for a, b in zip(o, t)) / len(idx)
        print(f"{g:16s} {len(idx):6d} {acc(o):8.1f}% {acc(t):11.1f}% {agree:6.1f}% "
              f"{fa(o):>13d} / {fa(t):<11d} {fr(o):>13d} / {fr(t):<11d}")
    wrong = [i for i, c in enumerate(all_cases) if ours[i] != c[4] or theirs[i] != c[4]]
    print(f"\nresponses where a grader is wrong: {len(wrong)} (first {min(args.show, len(wrong))})")
    for i in wrong[: args.show]:
        name, group, response, p, truth = all_cases[i]
        tail = response[-90:].replace("\n", " ")
        print(f"  [{name} {p['id']} {group}] truth {truth}, project {ours[i]}, math-verify {theirs[i]}; "
              f"gold {p['answer']!r}; ...{tail!r}")


if __name__ == "__main__":
    main()
