"""Rule build_tiny_model: tokenizer + tiny Llama-architecture model, supervised on worked solutions."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

import json

from vicurl.data import schema
from vicurl.models import tiny
from vicurl.runtime.workflow import setup

log = setup(snakemake)
build = dict(snakemake.params.build)
cfg = {k: build[k] for k in ("vocab_size", "arch", "sft") if k in build}
cfg["prompt_order"] = snakemake.params.prompt_order
metrics = tiny.build_base_model(
    schema.read(snakemake.input.sft), snakemake.output[0], cfg, seed=int(build.get("seed", 0)),
)
log.info("built %s: %s", snakemake.output[0], json.dumps(metrics))
