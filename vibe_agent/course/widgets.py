"""Seeing inside a run: a step-through trace viewer and a per-round token chart.

`TraceViewer(trace)` is an ipywidgets box: buttons and a slider move over the
steps; the panel below shows what happened at that step (the model's decision,
the tool, its arguments, result and outcome, error, tokens, why the run stopped;
the steps of a sub-agent that a tool step ran, nested below it) and, once the model
keeps a todo list (`vibe_agent.plan`), the list as it stood at that step. It only
draws from the trace it was given, so the same trace always shows the same thing
(nbval-friendly: no `widgets.Output`, no printing from callbacks).

`token_chart(usage)` draws the prompt tokens of each round from the API's `usage`
(matplotlib), which shows the resent history growing. Its words are Chinese, drawn
with the first CJK font installed (`cjk_font()` over `CJK_FONTS`, e.g. WenQuanYi Micro
Hei) inside `plt.rc_context(chart_style(font))`, never by changing the global
`rcParams`; other charts (lesson 10's) draw the same way. On a machine without a CJK
font, one Chinese line says so and each Chinese text falls back to its English twin,
so no chart shows empty boxes or floods the notebook with font warnings.
"""

from __future__ import annotations

import html
from functools import cache
from typing import Any

import ipywidgets as widgets

from ..trace import Trace, TraceStep, render_step

_KIND = {"model": "模型", "tool": "工具", "check": "完成检查", "compact": "压缩", "stop": "结束",
         "user": "用户"}


def _row(label: str, value: Any) -> str:
    if value is None or value == "":
        return ""
    text = html.escape(str(value))
    return (f"<tr><th style='text-align:left;padding-right:1em;vertical-align:top'>{label}</th>"
            f"<td><pre style='margin:0;white-space:pre-wrap'>{text}</pre></td></tr>")


def plan_at(trace: list[TraceStep], index: int) -> str | None:
    """The todo list as it stood at step `index`: the result of the last accepted
    `todo_write` call up to it (None: the model has written no list yet)."""
    for step in reversed(trace[:index + 1]):
        if step.kind == "tool" and step.tool == "todo_write" and step.outcome == "ok":
            return step.result
    return None


def step_html(step: TraceStep, index: int, total: int, plan: str | None = None) -> str:
    """One step as an HTML table (escaped; long values wrap); `plan`: the todo list then."""
    tokens = None
    if step.prompt_tokens is not None or step.completion_tokens is not None:
        tokens = f"prompt {step.prompt_tokens} + completion {step.completion_tokens}"
    elif step.kind == "model":
        tokens = "n/a（这次响应没有 usage）"
    rows = [
        _row("步骤", f"{index + 1} / {total}（第 {step.round} 轮，{_KIND[step.kind]}）"),
        _row("决定", step.decision and step.decision + (
            "（被 max_tokens 截断）" if step.finish_reason == "length" else "")),
        _row("执行情况", step.outcome),
        _row("压缩原因" if step.kind == "compact" else "来自", step.trigger),
        _row("停止原因", step.stop_reason),
        _row("工具", step.tool),
        _row("参数", step.arguments),
        _row("结果", step.result),
        _row("错误", step.error),
        _row("异常类型", step.error_type),
        _row("内容", step.content),
        _row("tokens", tokens),
        _row("计划（此时）", plan),
    ]
    return f"<table class='vibe-trace-step'>{''.join(rows)}</table>" + children_html(step)


def children_html(step: TraceStep) -> str:
    """The steps of the agent a tool step ran (a sub-agent), as a nested list under the
    step: one line each, a grandchild's steps nested one level deeper ("" when none)."""
    if not step.children:
        return ""
    items = "".join(f"<li><code>{html.escape(render_step(child))}</code>{children_html(child)}"
                    "</li>" for child in step.children)
    return (f"<div class='vibe-trace-children' style='margin-left:1.5em'>"
            f"<b>子 agent 的 {len(step.children)} 步</b><ol style='margin:0'>{items}</ol></div>")


