"""Variance figures from the probes (paper Figs. "variance_ratio" and "variance_absolute").

For a rule like:
    input:  probes=[the probe JSON files of one (study, setting)]
    output: ratio_png=..., ratio_pdf=..., absolute_png=..., absolute_pdf=...
    params: study="main", reward="oracle", curriculum="vicurl",
            models=[...]  (the panels, in order), titles={model: label}
Rows of other studies, rewards or curricula are ignored.
"""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

import json

import pandas as pd

from vicurl.report.variance import variance_absolute, variance_ratio
from vicurl.runs import setting_of
from vicurl.workflow import setup

log = setup(snakemake)
p, o = snakemake.params, snakemake.output
paths = list(snakemake.input.probes)
probes = pd.DataFrame([json.loads(open(f).read()) for f in paths]).sort_values(["model", "seed", "step"])
sel = probes[(probes["study"] == p.study) & (probes["reward"] == p.reward) & (probes["curriculum"] == p.curriculum)
             & probes["model"].isin(p.models)]
if sel.empty:
    raise ValueError(f"{paths}: no probes of study {p.study!r}, {setting_of(p.reward, p.curriculum)}, models {list(p.models)}")
variance_ratio(sel, [o.ratio_png, o.ratio_pdf], models=list(p.models), titles=dict(p.titles))
variance_absolute(sel, [o.absolute_png, o.absolute_pdf], models=list(p.models), titles=dict(p.titles))
log.info("variance figures from %d probe rows", len(sel))
