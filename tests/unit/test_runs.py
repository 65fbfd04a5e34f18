"""The run table: evaluated, exported and probed steps; cross-reference errors name the key."""

import pytest

from vicurl.config import checks
from vicurl.config import runs as R


def config(**probes):
    return checks.with_defaults({
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
    })


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
    cfg["probes"]["steps"] = [12, 0, 3]  # explicit steps instead of every: sorted
    assert R.probe_steps(cfg, vicurl) == [0, 3, 12] and R.probe_steps(cfg, none) == []


def test_study_eval_steps_and_eval_overrides():
    cfg = config()
    cfg["studies"]["s"].update(eval_steps=[13], eval={"max_new_tokens": 8192})
    assert R.eval_steps(cfg, "s") == [10, 13, 20, 25]
    assert R.eval_settings(cfg, "s") == {**cfg["eval"], "max_new_tokens": 8192} and cfg["eval"]["every"] == 10
    assert R.eval_settings(cfg, R.BASE) == cfg["eval"]  # Base evaluations: the global settings
    assert 13 in R.train_settings(cfg, R.Run("s", "m", "oracle", "none", 0))["export_steps"]


def test_checkpoint_benchmarks_are_those_evaluations_plans():
    """A checkpoint's generation job (eval.generate_per: checkpoint or run) covers exactly the benchmarks that
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
                                           ({"studies": ["s"], "curricula": ["vcrl"]}, "probes.curricula"),
                                           ({"studies": ["s"], "steps": [0, 25]}, "probes.steps")])
def test_probe_config_errors_are_named(probes, named):
    with pytest.raises(ValueError, match=named):
        checks.check(config(**probes))


def continued_config():
    """Study `long` continues study `s` (25 steps) to step 50, as the mechanism study continues main."""
    cfg = config()
    cfg["curricula"]["soft_confidence"] = {"weight_kl": False}
    cfg["studies"]["long"] = {"continues": "s", "train_set": "t", "benchmarks": ["e"], "models": ["m"],
                              "settings": {"oracle": ["none", "soft_confidence"]}, "seeds": [0],
                              "train": {"total_steps": 50}, "eval_steps": [25]}
    return cfg


def test_a_continued_run_starts_from_its_source_run_and_owns_only_its_own_steps():
    cfg = continued_config()
    checks.check(cfg)
    none, soft = R.Run("long", "m", "oracle", "none", 0), R.Run("long", "m", "oracle", "soft_confidence", 0)
    assert R.source_run(cfg, none) == R.Run("s", "m", "oracle", "none", 0) and R.start_step(cfg, none) == 25
    assert R.source_run(cfg, soft) is None and R.start_step(cfg, soft) == 0  # `s` has no soft run: 50 steps here
    assert R.eval_steps(cfg, "long") == [10, 20, 25, 30, 40, 50]
    assert [R.checkpoint_owner(cfg, none, s).study for s in R.eval_steps(cfg, "long")] == ["s"] * 3 + ["long"] * 3
    assert {R.checkpoint_owner(cfg, soft, s).study for s in R.eval_steps(cfg, "long")} == {"long"}
    s_none = R.train_settings(cfg, none)
    assert s_none["export_steps"] == [30, 40, 50] and s_none["curriculum_steps"] == 25 and s_none["total_steps"] == 50
    s_soft = R.train_settings(cfg, soft)
    assert s_soft["export_steps"] == [10, 20, 25, 30, 40, 50] and s_soft["curriculum_steps"] == 25
    assert s_soft["weight_kl"] is False and "weight_kl" not in s_soft["curriculum_params"]
    assert "curriculum_steps" not in R.train_settings(cfg, R.source_run(cfg, none))
    cfg["verl"] = {"runtime": 600, "runtime_scale": {"m": 2}}  # 600 min per 25 steps, x2 for the model
    assert R.train_runtime(cfg, none) == 1200 and R.train_runtime(cfg, soft) == 2400
    assert R.train_runtime(cfg, R.source_run(cfg, none), attempt=2) == 2400


@pytest.mark.parametrize("change,named", [
    (lambda c: c["studies"]["long"].update(continues="nope"), "studies.long.continues"),
    (lambda c: c["studies"]["long"].update(train={"total_steps": 20}, eval_steps=[]), "studies.long.train.total_steps"),
    (lambda c: c["studies"]["long"]["train"].update(lr=1.0), "studies.long.train.lr"),
    (lambda c: c["studies"]["long"].update(benchmarks=["t"]), "studies.long.benchmarks"),
    (lambda c: c["studies"]["long"].update(eval={"n_samples": 4}), "studies.long.eval"),
    (lambda c: c["studies"]["long"].update(eval_steps=[15]), "studies.long.eval_steps"),
    (lambda c: c.update(probes={"studies": ["long"]}), "probes.studies"),
])
def test_a_continuation_that_would_not_extend_its_source_runs_is_named(change, named):
    cfg = continued_config()
    change(cfg)
    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        checks.check(cfg)


def test_mini_batches_must_divide_the_batch():
    cfg = config()
    cfg["train"].update(batch_size=8, mini_batch_size=3)
    with pytest.raises(ValueError, match="train.mini_batch_size=3 does not divide train.batch_size=8"):
        checks.check(cfg)
    cfg["train"]["mini_batch_size"] = 4
    checks.check(cfg)


def test_continues_null_makes_separate_runs():
    cfg = continued_config()
    cfg["studies"]["long"]["continues"] = None  # e.g. a second configfile over the paper's
    checks.check(cfg)
    none = R.Run("long", "m", "oracle", "none", 0)
    assert R.source_run(cfg, none) is None and R.start_step(cfg, none) == 0
    s = R.train_settings(cfg, none)
    assert "curriculum_steps" not in s and s["export_steps"] == [10, 20, 25, 30, 40, 50]


def test_a_run_is_built_and_parsed_in_one_place():
    """``Run`` spells a run's folder and reads it back, the Base pseudo-run included; the rules
    (wildcards), the grading and probe scripts (their records' keys) and the tables go through it."""
    from types import SimpleNamespace

    run = R.Run("s", "m", "majority_vote", "static_confidence", 1)
    assert run.setting == "majority_vote-static_confidence" and run.path == "s/m/majority_vote-static_confidence/seed1"
    wildcards = SimpleNamespace(study="s", model="m", setting=run.setting, seed="1", step="5")
    assert R.Run.from_wildcards(wildcards) == run == R.Run.of(*run.path.replace("/seed", "/").split("/"))
    assert list(run.identity().items()) == [("study", "s"), ("model", "m"), ("reward", "majority_vote"),
                                            ("curriculum", "static_confidence"), ("seed", 1)]
    base = R.Run.of(R.BASE, "m", R.BASE, "0")
    assert (base.reward, base.curriculum, base.setting, base.path) == (R.BASE, R.BASE, R.BASE, "base/m/base/seed0")
    assert R.split_setting("oracle-none") == ("oracle", "none") and R.setting_of(*R.split_setting(R.BASE)) == R.BASE
    cfg = config()  # every evaluation's setting is a run's or Base's, and reads back to its parts
    for study, model, setting, seed, *_ in R.evaluations(cfg):
        assert R.Run.of(study, model, setting, seed).setting == setting
        assert R.checkpoint_owner(cfg, R.Run.of(study, model, setting, seed), 10).study == study


def test_only_verl_settings_that_change_training_are_the_train_jobs_params():
    """The train rule's ``params.verl`` (a change reruns the job): what verl trains with, per model; the
    resources and the stall bound are the job's, and a change to them retrains nothing."""
    cfg = {"verl": {"overrides": ["a=1"], "runtime": 600, "step_timeout": 5, "mem_mb": 10,
                    "models": {"m": {"max_token_len_per_gpu": 8192, "step_timeout": 9}}}}
    params = R.verl_training_settings(cfg, "m")
    assert params["overrides"] == ["a=1"] and params["max_token_len_per_gpu"] == 8192
    assert not set(params) & set(R.VERL_JOB_KEYS)
    changed = {"verl": {**cfg["verl"], "runtime": 1, "step_timeout": 1, "mem_mb": 1, "cpus_per_gpu": 1,
                        "runtime_scale": {"m": 3}}}
    assert R.verl_training_settings(changed, "m") == params
    assert R.verl_settings(cfg, "m").step_timeout == 9  # the job reads the whole section
    assert R.verl_training_settings({"verl": {**cfg["verl"], "overrides": ["a=2"]}}, "m") != params