class TraceViewer(widgets.VBox):
    """Step through a trace: ◀ / ▶ buttons and a slider over its steps.

    Args:
        trace: the steps to show (e.g. `result.trace`).
    """

    def __init__(self, trace: Trace | list[TraceStep]) -> None:
        if not trace:
            raise ValueError("the trace is empty: run the agent first")
        self.trace = list(trace)
        self.slider = widgets.IntSlider(value=1, min=1, max=len(self.trace), description="步骤",
                                        continuous_update=True)
        self.previous = widgets.Button(description="◀ 上一步")
        self.next = widgets.Button(description="下一步 ▶")
        self.panel = widgets.HTML(self._html(0))
        self.previous.on_click(lambda _: self.show(self.slider.value - 1))
        self.next.on_click(lambda _: self.show(self.slider.value + 1))
        self.slider.observe(self._moved, names="value")
        super().__init__([widgets.HBox([self.previous, self.slider, self.next]), self.panel])
        self.add_class("vibe-trace-viewer")

    def show(self, number: int) -> None:
        """Move to step `number` (counted from 1; clamped to the trace)."""
        self.slider.value = max(1, min(len(self.trace), number))

    def _moved(self, change: dict[str, Any]) -> None:
        self.panel.value = self._html(change["new"] - 1)

    def _html(self, index: int) -> str:
        return step_html(self.trace[index], index, len(self.trace), plan_at(self.trace, index))

    def __repr__(self) -> str:
        return f"TraceViewer({len(self.trace)} steps, showing step {self.slider.value})"


# Fonts with Chinese glyphs, best first (Linux, then macOS and Windows names).
CJK_FONTS = ("WenQuanYi Micro Hei", "WenQuanYi Zen Hei", "Noto Sans CJK SC", "Noto Sans SC",
             "Source Han Sans SC", "PingFang SC", "Heiti SC", "Microsoft YaHei", "SimHei")

NO_CJK_FONT = ("图表：这台机器上没有中文字体，图里的文字改用英文。想看中文："
               "安装一个（Debian/Ubuntu：apt install fonts-wqy-microhei），"
               "删掉 matplotlib 的字体缓存（~/.cache/matplotlib）后重启内核。")


@cache
def cjk_font() -> str | None:
    """The first of `CJK_FONTS` that matplotlib can find here, else None (the first
    call that finds none prints `NO_CJK_FONT`: one line, once per process)."""
    from matplotlib import font_manager

    installed = {font.name for font in font_manager.fontManager.ttflist}
    font = next((name for name in CJK_FONTS if name in installed), None)
    if font is None:
        print(NO_CJK_FONT)
    return font


def chart_style(font: str | None) -> dict[str, Any]:
    """The rcParams to draw a chart with `font` ({} for None), for `plt.rc_context`.

    The family list is the CJK font, then the generic "sans-serif" (matplotlib's own
    DejaVu Sans) for the glyphs it lacks. Not the names in `rcParams["font.sans-serif"]`
    one by one: each of those that is not installed (Arial, Helvetica, ...) logs a
    "findfont: Font family ... not found" warning at every text drawn.
    """
    return {"font.family": [font, "sans-serif"]} if font else {}


def chart_text(chinese: str, english: str, font: str | None) -> str:
    """The Chinese text when a CJK font can draw it, else its English twin."""
    return chinese if font or chinese.isascii() else english


def token_chart(usage: list[dict[str, Any] | None], title: str = "每轮发送的 prompt tokens",
                labels: dict[str, list[dict[str, Any] | None]] | None = None,
                label: str = "prompt tokens", *, font: str | None = ""):
    """A bar chart of prompt tokens per round, from the API's `usage`.

    Args:
        usage: per-round usage (`AgentResult.usage`); rounds without usage are left out.
        title: the chart title (Chinese is fine: without a CJK font it becomes
            "prompt tokens per round").
        labels: optional extra series to compare, name -> usage list (drawn side by side).
        label: the legend name of `usage` when there are extra series.
        font: the CJK font to draw with; "" finds one (`cjk_font()`), None draws without
            one (Chinese texts then fall back to English).
    """
    import matplotlib.pyplot as plt

    font = cjk_font() if font == "" else font
    series = {label: usage} | (labels or {})
    # Every text made under this context keeps its family list, also when it is drawn
    # later (the notebook draws the returned figure after this function has returned).
    with plt.rc_context(chart_style(font)):
        fig, ax = plt.subplots(figsize=(6.4, 3.2))
        width = 0.8 / len(series)
        for k, (name, values) in enumerate(series.items()):
            rounds = [i + 1 for i, u in enumerate(values) if u]
            tokens = [u["prompt_tokens"] for u in values if u]
            ax.bar([r + (k - (len(series) - 1) / 2) * width for r in rounds], tokens, width,
                   label=chart_text(name, f"series {k + 1}", font))
        ax.set_xlabel(chart_text("轮次", "round", font))
        ax.set_ylabel("prompt tokens")
        ax.set_title(chart_text(title, "prompt tokens per round", font))
        ax.xaxis.get_major_locator().set_params(integer=True)
        if len(series) > 1:
            ax.legend()
        fig.tight_layout()
    plt.close(fig)  # shown once, by returning it (not again by the inline backend)
    return fig
