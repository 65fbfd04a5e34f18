"""The error a wrong config raises (the message names the key); `vicurl.checks` raises it."""


class ConfigError(ValueError):
    """The config is wrong (its schema, or a dataset entry: `vicurl.data.sources`); the message names the key."""
