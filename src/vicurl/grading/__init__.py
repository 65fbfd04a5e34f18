"""Answer grading: extraction, equivalence, and one grader per answer type.

``extract``   pulling the final answer out of a response (pure string work)
``equiv``     math equivalence: fast string / number paths, then math-verify (``symbolic``)
``parts``     answers in several parts (``1, -2``; ``k = 45, n = 2``), compared part by part
``symbolic``  the worker-process pool that runs math-verify, each item under a budget of CPU time
``_worker``   the worker process itself (its CPU-time limits, math-verify without ``parse_expr``)
``verdicts``  a comparison's verdict: True, False or TIMEOUT
``classes``   equivalence classes of a group's answers and their majority
``graders``   per answer type (math, multiple_choice, option, bool, integer, float, list):
              how to extract, how to read the gold answer, how to compare

No model text is ever evaluated as Python anywhere in this package.
"""

from vicurl.grading.equiv import equiv_many, fast_equiv, is_equiv, normalize, to_number
from vicurl.grading.extract import extract_boxed, extract_choice, final_answer, parse_bool, parse_list, parse_number

__all__ = [
    "equiv_many", "fast_equiv", "is_equiv", "normalize", "to_number",
    "extract_boxed", "extract_choice", "final_answer", "parse_bool", "parse_list", "parse_number",
]
