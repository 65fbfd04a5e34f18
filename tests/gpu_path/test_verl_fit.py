"""verl's own training loop (``RayPPOTrainer.fit`` with ``VICuRLTrainer``'s overrides) run for real on
the CPU: the project's launcher, verl's ``run_ppo``, Ray, FSDP2 workers over gloo ranks, vLLM's CPU build as
the rollout (a replica per rank), on the demo's tiny base model. Each run is its own process
(`conftest.launch_verl`); what each step handed the hooks is recorded (`verl_recorder.py`), and the
assertions read the runs' own outputs: metrics, exports, checkpoints, recorded batches.

Runs (about 2-3 minutes each on 2 cores, most of it starting Ray's workers and vLLM):
  VI-CuRL, entropy reward   2 ranks (the paper's layout, smaller), an untied head, the 7B's offload settings:
                            uninterrupted, at the same time as SENT's run (two runs on one machine); and
                            stopped inside step 2's export (after its save), then resumed
  SENT, oracle reward       1 rank: a curriculum that proposes each step's prompts (the sampler)
  VCRL, oracle reward       4 ranks: replay from its memory bank over 4 replicas and 8 agent-loop workers
  a broken rollout engine   1 rank: the step timeout ends it (it waits, beside the stopped run's launches)
"""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from vicurl.algos.confidence import group_mean, normalized_uncertainty
from vicurl.algos.grpo import grpo_loss, loss_config
from vicurl.config.settings import TrainSettings
from vicurl.curriculum.schedules import linear_beta
from vicurl.engines.workdir import read_metrics

from harness import alive, long_folder, shared_memory_left, tensorboard_scalars

pytestmark = pytest.mark.verl_fit

BASE = {"batch_size": 8, "group_size": 4, "max_prompt_length": 96, "max_response_length": 48, "lr": 5e-3,
        "save_every": 2, "seed": 0, "chat_template": False, "micro_batch_size": 32}
# what differs between two runs of one setting: wall times and memory
VOLATILE = ("time/", "timing", "actor/perf/", "perf/")
# the 7B model's settings (config/paper.yaml: optimizer_offload; param_offload, which verl also offers)
OFFLOAD = {"param_offload": True, "optimizer_offload": True}


def records(run: Path, step: int, kind: str) -> list[dict]:
    """What the recorder wrote for ``step``: ``old_pass`` (one per old-policy pass) or ``update``."""
    files = (run / "recorded").glob(f"step{step}.{kind}*.pt")  # old_pass0, old_pass1, ..., old_pass10
    return [torch.load(p, weights_only=False) for p in sorted(files, key=lambda p: int("0" + p.stem.split(kind)[1]))]


def stable(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.startswith(VOLATILE)}


