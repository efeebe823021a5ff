"""Permission rules (vibe_agent.permissions): the matching, the order, the settings file."""

from __future__ import annotations

import json
import os
import time

import pytest

from vibe_agent.permissions import (
    SETTINGS,
    Call,
    Rules,
    SettingsError,
    add_rule,
    call_of,
    command_matches,
    decide,
    load_rules,
    matches,
    mode_default,
    narrowest_rule,
    parse_settings,
    path_matches,
    remember,
)

PYTEST = "run_command(python -m pytest *)"


def run(command: str) -> Call:
    return Call("run_command", command)


# --- commands ----------------------------------------------------------------------


@pytest.mark.parametrize("command, matched", [
    ("python -m pytest", True),  # a trailing " *" also matches nothing more
    ("python -m pytest -q", True),
    ("python   -m  pytest\t-q", True),  # blanks count as one space
    ("python -m pytest_evil", False),  # " *": a whole word
    ("python -m pytestx -q", False),
    ("python -m pip install x", False),
    ("echo python -m pytest", False),
])
def test_a_command_pattern_matches_the_whole_line(command, matched):
    assert matches(PYTEST, run(command)) is matched


@pytest.mark.parametrize("symbol", [";", "&", "&&", "|", "||", "`", "$(", "$", "<", ">",
                                    "\n", "\r", "(", ")"])
def test_an_allow_pattern_never_matches_a_line_with_shell_syntax(symbol):
    hostile = f"python -m pytest -q {symbol} rm -rf ~"
    assert not matches(PYTEST, run(hostile))
    assert decide(Rules(allow=[PYTEST]), run(hostile), "ask") == "ask"
    assert not matches("run_command(*)", run(hostile))


def test_without_a_star_a_pattern_is_that_exact_line_shell_symbols_and_all():
    rule = "run_command(python -m pytest -q; echo done)"
    assert matches(rule, run("python -m pytest -q; echo done"))
    assert not matches(rule, run("python -m pytest -q; echo done; rm -rf ~"))
    assert not matches("run_command(python -m pytest -q)", run("python -m pytest -q -x"))


def test_no_space_before_the_star_matches_inside_a_word():
    assert matches("run_command(python -m pytest*)", run("python -m pytest_evil"))
    assert not matches("run_command(python -m pytest*)", run("python -m pytest; rm -rf ~"))


@pytest.mark.parametrize("command", ["git push", "git push origin main", "ls && git push",
                                     "ls;git push -f", "echo $(git push)", "ls | git push x",
                                     "true\ngit push"])
def test_a_deny_rule_matches_any_piece_of_the_line(command):
    rules = Rules(allow=["run_command"], deny=["run_command(git push *)"])
    assert decide(rules, run(command), "allow") == "deny"


def test_an_ask_rule_also_matches_a_piece_so_yolo_cannot_slip_past_it():
    rules = Rules(ask=["run_command(git *)"])
    assert decide(rules, run("ls; git commit -am x"), "allow") == "ask"
    assert decide(rules, run("ls"), "allow") == "allow"


def test_a_bare_tool_name_is_every_call_of_it():
    assert matches("run_command", run("anything; at all"))
    assert matches("edit_file", Call("edit_file", "a/b.py"))
    assert not matches("edit_file", Call("write_file", "a/b.py"))


def test_matching_a_huge_command_with_many_stars_is_linear():
    started = time.perf_counter()
    assert not command_matches("*x*x*x*x*x*y", "x" * 1_000_000)
    assert command_matches("a *", "a " + "b" * 1_000_000)
    assert time.perf_counter() - started < 1


# --- paths -------------------------------------------------------------------------


@pytest.mark.parametrize("glob, path, matched", [
    ("src/**", "src/app.py", True),
    ("src/**", "src/deep/er/app.py", True),
    ("src/**", "srcx/app.py", False),
    ("src/", "src/app.py", True),  # a trailing / is everything under it
    ("*.py", "app.py", True),
    ("*.py", "src/app.py", False),  # `*` stays inside one name
    ("**/*.py", "app.py", True),
    ("**/*.py", "a/b/c.py", True),
    ("**/*.py", "a/b/c.pyc", False),
    ("tests/test_?.py", "tests/test_a.py", True),
    ("./src/**", "src/app.py", True),
    ("src/**", "src/../secret.txt", False),  # folded first: secret.txt is not under src/
    ("src/**", "./src/a.py", True),
    ("**", "../outside.txt", False),  # outside the workspace: never matched
    ("**", "/etc/passwd", False),
    ("**", "~/.bashrc", False),
    ("**", "a\x1b[2J.py", False),
])
def test_path_globs(glob, path, matched):
    assert path_matches(glob, path) is matched


def test_a_path_rule_names_its_tool():
    assert matches("edit_file(src/**)", Call("edit_file", "src/a.py"))
    assert not matches("edit_file(src/**)", Call("write_file", "src/a.py"))
    assert not matches("write_file(src/**)", run("src/a.py"))


