"""The variance probe's low-memory estimators against the exact one, on the demo's model.

Runs the same probe (same prompts, same rollouts) with every method and prints each estimate,
its relative error against ``exact`` and the time taken. ``streaming`` is exact by construction
(float rounding only); ``sketch`` compresses every gradient to R numbers and is approximate.

    .venv/bin/python measurements/probe_estimators.py                     # after `make demo`
    .venv/bin/python measurements/probe_estimators.py --sketch-dims 4096 16384 65536 --n-prompts 32
"""

from __future__ import annotations

import argparse

import torch

from vicurl.config.settings import TrainSettings
from vicurl.data import schema
from vicurl.probes.probe import ProbeConfig, run_probe

KEYS = ("sigma2_full", "sigma2_kept", "vprob_full", "vprob_kept")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="results/demo/models/tiny/base")
    ap.add_argument("--train-set", default="results/demo/data/arith_train.parquet")
    ap.add_argument("--n-prompts", type=int, default=16)
    ap.add_argument("--rollouts", type=int, default=8)
    ap.add_argument("--sketch-dims", type=int, nargs="+", default=[4096, 16384, 65536])
    ap.add_argument("--step", type=int, default=0, help="the probed checkpoint's step (selects beta_{step+1})")
    ap.add_argument("--total-steps", type=int, default=30)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    df = schema.read(args.train_set)
    cfg = TrainSettings(total_steps=args.total_steps, batch_size=32, group_size=8, max_response_length=64,
                        micro_batch_size=128, curriculum="vicurl")
    n_params = None
    runs = [("exact", 0), ("streaming", 0)] + [("sketch", r) for r in args.sketch_dims]
    results = {}
    for method, dim in runs:
        probe = ProbeConfig(n_prompts=args.n_prompts, rollouts=args.rollouts, method=method, sketch_dim=dim or 1)
        results[(method, dim)] = run_probe(cfg, args.model, args.model, df, step=args.step, probe=probe)
    if n_params is None:
        from transformers import AutoModelForCausalLM

        n_params = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(args.model).parameters())
    exact = results[("exact", 0)]
    print(f"model {args.model} ({n_params:,} parameters), {args.n_prompts} prompts x {args.rollouts} rollouts, "
          f"beta_t {exact['beta_t']:.2f}, {exact['n_kept']} kept")
    print(f"{'method':<16}" + "".join(f"{k:>22}" for k in KEYS) + f"{'seconds':>9}")
    for (method, dim), res in results.items():
        name = f"{method}" + (f" R={dim}" if dim else "")
        cells = []
        for k in KEYS:
            err = (res[k] - exact[k]) / exact[k] if exact[k] else float("nan")
            cells.append(f"{res[k]:>11.5g} ({err:+.1e})")
        print(f"{name:<16}" + "".join(f"{c:>22}" for c in cells) + f"{res['seconds']:>9.1f}")


if __name__ == "__main__":
    main()