def response_logprobs(model, rec: dict) -> torch.Tensor:
    """log pi(response token) of each recorded row under ``model`` (verl's layout: the responses are the
    last columns of input_ids), at temperature 1."""
    r = rec["responses"].shape[1]
    logits = model(input_ids=rec["input_ids"], attention_mask=rec["attention_mask"],
                   position_ids=rec["position_ids"], use_cache=False).logits[:, -r - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(-1, rec["responses"][..., None])[..., 0]


def trained_prompts(update: dict) -> set[str]:
    """The prompts whose rows the update trains on (a dropped row's response mask is all zero)."""
    return {pid for pid, m in zip(update["ids"], update["response_mask"]) if m.sum() > 0}


def load_weights(run: Path, step: int, base: str):
    """The actor's full weights (float32) that step ``step``'s rollouts and old-policy pass ran with: the base
    model's before the first update, else those the recorder gathered after update ``step - 1``."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    if step > 1:
        missing, unexpected = model.load_state_dict(torch.load(run / "recorded" / f"update{step - 1}.weights.pt"),
                                                    strict=False)
        tied = ["lm_head.weight"] if model.config.tie_word_embeddings else []  # the embedding's, not a parameter
        assert (missing, unexpected) == (tied, []), (missing, unexpected)
    return model.eval()


def bf16_rounding(model, rec: dict) -> torch.Tensor:
    """Per row: the mean |p_bf16 - p_actor| over its response tokens, p_bf16 the probabilities of the same
    tokens under ``model`` computed here in bf16 (weights and arithmetic, as vLLM's rollouts are): how far
    this CPU's bf16 rounding alone moves the actor's old-policy probabilities. Bounds on a bf16 path's
    agreement are set from it, not from one machine's figure (AMX tiles, AVX-512 and AVX2 round differently)."""
    import copy

    with torch.no_grad():
        low = response_logprobs(copy.deepcopy(model).to(torch.bfloat16), rec)
    return row_sync({**rec, "rollout_log_probs": low})


# vLLM's bf16 path (its kernels, fused norms) against the same weights in transformers' bf16 path on this CPU:
# two roundings of one precision, which differ by a small factor, not orders of magnitude
BF16_PATHS = 4.0


def row_sync(rec: dict) -> torch.Tensor:
    """Per row: the mean |p_vLLM - p_actor| over its response tokens, the probabilities vLLM reported for
    its samples against the actor's old-policy pass of the same tokens."""
    m = rec["response_mask"].float()
    diff = (rec["rollout_log_probs"].exp() - rec["old_log_probs"].exp()).abs() * m
    return diff.sum(-1) / m.sum(-1).clamp(min=1)


@pytest.fixture(scope="module")
def sent_stats(tiny_model_dir, demo_train_set, tmp_path_factory):
    """SENT's prompt table (rule prompt_stats'): the initial policy's semantic entropies."""
    from vicurl.curriculum.prompt_stats import offline_statistics
    from vicurl.data import schema

    stats = offline_statistics(tiny_model_dir, schema.read(demo_train_set),
                               {"k": 4, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 48, "batch_size": 256,
                                "seed": 0}, device="cpu")
    path = tmp_path_factory.mktemp("sent_stats") / "prompt_stats.parquet"
    stats.to_parquet(path)
    return stats, path


class InBackground:
    """A launch started in a thread of its own when ``start`` is called (or at the first ``result``), so that a
    run that mostly waits (the broken engine's, for its step timeout) overlaps the runs that compute."""

    def __init__(self, fn):
        self.fn, self.future, self.pool = fn, None, ThreadPoolExecutor(1)

    def start(self) -> None:
        if self.future is None:
            self.future = self.pool.submit(self.fn)

    def result(self):
        self.start()
        return self.future.result()


BROKEN_TIMEOUT = 5  # minutes: the broken engine's run starts beside the stopped 2-rank run, and must reach its
#                    first weight sync (where it fails) within them (1-3 minutes on 2 cores, more under CI's
#                    load); it waits them out beside other launches, so a longer wait costs CI no time


@pytest.fixture(scope="module")
def broken_engine(vllm, verl_launch, tiny_model_dir, demo_train_set, tmp_path_factory):
    """The run of `test_a_broken_rollout_engine_fails_the_run_within_its_step_timeout`: (exit code, log,
    seconds, folder). Started by `entropy_runs` beside its stopped run (their memory fits the machine beside
    the other test suite, the 2-rank uninterrupted runs' would not), it waits out its step timeout while
    the others compute."""
    import time

    folder = tmp_path_factory.mktemp("broken") / "broken"
    settings = {**BASE, "total_steps": 2, "reward": "oracle", "curriculum": "none", "export_steps": [2]}
    verl = {"step_timeout": BROKEN_TIMEOUT, "overrides": ["actor_rollout_ref.rollout.dtype=float32"]}

    def launch():
        start = time.time()
        rc, log, _ = verl_launch(folder, settings, tiny_model_dir, demo_train_set, verl=verl,
                                 env={"VLLM_PLUGINS": "none"})  # no vLLM plugin is loaded
        return rc, log, time.time() - start, folder

    run = InBackground(launch)
    yield run
    if run.future is not None:
        run.future.result()  # never left running past the module


@pytest.fixture(scope="module")
def entropy_runs(vllm, verl_launch, untied_model_dir, tiny_model_dir, demo_train_set, sent_stats, broken_engine,
                 tmp_path_factory):
    """VI-CuRL with the entropy reward (RENT), 3 steps, on 2 ranks (FSDP2 over two gloo ranks, two vLLM
    replicas), the untied copy of the demo's model, the 7B's offload settings, G = 3 (a step's kept rows,
    3 prompts x 3 at beta 0.2, are odd: the trainer pads them to the ranks) and small token budgets (the update
    and the forward-only passes in several micro-batches each, as the paper's 6,144- and 8,704-token budgets split
    theirs). Run ``a`` uninterrupted, at the same time as SENT's 1-rank run on the tied model (two runs on one machine, each with its own Ray,
    ranks and replicas; the recorder holds each at step 1 until the other is there, so that their updates and
    weight syncs overlap); run ``b`` stopped (SIGTERM to the train job, as SLURM's time limit or a user sends
    it) inside step 2's export, after verl's save of step 2 (its tracker names the step) and once the merger
    has written the export's weights into its temporary folder (the recorder holds it there: the same point
    of the work on every machine, however loaded), then resumed by the same command. Also: the processes
    run ``b`` had when it was stopped and those of them left once the job exited, the same for the shared memory
    they mapped, and what the stop left in its temp folder (a TMPDIR of its own). Runs ``a`` and SENT's record
    the actor's weights after each update (``update{n}.weights.pt``)."""
    # seeded requests: a resumed run continues bit for bit; prompts of 24 tokens at most (the set's longest: 19),
    # so that a whole sequence, the least a token budget can be, is 72 tokens
    settings = {**BASE, "group_size": 3, "total_steps": 3, "reward": "entropy", "curriculum": "vicurl",
                "export_steps": [1, 2, 3], "reproducible": True, "max_prompt_length": 24}
    sent = {**BASE, "total_steps": 2, "reward": "oracle", "curriculum": "sent", "export_steps": [2]}
    root = tmp_path_factory.mktemp("vicurl_entropy")
    # token budgets of a few rows (a row holds about 36 tokens): each rank's update (step 1: about 180 tokens)
    # and forward-only passes (about 430) in several micro-batches
    two = dict(ranks=2, verl={**OFFLOAD, "max_token_len_per_gpu": 72, "forward_token_len_per_gpu": 144})
    meet = {"a": f"{root}/a.step1,{root}/sent.step1", "sent": f"{root}/sent.step1,{root}/a.step1"}  # verl_recorder.py
    with ThreadPoolExecutor(2) as pool:
        run_a = pool.submit(verl_launch, root / "a", settings, untied_model_dir, demo_train_set,
                            env={"VICURL_RECORD_MEET": meet["a"], "VICURL_RECORD_GRADS": "1",
                                 "VICURL_RECORD_WEIGHTS": "1"}, **two)
        run_sent = pool.submit(verl_launch, root / "sent", sent, tiny_model_dir, demo_train_set,
                               prompt_stats=str(sent_stats[1]),
                               env={"VICURL_RECORD_MEET": meet["sent"], "VICURL_RECORD_WEIGHTS": "1"})
        for rc, log, _ in (run_a.result(), run_sent.result()):
            assert rc == 0, log[-4000:]
    broken_engine.start()  # it waits out its step timeout beside run b
    temp = root / "b_temp"
    temp.mkdir()
    rc, log, stopped = verl_launch(root / "b", settings, untied_model_dir, demo_train_set, stop_in_export=2,
                                   env={"TMPDIR": str(temp)}, **two)
    left = {"processes": alive(stopped.processes),
            "shared_memory": shared_memory_left(stopped.shared_memory),
            "temp": sorted(f.name for f in temp.iterdir() if not f.name.startswith("torchinductor_")),  # kept on purpose
            "links": [str(f) for f in Path("/tmp").glob("vicurl-*") if str(temp) in os.path.realpath(f)]}
    assert rc != 0 and not (root / "b" / "metrics.jsonl").exists(), log[-2000:]
    assert not (root / "b" / "_work" / "exports" / "step2").exists()  # its export was under way
    rc, log, _ = verl_launch(root / "b", settings, untied_model_dir, demo_train_set, env={"TMPDIR": str(temp)},
                             **two)
    assert rc == 0, log[-4000:]
    return SimpleNamespace(a=root / "a", b=root / "b", sent=root / "sent", settings=settings, sent_settings=sent,
                           model=untied_model_dir, tied_model=tiny_model_dir, stop={"stopped": stopped, "left": left})


# ---------------------------------------------------------------- VI-CuRL with a verifier-free reward, 2 ranks


def test_one_metrics_row_per_step_on_the_papers_schedule(entropy_runs, demo_train_set, tmp_path):
    """metrics.jsonl: one row per step, beta_target on the linear schedule from 0.2 to 1 over the run,
    beta_actual the kept share, and every column the local engine writes for the same settings. The
    metrics of the batch are those of the whole batch, gathered from the ranks: the mean response length,
    the entropy reward's mean and verl's token-mean entropy, recomputed here from the recorded batch. verl's
    TensorBoard tracker wrote the same rows (the launcher's ``--tracking``)."""
    from vicurl.data import schema
    from vicurl.engines.local import LocalTrainer

    a, settings = entropy_runs.a, entropy_runs.settings
    rows = read_metrics(a / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3]
    for r in rows:
        assert r["curriculum/beta_target"] == pytest.approx(linear_beta(r["step"], 3, 0.2, 1.0))
        assert r["curriculum/beta_actual"] == pytest.approx(r["curriculum/kept"] / settings["batch_size"])
        assert r["curriculum/beta_actual"] >= r["curriculum/beta_target"] - 1e-9
        (old,) = records(a, r["step"], "old_pass")
        m, ent = old["response_mask"].float(), old["entropys"]
        assert r["response_length/mean"] == pytest.approx(float(m.sum(-1).mean()), rel=1e-6)
        assert r["reward/entropy/mean"] == pytest.approx(-float(((ent * m).sum(-1) / m.sum(-1)).mean()), rel=1e-5)
        assert r["actor/entropy"] == pytest.approx(float((ent * m).sum() / m.sum()), rel=1e-5)
    assert rows[0]["curriculum/kept"] < settings["batch_size"] == rows[-1]["curriculum/kept"]
    curves = tensorboard_scalars(a / "tensorboard")  # the same rows as TensorBoard curves, through verl's tracker
    for tag in ("curriculum/beta_target", "curriculum/beta_actual", "curriculum/kept", "reward/entropy/mean",
                "actor/grad_norm"):
        assert curves[tag] == pytest.approx([r[tag] for r in rows]), tag
    local = LocalTrainer(TrainSettings.from_dict({**settings, "total_steps": 1}), entropy_runs.model,
                         schema.read(demo_train_set), tmp_path / "local")
    missing = set(local.train_step(1)) - set(rows[0])
    assert not missing, missing


def test_the_kept_prompts_are_the_most_confident_by_verls_entropies(entropy_runs):
    """Each step the update trains on the prompts of highest confidence c(x) (`vicurl.algos.confidence`),
    computed here from the per-token entropies verl's old-policy pass returned; the others left the
    batch, but for the rows that pad the kept ones to a multiple of the ranks (masked: step 1 keeps 9 rows
    of 2 ranks' batch, so one is added)."""
    from transformers import AutoConfig

    a, settings = entropy_runs.a, entropy_runs.settings
    vocab = AutoConfig.from_pretrained(entropy_runs.model).vocab_size
    padded = []
    for row in read_metrics(a / "metrics.jsonl"):
        step, k = row["step"], int(row["curriculum/kept"])
        (old,) = records(a, step, "old_pass")
        (update,) = records(a, step, "update")
        # c(x) = 1 - u(x), u the prompt's mean normalized token entropy: the most confident have the lowest u
        ids, u = group_mean(normalized_uncertainty(old["entropys"], old["response_mask"], vocab), np.array(old["ids"]))
        most_confident = set(ids[np.argsort(u.numpy(), kind="stable")[:k]])
        assert trained_prompts(update) == most_confident, step
        rows = k * settings["group_size"]
        assert len(update["ids"]) == rows + rows % 2  # the kept rows, padded to the 2 ranks
        padded.append(rows % 2)
    assert padded[0] == 1  # the padding ran


def test_the_update_is_the_kept_prompts_update_weighted_one_over_beta(entropy_runs):
    """Step 1 (beta 0.2) on 2 ranks: the gradient verl's FSDP actor took (gathered from its two shards before
    clipping; the CPU rehearsal's actor computes in fp32) is, parameter by parameter, the 1-rank gradient of
    the same rollouts: the local loss (`vicurl.algos.grpo.grpo_loss`, float32, one process) on the kept
    prompts alone, each weighted 1/beta-hat over the whole batch's normalizer, from the base model the step
    started from. So the padding row, the split over ranks and each rank's micro-batches add nothing, and
    AdamW's first step, a function of the gradient alone, is the 1-rank one. With weight 1 instead (the dropped prompts' share lost) the
    gradient would be beta-hat times as large."""
    from transformers import AutoModelForCausalLM

    a, settings = entropy_runs.a, entropy_runs.settings
    row = read_metrics(a / "metrics.jsonl")[0]
    (update,) = records(a, 1, "update")
    verl_grads = torch.load(a / "recorded" / "first_update.grads.pt")
    model = AutoModelForCausalLM.from_pretrained(entropy_runs.model, dtype=torch.float32)
    mask = update["response_mask"].float()
    kept = mask.sum(-1) > 0
    seq_w = torch.where(kept, update["rollout_is_weights"][:, 0] * update["scale"], torch.zeros(len(kept)))
    assert torch.allclose(seq_w[kept], torch.full((int(kept.sum()),), row["curriculum/weight"]))
    n = settings["batch_size"] * settings["group_size"]
    cfg = loss_config(TrainSettings.from_dict(settings))

    def gradient(weights) -> dict[str, torch.Tensor]:
        model.zero_grad()
        logp = response_logprobs(model, update)
        loss, _ = grpo_loss(logp, update["old_log_probs"], update["advantages"], mask, weights, cfg,
                            ref_log_prob=update["ref_log_prob"], global_batch_size=n)
        loss.backward()
        return {name: p.grad.clone() for name, p in model.named_parameters()}

    def norm(grads) -> float:
        return float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads.values()])))

    # each rank's half of the batch (verl dispatches contiguous halves) exceeds the update's token budget, a
    # whole sequence: verl summed each rank's gradient over micro-batches
    half, tokens = len(update["ids"]) // 2, update["attention_mask"].sum(-1)
    assert min(int(tokens[:half].sum()), int(tokens[half:].sum())) > settings["max_prompt_length"] + settings["max_response_length"]
    local = gradient(seq_w)
    assert set(verl_grads) == set(local) and "lm_head.weight" in local  # the untied head, a parameter of its own
    error = norm({k: verl_grads[k] - local[k] for k in local}) / norm(local)
    assert error < 1e-4, error
    verl = float(np.mean(update["metrics"]["actor/grad_norm"]))
    assert verl == pytest.approx(row["actor/grad_norm"]) and verl == pytest.approx(norm(verl_grads), rel=1e-4)
    beta_hat = row["curriculum/beta_actual"]
    assert norm(gradient(kept.float())) == pytest.approx(beta_hat * verl, rel=1e-3) and beta_hat < 0.5


