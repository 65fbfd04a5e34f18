"""The evaluation: sample, grade, score.

``jobs``           the evaluation's jobs as functions of paths and settings (their rules call them)
``engines``        the switch between the two generators (``eval.engine``)
``generate``       sampling with transformers (CPU)
``vllm_generate``  sampling with vLLM (GPU)
``records``        the per-sample records between generation and grading
``grade``          grading sampled responses against the gold answers (``vicurl.grading``)
``score``          one run's graded samples on one benchmark -> Pass@k and lengths
``passk``          the unbiased pass@k estimator
``checkpoint``     every benchmark of every evaluated checkpoint of a run, in one job
"""
