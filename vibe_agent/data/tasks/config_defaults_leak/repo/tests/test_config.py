from cli import config_from_args
from config import DEFAULTS, make_config


def test_override_a_nested_value():
    config = make_config(server__port=9000)
    assert config["server"] == {"host": "127.0.0.1", "port": 9000}


def test_an_override_does_not_leak_into_the_next_config():
    make_config(server__port=9000, log__level="DEBUG")
    assert make_config() == {
        "server": {"host": "127.0.0.1", "port": 8000},
        "log": {"level": "INFO", "file": None},
        "debug": False,
    }


def test_defaults_never_change():
    config_from_args(["--host", "0.0.0.0", "--log-level", "WARNING", "--debug"])
    assert DEFAULTS["server"]["host"] == "127.0.0.1"
    assert DEFAULTS["log"]["level"] == "INFO"
    assert DEFAULTS["debug"] is False


def test_two_runs_one_after_the_other():
    first = config_from_args(["--port", "9000"])
    second = config_from_args([])
    assert first["server"]["port"] == 9000
    assert second["server"]["port"] == 8000
