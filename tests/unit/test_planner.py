"""The study planner (vicurl.planning.planner, python -m vicurl.plan): its choice against brute force, the
claims file, and bad input."""

import dataclasses
import itertools
import math

import pytest

from vicurl import plan as plan_cli
from vicurl.planning import claims as claims_lib
from vicurl.planning import planner as P
from vicurl.planning.claims import Arm

ALPHA, POWER = 0.05, 0.8


@pytest.fixture(scope="module")
def catalog():
    return claims_lib.load()


def test_the_claims_file_reads_the_papers_numbers(catalog):
    by_id = {c.id: c for c in catalog}
    gain = by_id["gain/majority_vote/qwen_math_1.5b"]
    assert gain.gap == pytest.approx(0.341) and gain.side == ">" and gain.kind == "superiority"
    assert gain.a == Arm("main", "qwen_math_1.5b", "majority_vote-vicurl") and not gain.contradicted
    collapse = by_id["collapse/majority_vote/r1_distill_1.5b"]
    assert collapse.collapse and collapse.side == "<" and collapse.b.is_base and collapse.gap < 0
    assert by_id["variance/early/sigma2/qwen_math_1.5b"].gap == pytest.approx(math.log(0.8))
    contradicted = [c for c in catalog if c.contradicted]
    assert contradicted and all("paper's own" in c.contradicted for c in contradicted)


def _brute(cands, prices, budget, min_seeds):
    """The most claims, then the least cost, by enumeration: each subset's seeds at Holm's first level."""
    best = (0, 0.0, ())
    for m in range(1, len(cands) + 1):
        for subset in itertools.combinations(cands, m):
            need = {c: P._needed(c, ALPHA / m, POWER, min_seeds) for c in subset}
            if any(v is None for v in need.values()):
                continue
            seeds = {}
            for c in subset:
                for g in P._claim_groups(c):
                    seeds[g] = max(seeds.get(g, 0), need[c])
            arms = {a for c in subset for a in c.arms if not a.is_base}
            arms |= {prices.source[a] for a in arms if a in prices.source}
            for a in arms:
                seeds.setdefault(P.group_of(a), min_seeds)
            cost = sum(prices.arm[a] * seeds[P.group_of(a)] for a in arms)
            cost += sum(prices.base[g.model] * n for g, n in seeds.items())
            cost += sum(prices.stats_job[k] for k in {prices.needs_stats[a] for a in arms if a in prices.needs_stats})
            probed = {}
            for c in subset:
                if P._needs_probes(c):
                    probed[c.model] = max(probed.get(c.model, 0), need[c])
            cost += sum(prices.probes[m_] * n for m_, n in probed.items())
            if cost <= budget and (m > best[0] or (m == best[0] and cost < best[1])):
                best = (m, cost, subset)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_the_choice_equals_brute_force_on_small_catalogues(catalog, seed):
    import random

    rnd = random.Random(seed)
    pool = [c for c in catalog if not c.contradicted and c.model in ("r1_distill_1.5b", "qwen_math_1.5b")]
    cands = rnd.sample(pool, 6)
    cands = [dataclasses.replace(c, spread_a=rnd.uniform(0.005, 0.04),
                                 spread_b=None if c.b is None else rnd.uniform(0.005, 0.04)) for c in cands]
    arms = sorted({a for c in cands for a in c.arms if not a.is_base}, key=str)
    prices = P.Prices(arm={a: rnd.uniform(20, 200) for a in arms}, base={m: rnd.uniform(1, 10) for m in
                                                                          ("r1_distill_1.5b", "qwen_math_1.5b")},
                      probes={m: rnd.uniform(1, 30) for m in ("r1_distill_1.5b", "qwen_math_1.5b")},
                      stats_job={}, needs_stats={}, source={})
    for budget in (300.0, 1500.0, 6000.0):
        chosen, seeds, _ = P.choose(cands, prices, budget, ALPHA, POWER, 2)
        m, cost, _ = _brute(cands, prices, budget, 2)
        assert len(chosen) == m
        if m:
            arms = {a for c in chosen for a in c.arms if not a.is_base}
            assert sum(prices.arm[a] * seeds[P.group_of(a)] for a in arms) <= budget + 1e-6
            # the least cost, within HiGHS's relative gap on the objective (-count + cost / 2 (budget + 1))
            assert cost - 1e-6 <= _brute(list(chosen), prices, budget, 2)[1] <= cost + 2e-4 * m * (budget + 1)


