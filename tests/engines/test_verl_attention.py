"""The verl engine's attention (``vicurl_varlen``) against sdpa and one sequence at a time, through verl's and
transformers' own code on the CPU."""

from __future__ import annotations

import pytest
import torch

from vicurl.engines.verl import varlen_attention

from verl_support import (
    launcher_config,
    load_like_verls_engine,
    verl_model_config,
)

# ---------------------------------------------------------------- 1. attention implementation


def test_the_launchers_model_config_loads_through_verls_own_code(chat_model_dir, tmp_path):
    """The launcher's attention (`varlen_attention`, which verl's processes import as this test module does)
    through verl's model config and its engine's loading."""
    mc = verl_model_config(launcher_config(chat_model_dir, tmp_path))
    assert mc.hf_config._attn_implementation == varlen_attention.NAME and mc.use_remove_padding
    model = load_like_verls_engine(mc)
    assert model.config._attn_implementation == varlen_attention.NAME


def test_verls_default_attention_needs_flash_attn(chat_model_dir, tmp_path):
    """Without the launcher's choice verl asks for flash_attention_2, which the envs do not install."""
    import importlib.util

    from verl.workers.config import HFModelConfig

    mc = HFModelConfig(path=str(chat_model_dir))
    assert mc.hf_config._attn_implementation == "flash_attention_2"
    if importlib.util.find_spec("flash_attn") is not None:
        pytest.skip("flash-attn is installed here")
    with pytest.raises(ImportError, match="FlashAttention2"):
        load_like_verls_engine(mc)


@pytest.mark.parametrize("attention", [varlen_attention.NAME, "sdpa"])
def test_packed_log_probs_equal_one_sequence_at_a_time(attention, chat_model_dir, tmp_path):
    """verl's remove-padding forward (sequences packed in one row, attention_mask None, position ids
    restarting at each sequence: ``FSDPEngineWithLMHead.prepare_model_inputs``) attends within each
    sequence only, under the launcher's attention (each sequence its own causal attention; on the CPU one
    at a time) and under sdpa (a dense block mask transformers builds from the position ids): the log-probs
    equal those of each sequence alone. So do a padded batch (a 2D mask, which the packed route never
    passes) and a batch of rows without positions under the launcher's attention."""
    from verl.utils.torch_functional import logprobs_from_logits

    config = launcher_config(chat_model_dir, tmp_path, verl={"attn_implementation": attention})
    model = load_like_verls_engine(verl_model_config(config)).eval()
    assert model.config._attn_implementation == attention
    g = torch.Generator().manual_seed(0)
    seqs = [torch.randint(5, model.config.vocab_size, (n,), generator=g) for n in (7, 12, 3, 9)]
    input_ids = torch.nested.as_nested_tensor(seqs, layout=torch.jagged)
    position_ids = torch.nested.as_nested_tensor([torch.arange(len(s)) for s in seqs], layout=torch.jagged)
    with torch.no_grad():
        logits = model(input_ids=input_ids.values().unsqueeze(0), attention_mask=None,
                       position_ids=position_ids.values().unsqueeze(0), use_cache=False).logits[0]  # as verl calls it
        rolled = torch.roll(input_ids.values(), shifts=-1)
        packed = logprobs_from_logits(logits, rolled)
        start, alone = 0, []
        for s in seqs:
            alone.append(model(input_ids=s[None], use_cache=False).logits[0])
            lp = logprobs_from_logits(alone[-1][:-1], s[1:])
            torch.testing.assert_close(packed[start : start + len(s) - 1], lp, atol=1e-5, rtol=1e-5)
            start += len(s)
        if attention == varlen_attention.NAME:
            padded = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)
            mask = torch.nn.utils.rnn.pad_sequence([torch.ones(len(s), dtype=torch.long) for s in seqs], batch_first=True)
            logits = model(input_ids=padded, attention_mask=mask, use_cache=False).logits
            for row, one in zip(logits, alone):
                torch.testing.assert_close(row[: len(one)], one, atol=1e-5, rtol=1e-5)
            # rows of equal length, neither positions nor a mask given (transformers passes one row of positions)
            pair = torch.stack([seqs[0], seqs[0].flip(0)])
            rows = model(input_ids=pair, use_cache=False).logits
            torch.testing.assert_close(rows[0], alone[0], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(rows[1], model(input_ids=pair[1:], use_cache=False).logits[0], atol=1e-5, rtol=1e-5)


def _flash(q, k, v, cu, causal, scale=None):
    """A stand-in for ATen's flash kernel, which every release's varlen_attn calls: SDPA over each segment, as
    told (no default it does not have); fewer key/value heads than query heads taken as they are, as the
    kernel takes them (it refuses copies of another width only if they do not divide the queries')."""
    if q.shape[1] % k.shape[1]:
        raise RuntimeError("Number of heads in key/value must divide number of heads in query")
    out = []
    for a, b in zip(cu[:-1].tolist(), cu[1:].tolist()):
        seg = [x[a:b].transpose(0, 1)[None] for x in (q, k, v)]
        out.append(torch.nn.functional.scaled_dot_product_attention(*seg, is_causal=causal, scale=scale,
                                                                    enable_gqa=True)[0].transpose(0, 1))
    return torch.cat(out)


def varlen_first_form(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, is_causal=False, return_aux=None):
    """The first releases' signature: ``is_causal``, no scale."""
    return _flash(query, key, value, cu_seq_q, is_causal)


def varlen_2_11_form(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, return_aux=None, scale=None,
                     window_size=(-1, -1), k_cache=None, v_cache=None, cache_seqlens=None, cache_batch_idx=None,
                     page_table=None, seqused_k=None):
    """The GPU lock's (torch 2.11): causal only as ``window_size == (-1, 0)``, ``scale``, no ``enable_gqa``
    (grouped heads go to the kernel unchecked)."""
    return _flash(query, key, value, cu_seq_q, window_size == (-1, 0), scale)


def varlen_later_form(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, return_aux=None, scale=None,
                      window_size=(-1, -1), enable_gqa=False, seqused_k=None, block_table=None, num_splits=None):
    """torch 2.13's: as 2.11's, and grouped heads refused unless ``enable_gqa`` (a check, then the same kernel)."""
    if key.shape[1] != query.shape[1] and not enable_gqa:
        raise ValueError("Try setting enable_gqa=True for GQA.")
    return _flash(query, key, value, cu_seq_q, window_size == (-1, 0), scale)


@pytest.mark.parametrize("kernel", [varlen_first_form, varlen_2_11_form, varlen_later_form])
def test_the_gpu_kernel_is_called_causal_with_the_models_scale_and_heads(kernel, monkeypatch):
    """The launcher's attention calls torch's varlen kernel (a GPU's route, which a CPU cannot run) by the
    keywords the installed signature has: against a stand-in of each form, causal, at a scale that is not
    the kernel's default, with grouped-query heads (4 queries' to 2 keys', passed at their own width: no
    copy), on segments of unequal lengths, it gives the CPU's route one segment at a time."""
    import functools

    import torch.nn.attention.varlen as varlen

    widths = []  # the key heads each call passed

    @functools.wraps(kernel)  # its signature, which the launcher's attention reads
    def called(query, key, *args, **kwargs):
        widths.append(key.shape[1])
        return kernel(query, key, *args, **kwargs)

    monkeypatch.setattr(varlen, "varlen_attn", called)
    varlen_attention._varlen_parameters.cache_clear()
    try:
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(23, h, 16, generator=g) for h in (4, 2, 2))
        cu = varlen_attention.segments(torch.cat([torch.arange(n) for n in (9, 3, 11)]))
        got = varlen_attention.varlen_kernel(q, k, v, cu, 11, scale=0.3)
    finally:
        varlen_attention._varlen_parameters.cache_clear()
    assert widths == [2]
    torch.testing.assert_close(got, varlen_attention.by_segment(q, k, v, cu, 0.3), rtol=1e-5, atol=1e-6)


