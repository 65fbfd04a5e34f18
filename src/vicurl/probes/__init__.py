"""The variance probes (the paper's Section 5.3).

``probe``     one probe of a run at one checkpoint: real per-rollout gradients, kept vs full
``variance``  Monte-Carlo estimates of the action and problem variance (Theorem "Variance Decomposition")
"""
