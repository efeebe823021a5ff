"""Sessions of the terminal agent: saved, resumed, cleared (/init is `agents_md.py`).

After every turn the session writes two files side by side (atomically):

    x.json            the trajectory: lesson 07's trace (`Trace.from_json` reads it) with
                      one `user` step for each thing the person did to the conversation:
                      a request, /undo's note, /clear, /compact, a resume
    x.session.json    what resuming needs: {"format": "vibe_agent-session", "version": 1,
                      "workspace", "model", "task", "saved_at", "trajectory": "x.json",
                      "messages": the history as sent to the API,
                      "files": {path: sha256 | "link:<target>" | "dir" | ...} at save}

    code DIR --continue       the last session with a conversation in DIR (a file in the
                              state folder, sessions/last/<key>, names it)
    code --resume PATH        a given session (x.json or x.session.json); with no folder
                              given, in its own workspace (a course task: a fresh copy)

Resuming restores the messages (every tool call answered, or answered now with a note)
and the trace, and writes a NEW pair of files: the old ones are never changed. The
system prompt is rebuilt from today's AGENTS.md and notes. /undo's snapshots are not
saved, so /undo starts afresh; and when the files differ from their digests at save,
the person is shown which, and the model is told in one English note. A file that is
not a session, is cut short or breaks the API's rules is refused with a Chinese
message; it is only read, never changed.

`/clear` empties the history (the next request starts from the system prompt, rebuilt
from today's AGENTS.md); the trajectory and /undo go on.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .screen import visible
from .trace import Trace, TraceStep, shorten

FORMAT, VERSION = "vibe_agent-session", 1
SUFFIX = ".session.json"
MAX_SESSION_BYTES = 64_000_000  # a bigger session file is not read
MAX_TRAJECTORY_BYTES = 256_000_000  # nor a bigger trajectory
ROLES = ("system", "user", "assistant", "tool")
UNANSWERED = "[the session ended before this call was answered; it may not have run]"
RESUMED_NOTE = ("[This conversation was resumed from a saved session. Since it was saved, "
                "these workspace paths changed: {paths}. Read a file again before you edit it.]")


class SessionError(Exception):
    """A session cannot be resumed; the message says why, in Chinese, for the person."""


@dataclass
class SavedSession:
    """A session read back from its file."""

    path: Path  # the .session.json file
    workspace: str
    model: str
    saved_at: str
    messages: list[dict[str, Any]]
    trace: Trace
    files: dict[str, str] | None  # None: the workspace could not be read at save
    task: str | None = None  # the course task it worked on (None: a folder of one's own)


@dataclass
class Resume:
    """What `code --continue` / `--resume` hand to the Session.

    Args:
        last: the file that names this session's file, for the next --continue.
        saved: the session to go on with (None: a new conversation).
        task: the course task's name (saved, so that `--resume PATH` alone reopens it).
    """

    last: Path
    saved: SavedSession | None = None
    task: str | None = None


# ---------------------------------------------------------------------------
# Command line: the two flags, and which session they choose
# ---------------------------------------------------------------------------


def add_arguments(parser: Any) -> None:
    """Add --continue and --resume to `code`'s parser."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--continue", dest="continue_session", action="store_true",
                       help="接着这个文件夹（或这个课程任务）上一次的会话：恢复对话历史")
    group.add_argument("--resume", type=Path, metavar="PATH",
                       help="接着一个保存下来的会话（运行记录 x.json 或 x.session.json）；"
                            "不给文件夹时回到它原来的工作区")


def place_of(args: Any) -> tuple[Path | None, str | None]:
    """(folder, course task) `code` opens when neither DIR nor --task is given: with
    --continue this folder; with --resume the session's course task (in a fresh copy),
    else its own workspace; (None, None) otherwise."""
    if getattr(args, "continue_session", False):
        return Path.cwd(), None
    if getattr(args, "resume", None) is None:
        return None, None
    try:
        saved = read(args.resume)
    except SessionError:
        return args.resume.parent, None  # the error is reported once, by `chosen`
    return (None, saved.task) if saved.task else (Path(saved.workspace), None)


def last_file(state_dir: Path, key: str) -> Path:
    """The file naming the last session with a conversation for `key` (a workspace)."""
    return state_dir / "sessions" / "last" / key


def chosen(args: Any, last: Path, task: str | None = None) -> Resume:
    """The session --continue or --resume chooses (raises SessionError).

    Args:
        args: `code`'s arguments.
        last: the file naming the last session of this workspace (`last_file`).
        task: the course task's name, None for a folder of one's own.
    """
    if getattr(args, "resume", None) is not None:
        return Resume(last, read(args.resume), task)
    if not getattr(args, "continue_session", False):
        return Resume(last, task=task)
    try:
        named = last.read_text("utf-8").strip()
    except OSError:
        raise SessionError("--continue：这个工作区还没有可以接着的会话（以前的会话都没有对话）。"
                           "不加 --continue 就开始一个新的会话。") from None
    return Resume(last, read(Path(named)), task)


