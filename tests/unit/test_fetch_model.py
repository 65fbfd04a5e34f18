"""vicurl.models.fetch: a model's files from the Hub at one commit, through huggingface_hub's real client.

The Hub is out of reach here, so a local HTTP server (tests/fake_hub.py) answers the requests huggingface_hub
makes, serving a real model folder (the GPU rehearsal's stand-in); everything on the client side is
huggingface_hub's own code."""

import json
from pathlib import Path

import pytest
import transformers
from fake_hub import SHA, FakeHub

from vicurl.models import fetch
from vicurl.rehearsal import stand_ins


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A real model folder as a Hub repository holds it: Llama 3.2's Meta checkpoint under original/, a
    README, a stray .bin beside the safetensors."""
    root = tmp_path_factory.mktemp("hub") / "repo"
    stand_ins.write_model(root, ["1+2=3", "4*5=20"], seed=0)
    (root / "original").mkdir()
    (root / "original" / "consolidated.00.pth").write_bytes(b"meta's own checkpoint")
    (root / "original" / "params.json").write_text("{}")
    (root / "README.md").write_text("# model card")
    (root / "training_args.bin").write_bytes(b"pickle")
    return root


@pytest.fixture
def hub(repo):
    h = FakeHub({"org/model": repo, "meta-llama/gated": repo})
    h.gated.add("meta-llama/gated")
    yield h
    h.server.shutdown()


def test_the_files_a_job_loads(repo):
    files = [str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()]
    chosen = fetch.wanted(files)
    assert "model.safetensors" in chosen and "config.json" in chosen and "tokenizer.json" in chosen
    assert not [f for f in chosen if f.startswith("original/") or f.endswith((".bin", ".md"))]
    assert fetch.wanted(["config.json", "pytorch_model.bin", "original/x.pth"]) == ["config.json", "pytorch_model.bin"]


def test_is_hub_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert fetch.is_hub_id("Qwen/Qwen2.5-Math-1.5B") and fetch.is_hub_id("meta-llama/Llama-3.2-3B-Instruct")
    assert not fetch.is_hub_id("results/stand_ins/model") and not fetch.is_hub_id("/models/qwen")
    (tmp_path / "local" / "model").mkdir(parents=True)
    assert not fetch.is_hub_id("local/model")  # an existing folder is local, as transformers takes it


def test_a_fetch_is_the_repositorys_model_at_its_commit(hub, repo, tmp_path):
    out, manifest = tmp_path / "models" / "m" / "hub", tmp_path / "models" / "m" / "hub.json"
    m = fetch.fetch("org/model", out, manifest, name="m", endpoint=hub.url)
    assert m["commit"] == SHA and json.loads(manifest.read_text()) == m
    assert sorted(p.name for p in out.iterdir()) == sorted(m["files"])  # nothing else: no resume records
    assert not Path(f"{out}.partial").exists()
    for f, size in m["files"].items():
        assert (out / f).read_bytes() == (repo / f).read_bytes() and size == (repo / f).stat().st_size
    assert hub.requests[0] == ("GET", "/api/models/org/model")  # the main branch's commit asked once ...
    assert all(f"/resolve/{SHA}/" in p for _, p in hub.requests if "/resolve/" in p)  # ... its commit downloaded
    # the folder is the model: transformers loads it, equal to the repository's
    a = transformers.AutoModelForCausalLM.from_pretrained(out)
    b = transformers.AutoModelForCausalLM.from_pretrained(repo)
    assert all((x == y).all() for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert transformers.AutoTokenizer.from_pretrained(out).chat_template == stand_ins.CHATML


def test_a_stopped_fetch_resumes_and_no_job_sees_half_a_model(hub, repo, tmp_path):
    out, manifest = tmp_path / "hub", tmp_path / "hub.json"
    hub.broken.add("tokenizer.json")
    with pytest.raises(fetch.FetchError, match=r"models.m: downloading org/model .* kept in .*hub.partial; run the job again"):
        fetch.fetch("org/model", out, manifest, name="m", endpoint=hub.url)
    assert not out.exists() and not manifest.exists()
    first = hub.gets()
    assert "model.safetensors" in first
    hub.broken.clear()
    hub.requests.clear()
    (tmp_path / "hub.partial" / "left_by_an_earlier_revision.json").write_text("{}")
    fetch.fetch("org/model", out, manifest, name="m", endpoint=hub.url)
    assert "tokenizer.json" in hub.gets() and "model.safetensors" not in hub.gets()  # the weights were complete
    assert (out / "tokenizer.json").read_bytes() == (repo / "tokenizer.json").read_bytes()
    assert sorted(p.name for p in out.iterdir()) == sorted(json.loads(manifest.read_text())["files"])


def test_errors_name_the_config_key(hub, tmp_path, monkeypatch):
    """A gated model (meta-llama's): the Hub shows its info to anyone and refuses its files, 401 without a token
    and 403 with the token of an account not granted access; either way the error names the config key, the
    model's page and the login command. A missing repository: the key and the way round it offline."""
    import huggingface_hub

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))  # none stored
    gated = (r"(?s)models.llama: meta-llama/gated is gated: its files need access granted on "
             r"https://huggingface.co/meta-llama/gated and a token of that account on this host \(`hf auth login`, or "
             r"HF_TOKEN\); then run the job again \(the Hub: .*Access to model meta-llama/gated is restricted: ")
    with pytest.raises(fetch.FetchError, match=gated + "please log in"):
        fetch.fetch("meta-llama/gated", tmp_path / "a", tmp_path / "a.json", name="llama", endpoint=hub.url)
    monkeypatch.setenv("HF_TOKEN", "hf_token_of_another_account")
    with pytest.raises(fetch.FetchError, match=gated + "you are not in the authorized list"):
        fetch.fetch("meta-llama/gated", tmp_path / "a", tmp_path / "a.json", name="llama", endpoint=hub.url)
    with pytest.raises(fetch.FetchError, match=r"(?s)models.x: cannot read org/missing .*point models.x.hub_id at a local copy"):
        fetch.fetch("org/missing", tmp_path / "b", tmp_path / "b.json", name="x", endpoint=hub.url)
    monkeypatch.setenv("HF_TOKEN", "hf_token_granted")
    assert fetch.fetch("meta-llama/gated", tmp_path / "c", tmp_path / "c.json", endpoint=hub.url)["commit"] == SHA


