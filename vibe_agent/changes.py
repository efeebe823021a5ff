"""What did the agent change? A snapshot of a folder's text, and the diff between two.

`snapshot(root)` before a run and `workspace_diff(before, root)` after it show what the
agent changed, as a unified diff like `git diff` (both capped). The snapshot walks
the folder like the coding tools do (`vibe_agent.workspace`): no link is followed,
ignored folders are skipped, and nothing deeper than MAX_DEPTH is read.
"""

from __future__ import annotations

import difflib
import hashlib
import stat
from pathlib import Path

from .workspace import WorkspaceFolder, text_or_none

MAX_SNAPSHOT_BYTES = 20_000_000  # text a snapshot keeps; later files by size and hash
MAX_DIFF_CHARS = 500_000  # workspace_diff stops after this much and names the rest


def snapshot(root: str | Path) -> dict[str, str]:
    """The text of every file in a folder, by relative path.

    Binary and very large files are skipped, and so are links: the files they point
    to are in the snapshot themselves. After MAX_SNAPSHOT_BYTES of text, a file is
    kept as one line with its size and SHA-256, so a change still shows in the diff.
    Folders deeper than MAX_DEPTH are not read.

    Args:
        root: the folder, e.g. the workspace before the agent runs.
    """
    workspace = WorkspaceFolder(root, "allow-all")
    texts: dict[str, str] = {}
    kept = 0
    with workspace._locate(".") as top:
        for shown, info, folder, name, _ in workspace._entries(top):
            text = text_or_none(folder, name) if stat.S_ISREG(info.st_mode) else None
            if text is None:
                continue
            if kept + len(text) > MAX_SNAPSHOT_BYTES:  # keep memory bounded
                digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
                text = (f"[{len(text)} characters, sha256 {digest}: not kept, the snapshot "
                        "is full]\n")
            texts[shown] = text
            kept += len(text)
    return texts


def workspace_diff(before: Path | dict[str, str], root: str | Path) -> str:
    """What changed in `root` since `before`, as a unified diff with a/ and b/ prefixes.

    It stops after MAX_DIFF_CHARS characters and names the files it left out.

    Args:
        before: a `snapshot()` taken earlier, or a folder holding the earlier state.
        root: the folder now.
    """
    old = before if isinstance(before, dict) else snapshot(before)
    new = snapshot(root)
    parts: list[str] = []
    size = 0
    changed = [name for name in sorted(old.keys() | new.keys()) if old.get(name) != new.get(name)]
    for i, name in enumerate(changed):
        headers = [f"--- a/{name}\n" if name in old else "--- /dev/null\n",
                   f"+++ b/{name}\n" if name in new else "+++ /dev/null\n"]
        hunks = list(difflib.unified_diff(_diff_lines(old.get(name, "")),
                                          _diff_lines(new.get(name, ""))))
        piece = "".join(headers + hunks[2:])  # difflib's own two header lines are replaced
        if size + len(piece) > MAX_DIFF_CHARS:  # keep whole lines up to the cap, then stop
            parts.append(piece[: MAX_DIFF_CHARS - size].rpartition("\n")[0] + "\n")
            rest = changed[i + 1:]
            names = ", ".join(rest[:100]) + " …" * (len(rest) > 100)
            parts.append(f"[diff stopped at {MAX_DIFF_CHARS} characters, inside {name}; "
                         f"{len(rest)} more changed files: {names or '(none)'}]\n")
            break
        parts.append(piece)
        size += len(piece)
    return "".join(parts)


def _diff_lines(text: str) -> list[str]:
    """Lines with their endings; a missing final newline is marked as git marks it."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines

