"""Provider settings: .env by python-dotenv's rules, live timeouts and retries, secrets never
written or printed, and a command line that ends with one line and a documented exit code.
Every server here listens on 127.0.0.1 only."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import openai
import pytest
from forkserver import forked_run

from vibe_agent.course.cassette import RecordingFailed
from vibe_agent.course.client import (
    CONNECT_TIMEOUT,
    LIVE_RETRIES,
    LIVE_TIMEOUT,
    ConfigError,
    make_client,
    settings,
)
from vibe_agent.course.redact import REDACTED, Redactor, without_credentials
from vibe_agent.loop import StopReason, run_agent
from vibe_agent.tools import demo_registry

KEY = "sk-proj-Abc123Def456Ghi789Jkl0WXYZ"


# --- .env (item 15) ---------------------------------------------------------------------------

@pytest.mark.parametrize(("content", "expected"), [
    (b"VIBE_AGENT_MODEL=m1 # my model\n", "m1"),
    (b"\xef\xbb\xbfVIBE_AGENT_MODEL=m1\n", "m1"),
    (b"VIBE_AGENT_MODEL='m1'\n", "m1"),
    (b'VIBE_AGENT_MODEL="m1 # not a comment"\n', "m1 # not a comment"),
    (b"export VIBE_AGENT_MODEL=m1\n", "m1"),
    (b"# a comment\n\nOTHER=1\nVIBE_AGENT_MODEL = m1\n", "m1"),
    (b"VIBE_AGENT_MODEL=m1\r\nOTHER=2\r\n", "m1"),
], ids=["inline-comment", "utf-8-bom", "single-quotes", "hash-inside-quotes", "export",
        "comments-and-spaces", "crlf"])
def test_dotenv_follows_python_dotenv(tapes, content, expected):
    (tapes / ".env").write_bytes(content)
    assert settings()["VIBE_AGENT_MODEL"] == expected


def test_a_key_without_value_is_ignored(tapes):
    (tapes / ".env").write_bytes(b"OPENAI_API_KEY\nVIBE_AGENT_MODEL=m\n")
    assert "OPENAI_API_KEY" not in settings() and make_client().mode == "offline"


def test_a_non_utf8_dotenv_is_a_clear_error(tapes):
    (tapes / ".env").write_bytes(b"VIBE_AGENT_MODEL=m\nOPENAI_API_KEY=caf\xe9\n")
    with pytest.raises(ConfigError, match=r"不是 UTF-8 编码的文本（第 2 行有字节 0xe9）"):
        settings()


def test_the_environment_wins_over_dotenv(tapes, monkeypatch):
    (tapes / ".env").write_text("VIBE_AGENT_MODEL=from-file\n", encoding="utf-8")
    monkeypatch.setenv("VIBE_AGENT_MODEL", "from-env")
    assert settings()["VIBE_AGENT_MODEL"] == "from-env"


# --- live timeouts and retries (item 13) ------------------------------------------------------

def live(monkeypatch, base_url: str = "http://127.0.0.1:9/v1", **env: str):
    monkeypatch.setenv("OPENAI_API_KEY", "k-test-key-000")
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    monkeypatch.setenv("VIBE_AGENT_MODEL", "m")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return make_client("live")


def test_live_defaults_are_explicit(tapes, monkeypatch):
    client = live(monkeypatch)
    assert (client.timeout.connect, client.timeout.read) == (CONNECT_TIMEOUT, LIVE_TIMEOUT)
    assert client.max_retries == LIVE_RETRIES == 1
    assert "连接 10 s，响应 60 s；失败后重试 1 次" in client.describe()


def test_live_limits_are_configurable(tapes, monkeypatch):
    client = live(monkeypatch, VIBE_AGENT_TIMEOUT="7.5", VIBE_AGENT_CONNECT_TIMEOUT="2",
                  VIBE_AGENT_MAX_RETRIES="0")
    assert (client.timeout.connect, client.timeout.read, client.max_retries) == (2, 7.5, 0)


@pytest.mark.parametrize(("name", "value"), [
    ("VIBE_AGENT_TIMEOUT", "0"), ("VIBE_AGENT_TIMEOUT", "-1"), ("VIBE_AGENT_TIMEOUT", "soon"),
    ("VIBE_AGENT_CONNECT_TIMEOUT", "0"), ("VIBE_AGENT_MAX_RETRIES", "-1"),
    ("VIBE_AGENT_MAX_RETRIES", "1.5"), ("VIBE_AGENT_MAX_RETRIES", "many"),
])
def test_bad_limits_are_config_errors(tapes, monkeypatch, name, value):
    with pytest.raises(ConfigError, match=f"{name}='{value}' 不对"):
        live(monkeypatch, **{name: value})


@pytest.fixture
def silent_endpoint():
    """A socket on 127.0.0.1 that accepts connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    stop.set()
    acceptor.join()
    for connection in held:
        connection.close()
    listener.close()


