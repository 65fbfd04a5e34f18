"""VI-CuRL reproduction: confidence-guided curriculum for verifier-independent GRPO.

The algorithm lives in pure functions (``vicurl.algos``, ``vicurl.curriculum``,
``vicurl.rewards``); the engines (``vicurl.engines``) are thin drivers around them.
"""

__version__ = "0.1.0"
