"""Rule findings: the paper's claims the study tests, the paper's numbers, ours and the verdicts
(vicurl.report.findings) -> report/findings.{md,tex,csv}."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

import json

import pandas as pd

from vicurl.data import schema
from vicurl.io import atomic_path, write_text
from vicurl.report import findings as F
from vicurl.report.aggregate import read_metrics
from vicurl.report.paper import load_paper_numbers
from vicurl.workflow import setup

log = setup(snakemake)
p, inp = snakemake.params, snakemake.input
f = p.findings
study, model, metric = f["study"], f["model"], f["metric"]

scores = pd.read_csv(inp.scores)
scores = scores[(scores["model"] == model) & scores["study"].isin([study, "base"])]
paper = load_paper_numbers(inp.paper)
paper = paper[paper["model"] == f["paper_model"]]
train = read_metrics(inp.metrics, p.runs)
found = F.verifier_free_findings(scores, benchmarks=p.benchmarks, metric=metric, train_metrics=train, paper=paper,
                                   paper_table=f["paper_table"])
probes = [json.loads(open(path).read()) for path in inp.probes]
found = F.variance_findings(probes, model) + found
decomposition = F.render_decomposition(F.decomposition(probes, model)) if probes else []

answer_types = {b: str(schema.read(path)["answer_type"].iloc[0]) for b, path in zip(p.benchmarks, inp.benchmarks)}
graded = pd.concat([pd.read_parquet(path).assign(seed=i) for i, path in enumerate(inp.base)], ignore_index=True)
graded = graded[graded["benchmark"].isin(p.benchmarks)]  # a Base evaluation also holds the model's other studies' sets
setting = F.setting_lines(F.majority_wrong(graded, answer_types), p.titles)

table = F.to_frame(found)
title = f"What the {p.scenario} reproduction finds (study {study}, model {model})"
departed = F.departures(p.compared_settings, p.paper_settings)
write_text(snakemake.output.markdown, F.render_markdown(table, setting, title, p.scenario, departed, decomposition))
write_text(snakemake.output.tex, F.render_latex(table, f"{title}. Verdict rule: {F.RULE}.", p.scenario))
with atomic_path(snakemake.output.csv) as tmp:
    table.to_csv(tmp, index=False)
log.info("%d findings: %s", len(table), table["verdict"].value_counts().to_dict())
