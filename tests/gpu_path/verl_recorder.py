"""Test harness: what each step of verl's own ``fit()`` handed the trainer's hooks, written to disk.

Imported in every process verl starts when named in ``VERL_USE_EXTERNAL_MODULES`` (after
`vicurl.rehearsal.verl_cpu`); it wraps two methods of verl's ``RayPPOTrainer`` that
``VICuRLTrainer`` calls through ``super()``, and one of its rollout client, only where
``VICURL_RECORD_DIR`` is set, and changes nothing they do:

``_compute_old_log_prob``  the old-policy pass's input and output: each row's prompt id, the vLLM
                           replica that sampled it, response mask, verl's per-token entropies and old
                           log-probs, vLLM's log-probs
``_update_actor``          the batch the update got (after the curriculum's rows were dropped and
                           weighted), the loss normalizer's scale, and the actor's metrics
``LLMServerClient``        (verl 0.9.1, ``workers/rollout/llm_server.py``) ``generate`` adds the id of the
                           replica ``_acquire_server`` chose to its output's ``extra_fields``, which verl's
                           agent loop puts into the batch's non-tensor fields (``server_id``)
``FSDPEngine``             with ``VICURL_RECORD_GRADS`` set, the first ``optimizer_step`` of each actor rank
                           (the run's first update) gathers the gradient's shards and rank 0 writes the full
                           gradient before verl clips it (``first_update.grads.pt``: parameter name -> tensor);
                           with ``VICURL_RECORD_WEIGHTS`` set, after every ``optimizer_step`` rank 0 writes the
                           actor's full weights, gathered from the shards in the actor's dtype
                           (``update{n}.weights.pt``, n counting this process's updates: the run's steps where
                           each step takes one optimizer step, as here)

At step 1 the trainer's process also writes which CPUs each thread of each of the run's vLLM engine cores may
run on (``affinity.json``), against its own.

With ``VICURL_RECORD_HOLD_EXPORT=N`` the export of step N (after verl's save, whose tracker then names step N)
never ends: once the merger has written the weights into the export's temporary folder, the trainer touches
``held`` and waits there for the test's signal, so that a run is stopped at the same point of its work
however loaded the machine is. With ``VICURL_RECORD_MEET=mine,partner`` (two runs at once) step 1's old-policy pass ends only when both runs
have reached it (each touches its file and waits for the other's): their updates and weight syncs then run
at the same time, however long each took to start.
"""

from __future__ import annotations

import contextvars
import itertools
import os
from pathlib import Path

DIR = os.environ.get("VICURL_RECORD_DIR")
KEYS = ("input_ids", "attention_mask", "position_ids", "responses", "response_mask", "advantages",
        "old_log_probs", "ref_log_prob", "rollout_is_weights", "rollout_log_probs")


def _rows(batch) -> dict:
    ntb = batch.non_tensor_batch
    ids = [str((e or {}).get("id")) for e in ntb["extra_info"]] if "extra_info" in ntb else []
    return {"ids": ids, "uid": [str(u) for u in ntb.get("uid", [])], "servers": [str(s) for s in ntb.get("server_id", [])]}


def _meet(mine: str, partner: str, timeout: float = 600.0) -> None:
    import time

    Path(mine).touch()
    deadline = time.time() + timeout
    while not Path(partner).exists():
        if time.time() > deadline:
            raise TimeoutError(f"the partner run never reached step 1 ({partner})")
        time.sleep(0.2)


# the replica a request went to: a holder per ``generate`` call, filled by ``_acquire_server`` (a dict, so that
# a context copied on the way, as a new asyncio task copies it, still fills the caller's)
_chosen = contextvars.ContextVar("vicurl_recorder_server")


def _install_servers() -> None:
    from verl.workers.rollout import llm_server

    client = llm_server.LLMServerClient
    acquire, generate = client._acquire_server, client.generate

    async def _acquire_server(self, request_id, **extra):
        server_id, handle = await acquire(self, request_id, **extra)
        holder = _chosen.get(None)
        if holder is not None:
            holder["server_id"] = server_id
        return server_id, handle

    async def _generate(self, request_id, **kwargs):
        holder = {}
        _chosen.set(holder)
        output = await generate(self, request_id, **kwargs)
        output.extra_fields["server_id"] = str(holder.get("server_id"))
        return output

    client._acquire_server, client.generate = _acquire_server, _generate


