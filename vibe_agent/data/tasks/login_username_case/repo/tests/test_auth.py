import pytest

from accounts import AccountStore
from auth import login


@pytest.fixture
def store():
    accounts = AccountStore()
    accounts.register("Alice", "s3cret")
    accounts.register(" Bob ", "hunter2")
    return accounts


@pytest.mark.parametrize("typed", ["Alice", "alice", "ALICE", " alice ", "Alice\n"])
def test_login_ignores_case_and_spaces(store, typed):
    assert login(store, typed, "s3cret")


@pytest.mark.parametrize("typed", ["bob", "BOB", "  Bob"])
def test_second_user(store, typed):
    assert login(store, typed, "hunter2")


def test_wrong_password(store):
    assert not login(store, "alice", "S3CRET")


def test_unknown_user(store):
    assert not login(store, "mallory", "s3cret")
