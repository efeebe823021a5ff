"""User accounts kept in memory.

Usernames are case-insensitive and spaces around them do not count:
"Alice", " alice" and "ALICE " name the same user, listed as "alice".
"""

import hashlib


def hash_password(password: str) -> str:
    """A hex digest of the password (a real system would use a slow, salted hash)."""
    return hashlib.sha256(password.encode("utf-8")).hexdigest()


class AccountStore:
    """Registered users and their password hashes."""

    def __init__(self) -> None:
        self._hashes: dict[str, str] = {}

    def register(self, username: str, password: str) -> None:
        """Add a user; a name that is already taken raises ValueError."""
        key = username.strip()
        if key in self._hashes:
            raise ValueError(f"用户名已被占用：{key}")
        self._hashes[key] = hash_password(password)

    def usernames(self) -> list[str]:
        """All usernames, sorted."""
        return sorted(self._hashes)

    def password_hash(self, key: str) -> str | None:
        """The stored hash for a username as it is listed, or None."""
        return self._hashes.get(key)
