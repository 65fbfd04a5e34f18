"""The local rules a target's plan counts apart (`vicurl.planning.target.local_rules`, read from the workflow's
source) are those Snakemake's own workflow object holds, for a config with a findings table and one without."""

import subprocess
import sys

import pytest

from harness import REPO

CODE = """
import sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, StorageSettings
from vicurl.planning.target import local_rules

with SnakemakeApi(OutputSettings(quiet=set())) as api:
    wf = api.workflow(resource_settings=ResourceSettings(), storage_settings=StorageSettings(),
                      config_settings=ConfigSettings(configfiles=[Path(sys.argv[1])]), snakefile=Path("Snakefile"),
                      workdir=Path(sys.argv[2]))._workflow
    ours = local_rules()
    defined = {r.name for r in wf.rules}
    print(sorted(wf._localrules ^ {r for r in defined if r in ours or r.startswith(tuple(p for p in ours if p.endswith("_")))}))
    print("findings" in defined)
"""


@pytest.mark.parametrize("config, findings", [("config/demo.yaml", True), ("config/paper.yaml", False)])
def test_local_rules_are_the_workflows(tmp_path, config, findings):
    out = subprocess.run([sys.executable, "-c", CODE, str(REPO / config), str(tmp_path)], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    differ, has_findings = out.stdout.strip().splitlines()[-2:]
    assert differ == "[]"  # no rule local in one and not the other
    assert has_findings == str(findings)
    assert "localrules directive specifies rules that are not present" not in out.stdout + out.stderr
