"""Rule probe: action and problem variances of one run at one checkpoint (kept vs full batch)."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

from vicurl.config.runs import Run
from vicurl.data import schema
from vicurl.runtime.io import write_json
from vicurl.runtime.workflow import setup

log = setup(snakemake)

from vicurl.config.settings import TrainSettings  # noqa: E402
from vicurl.probes.probe import ProbeConfig, run_probe  # noqa: E402  (after logging is set up)

w, p = snakemake.wildcards, dict(snakemake.params.probe)
probe = ProbeConfig(**{k: p[k] for k in ("n_prompts", "rollouts", "method", "sketch_dim", "seed")})
result = run_probe(TrainSettings.from_dict(dict(snakemake.params.settings)), snakemake.params.checkpoint_dir,
                   snakemake.params.base_dir, schema.read(snakemake.input.train_set), step=int(w.step), probe=probe,
                   device=snakemake.params.device)
result.update(Run.from_wildcards(w).identity())
write_json(snakemake.output[0], result)
log.info("%s", result)
