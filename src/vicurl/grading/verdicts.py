"""A comparison's verdict: True, False, or ``TIMEOUT``, where the item's CPU budget ran out first.

``TIMEOUT`` is falsy, so every rule that combines verdicts (a part-wise match, a vote, a cluster)
reads it as "not equal", as the paper's checker would score it; ``is TIMEOUT`` tells it apart where a
graded record or a run's metrics count the timeouts.
"""

from __future__ import annotations

from typing import Iterable, Union


class _Timeout:
    __slots__ = ()

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "TIMEOUT"

    def __reduce__(self) -> str:
        return "TIMEOUT"  # pickles (verl's Ray workers) as the one instance


TIMEOUT = _Timeout()
Verdict = Union[bool, _Timeout]


def combined(ok: bool, verdicts: Iterable[Verdict]) -> Verdict:
    """The verdict of a rule over several comparisons: ``ok`` where it holds, else TIMEOUT when one of the
    comparisons timed out (it might have held with more time), else False."""
    if ok:
        return True
    return TIMEOUT if any(v is TIMEOUT for v in verdicts) else False


def count(verdicts: Iterable[Verdict]) -> int:
    """How many of ``verdicts`` are timeouts."""
    return sum(v is TIMEOUT for v in verdicts)