def test_rows_and_position_jumps_start_sequences_as_under_sdpa(chat_model_dir, tmp_path):
    """Position ids that are not verl's packs are read as transformers reads them under sdpa: rows whose
    positions start above 0 are each their own sequence, and a sequence ends wherever a position does not
    follow the previous one (not only where one restarts at 0): the launcher's attention gives sdpa's
    logits, which attend that way."""
    models = {a: load_like_verls_engine(verl_model_config(launcher_config(chat_model_dir, tmp_path / a,
                                                                          verl={"attn_implementation": a}))).eval()
              for a in (varlen_attention.NAME, "sdpa")}
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, models["sdpa"].config.vocab_size, (2, 8), generator=g)
    cases = {"rows from 5": (ids, torch.arange(5, 13).expand(2, 8)),
             "a jump": (ids[:1], torch.tensor([[0, 1, 2, 3, 7, 8, 9, 10]])),
             "a restart and a jump": (ids[:1], torch.tensor([[0, 1, 2, 0, 1, 5, 6, 7]]))}
    with torch.no_grad():
        for name, (x, pos) in cases.items():
            got, want = (models[a](input_ids=x, position_ids=pos, use_cache=False).logits
                         for a in (varlen_attention.NAME, "sdpa"))
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, msg=name)


def test_a_forward_pass_reads_its_sequences_once(chat_model_dir, tmp_path, monkeypatch):
    """The boundaries of a pack are computed once per forward pass, not once a layer (on a GPU each
    computation stops the host until the GPU catches up); another pack, or the same tensor changed in
    place, is read again."""
    model = load_like_verls_engine(verl_model_config(launcher_config(chat_model_dir, tmp_path))).eval()
    assert model.config.num_hidden_layers > 1
    calls = []
    segments = varlen_attention.segments
    monkeypatch.setattr(varlen_attention, "segments", lambda pos: calls.append(pos) or segments(pos))
    ids = torch.randint(5, model.config.vocab_size, (1, 12), generator=torch.Generator().manual_seed(2))
    pos = torch.cat([torch.arange(5), torch.arange(7)])[None]
    with torch.no_grad():
        first = model(input_ids=ids, position_ids=pos, use_cache=False).logits
        assert len(calls) == 1
        torch.testing.assert_close(model(input_ids=ids, position_ids=pos, use_cache=False).logits, first)
        assert len(calls) == 1
        pos[0, 5:] = torch.arange(5, 12)  # one sequence now
        whole = model(input_ids=ids, position_ids=pos, use_cache=False).logits
        assert len(calls) == 2
        model(input_ids=ids, position_ids=pos.clone(), use_cache=False)
        assert len(calls) == 3
        torch.testing.assert_close(whole, model(input_ids=ids, use_cache=False).logits)  # transformers' positions
        assert len(calls) == 4


