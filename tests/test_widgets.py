"""The trace viewer and token chart, driven as a notebook would drive them."""

from __future__ import annotations

import pytest

from vibe_agent.context import prompt_tokens_per_round, trim_old_tool_results
from vibe_agent.course.scripted import ScriptedModel, answer, call, calls, usage_of
from vibe_agent.course.widgets import TraceViewer, token_chart
from vibe_agent.loop import run_agent
from vibe_agent.registry import ToolRegistry


def registry() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool
    def lookup(key: str) -> str:
        """Look something up.

        Args:
            key: what to look up.
        """
        return f"<value of {key}> " * 20

    return reg


def two_round_result():
    model = ScriptedModel([
        calls(call("lookup", {"key": "a"}), usage=usage_of(100, 10)),
        calls(call("lookup", {"key": "<b>"}), usage=usage_of(180, 10)),
        answer("done", usage=usage_of(260, 5)),
    ])
    return run_agent(model.client(), "q", registry(), model="m"), model


def test_viewer_steps_through_the_trace():
    result, _ = two_round_result()
    viewer = TraceViewer(result.trace)
    assert repr(viewer) == f"TraceViewer({len(result.trace)} steps, showing step 1)"
    first = viewer.panel.value
    viewer.next.click()
    assert viewer.slider.value == 2 and viewer.panel.value != first
    assert "lookup" in viewer.panel.value
    assert "{&quot;key&quot;: &quot;a&quot;}" in viewer.panel.value
    viewer.show(4)
    assert "&lt;b&gt;" in viewer.panel.value  # values are escaped, not rendered as HTML
    viewer.show(99)
    assert viewer.slider.value == len(result.trace)
    viewer.previous.click()
    assert viewer.slider.value == len(result.trace) - 1
    viewer.show(1)
    viewer.previous.click()
    assert viewer.slider.value == 1
    assert "prompt 100 + completion 10" in viewer.panel.value


def test_viewer_refuses_an_empty_trace():
    with pytest.raises(ValueError, match="empty"):
        TraceViewer([])


def test_token_chart_draws_one_bar_per_reported_round():
    result, _ = two_round_result()
    fig = token_chart(result.usage)
    heights = [patch.get_height() for patch in fig.axes[0].patches]
    assert heights == [100, 180, 260]
    assert prompt_tokens_per_round(result.usage) == [100, 180, 260]
    assert prompt_tokens_per_round([None, usage_of(5, 1)]) == [None, 5]


def test_trimming_shortens_old_tool_results_and_keeps_ids():
    result, _ = two_round_result()
    trimmed = trim_old_tool_results(result.messages, keep_last=1, max_chars=20)
    tools = [m for m in trimmed if m["role"] == "tool"]
    assert "[trimmed:" in tools[0]["content"] and len(tools[0]["content"]) < 60
    assert tools[1] == [m for m in result.messages if m["role"] == "tool"][1]
    assert [m.get("tool_call_id") for m in trimmed] == [
        m.get("tool_call_id") for m in result.messages]
    assert trimmed is not result.messages and result.messages[3]["content"].count("value") == 20


def test_prepare_changes_what_is_sent_not_the_history():
    model = ScriptedModel([calls(call("lookup", {"key": "a"})), calls(call("lookup", {"key": "b"})),
                           answer("done")])
    result = run_agent(model.client(), "q", registry(), model="m",
                       prepare=lambda m: trim_old_tool_results(m, keep_last=0, max_chars=10))
    sent = model.requests[2]["messages"]
    assert all("[trimmed:" in m["content"] for m in sent if m["role"] == "tool")
    assert all("[trimmed:" not in str(m["content"]) for m in result.messages)


def drawn_texts(fig) -> dict[str, str]:
    ax = fig.axes[0]
    legend = ax.get_legend()
    return {"title": ax.get_title(), "x": ax.get_xlabel(),
            "legend": " | ".join(t.get_text() for t in legend.get_texts()) if legend else ""}


@pytest.mark.parametrize(("font", "expected"), [
    ("WenQuanYi Micro Hei", {"title": "每轮发送的 prompt tokens", "x": "轮次",
                             "legend": "完整历史 | 裁剪后"}),
    (None, {"title": "prompt tokens per round", "x": "round", "legend": "series 1 | series 2"}),
], ids=["with-a-cjk-font", "without-one-english-twins"])
def test_token_chart_speaks_chinese_when_a_font_can_draw_it(font, expected, caplog, recwarn):
    from vibe_agent.course.widgets import cjk_font

    if font and cjk_font() != font:
        pytest.skip(f"{font} is not installed here")  # the fallback row still runs
    result, _ = two_round_result()
    fig = token_chart(result.usage, label="完整历史", labels={"裁剪后": result.usage}, font=font)
    caplog.set_level("WARNING")
    fig.canvas.draw()  # glyphs are looked up when drawing: a missing one would warn here
    assert drawn_texts(fig) == expected
    missing = [str(w.message) for w in recwarn if "missing from" in str(w.message)]
    assert not missing and "missing from" not in caplog.text  # warned or logged by version
    assert "findfont" not in caplog.text  # no font asked for by a name not installed
    if font:
        assert fig.axes[0].title.get_fontproperties().get_family()[0] == font


def test_cjk_font_is_the_first_installed_one_or_none():
    from matplotlib import font_manager

    from vibe_agent.course.widgets import CJK_FONTS, cjk_font

    installed = {f.name for f in font_manager.fontManager.ttflist}
    assert cjk_font() == next((name for name in CJK_FONTS if name in installed), None)


@pytest.fixture
def no_cjk_font(monkeypatch):
    """matplotlib as on a machine without any CJK font (its font list filtered)."""
    from matplotlib import font_manager

    from vibe_agent.course.widgets import CJK_FONTS, cjk_font

    kept = [f for f in font_manager.fontManager.ttflist if f.name not in CJK_FONTS]
    monkeypatch.setattr(font_manager.fontManager, "ttflist", kept)
    cjk_font.cache_clear()
    yield
    cjk_font.cache_clear()


def test_without_a_cjk_font_one_chinese_line_and_english_charts(no_cjk_font, capsys, caplog,
                                                                 recwarn):
    from vibe_agent.course.widgets import NO_CJK_FONT

    result, _ = two_round_result()
    caplog.set_level("WARNING")
    figures = [token_chart(result.usage, label="完整历史", labels={"裁剪后": result.usage})
               for _ in range(2)]
    for fig in figures:
        fig.canvas.draw()
    assert capsys.readouterr().out == NO_CJK_FONT + "\n"  # once, not once per chart
    assert drawn_texts(figures[1]) == {"title": "prompt tokens per round", "x": "round",
                                       "legend": "series 1 | series 2"}
    # matplotlib's own warnings only: a kernel client of an earlier test in this process
    # may log its garbage collection here (the suite runs several tests per process)
    assert [r.getMessage() for r in caplog.records if r.name.startswith("matplotlib")] == []
    assert not [w for w in recwarn if "Glyph" in str(w.message)]


@pytest.mark.parametrize(("font", "style"), [
    ("WenQuanYi Micro Hei", {"font.family": ["WenQuanYi Micro Hei", "sans-serif"]}),
    (None, {}),
], ids=["cjk-font-then-generic-sans-serif", "no-font-no-change"])
def test_chart_style_names_only_the_font_and_a_generic_family(font, style):
    from vibe_agent.course.widgets import chart_style

    assert chart_style(font) == style
