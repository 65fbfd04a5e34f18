import numpy as np
import pytest

from vicurl.report.aggregate import AVERAGE, across_seeds, collect


def rec(seed, bench, p1, curriculum="vicurl", step=10, **kw):
    return dict(study="math", model="tiny", reward="oracle", curriculum=curriculum, seed=seed,
                step=step, benchmark=bench, **{"pass@1": p1, "pass@8": min(1.0, 2 * p1)}, **kw)


def table():
    return collect([
        rec(0, "a", 0.10), rec(1, "a", 0.20), rec(2, "a", 0.30),
        rec(0, "b", 0.50), rec(1, "b", 0.70), rec(2, "b", 0.60),
        rec(0, "a", 0.40, curriculum="none"),
        rec(0, "b", 0.20, curriculum="none"),
    ])


def test_collect_columns_and_errors():
    df = table()
    assert list(df.columns[:7]) == ["study", "model", "reward", "curriculum", "seed", "step", "benchmark"]
    assert len(df) == 8
    with pytest.raises(ValueError, match="identity"):
        collect([rec(0, "a", 0.1), rec(0, "a", 0.2)])
    with pytest.raises(ValueError, match="seed"):
        collect([{k: v for k, v in rec(0, "a", 0.1).items() if k != "seed"}])


def test_mean_std_by_hand():
    out = across_seeds(table(), metrics=("pass@1",))
    a = out[(out.curriculum == "vicurl") & (out.benchmark == "a")].iloc[0]
    assert a["mean"] == pytest.approx(0.2)
    assert a["std"] == pytest.approx(0.1)  # sample std of .1 .2 .3
    assert a["n_seeds"] == 3 and a["min"] == pytest.approx(0.1) and a["max"] == pytest.approx(0.3)
    single = out[(out.curriculum == "none") & (out.benchmark == "a")].iloc[0]
    assert single["std"] == 0.0 and single["n_seeds"] == 1


def test_average_is_per_seed_then_across_seeds():
    out = across_seeds(table(), metrics=("pass@1", "pass@8"), average_std="seeds")
    avg = out[(out.curriculum == "vicurl") & (out.benchmark == AVERAGE) & (out.metric == "pass@1")].iloc[0]
    per_seed = [(0.1 + 0.5) / 2, (0.2 + 0.7) / 2, (0.3 + 0.6) / 2]
    assert avg["mean"] == pytest.approx(np.mean(per_seed))
    assert avg["std"] == pytest.approx(np.std(per_seed, ddof=1))  # the std of the per-seed averages
    assert avg["std"] != pytest.approx((0.1 + 0.1) / 2)
    assert avg["n_seeds"] == 3
    assert set(out.metric) == {"pass@1", "pass@8"}


def test_average_std_is_the_mean_of_the_benchmark_stds_by_default():
    """The paper's convention: the Average's std is the mean of the row's per-benchmark stds;
    the mean is the same either way."""
    out = across_seeds(table(), metrics=("pass@1",))
    vicurl = out[out.curriculum == "vicurl"].set_index("benchmark")
    assert vicurl.loc["a", "std"] == pytest.approx(0.1) and vicurl.loc["b", "std"] == pytest.approx(0.1)
    assert vicurl.loc[AVERAGE, "std"] == pytest.approx((0.1 + 0.1) / 2)
    seeds = across_seeds(table(), metrics=("pass@1",), average_std="seeds")
    assert vicurl.loc[AVERAGE, "mean"] == pytest.approx(
        seeds[(seeds.curriculum == "vicurl") & (seeds.benchmark == AVERAGE)]["mean"].iloc[0])
    single = out[(out.curriculum == "none") & (out.benchmark == AVERAGE)].iloc[0]
    assert single["std"] == 0.0 and single["n_seeds"] == 1
    with pytest.raises(ValueError, match="average_std"):
        across_seeds(table(), metrics=("pass@1",), average_std="mean")


