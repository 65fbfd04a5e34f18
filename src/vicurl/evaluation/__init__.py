"""Evaluation: sample responses, grade them, score pass@k.

The pipeline is split so that each stage is a separate, restartable workflow job:

``generate.generate_records``  model dir + problems -> one row per sample (text, length, truncated)
``engines.generate_sets_with`` the same through `eval.engine`'s generator (transformers or vLLM)
``grade.grade_records``        samples + problems   -> extracted answer, correct, no_answer
``score.score``                graded samples       -> pass@k and length statistics for one run
``checkpoint.grade_checkpoint`` one checkpoint's benchmarks -> graded samples and a score each
``checkpoint.grade_run``       a run's checkpoints, one at a time -> verdicts and a score per (step, benchmark)
``passk.pass_at_k``            the unbiased estimator of Chen et al. (2021)

A grader change therefore never forces regeneration, and a scoring change never regrades.
"""
