"""Sub-agents: the same loop, started by a tool, with a fresh history and fewer tools.

    parent run_agent ── delegate(task) ──> child run_agent(task, only `tools`)
         │                                    reads file after file in its own history
         │ <───────── one tool result: the child's final answer ─┘
         the parent's history grows by that one answer, not by the child's reads

The parent's context stays small because none of the child's messages come back:
only its answer does. The child is never offered `delegate` itself (unless a depth
above one is asked for explicitly), so it cannot start children of its own; a call
to a tool it was not given is error text, as always. Every child's steps are kept
in the parent's trace, under the `delegate` step that ran it (`TraceStep.children`).

A token budget is shared by all sub-agents below one registry, at every depth: a
grandchild spends from the same budget as its parent. A child that takes the total
past it is stopped, every other child stops before its next request, and later
delegations are refused with error text.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import openai

from .loop import StopReason, run_agent
from .registry import ToolRegistry
from .trace import Trace, TraceStep, current_step

CHILD_SYSTEM_PROMPT = (
    "你是一个被派出去完成一件具体小事的助手（子 agent）。\n"
    "- 只做交给你的这一件事，用你有的工具查清楚。\n"
    "- 最后只回答结论：一两句话，带上文件路径和行号等关键事实；不要复述你读过的内容。\n"
    "- 查不到就直接说查不到。"
)
DELEGATE = "delegate"


class DelegationError(Exception):
    """A child that could not give an answer; the parent's model reads the message."""


class BudgetExceeded(Exception):
    """Raised inside a child run when the children together used up the token budget."""


@dataclass
class Budget:
    """Tokens all sub-agents below one registry may use together, at every depth
    (None: no limit)."""

    limit: int | None
    used: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def spend(self, tokens: int) -> None:
        """Add a child's reported tokens.

        Raises:
            BudgetExceeded: the total is now past the limit.
        """
        with self._lock:
            self.used += tokens
            if self.limit is not None and self.used > self.limit:
                raise BudgetExceeded(self._used_up())

    def check(self) -> None:
        """Before a child's next request: another child may have used the budget up.

        Raises:
            BudgetExceeded: no tokens are left.
        """
        if self.exhausted:
            raise BudgetExceeded(self._used_up())

    def _used_up(self) -> str:
        return f"the sub-agents' token budget of {self.limit} is used up ({self.used} tokens)"

    @property
    def exhausted(self) -> bool:
        return self.limit is not None and self.used >= self.limit


def delegate_registry(client: openai.OpenAI, *, model: str, tools: ToolRegistry,
                      max_iters: int = 8, depth: int = 1, budget_tokens: int | None = None,
                      system_prompt: str = CHILD_SYSTEM_PROMPT) -> ToolRegistry:
    """A registry with one tool, `delegate(task)`, that runs a child agent on `task`.

    Args:
        client: the client the children call (the parent's own, or another).
        model: the model the children use.
        tools: the tools a child gets (give it fewer than the parent: e.g. read-only).
            A `delegate` tool among them is removed unless `depth` is above 1.
        max_iters: the round brake of each child.
        depth: how many levels of children may exist below the parent (1: children
            cannot delegate; 2: a child gets a `delegate` of its own, and so on).
        budget_tokens: the most tokens all sub-agents together may use, children and
            their children alike (None: no limit).
        system_prompt: the children's rules; the default asks for the conclusion only.
    """
    if depth < 1:
        raise ValueError("depth must be at least 1 (1: children cannot delegate)")
    return _delegate_registry(client, model, tools, max_iters, depth, Budget(budget_tokens),
                              system_prompt)


def _delegate_registry(client: openai.OpenAI, model: str, tools: ToolRegistry, max_iters: int,
                       depth: int, budget: Budget, system_prompt: str) -> ToolRegistry:
    """`delegate_registry`, spending from `budget`: the one budget of the whole family."""
    names = [name for name in tools.names if name != DELEGATE]

    def child_tools() -> ToolRegistry:
        own = tools.subset(names)
        if depth == 1:
            return own
        deeper = _delegate_registry(client, model, tools, max_iters, depth - 1, budget,
                                    system_prompt)  # the same budget, one level down
        return ToolRegistry.combine(own, deeper)  # asked for explicitly: one level less

    registry = ToolRegistry()

    def delegate(task: str) -> str:
        """Hand a self-contained sub-task to a helper agent with a fresh history; you get back
        only its conclusion. Use it for exploration that would take many reads.

        Args:
            task: what the helper should find out or do, with everything it needs to know.
        """
        if budget.exhausted:
            raise DelegationError(f"no helper was started: the token budget of {budget.limit} "
                                  "for helpers is used up. Continue with your own tools.")
        trace, parent = Trace(), current_step.get()

        def spend(step: TraceStep) -> None:
            if step.kind == "model" and step.total_tokens:
                budget.spend(step.total_tokens)

        def still_in_budget(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
            budget.check()  # a child of this child may have used it up meanwhile
            return messages

        try:
            result = run_agent(client, task, child_tools(), model=model, max_iters=max_iters,
                               system_prompt=system_prompt, trace=trace, on_step=spend,
                               prepare=still_in_budget)
        except BudgetExceeded as exc:
            raise DelegationError(f"the helper was stopped: {exc}. Continue with your own "
                                  "tools.") from None
        finally:
            if parent is not None:
                parent.children = list(trace)
        if result.stop_reason is not StopReason.ANSWERED:
            reason = result.stop_reason.value
            raise DelegationError(f"the helper stopped without an answer ({reason}): "
                                  f"{result.message}")
        return result.answer or "(the helper answered with an empty message)"

    registry.register(delegate, DELEGATE, timeout=None)
    return registry
