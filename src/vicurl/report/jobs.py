"""The report's figure and findings jobs as functions of paths and settings (their rules call them;
so can a Python session)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from vicurl.config.runs import BASE, setting_of
from vicurl.report.aggregate import read_metrics

log = logging.getLogger(__name__)


def learning_curves(*, scores: str | Path, metrics: Sequence[str | Path], runs: Sequence[tuple], study_name: str,
                    study: Mapping[str, Any], model: str, curricula: Sequence[str], ks_metrics: Sequence[str],
                    band: str, titles: Mapping[str, str], model_label: str, png: str | Path, pdf: str | Path,
                    train_png: str | Path, train_pdf: str | Path) -> None:
    """The grid of Pass@k curves of one study and model (step 0: the Base model of the study's
    seeds) and the training curves of the same runs (``runs``: (reward, curriculum, seed) of the
    ``metrics`` files); ``study``: its config section."""
    from vicurl.report.curves import learning_curves_grid, training_curves_grid

    sc = pd.read_csv(scores)
    own = sc[(sc["study"] == study_name) & (sc["model"] == model)]
    base = sc[(sc["study"] == BASE) & (sc["model"] == model) & sc["benchmark"].isin(study["benchmarks"])]
    if base["seed"].isin(study["seeds"]).any():  # the base evaluations of this study's seeds
        base = base[base["seed"].isin(study["seeds"])]
    starts = [base.assign(reward=r, curriculum=c) for r, cs in study["settings"].items() for c in cs if c in curricula]
    data = pd.concat([*starts, own], ignore_index=True)
    shown = [m for m in ks_metrics if m in data.columns]
    drawn_band = None if band == "none" else band
    rewards = [r for r, cs in study["settings"].items() if set(cs) & set(curricula)]
    learning_curves_grid(data, [png, pdf], metrics=shown, rewards=rewards, curricula=curricula,
                         benchmarks=study["benchmarks"], band=drawn_band, titles=titles,
                         title=f"{model_label} ({study_name})")
    rows = read_metrics(metrics, runs)
    training_curves_grid(rows, [train_png, train_pdf], rewards=rewards, curricula=curricula, band=drawn_band,
                         title=f"{model_label} ({study_name}), training")
    log.info("learning curves of %s / %s: %d score rows, %d training steps", study_name, model, len(own), len(rows))


def variance_figures(*, probes: Sequence[str | Path], study: str, reward: str, curriculum: str,
                     models: Sequence[str], titles: Mapping[str, str], ratio: Sequence[str | Path],
                     absolute: Sequence[str | Path]) -> None:
    """The paper's variance figures (ratio and absolute; each to its png and pdf) from the probe
    JSON files of one (study, setting); ``models``: the panels, in order."""
    from vicurl.report.variance import variance_absolute, variance_ratio

    paths = list(probes)
    table = pd.DataFrame([json.loads(Path(f).read_text()) for f in paths]).sort_values(["model", "seed", "step"])
    sel = table[(table["study"] == study) & (table["reward"] == reward) & (table["curriculum"] == curriculum)
                & table["model"].isin(models)]
    if sel.empty:
        raise ValueError(f"{paths}: no probes of study {study!r}, {setting_of(reward, curriculum)}, models {list(models)}")
    variance_ratio(sel, list(ratio), models=list(models), titles=dict(titles))
    variance_absolute(sel, list(absolute), models=list(models), titles=dict(titles))
    log.info("variance figures from %d probe rows", len(sel))


def findings(*, scores: str | Path, paper: str | Path, metrics: Sequence[str | Path], runs: Sequence[tuple],
             probes: Sequence[str | Path], benchmark_files: Sequence[str | Path], base: Sequence[str | Path],
             settings: Mapping[str, Any], benchmarks: Sequence[str], titles: Mapping[str, str], scenario: str,
             compared_settings: Mapping[str, Any], paper_settings: Mapping[str, Any],
             markdown: str | Path, tex: str | Path, csv: str | Path) -> pd.DataFrame:
    """One study's findings against its model. ``settings``: the config's `findings` section; ``runs``:
    (reward, curriculum, seed) of the ``metrics`` files; ``base``: the Base evaluations' graded samples, one file
    per seed. The paper's differences are tested too where the compared runs are of the paper's model."""
    from vicurl.data import schema
    from vicurl.report import findings as F  # torch, for the probes' bootstrap: only this job pays the import
    from vicurl.report.paper import load_paper_numbers

    study, model, metric = settings["study"], settings["model"], settings["metric"]
    sc = pd.read_csv(scores)
    sc = sc[(sc["model"] == model) & sc["study"].isin([study, "base"])]
    numbers = load_paper_numbers(paper)
    numbers = numbers[numbers["model"] == settings["paper_model"]]
    departed = F.departures(compared_settings, paper_settings)
    refute = compared_settings.get("model") == paper_settings.get("model")
    found = F.verifier_free_findings(sc, benchmarks=benchmarks, metric=metric, train_metrics=read_metrics(metrics, runs),
                                     paper=numbers, paper_table=settings["paper_table"], refute=refute)
    probed = [json.loads(Path(path).read_text()) for path in probes]
    found = F.variance_findings(probed, model) + found
    decomposition = F.render_decomposition(F.decomposition(probed, model)) if probed else []

    answer_types = {b: str(schema.read(path)["answer_type"].iloc[0]) for b, path in zip(benchmarks, benchmark_files)}
    graded = pd.concat([pd.read_parquet(path).assign(seed=i) for i, path in enumerate(base)], ignore_index=True)
    graded = graded[graded["benchmark"].isin(benchmarks)]  # a Base evaluation also holds the model's other studies' sets
    setting = [*F.setting_lines(F.majority_wrong(graded, answer_types), titles), F.timeout_line(sc)]
    title = f"What the {scenario} reproduction finds (study {study}, model {model})"
    return _write_findings(F.to_frame(found, settings["alpha"]), settings["alpha"], title, scenario, setting,
                           departed, decomposition, markdown, tex, csv)


def claim_findings(*, claims: Sequence[Mapping[str, Any]], scores: Mapping[str, str | Path],
                   probes: Sequence[str | Path], studies: Mapping[str, Mapping[str, Any]], alpha: float,
                   source: str, departed: Sequence[str], scenario: str, markdown: str | Path, tex: str | Path,
                   csv: str | Path) -> pd.DataFrame:
    """The findings of a claims file or a pre-registration (`vicurl.report.claimed`): ``claims`` its records,
    ``scores`` each study's scores file, ``departed`` the departures to state (the plan's, the config's hash)."""
    from vicurl.report import claimed
    from vicurl.report import findings as F

    tables = {name: pd.read_csv(path) for name, path in scores.items()}
    probed = [json.loads(Path(path).read_text()) for path in probes]
    found = claimed.claim_findings(claims, tables, probed, studies)
    setting = [F.timeout_line(pd.concat(tables.values(), ignore_index=True))] if tables else []
    title = f"What the {scenario} reproduction finds (the claims of {source})"
    return _write_findings(F.to_frame(found, alpha), alpha, title, scenario, setting, departed, [], markdown, tex,
                           csv)


def _write_findings(table: pd.DataFrame, alpha: float, title: str, scenario: str, setting: Sequence[str],
                    departed: Sequence[str], decomposition: Sequence[str], markdown, tex, csv) -> pd.DataFrame:
    from vicurl.report import findings as F
    from vicurl.runtime.io import atomic_path, write_text

    write_text(markdown, F.render_markdown(table, setting, title, scenario, departed, decomposition, alpha))
    write_text(tex, F.render_latex(table, f"{title}. Verdict rule: {F.RULE}.", scenario))
    with atomic_path(csv) as tmp:
        table.to_csv(tmp, index=False)
    log.info("%d findings: %s", len(table), table["verdict"].value_counts().to_dict())
    return table