def test_every_replica_samples_from_the_weights_the_last_update_made(entropy_runs):
    """After each update every replica's weights are the actor's, gathered from its shards: in steps 2 and 3
    both replicas sample (the recorder notes which replica served a row), and on each the probabilities vLLM
    (bf16) reported for its samples are the actor's old-policy probabilities of the same tokens up to bf16
    rounding (within a small factor of what bf16 moves them on this CPU, `bf16_rounding`), and over ten times
    nearer them than those of the weights one update earlier (the base model for step 2, step 1's export for
    step 3), which a replica the sync missed would hold. The same in SENT's run, which trained on the same
    machine at the same time (their steps interleave): each run's replicas hold its own weights; and verl's
    own metric of it, ``rollout/probs_diff_mean``, at every step of both runs."""
    from transformers import AutoModelForCausalLM

    a = entropy_runs.a
    for step, earlier in ((2, Path(entropy_runs.model)), (3, a / "checkpoints" / "step1")):
        (old,) = records(a, step, "old_pass")
        synced = row_sync(old)
        rounding = bf16_rounding(load_weights(a, step, entropy_runs.model), old)
        model = AutoModelForCausalLM.from_pretrained(earlier, dtype=torch.float32)
        with torch.no_grad():
            stale = row_sync({**old, "old_log_probs": response_logprobs(model, old)})
        servers = np.array(old["servers"])
        assert len(servers) == len(synced) and len(set(servers)) == 2, (step, servers)
        for server in sorted(set(servers)):
            mine = torch.as_tensor(servers == server)
            got = {"synced": float(synced[mine].mean()), "bf16 here": float(rounding[mine].mean()),
                   "one update earlier": float(stale[mine].mean())}
            assert got["synced"] < BF16_PATHS * got["bf16 here"] and got["one update earlier"] > 10 * got["synced"], \
                (step, server, got)
    for run, base in ((a, entropy_runs.model), (entropy_runs.sent, entropy_runs.tied_model)):
        for row in read_metrics(run / "metrics.jsonl"):
            (old, *_) = records(run, row["step"], "old_pass")
            model = load_weights(run, row["step"], base)
            m = old["response_mask"].float()
            rounding = float((bf16_rounding(model, old) * m.sum(-1)).sum() / m.sum())  # a token mean, as verl's
            got = (row["rollout/probs_diff_mean"], rounding)
            assert row["rollout/probs_diff_mean"] < BF16_PATHS * rounding, (run.name, row["step"], got)
    written = {run: sorted(p.stat().st_mtime for p in (run / "recorded").glob("*.pt")) for run in (a, entropy_runs.sent)}
    assert written[a][0] < written[entropy_runs.sent][-1] and written[entropy_runs.sent][0] < written[a][-1], written


