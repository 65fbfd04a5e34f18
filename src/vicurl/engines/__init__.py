"""Engines: drivers that produce rollouts and run updates around the shared pure functions.

``local``: one CPU process, transformers ``generate`` rollouts (the demo, tests).
``verl``:  verl 0.9.1's RayPPOTrainer with the same hooks (GPU clusters).
"""
