import pytest

from settings import DEFAULTS, SettingsError, load_settings


def test_no_file_means_defaults(tmp_path):
    assert load_settings(tmp_path / "settings.json") == DEFAULTS


def test_file_values_win(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text('{"theme": "dark", "fontSize": 14}', encoding="utf-8")
    assert load_settings(path) == {
        "theme": "dark",
        "language": "zh-CN",
        "autosave": True,
        "fontSize": 14,
    }


@pytest.mark.parametrize(
    "content",
    [
        '{"theme": "dark",}',
        '{"theme": "dark" "language": "en"}',
        "",
        '["theme", "dark"]',
        '"dark"',
    ],
    ids=["trailing-comma", "missing-comma", "empty-file", "a-list", "a-string"],
)
def test_a_broken_file_is_reported(tmp_path, content):
    path = tmp_path / "my-settings.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SettingsError, match="my-settings.json"):
        load_settings(path)


def test_defaults_are_not_changed(tmp_path):
    settings = load_settings(tmp_path / "missing.json")
    settings["theme"] = "dark"
    assert DEFAULTS["theme"] == "light"