def test_the_losses_verl_reduces_over_ranks_are_the_whole_batchs(entropy_runs):
    """The loss terms verl reports (each rank's share of the whole batch's normalizer, reduced over the 2
    ranks: `verl.utils.metric.Metric.aggregate_dp`) equal the local loss's terms on the recorded batch: at
    steps 2 and 3, where the policy has left the reference, ``actor/kl_loss`` is the weighted KL term of
    `vicurl.algos.grpo.grpo_loss` (one optimizer step a batch: the update's log-probs are the old pass's).
    ``actor/pg_loss`` says nothing here: on-policy, with one weight per group and advantages that sum to zero
    within it, it is zero however it is reduced."""
    a, settings = entropy_runs.a, entropy_runs.settings
    cfg = loss_config(TrainSettings.from_dict(settings))
    for step in (2, 3):
        (update,) = records(a, step, "update")
        mask = update["response_mask"].float()
        kept = mask.sum(-1) > 0
        seq_w = torch.where(kept, update["rollout_is_weights"][:, 0] * update["scale"], torch.zeros(len(kept)))
        _, local = grpo_loss(update["old_log_probs"], update["old_log_probs"], update["advantages"], mask, seq_w, cfg,
                             ref_log_prob=update["ref_log_prob"],
                             global_batch_size=settings["batch_size"] * settings["group_size"])
        verl = float(np.mean(update["metrics"]["actor/kl_loss"]))
        assert local["actor/kl_loss"] > 1e-5, local
        assert verl == pytest.approx(local["actor/kl_loss"], rel=1e-3), (step, verl, local)


