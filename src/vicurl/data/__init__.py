"""Datasets: every prepared set in one normalized schema.

``sources``       the registry of real datasets and a config entry's load plan
``load``          raw rows from local files or the Hub
``normalize``     one source's raw row -> one normalized row
``prepare``       load -> normalize -> filter -> annotate, subset -> parquet and manifest
``schema``        the normalized schema
``prompts``       the paper's prompt template
``long_prompts``  prompts too long for the model: measured, then dropped and counted, or refused
``synthetic``     the demo's synthetic arithmetic task
"""