def test_a_plan_keeps_its_budget_and_powers_its_claims(catalog, tmp_path):
    plan = P.make(5000, catalog=catalog, prereg=str(tmp_path / "preregistration.yaml"))
    assert plan.chosen and plan.cost <= 5000 and plan.new_cost == plan.cost
    m = len(plan.chosen)
    for k in plan.chosen:
        assert k.power_adjusted >= POWER - 1e-9 or k.power >= POWER
        assert k.seeds >= P._needed(k.claim, ALPHA / m, POWER, 2)
    statuses = {k.status for k in plan.candidates}
    assert statuses == {"chosen", "unaffordable", "undecidable"}
    assert plan.config["findings"] == {"claims": str(tmp_path / "preregistration.yaml")}


def _cli(tmp_path, *args):
    out = tmp_path / "plan"
    code = plan_cli.main(["--out", str(out), *args])
    return code, out


@pytest.mark.parametrize("args,words", [
    (["--budget", "0"], "--budget: 0 GPU hours"),
    (["--budget", "-5"], "--budget: -5 GPU hours"),
    (["--budget", "10"], "decides no claim: the cheapest"),
    (["--budget", "500", "--claims", "gain/majority_vote/qwen_math_1.5"], "'gain/majority_vote/qwen_math_1.5' is not a claim"),
    (["--budget", "500", "--gpu", "a100"], "--gpu: 'a100' is not one of"),
    (["--budget", "500", "--allow", "steps=100"], "--allow: 'steps' is not a departure"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, args, words):
    code, out = _cli(tmp_path, *args)
    err = capsys.readouterr().err.strip()
    assert code == 2 and words in err and len(err.splitlines()) == 1 and err.startswith("Error: ")
    assert not out.exists() or not any(out.iterdir())


def test_a_claims_file_with_a_missing_paper_key(tmp_path, capsys):
    text = claims_lib.CLAIMS.read_text().replace("paper: {text: variance_ratio_early_high}",
                                                 "paper: {text: variance_ratio_late}", 1)
    bad = tmp_path / "claims.yaml"
    bad.write_text(text)
    code, out = _cli(tmp_path, "--budget", "500", "--claims-file", str(bad))
    err = capsys.readouterr().err.strip()
    assert code == 2 and "config/paper_text_numbers.csv has no key 'variance_ratio_late'" in err
    assert "variance/ratio" in err and len(err.splitlines()) == 1 and not out.exists()
    table = tmp_path / "claims2.yaml"
    table.write_text(claims_lib.CLAIMS.read_text().replace("tables: [curriculum_ablation]", "tables: [ablation_x]", 1))
    code, _ = _cli(tmp_path, "--budget", "500", "--claims-file", str(table))
    assert code == 2 and "no table of ['ablation_x']" in capsys.readouterr().err


def test_a_plan_is_registered_once(tmp_path, capsys):
    code, out = _cli(tmp_path, "--budget", "500")
    assert code == 0 and sorted(p.name for p in out.iterdir()) == sorted(plan_cli.FILES)
    before = (out / "preregistration.yaml").read_text()
    code, _ = _cli(tmp_path, "--budget", "600")
    assert code == 2 and "holds a pre-registration already" in capsys.readouterr().err
    assert (out / "preregistration.yaml").read_text() == before
