"""A config read, checked and expanded (the workflow's first step; nothing here imports torch).

``settings``  a run's settings as typed values, each default written once
``checks``    every check of a config, each error naming its key
``runs``      the run table: the studies expanded into one row per training run
``methods``   the method catalog: every curriculum and reward source
``keys``      docs/configuration.md's key table, generated (``python -m vicurl.config.keys``)
``targets``   what Snakemake was asked to build, and whether that asks for reports only
"""
