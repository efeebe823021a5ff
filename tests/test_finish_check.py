"""The finish check of `run_agent`: a refusal goes back as a user turn, bounded by
`max_refusals` and `max_iters`, each refusal a trace step; `tests_gate` on real projects."""

from __future__ import annotations

from pathlib import Path

import pytest

from vibe_agent import plan
from vibe_agent.coding import coding_registry
from vibe_agent.course.scripted import ScriptedModel, answer, call, calls
from vibe_agent.loop import StopReason, run_agent
from vibe_agent.plan import FinishCheck
from vibe_agent.registry import ToolRegistry
from vibe_agent.sandbox import run_in_sandbox

MODEL = "test-model"
NOT_YET = "the tests still fail"


def says_done(times: int = 20) -> ScriptedModel:
    """A scripted model that answers "已修复" every time it is asked (it never fixes)."""
    return ScriptedModel([answer("已修复。")] * times, name="scripted-claims-done",
                         max_requests=times)


def refuse(times: int):
    """A check that refuses the first `times` answers, then accepts; it counts its calls."""
    seen: list[str] = []

    def check(answer_text: str) -> str | None:
        seen.append(answer_text)
        return NOT_YET if len(seen) <= times else None

    check.seen = seen
    return check


def test_without_a_check_the_first_answer_ends_the_run():
    result = run_agent(says_done().client(), "fix it", ToolRegistry(), model=MODEL)
    assert result.stop_reason is StopReason.ANSWERED
    assert result.model_calls == 1
    assert [s.kind for s in result.trace] == ["model", "stop"]


def test_a_refusal_goes_back_as_the_next_user_turn_and_the_run_goes_on():
    model, check = says_done(), refuse(2)
    result = run_agent(model.client(), "fix it", ToolRegistry(), model=MODEL,
                       layers=[FinishCheck(check)])
    assert result.stop_reason is StopReason.ANSWERED and result.answer == "已修复。"
    assert result.model_calls == 3 and check.seen == ["已修复。"] * 3
    assert [s.kind for s in result.trace] == ["model", "check", "model", "check", "model",
                                              "stop"]
    refusal = result.trace[1]
    assert (refusal.outcome, refusal.content, refusal.round) == ("refused", NOT_YET, 1)
    assert [m["role"] for m in model.requests[2]["messages"]] == [
        "system", "user", "assistant", "user", "assistant", "user"]
    assert model.requests[2]["messages"][-1]["content"] == NOT_YET


@pytest.mark.parametrize(("max_refusals", "model_calls"), [
    pytest.param(0, 1, id="0-judges-once"),
    pytest.param(1, 2, id="1"),
    pytest.param(3, 4, id="3-the-default"),
])
def test_a_model_that_never_fixes_is_stopped_by_the_refusal_limit(max_refusals, model_calls):
    check = refuse(1000)
    result = run_agent(says_done().client(), "fix it", ToolRegistry(), model=MODEL,
                       max_iters=10, layers=[FinishCheck(check)], max_refusals=max_refusals)
    assert result.stop_reason is StopReason.FINISH_REFUSED and not result.ok
    assert result.answer is None
    assert result.model_calls == model_calls
    assert sum(s.kind == "check" for s in result.trace) == max_refusals + 1
    assert f"第 {max_refusals + 1} 次" in result.message
    assert result.trace[-1].stop_reason is StopReason.FINISH_REFUSED
    assert result.messages[-1]["role"] == "assistant"  # the last refusal was not sent


def test_max_iters_still_bounds_a_run_the_check_keeps_refusing():
    result = run_agent(says_done().client(), "fix it", ToolRegistry(), model=MODEL,
                       max_iters=4, layers=[FinishCheck(refuse(1000))], max_refusals=100)
    assert result.stop_reason is StopReason.MAX_ITERS
    assert result.model_calls == 4
    assert "完成检查仍未通过" in result.message


def test_the_check_is_not_run_while_the_model_calls_tools():
    registry = ToolRegistry()

    @registry.tool
    def lookup(key: str) -> str:
        """Look something up.

        Args:
            key: what to look up.
        """
        return key

    check = refuse(0)
    model = ScriptedModel([calls(call("lookup", {"key": "a"})), answer("done")])
    result = run_agent(model.client(), "q", registry, model=MODEL, layers=[FinishCheck(check)])
    assert result.ok and check.seen == ["done"]


@pytest.mark.parametrize("verdict", [
    pytest.param(False, id="False"),
    pytest.param(True, id="True"),
    pytest.param("", id="empty-text"),
    pytest.param("  \n", id="blank-text"),
    pytest.param(1, id="exit-code"),
])
def test_a_check_returning_something_else_is_a_harness_bug(verdict):
    with pytest.raises(TypeError, match="finish check returns None"):
        run_agent(says_done().client(), "q", ToolRegistry(), model=MODEL,
                  layers=[FinishCheck(lambda _answer: verdict)])


