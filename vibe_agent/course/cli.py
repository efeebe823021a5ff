"""Command line: `python -m vibe_agent demo | ask "问题" | record NAME | info | bench`.

Offline by default: without an API key the commands use the scripted reference
model (not an LLM; every table says so). With OPENAI_BASE_URL, OPENAI_API_KEY and
VIBE_AGENT_MODEL set they run live against that endpoint; VIBE_AGENT_MODE=local
uses the real SmolLM2 model on this machine.

Exit codes: 0 when every run answered, 1 when a brake or the provider stopped a
run, 2 for a configuration problem. The last line always says why.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import httpx2
import openai

from ..loop import AgentResult, run_agent
from ..trace import TraceStep, render_step
from ..world import World
from .client import ClientInfo, ConfigError, client_info, make_client, settings

EXIT_OK, EXIT_STOPPED, EXIT_CONFIG = 0, 1, 2


def _cli_mode(requested: str | None) -> str:
    """The CLI's default differs from notebooks': offline means the reference model."""
    env = settings()
    return (requested or env.get("VIBE_AGENT_MODE")
            or ("live" if env.get("OPENAI_API_KEY") else "reference"))


def _connect(args: argparse.Namespace) -> tuple[openai.OpenAI, ClientInfo]:
    """The client for the chosen mode and its info; offline, pages come from the stand-ins."""
    client = make_client(_cli_mode(args.mode), args.cassette)
    info = client_info(client)
    print(info.describe())
    if info.mode == "reference":
        from .scenarios import BUNDLED_PAGES_NOTE, BundledPages

        info.world = World(http=httpx2.Client(transport=BundledPages()))
        print(f"网页：{BUNDLED_PAGES_NOTE}")
    print()
    return client, info


def _print_step(step: TraceStep) -> None:
    print("  " + render_step(step), flush=True)


def _tokens(result: AgentResult) -> str:
    total = result.total_tokens
    return "n/a" if total is None else str(total)


def cmd_ask(args: argparse.Namespace) -> int:
    from ..tools import demo_registry

    client, info = _connect(args)
    result = run_agent(client, args.question, demo_registry(info.world),
                       model=info.model, max_iters=args.max_iters, on_step=_print_step)
    print()
    if result.ok:
        print(result.answer)
        return EXIT_OK
    print(f"停止（{result.stop_reason.value}）：{result.message}")
    return EXIT_STOPPED


def cmd_demo(args: argparse.Namespace) -> int:
    from ..tools import demo_registry
    from .scenarios import DEMO_OPTIONS, DEMO_TASKS

    client, info = _connect(args)
    registry = demo_registry(info.world)
    rows = []
    for task in DEMO_TASKS:
        print(f"任务 {task.number}：{task.question}")
        result = run_agent(client, task.question, registry, model=info.model,
                           max_iters=args.max_iters, on_step=_print_step, **DEMO_OPTIONS)
        verdict = "✓" if task.judge(result) else "✗"
        rows.append((task.number, verdict, result))
        print()
    print(f"{'#':<3}{'判定':<5}{'停止原因':<16}{'模型调用':<9}{'tokens':<8}回答")
    for number, verdict, result in rows:
        answer = " ".join((result.answer or result.message).split())[:60]
        print(f"{number:<3}{verdict:<6}{result.stop_reason.value:<18}{result.model_calls:<12}"
              f"{_tokens(result):<8}{answer}")
    if info.provenance.get("source") == "scripted-reference":
        print("\n注：脚本参考模型是确定性的程序，不是 LLM；它不报告 token 数（显示为 n/a）。")
    stopped = [r for _, _, r in rows if not r.ok]
    if stopped:
        print(f"{len(stopped)} 个任务没有正常回答：{stopped[0].message}")
        return EXIT_STOPPED
    print("四个任务都给出了回答。")
    return EXIT_OK


def cmd_record(args: argparse.Namespace) -> int:
    from . import make_notebooks
    from .scenarios import SCENARIOS

    lessons = {p.stem: p for p in sorted(make_notebooks.SOLUTIONS_DIR.glob("*.ipynb"))}
    names = [*SCENARIOS, *lessons] if args.all else args.scenarios
    unknown = [n for n in names if n not in SCENARIOS and n not in lessons]
    if not names or unknown:
        print(f"请给出场景名、课程笔记本名或 --all。可用：{', '.join([*SCENARIOS, *lessons])}",
              file=sys.stderr)
        return EXIT_CONFIG
    if args.source:
        os.environ["VIBE_AGENT_RECORD_SOURCE"] = args.source
    for name in names:
        if name in SCENARIOS:
            _record_scenario(name, args)
        else:  # a lesson: run its solution notebook in record mode, then store fresh outputs
            command = f"python -m vibe_agent record {name}" + (
                f" --source {args.source}" if args.source else "")
            make_notebooks.execute_notebook(lessons[name], {"VIBE_AGENT_MODE": "record",
                                                            "VIBE_AGENT_RECORDED_WITH": command})
            make_notebooks.refresh([name])
            print(f"已录制并刷新笔记本 {name}")
    if any(n in lessons for n in names):
        make_notebooks.build(make_notebooks.SOLUTIONS_DIR, make_notebooks.NOTEBOOKS_DIR)
        print("已重新生成 notebooks/ 里的学员版笔记本。")
    return EXIT_OK


def _record_scenario(name: str, args: argparse.Namespace) -> None:
    from .scenarios import SCENARIOS, BundledPages

    scenario = SCENARIOS[name]
    pages = None if args.pages == "network" else BundledPages()
    client = make_client("record", name, source=scenario.source, pages=pages)
    info = client_info(client)
    info.provenance["scenario"] = f"{name}: {scenario.about}"
    scenario.run(client, info.model, info.world)
    path = info.cassette.save()
    chats = sum(1 for i in info.cassette.interactions if i["kind"] == "chat")
    print(f"已录制 {name}（来源 {info.provenance['source']}，{chats} 次模型调用）→ {path}")


def cmd_info(args: argparse.Namespace) -> int:
    client = make_client(args.mode, args.cassette)
    print(client_info(client).describe())
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m vibe_agent",
                                     description="Vibe Agent 练习册的命令行。")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--mode", choices=["replay", "live", "local", "reference"],
                       help="运行模式（默认：有 key 时 live，否则脚本参考模型）")
        p.add_argument("--cassette", help="回放模式使用的录音名")

    demo = sub.add_parser("demo", help="运行四个演示任务并打印 trace 与汇总表")
    common(demo)
    demo.add_argument("--max-iters", type=int, default=6)
    demo.set_defaults(func=cmd_demo)

    ask = sub.add_parser("ask", help="让 Agent 回答一个问题")
    ask.add_argument("question")
    common(ask)
    ask.add_argument("--max-iters", type=int, default=6)
    ask.set_defaults(func=cmd_ask)

    record = sub.add_parser("record", help="重新录制 cassette")
    record.add_argument("scenarios", nargs="*")
    record.add_argument("--all", action="store_true", help="录制全部场景")
    record.add_argument("--source", choices=["reference", "local", "live"],
                        help="录制来源（默认：场景自己的来源）")
    record.add_argument("--pages", choices=["bundled", "network"], default="bundled",
                        help="网页来自课程自带的页面（默认，离线）还是真实网络")
    record.set_defaults(func=cmd_record)

    info = sub.add_parser("info", help="显示当前运行模式与录音来源")
    common(info)
    info.set_defaults(func=cmd_info)

    from . import bench  # `bench` lives in its own module: bench.add_parser / bench.main
    bench.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"配置问题：{exc}", file=sys.stderr)
        return EXIT_CONFIG
