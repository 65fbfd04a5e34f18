"""The docs stay true to the code: every config key the reference names is in the schema, every link
resolves inside the repository, and the README stays a front door."""

import re

import yaml

from harness import REPO

SCHEMA = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())


def _deref(node: dict) -> dict:
    while "$ref" in node:
        node = SCHEMA["definitions"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def _children(node: dict) -> list[dict]:
    """The schemas a key below ``node`` may have (anyOf / oneOf alternatives included)."""
    node = _deref(node)
    alts = [node] + [_deref(a) for k in ("anyOf", "oneOf", "allOf") for a in node.get(k, [])]
    return [a for a in alts if isinstance(a, dict)]


def resolves(key: str) -> bool:
    nodes = [SCHEMA]
    for seg in key.split("."):
        nxt = []
        items, seg = seg.endswith("[]"), seg.removesuffix("[]")  # an item of a list
        for node in nodes:
            for alt in _children(node):
                props = {k: _deref(v).get("items", v) if items else v for k, v in alt.get("properties", {}).items()}
                if seg.startswith("{") or seg == "*":
                    nxt += list(props.values())
                    nxt += [v for v in alt.get("patternProperties", {}).values()]
                    if isinstance(alt.get("additionalProperties"), dict):
                        nxt.append(alt["additionalProperties"])
                elif seg in props:
                    nxt.append(props[seg])
        if not nxt:
            return False
        nodes = nxt
    return True


def documented_keys() -> list[str]:
    """The first column of the table in configuration.md's "Configuration keys" section."""
    text = (REPO / "docs" / "configuration.md").read_text()
    section = text.split("## Configuration keys", 1)[1].split("\n## ", 1)[0]
    return [m.group(1) for m in re.finditer(r"^\| `([A-Za-z_{}.*\[\]]+)`", section, flags=re.M)]


def test_the_key_table_is_generated_from_the_schema_and_the_settings():
    """Each default and description is written once (the schema; `train` and `verl` defaults in
    their dataclasses): the docs' table is what `python -m vicurl.config.keys` prints from them."""
    from vicurl.config import keys as config_docs

    text = (REPO / "docs" / "configuration.md").read_text()
    assert config_docs.block() in text, "docs/configuration.md: rerun `python -m vicurl.config.keys`"
    rows = {key: (desc, default) for key, desc, default in config_docs.rows()}
    assert rows["train.batch_size"][1] == "`128`" and rows["verl.n_gpus_per_node"][1] == "`8`"  # the dataclasses'
    assert rows["curricula.vicurl.beta_start"] == ("retention beta at the first step", "`0.2`")  # the schema's
    assert all(desc for desc, _ in rows.values())  # every key described


def test_every_documented_config_key_is_in_the_schema():
    keys = documented_keys()
    assert len(keys) > 50
    assert [k for k in keys if not resolves(k)] == []


def test_every_top_level_schema_key_is_documented():
    keys = documented_keys()
    top = {k.split(".")[0] for k in keys}
    assert sorted(set(SCHEMA["properties"]) - top) == []


def test_links_resolve_inside_the_repository():
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if target.startswith("http"):
                continue
            path = (page.parent / target).resolve()
            if not path.exists() or REPO not in path.parents:
                broken.append(f"{page.name}: {target}")
    assert broken == []


def test_no_reference_to_files_outside_the_repository():
    """No path above the repository, and every Markdown file named is one of the repository's."""
    ours = {p.name for p in REPO.rglob("*.md") if ".venv" not in p.parts} | {"plan.md"}  # plan.md: vicurl.plan writes it
    offenders = []
    for path in [REPO / "README.md", *REPO.glob("docs/*.md"), *REPO.glob("src/vicurl/**/*.py"),
                 *REPO.glob("config/*.yaml"), *REPO.glob("rules/*.smk"), *REPO.glob("workflow_scripts/*.py"),
                 *REPO.glob("measurements/*.py"), *(p for p in REPO.glob("tests/**/*.py") if p.name != "test_docs.py" and "gpu_path" not in p.parts)]:
        text = path.read_text()
        named = set(re.findall(r"(?<!report/)\b[\w-]+\.md\b", text)) - ours  # report/*.md: what a run writes
        if "../shared" in text or "shared/spec" in text or named:
            offenders.append((str(path.relative_to(REPO)), sorted(named)))
    assert offenders == []


def test_readme_is_a_front_door():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 200


def test_every_named_module_and_function_exists():
    """Each `vicurl.<module>[.<name>]` the docs name imports and resolves, so a refactor that moves a
    function cannot leave the docs pointing at its old place (a Hydra key is written `+vicurl.`)."""
    import importlib

    missing = []
    for path in [*REPO.glob("docs/*.md"), REPO / "README.md", REPO / "results" / "README.md"]:
        for name in sorted(set(re.findall(r"`(vicurl(?:\.\w+)+)", path.read_text()))):
            parts = name.split(".")
            for i in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
                try:
                    obj = importlib.import_module(".".join(parts[:i]))
                except ImportError:
                    continue
                try:
                    for attr in parts[i:]:
                        obj = getattr(obj, attr)
                except AttributeError:
                    missing.append(f"{path.relative_to(REPO)}: {name}")
                break
            else:
                missing.append(f"{path.relative_to(REPO)}: {name}")
    assert missing == []
