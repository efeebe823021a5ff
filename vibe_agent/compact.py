"""Compaction: when the history no longer fits, its middle becomes a summary.

Every round resends the whole history (lesson 07), so a long task reaches the model's
context window. Compaction keeps the head and the tail and replaces the middle:

    [system, first user, r1, r2, ..., r8, r9]       r = a round: one assistant message
                    |                                   with the tool messages answering it
                    v   summarize(r1 ... r7)
    [system, first user, summary, r8, r9]            keep_last_rounds=2

- The system prompt and the first user message (the task and its rules) are kept
  verbatim: a summary may forget a rule, the original cannot.
- A round is never cut: a tool message without its assistant message breaks the
  tool_calls rules (OpenAI answers HTTP 400).
- Nothing is lost: `Compaction` archives the full history (JSONL) before each
  compaction, and can offload a long tool result to a file in the workspace, the
  history keeping its head and the path (the model can `read_file` it later).

`compact(messages, summarize)` is the pure function; `Compaction(...)` is the loop's
layer (`run_agent(..., layers=[Compaction(summarize, budget=...)])`): it compacts when
the last reported prompt tokens pass a budget, and when the provider answers that the
context is too long (then the round is retried once). Two summarisers: `model_summarizer`
(one extra chat request) and `scripted_summarizer` (rules that extract facts: not an LLM).
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai

from .layers import Layer
from .reply import clean_text, provider_failure
from .stops import Stop, StopReason
from .trace import TraceStep, shorten

Message = dict[str, Any]
Summarizer = Callable[[list[Message]], str]

SUMMARY_HEADER = "[Summary of the earlier conversation: {count} messages were compacted into this]"
SUMMARY_PROMPT = (
    "You compact the history of a coding agent so that it can go on with its task. "
    "Summarise the conversation below in at most 200 words. Keep, word for word: the task "
    "and any rule the user gave, the file paths read and what was found in them, the files "
    "changed and how, the last test result (failing test names and error messages), the "
    "decisions taken, and what is left to do. Write only the summary."
)
OFFLOAD_DIR = ".tool_results"  # inside the workspace, where long tool results are saved


# ---------------------------------------------------------------------------
# Rounds and the pure compaction
# ---------------------------------------------------------------------------


def split_rounds(messages: list[Message]) -> list[list[Message]]:
    """The history cut into rounds, in order; joined again they give `messages`.

    A round is one assistant message together with every tool message answering its
    tool_calls, or one message standing alone (system, user, an assistant without calls).

    Raises:
        ValueError: a tool message that answers no call of the assistant message before
            it (the history already breaks the tool_calls rules).
    """
    rounds: list[list[Message]] = []
    pending: set[str] = set()  # ids of the current round's calls not yet answered
    for i, message in enumerate(messages):
        if message.get("role") == "tool":
            if message.get("tool_call_id") not in pending:
                raise ValueError(f"messages[{i}] is a tool message answering "
                                 f"{message.get('tool_call_id')!r}, which no assistant "
                                 "message right before it asked for")
            pending.discard(message["tool_call_id"])
            rounds[-1].append(message)
            continue
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        pending = {call.get("id") for call in calls or []}
        rounds.append([message])
    return rounds


def head_and_rounds(messages: list[Message]) -> tuple[list[Message], list[list[Message]]]:
    """The head (everything up to and including the first user message) and the rounds
    after it. Without a user message the head is the leading system messages."""
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
    if first_user is None:
        first_user = next((i for i, m in enumerate(messages) if m.get("role") != "system"),
                          len(messages)) - 1
    return messages[:first_user + 1], split_rounds(messages[first_user + 1:])


def summary_message(summary: str, count: int) -> Message:
    """The message that stands for `count` compacted messages (a user message: every
    provider accepts one there, and it does not claim to be the system's rules)."""
    return {"role": "user", "content": f"{SUMMARY_HEADER.format(count=count)}\n{summary}"}


def is_summary(message: Message) -> bool:
    """True for a message `compact` wrote."""
    return message.get("role") == "user" and str(message.get("content") or "").startswith(
        "[Summary of the earlier conversation:")


def compact(messages: list[Message], summarize: Summarizer, *,
            keep_last_rounds: int = 2) -> list[Message]:
    """A new history whose middle rounds are replaced by one summary message.

    [system, first user message, summary, *the last `keep_last_rounds` rounds], all
    verbatim but the summary. With at most `keep_last_rounds` rounds after the first
    user message, an equal copy and `summarize` is not called. The input is never
    modified; the result keeps the tool_calls rules.

    Args:
        messages: the history (system, first user message, then rounds).
        summarize: called once with exactly the replaced messages, in order; returns text.
        keep_last_rounds: how many of the newest rounds stay verbatim (0 or more).
    """
    if keep_last_rounds < 0:
        raise ValueError(f"keep_last_rounds={keep_last_rounds}: use 0 or more")
    head, rounds = head_and_rounds(messages)
    if len(rounds) <= keep_last_rounds:
        return copy.deepcopy(messages)
    cut = len(rounds) - keep_last_rounds
    replaced = [message for one in rounds[:cut] for message in one]
    summary = summarize(copy.deepcopy(replaced))
    if not isinstance(summary, str):
        raise TypeError(f"summarize returned {type(summary).__name__}, not str")
    kept = [message for one in rounds[cut:] for message in one]
    return copy.deepcopy([*head, summary_message(summary, len(replaced)), *kept])


# ---------------------------------------------------------------------------
# Summarisers
# ---------------------------------------------------------------------------


def transcript(messages: list[Message], max_chars: int = 12_000) -> str:
    """Messages as plain text for a summariser (tool calls and results spelled out).

    Longer than `max_chars`, the middle is cut and the cut is said: the first quarter
    (the task, when it is among them) and the newest part stay."""
    names: dict[str, str] = {}
    lines = []
    for m in messages:
        role = str(m.get("role") or "?").upper()
        if m.get("content"):
            label = f"TOOL RESULT ({names.get(m.get('tool_call_id', ''), '?')})" \
                if m.get("role") == "tool" else role
            lines.append(f"{label}: {m['content']}")
        for call in m.get("tool_calls") or []:
            function = call.get("function") or {}
            names[call.get("id", "")] = function.get("name") or "?"
            lines.append(f"{role} CALLS {function.get('name')}({function.get('arguments')})")
    text = "\n".join(lines)
    if len(text) > max_chars:
        head = max_chars // 4
        text = (f"{text[:head]}\n[... {len(text) - max_chars} characters cut here ...]\n"
                f"{text[len(text) - (max_chars - head):]}")
    return text


def summary_request(messages: list[Message], prompt: str = SUMMARY_PROMPT,
                    max_chars: int = 12_000) -> list[Message]:
    """The messages a model summariser sends for `messages`: its prompt, then the
    transcript (what a summary costs in prompt tokens can be counted on it)."""
    return [{"role": "system", "content": prompt},
            {"role": "user", "content": transcript(messages, max_chars)}]


@dataclass
class ModelSummarizer:
    """A summariser that asks a model: one chat request per call, without tools.

    `usage` keeps each call's reported usage (None where none was reported): a summary
    costs tokens too.
    """

    client: openai.OpenAI
    model: str
    prompt: str = SUMMARY_PROMPT
    max_chars: int = 12_000
    options: dict[str, Any] = field(default_factory=dict)
    usage: list[dict[str, int] | None] = field(default_factory=list)

    def __call__(self, messages: list[Message]) -> str:
        request: dict[str, Any] = {"model": self.model, "messages": summary_request(
            messages, self.prompt, self.max_chars), "temperature": 0} | self.options
        response = self.client.chat.completions.create(**request)
        self.usage.append(response.usage.model_dump(include={
            "prompt_tokens", "completion_tokens", "total_tokens"}) if response.usage else None)
        return (response.choices[0].message.content or "").strip()


def model_summarizer(client: openai.OpenAI, *, model: str, prompt: str = SUMMARY_PROMPT,
                     max_chars: int = 12_000, **options: Any) -> ModelSummarizer:
    """A summariser that asks `model` through `client` (one extra request per call).

    Args:
        client: an `openai.OpenAI` client.
        model: the model that writes the summary.
        prompt: the system prompt: what a coding agent needs to go on.
        max_chars: the longest transcript sent (its middle is cut beyond it).
        options: more request fields (e.g. max_tokens=300).
    """
    return ModelSummarizer(client, model, prompt, max_chars, options)


REFERENCE_LABEL = "scripted summary: facts extracted by rules, not written by an LLM"
_FACTS = ("Task", "Files read", "Searched for", "Files changed", "Last test result",
          "Failing tests", "Errors", "Notes")
MAX_NOTES = 5  # the newest assistant notes kept: facts carry over, so a summary of a
#                summary must not grow by one note per round forever


def scripted_summarizer(messages: list[Message]) -> str:
    """The scripted summariser: deterministic rules, NOT an LLM.

    It extracts what a coding agent needs to go on: the task (a user message), the
    files read, the searches, the edits made, the last test result with its failing
    tests and error lines, and the assistant's newest `MAX_NOTES` notes. Facts of an
    earlier summary in `messages` are carried over.
    """
    facts: dict[str, list[str]] = {key: [] for key in _FACTS}

    def add(key: str, value: str) -> None:
        if value and value not in facts[key]:
            facts[key].append(value)

    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for m in messages:
        text = str(m.get("content") or "")
        if is_summary(m):
            for line in text.splitlines()[1:]:
                key, _, values = line.partition(": ")
                for value in values.split(" | ") if key in facts else ():
                    add(key, value)
        elif m.get("role") == "user":
            add("Task", shorten(text, 300))
        elif m.get("role") == "assistant":
            add("Notes", shorten(text, 120))
            for call in m.get("tool_calls") or []:
                calls[call.get("id", "")] = _parsed(call)
                _note_call(*calls[call.get("id", "")], add)
        elif m.get("role") == "tool":
            name, _ = calls.get(m.get("tool_call_id", ""), ("?", {}))
            if name == "run_command":
                _note_test_run(text, facts)
    facts["Notes"] = facts["Notes"][-MAX_NOTES:]
    lines = [f"{key}: {' | '.join(values)}" for key, values in facts.items() if values]
    return "\n".join([f"({REFERENCE_LABEL})", *lines])


def _parsed(call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    function = call.get("function") or {}
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except ValueError:
        arguments = {}
    return str(function.get("name") or "?"), arguments if isinstance(arguments, dict) else {}


def _note_call(name: str, arguments: dict[str, Any], add: Callable[[str, str], None]) -> None:
    path = str(arguments.get("path") or "")
    if name == "read_file":
        add("Files read", path)
    elif name == "search_code":
        add("Searched for", str(arguments.get("pattern") or ""))
    elif name == "edit_file":
        edit = changed_lines(str(arguments.get("old") or ""), str(arguments.get("new") or ""))
        add("Files changed", f"{path}: {edit}")
    elif name == "write_file":
        add("Files changed", f"{path} (written whole)")


def changed_lines(old: str, new: str) -> str:
    """An edit as the lines it removed and added: '- a > b' '+ a >= b' (shortened)."""
    diff = difflib.ndiff(old.splitlines(), new.splitlines())
    lines = [line[:2] + line[2:].strip() for line in diff if line[:2] in ("- ", "+ ")]
    return shorten(" / ".join(lines), 200) or "(no line changed)"


_SUMMARY_LINE = re.compile(r"^=*\s*(\d+ (passed|failed|error)[^=]*?)\s*=*$", re.M)


def _note_test_run(text: str, facts: dict[str, list[str]]) -> None:
    """The newest test run replaces what an older one said (a run_command result starts
    with "exit code: N"; pytest's count line is there unless it runs with -qq)."""
    code = re.match(r"exit code: (-?\d+)", text)
    result = _SUMMARY_LINE.findall(text)
    if not code and not result:
        return
    said = [f"exit code {code.group(1)}"] if code else []
    facts["Last test result"] = [", ".join(said + ([result[-1][0]] if result else []))]
    facts["Failing tests"] = re.findall(r"^FAILED (\S+)", text, re.M)[:5]
    errors = [shorten(line[1:].strip(), 160) for line in re.findall(r"^E +\S.*$", text, re.M)]
    facts["Errors"] = errors[:3]


# ---------------------------------------------------------------------------
# The loop's hook
# ---------------------------------------------------------------------------


@dataclass
class CompactionEvent:
    """One compaction: when, why, how many messages, tokens before and after, the summary."""

    round: int
    reason: str  # "budget" (prompt tokens passed it) or "context_too_long" (the provider said)
    replaced: int  # messages replaced by the summary
    tokens_before: int | None  # the last prompt_tokens the API reported before it
    tokens_after: int | None  # the next prompt_tokens the API reported (None until then)
    summary: str
    step: TraceStep


@dataclass
class Compaction(Layer):
    """What the layer `run_agent(..., layers=[Compaction(...)])` does when the history
    grows too long (events `before_model`, `model_failed`, `recorded`, `tool_result`).

    Args:
        summarize: the summariser (`scripted_summarizer`, `model_summarizer(...)`, yours).
        budget: compact before a round when the last reported prompt_tokens passed this
            (None: only when the provider answers that the context is too long).
        keep_last_rounds: how many of the newest rounds stay verbatim.
        archive: a JSONL file; before each compaction one line with the full history.
        workspace: the workspace folder; set, a tool result longer than `offload_over`
            characters is saved under `.tool_results/` there, the history keeping its
            first `head_chars` characters and the path (None: no offloading).
        offload_over: the longest tool result kept whole in the history.
        head_chars: how much of an offloaded result stays in the history.
    """

    summarize: Summarizer
    budget: int | None = None
    keep_last_rounds: int = 2
    archive: str | Path | None = None
    workspace: str | Path | None = None
    offload_over: int = 4_000
    head_chars: int = 1_000
    events: list[CompactionEvent] = field(default_factory=list)
    offloaded: list[Path] = field(default_factory=list)
    _last_prompt_tokens: int | None = field(default=None, init=False, repr=False)

    def recorded(self, step: TraceStep) -> None:
        """Every step the loop records: model steps bring the reported prompt tokens."""
        if step.kind != "model" or step.prompt_tokens is None:
            return
        self._last_prompt_tokens = step.prompt_tokens
        for event in self.events:
            if event.tokens_after is None:
                event.tokens_after = step.prompt_tokens
                event.step.content = _line(event)

    def before_model(self, messages: list[Message], round_no: int,
                     record: Callable[[TraceStep], None]) -> None:
        """Before a round: compact when the last reported prompt tokens passed the budget."""
        tokens = self._last_prompt_tokens
        if self.budget is not None and tokens is not None and tokens > self.budget:
            self.run(messages, round_no, record, "budget")

    def model_failed(self, failed: Stop, messages: list[Message], round_no: int,
                     record: Callable[[TraceStep], None]) -> bool:
        """After a failed call: True when it was a context overflow and the history was
        compacted, so the round may be retried (once: the loop does not ask again)."""
        if failed.reason is not StopReason.CONTEXT_TOO_LONG:
            return False
        return self.run(messages, round_no, record, "context_too_long")

    def run(self, messages: list[Message], round_no: int, record: Callable[[TraceStep], None],
            reason: str) -> bool:
        """Compact `messages` in place (archived first); False when nothing could be."""
        if len(head_and_rounds(messages)[1]) <= self.keep_last_rounds:
            return False
        self._archive(messages, round_no, reason)
        seen: list[list[Message]] = []

        def summarize(replaced: list[Message]) -> str:
            seen.append(replaced)
            return self.summarize(replaced)

        try:
            compacted = compact(messages, summarize, keep_last_rounds=self.keep_last_rounds)
        except openai.APIError as exc:
            raise Stop(StopReason.PROVIDER_ERROR,
                       f"压缩历史时摘要请求失败：{provider_failure(exc)}") from exc
        summary = str(compacted[len(head_and_rounds(messages)[0])]["content"])
        step = TraceStep(round=round_no, kind="compact", trigger=reason, result=summary)
        event = CompactionEvent(round_no, reason, len(seen[0]), self._last_prompt_tokens,
                                None, summary, step)
        step.content = _line(event)
        messages[:] = compacted
        self.events.append(event)
        record(step)
        return True

    def _archive(self, messages: list[Message], round_no: int, reason: str) -> None:
        if self.archive is None:
            return
        path = Path(self.archive)
        path.parent.mkdir(parents=True, exist_ok=True)
        line = {"compaction": len(self.events) + 1, "round": round_no, "reason": reason,
                "messages": messages}
        with path.open("a", encoding="utf-8") as file:
            file.write(json.dumps(line, ensure_ascii=False) + "\n")

    def tool_result(self, step: TraceStep, content: str) -> str:
        """What the history keeps of a tool step's result (see `offload`)."""
        return self.offload(clean_text(step.tool_call_id or ""), step.result or "", content)

    def offload(self, call_id: str, result: str, content: str) -> str:
        """What the history keeps of a tool result: `content` (already capped by the
        loop) or, when offloading is on and the result is long, its head and a path."""
        if self.workspace is None or len(result) <= self.offload_over:
            return content
        path = self._offload_file(call_id)
        if path is None:  # the folder is not ours to write: keep the loop's capped text
            return content
        with path.open("x", encoding="utf-8") as file:  # "x": never through a planted link
            file.write(result)
        self.offloaded.append(path)
        relative = f"{OFFLOAD_DIR}/{path.name}"
        return (f"{result[:self.head_chars]}\n\n[offloaded by the agent loop: this result has "
                f"{len(result)} characters; the first {self.head_chars} are shown. The whole "
                f"result is in the file {relative}: read it with read_file(path=\"{relative}\", "
                "start_line=..., end_line=...)]")


    def _offload_file(self, call_id: str) -> Path | None:
        """A new file under the workspace's `.tool_results/`, or None when that folder is
        a symbolic link or not a folder: the agent's commands can create either, and the
        harness, which runs outside the sandbox, must not write where a link points."""
        root = Path(self.workspace or ".").resolve()
        folder = root / OFFLOAD_DIR
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            return None
        folder.mkdir(exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9_-]", "_", call_id)[:40] or "call"
        path = folder / f"{len(self.offloaded) + 1:03d}_{safe}.txt"
        return None if path.exists() or path.is_symlink() else path


def _line(event: CompactionEvent) -> str:
    after = "?" if event.tokens_after is None else event.tokens_after
    before = "n/a" if event.tokens_before is None else event.tokens_before
    why = "prompt tokens 超过预算" if event.reason == "budget" else "模型服务说上下文太长"
    return (f"压缩历史（{why}）：{event.replaced} 条消息换成 1 条摘要；"
            f"prompt tokens {before} → {after}")


def archived_messages(path: str | Path) -> list[list[Message]]:
    """The histories an archive holds, one per compaction, oldest first."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["messages"] for line in lines if line.strip()]
