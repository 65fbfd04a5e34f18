"""The verl engine: verl 0.9.1's legacy GRPO trainer with the VI-CuRL step hooked in (GPU clusters).

From the rule to verl's loop: rule ``train`` -> `vicurl.engines.job` -> ``launch`` (settings -> Hydra
overrides on ``vicurl_ppo_trainer.yaml``) -> `vicurl.runtime.supervise` (a process of its own) -> ``fit``
(verl's config composed, checked) -> ``runner`` (verl's ``TaskRunner``) -> ``trainer``
(``VICuRLTrainer.fit``, verl's loop) -> ``hook`` (each step) -> `vicurl.engines.step`; then ``export``.

``launch``            one run's settings -> verl's config -> train -> Hugging Face exports, metrics
``fit``               verl's training loop on the run's overrides, in the supervised process
``runner``            verl's legacy ``TaskRunner`` building ``VICuRLTrainer``
``trainer``           ``VICuRLTrainer(RayPPOTrainer)``: the methods it overrides to call the hook
``hook``              the step on verl's ``DataProto`` batches, calling `vicurl.engines.step` (Ray-free)
``sampler``           the training sampler of curricula that choose each step's prompts (AdaRFT, SENT)
``data``              prepared sets -> verl's RL parquet format
``reward_fn``         the zero score verl's reward loop places (the hook grades every rollout itself)
``varlen_attention``  attention over packed micro-batches without a dense mask (``vicurl_varlen``)
``export``            a verl checkpoint step -> the Hugging Face folder the workflow evaluates
``patches``           patches of verl and vLLM, each named for the upstream behaviour it answers

Only ``hook`` and ``data`` import without verl's trainer stack; see docs/engine.md.
"""
