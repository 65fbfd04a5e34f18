r"""The config's ``tables:`` section, checked and resolved into plain, explicit table definitions.

Why a resolution step: the workflow hands each table rule its resolved definition as a ``params``
value, so Snakemake reruns a table rule exactly when something it prints changes (a row, a label, a
style, the step it reports), and the layout code never looks at the rest of the config. A study the
config does not define, or a setting its study does not train, prints ``--`` (``resolve`` returns a
warning naming the key), so the paper's tables keep their rows whatever subset a user runs; anything
else that does not resolve (an unknown name, a key that does not apply to the type, a step never
evaluated) raises ``ValueError`` naming the key. The types and their layouts: docs/evaluation.md
("Tables and figures"); the keys: docs/configuration.md.
"""

from __future__ import annotations

import copy
from typing import Any

from vicurl.config import methods
from vicurl.config import runs as runs_lib
from vicurl.report import labels as L
from vicurl.report.aggregate import AVERAGE_STD

TYPES = ("main", "ablation", "long_output", "mechanism", "breakdown")
COMMON_KEYS = {"type", "study", "benchmarks", "headers", "caption", "label", "paper", "style"}
TYPE_KEYS = {
    "main": {"models", "metric", "blocks", "base", "step"},
    "ablation": {"model", "metrics", "rows", "step"},
    "long_output": {"model", "metric", "rows", "step"},
    "mechanism": {"model", "metric", "rows", "t_ref", "t_long", "aulc_reference"},
    "breakdown": {"model", "metric", "rows", "step"},
}
STYLE_DEFAULTS = {
    "main": {"std": True, "average": True, "corner": "Dataset"},
    "ablation": {"std": False, "average": True, "corner": "Setting"},
    "long_output": {"std": False, "average": True, "corner": "Setting"},
    "mechanism": {"std": False, "average": False, "corner": "Setting"},
    "breakdown": {"std": False, "average": False, "corner": "Setting"},
}
COMMON_STYLE = {"digits": 1, "bold": True, "width": 1.0, "average_std": AVERAGE_STD[0]}
#: what the caption says of the Average's std (aggregate.AVERAGE_STD), where the table prints one
AVERAGE_STD_NOTE = {"benchmarks": "The Average's std is the mean of the row's per-dataset stds.",
                    "seeds": "The Average's std is the std across seeds of the per-seed averages."}
#: the paper's result tables, by their LaTeX label without ``tab:`` (``paper:`` names one)
PAPER_TABLES = (
    "main_results_part1", "main_results_part2", "general_results", "main_results_oracle_pass@8",
    "main_results_independent_pass@8_part1", "main_results_independent_pass@8_part2",
    "curriculum_ablation", "long_output", "mechanism", "mechanism_breakdown",
)


def _tex(s: str) -> str:
    return s.replace("_", "\\_")


def default_tables(config: dict[str, Any]) -> dict[str, dict]:
    """One ``main`` table per study and k, for configs without a ``tables:`` section."""
    ks = config.get("eval", {}).get("ks", [1, 8])
    return {f"{s}_pass{k}": {"type": "main", "study": s, "metric": f"pass@{k}"}
            for s in config["studies"] for k in ks}


def resolve(config: dict[str, Any]) -> tuple[dict[str, dict], list[str]]:
    """Every table of the config, resolved; and the warnings (studies or settings with no runs)."""
    tables = config.get("tables")
    if tables is None:
        tables = default_tables(config)
    out, warnings = {}, []
    for name, t in tables.items():
        out[name] = _resolve_one(config, name, copy.deepcopy(t), warnings)
    return out, warnings


class _Ctx:
    def __init__(self, config, name, t, warnings):
        self.config, self.name, self.t, self.warnings = config, name, t, warnings
        self.where = f"tables.{name}"
        self.no_runs: list[str] = []  # rows whose study does not train their setting

    def fail(self, key: str, msg: str):
        raise ValueError(f"{self.where}.{key}: {msg}" if key else f"{self.where}: {msg}")

    def study(self, name: str | None, key: str) -> dict | None:
        """The study's config, or None (with a warning) when the config does not define it."""
        if name is None:
            return None
        s = self.config["studies"].get(name)
        if s is None:
            msg = (f"{self.where}: study {name!r} (`{key}`) is not defined under `studies`; "
                   f"its rows print -- until it is")
            if not any(w.startswith(f"{self.where}: study {name!r} ") for w in self.warnings):
                self.warnings.append(msg)
        return s

    def steps(self, study: str) -> list[int]:
        return runs_lib.eval_steps(self.config, study)


def _resolve_one(config, name, t, warnings) -> dict:
    c = _Ctx(config, name, t, warnings)
    typ = _check_keys(c, t)
    study = c.study(t.get("study"), "study")
    res = _common(c, t, study)
    if typ == "main":
        _main_rows(c, t, study, res)
    else:
        _single_model_rows(c, t, study, res)
    _check_settings_once(c, res["blocks"])
    res["caption"] = _caption(t, res)
    if c.no_runs:
        warnings.append(f"{c.where}: {len(c.no_runs)} row(s) name a setting their study does not train, "
                        f"their cells print -- (e.g. {c.no_runs[0]})")
    return res


def _check_keys(c: _Ctx, t: dict) -> str:
    """The table's type, once it is known and every key applies to it."""
    typ = t["type"]
    if typ not in TYPES:
        c.fail("type", f"unknown table type {typ!r} (types: {', '.join(TYPES)})")
    extra = sorted(set(t) - COMMON_KEYS - TYPE_KEYS[typ])
    if extra:
        c.fail(extra[0], f"not a key of a {typ!r} table (its keys: {', '.join(sorted(COMMON_KEYS | TYPE_KEYS[typ]))})")
    return typ


def _common(c: _Ctx, t: dict, study: dict | None) -> dict[str, Any]:
    """The keys every type has: columns and their headers, label, paper, style, metric."""
    typ = t["type"]
    benchmarks, headers = _columns(c, t, study)
    res: dict[str, Any] = {
        "name": c.name, "type": typ, "study": t.get("study"), "benchmarks": benchmarks, "headers": headers,
        "label": t.get("label", f"tab:{c.name}"), "paper": t.get("paper"),
        "style": {**COMMON_STYLE, **STYLE_DEFAULTS[typ], **(t.get("style") or {})},
        "metric": t.get("metric", "pass@1"),
    }
    if res["paper"] is not None and res["paper"] not in PAPER_TABLES:
        c.fail("paper", f"{res['paper']!r} is not a table of the paper ({', '.join(PAPER_TABLES)})")
    return res


def _columns(c: _Ctx, t: dict, study: dict | None) -> tuple[list[str], dict[str, list[str]]]:
    """The benchmark columns (the table's, else its study's) and each one's header lines."""
    datasets = c.config["datasets"]
    benchmarks = t.get("benchmarks") or (study or {}).get("benchmarks")
    if not benchmarks:
        c.fail("benchmarks", "not given, and no defined `study` to take them from")
    for b in benchmarks:
        if b not in datasets:
            c.fail("benchmarks", f"dataset {b!r} is not defined under `datasets`")
    headers = {}
    for b in benchmarks:
        h = (t.get("headers") or {}).get(b, datasets[b].get("label", b))
        headers[b] = [h] if isinstance(h, str) else list(h)
    for b in t.get("headers") or {}:
        if b not in benchmarks:
            c.fail(f"headers.{b}", f"{b!r} is not a column of the table ({benchmarks})")
    return list(benchmarks), headers


def _main_rows(c: _Ctx, t: dict, study: dict | None, res: dict) -> None:
    """A main table's models and blocks (a Base row, then a block per reward, per model)."""
    models = t.get("models") or (study or {}).get("models")
    if not models:
        c.fail("models", "not given, and no defined `study` to take them from")
    for m in models:
        _model(c, m, "models")
    res["models"] = list(models)
    res["blocks"] = _main_blocks(c, t, study, models)


def _single_model_rows(c: _Ctx, t: dict, study: dict | None, res: dict) -> None:
    """The other types: one model, one block of rows (the table's, else every setting of its study)."""
    typ = res["type"]
    if typ == "ablation":
        res["metrics"] = list(t.get("metrics", ["pass@1", "pass@8"]))
    model = t.get("model") or ((study or {}).get("models") or [None])[0]
    if model is None:
        c.fail("model", "not given, and no defined `study` to take it from")
    _model(c, model, "model")
    res["model"] = model
    if typ == "mechanism":
        _mechanism_steps(c, t, res["study"], study, res)
    rows = t.get("rows")
    if rows is None:
        if study is None:
            c.fail("rows", "not given, and no defined `study` to take them from")
        rows = [{"reward": r, "curriculum": cur} for r, curs in study["settings"].items() for cur in curs]
    res["blocks"] = [{"title": None, "group": None,
                      "rows": [_row(c, f"rows[{i}]", r, model, t, typ) for i, r in enumerate(rows)]}]


def _check_settings_once(c: _Ctx, blocks: list[dict]) -> None:
    """A setting (model, reward, curriculum, variant) may repeat only with the same study and step."""
    seen = {}
    for b in blocks:
        for r in b["rows"]:
            k = (r["model"], r["reward"], r["curriculum"], r["variant"])
            if k in seen and seen[k] != (r["study"], r["step"]):
                c.fail("", f"two rows show {' / '.join(k[:3])} from different studies or steps "
                           f"({seen[k]} and {(r['study'], r['step'])}); a table shows a setting once")
            seen[k] = (r["study"], r["step"])


def _caption(t: dict, res: dict) -> str:
    """The config's caption or the default one, plus which std the Average column prints."""
    caption = t.get("caption") or default_caption(res)
    style = res["style"]
    if style["std"] and style["average"]:
        caption = f"{caption.rstrip()} {AVERAGE_STD_NOTE[style['average_std']]}"
    return caption


def _model(c: _Ctx, m: str, key: str) -> None:
    if m not in c.config["models"]:
        c.fail(key, f"model {m!r} is not defined under `models`")


def _main_blocks(c: _Ctx, t: dict, study: dict | None, models: list[str]) -> list[dict]:
    spec = t.get("blocks")
    if spec is None:
        if study is None:
            c.fail("blocks", "not given, and no defined `study` to take them from")
        spec = [{"title": L.reward_title(r), "rows": [{"reward": r, "curriculum": cur} for cur in curs]}
                for r, curs in study["settings"].items()]
    groups = len(models) > 1  # the paper prints a model header only when a table has several models
    blocks = []
    for m in models:
        group = c.config["models"][m].get("label", m) if groups else None
        if t.get("base", True):
            blocks.append({"title": None, "group": group, "rows": [{
                "label": L.BASE_LABEL, "lead": [], "model": m, "reward": L.BASE, "curriculum": L.BASE,
                "variant": "", "study": L.BASE, "step": 0, "highlight": False,
                # the base model evaluated with the seeds of the table's study (all, without one)
                "seeds": sorted(study["seeds"]) if study else None}]})
        for bi, b in enumerate(spec):
            rows = [_row(c, f"blocks[{bi}].rows[{i}]", r, m, t, "main") for i, r in enumerate(b["rows"])]
            blocks.append({"title": b.get("title"), "group": group, "rows": rows})
    return blocks


def _row(c: _Ctx, key: str, r: dict, model: str, t: dict, typ: str) -> dict:
    reward, cur = r["reward"], r["curriculum"]
    if reward not in c.config.get("rewards", {}) and reward not in methods.REWARDS:
        c.fail(f"{key}.reward", f"unknown reward {reward!r} (known: {', '.join(methods.REWARDS)})")
    if cur not in c.config.get("curricula", {}) and cur not in methods.CURRICULA:
        c.fail(f"{key}.curriculum", f"unknown curriculum {cur!r} (known: {', '.join(methods.CURRICULA)})")
    if "max_tokens" in r and typ != "long_output":
        c.fail(f"{key}.max_tokens", "only rows of a long_output table have a response budget")
    study_name = r.get("study", t.get("study"))
    if study_name is None:
        c.fail(f"{key}.study", "no study: give the table's `study` or the row's")
    study = c.study(study_name, f"{key}.study")
    step = None
    if typ != "mechanism":
        step = t.get("step")
        if study is not None:
            steps = c.steps(study_name)
            if step is None:
                step = runs_lib.report_step(c.config, study_name)
            elif step not in steps:
                c.fail("step", f"step {step} is not an evaluated step of study {study_name!r} ({steps})")
    if study is not None and (reward not in study["settings"] or cur not in study["settings"][reward]
                              or model not in study["models"]):
        c.no_runs.append(f"{study_name}: {model} / {reward} / {cur}")
    lead, variant = [], ""
    if typ == "long_output":
        budget = None
        if study is not None:
            budget = {**c.config.get("train", {}), **study.get("train", {})}.get("max_response_length")
        given = r.get("max_tokens")
        if given is not None and budget is not None and int(given) != int(budget):
            c.fail(f"{key}.max_tokens", f"{given} differs from study {study_name!r}'s train.max_response_length ({budget})")
        mt = given if given is not None else budget
        if mt is None:
            c.fail(f"{key}.max_tokens", f"not given, and study {study_name!r} does not set train.max_response_length")
        variant = str(int(mt))
        lead = [variant]
    return {
        "label": r.get("label") or L.row_label(reward, cur), "lead": lead, "model": model, "reward": reward,
        "curriculum": cur, "variant": variant, "study": study_name, "step": step,
        "highlight": bool(r.get("highlight", cur == "vicurl")), "seeds": None,
    }


def _mechanism_steps(c: _Ctx, t: dict, study_name: str | None, study: dict | None, res: dict) -> None:
    for key in ("t_ref", "t_long"):
        if key not in t:
            c.fail(key, "required for a mechanism table")
    if not t["t_ref"] < t["t_long"]:
        c.fail("t_long", f"must be after t_ref ({t['t_ref']})")
    if study is not None:
        steps = c.steps(study_name)
        for key in ("t_ref", "t_long"):
            if t[key] not in steps:
                c.fail(key, f"step {t[key]} is not an evaluated step of study {study_name!r} ({steps})")
    res["t_ref"], res["t_long"] = int(t["t_ref"]), int(t["t_long"])
    res["aulc_reference"] = t.get("aulc_reference", "none")


def default_caption(res: dict) -> str:
    """A caption saying what the table shows, for tables whose config gives none."""
    typ, study = res["type"], _tex(str(res["study"]))
    k = res["metric"].split("@")[-1]
    spread = "mean $\\pm$ std across seeds" if res["style"]["std"] else "mean across seeds"
    blue = " \\colorbox{blue!10}{Blue} rows highlight VI-CuRL."
    if typ == "main":
        return f"\\textbf{{Pass@{k}}} (\\%) of study \\texttt{{{study}}}; {spread}.{blue}"
    if typ == "ablation":
        ms = " / ".join(m.replace("pass", "Pass") for m in res["metrics"])
        return f"Curriculum ablation (study \\texttt{{{study}}}). Each cell reports {ms} (\\%); {spread}.{blue}"
    if typ == "long_output":
        return (f"Long-output ablation: Pass@{k} (\\%) with each response budget, cap-hit and no-boxed "
                f"rates and response lengths (tokens); {spread}.{blue}")
    if typ == "mechanism":
        return (f"Mechanism analysis (study \\texttt{{{study}}}). $T_\\mathrm{{ref}}$: step {res['t_ref']}; "
                f"$T_\\mathrm{{long}}$: step {res['t_long']}. AULC is normalized with "
                f"{L.curriculum_label(res['aulc_reference'])} $= 1.0$.{blue}")
    return f"Per-dataset Pass@{k} (\\%) breakdown (study \\texttt{{{study}}}); {spread}.{blue}"