def test_a_silent_endpoint_gives_up_after_timeout_times_attempts(tapes, monkeypatch,
                                                                 silent_endpoint):
    client = live(monkeypatch, silent_endpoint, VIBE_AGENT_TIMEOUT="0.5",
                  VIBE_AGENT_MAX_RETRIES="1")
    start = time.monotonic()
    result = run_agent(client, "hi", demo_registry(), model=client.model)
    elapsed = time.monotonic() - start
    print(f"silent endpoint, timeout 0.5 s x 2 attempts: gave up after {elapsed:.2f} s")
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert 1.0 <= elapsed < 4.0  # two 0.5 s attempts and one short backoff


# --- secrets (item 14) ------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    (f"key {KEY}.", f"key {REDACTED}."),
    ("Incorrect API key provided: sk-proj-********************WXYZ.",
     f"Incorrect API key provided: {REDACTED}."),
    ("key sk-pr...WXYZ is invalid", f"key {REDACTED} is invalid"),
    ("key sk-proj-Ab…WXYZ is invalid", f"key {REDACTED} is invalid"),
    ("Your api key: ****WXYZ is invalid", f"Your api key: {REDACTED} is invalid"),
    ("see http://alice:s3cret-pass@proxy.local:8080/v1", f"see http://{REDACTED}@proxy.local:8080/v1"),
    ("token https://ghp_token@host/x", f"token https://{REDACTED}@host/x"),
    ("plain https://example.com/a@b", "plain https://example.com/a@b"),
    ("another key sk-other-0000000000001234", "another key sk-other-0000000000001234"),
], ids=["exact", "openai-stars", "dots", "ellipsis", "stars-only", "url-password",
        "url-token", "at-in-path", "other-key"])
def test_redactor(text, expected):
    assert Redactor([KEY])(text) == expected


@pytest.mark.parametrize("short", ["", "k", "ollama"])
def test_placeholder_keys_are_not_hunted_everywhere(short):
    assert Redactor([short])("ollama runs locally with key k") == "ollama runs locally with key k"


def test_url_credentials_become_basic_auth():
    url, auth = without_credentials("http://alice:pw@127.0.0.1:8080/v1")
    assert url == "http://127.0.0.1:8080/v1" and auth is not None
    assert without_credentials("http://127.0.0.1/v1") == ("http://127.0.0.1/v1", None)


def echoing_provider(handler, *, body_read: bool = False):
    """A provider whose 401 echoes the key in full and masked, as some do."""
    if not body_read:
        handler.rfile.read(int(handler.headers.get("content-length", 0)))
    seen = handler.headers.get("authorization", "")
    key = seen.removeprefix("Bearer ")
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {key[:8]}****"
                                            f"{key[-4:]} (you sent {seen})",
                                 "type": "invalid_request_error"}}).encode()
    handler.send_response(401)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def test_an_echoed_key_never_reaches_the_error_or_the_result(tapes, monkeypatch, serve):
    base = serve({"/v1/chat/completions": echoing_provider})
    configured = live(monkeypatch, f"{base}/v1", OPENAI_API_KEY=KEY)
    passed_in = live(monkeypatch, f"{base}/v1").with_options(api_key=KEY)  # a key given in code
    for client in (configured, passed_in):
        assert_no_key_in_errors(client)


def assert_no_key_in_errors(client):
    with pytest.raises(openai.AuthenticationError) as error:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    shown = str(error.value) + json.dumps(error.value.body)
    assert "WXYZ" not in shown and REDACTED in shown
    result = run_agent(client, "hi", demo_registry(), model="m")
    assert "WXYZ" not in result.message and result.stop_reason is StopReason.PROVIDER_ERROR


def test_recorded_errors_hold_no_key(tapes, monkeypatch, serve):
    base = serve({"/v1/chat/completions": echoing_provider})
    for name, value in {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": f"{base}/v1",
                        "VIBE_AGENT_MODEL": "m"}.items():
        monkeypatch.setenv(name, value)
    client = make_client("record", "secret", source="live")
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": KEY}])
    text = (tapes / "secret.json.partial").read_text(encoding="utf-8")
    assert "WXYZ" not in text and REDACTED in text
    with pytest.raises(RecordingFailed) as failed:  # nor in what a failed recording says
        client.cassette.finish()
    assert "WXYZ" not in str(failed.value) and "HTTP 401" in str(failed.value)


