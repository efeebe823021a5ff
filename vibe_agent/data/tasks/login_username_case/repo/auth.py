"""Logging in against an AccountStore."""

from accounts import AccountStore, hash_password


def login(store: AccountStore, username: str, password: str) -> bool:
    """True when the user exists and the password matches."""
    stored = store.password_hash(username.lower())
    return stored is not None and stored == hash_password(password)