def test_a_stopped_run_resumes_to_the_uninterrupted_runs_numbers(entropy_runs):
    """Stopped inside step 2's export and resumed on the same 2 ranks: step 3's metrics and every export equal
    the uninterrupted run's (the rollouts are seeded per request, `vicurl.engines.verl.patches.rollout_seeds`, and the
    rehearsal's vLLM computes each row alike whatever shares its batch, `vicurl.rehearsal.cpu`), step 2's
    among them, which the resumed job redid (`export.repair_exports`), and the save from before the stop no longer keeps its shards (one per rank); both ran with the 7B's
    offload settings. The resumed job's vLLM engines draw from a stream of their own (``rollout.seed``: what
    unseeded requests would sample)."""
    from safetensors.torch import load_file

    from vicurl.engines.verl.export import checkpoint_dir
    from vicurl.engines.verl.patches.rollout_seeds import engine_seed

    a, b, settings = entropy_runs.a, entropy_runs.b, entropy_runs.settings
    log = (b / "launch.log").read_text()
    assert "training from verl's save of step 2" in log and "exported steps [2] that the previous job saved" in log
    assert sorted(p.name for p in (b / "_work" / "exports").iterdir()) == ["step1", "step2", "step3"]
    for run, start in ((a, 0), (b, 2)):  # the overrides of the run's last job
        overrides = json.loads((run / "_work" / "verl_overrides.json").read_text())
        assert f"actor_rollout_ref.rollout.seed={engine_seed(settings['seed'], start)}" in overrides
        assert {f"actor_rollout_ref.actor.fsdp_config.{k}=true" for k in OFFLOAD} <= set(overrides)  # the 7B's
    assert [stable(r) for r in read_metrics(b / "metrics.jsonl")] == [stable(r) for r in read_metrics(a / "metrics.jsonl")]
    for step in (1, 2, 3):
        wa, wb = (load_file(run / "checkpoints" / f"step{step}" / "model.safetensors") for run in (a, b))
        assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa), step
    for run in (a, b):
        with_shards = sorted(d.name for d in checkpoint_dir(run / "_work").glob("global_step_*") if (d / "actor").is_dir())
        assert with_shards == ["global_step_3"], run
        shards = sorted(p.name for p in (checkpoint_dir(run / "_work") / "global_step_3" / "actor").glob("model_*.pt"))
        assert shards == ["model_world_size_2_rank_0.pt", "model_world_size_2_rank_1.pt"], shards


