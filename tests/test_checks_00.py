"""Lesson 00's checkers: a right answer passes, each typical mistake gets its own hint."""

from __future__ import annotations

import os

import pytest

from vibe_agent.course.checks.lesson_00 import check_first_answer, check_pick_mode
from vibe_agent.course.client import resolve_mode

# --- exercise 0.1: first_answer ------------------------------------------------------------


def first_answer_right(client, model, question):
    response = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": question}])
    return response.choices[0].message.content


def first_answer_unsolved(client, model, question):
    raise NotImplementedError("练习还没完成")


def returns_response(client, model, question):
    return client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": question}])


def returns_message(client, model, question):
    return returns_response(client, model, question).choices[0].message


def returns_choice(client, model, question):
    return returns_response(client, model, question).choices[0]


def returns_choices(client, model, question):
    return returns_response(client, model, question).choices


def question_as_system(client, model, question):
    response = client.chat.completions.create(
        model=model, messages=[{"role": "system", "content": question}])
    return response.choices[0].message.content


def hard_coded_model(client, model, question):
    return first_answer_right(client, "vibe-reference", question)


def hard_coded_question(client, model, question):
    return first_answer_right(client, model, "17 × 23 等于多少？")


def no_request(client, model, question):
    return "17 × 23 = 391。"


def asks_twice(client, model, question):
    first_answer_right(client, model, question)
    return first_answer_right(client, model, question)


def adds_system_prompt(client, model, question):
    response = client.chat.completions.create(model=model, messages=[
        {"role": "system", "content": "你是一个助手。"}, {"role": "user", "content": question}])
    return response.choices[0].message.content


def rewrites_answer(client, model, question):
    return "回答：" + first_answer_right(client, model, question)


def typo_in_attribute(client, model, question):
    return returns_response(client, model, question).choices[0].text


def adds_temperature(client, model, question):
    response = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": question}], temperature=0)
    return response.choices[0].message.content


def adds_max_tokens(client, model, question):
    response = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": question}], max_tokens=100)
    return response.choices[0].message.content


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        pytest.param(returns_response, "回答的文字在 response.choices[0].message.content",
                     id="response-object"),
        pytest.param(returns_message, "文字在它的 .content 属性里", id="message-object"),
        pytest.param(returns_choice, "还差两步：.message.content", id="choice-object"),
        pytest.param(returns_choices, "返回的是 response.choices 这个列表", id="choices-list"),
        pytest.param(question_as_system, "问题被放进了 role=\"system\" 的消息里",
                     id="question-as-system"),
        pytest.param(hard_coded_model, "不要写死模型名，用参数 model", id="hard-coded-model"),
        pytest.param(hard_coded_question, "question 用参数，不要写死", id="hard-coded-question"),
        pytest.param(no_request, "函数没有向模型发出任何请求", id="no-request"),
        pytest.param(asks_twice, "发了 2 次请求，只需要 1 次", id="asks-twice"),
        pytest.param(adds_system_prompt, "只发一条消息", id="extra-system-prompt"),
        pytest.param(rewrites_answer, "原样返回 message.content", id="rewritten-answer"),
        pytest.param(typo_in_attribute, "你的代码抛出了 AttributeError", id="raises"),
        pytest.param(adds_temperature, "请求里多了 temperature=0", id="adds-temperature"),
        pytest.param(adds_temperature, "在离线模式里会回退给脚本参考模型",
                     id="adds-temperature-why"),
        pytest.param(adds_max_tokens, "请求里多了 max_tokens=100", id="adds-max-tokens"),
    ],
)
def test_first_answer_mistakes_get_their_hint(fn, expected, capsys):
    assert not check_first_answer(fn)
    out = capsys.readouterr().out
    assert expected in out
    assert "❌" in out and "Traceback" not in out


def test_first_answer_right_passes(capsys):
    assert check_first_answer(first_answer_right)
    assert "全部 3 项通过" in capsys.readouterr().out


def test_first_answer_unsolved(capsys):
    assert not check_first_answer(first_answer_unsolved)
    assert "还没完成" in capsys.readouterr().out


# --- exercise 0.2: pick_mode ---------------------------------------------------------------


def pick_mode_right(env, requested):
    chosen = (requested or env.get("VIBE_AGENT_MODE") or "").strip().lower()
    if chosen:
        return chosen
    return "live" if env.get("OPENAI_API_KEY") else "offline"


def pick_mode_unsolved(env, requested):
    raise NotImplementedError("练习还没完成")


def ignores_requested(env, requested):
    return pick_mode_right(env, None)


def env_before_requested(env, requested):
    chosen = (env.get("VIBE_AGENT_MODE") or requested or "").strip().lower()
    return chosen or ("live" if env.get("OPENAI_API_KEY") else "offline")


def no_normalising(env, requested):
    chosen = requested or env.get("VIBE_AGENT_MODE")
    return chosen or ("live" if env.get("OPENAI_API_KEY") else "offline")


def key_by_presence(env, requested):
    chosen = (requested or env.get("VIBE_AGENT_MODE") or "").strip().lower()
    return chosen or ("live" if "OPENAI_API_KEY" in env else "offline")


def get_with_default(env, requested):
    default = "live" if env.get("OPENAI_API_KEY") else "offline"
    return (requested or env.get("VIBE_AGENT_MODE", default)).strip().lower()


def always_offline(env, requested):
    return (requested or env.get("VIBE_AGENT_MODE") or "offline").strip().lower()


def reads_os_environ(env, requested):
    return pick_mode_right(dict(os.environ), requested)


def borrows_resolve_mode(env, requested):
    return resolve_mode(requested, env)


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        pytest.param(ignores_requested, "函数参数 requested 最优先", id="ignores-argument"),
        pytest.param(env_before_requested, "函数参数 requested 最优先", id="env-first"),
        pytest.param(no_normalising, "先 .strip() 去掉空格，再 .lower()", id="no-strip-lower"),
        pytest.param(key_by_presence, "空字符串不算配置了 key", id="key-by-presence"),
        pytest.param(get_with_default, "VIBE_AGENT_MODE 为空时当作没设置", id="get-default"),
        pytest.param(always_offline, "默认是 \"live\"", id="always-offline"),
        pytest.param(reads_os_environ, "看起来你读的是 os.environ", id="reads-os-environ"),
        pytest.param(borrows_resolve_mode, "这道题要你亲手写出这条规则", id="calls-resolve-mode"),
    ],
)
def test_pick_mode_mistakes_get_their_hint(fn, expected, capsys, monkeypatch):
    monkeypatch.setenv("VIBE_AGENT_MODE", "replay")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert not check_pick_mode(fn)
    out = capsys.readouterr().out
    assert expected in out
    assert "❌" in out and "Traceback" not in out


def test_pick_mode_right_passes(capsys):
    assert check_pick_mode(pick_mode_right)
    assert "全部 9 项通过" in capsys.readouterr().out


def test_pick_mode_unsolved(capsys):
    assert not check_pick_mode(pick_mode_unsolved)
    assert "还没完成" in capsys.readouterr().out


def test_pick_mode_checker_leaves_os_environ_alone():
    before = dict(os.environ)
    check_pick_mode(reads_os_environ)
    assert dict(os.environ) == before