def test_the_paper_prints_the_mean_of_the_benchmark_stds_as_the_average_std():
    """Every Average "mean +- std" of the paper against the mean of its row's printed benchmark
    stds: within the rounding of the printed numbers (0.1 point) in 100 of the 103 rows."""
    from vicurl.report.paper import load_paper_numbers

    from harness import REPO

    df = load_paper_numbers(REPO / "config" / "paper_numbers.csv")
    df = df.assign(variant=df["variant"].fillna("").astype(str))
    row = ["table", "model", "reward", "curriculum", "variant", "metric"]
    cells = df[df["benchmark"] != "all"].groupby(row, sort=False)
    rows = close = 0
    for _, g in cells:
        avg = g[(g["benchmark"] == AVERAGE) & g["std"].notna()]
        stds = g.loc[g["benchmark"] != AVERAGE, "std"]
        if avg.empty or stds.empty or stds.isna().any():
            continue
        rows += 1
        close += abs(round(100 * avg["std"].iloc[0], 1) - round(100 * stds.mean(), 1)) <= 0.1 + 1e-9
    assert (rows, close) == (103, 100)


def test_average_skips_incomplete_seeds():
    df = collect([rec(0, "a", 0.1), rec(1, "a", 0.3), rec(0, "b", 0.5)])  # seed 1 lacks b
    out = across_seeds(df, metrics=("pass@1",))
    avg = out[out.benchmark == AVERAGE].iloc[0]
    assert avg["n_seeds"] == 1 and avg["mean"] == pytest.approx(0.3)
    out2 = across_seeds(df, metrics=("pass@1",), average_over=["a", "c"])
    assert (out2.benchmark == AVERAGE).sum() == 0
    out3 = across_seeds(df, metrics=("pass@1",), average=False)
    assert (out3.benchmark == AVERAGE).sum() == 0


def test_nan_values_dropped():
    df = collect([rec(0, "a", 0.1), rec(1, "a", float("nan"))])
    out = across_seeds(df, metrics=("pass@1",))
    a = out[out.benchmark == "a"].iloc[0]
    assert a["n_seeds"] == 1 and a["mean"] == pytest.approx(0.1)


def test_read_scores_keeps_the_listed_evaluations(tmp_path):
    import json

    from vicurl.report.aggregate import read_scores

    def rec(study, reward, curriculum, step, bench):
        return dict(study=study, model="m", reward=reward, curriculum=curriculum, seed=0, step=step, benchmark=bench,
                    **{"pass@1": 0.5})

    base = tmp_path / "base.json"
    base.write_text(json.dumps([rec("base", "base", "base", 0, "x"), rec("base", "base", "base", 0, "y")]))
    run = tmp_path / "run.json"
    run.write_text(json.dumps([rec("main", "oracle", "vicurl", 50, "x")]))
    assert len(read_scores([base, run])) == 3
    kept = read_scores([base, run], keep=[("base", "m", "base", 0, 0, "y"), ("main", "m", "oracle-vicurl", 0, 50, "x")])
    assert [(r["study"], r["benchmark"]) for r in kept] == [("base", "y"), ("main", "x")]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"study": "main"}]))
    with pytest.raises(ValueError, match="bad.json.*lacks identifying"):
        read_scores([bad])


def test_read_metrics_tags_each_runs_rows(tmp_path):
    from vicurl.report.aggregate import read_metrics

    paths = []
    for i, n in enumerate((2, 3)):
        paths.append(tmp_path / f"m{i}.jsonl")
        paths[-1].write_text("".join(f'{{"step": {t}, "reward/mean": {0.1 * t}}}\n' for t in range(1, n + 1)))
    m = read_metrics(paths, [("entropy", "none", "0"), ("entropy", "vicurl", 1)])
    assert len(m) == 5 and m["seed"].tolist() == [0, 0, 1, 1, 1]
    assert m.loc[m["curriculum"] == "vicurl", "step"].tolist() == [1, 2, 3]
    with pytest.raises(ValueError):
        read_metrics(paths, [("entropy", "none", 0)])  # one run per file
