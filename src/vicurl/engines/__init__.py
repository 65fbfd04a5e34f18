"""Engines: drivers that produce rollouts and run updates around the shared pure functions.

``job``      the training job as a function of paths and settings (rule ``train``)
``step``     one training step's math as pure functions (both engines)
``local``    one CPU process, transformers ``generate`` rollouts (the demo, tests)
``rollout``  rollouts scored as a training step scores them (the local engine, the variance probes)
``workdir``  a run's work folder: resume an interrupted job, start afresh otherwise
``verl``     verl 0.9.1's RayPPOTrainer with the same step (GPU clusters)
"""
