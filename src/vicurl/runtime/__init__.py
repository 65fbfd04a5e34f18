"""What every job does around its work.

``io``          crash-safe writes (outputs whole or not at all) and a lock a study's processes share
``errors``      the errors a user fixes in their input, each naming the file, row or key
``workflow``    the glue of the rule scripts (workflow_scripts/): logging, threads, a failure in one line
``devices``     where model work runs, resolved once per job
``processes``   ending a job's processes so that nothing is left on the node
``supervise``   the train job's guard over verl's loop: a run that cannot finish ends in bounded time
``vllm_env``    what a process that starts vLLM sets first
``tracking``    a run's learning curves while it trains (TensorBoard, W&B)
``provenance``  what produced a run, written beside its outputs
``trace_summary``  where a torch profiler trace's time goes (``python -m vicurl.runtime.trace_summary``)
"""
