"""The run table: evaluated, exported and probed steps; cross-reference errors name the key."""

import pytest

from vicurl import runs as R


def config(**probes):
    return {
        "train": {"total_steps": 25},
        "eval": {"every": 10},
        "datasets": {"t": {"source": "synthetic"}, "e": {"source": "synthetic"}},
        "synthetic": {"splits": {"t": {}, "e": {}}},
        "models": {"m": {"hub_id": "x"}},
        "rewards": {"oracle": {}},
        "curricula": {"none": {}, "vicurl": {}, "vcrl": {}},
        "studies": {"s": {"train_set": "t", "benchmarks": ["e"], "models": ["m"],
                          "settings": {"oracle": ["none", "vicurl"]}, "seeds": [0, 1]}},
        "probes": probes,
    }


def test_eval_and_probe_steps():
    cfg = config(studies=["s"], curricula=["vicurl"], every=10)
    vicurl, none = R.Run("s", "m", "oracle", "vicurl", 0), R.Run("s", "m", "oracle", "none", 0)
    assert R.eval_steps(cfg, "s") == [10, 20, 25]
    assert R.probe_steps(cfg, vicurl) == [0, 10, 20] and R.probe_steps(cfg, none) == []
    assert len(R.probes(cfg)) == 2 * 3  # two seeds of the vicurl run
    cfg["probes"]["every"] = 4  # probe checkpoints are exported even when not evaluated
    assert R.train_settings(cfg, vicurl)["export_steps"] == [4, 8, 10, 12, 16, 20, 24, 25]
    assert R.train_settings(cfg, none)["export_steps"] == [10, 20, 25]
    cfg["studies"]["s"]["eval_every"] = 25
    assert R.eval_steps(cfg, "s") == [25]


def test_study_eval_steps_and_eval_overrides():
    cfg = config()
    cfg["studies"]["s"].update(eval_steps=[13], eval={"max_new_tokens": 8192})
    assert R.eval_steps(cfg, "s") == [10, 13, 20, 25]
    assert R.eval_settings(cfg, "s") == {"every": 10, "max_new_tokens": 8192}
    assert R.eval_settings(cfg, R.BASE) == {"every": 10}  # Base evaluations: the global settings
    assert 13 in R.train_settings(cfg, R.Run("s", "m", "oracle", "none", 0))["export_steps"]


def test_checkpoint_benchmarks_are_those_evaluations_plans():
    """A checkpoint's generation job (eval.per_checkpoint) covers exactly the benchmarks that
    ``evaluations`` plans for it; the Base model's, the union over the studies that train it."""
    cfg = config()
    cfg["datasets"].update(f={"source": "synthetic"}, g={"source": "synthetic"})
    cfg["studies"]["t2"] = {**cfg["studies"]["s"], "benchmarks": ["f", "e"], "seeds": [1]}
    cfg["studies"]["t3"] = {**cfg["studies"]["s"], "benchmarks": ["g"], "models": ["other"], "seeds": [0]}
    planned: dict[tuple, list[str]] = {}
    for study, model, setting, seed, step, bench in R.evaluations(cfg):
        planned.setdefault((study, model, seed, step), []).append(bench)
    for (study, model, seed, _), benches in planned.items():
        assert R.checkpoint_benchmarks(cfg, study, model, seed) == sorted(set(benches), key=benches.index)
    assert R.checkpoint_benchmarks(cfg, R.BASE, "m", 0) == ["e"]
    assert R.checkpoint_benchmarks(cfg, R.BASE, "m", 1) == ["e", "f"]
    assert R.checkpoint_benchmarks(cfg, "t2", "m", 1) == ["f", "e"]


def test_probes_narrowed_by_model_reward_and_seed():
    cfg = config(studies=["s"], curricula=["vicurl"], every=10, seeds=[1], models=["m"], rewards=["oracle"])
    assert [(r.seed, s) for r, s in R.probes(cfg)] == [(1, 0), (1, 10), (1, 20)]
    cfg["probes"]["rewards"] = ["majority_vote"]
    assert R.probes(cfg) == []


def test_table_evaluations_read_only_the_rows_steps_and_seeds():
    cfg = config()
    cfg["studies"]["t2"] = {**cfg["studies"]["s"], "settings": {"oracle": ["vcrl"]}, "seeds": [0]}
    row = {"study": "s", "model": "m", "reward": "oracle", "curriculum": "vicurl", "step": 25, "seeds": None}
    base = {"study": R.BASE, "model": "m", "reward": R.BASE, "curriculum": R.BASE, "step": 0, "seeds": [1]}
    table = {"benchmarks": ["e"], "blocks": [{"rows": [base, row]}]}
    assert sorted(R.table_evaluations(cfg, table)) == [
        (R.BASE, "m", R.BASE, 1, 0, "e"), ("s", "m", "oracle-vicurl", 0, 25, "e"), ("s", "m", "oracle-vicurl", 1, 25, "e")]
    mech = {"benchmarks": ["e"], "t_long": 20, "blocks": [{"rows": [{**row, "step": None}]}]}
    assert sorted({e[4] for e in R.table_evaluations(cfg, mech)}) == [10, 20]  # the curve up to t_long


@pytest.mark.parametrize("probes, named", [({"studies": ["nope"]}, "probes.studies"),
                                           ({"studies": ["s"], "models": ["mm"]}, "probes.models"),
                                           ({"studies": ["s"], "curricula": ["vcrl"]}, "probes.curricula")])
def test_probe_config_errors_are_named(probes, named):
    with pytest.raises(ValueError, match=named):
        R.check(config(**probes))