# ---------------------------------------------------------------------------
# Writing and reading the session file
# ---------------------------------------------------------------------------


def session_file(path: Path) -> Path:
    """x.session.json for the trajectory x.json (a session file stays itself)."""
    if path.name.endswith(SUFFIX):
        return path
    return path.with_name(path.name.removesuffix(".json") + SUFFIX)


def digests(session: Any) -> dict[str, str] | None:
    """What every workspace entry is now: a file's sha256, a link's target, "dir"...
    (the undo store's scan: a file whose stat did not change is not read again)."""
    try:
        entries, _ = session.store.scan(session.root, keep=False)
    except OSError:
        return None
    return {path: entry.digest or "unreadable" if entry.kind == "file" else
            f"link:{entry.target}" if entry.kind == "link" else entry.kind
            for path, entry in entries.items()}


def write(session: Any) -> None:
    """Write the session file beside the trajectory, and name it for --continue."""
    target = session_file(session.trajectory)
    data = {"format": FORMAT, "version": VERSION, "workspace": str(session.root),
            "model": session.model, "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "task": session.resume.task if session.resume else None,
            "trajectory": session.trajectory.name, "messages": session.messages,
            "files": digests(session)}
    _replace(target, json.dumps(data, ensure_ascii=False, indent=1))
    if session.resume is not None and session.messages:
        _replace(session.resume.last, str(target.resolve()))


