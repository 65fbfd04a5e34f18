"""The method catalog (vicurl.config.methods): the one place a curriculum or reward source is named, and
what reads it. Adding a curriculum is one module and one catalog entry; the config schema agrees."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
import torch
import yaml

from vicurl.algos.rewards import GroupReward, check_params, group_rewards
from vicurl.config import checks, methods
from vicurl.config import runs as R
from vicurl.curriculum import Batch, Curriculum, Selection, make_curriculum, selection_metrics
from vicurl.engines import step as engine_step
from vicurl.report import labels

from harness import REPO

SCHEMA = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())["properties"]


def test_the_catalog_is_torch_free():
    """The Snakefile's parse, the config checks and the report import it: no torch (nor anything
    heavy) behind it."""
    tree = ast.parse(Path(methods.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= {"__future__", "importlib", "dataclasses", "typing"}


# ----------------------------------------------------------------------------- the schema agrees


def parameters(fn, skip=("self", "group")):
    """The named parameters of a class's __init__ or a reward function (a bare **params names none)."""
    return {n for n, p in inspect.signature(fn).parameters.items()
            if n not in skip and p.kind is not inspect.Parameter.VAR_KEYWORD}


def test_schema_lists_the_catalogs_curricula_with_their_parameters():
    props = SCHEMA["curricula"]["properties"]
    assert set(props) == set(methods.CURRICULA)
    share = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())["definitions"]["share_curriculum"]
    for name, spec in methods.CURRICULA.items():
        schema = props[name]
        keys = set((share if "$ref" in schema else schema).get("properties", {}))
        # weight_kl is the run's (vicurl.config.runs.train_settings takes it), not the class's
        assert keys - {"weight_kl"} == parameters(methods.load(spec.implementation).__init__), name


def test_schema_lists_the_catalogs_rewards_with_their_parameters():
    props = SCHEMA["rewards"]["properties"]
    assert set(props) == set(methods.REWARDS)
    for name, spec in methods.REWARDS.items():
        assert set(props[name].get("properties", {})) == parameters(methods.load(spec.implementation)), name


def test_capabilities_agree_with_the_classes():
    """``proposes``: the class chooses prompts (overrides propose); ``stateless``: it proposes
    nothing and keeps no state across steps (no state_dict of its own)."""
    for name, spec in methods.CURRICULA.items():
        cls = methods.load(spec.implementation)
        assert (cls.propose is not Curriculum.propose) == spec.proposes, name
        if spec.stateless:
            assert not spec.proposes and cls.state_dict is Curriculum.state_dict, name
        assert make_curriculum(name).name == name


def test_what_the_code_reads_of_the_catalog():
    assert methods.probeable() == ["none", "vicurl", "reverse_confidence", "random", "length_first",
                                   "static_confidence", "soft_confidence"]
    assert methods.proposing() == ["adarft", "sent"]
    assert methods.supported_by("verl") == list(methods.CURRICULA)
    assert [r for r in methods.REWARDS if not engine_step.reward_bounded(r)] == ["entropy"]
    assert labels.row_label("majority_vote", "none") == "TTRL" and labels.row_label("oracle", "vicurl") == "VI-CuRL"
    assert labels.reward_title("semantic") == "Verifier-Free: Semantic Entropy" and labels.reward_label("entropy") == "Entropy"
    with pytest.raises(ValueError, match="unknown curriculum 'vicrul'"):
        make_curriculum("vicrul")


# ----------------------------------------------------------------------------- adding a curriculum


class Toy(Curriculum):
    """A curriculum outside the package: keeps the first ``keep`` prompts of a batch."""

    def __init__(self, keep: int = 1):
        super().__init__(keep=keep)
        self.keep = keep

    def select(self, batch: Batch) -> Selection:
        mask = (torch.arange(batch.size) < self.keep).float()
        return Selection(mask, selection_metrics(batch, mask, self.keep / batch.size, float("nan")))


