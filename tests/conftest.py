"""Shared fixtures of every test folder: the tiny models (tests/harness.py builds them), the grading pool,
one thread for torch, a temp folder of the session, the process's environment as each test and module found it, the
real benchmark files."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import real_benchmarks
from harness import BOS_MODEL, CHAR_MODEL, tiny_llama


@pytest.fixture(scope="session")
def bos_model_dir(tmp_path_factory):
    return str(tiny_llama(tmp_path_factory.mktemp("bos_model") / "model", **BOS_MODEL))


@pytest.fixture(scope="module")
def small_pool():
    """A 2-worker symbolic grading pool with the default CPU budget, closed after the module."""
    from vicurl.grading import symbolic

    pool = symbolic.configure(workers=2, cpu_seconds=symbolic.CPU_SECONDS)
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def char_model_dir(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("char_model") / "model", **CHAR_MODEL)


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture(autouse=True, scope="session")
def _temp_folder_of_the_session(tmp_path_factory):
    """The tests' temp folder ($TMPDIR of every process they start): a job's private one
    (`vicurl.runtime.vllm_env.private_temp`), removed at the end with what the libraries leave there when a test starts
    them outside a job's own temp folder (verl's checkpoint locks, the sessions of an in-process ``ray.init``, a
    killed engine's files). pytest's folders (tmp_path) stay where pytest keeps them, for a failed test's files,
    and torch's compile cache where torch keeps it."""
    import tempfile

    from vicurl.runtime import vllm_env

    tmp_path_factory.getbasetemp()
    with vllm_env.private_temp() as temp, pytest.MonkeyPatch.context() as mp:
        for k, v in temp.items():
            mp.setenv(k, v)
        mp.setattr(tempfile, "tempdir", temp["TMPDIR"])
        yield


def _as_found():
    """The process's environment, temp folder and stop handlers restored afterwards: the project's code sets
    them in the process that runs it (`vicurl.runtime.vllm_env.prepare`, the trackers), and no test may leave them to
    the next. What a `prepare` made meanwhile (its private temp folder, its shared-memory watcher) is removed."""
    import os
    import signal
    import tempfile

    from vicurl.runtime import vllm_env

    env, tempdir = dict(os.environ), tempfile.tempdir
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    prepared, cleanups, kin = dict(vllm_env._prepared), len(vllm_env._cleanups), len(vllm_env._kin)
    yield
    try:
        for cleanup in reversed(vllm_env._cleanups[cleanups:]):
            cleanup()
    finally:  # a cleanup that failed leaves the rest restored still
        del vllm_env._cleanups[cleanups:]
        del vllm_env._kin[kin:]
        vllm_env._prepared.clear()
        vllm_env._prepared.update(prepared)
        for sig, handler in handlers.items():
            if signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)
        if dict(os.environ) != env:
            os.environ.clear()
            os.environ.update(env)
        tempfile.tempdir = tempdir


@pytest.fixture(autouse=True, scope="module")
def _environment_of_the_module():
    yield from _as_found()


@pytest.fixture(autouse=True)
def _environment_of_the_test():
    yield from _as_found()


@pytest.fixture(scope="session")
def benchmarks_dir() -> Path:
    d = real_benchmarks.find_benchmarks()
    if d is None:
        pytest.skip("real benchmark files not found: set VICURL_BENCHMARKS to the shared/data/benchmarks folder")
    assert d.is_dir(), f"VICURL_BENCHMARKS={d} is not a folder"
    return d
