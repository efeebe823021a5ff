"""What the terminal tests share: `code`'s environment, its end in a pty, a scripted endpoint.

A plain module: the tests import from it (`from terminal_helpers import ...`). The
`endpoint` fixture serving `ScriptedEndpoint` is in tests/conftest.py.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pexpect
from forkserver import ForkServerSpawn

PROMPT = "› "
SERVER = Path(__file__).parent / "fixtures" / "mcp_test_server.py"
MCP = f"t={shlex.quote(sys.executable)} {shlex.quote(str(SERVER))}"  # --mcp: the test server


def clean_env(tmp_path: Path, **more: str) -> dict[str, str]:
    """This environment without OPENAI_* and VIBE_AGENT_* (no key, mode or model of the
    developer's), the state under `tmp_path`, a dumb terminal; then `more` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "VIBE_AGENT_"))}
    return env | {"XDG_STATE_HOME": str(tmp_path / "state"), "TERM": "dumb"} | more


def spawn_code(*args: str, tmp_path: Path, **env: str) -> pexpect.spawn:
    """`python -m vibe_agent code ARGS` in a 50 x 200 pty, in `clean_env` (COLUMNS=200, `env`)."""
    return ForkServerSpawn(sys.executable, ["-m", "vibe_agent", "code", *args],
                           env=clean_env(tmp_path, COLUMNS="200", **env), cwd=str(tmp_path),
                           encoding="utf-8", timeout=60, dimensions=(50, 200))


def workspace_of(child: pexpect.spawn) -> Path:
    """The task's fresh copy, as the session names it."""
    child.expect(r"新的工作区：(\S+)\r?\n")
    return Path(child.match.group(1))


def step(content: str | None = None, *calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """One reply of a driver's script: its text and its (tool, arguments) calls."""
    return {"content": content, "calls": list(calls)}


def project(tmp_path: Path, **files: str) -> Path:
    """The folder `tmp_path/project`, with these files in it."""
    folder = tmp_path / "project"
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def squeezed(screen: str) -> str:
    """The screen without whitespace: text that wrapped onto the next row still matches."""
    return re.sub(r"\s+", "", screen)


def end(child: pexpect.spawn) -> str:
    """End the session with EOF (it must exit 0); what the screen showed last."""
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    return str(child.before)


def finish(child: pexpect.spawn) -> str:
    """Wait for the prompt, then `end` the session; what the screen showed last."""
    child.expect_exact(PROMPT)
    return end(child)


class ScriptedEndpoint(BaseHTTPRequestHandler):
    """POST /v1/chat/completions: a tool call from the user's JSON line, then an answer."""

    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        last = body["messages"][-1]
        if last["role"] == "tool":
            message = {"role": "assistant",
                       "content": "done: " + json.dumps(last["content"], ensure_ascii=True)}
            finish = "stop"
        else:
            order = json.loads(last["content"])
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{len(body['messages'])}", "type": "function",
                "function": {"name": order["tool"],
                             "arguments": json.dumps(order["arguments"])}}]}
            finish = "tool_calls"
        reply = json.dumps({"id": "chatcmpl-scripted", "object": "chat.completion",
                            "created": 0, "model": "scripted-endpoint", "choices": [
                                {"index": 0, "message": message, "finish_reason": finish}],
                            "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                      "total_tokens": 2}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: object) -> None:  # quiet
        pass