def toy_reward(group, bonus: float = 0.0) -> GroupReward:
    return GroupReward([float(len(t) % 2) + bonus for t in group.texts])


TOY = methods.CurriculumSpec("toy", f"{__name__}:Toy", "Toy Curriculum", stats=lambda p: ("difficulty",),
                             stateless=True)


def config(**top):
    return checks.with_defaults({
        "train": {"total_steps": 4},
        "datasets": {"t": {"source": "synthetic"}, "e": {"source": "synthetic"}},
        "synthetic": {"splits": {"t": {}, "e": {}}},
        "models": {"m": {"hub_id": "x"}},
        "rewards": {"oracle": {}, "toy_reward": {}},
        "curricula": {"none": {}, "toy": {"keep": 2}},
        "studies": {"s": {"train_set": "t", "benchmarks": ["e"], "models": ["m"],
                          "settings": {"oracle": ["none", "toy"], "toy_reward": ["toy"]}, "seeds": [0]}},
        "probes": {"studies": ["s"], "curricula": ["toy"]},
        **top,
    })


def test_a_curriculum_is_one_module_and_one_catalog_entry(monkeypatch):
    with pytest.raises(ValueError, match="unknown curriculum 'toy'"):
        make_curriculum("toy")
    monkeypatch.setitem(methods.CURRICULA, "toy", TOY)
    cur = make_curriculum("toy", {"keep": 2})  # the engines build it so
    assert isinstance(cur, Toy) and cur.name == "toy" and cur.needs_stats == ("difficulty",)
    with pytest.raises(ValueError, match="curricula.toy"):
        make_curriculum("toy", {"kep": 2})
    # the parse-time checks: runs on either engine, probeable, reads the offline statistics
    cfg = config()
    checks.check(cfg)
    checks.check({**cfg, "engine": "verl"})
    assert checks.verl_refusal({"curriculum": "toy", "total_steps": 1}) is None
    run = R.Run("s", "m", "oracle", "toy", 0)
    assert R.needs_prompt_stats(cfg, run) and R.is_probed(cfg, run)
    assert labels.row_label("oracle", "toy") == labels.curriculum_label("toy") == "Toy Curriculum"
    # an entry's capabilities are what the checks read
    monkeypatch.setitem(methods.CURRICULA, "toy", methods.CurriculumSpec("toy", TOY.implementation, "Toy",
                                                                         engines=("local",)))
    checks.check(cfg | {"probes": {}})
    with pytest.raises(ValueError, match=r"studies.s.settings.oracle: 'toy' cannot run on engine: verl"):
        checks.check(cfg | {"probes": {}, "engine": "verl"})
    with pytest.raises(ValueError, match="probes.curricula: 'toy' keeps state across steps"):
        checks.check(cfg)
    assert not R.needs_prompt_stats(cfg, run)


def test_a_reward_is_one_function_and_one_catalog_entry(monkeypatch):
    monkeypatch.setitem(methods.CURRICULA, "toy", TOY)
    with pytest.raises(ValueError, match="unknown reward 'toy_reward'"):
        check_params("toy_reward", {})
    monkeypatch.setitem(methods.REWARDS, "toy_reward", methods.RewardSpec(
        "toy_reward", f"{__name__}:toy_reward", "Toy Reward", "Toy", "Toy Baseline", bounded=False))
    check_params("toy_reward", {"bonus": 1.0})
    with pytest.raises(ValueError, match="bonsu"):
        check_params("toy_reward", {"bonsu": 1.0})
    out = group_rewards("toy_reward", {"bonus": 1.0}, ["a", "ab", "abc", "abcd"], ["", ""], group_size=2)
    assert out.rewards.tolist() == [2.0, 1.0, 2.0, 1.0]
    assert not engine_step.reward_bounded("toy_reward")
    checks.check(config())
    assert labels.row_label("toy_reward", "none") == "Toy Baseline" and labels.reward_title("toy_reward") == "Toy Reward"

