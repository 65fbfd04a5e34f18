"""Figures: learning-curves grid, curriculum schedule, variance ratio and absolute variance (hand-made frames)."""

import numpy as np
import pandas as pd
import pytest

from vicurl.report.aggregate import collect
from vicurl.report.curves import learning_curves_grid, smoothed, training_curves_grid
from vicurl.report.schedule import schedule_figure
from vicurl.report.variance import variance_absolute, variance_ratio

PNG = b"\x89PNG\r\n\x1a\n"


def scores():
    recs = []
    for reward in ("oracle", "entropy"):
        for cur in ("none", "vicurl", "vcrl"):
            for seed in (0, 1):
                for step in (0, 5, 10):
                    for b in ("arith", "arith_hard"):
                        v = 0.1 + 0.02 * step * (1.5 if cur == "vicurl" else 1) + 0.01 * seed
                        recs.append(dict(study="demo", model="tiny", reward=reward, curriculum=cur, seed=seed,
                                         step=step, benchmark=b, **{"pass@1": v, "pass@8": min(1, 2 * v)}))
    return collect(recs)


@pytest.mark.parametrize("band", ["minmax", "std", None])
def test_grid_png(tmp_path, band):
    out = tmp_path / "fig" / "curves.png"
    written = learning_curves_grid(scores(), out, band=band, titles={"arith": "Arith"})
    assert written == [out]
    assert out.read_bytes()[:8] == PNG and out.stat().st_size > 5000
    assert [p.name for p in out.parent.iterdir()] == ["curves.png"]  # no temp files left


def test_grid_png_and_pdf_with_a_missing_panel(tmp_path):
    paths = [tmp_path / "c.png", tmp_path / "c.pdf"]
    df = scores()
    df = df[~((df["reward"] == "entropy") & (df["benchmark"] == "arith_hard"))]  # a panel without data
    learning_curves_grid(df, paths, rewards=["oracle", "entropy"], benchmarks=["arith", "arith_hard"])
    assert paths[1].read_bytes()[:4] == b"%PDF" and paths[0].read_bytes()[:8] == PNG


def test_grid_legend_names_only_drawn_curricula_and_fits(tmp_path, monkeypatch):
    import vicurl.report.curves as curves

    figs = []
    monkeypatch.setattr(curves, "save", lambda fig, out, dpi: figs.append(fig))
    learning_curves_grid(scores(), tmp_path / "x.png", curricula=["none", "sent", "vcrl", "vicurl"], title="t")
    (legend,) = figs[0].legends
    assert [t.get_text() for t in legend.get_texts()] == ["No Curriculum", "VCRL", "VI-CuRL"]  # no SENT runs
    width = figs[0].get_size_inches()[0]
    assert legend._ncols <= max(1, int(width / 1.4))  # wraps into rows rather than overflow the figure


def test_grid_errors(tmp_path):
    with pytest.raises(ValueError, match="several rows"):
        learning_curves_grid(pd.concat([scores(), scores().assign(model="other")]), tmp_path / "x.png")
    with pytest.raises(ValueError, match="no scores"):
        learning_curves_grid(scores(), tmp_path / "x.png", curricula=["sent"])
    with pytest.raises(ValueError, match="pass@4"):
        learning_curves_grid(scores(), tmp_path / "x.png", metrics=["pass@4"])
    with pytest.raises(ValueError, match="band"):
        learning_curves_grid(scores(), tmp_path / "x.png", band="iqr")


def metrics():
    rows = []
    for seed in (0, 1):
        for step in range(1, 11):
            beta = 0.2 + 0.8 * (step - 1) / 9
            rows.append({"seed": seed, "step": step, "curriculum/beta_target": beta,
                         "curriculum/beta_actual": min(1.0, beta + 0.02 * seed), "curriculum/tau": 0.9 - 0.05 * step,
                         "curriculum/conf_mean": 0.7, "reward/mean": 0.5})
    return pd.DataFrame(rows)


def test_schedule(tmp_path):
    paths = [tmp_path / "s.png", tmp_path / "s.pdf"]
    assert schedule_figure(metrics(), paths, title="tiny, oracle-vicurl") == paths
    assert paths[0].read_bytes()[:8] == PNG and paths[1].read_bytes()[:4] == b"%PDF"
    # a curriculum without a threshold (random share) still draws
    schedule_figure(metrics().drop(columns=["curriculum/tau"]), tmp_path / "r.png")
    with pytest.raises(ValueError, match="beta_target"):
        schedule_figure(metrics().drop(columns=["curriculum/beta_target"]), tmp_path / "x.png")


def probes():
    rows = []
    for model in ("qwen", "r1"):
        for seed in (0, 1):
            for step in range(0, 101, 10):
                beta = min(1.0, 0.2 + 0.008 * step)
                full_s, full_v = 2.0 + 0.1 * seed, 1.0
                rows.append({"study": "probe", "model": model, "reward": "oracle", "curriculum": "vicurl", "seed": seed,
                             "step": step, "beta_t": beta, "n_prompts": 128, "n_kept": int(128 * beta),
                             "sigma2_full": full_s, "sigma2_kept": full_s * (0.5 + 0.5 * beta),
                             "vprob_full": full_v if step else 0.0, "vprob_kept": full_v * beta})
    return pd.DataFrame(rows)


def test_variance_figures(tmp_path):
    paths = [tmp_path / "ratio.png", tmp_path / "ratio.pdf"]
    variance_ratio(probes(), paths, models=["qwen", "r1"], titles={"qwen": "Qwen2.5-Math-1.5B"})
    assert paths[0].read_bytes()[:8] == PNG and paths[1].read_bytes()[:4] == b"%PDF"
    out = variance_absolute(probes(), tmp_path / "abs.png", log=True)
    assert out[0].stat().st_size > 5000
    with pytest.raises(ValueError, match="sigma2_kept"):
        variance_ratio(probes().drop(columns=["sigma2_kept"]), tmp_path / "x.png")
    with pytest.raises(ValueError, match="filter"):
        variance_ratio(pd.concat([probes(), probes().assign(curriculum="none")]), tmp_path / "x.png")


