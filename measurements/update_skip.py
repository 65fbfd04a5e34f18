"""Update-phase time with and without skipping the prompts VI-CuRL drops (the compute saving the paper claims).

For each retention beta (constant schedule), one batch of rollouts is drawn from the model and the
same update is timed twice from the same starting state: the plain masked implementation (every
sequence forwarded and back-propagated, dropped ones with weight 0) and the project's default
(dropped sequences skipped, same normalizer: the same parameters, see
tests/engines/test_local_engine.py::test_skipping_dropped_prompts_is_exact).

    .venv/bin/python measurements/update_skip.py                       # the demo's model and training set
    .venv/bin/python measurements/update_skip.py --betas 0.2 0.5 1.0 --repeats 5 --batch-size 32
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time

import torch

from vicurl.config.settings import TrainSettings
from vicurl.data import schema
from vicurl.engines.local import LocalTrainer


def time_update(trainer: LocalTrainer, part, weights: torch.Tensor, skip: bool, repeats: int) -> list[float]:
    model0, opt0 = copy.deepcopy(trainer.policy.state_dict()), copy.deepcopy(trainer.optimizer.state_dict())
    trainer.cfg.skip_dropped = skip
    times = []
    for _ in range(repeats):
        trainer.policy.load_state_dict(model0)
        trainer.optimizer.load_state_dict(opt0)
        trainer.policy.train()
        t0 = time.perf_counter()
        trainer._update(1, part.rollouts, part.old_lp, part.scored.advantages, weights)
        times.append(time.perf_counter() - t0)
    return times


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="results/demo/models/tiny/base")
    ap.add_argument("--train-set", default="results/demo/data/arith_train.parquet")
    ap.add_argument("--betas", type=float, nargs="+", default=[0.2, 0.5, 1.0])
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--max-response-length", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    df = schema.read(args.train_set)
    print(f"model {args.model}, B={args.batch_size}, G={args.group_size}, threads={args.threads}, "
          f"median of {args.repeats} updates")
    print(f"{'beta':>5} {'kept':>5} {'masked_s':>9} {'skipped_s':>10} {'ratio':>6}")
    for beta in args.betas:
        cfg = TrainSettings(total_steps=1, batch_size=args.batch_size, group_size=args.group_size, lr=1e-4,
                            max_response_length=args.max_response_length, micro_batch_size=128,
                            curriculum="vicurl", curriculum_params={"beta_start": beta, "schedule": "constant"})
        with tempfile.TemporaryDirectory() as work:
            tr = LocalTrainer(cfg, args.model, df, work)
            ids = [tr.ids[i] for i in tr.batch_indices(1)]
            part = tr.scorer.rollout(ids, seed=1)
            sel = tr.curriculum.select(tr.scorer.curriculum_batch(part, 1))
            weights = sel.weights.repeat_interleave(args.group_size)
            masked = statistics.median(time_update(tr, part, weights, skip=False, repeats=args.repeats))
            skipped = statistics.median(time_update(tr, part, weights, skip=True, repeats=args.repeats))
        kept = float(sel.mask.mean())
        print(f"{beta:>5.2f} {kept:>5.2f} {masked:>9.3f} {skipped:>10.3f} {skipped / masked:>6.2f}")


if __name__ == "__main__":
    main()
