"""Server settings: the defaults plus the overrides of one run."""

from copy import copy

DEFAULTS = {
    "server": {"host": "127.0.0.1", "port": 8000},
    "log": {"level": "INFO", "file": None},
    "debug": False,
}


def make_config(**overrides: object) -> dict:
    """The defaults with `overrides` applied; DEFAULTS itself never changes.

    A double underscore reaches into a section: `server__port=9000` sets
    config["server"]["port"]; `debug=True` sets config["debug"].
    """
    config = copy(DEFAULTS)
    for key, value in overrides.items():
        section, _, name = key.partition("__")
        if name:
            config[section][name] = value
        else:
            config[section] = value
    return config