def test_the_commit_resolved_first_is_every_later_fetchs(hub, tmp_path):
    """hub_commits.yaml keeps the commit each revision resolved to first: once the Hub's main moves on, a fetch
    into a deleted folder, or another scenario's, still takes the kept commit, whether the config leaves the
    revision unset or writes `main`. The config's revision set to that commit asks for what was asked before
    (nothing reruns). Another revision (another scenario's, or a move) is resolved and kept beside it, and
    changes nothing of the main branch's: unset again, the revision is main's kept commit."""
    commits, newer = tmp_path / "hub_commits.yaml", "f" * 40

    def get(folder, revision=None):
        return fetch.fetch("org/model", tmp_path / folder / "hub", tmp_path / folder / "hub.json", revision=revision,
                           commits=commits, endpoint=hub.url)

    assert get("a")["commit"] == SHA and fetch.read_commits(commits) == {"org/model": {"main": SHA}}
    hub.revisions["org/model"] = {"main": newer, "v2": newer}  # main moved on the Hub
    hub.requests.clear()
    assert get("b")["commit"] == SHA == get("b2", revision="main")["commit"]
    assert ("GET", f"/api/models/org/model/revision/{SHA}") in hub.requests
    kept = fetch.read_commits(commits)
    for pin in (None, "main", SHA):  # unset, the branch written out, the kept commit: the same request
        assert fetch.request("org/model", pin, kept) is None
    assert fetch.request("org/model", "v2", kept) == "v2"  # a move, or another scenario's revision
    assert get("c", revision="v2")["commit"] == newer
    kept = fetch.read_commits(commits)
    assert kept == {"org/model": {"main": SHA, "v2": newer}}
    assert fetch.request("org/model", newer, kept) == "v2" and fetch.request("org/model", None, kept) is None
    assert get("d")["commit"] == SHA  # main's commit still: the other revision changed nothing of it

    commits.write_text(f"org/model: {{requested: null, commit: '{SHA}'}}\n")  # the file's first form
    assert fetch.read_commits(commits) == {"org/model": {"main": SHA}}
    commits.write_text("org/model: abc\n")
    with pytest.raises(fetch.FetchError, match=r"hub_commits.yaml: 'org/model' must map each revision to its commit"):
        fetch.read_commits(commits)