def test_a_stopped_run_leaves_none_of_its_processes(entropy_runs):
    """SIGTERM to the train job ended every process of the 2-rank run before the job exited: verl's loop,
    Ray's (gcs_server, raylet, both FSDP workers) and vLLM's (both engine cores and their workers); nothing is
    left of the shared memory they mapped (vLLM's message queues), of the job's temp folder (Ray's session,
    vLLM's sockets) or of its socket links in /tmp."""
    stop = entropy_runs.stop
    commands = list(stop["stopped"].processes.values())  # each process's command line
    assert sum(c.startswith("VLLM::EngineCore") for c in commands) == 2, commands
    assert sum(c.startswith("ray::WorkerDict") for c in commands) == 2, commands
    assert any(c.split()[0].endswith("raylet") for c in commands), commands
    assert any(c.split()[0].endswith("gcs_server") for c in commands), commands
    assert any("-m vicurl.engines.verl.fit" in c for c in commands), commands
    assert stop["left"]["processes"] == [], {pid: stop["stopped"].processes[pid] for pid in stop["left"]["processes"]}
    assert stop["stopped"].shared_memory  # vLLM's queues, at least
    assert stop["left"] == {"processes": [], "shared_memory": [], "temp": [], "links": []}


def test_the_replicas_threads_may_run_on_every_core(entropy_runs):
    """vLLM's CPU build binds each engine's threads to cores it picks alone, so a run's replicas shared one
    core; the rehearsal turns the binding off (`vicurl.rehearsal.cpu.VLLM_ENV`): at step 1 every thread of
    both engine cores of the 2-rank run may run wherever the trainer may."""
    seen = json.loads((entropy_runs.a / "recorded" / "affinity.json").read_text())
    assert len(seen["engine_cores"]) == 2, seen
    for pid, masks in seen["engine_cores"].items():
        assert masks == [seen["trainer"]], (pid, masks)


def test_the_exports_are_the_actors_weights_and_generate(entropy_runs, engine_args):
    """Each evaluated step's export is the actor's full weights after that step's update, gathered from its
    two shards (the recorder's), in bf16, the dtype verl's merger writes: equal, tensor for tensor. Under the
    step-2 export, step 3's rollouts have the probabilities the actor's old-policy pass gave them (over its two
    shards, in fp32) up to the export's bf16 rounding, measured here on the same rows: the actor's recorded
    fp32 weights give the old pass's probabilities to fp32 rounding, far below that, and rounding them to
    bf16 moves them as far as the export is off. The step-1 and step-3 exports, an update away, are over ten
    times further off. Both generators load an export and sample from it."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vicurl.config.settings import SamplingSettings
    from vicurl.evaluation.vllm_generate import generate_records_vllm

    a = entropy_runs.a
    assert sorted(p.name for p in (a / "recorded").glob("update*.weights.pt")) == [f"update{n}.weights.pt" for n in (1, 2, 3)]
    for step in (1, 2, 3):
        export, actor = load_file(a / "checkpoints" / f"step{step}" / "model.safetensors"), \
            torch.load(a / "recorded" / f"update{step}.weights.pt")
        assert export.keys() == actor.keys(), step
        for k, w in export.items():
            assert w.dtype == torch.bfloat16 and torch.equal(w, actor[k].to(torch.bfloat16)), (step, k)

    (old,) = records(a, 3, "old_pass")
    m = old["response_mask"].bool()

    def off(model) -> float:  # mean |p - p_actor| over step 3's response tokens
        with torch.no_grad():
            return float((response_logprobs(model, old).exp() - old["old_log_probs"].exp())[m].abs().mean())

    exports = {step: off(AutoModelForCausalLM.from_pretrained(a / "checkpoints" / f"step{step}", dtype=torch.float32))
               for step in (1, 2, 3)}
    actor = load_weights(a, 3, entropy_runs.model)  # the weights after update 2, in fp32
    fp32 = off(actor)
    with torch.no_grad():  # the parameters rounded as the export's (the rotary buffers stay fp32, as a load makes them)
        for w in actor.parameters():
            w.copy_(w.bfloat16().float())
    rounding = off(actor)
    got = {"fp32": fp32, "bf16 weights": rounding, "exports": exports}
    assert fp32 < rounding / 10 and exports[2] == pytest.approx(rounding, rel=1e-3), got
    assert min(exports[1], exports[3]) > 10 * exports[2], got
    weights = load_file(a / "checkpoints" / "step3" / "model.safetensors")  # the head stays the model's own
    assert not torch.equal(weights["lm_head.weight"], weights["model.embed_tokens.weight"])
    assert json.loads((a / "checkpoints" / "step3" / "config.json").read_text())["tie_word_embeddings"] is False
    export = a / "checkpoints" / "step3"
    tok = AutoTokenizer.from_pretrained(export)
    model = AutoModelForCausalLM.from_pretrained(export)
    ids = tok("Compute 2 + 3.\n", return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=8, do_sample=False, pad_token_id=tok.pad_token_id)
    assert out.shape[1] > ids["input_ids"].shape[1]
    problems = pd.DataFrame({"id": ["a"], "question": ["Compute 2 + 3."]})
    records_ = generate_records_vllm(str(export), problems, SamplingSettings(n=2, temperature=1.0, top_p=1.0,
                                                                               max_new_tokens=8, seed=0),
                                     engine_args=engine_args)
    assert len(records_) == 2 and (records_["n_tokens"] > 0).all()


# ---------------------------------------------------------------- a rollout engine that fails


def test_a_broken_rollout_engine_fails_the_run_within_its_step_timeout(broken_engine):
    """vLLM's CPU build without the rehearsal's plugin (`vicurl.rehearsal.vllm_cpu`), rollouts in
    float32: vLLM packs the weights away and verl's first weight sync fails in vLLM's worker, after
    which verl 0.9.1 waits forever. The train job's guard ends the run once no step has finished within
    ``verl.step_timeout`` (here 5 minutes): the job fails, its log holds vLLM's error, the guard's
    message names the engine's log, copied out of the job's temp folder before it went (``failed_logs``),
    and none of the run's processes is left."""
    rc, log, took, folder = broken_engine.result()
    assert rc != 0 and not (folder / "metrics.jsonl").exists(), log[-4000:]
    assert "'Parameter' object has no attribute 'weight_loader'" in log  # vLLM's error, through Ray's log
    assert f"no training step finished in {BROKEN_TIMEOUT} minutes since it started (verl.step_timeout)" in log, \
        log[-4000:]
    assert "The rollout engine's log: " in log and "Its last errors:" in log, log[-4000:]
    assert took > 60 * BROKEN_TIMEOUT
    # the guard ended the run at its step timeout, by its own log's times (the job's start-up and exit under CI's
    # load aside): a poll (5 s), the processes' end (10 s, then 15 s at most) and the report after the timeout
    times = {m[2]: datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f") for m in re.finditer(
        r"^(\S+ \S+) vicurl\.runtime\.supervise \w+ (verl's loop started|no training step finished)", log, re.M)}
    guard = (times["no training step finished"] - times["verl's loop started"]).total_seconds()
    assert 60 * BROKEN_TIMEOUT < guard < 60 * BROKEN_TIMEOUT + 60, guard
    assert "Ended verl's loop" in log
    # the engine's log lived in the job's temp folder, which is gone: the error names its copy, which holds vLLM's error
    kept = folder / "_work" / "failed_logs"
    assert f"Ray's and vLLM's logs of the run, copied from its temp folder: {kept}/" in log, log[-2000:]
    named = log.rsplit("The rollout engine's log: ", 1)[1].splitlines()[0].split(", ")
    assert named and all(Path(f).is_relative_to(kept) and Path(f).is_file() for f in named), named
    assert any("'Parameter' object has no attribute 'weight_loader'" in Path(f).read_text() for f in named)


