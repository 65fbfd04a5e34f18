"""The errors a user fixes in their input: a config key, a dataset file or row. Each message names the file,
row or key; a job that stops on one logs that line alone, without a traceback (`vicurl.runtime.workflow.setup`)."""


class InputError(ValueError):
    """Bad input, not a defect: the message says what to fix and where."""


class ConfigError(InputError):
    """The config is wrong (its schema, or a dataset entry: `vicurl.data.sources`); the message names the key."""
