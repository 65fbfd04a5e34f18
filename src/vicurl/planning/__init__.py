"""What a study costs and decides, before a GPU hour is spent.

``cost``     the cost model: the A100 time of every GPU job of a config
``memory``   the per-GPU memory of a verl run by phase of a step, and the largest update budget that fits
``target``   one Snakemake target's plan: its jobs and what they cost (``python -m vicurl.status TARGET``)
``claims``   the paper's claims as data (config/claims.yaml), with the paper's numbers and planning spreads
``stats``    the verdict rule and its power (scipy, statsmodels)
``planner``  which claims a budget decides with how many seeds, and the config that runs that
"""