# ---------------------------------------------------------------- VCRL's replay, the oracle reward


def test_vcrl_replays_bank_prompts_inside_the_step(vllm, verl_launch, tiny_model_dir, demo_train_set, tmp_path):
    """VCRL with the oracle reward on 4 ranks (4 vLLM replicas): once the threshold rises (step 2), dropped
    prompts' rows are refilled with memory-bank prompts rolled out inside the step (a second generation
    and old-policy pass), and the update trains on them. (verl's fit raised KeyError 'mfu' at the first
    replay before the replay batch carried global_token_num.) With several agent-loop workers, as on a GPU
    (verl's default 8 there; 4 here, one a replica, each of them a process that imports vLLM): verl splits a
    replay's r x G rows into one equal chunk a worker (`trainer.generate_in_equal_chunks` pads them where r x G
    is not a multiple of the workers; this run's replays are 2 x 4 rows) and spreads them over the replicas (all 4
    serve the step's batch, more than one the replay), every one of which samples from the actor's weights (up to
    bf16 rounding: `bf16_rounding`). Under a
    100-character TMPDIR, as SLURM's per-job ones can be: Ray's and vLLM's sockets go through the
    launcher's short link (`vicurl.runtime.vllm_env.short_sockets`), into a folder of the run's own, which goes with it."""
    settings = {**BASE, "total_steps": 3, "reward": "oracle", "curriculum": "vcrl",
                "curriculum_params": {"switch_step": 1}, "export_steps": [3]}
    workers = {"overrides": ["actor_rollout_ref.rollout.agent.num_workers=4"]}
    temp = long_folder(tmp_path, 100)
    rc, log, _ = verl_launch(tmp_path / "vcrl", settings, tiny_model_dir, demo_train_set, verl=workers, ranks=4,
                             env={"TMPDIR": temp, "VICURL_RECORD_WEIGHTS": "1"})
    assert rc == 0, log[-4000:]
    assert list(Path(temp).iterdir()) == []  # the run's temp folder (Ray's session, vLLM's sockets) went with it
    assert "model_world_size_4_rank_3.pt" in {p.name for p in (tmp_path / "vcrl").rglob("model_world_size_*")}
    rows = read_metrics(tmp_path / "vcrl" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert 0 < rows[0]["reward/oracle_acc"] < 1  # the rewards vary: VCRL has something to keep
    replayed = [r["step"] for r in rows if r["curriculum/replayed"] > 0]
    assert replayed, [r["curriculum/replayed"] for r in rows]
    for step in replayed:
        main, replay = records(tmp_path / "vcrl", step, "old_pass")
        (update,) = records(tmp_path / "vcrl", step, "update")
        bank = set(replay["ids"])
        assert not bank & set(main["ids"]) and bank <= trained_prompts(update)
        assert len(set(main["servers"])) == 4 and len(set(replay["servers"])) > 1, (main["servers"], replay["servers"])
        weights = load_weights(tmp_path / "vcrl", step, tiny_model_dir)
        for rec in (main, replay):  # the replicas sample from the actor's weights, up to bf16 rounding
            got = (float(row_sync(rec).mean()), float(bf16_rounding(weights, rec).mean()))
            assert got[0] < BF16_PATHS * got[1], (step, got)


# ---------------------------------------------------------------- a curriculum that proposes the batch


def test_sent_draws_the_prompts_it_proposes(entropy_runs, sent_stats, demo_train_set):
    """SENT chooses each step's prompts from the initial policy's semantic entropies (rule prompt_stats'
    table): verl's dataloader, through the project's sampler, rolls out exactly the prompts SENT proposes
    for that step (computed here from the same table), and every one is trained on (its run trained at
    the same time as the 2-rank VI-CuRL run: `entropy_runs`)."""
    from vicurl.curriculum import make_curriculum
    from vicurl.data import schema
    from vicurl.engines.verl.sampler import CurriculumSampler

    df, (stats, _) = schema.read(demo_train_set), sent_stats
    run = entropy_runs.sent
    sent = make_curriculum("sent", {})
    sent.setup(df, batch_size=BASE["batch_size"], total_steps=2, seed=BASE["seed"], stats=stats)
    sampler = CurriculumSampler(sent, list(df["id"]), BASE["batch_size"], BASE["seed"])
    for step in (1, 2):
        proposed = {str(df["id"].iloc[i]) for i in sampler.batch(step)}
        (old,) = records(run, step, "old_pass")
        (update,) = records(run, step, "update")
        assert set(old["ids"]) == proposed == trained_prompts(update), step
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl")] == [1, 2]
    assert json.loads((run / "_work" / "settings.json").read_text())["curriculum"] == "sent"


# ---------------------------------------------------------------- the patches of verl and vLLM


def test_the_patches_of_verl_and_vllm_still_match_their_lines(vllm):
    """Each patch of `vicurl.rehearsal.verl_cpu` and `.vllm_cpu` (the CPU's) and of
    `vicurl.engines.verl.patches.colocate_socket` (every run's; its verl modules import vLLM) answers one line of
    verl 0.9.1 or vLLM 0.29.0 (named in it): an upgrade that changes the line fails here, so the patch is
    re-examined, not silently kept."""
    import subprocess
    import sys

    code = ("from vicurl.rehearsal import vllm_cpu; from vicurl.rehearsal.cpu import stale_patches; "
            "from vicurl.rehearsal.verl_cpu import PATCHES; "
            "from vicurl.engines.verl.patches import colocate_socket; "
            "print(stale_patches(PATCHES + vllm_cpu.PATCHES + colocate_socket.PATCHES))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


SOCKETS = r"""
import types
import verl  # imports the launcher's patches (VERL_USE_EXTERNAL_MODULES), as in every process of a run
from verl.workers.rollout.vllm_rollout import utils, vllm_rollout
from vicurl.engines.verl.patches import colocate_socket

assert hasattr(vllm_rollout.ServerAdapter.__init__, "__wrapped__")  # the sender's address: of_run(verl's)
worker = types.SimpleNamespace(model_runner=None, local_rank=0)
print(utils.vLLMColocateWorkerExtension._get_zmq_handle(worker))
print(colocate_socket.of_run("ipc:///tmp/rl-colocate-zmq-01000000-replica-0-rank-0.sock"))
"""


def test_each_run_syncs_weights_over_a_socket_of_its_own(vllm, tmp_path):
    """verl 0.9.1 names the weight-sync socket after the Ray job id, ``01000000`` in every fresh Ray
    cluster, so two runs on one machine would share it; with the launcher's environment the receiver's
    address (vLLM's worker) carries the run's token and equals the sender's, and every run gets a token of
    its own. It lies in the run's temp folder, not in /tmp, where a killed run's socket file would stay."""
    import os
    import subprocess
    import sys

    from vicurl.engines.verl import launch
    from vicurl.engines.verl.patches import colocate_socket

    env = {k: v for k, v in os.environ.items() if k != "VLLM_RPC_BASE_PATH"}
    env |= {"VERL_RAY_JOB_ID": "01000000", "TMPDIR": str(tmp_path)}
    other = launch.verl_environment(env)[colocate_socket.TOKEN]  # another run's
    env.update(launch.verl_environment(env))
    out = subprocess.run([sys.executable, "-c", SOCKETS], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    receiver, sender = out.stdout.split()[-2:]
    assert receiver == sender and env[colocate_socket.TOKEN] in receiver, out.stdout
    assert receiver.startswith(f"ipc://{tmp_path}/rl-colocate-zmq-"), receiver
    assert other != env[colocate_socket.TOKEN] and other not in receiver