def test_a_check_that_raises_raises_and_the_trace_says_so():
    def broken(_answer: str) -> str | None:
        raise RuntimeError("the gate broke")

    from vibe_agent.trace import Trace

    trace = Trace()
    with pytest.raises(RuntimeError, match="the gate broke"):
        run_agent(says_done().client(), "q", ToolRegistry(), model=MODEL, trace=trace,
                  layers=[FinishCheck(broken)])
    assert trace[-1].stop_reason is None and trace[-1].error_type == "RuntimeError"


def test_negative_max_refusals_is_refused():
    with pytest.raises(ValueError, match="max_refusals"):
        run_agent(says_done().client(), "q", ToolRegistry(), model=MODEL, max_refusals=-1)


# --- tests_gate on real projects, in the sandbox ---------------------------------------

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def project(root: Path, code: str = BUGGY, tests: str = TESTS) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (root / "calc.py").write_text(code, encoding="utf-8")
    (root / "tests" / "test_calc.py").write_text(tests, encoding="utf-8")
    return root


@pytest.mark.parametrize(("code", "tests", "command", "passes"), [
    pytest.param(FIXED, TESTS, "python -m pytest -q", True, id="passing"),
    pytest.param(BUGGY, TESTS, "python -m pytest -q", False, id="failing"),
    pytest.param(FIXED, "", "python -m pytest -q", False, id="no-tests-exit-5"),
    pytest.param(FIXED, TESTS, "python -c 'import sys; sys.exit(3)'", False, id="exit-3"),
])
def test_tests_gate_passes_only_on_exit_code_0(tmp_path, code, tests, command, passes):
    verdict = plan.tests_gate(project(tmp_path, code, tests), command, timeout=60)
    if passes:
        assert verdict is None
    else:
        assert verdict and "not finished" in verdict and "exit code" in verdict


def test_tests_gate_sends_back_the_failing_output(tmp_path):
    verdict = plan.tests_gate(project(tmp_path))
    assert "exit code 1" in verdict and "assert -1 == 5" in verdict


def test_tests_gate_counts_a_time_out_as_failing(tmp_path):
    verdict = plan.tests_gate(project(tmp_path, FIXED), "sleep 5", timeout=0.5)
    assert verdict and "did not finish within 0.5 s" in verdict


def test_tests_gate_caps_what_goes_back(tmp_path):
    loud = "import sys\nsys.stdout.write('x' * 50000)\nsys.exit(1)\n"
    (project(tmp_path) / "loud.py").write_text(loud, encoding="utf-8")
    verdict = plan.tests_gate(tmp_path, "python loud.py")
    assert len(verdict) < 5_000 and "characters cut]" in verdict


def claims_then_fixes() -> ScriptedModel:
    """Lesson 09's claimer, but it goes on working when the tests are sent back."""
    return ScriptedModel([
        answer("已修复，测试全部通过。"),
        calls(call("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"})),
        calls(call("run_command", {"command": "python -m pytest -q"})),
        answer("改了 calc.py，测试通过了。"),
    ], name="scripted-claims-early")


def test_the_gate_turns_an_early_claim_into_a_finished_fix(tmp_path):
    root = project(tmp_path)
    model = claims_then_fixes()
    result = run_agent(model.client(), "add 算错了", coding_registry(root), model=MODEL,
                       max_iters=8, layers=[FinishCheck(lambda _answer: plan.tests_gate(root))])
    model.assert_consumed()
    assert result.stop_reason is StopReason.ANSWERED
    assert [s.kind for s in result.trace].count("check") == 1
    assert "assert -1 == 5" in model.requests[1]["messages"][-1]["content"]
    assert run_in_sandbox("python -m pytest -q", root, timeout=60).exit_code == 0


def test_without_the_gate_the_early_claim_ends_the_run_with_failing_tests(tmp_path):
    root = project(tmp_path)
    result = run_agent(claims_then_fixes().client(), "add 算错了", coding_registry(root),
                       model=MODEL, max_iters=8)
    assert result.stop_reason is StopReason.ANSWERED and result.model_calls == 1
    assert run_in_sandbox("python -m pytest -q", root, timeout=60).exit_code == 1


def test_the_gate_holds_against_a_model_that_never_fixes(tmp_path):
    root = project(tmp_path)
    result = run_agent(says_done().client(), "add 算错了", coding_registry(root), model=MODEL,
                       max_iters=10, layers=[FinishCheck(lambda _answer: plan.tests_gate(root))],
                       max_refusals=2)
    assert result.stop_reason is StopReason.FINISH_REFUSED
    assert result.model_calls == 3
    assert (root / "calc.py").read_text(encoding="utf-8") == BUGGY
