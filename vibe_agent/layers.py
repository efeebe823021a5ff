"""Layers: how a mechanism plugs into the loop without the loop knowing its name.

Lesson 04's loop knows only the model, the tools and the brakes. Everything Part III
adds (compaction, the finish check, streaming, concurrent tools, a conversation that
goes on) is a `Layer`: an object with a few named events, each a no-op by default.
`run_agent(..., layers=[...])` fires them in this order:

    start(messages) -> messages          once: the history the run appends to (given
                                         the fresh one: [system])
    request(fields) -> fields            once: what every request carries
    for each round:
        before_model(messages, round, record)                  before the model call
        text_piece(piece)                while a streamed reply arrives
        model_failed(stop, messages, round, record) -> bool    the call failed: True
                                         retries the round once
        recorded(step)                   every step, as the trace gets it
        on_stop(answer) -> refusal | None                      the model wants to stop
        batches(steps) -> [[step, ...]]  | None                how one reply's calls are
        run_tools(registry, steps) -> [ok, ...] | None         grouped, and run
        tool_result(step, content) -> content                  what the history keeps

With several layers, `start`, `request` and `tool_result` are passed through each in
turn; the first layer with an answer decides `model_failed`, `on_stop`, `batches` and
`run_tools`; the others are told every layer. A None in the list is a layer
switched off (`layers=[compaction]` with `compaction = None`). A layer that raises
is a harness bug: the loop records it in the trace and lets it raise (`start` fires
before the run begins, so there nothing is recorded yet).

The layers of the course: `Compaction` (compact.py, lesson 11), `FinishCheck`
(plan.py, 12), `ToolWorkers` (workers.py, 13), `Streaming` (stream.py, 15) and
`Conversation` (here, 15).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .stops import Stop, StopReason
from .trace import TraceStep

if TYPE_CHECKING:
    from .registry import ToolRegistry

Message = dict[str, Any]
Record = Callable[[TraceStep], None]


class Layer:
    """One mechanism around the loop; override the events it needs (see the sketch above)."""

    def start(self, messages: list[Message]) -> list[Message]:
        return messages

    def request(self, fields: dict[str, Any]) -> dict[str, Any]:
        return fields

    def before_model(self, messages: list[Message], round_no: int, record: Record) -> None:
        pass

    def text_piece(self, piece: str) -> None:
        pass

    def model_failed(self, failed: Stop, messages: list[Message], round_no: int,
                     record: Record) -> bool:
        return False

    def recorded(self, step: TraceStep) -> None:
        pass

    def on_stop(self, answer: str) -> str | None:
        return None

    def batches(self, steps: list[TraceStep]) -> list[list[TraceStep]] | None:
        return None

    def run_tools(self, registry: ToolRegistry, steps: list[TraceStep]) -> list[bool] | None:
        return None

    def tool_result(self, step: TraceStep, content: str) -> str:
        return content


class Layers:
    """The layers of one run, fired together: what the loop talks to. It also keeps the
    run's record: every step goes to the trace, then to each layer, then to `on_step`."""

    def __init__(self, layers: Sequence[Layer | None], trace: list[TraceStep] | None = None,
                 on_step: Record | None = None, max_refusals: int = 3) -> None:
        for layer in layers:
            if not isinstance(layer, Layer | None):
                raise TypeError(f"layers takes Layer objects (e.g. Compaction(...)), "
                                f"not {layer!r}")
        self.layers = [layer for layer in layers if layer is not None]  # None: switched off
        self.trace, self.on_step = trace, on_step
        self.max_refusals, self.refusals = max_refusals, 0

    def record(self, step: TraceStep) -> None:
        if self.trace is not None:
            self.trace.append(step)
        self.recorded(step)
        if self.on_step:
            self.on_step(step)

    def start(self, messages: list[Message]) -> list[Message]:
        for layer in self.layers:
            messages = layer.start(messages)
        return messages

    def request(self, fields: dict[str, Any]) -> dict[str, Any]:
        for layer in self.layers:
            fields = layer.request(fields)
        return fields

    def before_model(self, messages: list[Message], round_no: int, record: Record) -> None:
        for layer in self.layers:
            layer.before_model(messages, round_no, record)

    def text_piece(self, piece: str) -> None:
        for layer in self.layers:
            layer.text_piece(piece)

    def model_failed(self, failed: Stop, messages: list[Message], round_no: int,
                     record: Record) -> bool:
        return any(layer.model_failed(failed, messages, round_no, record)
                   for layer in self.layers)

    def recorded(self, step: TraceStep) -> None:
        for layer in self.layers:
            layer.recorded(step)

    def on_stop(self, answer: str, round_no: int = 0) -> str | None:
        """The first layer's refusal of the answer (None: every layer accepts it),
        recorded as a "check" step; one refusal more than `max_refusals` ends the run.

        Raises:
            Stop: FINISH_REFUSED, the refusal brake (lesson 12).
            TypeError: a layer returned something else than None or a non-empty text
                (a harness bug: False or "" would say nothing the model could act on).
        """
        for layer in self.layers:
            refusal = layer.on_stop(answer)
            if refusal is None:
                continue
            if not (isinstance(refusal, str) and refusal.strip()):
                raise TypeError(f"a finish check returns None (done) or a message for "
                                f"the model, not {refusal!r} ({type(layer).__name__})")
            self.refusals += 1
            self.record(TraceStep(round=round_no, kind="check", outcome="refused",
                                  content=refusal))
            if self.refusals > self.max_refusals:
                raise Stop(StopReason.FINISH_REFUSED, f"完成检查第 {self.refusals} 次不接受"
                           "模型的回答，已停止。")
            return refusal
        return None

    def batches(self, steps: list[TraceStep]) -> list[list[TraceStep]]:
        for layer in self.layers:
            grouped = layer.batches(steps)
            if grouped is not None:
                return grouped
        return [[step] for step in steps]  # one after another

    def run_tools(self, registry: ToolRegistry, steps: list[TraceStep],
                  run_tool: Callable[[ToolRegistry, TraceStep], bool]) -> list[bool]:
        for layer in self.layers:
            results = layer.run_tools(registry, steps)
            if results is not None:
                return results
        return [run_tool(registry, step) for step in steps]

    def tool_result(self, step: TraceStep, content: str) -> str:
        for layer in self.layers:
            content = layer.tool_result(step, content)
        return content


class Conversation(Layer):
    """Go on with an earlier conversation (a terminal session): the question and
    everything after it are appended to this very list, so even a run cut short by
    Ctrl-C leaves its part there (the system prompt is added only when it is empty)."""

    def __init__(self, messages: list[Message]) -> None:
        if not isinstance(messages, list):
            raise TypeError(f"Conversation takes the list of messages, not {messages!r}")
        self.messages = messages

    def start(self, messages: list[Message]) -> list[Message]:
        if not self.messages:  # the first turn: the fresh history's system prompt
            self.messages.extend(messages)
        return self.messages
