"""Command-line options of the server, turned into a configuration."""

from config import make_config

OPTIONS = {
    "--host": ("server__host", str),
    "--port": ("server__port", int),
    "--log-level": ("log__level", str),
}


def config_from_args(args: list[str]) -> dict:
    """A configuration from e.g. ["--port", "9000", "--debug"]."""
    overrides: dict[str, object] = {}
    remaining = list(args)
    while remaining:
        option = remaining.pop(0)
        if option == "--debug":
            overrides["debug"] = True
        elif option in OPTIONS and remaining:
            key, convert = OPTIONS[option]
            overrides[key] = convert(remaining.pop(0))
        else:
            raise SystemExit(f"unknown option or missing value: {option}")
    return make_config(**overrides)