def test_url_credentials_are_sent_as_basic_auth_but_never_shown(tapes, monkeypatch, serve):
    seen = {}

    def provider(handler):
        seen["authorization"] = handler.headers["authorization"]
        seen["path"] = handler.path
        echoing_provider(handler)

    base = serve({"/v1/chat/completions": provider})
    url = base.replace("http://", "http://alice:s3cret-pass@") + "/v1"
    client = live(monkeypatch, url)
    result = run_agent(client, "hi", demo_registry(), model=client.model)
    assert seen["authorization"].startswith("Basic ")  # what httpx did with URL credentials
    assert "s3cret" not in str(client.base_url) + result.message + client.describe()


# --- the command line (item 15) -----------------------------------------------------------------

def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "VIBE_AGENT_"))}
    return forked_run([sys.executable, "-m", "vibe_agent", *args], capture_output=True,
                      text=True, timeout=timeout, env=clean | (env or {}), cwd=cwd)


@pytest.mark.parametrize("value", ["0", "-3", "many"])
@pytest.mark.parametrize("command", [["ask", "hi"], ["demo"]], ids=["ask", "demo"])
def test_max_iters_below_one_is_a_clear_error(tmp_path, command, value):
    done = run_cli(*command, "--max-iters", value, cwd=tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "参数 --max-iters：应该是至少为 1 的整数" in done.stderr


def test_info_without_arguments_works(tmp_path):
    done = run_cli("info", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "运行模式：offline" in done.stdout and "OPENAI_API_KEY：没有配置" in done.stdout


def test_info_never_prints_the_key_or_url_credentials(tmp_path):
    done = run_cli("info", cwd=tmp_path, env={
        "OPENAI_API_KEY": KEY, "VIBE_AGENT_MODEL": "m",
        "OPENAI_BASE_URL": "http://alice:s3cret-pass@127.0.0.1:9/v1"})
    assert done.returncode == 0, done.stderr
    assert "s3cret" not in done.stdout and KEY not in done.stdout and "WXYZ" not in done.stdout
    assert f"http://{REDACTED}@127.0.0.1:9/v1" in done.stdout


def test_a_provider_echoing_the_key_is_redacted_in_cli_output(tmp_path, serve):
    base = serve({"/v1/chat/completions": echoing_provider})
    done = run_cli("ask", "hi", cwd=tmp_path, env={
        "OPENAI_API_KEY": KEY, "VIBE_AGENT_MODEL": "m", "OPENAI_BASE_URL": f"{base}/v1"})
    assert done.returncode == 1
    assert "WXYZ" not in done.stdout + done.stderr and REDACTED in done.stdout


@pytest.mark.parametrize(("content", "words"), [
    (b"OPENAI_API_KEY=caf\xe9\n", "不是 UTF-8 编码的文本"),
    (b"VIBE_AGENT_MODE=warp\n", "未知的运行模式 'warp'"),
    (b"VIBE_AGENT_TIMEOUT=soon\nVIBE_AGENT_MODE=live\nOPENAI_API_KEY=k\nVIBE_AGENT_MODEL=m\n",
     "VIBE_AGENT_TIMEOUT='soon' 不对"),
], ids=["non-utf8", "unknown-mode", "bad-timeout"])
def test_a_bad_dotenv_exits_2_with_one_line(tmp_path, content, words):
    (tmp_path / ".env").write_bytes(content)
    done = run_cli("ask", "hi", cwd=tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and words in done.stderr


def test_dotenv_comment_does_not_end_up_in_the_model_name(tmp_path, serve):
    seen = {}

    def provider(handler):
        seen.update(json.loads(handler.rfile.read(int(handler.headers["content-length"]))))
        echoing_provider(handler, body_read=True)

    base = serve({"/v1/chat/completions": provider})
    (tmp_path / ".env").write_bytes(
        f"\ufeffOPENAI_API_KEY=k-test-key-000\nOPENAI_BASE_URL={base}/v1  # local\n"
        "VIBE_AGENT_MODEL=my-model # the cheap one\n".encode())
    done = run_cli("ask", "hi", cwd=tmp_path)
    assert "模型：my-model（" in done.stdout and seen["model"] == "my-model"


def test_ctrl_c_exits_130_with_one_line(tmp_path, silent_endpoint):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "VIBE_AGENT_"))}
    process = subprocess.Popen(
        [sys.executable, "-m", "vibe_agent", "ask", "hi"], cwd=tmp_path, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=clean | {"OPENAI_API_KEY": "k-test-key-000", "VIBE_AGENT_MODEL": "m",
                     "OPENAI_BASE_URL": silent_endpoint, "PYTHONUNBUFFERED": "1"})
    assert process.stdout.readline().startswith("运行模式：live")  # now waiting for the model
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert err.strip() == "已中断（Ctrl-C）。"
