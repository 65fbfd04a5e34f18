"""SENT (semantic-entropy curriculum), the paper's oracle-reward baseline.

Before training, the initial policy answers every training prompt k times (rule
``prompt_stats``, ``prompt_stats.k``); the answers are clustered by equivalence as in EMPO and each prompt gets
its semantic entropy  H = -sum_c p_c log p_c  (p_c: share of the answers in cluster c; a
response without an answer is a cluster of its own). Training then runs low entropy first,
in two stages [stage split ours]: the first half of the steps draws its batches from the
lower half of the prompts by entropy, the second half of the steps from the upper half.
Within a stage the batches walk through seeded permutations of the stage's prompts (a new
permutation every pass). Every rolled-out prompt is kept with weight 1.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from vicurl.curriculum.base import Curriculum


class SENT(Curriculum):
    def __init__(self, stages: int):
        super().__init__(stages=stages)
        if stages < 1:
            raise ValueError(f"curricula.sent.stages must be >= 1, got {stages}")
        self.stages = int(stages)
        self.pools: list[list[str]] = []

    def setup(self, prompts: pd.DataFrame, *, batch_size: int, total_steps: int, seed: int = 0,
              stats: pd.DataFrame | None = None) -> None:
        super().setup(prompts, batch_size=batch_size, total_steps=total_steps, seed=seed, stats=stats)
        h = self.stat(stats, "semantic_entropy")
        ordered = [self.ids[i] for i in np.argsort(h, kind="stable")]  # equal entropies keep the set's order
        bounds = np.linspace(0, len(ordered), self.stages + 1).round().astype(int)
        self.pools = [ordered[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
        small = [len(p) for p in self.pools if len(p) < batch_size]
        if small:
            raise ValueError(f"sent: a stage has {small[0]} prompts, fewer than the batch size {batch_size}")

    def stage(self, step: int) -> int:
        """0-based stage of a 1-based step: equal shares of the steps, in order."""
        return min(self.stages - 1, (step - 1) * self.stages // max(1, self.total_steps))

    def propose(self, step: int, default_ids: list[str]) -> list[str]:
        if not self.pools:
            raise RuntimeError("sent: setup() was not called")
        stage = self.stage(step)
        pool = self.pools[stage]
        first = next(s for s in range(1, step + 1) if self.stage(s) == stage)
        rep, pos = divmod(step - first, len(pool) // self.batch_size)  # pass over the pool, batch within it
        perm = np.random.default_rng([self.seed, 31, stage, rep]).permutation(len(pool))
        return [pool[i] for i in perm[pos * self.batch_size : (pos + 1) * self.batch_size]]

