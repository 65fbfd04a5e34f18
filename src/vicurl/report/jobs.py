"""The report's findings job as a function of paths and settings (rule `findings` calls it; so
can a Python session): the claims the study tests, the paper's numbers, ours and the verdicts
(`vicurl.report.findings`) -> findings.{md,tex,csv}."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from vicurl.data import schema
from vicurl.io import atomic_path, write_text
from vicurl.report import findings as F
from vicurl.report.aggregate import read_metrics
from vicurl.report.paper import load_paper_numbers

log = logging.getLogger(__name__)


def findings(*, scores: str | Path, paper: str | Path, metrics: Sequence[str | Path], runs: Sequence[tuple],
             probes: Sequence[str | Path], benchmark_files: Sequence[str | Path], base: Sequence[str | Path],
             settings: Mapping[str, Any], benchmarks: Sequence[str], titles: Mapping[str, str], scenario: str,
             compared_settings: Mapping[str, Any], paper_settings: Mapping[str, Any],
             markdown: str | Path, tex: str | Path, csv: str | Path) -> pd.DataFrame:
    """``settings``: the config's `findings` section; ``runs``: (reward, curriculum, seed) of the
    ``metrics`` files; ``base``: the Base evaluations' graded samples, one file per seed."""
    study, model, metric = settings["study"], settings["model"], settings["metric"]
    sc = pd.read_csv(scores)
    sc = sc[(sc["model"] == model) & sc["study"].isin([study, "base"])]
    numbers = load_paper_numbers(paper)
    numbers = numbers[numbers["model"] == settings["paper_model"]]
    found = F.verifier_free_findings(sc, benchmarks=benchmarks, metric=metric, train_metrics=read_metrics(metrics, runs),
                                     paper=numbers, paper_table=settings["paper_table"])
    probed = [json.loads(Path(path).read_text()) for path in probes]
    found = F.variance_findings(probed, model) + found
    decomposition = F.render_decomposition(F.decomposition(probed, model)) if probed else []

    answer_types = {b: str(schema.read(path)["answer_type"].iloc[0]) for b, path in zip(benchmarks, benchmark_files)}
    graded = pd.concat([pd.read_parquet(path).assign(seed=i) for i, path in enumerate(base)], ignore_index=True)
    graded = graded[graded["benchmark"].isin(benchmarks)]  # a Base evaluation also holds the model's other studies' sets
    setting = F.setting_lines(F.majority_wrong(graded, answer_types), titles)

    table = F.to_frame(found)
    title = f"What the {scenario} reproduction finds (study {study}, model {model})"
    departed = F.departures(compared_settings, paper_settings)
    write_text(markdown, F.render_markdown(table, setting, title, scenario, departed, decomposition))
    write_text(tex, F.render_latex(table, f"{title}. Verdict rule: {F.RULE}.", scenario))
    with atomic_path(csv) as tmp:
        table.to_csv(tmp, index=False)
    log.info("%d findings: %s", len(table), table["verdict"].value_counts().to_dict())
    return table
