"""docs/your_model.md's example, config/examples/your_study.yaml layered over config/paper.yaml: the
target `study_your_study` plans the example study's training runs of its Hub model on its local
training set, their evaluations and its table, and nothing of the paper's own studies (a dry run)."""

import re

import yaml

from harness import PAPER_CONFIG, REPO, snakemake

EXAMPLE = REPO / "config" / "examples" / "your_study.yaml"


def planned_jobs(text: str) -> list[tuple[str, dict, str]]:
    """(rule, wildcards, the job's lines) of every job of a dry run's output."""
    out = []
    for m in re.finditer(r"^(?:local)?rule (\w+):\n((?:    .*\n)+)", text, re.M):
        w = re.search(r"^    wildcards: (.*)$", m.group(2), re.M)
        out.append((m.group(1), dict(kv.split("=", 1) for kv in w.group(1).split(", ")) if w else {}, m.group(2)))
    return out


def test_your_study_plans_its_own_runs_and_nothing_of_the_papers(tmp_path):
    ex = yaml.safe_load(EXAMPLE.read_text())
    paper = yaml.safe_load(PAPER_CONFIG.read_text())
    (name, study), = ex["studies"].items()
    (model,) = study["models"]
    assert model not in paper["models"] and "hub_id" in ex["models"][model]  # a new model from the Hub
    train_set = ex["datasets"][study["train_set"]]
    # the local training set, where the config points (relative to the working directory)
    local = tmp_path / train_set["local_path"]
    local.parent.mkdir(parents=True)
    local.write_text('{"problem": "What is 2 + 3?", "answer": "5"}\n{"problem": "What is 7 * 6?", "answer": 42}\n')

    out = snakemake(tmp_path, "-n", f"study_{name}", configs=[PAPER_CONFIG, EXAMPLE], timeout=300)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    jobs = planned_jobs(out.stdout)

    # exactly the study's runs: VI-CuRL and no curriculum, one reward, every seed, the new model
    settings = [f"{r}-{c}" for r, cs in study["settings"].items() for c in cs]
    assert len(study["settings"]) == 1 and sorted(c for cs in study["settings"].values() for c in cs) == ["none", "vicurl"]
    trained = {(w["study"], w["model"], w["setting"], int(w["seed"])) for rule, w, _ in jobs if rule == "train"}
    assert trained == {(name, model, s, seed) for s in settings for seed in study["seeds"]}

    # nothing of the paper's studies, models or sets beyond what the target needs
    for rule, w, _ in jobs:
        assert w.get("study", name) in (name, "base"), (rule, w)
        assert w.get("model", model) == model, (rule, w)
    prepared = {w["dataset"]: lines for rule, w, lines in jobs if rule == "prepare_dataset"}
    assert set(prepared) == {study["train_set"], *study["benchmarks"]}
    assert f"input: {train_set['local_path']}" in prepared[study["train_set"]]  # the local file, not the Hub
    rules = {rule for rule, _, _ in jobs}
    assert {"probe", "prompt_stats", "all", "aggregate"}.isdisjoint(rules)
    assert sum(rule == "table" for rule, _, _ in jobs) == len(ex.get("tables", {}))
    assert f"results/{ex['scenario']}/" in out.stdout and "results/paper/" not in out.stdout


def test_each_examples_header_command_plans_as_written():
    """Every override file of config/examples/ opens with the command that runs it: that command, as written
    and from the repository's root (a dry run), plans its target."""
    import shlex
    import sys

    from harness import bounded

    for example in sorted((REPO / "config" / "examples").glob("*.yaml")):
        commands = [ln.lstrip("# ").strip() for ln in example.read_text().splitlines()
                    if ln.startswith("#") and ln.lstrip("# ").startswith("snakemake ")]
        assert commands, f"{example.name} names no command"
        for command in commands:
            args = shlex.split(command)[1:]
            assert "-n" in args, command  # a dry run: what the header promises to plan
            out = bounded([sys.executable, "-m", "snakemake", *args], timeout=300, cwd=REPO)
            assert out.returncode == 0, (command, (out.stdout + out.stderr)[-3000:])
            assert "Job stats" in out.stdout, command
