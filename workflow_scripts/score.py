"""Rule score: pass@k and length statistics of one (run, step, benchmark)."""
import pandas as pd

from vicurl.evaluation.score import score
from vicurl.io import write_json
from vicurl.runs import BASE
from vicurl.workflow import setup

log = setup(snakemake)
w = snakemake.wildcards
reward, curriculum = (BASE, BASE) if w.setting == BASE else w.setting.split("-", 1)
result = score(pd.read_parquet(snakemake.input[0]), ks=snakemake.params.ks)
result.update(study=w.study, model=w.model, reward=reward, curriculum=curriculum, seed=int(w.seed), step=int(w.step), benchmark=w.bench)
write_json(snakemake.output[0], result)
log.info("%s", result)