def test_a_fetched_folders_commit_counts_as_kept_where_the_file_has_none(hub, tmp_path):
    """A study fetched without the kept commits' file (before it existed, a checkout or copied results without
    it, the file deleted): the folder's manifest records what its jobs ran on. A fetch again after the Hub's
    main moved takes that commit and keeps it in the file; a pin of it asks for what was asked; a manifest of
    another revision or another model says nothing of this one's."""
    commits = tmp_path / "hub_commits.yaml"
    first = fetch.fetch("org/model", tmp_path / "a" / "hub", tmp_path / "a" / "hub.json", endpoint=hub.url)
    assert first["commit"] == SHA and not commits.exists()
    manifests = [("org/model", tmp_path / "a" / "hub.json"), ("org/other", tmp_path / "a" / "hub.json"),
                 ("org/model", tmp_path / "missing.json")]
    kept = fetch.with_manifests({}, manifests)
    assert kept == {"org/model": {"main": SHA}}
    assert fetch.request("org/model", SHA, kept) is None  # a pin of the folder's commit: nothing reruns
    assert fetch.with_manifests({"org/model": {"main": "c" * 40}}, manifests) == {"org/model": {"main": "c" * 40}}
    fetch.keep_missing(tmp_path / "from_manifests.yaml", kept)  # the workflow's start, before a fetch's job
    assert fetch.read_commits(tmp_path / "from_manifests.yaml") == kept
    fetch.keep_missing(tmp_path / "from_manifests.yaml", {"org/model": {"main": "c" * 40}})  # only what is missing
    assert fetch.read_commits(tmp_path / "from_manifests.yaml") == kept
    hub.revisions["org/model"] = {"main": "f" * 40, "v2": "e" * 40}  # main moved on the Hub
    again = fetch.fetch("org/model", tmp_path / "a" / "hub", tmp_path / "a" / "hub.json", commits=commits,
                        endpoint=hub.url)
    assert again["commit"] == SHA and fetch.read_commits(commits) == {"org/model": {"main": SHA}}
    assert fetch.fetched_commit(tmp_path / "a" / "hub.json", "org/model", "v2") is None
    moved = fetch.fetch("org/model", tmp_path / "a" / "hub", tmp_path / "a" / "hub.json", revision="v2",
                        commits=commits, endpoint=hub.url)
    assert moved["commit"] == "e" * 40


def test_a_revision_belongs_to_a_hub_model(tmp_path, monkeypatch):
    """The config's models.{name}.revision: the commit fetched is the revision's; a local folder or a built
    model has none, and saying one is an error naming the key (the schema's own check passes it)."""
    import yaml

    from vicurl.config import checks

    monkeypatch.chdir(tmp_path)
    paper = yaml.safe_load((Path(__file__).parents[2] / "config" / "paper.yaml").read_text())
    paper["models"]["qwen_math_1.5b"]["revision"] = "v1.0"
    checks.read(paper)
    paper["models"]["qwen_math_1.5b"]["hub_id"] = "/models/qwen_math_1.5b"
    with pytest.raises(ValueError, match=r"models.qwen_math_1.5b.revision: only a Hub model"):
        checks.read(paper)


def test_a_run_records_the_commit_it_trained_from(hub, tmp_path):
    """provenance.json's `model` (vicurl.engines.job.train): a fetched model's id and commit; a built or local
    model's folder only, whatever file lies beside it."""
    out = tmp_path / "models" / "m" / "hub"
    fetch.fetch("org/model", out, f"{out}.json", endpoint=hub.url)
    assert fetch.fetched(out) == {"dir": str(out), "hub_id": "org/model", "revision": None, "commit": SHA}
    (tmp_path / "local.json").write_text("not json")
    assert fetch.fetched(tmp_path / "local") == {"dir": str(tmp_path / "local")}
    assert fetch.fetched(tmp_path / "base") == {"dir": str(tmp_path / "base")}
