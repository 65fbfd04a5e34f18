"""Dataset preparation (library level): the real benchmark files, the schema fixtures, errors, the Hub path."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from vicurl.data import schema
from vicurl.data.load import LoadError
from vicurl.data.prepare import DataError, prepare, prepare_dataset
from vicurl.data.sources import ConfigError, resolve

from harness import FIXTURES


def run(name, cfg):
    return prepare(resolve(name, cfg))


def meta(row):
    return json.loads(row["metadata"])


def by_id(df):
    return df.set_index("id", drop=False)


# ----------------------------------------------------------------------------- real benchmark files


def test_math500(benchmarks_dir):
    df, m = run("math500", {"source": "math500", "local_path": str(benchmarks_dir / "math500.jsonl")})
    assert (m["rows_in"], m["rows_out"], m["dropped"]) == (500, 500, {})
    row = by_id(df).loc["test/precalculus/807.json"]
    assert row["answer"] == "\\left( 3, \\frac{\\pi}{2} \\right)"
    assert row["answer_type"] == "math" and "\\boxed" in row["solution"]
    assert meta(row) == {"subject": "Precalculus", "level": 2}
    assert m["source"]["type"] == "local" and len(m["source"]["files"][0]["sha256"]) == 64


def test_aime(benchmarks_dir):
    df, m = run("aime24", {"source": "aime24", "local_path": str(benchmarks_dir / "aime24.jsonl")})
    assert (m["rows_in"], m["rows_out"]) == (30, 30)
    assert by_id(df).loc["60", "answer"] == "204"
    padded = df[df["metadata"].str.contains("answer_raw")]
    assert len(padded) == m["answers_rewritten"]["leading_zeros_removed"] == 7
    assert {meta(r)["answer_raw"]: r["answer"] for _, r in padded.iterrows()}["025"] == "25"

    df, m = run("aime25", {"source": "aime25", "local_path": str(benchmarks_dir / "aime25.jsonl")})
    assert (m["rows_in"], m["rows_out"]) == (30, 30)
    assert df.iloc[19]["answer"] == "336" and meta(df.iloc[19])["answer_raw"] == "336^\\circ"
    assert m["answers_rewritten"] == {"degree_sign_removed": 1}
    assert df["answer"].str.fullmatch(r"\d{1,3}").all()


def test_amc23_float_answers(benchmarks_dir):
    df, m = run("amc23", {"source": "amc23", "local_path": str(benchmarks_dir / "amc23.jsonl")})
    assert (m["rows_in"], m["rows_out"]) == (40, 40)
    assert by_id(df).loc["0", "answer"] == "27"
    assert "-1" in set(df["answer"]) and not df["answer"].str.endswith(".0").any()
    assert df.iloc[0]["question"].startswith("Cities $A$ and $B$ are $45$ miles apart.")


def test_minerva_gold_is_the_last_box(benchmarks_dir):
    df, m = run("minerva_math", {"source": "minerva_math", "local_path": str(benchmarks_dir / "minerva_math.sample.jsonl")})
    assert (m["rows_in"], m["rows_out"]) == (20, 20)
    assert df.iloc[0]["answer"] == "1.6" and df.iloc[1]["answer"] == "4.5e33"
    assert meta(df.iloc[0])["type"].startswith("Introduction to Astronomy")


def test_olympiadbench_list_answers(benchmarks_dir):
    df, m = run("olympiadbench", {"source": "olympiadbench", "local_path": str(benchmarks_dir / "olympiadbench.sample.jsonl")})
    assert (m["rows_in"], m["rows_out"]) == (20, 20)
    rows = by_id(df)
    assert rows.loc["1606", ["answer", "answer_type"]].tolist() == ["2", "math"]
    assert rows.loc["1610", "answer"] == "\\frac{1}{2 n+2}"
    assert rows.loc["1664", ["answer", "answer_type"]].tolist() == ["69,84", "list"]
    assert rows.loc["1618", "answer"] == "(1,8,19), (2,7,13), (4,5,7)"
    assert meta(rows.loc["1618"])["final_answers"] == ["(1,8,19), (2,7,13), (4,5,7)"]
    assert meta(rows.loc["1618"])["source_answer_type"] == "Tuple"
    assert not df["answer"].str.contains("$", regex=False).any()
    assert m["answer_types"] == {"list": 2, "math": 18}


def test_theoremqa_skips_pictures_and_maps_types(benchmarks_dir):
    df, m = run("theoremqa", {"source": "theoremqa", "local_path": str(benchmarks_dir / "theoremqa.json")})
    assert (m["rows_in"], m["rows_out"], m["dropped"]) == (800, 747, {"needs_image": 53})
    assert m["answer_types"] == {"bool": 112, "float": 360, "integer": 200, "list": 59, "option": 16}
    rows = by_id(df)
    assert rows.loc["jianyu_xu/Lah_number_6.json", ["answer", "answer_type"]].tolist() == ["11760", "integer"]
    assert rows.loc["mingyin/double-integral4.json", ["answer", "answer_type"]].tolist() == ["[0.333, 0.25]", "list"]
    assert rows.loc["xinyi/fisher_information_4.json", ["answer", "answer_type"]].tolist() == ["(c)", "option"]
    assert rows.loc["elainewan/math_algebra_3.json", ["answer", "answer_type"]].tolist() == ["False", "bool"]
    assert rows.loc["wenhuchen/newton3.json", ["answer", "answer_type"]].tolist() == ["1.42", "float"]
    assert "maxku/ipnetwork21-ip.json" not in rows.index  # needs a picture


def test_deepscaler_real_files_concatenated(benchmarks_dir):
    paths = [str(benchmarks_dir / f) for f in ("deepscaler_train_aime.json", "deepscaler_train_math.sample.json")]
    df, m = run("deepscaler", {"source": "deepscaler", "local_path": paths})
    assert (m["rows_in"], m["rows_out"]) == (1175, 1175)
    assert [f["rows"] for f in m["source"]["files"]] == [975, 200]
    assert df.iloc[0]["answer"] == "60" and meta(df.iloc[0])["year"] == 1983
    assert meta(df.iloc[975])["type"] == "Algebra" and df.iloc[975]["answer"] == "0"


# ----------------------------------------------------------------------------- schema fixtures


def test_deepscaler_rows_without_answer_are_dropped_and_counted():
    df, m = run("deepscaler", {"source": "deepscaler", "local_path": str(FIXTURES / "deepscaler.jsonl")})
    assert (m["rows_in"], m["rows_out"], m["dropped"]) == (8, 6, {"no_answer": 2})
    assert df["id"].tolist() == ["0", "1", "3", "4", "6", "7"]  # ids: position in the source
    assert df.iloc[1]["answer"] == "\\frac{5}{6}"


def test_deepscaler_adarft_difficulty():
    cfg = {"source": "deepscaler", "local_path": str(FIXTURES / "deepscaler.jsonl"),
           "adarft_difficulty": {"local_path": str(FIXTURES / "deepscaler_difficulty.jsonl")}}
    df, m = run("deepscaler", cfg)
    assert {k: m["adarft_difficulty"][k] for k in ("rows", "matched", "unmatched")} == {"rows": 4, "matched": 3, "unmatched": 3}
    assert [meta(r).get("adarft_difficulty") for _, r in df.iterrows()] == [3, 12, None, None, None, 25]


def test_webinstruct_mathematics_filter_and_unsupported_types():
    path = str(FIXTURES / "webinstruct_verified.jsonl")
    df, m = run("webinstruct_general", {"source": "webinstruct_verified", "local_path": path})
    assert m["rows_in"] == 14 and m["rows_out"] == 8
    assert m["dropped"] == {"category:Mathematics": 4, "unsupported_answer_type:Other": 1, "unsupported_answer_type:String": 1}
    assert "Mathematics" not in {meta(r)["category"] for _, r in df.iterrows()}
    rows = by_id(df)
    assert rows.loc["wi-001", ["answer", "answer_type"]].tolist() == ["10.0", "float"]
    assert rows.loc["wi-004", ["answer", "answer_type"]].tolist() == ["(b)", "option"]
    assert rows.loc["wi-005", "answer_type"] == "bool" and rows.loc["wi-010", "answer_type"] == "list"
    assert {rows.loc[i, "answer_type"] for i in ("wi-008", "wi-009", "wi-013")} == {"math"}
    assert meta(rows.loc["wi-002"]) == {"category": "Chemistry", "difficulty": "University", "source_answer_type": "Integer"}

    # the validation set keeps every category (the paper filters its training prompts only)
    df, m = run("wi", {"source": "webinstruct_val", "local_path": path})
    assert m["dropped"] == {"unsupported_answer_type:Other": 1, "unsupported_answer_type:String": 1}
    assert m["rows_out"] == 12 and "Mathematics" in {meta(r)["category"] for _, r in df.iterrows()}
    # kept by config: answer type `text`, still reported; the category filter can be changed
    df, m = run("wi", {"source": "webinstruct_val", "local_path": path, "unsupported_answer_types": "keep"})
    assert (m["rows_out"], m["dropped"]) == (14, {})
    assert m["answer_types"]["text"] == 2 and m["source_answer_types"]["String"] == 1
    _, m = run("wi", {"source": "webinstruct_val", "local_path": path, "exclude_categories": ["Mathematics"]})
    assert m["dropped"]["category:Mathematics"] == 4


def test_mmlu_pro_options_and_subset():
    path = str(FIXTURES / "mmlu_pro.jsonl")
    df, m = run("mmlu_pro", {"source": "mmlu_pro", "local_path": path})
    assert m["rows_out"] == 5 and set(df["answer_type"]) == {"multiple_choice"}
    assert [len(o) for o in df["options"]] == [10, 4, 4, 6, 4]
    assert df.iloc[4]["answer"] == "C" and df.iloc[4]["options"][2] == "29"
    assert meta(df.iloc[0])["category"] == "physics"

    sub, m = run("mmlu_pro", {"source": "mmlu_pro", "local_path": path, "subset": {"n": 3, "seed": 1}})
    again, _ = run("mmlu_pro", {"source": "mmlu_pro", "local_path": path, "subset": {"n": 3, "seed": 1}})
    assert len(sub) == 3 and m["dropped"] == {"not_in_subset": 2}
    assert sub["id"].tolist() == again["id"].tolist() and sub["id"].tolist() == sorted(sub["id"].tolist(), key=int)

    nomath, m = run("mmlu_pro", {"source": "mmlu_pro", "local_path": path, "exclude_categories": ["math"]})
    assert m["dropped"] == {"category:math": 2} and len(nomath) == 3


def test_gpqa_options_shuffled_with_a_fixed_seed(tmp_path):
    path = FIXTURES / "gpqa_synthetic.jsonl"
    df, m = run("gpqa_diamond", {"source": "gpqa_diamond", "local_path": str(path)})
    assert m["rows_out"] == 12 and set(df["answer_type"]) == {"multiple_choice"}
    for _, r in df.iterrows():
        i = int(r["id"][-3:])
        assert r["options"][ord(r["answer"]) - 65] == f"correct option {i}"
        assert sorted(r["options"]) == sorted([f"correct option {i}"] + [f"wrong option {i}{c}" for c in "abc"])
    assert len(set(df["answer"])) > 1  # the correct answer is not always first
    # deterministic, and independent of row order: the shuffle depends on (seed, Record ID) only
    rev = tmp_path / "rev.jsonl"
    rev.write_text("".join(reversed(path.read_text().splitlines(keepends=True))))
    df_rev, _ = run("gpqa_diamond", {"source": "gpqa_diamond", "local_path": str(rev)})
    pd.testing.assert_frame_equal(by_id(df).sort_index(), by_id(df_rev).sort_index())
    other, _ = run("gpqa_diamond", {"source": "gpqa_diamond", "local_path": str(path), "shuffle_seed": 1})
    assert other["answer"].tolist() != df["answer"].tolist()


# ----------------------------------------------------------------------------- errors


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


MATH_ROWS = [
    {"problem": "1+1?", "answer": "2", "unique_id": "a"},
    {"problem": "2+2?", "unique_id": "b"},  # no answer
    "{not json",
    {"problem": "3+3?", "answer": "6", "unique_id": "a"},  # duplicate id
    {"problem": "   ", "answer": "1", "unique_id": "c"},  # empty question
]


def test_bad_rows_fail_naming_the_dataset_and_row(tmp_path):
    path = write_jsonl(tmp_path / "m.jsonl", MATH_ROWS)
    with pytest.raises(DataError, match=r"math500 row 1 \(unique_id='b', m\.jsonl line 2\): missing field 'answer'.*on_bad_row"):
        run("math500", {"source": "math500", "local_path": path})


def test_bad_rows_dropped_and_counted(tmp_path):
    path = write_jsonl(tmp_path / "m.jsonl", MATH_ROWS)
    df, m = run("math500", {"source": "math500", "local_path": path, "on_bad_row": "drop"})
    assert df["id"].tolist() == ["a"]
    assert m["dropped"] == {"duplicate_id": 1, "empty_field": 1, "malformed_record": 1, "missing_field": 1}
    assert m["rows_in"] == 5 and m["rows_out"] == 1
    assert "m.jsonl line 3" in m["dropped_examples"]["malformed_record"][0]


def test_bad_multiple_choice_answer(tmp_path):
    row = {"question_id": 1, "question": "q?", "options": ["x", "y"], "answer": "D", "answer_index": 3, "category": "law"}
    with pytest.raises(DataError, match=r"mmlu_pro row 0 \(question_id=1.*answer 'D' is not one of the 2 option letters"):
        run("mmlu_pro", {"source": "mmlu_pro", "local_path": write_jsonl(tmp_path / "x.jsonl", [row])})


def test_unreadable_files(tmp_path):
    with pytest.raises(LoadError, match=r"math500: cannot read .*nope\.jsonl: no such file"):
        run("math500", {"source": "math500", "local_path": str(tmp_path / "nope.jsonl")})
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet")
    with pytest.raises(LoadError, match=r"math500: cannot read .*bad\.parquet"):
        run("math500", {"source": "math500", "local_path": str(bad)})
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(LoadError, match="unknown file type '.csv'"):
        run("math500", {"source": "math500", "local_path": str(tmp_path / "x.csv")})
    (tmp_path / "obj.json").write_text('{"problem": "x"}')
    with pytest.raises(LoadError, match="expected a JSON list of objects"):
        run("math500", {"source": "math500", "local_path": str(tmp_path / "obj.json")})


@pytest.mark.parametrize("cfg, key", [
    ({"source": "math500", "shuffle_seed": 1}, "datasets.d.shuffle_seed"),
    ({"source": "nope"}, "datasets.d.source"),
    ({"source": "math500", "on_bad_row": "skip"}, "datasets.d.on_bad_row"),
    ({"source": "math500", "local_path": []}, "datasets.d.local_path"),
])
def test_config_errors_name_the_key(cfg, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        resolve("d", cfg)


def test_parquet_and_json_inputs_give_the_same_set(tmp_path, benchmarks_dir):
    src = benchmarks_dir / "amc23.jsonl"
    pq = tmp_path / "amc23.parquet"
    pd.read_json(src, lines=True).to_parquet(pq)
    js = tmp_path / "amc23.json"
    js.write_text(json.dumps([json.loads(line) for line in src.read_text().splitlines()]))
    want, _ = run("amc23", {"source": "amc23", "local_path": str(src)})
    for p in (pq, js):
        got, _ = run("amc23", {"source": "amc23", "local_path": str(p)})
        pd.testing.assert_frame_equal(got, want)


def test_written_files(tmp_path, benchmarks_dir):
    out = tmp_path / "data"
    m = prepare_dataset("aime25", {"source": "aime25", "local_path": str(benchmarks_dir / "aime25.jsonl")},
                        out / "aime25.parquet", out / "aime25.manifest.json")
    assert sorted(p.name for p in out.iterdir()) == ["aime25.manifest.json", "aime25.parquet"]  # no temp files left
    assert len(schema.read(out / "aime25.parquet")) == 30
    assert json.loads((out / "aime25.manifest.json").read_text()) == m
    assert m["rows_in"] == m["rows_out"] + sum(m["dropped"].values())


# ----------------------------------------------------------------------------- the Hub path


class FakeHub:
    """Stands in for the network: `datasets.load_dataset` and the revision lookup; everything else is real."""

    def __init__(self, monkeypatch, tables, sha="0123abcd" * 5, online=True):
        import datasets
        import huggingface_hub

        self.calls = []
        self.tables = tables  # (hub_id, config, split) -> list of rows or a datasets.Dataset

        def load_dataset(path, name=None, split=None, revision=None, **kw):
            self.calls.append((path, name, split, revision))
            t = self.tables[(path, name, split)]
            return t if isinstance(t, datasets.Dataset) else datasets.Dataset.from_list(t)

        def dataset_info(api, repo_id, revision=None, **kw):
            if not online:
                raise ConnectionError("offline")
            return SimpleNamespace(sha=sha)

        monkeypatch.setattr(datasets, "load_dataset", load_dataset)
        monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", dataset_info)


def jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def test_hub_path_matches_local(monkeypatch, benchmarks_dir):
    path = benchmarks_dir / "math500.jsonl"
    hub = FakeHub(monkeypatch, {("HuggingFaceH4/MATH-500", None, "test"): jsonl(path)})
    df, m = run("math500", {"source": "math500"})
    assert hub.calls == [("HuggingFaceH4/MATH-500", None, "test", "0123abcd" * 5)]  # loaded at the resolved commit
    assert m["source"] == {"type": "hub", "hub_id": "HuggingFaceH4/MATH-500", "split": "test",
                           "configs": [{"config": None, "rows": 500}], "revision": None,
                           "resolved_revision": "0123abcd" * 5, "rows_sha256": m["source"]["rows_sha256"]}
    local, lm = run("math500", {"source": "math500", "local_path": str(path)})
    pd.testing.assert_frame_equal(df, local)
    assert m["source"]["rows_sha256"] == lm["source"]["rows_sha256"]


def test_hub_several_configs_and_overrides(monkeypatch, benchmarks_dir):
    rows = [{"question": r["problem"], "answer": r["answer"]} for r in jsonl(benchmarks_dir / "aime25.jsonl")]
    hub = FakeHub(monkeypatch, {("opencompass/AIME2025", "AIME2025-I", "test"): rows[:15],
                                ("opencompass/AIME2025", "AIME2025-II", "test"): rows[15:],
                                ("me/aime", "x", "dev"): rows[:3]}, online=False)
    df, m = run("aime25", {"source": "aime25", "revision": "v1"})
    assert [c[1] for c in hub.calls] == ["AIME2025-I", "AIME2025-II"]
    assert hub.calls[0][3] == "v1"  # offline: the configured revision, recorded as unresolved
    assert m["source"]["resolved_revision"] is None and m["source"]["revision"] == "v1"
    assert len(df) == 30 and df.iloc[19]["answer"] == "336" and df["id"].tolist() == [str(i) for i in range(30)]
    df, m = run("aime25", {"source": "aime25", "hub_id": "me/aime", "hub_config": "x", "split": "dev"})
    assert len(df) == 3 and m["source"]["hub_id"] == "me/aime"


def test_hub_image_column_is_not_decoded(monkeypatch):
    import datasets

    feats = datasets.Features({"Question": datasets.Value("string"), "Answer": datasets.Value("string"),
                               "Answer_type": datasets.Value("string"), "Picture": datasets.Image()})
    table = datasets.Dataset.from_list([
        {"Question": "Is 7 prime?", "Answer": "True", "Answer_type": "bool", "Picture": None},
        {"Question": "Read the graph.", "Answer": "5", "Answer_type": "integer",
         "Picture": {"bytes": b"\x89PNG fake", "path": "images/g.png"}},
        {"Question": "Pick one.", "Answer": "[1, 2]", "Answer_type": "list of integer", "Picture": None},
    ], features=feats)
    FakeHub(monkeypatch, {("TIGER-Lab/TheoremQA", None, "test"): table})
    df, m = run("theoremqa", {"source": "theoremqa"})
    assert m["dropped"] == {"needs_image": 1}
    assert df[["answer", "answer_type"]].values.tolist() == [["True", "bool"], ["[1, 2]", "list"]]


def test_hub_failure_points_at_local_path(monkeypatch):
    import datasets

    def fail(*a, **k):
        raise ConnectionError("Couldn't reach the Hub")

    FakeHub(monkeypatch, {}, online=False)
    monkeypatch.setattr(datasets, "load_dataset", fail)
    with pytest.raises(LoadError, match=r"mmlu_pro: cannot load TIGER-Lab/MMLU-Pro split test .*datasets\.mmlu_pro\.local_path"):
        run("mmlu_pro", {"source": "mmlu_pro"})


def test_schema_checks_multiple_choice_letters():
    from vicurl.data.schema import SchemaError, make_row, to_frame

    ok = make_row(id="a", source="t", question="q", answer="B", answer_type="multiple_choice", options=["x", "y"])
    assert len(to_frame([ok])) == 1
    for bad in ("C", "", "AB"):
        with pytest.raises(SchemaError, match="multiple choice"):
            to_frame([{**ok, "answer": bad}])


def test_an_empty_set_is_refused_naming_the_file(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(DataError, match=r"math500: no rows left to write \(0 read from .*empty\.jsonl"):
        run("math500", {"source": "math500", "local_path": str(empty)})
    only_math = tmp_path / "math.jsonl"  # every row filtered: refused too, with the reasons
    only_math.write_text(json.dumps({"id": "1", "question": "q", "answer": "2", "answer_type": "Integer",
                                     "category": "Mathematics"}) + "\n")
    with pytest.raises(DataError, match=r"dropped category:Mathematics: 1"):
        run("wi", {"source": "webinstruct_verified", "local_path": str(only_math)})


@pytest.mark.parametrize("answer, reason", [(float("nan"), "empty_field"), ([1, 2], "malformed_answer"),
                                            ({"a": 1}, "malformed_answer"), (float("inf"), "malformed_answer")])
def test_odd_gold_answers_are_malformed_rows(tmp_path, answer, reason):
    """NaN, a list, a mapping, inf where the gold answer should be text or a number: never the
    strings "nan" or "[1, 2]"; a named error, or a counted drop with on_bad_row: drop."""
    path = tmp_path / "m.parquet"
    rows = [{"unique_id": "ok", "problem": "1 + 1?", "answer": "2"}, {"unique_id": "odd", "problem": "?", "answer": answer}]
    if answer == answer:  # all but NaN (a parquet null) as JSON lines (inf: `Infinity`, as json writes it)
        path = tmp_path / "m.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        pd.DataFrame(rows).to_parquet(path)
    with pytest.raises(DataError, match=r"math500 row 1 \(unique_id='odd'"):
        run("math500", {"source": "math500", "local_path": str(path)})
    df, m = run("math500", {"source": "math500", "local_path": str(path), "on_bad_row": "drop"})
    assert df["id"].tolist() == ["ok"] and m["dropped"] == {reason: 1}