# --- the order -----------------------------------------------------------------------


CALL = run("python -m pytest -q")


@pytest.mark.parametrize("allow, ask, deny, default, expected", [
    ([], [], [], "ask", "ask"),  # no rule: the mode decides
    ([], [], [], "allow", "allow"),
    ([PYTEST], [], [], "ask", "allow"),
    ([], [PYTEST], [], "allow", "ask"),
    ([], [], [PYTEST], "allow", "deny"),
    ([PYTEST], [PYTEST], [], "allow", "ask"),  # ask beats allow
    ([PYTEST], [], [PYTEST], "allow", "deny"),  # deny beats allow
    ([], [PYTEST], [PYTEST], "allow", "deny"),  # deny beats ask
    ([PYTEST], [PYTEST], [PYTEST], "allow", "deny"),
    (["run_command(ls *)"], [], [], "ask", "ask"),  # a rule that does not match
])
def test_deny_beats_ask_beats_allow_and_the_mode_is_below(allow, ask, deny, default, expected):
    assert decide(Rules(allow, ask, deny), CALL, default) == expected


def test_the_decision_names_the_rule():
    rules = Rules(allow=[PYTEST], deny=["run_command(python -m pytest -q)"])
    assert rules.decide(CALL, "ask") == ("deny", "run_command(python -m pytest -q)")
    assert Rules().decide(CALL, "ask") == ("ask", None)


@pytest.mark.parametrize("mode, kind, read_only, expected", [
    ("ask", "command", False, "ask"), ("ask", "write", False, "ask"),
    ("ask", "tool", False, "ask"), ("ask", "tool", True, "allow"),
    ("auto-edit", "write", False, "allow"), ("auto-edit", "command", False, "ask"),
    ("auto-edit", "tool", False, "ask"),
    ("yolo", "command", False, "allow"), ("yolo", "tool", False, "allow"),
])
def test_mode_defaults(mode, kind, read_only, expected):
    assert mode_default(mode, kind, read_only) == expected


def test_mcp_rules_use_the_name_the_model_sees():
    call = call_of("tool", 'mcp__git__push {"force": true}')
    assert call == Call("mcp__git__push")
    assert decide(Rules(deny=["mcp__git__*"]), call, "allow") == "deny"
    assert decide(Rules(allow=["mcp__git__*"]), call, "ask") == "allow"
    assert decide(Rules(allow=["mcp__git__*"]), Call("mcp__github__push"), "ask") == "ask"
    assert decide(Rules(allow=["mcp__git__status"]), call, "ask") == "ask"


def test_writes_into_the_rules_folder_are_always_asked_unless_denied():
    own = Call("write_file", ".vibe_agent/settings.json")
    assert decide(Rules(allow=["write_file"]), own, "allow") == "ask"  # yolo, allow-all
    assert decide(Rules(allow=["write_file(.vibe_agent/**)"]), own, "ask") == "ask"
    assert decide(Rules(deny=["write_file"]), own, "allow") == "deny"
    assert decide(Rules(), Call("edit_file", "src/../.vibe_agent/settings.json"), "allow") == "ask"
    assert narrowest_rule(own) is None


# --- the narrowest rule --------------------------------------------------------------


@pytest.mark.parametrize("call, rule", [
    (run("python -m pytest -q"), "run_command(python -m pytest -q)"),
    (run("python -m pytest -q; rm -rf ~"), "run_command(python -m pytest -q; rm -rf ~)"),
    (run("ls *.py"), None),  # a star would be read as a wildcard: no rule says just this
    (run("echo a\nb"), None),
    (Call("edit_file", "src/app.py"), "edit_file(src/app.py)"),
    (Call("write_file", "docs/a[1].md"), None),
    (Call("mcp__git__push"), "mcp__git__push"),
])
def test_the_narrowest_rule_matches_that_call_and_no_wider(call, rule):
    assert narrowest_rule(call) == rule
    if rule is not None:
        assert matches(rule, call)
        wider = Call(call.tool + "_all") if call.target is None else Call(call.tool,
                                                                            call.target + " x")
        assert not matches(rule, wider)


# --- the settings file -----------------------------------------------------------------


def write_settings(project, data) -> None:
    path = project / SETTINGS
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")


def test_no_settings_file_means_no_rules(tmp_path):
    rules = load_rules(tmp_path)
    assert (rules.allow, rules.ask, rules.deny) == ([], [], [])
    assert rules.path == tmp_path / SETTINGS


def test_a_good_settings_file(tmp_path):
    write_settings(tmp_path, {"permissions": {"allow": [PYTEST], "deny": ["mcp__git__*"]}})
    rules = load_rules(tmp_path)
    assert rules.allow == [PYTEST] and rules.deny == ["mcp__git__*"] and rules.ask == []


