"""The grading worker: ``python -m vicurl.grading._worker TIMEOUT`` (started by ``symbolic.SymbolicPool``).

Reads one JSON request per line on stdin, writes one JSON result per line on stdout (after a
first line ``ready``). See ``vicurl.grading.symbolic`` for the protocol and the safety measures:
LaTeX parsing only, ``parse_expr`` disabled, address space capped at ``WORKER_MEMORY_BYTES``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

WORKER_MEMORY_BYTES = 4 << 30


def main(timeout: float) -> None:
    import logging
    import resource

    try:
        resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    except (ValueError, OSError):
        pass
    proto = os.fdopen(os.dup(1), "w")  # the protocol channel; anything else printed goes to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    logging.disable(logging.CRITICAL)  # math-verify logs every timeout and parse failure

    import latex2sympy2_extended.latex2sympy2 as l2s
    import math_verify.parser as mv_parser
    import sympy
    from math_verify import LatexExtractionConfig, parse, verify
    from math_verify.utils import timeout as alarm

    def _refuse(*_a, **_k):
        raise RuntimeError("parse_expr (Python eval) is disabled in the grading worker")

    mv_parser.parse_expr = _refuse  # math-verify's ExprExtractionConfig path
    l2s.parse_expr = _refuse  # latex2sympy's variable_values path
    config = [LatexExtractionConfig(boxed_match_priority=0)]
    inner = max(1, int(timeout // 3))  # math-verify's own alarms: parse gold, parse pred, verify

    def parsed(latex: str):
        return parse("\\boxed{" + latex + "}", extraction_config=config, parsing_timeout=inner)

    def handle(req: dict[str, Any]) -> dict[str, Any]:
        if req["op"] == "equiv":
            gold, pred = parsed(req["gold"]), parsed(req["pred"])
            if not gold or not pred:
                return {"ok": False, "error": "parse"}
            return {"ok": bool(verify(gold, pred, timeout_seconds=inner))}
        if req["op"] == "float":
            expr = parsed(req["expr"])
            exprs = [e for e in expr if isinstance(e, sympy.Basic)]
            if not exprs:
                return {"value": None}
            value = alarm(inner)(lambda: complex(sympy.N(exprs[0], 15)))()
            return {"value": value.real if abs(value.imag) < 1e-12 and value.real == value.real else None}
        if req["op"] == "block":  # tests only: stuck without a signal, as sympy can be inside C code
            while True:
                time.sleep(3600)
        return {"ok": False, "error": f"unknown op {req.get('op')!r}"}

    # the first parse and verify build math-verify's grammar and sympy's caches, and the first symbolic comparison
    # imports sympy's simplification (seconds on a loaded machine, over the 1 s alarms of a 3 s timeout): paid
    # here, inside the startup allowance, not by the first items' timeouts
    for gold, pred in (("1", "1"), ("x+x", "2x"), ("\\frac{1}{2}", "0.5"), ("(a+b)^2", "a^2+2ab+b^2")):
        verify(parse("\\boxed{" + gold + "}", extraction_config=config), parse("\\boxed{" + pred + "}", extraction_config=config))
    proto.write("ready\n")
    proto.flush()
    for line in sys.stdin:
        try:
            out = handle(json.loads(line))
        except BaseException as e:  # math-verify's TimeoutException is a BaseException
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            out = {"ok": False, "value": None, "error": type(e).__name__}
        proto.write(json.dumps(out) + "\n")
        proto.flush()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 10.0)