def test_variance_ratio_values(tmp_path, monkeypatch):
    """The plotted ratios are kept/full per seed, averaged; a zero full variance gives no point."""
    import vicurl.report.variance as V

    seen = {}

    def spy(ax, df, col, color, label, style="-"):
        seen[(df["model"].iloc[0], col)] = df.dropna(subset=[col]).groupby("step")[col].mean()

    monkeypatch.setattr(V, "_line", spy)
    variance_ratio(probes(), tmp_path / "r.png")
    r = seen[("qwen", "ratio_sigma2")]
    assert np.allclose(r.values, 0.5 + 0.5 * np.minimum(1.0, 0.2 + 0.008 * r.index.to_numpy()))
    assert 0 not in seen[("qwen", "ratio_vprob")].index  # vprob_full = 0 at step 0


def test_variance_figures_script(tmp_path):
    """workflow_scripts/variance_figures.py through a one-rule Snakefile, as a rule would call it."""
    import json

    from harness import REPO, snakemake

    rows = pd.concat([probes(), probes().assign(curriculum="none")]).to_dict("records")
    names = []
    for i, row in enumerate(rows):  # one JSON file per probe, as rule probe writes them
        names.append(f"probes/{i}.json")
        (tmp_path / names[-1]).parent.mkdir(exist_ok=True)
        (tmp_path / names[-1]).write_text(json.dumps(row))
    (tmp_path / "Snakefile").write_text(f"""
rule variance_figures:
    input: probes={names!r}
    output: ratio_png="ratio.png", ratio_pdf="ratio.pdf", absolute_png="abs.png", absolute_pdf="abs.pdf"
    params: study="probe", reward="oracle", curriculum="vicurl", models=["r1", "qwen"], titles={{"qwen": "Qwen"}}
    log: "variance.log"
    script: "{REPO}/workflow_scripts/variance_figures.py"
""")
    out = snakemake(tmp_path, "--cores", "1", snakefile=tmp_path / "Snakefile", timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    for name in ("ratio.png", "abs.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG
    assert "probe rows" in (tmp_path / "variance.log").read_text()


def train_metrics():
    return pd.DataFrame([{"reward": r, "curriculum": c, "seed": s, "step": t,
                          "reward/mean": 0.01 * t, "reward/oracle_acc": 0.5 - 0.002 * t * (c == "none")}
                         for r in ("majority_vote", "entropy") for c in ("none", "vicurl") for s in (0, 1)
                         for t in range(1, 41)])


def test_training_curves_png_and_pdf(tmp_path):
    written = training_curves_grid(train_metrics(), [tmp_path / "t.png", tmp_path / "t.pdf"], band="std", title="t")
    assert [p.suffix for p in written] == [".png", ".pdf"]
    assert (tmp_path / "t.png").read_bytes()[:8] == PNG and (tmp_path / "t.pdf").read_bytes()[:4] == b"%PDF"
    with pytest.raises(ValueError, match="reward/oracle_acc"):
        training_curves_grid(train_metrics().drop(columns="reward/oracle_acc"), tmp_path / "x.png")
    with pytest.raises(ValueError, match="no training metrics"):
        training_curves_grid(train_metrics(), tmp_path / "x.png", curricula=["sent"])


def test_training_curves_smooth_within_each_run():
    m = train_metrics().sample(frac=1, random_state=0)  # any row order
    m.loc[(m["curriculum"] == "vicurl") & (m["seed"] == 1), "reward/mean"] = 5.0  # another run: must not leak
    s = smoothed(m, 4)
    run = s[(s["reward"] == "entropy") & (s["curriculum"] == "none") & (s["seed"] == 0)]
    assert run["step"].tolist() == list(range(1, 41))
    # the mean of the last 4 steps' 0.01 t (fewer at the start)
    assert run["reward/mean"].tolist() == pytest.approx([0.01 * np.mean(range(max(1, t - 3), t + 1)) for t in range(1, 41)])


def test_variance_ratio_draws_the_mechanism_where_probes_record_it(tmp_path, monkeypatch):
    """With the informative prompts recorded: their ratios (dashed) and the zero-gradient shares."""
    import vicurl.report.variance as V

    seen = {}

    def spy(ax, df, col, color, label, style="-"):
        seen[(df["model"].iloc[0], col)] = (df.dropna(subset=[col]).groupby("step")[col].mean(), style)

    p = probes().assign(n_informative=64, n_kept_informative=lambda d: d["n_kept"] // 4)
    for v in ("sigma2", "vprob"):
        p[f"{v}_full_inf"], p[f"{v}_kept_inf"] = 2 * p[f"{v}_full"], p[f"{v}_kept"]
    monkeypatch.setattr(V, "_line", spy)
    variance_ratio(probes(), tmp_path / "plain.png")
    assert ("qwen", "zero_kept") not in seen  # older probes: the headline ratios only
    variance_ratio(p, tmp_path / "r.png")
    inf, style = seen[("qwen", "ratio_inf_sigma2")]
    assert style == "--" and np.allclose(inf.values, seen[("qwen", "ratio_sigma2")][0].values / 2)
    zero_kept, zero_full = seen[("qwen", "zero_kept")][0], seen[("qwen", "zero_full")][0]
    assert np.allclose(zero_kept.values, 0.75, atol=0.025) and np.allclose(zero_full.values, 0.5)  # n_kept // 4 rounds
