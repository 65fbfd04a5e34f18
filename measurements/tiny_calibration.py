"""The demo's tiny base model, built on the synthetic task: its build time and per-level calibration.

Builds a model with ``vicurl.models.tiny.build_base_model`` (``DEFAULT_CFG``, updated by ``--cfg``)
on a fresh SFT split, prints the build metrics, then, at temperature 0.6 / top-p 0.95 and at
temperature 1, each level's Pass@1, EOS and boxed rates, mean length and token entropy
(``vicurl.models.tiny.evaluate_levels``): the numbers ``DEFAULT_CFG``'s SFT recipe was tuned on.

    .venv/bin/python measurements/tiny_calibration.py --out /tmp/tiny
    .venv/bin/python measurements/tiny_calibration.py --out /tmp/tiny --cfg '{"sft": {"steps": 400}}'
"""

from __future__ import annotations

import argparse
import json

import torch

from vicurl.data.synthetic import LEVELS, make_splits
from vicurl.models.tiny import build_base_model, evaluate_levels, load_base_model


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory (HF format)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-sft", type=int, default=4000)
    ap.add_argument("--per-level", type=int, default=32, help="held-out prompts per level")
    ap.add_argument("--samples", type=int, default=4, help="samples per prompt")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cfg", default="{}", help="JSON overrides of DEFAULT_CFG")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    levels = sorted(LEVELS)
    splits = make_splits(
        {"sft": {"n": args.n_sft, "levels": levels}, "eval_levels": {"n": args.per_level * len(levels), "levels": levels}},
        args.seed,
    )
    metrics = build_base_model(splits["sft"], args.out, json.loads(args.cfg), args.seed)
    print(json.dumps({k: v for k, v in metrics.items() if k != "cfg"}, indent=1, sort_keys=True))
    model, tok = load_base_model(args.out)
    for temperature, top_p in ((0.6, 0.95), (1.0, 1.0)):
        rep = evaluate_levels(model, tok, splits["eval_levels"], n=args.samples, temperature=temperature,
                              top_p=top_p, seed=args.seed, prompt_order=metrics["cfg"]["prompt_order"])
        print(f"temperature {temperature} top_p {top_p}")
        for level, d in rep.items():
            print(f"  level {level:>3}: " + " ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                                 for k, v in d.items()))


if __name__ == "__main__":
    main()