def _replace(path: Path, text: str) -> None:
    """Write `path` whole or not at all (a lone surrogate is kept as its JSON escape)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(path.name + ".partial")
    temp.write_text(text, encoding="utf-8", errors="backslashreplace")
    os.replace(temp, path)


def read(path: Path) -> SavedSession:
    """The session saved at `path` (its .session.json, or the trajectory beside it).

    Raises SessionError (Chinese, escaped for the screen) for a missing, foreign,
    cut-short or broken file; the file is only read."""
    try:
        return _read(path)
    except SessionError as exc:  # names and texts from the file: shown escaped
        raise SessionError(visible(str(exc))) from None


def _read_capped(path: Path, limit: int) -> bytes:
    """A file's bytes; SessionError when it holds more than `limit`."""
    with open(path, "rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise SessionError(f"{path} 太大了（超过 {limit:,} 字节），没有读它。")
    return data


def _read(path: Path) -> SavedSession:
    target = session_file(path)
    where = f"会话文件 {target}"
    try:
        data = json.loads(_read_capped(target, MAX_SESSION_BYTES))
    except FileNotFoundError:
        extra = ("（它旁边只有运行记录，没有会话文件：旧版本存的，没法接着）"
                 if path.is_file() else "")
        raise SessionError(f"{where} 不存在{extra}。") from None
    except OSError as exc:
        raise SessionError(f"{where} 读不了（{exc.strerror or exc}）。") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise SessionError(f"{where} 不是完整的 JSON（可能被截断或损坏了：{exc}）。"
                           "文件没有改动。") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SessionError(f"{where} 不是 vibe_agent 的会话文件。文件没有改动。")
    if data.get("version") != VERSION:
        raise SessionError(f"{where} 的格式版本是 {data.get('version')!r}，"
                           f"这个版本只认识 {VERSION}。")
    problem = _shape_problem(data)
    if problem:
        raise SessionError(f"{where} 的内容不对（{problem}）。文件没有改动。")
    trace = _trace(target.with_name(data["trajectory"]), where)
    return SavedSession(target, data["workspace"], data["model"], str(data.get("saved_at")),
                        answered(data["messages"]), trace, data["files"], data.get("task"))


def _shape_problem(data: dict[str, Any]) -> str | None:
    """What is wrong with a session file's fields (None: nothing)."""
    for name in ("workspace", "model", "trajectory"):
        if not isinstance(data.get(name), str) or not data[name]:
            return f"{name} 应该是非空的字符串"
    if not isinstance(data.get("task"), (str, type(None))):
        return "task 应该是字符串或 null"
    if "/" in data["trajectory"] or data["trajectory"] in (".", ".."):
        return "trajectory 应该是同一个文件夹里的文件名"
    files = data.get("files")
    if files is not None and not (isinstance(files, dict) and all(
            isinstance(value, str) for value in files.values())):
        return "files 应该是 {路径: 摘要}"
    messages = data.get("messages")
    if not isinstance(messages, list):
        return "messages 应该是列表"
    for number, message in enumerate(messages, 1):
        problem = _message_problem(message, first=number == 1)
        if problem:
            return f"第 {number} 条消息：{problem}"
    return None


def _message_problem(message: Any, first: bool) -> str | None:
    """What breaks the API's rules in one message (None: nothing)."""
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        return "不是 {role: system/user/assistant/tool, ...}"
    role, content = message["role"], message.get("content")
    if (role == "system") != first:
        return "system 消息只能是第一条，第一条也只能是 system"
    if not (isinstance(content, str) or content is None and role == "assistant"
            or isinstance(content, list) and all(isinstance(part, dict) for part in content)):
        return "content 不是文字"
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        return "tool 消息没有 tool_call_id"
    calls = message.get("tool_calls")
    if calls is not None and (role != "assistant" or not isinstance(calls, list) or not all(
            isinstance(call, dict) and isinstance(call.get("id"), str)
            and isinstance(call.get("function"), dict)
            and isinstance(call["function"].get("name"), str)
            and isinstance(call["function"].get("arguments"), str) for call in calls)):
        return "tool_calls 的格式不对"
    return None


def answered(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history with every tool call answered, as the API requires: a call the saved
    session left unanswered (it ended mid-turn) is answered with UNANSWERED right after
    its own answers. A tool message that answers no call of the assistant message before
    it raises SessionError."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []  # the calls of the last assistant message not yet answered

    def close() -> None:
        out.extend({"role": "tool", "tool_call_id": id, "content": UNANSWERED} for id in pending)
        pending.clear()

    for message in messages:
        if message["role"] == "tool":
            if message["tool_call_id"] not in pending:
                raise SessionError(f"会话文件里有一条 tool 消息（{message['tool_call_id']!r}）"
                                   "不是在回答它前面的调用。文件没有改动。")
            pending.remove(message["tool_call_id"])
        else:
            close()
        out.append(message)
        if message["role"] == "assistant":
            pending = [call["id"] for call in message.get("tool_calls") or []]
    close()
    return out


def _trace(path: Path, where: str) -> Trace:
    """The trajectory a session file names."""
    try:
        return Trace.from_json(_read_capped(path, MAX_TRAJECTORY_BYTES).decode("utf-8"))
    except OSError as exc:
        raise SessionError(f"{where} 的运行记录 {path.name} 读不了（{exc.strerror or exc}）。"
                           ) from None
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:  # not a trace
        raise SessionError(f"{where} 的运行记录 {path.name} 不是完整的 trace（{exc}）。"
                           "文件没有改动。") from None


# ---------------------------------------------------------------------------
# Resuming inside the Session
# ---------------------------------------------------------------------------


def restore(session: Any, saved: SavedSession) -> str:
    """Put the saved conversation into `session`; returns the note for the banner."""
    messages = [dict(message) for message in saved.messages]
    if messages:  # today's rules, AGENTS.md and notes, as a new session would send them
        messages[0] = {"role": "system", "content": session.system_prompt or ""}
    session.messages[:] = messages
    session.trace[:0] = saved.trace
    requests = [step.content or "" for step in saved.trace if step.kind == "user"
                and step.trigger == "request"]
    told = (f"对话恢复了 {len(messages)} 条消息，最后一个请求是「{shorten(requests[-1], 60)}」"
            if messages and requests else f"对话恢复了 {len(messages)} 条消息" if messages
            else "那次会话的对话是空的（还没有请求，或者 /clear 过）")
    lines = [f"接着上次的会话（{saved.path}，保存于 {saved.saved_at}）：{told}。",
             "/undo 只能撤销这次打开之后的轮次：以前的快照没有保存。"]
    if saved.workspace != str(session.root):
        lines.append(f"这个会话原来的工作区是 {saved.workspace}，现在是 {session.root}。")
    if saved.model != session.model:
        lines.append(f"上次回答的模型是 {saved.model}，这次是 {session.model}。")
    changed = _changes(saved.files, digests(session))
    if changed is None:
        lines.append("看不出工作区有没有变（保存或现在读不了它）。")
    elif changed:
        names = "、".join(changed[:5]) + (f" 等 {len(changed)} 处" if len(changed) > 5 else "")
        lines.append(f"注意：上次保存之后工作区变了：{names}。"
                     + ("模型记得的是当时的样子（已经告诉它）。" if messages else ""))
    note = f"resumed from {saved.path}"
    if changed and messages:  # an empty history gets its system prompt first, from run_agent
        more = f" and {len(changed) - 20} more" if len(changed) > 20 else ""
        note = RESUMED_NOTE.format(paths=", ".join(changed[:20]) + more)
        session.messages.append({"role": "user", "content": note})
    session.trace.append(TraceStep(round=0, kind="user", trigger="resume", content=note))
    return visible("\n".join(lines), multiline=True)


def _changes(before: dict[str, str] | None, now: dict[str, str] | None) -> list[str] | None:
    """The paths that differ between two digest maps (None: one is unknown)."""
    if before is None or now is None:
        return None
    return sorted(path for path in before.keys() | now.keys() if before.get(path) != now.get(path))


def clear_command(session: Any) -> None:
    """/clear: a fresh conversation in the same workspace (recorded in the trajectory)."""
    from .memory import coding_system_prompt

    session.messages.clear()  # the next request starts with the system prompt alone
    session.todos.todo_write([])  # the plan belonged to that conversation
    if session.prompt_from_files:  # AGENTS.md and the notes as they are now
        session.system_prompt = coding_system_prompt(session.root, session.memory)
    session.record("/clear", "the conversation was cleared")
    session.save()
    session.console.print("已开始新的对话：模型不再记得前面说过的话。"
                          "工作区、运行记录和 /undo 都还在。")