def test_what_the_attention_cannot_compute_is_refused(monkeypatch):
    """Soft-capping, attention sinks, a non-causal module, a 4D mask and verl's Ulysses sequence
    parallelism (which gathers the sequence only on the flash-attn path) are refused, never ignored;
    boundaries a caller computed (flash attention's ``cu_seq_lens_*``) are taken as given."""
    from types import SimpleNamespace

    g = torch.Generator().manual_seed(3)
    q, k, v = torch.randn(1, 4, 10, 8, generator=g), torch.randn(1, 2, 10, 8, generator=g), torch.randn(1, 2, 10, 8, generator=g)
    causal, pos = SimpleNamespace(is_causal=True), torch.cat([torch.arange(4), torch.arange(6)])[None]
    want, _ = varlen_attention.attention(causal, q, k, v, None, scaling=0.3, position_ids=pos)
    cu = torch.tensor([0, 4, 10], dtype=torch.int32)
    got, _ = varlen_attention.attention(causal, q, k, v, None, scaling=0.3, cu_seq_lens_q=cu, cu_seq_lens_k=cu,
                                        max_length_q=6, max_length_k=6)
    torch.testing.assert_close(got, want)
    for kwargs, match in (({"softcap": 30.0}, "soft-capping"), ({"s_aux": torch.zeros(4)}, "sinks"),
                          ({"is_causal": False}, "non-causal"), ({"dropout": 0.1}, "dropout")):
        with pytest.raises(ValueError, match=match):
            varlen_attention.attention(causal, q, k, v, None, position_ids=pos, **kwargs)
    with pytest.raises(ValueError, match="non-causal"):
        varlen_attention.attention(SimpleNamespace(is_causal=False), q, k, v, None, position_ids=pos)
    with pytest.raises(ValueError, match="4D mask"):
        varlen_attention.attention(causal, q, k, v, torch.ones(1, 1, 10, 10, dtype=torch.bool))
    import verl.utils.ulysses as ulysses

    monkeypatch.setattr(ulysses, "get_ulysses_sequence_parallel_world_size", lambda group=None: 2)
    with pytest.raises(ValueError, match="ulysses"):
        varlen_attention.attention(causal, q, k, v, None, position_ids=pos.clone())


def test_gradient_checkpointing_changes_no_log_prob_nor_gradient(chat_model_dir, tmp_path):
    """The update with and without gradient checkpointing (``verl.gradient_checkpointing``, off for the
    paper's smaller models, as verl enables it: non-reentrant) on a packed micro-batch of unequal lengths
    under the launcher's attention: the same log-probs and the same gradient of every parameter."""
    from verl.utils.torch_functional import logprobs_from_logits

    model = load_like_verls_engine(verl_model_config(launcher_config(chat_model_dir, tmp_path))).train()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, model.config.vocab_size, (1, 23), generator=g)
    pos = torch.cat([torch.arange(9), torch.arange(14)])[None]
    weights = torch.randn(23, generator=g)

    def update(checkpointing: bool):
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_disable()
        model.zero_grad(set_to_none=True)
        logits = model(input_ids=ids, position_ids=pos, use_cache=False).logits[0]
        lp = logprobs_from_logits(logits, torch.roll(ids[0], -1))
        (lp * weights).sum().backward()
        return lp.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    (lp_on, grads_on), (lp_off, grads_off) = update(True), update(False)
    assert model.is_gradient_checkpointing is False
    torch.testing.assert_close(lp_on, lp_off, rtol=0, atol=0)
    assert grads_on.keys() == grads_off.keys()
    for name, grad in grads_on.items():
        torch.testing.assert_close(grad, grads_off[name], rtol=1e-6, atol=1e-8, msg=lambda m: f"{name}: {m}")
