"""Keeping secrets out of everything the course writes or prints.

A provider's error body may echo the API key, in full or masked the way OpenAI does
it ("sk-proj-****…wxyz": a prefix, a run of `*` or an ellipsis, the last four
characters). A base URL may carry credentials (`http://user:password@host/v1`).
`Redactor` replaces all of these with `REDACTED` in any text: cassettes are redacted
before they are written, a CourseClient redacts the SDK's status errors (so neither
an exception message nor `AgentResult.message` can carry the key), and the command
line redacts what it prints.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import httpx2

REDACTED = "[已隐藏]"
MIN_SECRET = 8  # shorter values ("k", "ollama") are placeholders, and too common to hide
MIN_MASKED = 12  # a masked form is only recognisable on a key this long

# scheme://user:password@ or scheme://token@ : everything between "//" and "@"
_URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@\"'<>]+@")
_MASK = r"(?:\*+|…|\.{3})"  # how providers hide the middle of a key


class Redactor:
    """Replaces the given secrets, their masked forms and URL credentials in text.

    Args:
        secrets: the values to hide (API keys, passwords); short or empty ones are ignored.
    """

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        kept = sorted({s for s in secrets if s and len(s) >= MIN_SECRET}, key=len, reverse=True)
        self.secrets = tuple(kept)
        patterns = [re.escape(s) for s in kept]
        for key in kept:
            if len(key) >= MIN_MASKED:
                last4 = re.escape(key[-4:])
                # "sk-proj-****wxyz", "sk-ab...wxyz", "****wxyz"
                patterns.append(rf"{re.escape(key[:3])}[\w\-]*?{_MASK}[\w\-*…]*?{last4}")
                patterns.append(rf"{_MASK}[\w\-*…]*?{last4}")
        self._secrets = re.compile("|".join(patterns)) if patterns else None

    def adding(self, *secrets: str | None) -> Redactor:
        """A redactor that also hides `secrets` (e.g. a key passed in code)."""
        return Redactor([*self.secrets, *secrets])

    def __call__(self, text: str) -> str:
        text = _URL_CREDENTIALS.sub(rf"\g<scheme>{REDACTED}@", text)
        if self._secrets is not None:
            text = self._secrets.sub(REDACTED, text)
        return text


def without_credentials(url: str) -> tuple[str, httpx2.BasicAuth | None]:
    """Split `http://user:pw@host/v1` into `http://host/v1` and the Basic auth it meant.

    httpx turns credentials in a URL into Basic auth; passing them as `auth=` keeps that
    behaviour while every URL the SDK shows (error messages, `client.base_url`) stays clean.
    """
    parsed = httpx2.URL(url)
    if not parsed.userinfo:
        return url, None
    auth = httpx2.BasicAuth(parsed.username, parsed.password)
    return str(parsed.copy_with(username=None, password=None)), auth