@pytest.mark.parametrize("text, named", [
    ("{not json", "不是合法的 JSON（第 1 行"),
    ("[]", "最外层应该是一个对象"),
    ('{"permission": {}}', "不认识的键 'permission'"),
    ('{"permissions": []}', "permissions 应该是一个对象"),
    ('{"permissions": {"allows": []}}', "不认识的键 'allows'"),
    ('{"permissions": {"allow": "run_command"}}', "permissions.allow 应该是一个列表"),
    ('{"permissions": {"deny": [3]}}', "permissions.deny[0] 应该是一条规则（字符串），不是 int"),
    ('{"permissions": {"allow": ["ok_tool"]}}', "permissions.allow[0] 的工具名 'ok_tool' 不认识"),
    ('{"permissions": {"allow": ["run_command(python"]}}', "permissions.allow[0] 写得不对"),
    ('{"permissions": {"allow": ["run_command()"]}}', "括号里是空的"),
    ('{"permissions": {"allow": ["mcp__git__push(x)"]}}', "MCP 工具的规则不带括号"),
    ('{"permissions": {"ask": ["write_file(/etc/**)"]}}', "permissions.ask[0]：路径"),
    ('{"permissions": {"ask": ["write_file(../x)"]}}', "要写成相对工作区的样子"),
    ('{"permissions": {"ask": ["run_command(a\\u001b[2J)"]}}', "写得不对"),
    ('{"permissions": {"allow": [""]}}', "写得不对"),
])
def test_a_bad_settings_file_names_the_file_and_the_field(tmp_path, text, named):
    write_settings(tmp_path, text)
    with pytest.raises(SettingsError) as caught:
        load_rules(tmp_path)
    assert named in str(caught.value)
    assert str(tmp_path / SETTINGS) in str(caught.value)


def test_a_settings_file_that_is_not_utf8_is_an_error_not_a_crash(tmp_path):
    write_settings(tmp_path, "")
    (tmp_path / SETTINGS).write_bytes(b"\xff\xfe{")
    with pytest.raises(SettingsError, match="读不了"):
        load_rules(tmp_path)


def test_a_huge_settings_file_is_refused_without_reading_it(tmp_path):
    write_settings(tmp_path, '{"permissions": {"allow": []}}' + " " * 2_000_000)
    with pytest.raises(SettingsError, match="太大了"):
        load_rules(tmp_path)


def test_a_settings_folder_instead_of_a_file_is_an_error(tmp_path):
    (tmp_path / SETTINGS).mkdir(parents=True)
    with pytest.raises(SettingsError, match="读不了"):
        load_rules(tmp_path)


def test_add_rule_writes_atomically_and_keeps_the_rest(tmp_path):
    write_settings(tmp_path, {"permissions": {"deny": ["mcp__git__*"], "ask": []}})
    rules = load_rules(tmp_path)
    add_rule(rules, "allow", "run_command(python -m pytest -q)")
    add_rule(rules, "allow", "run_command(python -m pytest -q)")  # not twice
    data = json.loads((tmp_path / SETTINGS).read_text(encoding="utf-8"))
    assert data == {"permissions": {"deny": ["mcp__git__*"], "ask": [],
                                    "allow": ["run_command(python -m pytest -q)"]}}
    assert rules.allow == ["run_command(python -m pytest -q)"]
    assert os.listdir(tmp_path / ".vibe_agent") == ["settings.json"]  # no temporary left
    assert load_rules(tmp_path).allow == rules.allow


def test_add_rule_creates_the_file(tmp_path):
    rules = load_rules(tmp_path)
    assert "已写入 .vibe_agent/settings.json" in remember(rules, "edit_file(src/a.py)")
    assert load_rules(tmp_path).allow == ["edit_file(src/a.py)"]


def test_a_broken_file_is_reported_and_never_overwritten(tmp_path):
    rules = load_rules(tmp_path)
    write_settings(tmp_path, '{"permissions": {"allow": [')  # broken after start-up
    line = remember(rules, "run_command(ls)")
    assert line.startswith("✗ 规则没有记下") and "不是合法的 JSON" in line
    assert (tmp_path / SETTINGS).read_text(encoding="utf-8") == '{"permissions": {"allow": ['


def test_add_rule_does_not_write_through_a_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    (project / ".vibe_agent").symlink_to(outside, target_is_directory=True)
    rules = load_rules(project)
    assert "是一个链接" in remember(rules, "run_command(ls)")
    assert list(outside.iterdir()) == []


def test_a_wrong_rule_is_refused_before_anything_is_written(tmp_path):
    rules = load_rules(tmp_path)
    with pytest.raises(SettingsError):
        add_rule(rules, "allow", "run_command(")
    assert not (tmp_path / SETTINGS).exists()


def test_parse_settings_accepts_an_empty_object(tmp_path):
    rules = parse_settings("{}", tmp_path / SETTINGS)
    assert rules.allow == rules.ask == rules.deny == []
