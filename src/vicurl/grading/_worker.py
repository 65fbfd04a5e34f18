"""The grading worker: ``python -m vicurl.grading._worker CPU_SECONDS`` (started by ``symbolic.SymbolicPool``).

Reads one JSON request per line on stdin, writes one JSON result per line on stdout (after a
first line ``ready``). See ``vicurl.grading.symbolic`` for the protocol and the safety measures:
LaTeX parsing only, ``parse_expr`` disabled, address space capped at ``WORKER_MEMORY_BYTES``.

Every item has ``CPU_SECONDS`` of this process's CPU time, never of the wall clock, so a verdict
does not depend on what else runs on the machine. Two limits count it: a profiling timer that looks
at the process's CPU clock every ``CHECK_EVERY`` CPU seconds and raises ``CpuBudget`` once the budget
is spent, where Python code runs, and ``RLIMIT_CPU``, a little later, that ends the process where
sympy sits in C code that no Python signal handler interrupts (the pool reads its SIGXCPU as a
timeout). The timer only wakes the check: its own count is the kernel's tick-sampled one, which on a
busy machine runs ahead of the precise clock the decision reads. math-verify's own ``signal.alarm``
timeouts, wall-clock ones, are off.
"""

from __future__ import annotations

import json
import math
import os
import resource
import signal
import sys
import time
from typing import Any, Callable

WORKER_MEMORY_BYTES = 4 << 30
HARD_LIMIT_GRACE = 1.0  # CPU seconds past the budget before RLIMIT_CPU ends a worker stuck in C code
CHECK_EVERY = 0.05  # CPU seconds between two looks at the clock


class CpuBudget(BaseException):
    """An item's CPU budget ran out. A BaseException, as math-verify's own TimeoutException, so that the
    ``except Exception`` around every parse and comparison of math-verify lets it through."""


_deadline = [float("inf")]  # the process CPU time at which the current item's budget runs out


def _check_budget(signum, frame):
    if time.process_time() >= _deadline[0]:
        raise CpuBudget()


def within_budget(fn: Callable[[], dict[str, Any]], cpu_seconds: float) -> dict[str, Any]:
    """``fn()``'s result, or ``{"timeout": True}`` when it used ``cpu_seconds`` of CPU time or more; either with
    ``cpu``, the CPU seconds it used.

    The second check catches a budget signal that a bare ``except:`` inside sympy swallowed: the verdict is
    a timeout exactly when the CPU time ran out, whatever the code did with the signal."""
    start = time.process_time()
    resource.setrlimit(resource.RLIMIT_CPU, (math.ceil(start + cpu_seconds + HARD_LIMIT_GRACE), resource.RLIM_INFINITY))
    out: dict[str, Any] = {"timeout": True}
    _deadline[0] = start + cpu_seconds
    try:
        signal.setitimer(signal.ITIMER_PROF, CHECK_EVERY, CHECK_EVERY)
        try:
            out = fn()
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
            _deadline[0] = float("inf")
    except CpuBudget:
        pass
    used = time.process_time() - start
    return {"timeout": True, "cpu": used} if used >= cpu_seconds else {**out, "cpu": used}


def main(cpu_seconds: float) -> None:
    import logging

    try:
        resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # RLIMIT_CPU's SIGXCPU dumps core by default
    except (ValueError, OSError):
        pass
    signal.signal(signal.SIGPROF, _check_budget)
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)
    proto = os.fdopen(os.dup(1), "w")  # the protocol channel; anything else printed goes to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    logging.disable(logging.CRITICAL)  # math-verify logs every parse failure (and that its timeouts are off)

    import latex2sympy2_extended.latex2sympy2 as l2s
    import math_verify.parser as mv_parser
    import sympy
    from math_verify import LatexExtractionConfig, parse, verify

    def _refuse(*_a, **_k):
        raise RuntimeError("parse_expr (Python eval) is disabled in the grading worker")

    mv_parser.parse_expr = _refuse  # math-verify's ExprExtractionConfig path
    l2s.parse_expr = _refuse  # latex2sympy's variable_values path
    config = [LatexExtractionConfig(boxed_match_priority=0)]

    def parsed(latex: str):
        return parse("\\boxed{" + latex + "}", extraction_config=config, parsing_timeout=None)

    def handle(req: dict[str, Any]) -> dict[str, Any]:
        if req["op"] == "equiv":
            gold, pred = parsed(req["gold"]), parsed(req["pred"])
            if not gold or not pred:
                return {"ok": False, "error": "parse"}
            return {"ok": bool(verify(gold, pred, timeout_seconds=None))}
        if req["op"] == "float":
            exprs = [e for e in parsed(req["expr"]) if isinstance(e, sympy.Basic)]
            if not exprs:
                return {"value": None}
            value = complex(sympy.N(exprs[0], 15))
            return {"value": value.real if abs(value.imag) < 1e-12 and value.real == value.real else None}
        if req["op"] == "spin":  # tests only: Python code that never ends, as a pathological simplification
            while True:
                pass
        if req["op"] == "spin_in_c":  # tests only: minutes in C code that checks for no signal, as sympy can sit
            import hashlib

            return {"ok": bool(hashlib.pbkdf2_hmac("sha256", b"x", b"y", 10**9))}
        if req["op"] == "burn":  # tests only: a given CPU time in Python code, then an answer
            end = time.process_time() + float(req["cpu"])
            while time.process_time() < end:
                pass
            return {"ok": True}
        if req["op"] == "block":  # tests only: stuck without using CPU time (a deadlock), which only the pool's guard ends
            while True:
                time.sleep(3600)
        return {"ok": False, "error": f"unknown op {req.get('op')!r}"}

    # the first parse and verify build math-verify's grammar and sympy's caches, and the first symbolic comparison
    # imports sympy's simplification: paid here, before the first item's budget starts
    for gold, pred in (("1", "1"), ("x+x", "2x"), ("\\frac{1}{2}", "0.5"), ("(a+b)^2", "a^2+2ab+b^2")):
        verify(parsed(gold), parsed(pred), timeout_seconds=None)
    proto.write("ready\n")
    proto.flush()
    for line in sys.stdin:
        req = json.loads(line)
        try:
            out = within_budget(lambda: handle(req), cpu_seconds)
        except CpuBudget:  # the budget's signal landing just as the item ended
            out = {"timeout": True}
        except Exception as e:
            out = {"ok": False, "value": None, "error": type(e).__name__}
        proto.write(json.dumps(out) + "\n")
        proto.flush()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 10.0)
