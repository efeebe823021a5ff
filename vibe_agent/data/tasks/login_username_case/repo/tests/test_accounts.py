import pytest

from accounts import AccountStore


def test_names_are_listed_lower_case_without_spaces():
    store = AccountStore()
    store.register(" Alice", "pw1")
    store.register("bob ", "pw2")
    store.register("Carol", "pw3")
    assert store.usernames() == ["alice", "bob", "carol"]


@pytest.mark.parametrize("second", ["alice", "ALICE", "  Alice  "])
def test_the_same_name_cannot_register_twice(second):
    store = AccountStore()
    store.register("Alice", "pw1")
    with pytest.raises(ValueError):
        store.register(second, "pw2")
