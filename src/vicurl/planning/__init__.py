"""What a study costs and what it can decide, before a GPU-hour is spent.

``cost``     the cost model: every GPU job of a config (and its grading), priced in A100 hours
``target``   one Snakemake target's plan: its jobs per rule, those sent to the cluster, their A100 hours
"""
