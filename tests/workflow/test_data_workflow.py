"""The prepare_dataset rule: every real benchmark file and fixture through Snakemake; the paper config's plan."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from vicurl.data import schema

from harness import FIXTURES, PAPER_CONFIG, link_demo_config, snakemake


def config_with(datasets: dict, scenario: str = "bench") -> dict:
    first = next(iter(datasets))
    return {
        "scenario": scenario,
        "datasets": datasets,
        "models": {"m": {"hub_id": "org/model"}},
        "train": {"total_steps": 1},
        "studies": {"s": {"train_set": first, "benchmarks": [first], "models": ["m"],
                          "settings": {"oracle": ["none"]}, "seeds": [0]}},
    }


def write_yaml(path: Path, obj) -> Path:
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    return path


# dataset -> (config entry, rows in, rows out)
def bench_datasets(b: Path) -> dict:
    return {
        "math500": ({"source": "math500", "local_path": str(b / "math500.jsonl")}, 500, 500),
        "aime24": ({"source": "aime24", "local_path": str(b / "aime24.jsonl")}, 30, 30),
        "aime25": ({"source": "aime25", "local_path": str(b / "aime25.jsonl")}, 30, 30),
        "amc23": ({"source": "amc23", "local_path": str(b / "amc23.jsonl")}, 40, 40),
        "minerva_math": ({"source": "minerva_math", "local_path": str(b / "minerva_math.sample.jsonl")}, 20, 20),
        "olympiadbench": ({"source": "olympiadbench", "local_path": str(b / "olympiadbench.sample.jsonl")}, 20, 20),
        "theoremqa": ({"source": "theoremqa", "local_path": str(b / "theoremqa.json")}, 800, 747),
        "deepscaler_aime": ({"source": "deepscaler", "local_path": str(b / "deepscaler_train_aime.json")}, 975, 975),
        "deepscaler_math": ({"source": "deepscaler", "local_path": str(b / "deepscaler_train_math.sample.json")}, 200, 200),
        "deepscaler": ({"source": "deepscaler", "local_path": str(FIXTURES / "deepscaler.jsonl"),
                        "adarft_difficulty": {"local_path": str(FIXTURES / "deepscaler_difficulty.jsonl")}}, 8, 6),
        "webinstruct_general": ({"source": "webinstruct_verified",
                                 "local_path": str(FIXTURES / "webinstruct_verified.jsonl")}, 14, 8),
        "mmlu_pro": ({"source": "mmlu_pro", "local_path": str(FIXTURES / "mmlu_pro.jsonl")}, 5, 5),
        "gpqa_diamond": ({"source": "gpqa_diamond", "local_path": str(FIXTURES / "gpqa_synthetic.jsonl")}, 12, 12),
    }


def test_every_benchmark_file_through_the_rule(tmp_path, benchmarks_dir):
    sets = bench_datasets(benchmarks_dir)
    covered = {Path(p).name for cfg, _, _ in sets.values() for p in [cfg["local_path"]] if str(benchmarks_dir) in p}
    assert covered == {p.name for p in benchmarks_dir.iterdir() if p.suffix in (".json", ".jsonl")}
    cfg = write_yaml(tmp_path / "bench.yaml", config_with({k: v[0] for k, v in sets.items()}))
    out = snakemake(tmp_path, "--cores", "2", "data", configs=[cfg], timeout=600)
    assert out.returncode == 0, out.stderr[-5000:]
    data = tmp_path / "results" / "bench" / "data"
    for name, (_, rows_in, rows_out) in sets.items():
        m = json.loads((data / f"{name}.manifest.json").read_text())
        assert (m["rows_in"], m["rows_out"]) == (rows_in, rows_out), name
        assert len(schema.read(data / f"{name}.parquet")) == rows_out
        assert (tmp_path / "results" / "bench" / "logs" / "data" / f"{name}.log").read_text().count("rows in") == 1
    theorem = json.loads((data / "theoremqa.manifest.json").read_text())
    assert theorem["dropped"] == {"needs_image": 53}
    assert json.loads((data / "webinstruct_general.manifest.json").read_text())["dropped"]["category:Mathematics"] == 4
    again = snakemake(tmp_path, "-n", "data", configs=[cfg], timeout=600)
    assert "Nothing to be done" in again.stdout + again.stderr


def test_paper_config_plans_one_preparation_job_per_set(tmp_path):
    """A given `--configfile` is the whole config: the Snakefile loads config/demo.yaml only when none is
    given, so the demo's synthetic sets do not come along (and do without one)."""
    link_demo_config(tmp_path)  # as seen from the repo root
    paper = yaml.safe_load(PAPER_CONFIG.read_text())
    out = snakemake(tmp_path, "-n", "data", configs=[PAPER_CONFIG], timeout=600)
    assert out.returncode == 0, out.stderr[-5000:]
    text = out.stdout + out.stderr
    planned = re.findall(r"rule prepare_dataset:.*?wildcards: dataset=(\S+)", text, flags=re.S)
    assert sorted(planned) == sorted(paper["datasets"])
    assert re.search(r"^prepare_dataset\s+12$", text, flags=re.M) and "synthetic_data" not in text
    assert set(paper["datasets"]) == {"deepscaler", "webinstruct_general", "math500", "aime24", "aime25", "amc23",
                                      "minerva_math", "olympiadbench", "mmlu_pro", "gpqa_diamond", "theoremqa",
                                      "webinstruct_val"}
    demo = snakemake(tmp_path, "-n", "data", timeout=300)
    assert demo.returncode == 0 and "synthetic_data" in demo.stdout and "prepare_dataset" not in demo.stdout


@pytest.mark.parametrize("entry, named", [
    ({"source": "math500", "shufle_seed": 1}, "shufle_seed"),  # schema: unknown key
    ({"source": "math5000"}, "math5000"),  # schema: unknown source
    ({"source": "math500", "shuffle_seed": 1}, "datasets.math500.shuffle_seed"),  # not a setting of this source
    ({"source": "math500", "local_path": "/no/such/file.jsonl"}, "/no/such/file.jsonl"),  # missing input file
])
def test_dataset_config_errors_name_the_key(tmp_path, entry, named):
    cfg = write_yaml(tmp_path / "c.yaml", config_with({"math500": entry}))
    out = snakemake(tmp_path, "-n", "data", configs=[cfg], timeout=600)
    assert out.returncode != 0
    assert named in out.stdout + out.stderr
