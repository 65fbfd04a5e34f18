"""A rule job's log (`vicurl.runtime.workflow.setup`): what Snakemake points a user to when a job fails."""

import subprocess
import sys
import textwrap

JOB = textwrap.dedent("""
    import logging.config, types
    from vicurl.runtime.workflow import setup
    snakemake = types.SimpleNamespace(log=[{log!r}], threads=1, rule="generate")
    log = setup(snakemake)
    log.info("before the import")
    # what vLLM's import does: configure its own logger, which closes every handler there is
    logging.config.dictConfig({{"version": 1, "disable_existing_loggers": False,
                                "loggers": {{"vllm": {{"level": "INFO", "propagate": False}}}}}})
    log.info("after the import")
    raise RuntimeError("Engine core initialization failed")
""")


def test_a_failing_jobs_log_holds_its_lines_and_its_traceback(tmp_path):
    """Lines logged after a library reconfigured logging still reach the file, and so does the
    traceback of the exception that ends the job (a vLLM job's log was empty before)."""
    log = tmp_path / "logs" / "job.log"
    out = subprocess.run([sys.executable, "-c", JOB.format(log=str(log))], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    text = log.read_text()
    assert "before the import" in text and "after the import" in text
    assert "the job failed" in text and "RuntimeError: Engine core initialization failed" in text
    assert "Traceback" in text
