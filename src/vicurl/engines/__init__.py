"""Engines: drivers that produce rollouts and run updates around the shared pure functions.

``local``:   one CPU process, transformers ``generate`` rollouts (the demo, tests).
``rollout``: rollouts scored as a training step scores them (the local engine, the variance probes).
``step``:    one training step's math as pure functions (both engines).
``verl``:    verl 0.9.1's RayPPOTrainer with the same hooks (GPU clusters).
"""
