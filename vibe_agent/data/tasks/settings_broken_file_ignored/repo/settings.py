"""The user's settings file (JSON), with defaults for whatever it leaves out."""

import json
from pathlib import Path

DEFAULTS = {"theme": "light", "language": "zh-CN", "autosave": True}


class SettingsError(Exception):
    """The settings file exists but cannot be used."""


def load_settings(path: Path) -> dict:
    """DEFAULTS updated with the file's values; DEFAULTS alone if there is no file.

    Raises:
        SettingsError: the file is not valid JSON or does not hold a JSON object.
            The message names the file.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise SettingsError(f"{path}: expected a JSON object")
    except Exception:
        return dict(DEFAULTS)
    return {**DEFAULTS, **data}