def _install(folder: Path) -> None:
    import torch
    from verl.trainer.ppo import ray_trainer

    counter = itertools.count()
    base = ray_trainer.RayPPOTrainer
    old_pass, update = base._compute_old_log_prob, base._update_actor

    def _compute_old_log_prob(self, batch):
        out, mfu = old_pass(self, batch)
        rec = {"step": int(self.global_steps), **_rows(batch),
               **{k: batch.batch[k].clone() for k in KEYS if k in batch.batch.keys()},
               "entropys": out.batch["entropys"].clone(), "old_log_probs": out.batch["old_log_probs"].clone()}
        torch.save(rec, folder / f"step{int(self.global_steps)}.old_pass{next(counter)}.pt")
        if int(self.global_steps) == 1:
            _write_affinity(folder / "affinity.json")
        if int(self.global_steps) == 1 and os.environ.get("VICURL_RECORD_MEET"):
            _meet(*os.environ["VICURL_RECORD_MEET"].split(","))
        return out, mfu

    def _update_actor(self, batch):
        out = update(self, batch)
        rec = {"step": int(self.global_steps), **_rows(batch),
               "scale": float(getattr(self.actor_rollout_wg, "_scale", 1.0)),
               "metrics": {k: v for k, v in out.meta_info["metrics"].items()},
               **{k: batch.batch[k].clone() for k in KEYS if k in batch.batch.keys()}}
        torch.save(rec, folder / f"step{int(self.global_steps)}.update.pt")
        return out

    base._compute_old_log_prob, base._update_actor = _compute_old_log_prob, _update_actor


def _install_hold(folder: Path, step: int) -> None:
    import time

    from vicurl.engines.verl import export

    tokenizer = export.use_base_tokenizer

    def use_base_tokenizer(model_dir, base_model):  # export_step calls it once the weights are written
        if Path(model_dir).name == f"step{step}":
            (folder / "held").touch()
            while True:  # until the test's signal ends the run
                time.sleep(1)
        return tokenizer(model_dir, base_model)

    export.use_base_tokenizer = use_base_tokenizer


def _write_affinity(path: Path) -> None:
    import json

    import psutil

    from vicurl.engines.verl.patches.colocate_socket import TOKEN

    cores = {}
    for p in psutil.process_iter():  # the trainer runs in a Ray worker: the engines are no children of it
        try:
            if p.cmdline()[:1] == ["VLLM::EngineCore"] and p.environ().get(TOKEN) == os.environ[TOKEN]:  # this run's
                cores[p.pid] = sorted({tuple(sorted(os.sched_getaffinity(t.id))) for t in p.threads()})
        except (psutil.Error, ProcessLookupError):
            continue
    path.write_text(json.dumps({"trainer": sorted(os.sched_getaffinity(0)), "engine_cores": cores}))


def _full(t):
    """A parameter's or gradient's whole tensor, gathered from the ranks' shards (every rank must call it, in
    the same order), as float32 on the CPU."""
    t = t.full_tensor() if hasattr(t, "full_tensor") else t
    return t.detach().float().cpu().clone()


def _install_engine(folder: Path, grads: bool, weights: bool) -> None:
    import torch
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngine

    step, calls = FSDPEngine.optimizer_step, itertools.count(1)

    def optimizer_step(self):
        n = next(calls)
        if grads and n == 1:
            full = {name: None if p.grad is None else _full(p.grad) for name, p in self.module.named_parameters()}
            if torch.distributed.get_rank() == 0:
                torch.save(full, folder / "first_update.grads.pt")
        out = step(self)
        if weights:
            full = {name: _full(p) for name, p in self.module.named_parameters()}
            if torch.distributed.get_rank() == 0:
                torch.save(full, folder / f"update{n}.weights.pt")
        return out

    FSDPEngine.optimizer_step = optimizer_step


if DIR:
    Path(DIR).mkdir(parents=True, exist_ok=True)
    _install(Path(DIR))
    _install_servers()
    if os.environ.get("VICURL_RECORD_HOLD_EXPORT"):
        _install_hold(Path(DIR), int(os.environ["VICURL_RECORD_HOLD_EXPORT"]))
    if os.environ.get("VICURL_RECORD_GRADS") or os.environ.get("VICURL_RECORD_WEIGHTS"):
        _install_engine(Path(DIR), bool(os.environ.get("VICURL_RECORD_GRADS")), bool(os.environ.get("VICURL_RECORD_WEIGHTS")))
