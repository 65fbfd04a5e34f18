"""verl's per-sample reward function for the verl engine: zero.

verl's reward loop scores each rollout while it is generated; the VI-CuRL rewards need whole
groups and pi_old's entropies, so ``VICuRLTrainer`` grades every rollout (oracle included)
after the old-policy pass and overwrites these zeros (`vicurl.engines.verl.hook.Hook.score`).
"""


def zero_score(data_source=None, solution_str=None, ground_truth=None, extra_info=None, **kwargs) -> float:
    return 0.0
