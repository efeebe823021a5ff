from versions import latest, needs_update, sort_versions


def test_sort():
    found = ["1.10.0", "1.9.2", "0.9", "1.2.10", "1.2.9", "1.2"]
    assert sort_versions(found) == ["0.9", "1.2", "1.2.9", "1.2.10", "1.9.2", "1.10.0"]


def test_latest():
    assert latest(["2.0.0", "10.0.0", "9.9.9"]) == "10.0.0"
    assert latest(["3.1.4"]) == "3.1.4"


def test_update_from_1_9_to_1_10():
    assert needs_update("1.9.0", ["1.8.0", "1.10.0"])


def test_no_update_when_current_is_newest():
    assert not needs_update("1.10.0", ["1.9.9", "1.2.0"])
    assert not needs_update("2.0.0", [])
