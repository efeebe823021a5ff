"""The command line, run as a learner would: a subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from forkserver import forked_run

from vibe_agent.course import cli, make_notebooks
from vibe_agent.course.reference import reference_model


def run_cli(*args: str, env: dict[str, str] | None = None, cwd=None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("OPENAI_", "VIBE_AGENT_"))}
    return forked_run([sys.executable, "-m", "vibe_agent", *args], capture_output=True,
                      text=True, timeout=120, env=clean | (env or {}), cwd=cwd)


@pytest.fixture(scope="module")
def fake_provider(serve_model):
    """An OpenAI-compatible HTTP server on 127.0.0.1 that plays the reference model."""
    model = reference_model()
    return serve_model(model, key="test-key"), model


def test_demo_offline_runs_four_tasks(tmp_path):
    done = run_cli("demo", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "运行模式：offline" in out and "不是 LLM" in out  # the README's default without a key
    for n in (1, 2, 3, 4):
        assert f"任务 {n}：" in out
    assert "17 × 23 = 391" in out
    assert out.count("✓") == 4
    assert "calculator" in out and "page_length" in out  # the trace is printed


def test_ask_answers_and_exits_zero(tmp_path):
    done = run_cli("ask", "17 × 23 等于多少？", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.strip().endswith("17 × 23 = 391。")


def test_a_brake_exits_non_zero_with_a_reason(tmp_path):
    done = run_cli("ask", "请抓取 https://example.com/ 这个网页，计算它的字符长度，再除以 7。",
                   "--max-iters", "1", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout.strip().splitlines()[-1].startswith("停止（max_iters）")


def test_live_mode_uses_the_environment(tmp_path, fake_provider):
    base_url, model = fake_provider
    before = len(model.requests)
    done = run_cli("ask", "2099 年世界杯冠军是谁？", cwd=tmp_path, env={
        "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "test-key",
        "VIBE_AGENT_MODEL": "my-model"})
    assert done.returncode == 0, done.stderr
    assert "运行模式：live" in done.stdout and "模型：my-model" in done.stdout
    assert model.requests[before]["model"] == "my-model"


def test_provider_failure_is_one_line_not_a_traceback(tmp_path):
    done = run_cli("ask", "hi", cwd=tmp_path, env={
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "k",
        "VIBE_AGENT_MODEL": "m"})
    assert done.returncode == 1
    assert "Traceback" not in done.stdout + done.stderr
    assert "停止（provider_error）：连不上模型服务" in done.stdout


def test_configuration_problem_exits_two(tmp_path):
    done = run_cli("ask", "hi", "--mode", "live", cwd=tmp_path)
    assert done.returncode == 2
    assert "配置问题：在线模式需要 OPENAI_API_KEY" in done.stderr


def test_record_writes_a_cassette_that_replays(tmp_path):
    env = {"VIBE_AGENT_CASSETTES": str(tmp_path)}
    done = run_cli("record", "demo_reference", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "demo_reference.json").exists()
    replay = run_cli("demo", "--mode", "replay", "--cassette", "demo_reference",
                     cwd=tmp_path, env=env)
    assert replay.returncode == 0, replay.stderr
    assert replay.stdout.count("✓") == 4


def test_record_rejects_unknown_scenarios(tmp_path):
    done = run_cli("record", "nope", cwd=tmp_path)
    assert done.returncode == 2 and "可用：demo_reference" in done.stderr


def test_record_lesson_replaces_only_good_recordings(tapes, monkeypatch, capsys):
    """`record LESSON`: the notebook's kernel writes NAME.json.partial files; the command
    replaces each cassette whose recording is good and keeps the one whose calls failed."""
    from vibe_agent.course import cli, make_notebooks
    from vibe_agent.course.cassette import Cassette

    good = Cassette("l_good", {"source": "scripted-reference"}, [{
        "kind": "chat", "request": {"model": "m"},
        "response": {"status": 200, "body": {"id": "x"}}}])
    refused = Cassette("l_bad", {"source": "live-provider"}, [{
        "kind": "chat", "request": {"model": "m"},
        "response": {"status": 401, "body": {"error": {"message": "bad key"}}}}])
    (tapes / "l_bad.json").write_text("the committed cassette", encoding="utf-8")

    def kernel(path, env=None, allow_errors=False):  # what record mode leaves behind
        assert env["VIBE_AGENT_MODE"] == "record"
        good.save(tapes / "l_good.json.partial")
        refused.save(tapes / "l_bad.json.partial")

    monkeypatch.setattr(make_notebooks, "execute_notebook", kernel)
    monkeypatch.setattr(make_notebooks, "refresh", lambda names: [])
    monkeypatch.setattr(make_notebooks, "build", lambda *a: [])
    assert cli.main(["record", "00_setup"]) == cli.EXIT_CASSETTE
    err = capsys.readouterr().err
    assert "l_bad.json 失败" in err and "HTTP 401" in err
    assert Cassette.load(tapes / "l_good.json").interactions == good.interactions
    assert (tapes / "l_bad.json").read_text(encoding="utf-8") == "the committed cassette"
    assert not (tapes / "l_good.json.partial").exists() and (tapes / "l_bad.json.partial").exists()


# --- one language per reader ------------------------------------------------------------

# argparse's own English, and provenance English, that must not reach a Chinese reader.
ENGLISH = re.compile(r"usage|options|error|invalid|required|arguments|choose from|help message"
                     r"|expected|unrecognized|ambiguous|scripted transport|pages served")


@pytest.mark.parametrize(("argv", "says"), [
    pytest.param([], "缺少必需的参数：命令", id="no-command"),
    pytest.param(["dmeo"], "没有 'dmeo' 这个选项", id="invalid-command"),
    pytest.param(["demo", "--mode", "foo"], "参数 --mode：没有 'foo' 这个选项",
                 id="invalid-choice"),
    pytest.param(["demo", "--max-iters", "x"], "参数 --max-iters：应该是至少为 1 的整数",
                 id="invalid-number"),
    pytest.param(["demo", "--max-iters"], "参数 --max-iters：后面要跟一个值", id="missing-value"),
    pytest.param(["ask"], "缺少必需的参数：问题", id="missing-question"),
    pytest.param(["info", "--bogus"], "不认识的参数：--bogus", id="unrecognized"),
    pytest.param(["demo", "--mo", "x", "--max", "2"], "没有 'x' 这个选项", id="abbreviation"),
])
def test_command_line_mistakes_are_explained_in_chinese(capsys, argv, says):
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    err = capsys.readouterr().err
    assert stopped.value.code == cli.EXIT_CONFIG
    assert says in err and "看用法：python -m vibe_agent" in err
    assert not ENGLISH.search(err), err


@pytest.mark.parametrize("argv", [
    pytest.param(["--help"], id="main"),
    *[pytest.param([name, "--help"], id=name) for name in ("demo", "ask", "record", "info")],
])
def test_help_is_chinese_and_every_argument_has_help(capsys, argv):
    with pytest.raises(SystemExit):
        cli.main(argv)
    out = capsys.readouterr().out
    assert out.startswith("用法：") and "显示这段帮助" in out
    assert not ENGLISH.search(out), out
    assert "cassette" not in out.replace("--cassette", "")  # the glossary's word is 录制文件


def test_every_argument_has_help():
    parser = cli.build_parser()
    [commands] = [a for a in parser._actions if a.dest == "command"]
    for name, sub in commands.choices.items():
        missing = [a.dest for a in sub._actions if not a.help]
        assert not missing, f"{name}: {missing}"


def test_make_notebooks_help_is_chinese(capsys):
    with pytest.raises(SystemExit):
        make_notebooks.main(["--help"])
    out = capsys.readouterr().out
    assert out.startswith("用法：") and "学员版笔记本" in out and not ENGLISH.search(out), out


def test_other_parsers_keep_their_language():
    """The catalog is installed only while a course parser works."""
    import argparse

    plain = argparse.ArgumentParser(prog="p")
    cli.build_parser().format_help()
    assert plain.format_usage().startswith("usage: ")


@pytest.mark.parametrize(("mode", "words"), [
    pytest.param("reference", ["接口：程序里的脚本参考模型", "网页：课程自带的替身页面"],
                 id="reference"),
    pytest.param("offline", ["运行模式：offline", "回退："], id="offline"),
])
def test_info_speaks_chinese(tmp_path, mode, words):
    done = run_cli("info", "--mode", mode, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert all(word in done.stdout for word in words)
    assert not ENGLISH.search(done.stdout), done.stdout


def test_info_default_mode_is_the_readmes(tmp_path):
    """README: offline is the default without a key."""
    done = run_cli("info", cwd=tmp_path)
    assert done.stdout.splitlines()[0] == "运行模式：offline"
