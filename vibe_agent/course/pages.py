"""The course's own web pages, served without the network: stand-ins written for the course.

Demo task 3 fetches https://example.com/ and lesson 07 a longer article; both are files in
`vibe_agent/data/`, written for the course, not downloaded. `BundledPages` serves them at
the HTTP transport (like replay does for recorded pages), so a client uses them in every
mode (`make_client(..., pages="bundled")`) and says so in its provenance.
"""

from __future__ import annotations

from importlib import resources

import httpx2

EXAMPLE_URL = "https://example.com/"
ARTICLE_URL = "https://example.com/vibe-agent/article.html"


BUNDLED_PAGES: dict[str, str] = {
    EXAMPLE_URL: "example.html",  # a stand-in for example.com (demo task 3)
    ARTICLE_URL: "article.html",  # a longer page about the agent loop (lesson 07)
}

BUNDLED_PAGES_NOTE = (
    "pages served from "
    + " and ".join(f"vibe_agent/data/{file} as {url}" for url, file in BUNDLED_PAGES.items())
    + ", stand-ins written for the course (recorded offline)"
)
OTHER_PAGES_NOTE = "; any other address from the network"


class BundledPages(httpx2.BaseTransport):
    """Serves the course's stand-in pages (`BUNDLED_PAGES`); anything else goes to `other`.

    The pages were written for the course, not downloaded from the real sites; a client
    that uses them says so in its provenance (`make_client(pages=...)` copies
    `provenance_note` there), and so do cassettes recorded with them.

    Args:
        other: the transport for every other address (e.g. the network); None answers
            them with a 404, so nothing leaves the machine (offline recording).
    """

    def __init__(self, other: httpx2.BaseTransport | None = None) -> None:
        self.other = other
        self.provenance_note = BUNDLED_PAGES_NOTE + (OTHER_PAGES_NOTE if other else "")

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        file = BUNDLED_PAGES.get(str(request.url))
        if file is None:
            if self.other is not None:
                return self.other.handle_request(request)
            return httpx2.Response(404, text="not bundled")
        page = resources.files("vibe_agent").joinpath("data", file).read_bytes()
        return httpx2.Response(200, headers={"content-type": "text/html; charset=utf-8"},
                               content=page)

    def close(self) -> None:
        if self.other is not None:
            self.other.close()
