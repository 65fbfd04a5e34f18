"""Rule learning_curves: Pass@1 against training step, VI-CuRL vs No Curriculum (step 0 = base model)."""
import pandas as pd

from vicurl.report.figures import learning_curves
from vicurl.report.tables import CURRICULUM_LABELS
from vicurl.workflow import setup

log = setup(snakemake)
w, study = snakemake.wildcards, snakemake.params.study
scores = pd.read_csv(snakemake.input[0])
runs = scores[scores["study"] == w.study]
base = scores[(scores["study"] == "base") & scores["model"].isin(study["models"])]
frames = []
for (model, reward), part in runs.groupby(["model", "reward"]):
    start = [base[(base["model"] == model)].assign(curriculum=c, reward=reward) for c in part["curriculum"].unique()]
    frames.append(pd.concat([*start, part]))
# one figure per study: the first model and reward (the demo has one of each)
data = frames[0]
labels = {c: CURRICULUM_LABELS.get(c, c) for c in data["curriculum"].unique()}
titles = {b: snakemake.params.datasets[b].get("label", b) for b in study["benchmarks"]}
learning_curves(data, [snakemake.output.png, snakemake.output.pdf], metric="pass@1", labels=labels, titles=titles,
                benchmarks=study["benchmarks"], title=f"{data['model'].iloc[0]} / {data['reward'].iloc[0]}")
