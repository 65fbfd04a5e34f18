"""VI-CuRL reproduction: confidence-guided curriculum for verifier-independent GRPO.

The packages, by kind:

``config``      a config read, checked and expanded: settings, checks, the run table, the method catalog
``algos``       the training math as pure functions: GRPO, the confidence score, the rewards
``curriculum``  every curriculum (VI-CuRL and the baselines) behind one interface
``data``        datasets: loading, normalizing, the prompt template, the synthetic task
``models``      initial policies: the Hub fetch, the tiny demo model, sampling, rotary precision
``engines``     the drivers around the math: the local engine (CPU) and the verl engine (GPU)
``evaluation``  generation, grading with the graders of ``grading``, Pass@k scores
``grading``     answer extraction and equivalence, in CPU-budgeted workers
``probes``      the variance probes of real gradients (the paper's Section 5.3)
``report``      tables, figures and findings from the results
``planning``    the cost model, the claims, the study planner, a target's plan
``runtime``     what every job does around its work: files, errors, devices, processes, provenance
``rehearsal``   the GPU path's DAG without the Hub or without a GPU

The tools: ``status`` (``python -m vicurl.status``: where a study stands, what a target costs) and ``plan``
(``python -m vicurl.plan``: which claims a budget decides, and the config that runs them).
"""

__version__ = "0.1.0"
