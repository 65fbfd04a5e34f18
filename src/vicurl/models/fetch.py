"""An initial policy from the Hugging Face Hub, fetched once for the whole study.

Rule fetch_model downloads a model's files at one commit into the results folder, on the host that runs
Snakemake (a local rule, like prepare_dataset): the training, evaluation and probe jobs load that folder,
so compute nodes need no internet and no Hub token (meta-llama's models are gated), the study's thousands
of jobs do not each ask the Hub, and every run of a study trains the same weights even if the Hub's
repository changes meanwhile. The manifest beside the folder records the commit.

The commit a model's revision (config key ``models.<name>.revision``, default the main branch) resolves to
the first time is kept in ``hub_commits.yaml`` (config key ``hub_commits``), by Hub id and revision: every
later fetch of that revision, after a deleted folder, in another scenario or in a checkout that has the
file, takes that commit (where the file has no entry, the commit a fetched folder's manifest records for that
revision counts as kept, and is written to the file). So the main branch moving on the Hub changes nothing;
writing the kept commit into the config as the revision (a pin) reruns nothing either (``request``); another revision is resolved and
kept beside it, and going back to the first takes its kept commit again. One scenario's revision never
changes another's.

    python -m vicurl.models.fetch Qwen/Qwen2.5-Math-1.5B results/paper/models/qwen_math_1.5b/hub
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Any

from vicurl.runtime.io import write_json

log = logging.getLogger(__name__)

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # org/name
KEEP = (".json", ".txt", ".model", ".tiktoken", ".jinja")  # configs, tokenizer files, chat templates


class FetchError(RuntimeError):
    pass


def is_hub_id(ref: str) -> bool:
    """transformers' rule: an existing folder is a local model; otherwise `org/name` names a Hub repository.
    Anything else (`results/stand_ins/model`, `/models/x`) is a local path."""
    return not Path(ref).exists() and bool(HUB_ID.match(ref))


def wanted(files: list[str]) -> list[str]:
    """The files transformers and vLLM load: the top folder's configs, tokenizer and weights, safetensors
    where the repository has them (else PyTorch's .bin). Sub-folders are left out: Llama 3.2's `original/`
    holds Meta's own checkpoint (6 GB for the 3B model) that no job reads."""
    top = [f for f in files if "/" not in f]
    weights = [f for f in top if f.endswith(".safetensors")] or [f for f in top if f.endswith(".bin")]
    return sorted(weights + [f for f in top if f.endswith(KEEP)])


def manifest_of(model_dir: str | Path) -> Path:
    """Where a fetched folder's manifest lies: beside it, `<folder>.json` (rule fetch_model's `hub.json`)."""
    return Path(f"{model_dir}.json")


MAIN = "main"  # the Hub's default branch: the revision of a model whose config sets none


def requested_revision(revision: str | None) -> str | None:
    """The revision a config's value asks for: None for the main branch, however written."""
    return None if revision in (None, MAIN) else str(revision)


def read_commits(path: str | Path) -> dict[str, dict[str, str]]:
    """The kept commits (``hub_commits.yaml``): Hub id -> {revision asked (``MAIN`` where none was set): the
    commit it resolved to first}; empty where the file does not exist."""
    import yaml

    path = Path(path)
    if not path.exists():
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    kept = {}
    for hub_id, entry in (data.items() if isinstance(data, dict) else [(None, data)]):
        if isinstance(entry, dict) and set(entry) == {"requested", "commit"}:  # the file's first form: one a model
            entry = {entry["requested"] or MAIN: entry["commit"]}
        if not (isinstance(entry, dict) and entry and all(isinstance(v, str) for v in entry.values())):
            raise FetchError(f"{path}: {hub_id!r} must map each revision to its commit ({{{MAIN}: <sha>}}), not "
                             f"{entry!r}; delete the entry to fetch the model's revisions afresh")
        kept[hub_id] = {str(revision): commit for revision, commit in entry.items()}
    return kept


def request(hub_id: str, revision: str | None, commits: dict[str, dict[str, str]]) -> str | None:
    """What a fetch of ``hub_id`` asks for (rule fetch_model's parameter: a change of it fetches again), given
    the config's ``revision`` and the kept commits: the revision (None for the main branch, however written),
    or, where it is a commit kept for a revision, that revision (unchanged, so a pin reruns nothing)."""
    revision = requested_revision(revision)
    kept = commits.get(hub_id, {})
    if revision is not None and revision not in kept:
        for name in sorted(kept, key=lambda r: (r != MAIN, r)):  # the main branch's first
            if kept[name] == revision:
                return requested_revision(name)
    return revision


def fetched_commit(manifest_path: str | Path, hub_id: str, revision: str | None) -> str | None:
    """The commit a fetched folder's manifest records for ``hub_id`` at ``revision`` (None: the main branch),
    or None: what its jobs ran on, where the kept commits' file has no entry for it (a study fetched before the
    file existed, a checkout or copied results without it, the file deleted)."""
    m = read_manifest(manifest_path)
    return m["commit"] if m.get("hub_id") == hub_id and requested_revision(m.get("revision")) == revision else None


def read_manifest(path: str | Path) -> dict[str, Any]:
    """A fetch's manifest, or {} where there is none (a local or built model) or it holds no commit."""
    try:
        m = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return m if isinstance(m, dict) and isinstance(m.get("commit"), str) else {}


def with_manifests(commits: dict[str, dict[str, str]],
                   manifests: list[tuple[str, str | Path]]) -> dict[str, dict[str, str]]:
    """The kept commits, with each fetched folder's (``manifests``: (Hub id, manifest path) pairs) added where
    they hold none for its revision: a pin of a folder's commit then asks for what was asked (`request`)."""
    merged = {hub_id: dict(kept) for hub_id, kept in commits.items()}
    for hub_id, path in manifests:
        m = read_manifest(path)
        if m.get("hub_id") == hub_id:
            merged.setdefault(hub_id, {}).setdefault(requested_revision(m.get("revision")) or MAIN, m["commit"])
    return merged


def keep_commit(path: str | Path, hub_id: str, requested: str | None, commit: str, replace: bool = True) -> None:
    """Record that ``requested`` (None: the main branch) resolved to ``commit`` for ``hub_id`` in the kept
    commits, beside its other revisions' (under a lock: several fetches may run at once, on file systems that
    refuse ``flock`` too: `vicurl.runtime.io.exclusive`); ``replace=False``: only where none is kept."""
    import yaml

    from vicurl.runtime.io import exclusive, write_text

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(path.with_name(f".{path.name}.lock")):
        commits = read_commits(path)
        revisions = commits.setdefault(hub_id, {})
        if not replace and (requested or MAIN) in revisions:
            return
        revisions[requested or MAIN] = commit
        write_text(path, "# The commit each revision of a Hugging Face Hub model resolved to when first fetched, by Hub id\n"
                         "# and revision (main: none set; vicurl.models.fetch, config key hub_commits). Commit this file\n"
                         "# with the study: every fetch of a revision takes its commit here.\n"
                   + yaml.safe_dump(commits, sort_keys=True))


def keep_missing(path: str | Path, commits: dict[str, dict[str, str]]) -> None:
    """Keep each of ``commits`` (as `with_manifests` gives them) that the kept commits' file lacks."""
    if not commits:
        return
    kept = read_commits(path)
    for hub_id, revisions in commits.items():
        for revision, commit in revisions.items():
            if revision not in kept.get(hub_id, {}):
                keep_commit(path, hub_id, requested_revision(revision), commit, replace=False)
                log.info("%s: %s's fetched folder is at commit %s, kept in %s", hub_id, revision, commit, path)


def fetch(hub_id: str, out_dir: str | Path, manifest_path: str | Path, revision: str | None = None,
          name: str | None = None, endpoint: str | None = None, commits: str | Path | None = None) -> dict[str, Any]:
    """Download `hub_id` at `revision` (default: the main branch) into `out_dir`; write the manifest.
    ``commits``: the kept commits' file (``hub_commits.yaml``): where it holds the commit `revision` resolved
    to before, that commit is fetched; else the one an earlier fetch's manifest at ``manifest_path`` records
    for it, or else the one it resolves to now, is fetched and kept there.

    The files go to `<out_dir>.partial` first, which a killed fetch resumes (huggingface_hub skips the files
    it completed), and the folder appears whole: a job never sees half a model."""
    import huggingface_hub

    key = f"models.{name}" if name else hub_id
    out_dir, partial = Path(out_dir), Path(f"{out_dir}.partial")
    revision = requested_revision(revision)
    kept = read_commits(commits).get(hub_id, {}).get(revision or MAIN) if commits else None
    recorded = kept is None and commits is not None
    if recorded:  # the folder's jobs ran on it
        kept = fetched_commit(manifest_path, hub_id, revision)
    api = huggingface_hub.HfApi(endpoint=endpoint)
    asked = kept or revision
    try:
        info = api.model_info(hub_id, revision=asked)  # the commit the revision names now, and its files
    except Exception as e:
        raise FetchError(
            f"{key}: cannot read {hub_id}{f' at {asked}' if asked else ''} on the Hugging Face Hub: {e}. "
            f"Without internet here, point {key}.hub_id at a local copy of the model") from e
    if recorded:
        keep_commit(commits, hub_id, revision, info.sha)
        log.info("%s: %s %s commit %s, kept in %s", hub_id, revision or "the main branch",
                 "was fetched before at" if kept else "resolved to", info.sha, commits)
    files = wanted([s.rfilename for s in info.siblings or []])
    if not any(f.endswith((".safetensors", ".bin")) for f in files):
        raise FetchError(f"{key}: {hub_id} at {info.sha} has no weights (.safetensors or .bin) in its top folder")
    log.info("%s: %d files at commit %s -> %s", hub_id, len(files), info.sha, out_dir)
    try:
        huggingface_hub.snapshot_download(hub_id, revision=info.sha, local_dir=partial, allow_patterns=files,
                                          endpoint=endpoint)
    except huggingface_hub.errors.GatedRepoError as e:  # the Hub shows a gated model's info to anyone
        raise FetchError(
            f"{key}: {hub_id} is gated: its files need access granted on https://huggingface.co/{hub_id} and a token "
            f"of that account on this host (`hf auth login`, or HF_TOKEN); then run the job again "
            f"(the Hub: {' '.join(str(e).split())})") from e
    except Exception as e:
        raise FetchError(f"{key}: downloading {hub_id} at {info.sha} failed: {e}. What was downloaded is "
                         f"kept in {partial}; run the job again to go on") from e
    for left in set(os.listdir(partial)) - set(files):  # huggingface_hub's resume records, an earlier revision's files
        if (partial / left).is_dir():
            shutil.rmtree(partial / left)
        else:
            (partial / left).unlink()
    manifest = {"hub_id": hub_id, "revision": revision, "commit": info.sha,
                "files": {f: (partial / f).stat().st_size for f in files}}
    write_json(manifest_path, manifest)  # first: a fetch stopped before the rename resumes from the partial folder
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(partial, out_dir)
    return manifest


def fetched(model_dir: str | Path) -> dict[str, Any]:
    """What a run records of its initial policy: the folder and, where fetch() wrote it, the Hub id and commit."""
    m = read_manifest(manifest_of(model_dir))
    keep = "hub_id" in m
    return {"dir": str(model_dir), **({k: m.get(k) for k in ("hub_id", "revision", "commit")} if keep else {})}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("hub_id")
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--revision", help="branch, tag or commit (default: main)")
    ap.add_argument("--manifest", type=Path, help="default: <out_dir>.json")
    ap.add_argument("--commits", type=Path, help="the kept commits' file (hub_commits.yaml): fetch the commit kept "
                                                 "for this revision, or keep the one it resolves to")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    m = fetch(args.hub_id, args.out_dir, args.manifest or manifest_of(args.out_dir), revision=args.revision,
              commits=args.commits)
    print(f"{m['hub_id']} at {m['commit']}: {len(m['files'])} files, "
          f"{sum(m['files'].values()) / 1e9:.2f} GB in {args.out_dir}")


if __name__ == "__main__":
    main()
