"""Command line: `python -m vibe_agent demo | ask "问题" | record NAME | info | bench | code`.

Offline by default: without an API key the commands use the scripted reference
model (not an LLM; every table says so); with `--cassette NAME` they replay that
recording, and what it lacks is answered by the reference model, labelled. With
OPENAI_BASE_URL, OPENAI_API_KEY and VIBE_AGENT_MODEL set they run live against
that endpoint; VIBE_AGENT_MODE=local uses the real SmolLM2 model on this machine.

Exit codes (the last line always says why):
    0    every run answered / the recording was saved
    1    a brake or the provider stopped a run
    2    a configuration or command-line problem
    3    a cassette problem: missing or damaged file, or a failed recording
    4    strict replay (`--mode replay`) met a request the cassette lacks
    130  interrupted (Ctrl-C)
`code -p` has its own codes (vibe_agent.course.headless: 3 refused, 4 the model
service failed). Nothing printed ever shows the API key or credentials in a URL.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

from ..loop import AgentResult, run_agent
from ..screen import trace_line, visible
from ..trace import TraceStep
from .cassette import CassetteError, RecordingFailed, ReplayMiss, promote_partial
from .chinese_argparse import ChineseArgumentParser, positive_int_type
from .client import (
    PAGES,
    ConfigError,
    CourseClient,
    cassette_dir,
    make_client,
    pages_words,
    resolve_mode,
    secrets_of,
    settings,
)
from .redact import Redactor

EXIT_OK, EXIT_STOPPED, EXIT_CONFIG, EXIT_CASSETTE, EXIT_MISS = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C

_redact = Redactor()  # replaced by the configured secrets once settings are read


def say(*parts: object, error: bool = False) -> None:
    """print(), with the key and URL credentials redacted."""
    text = " ".join(str(p) for p in parts)
    print(_redact(text), file=sys.stderr if error else sys.stdout, flush=True)


def _client(args: argparse.Namespace) -> CourseClient:
    """The client for the chosen mode, defaulting as notebooks do (live with a key, else
    offline); offline and reference, pages come from the course's stand-ins."""
    mode = resolve_mode(args.mode, settings())
    pages = "bundled" if mode in ("reference", "offline") else None
    return make_client(mode, args.cassette, pages=pages)


def _connect(args: argparse.Namespace) -> CourseClient:
    client = _client(args)
    say(client.describe())
    if client.provenance.get("pages"):
        say(f"网页：{pages_words(client.provenance['pages'])}")
    say()
    return client


def _print_step(step: TraceStep) -> None:
    say("  " + visible(trace_line(step)))  # in Chinese; the trace keeps its identifiers


def _tokens(result: AgentResult) -> str:
    total = result.total_tokens
    return "n/a" if total is None else str(total)


def cmd_ask(args: argparse.Namespace) -> int:
    from ..tools import demo_registry

    client = _connect(args)
    result = run_agent(client, args.question, demo_registry(client.world),
                       model=client.model, max_iters=args.max_iters, on_step=_print_step)
    say()
    if result.ok:
        say(result.answer)
        return EXIT_OK
    say(f"停止（{result.stop_reason.value}）：{result.message}")
    return EXIT_STOPPED


def cmd_demo(args: argparse.Namespace) -> int:
    from ..tools import demo_registry
    from .scenarios import DEMO_OPTIONS, DEMO_TASKS

    client = _connect(args)
    registry = demo_registry(client.world)
    rows = []
    for task in DEMO_TASKS:
        say(f"任务 {task.number}：{task.question}")
        result = run_agent(client, task.question, registry, model=client.model,
                           max_iters=args.max_iters, on_step=_print_step, **DEMO_OPTIONS)
        verdict = "✓" if task.judge(result) else "✗"
        rows.append((task.number, verdict, result))
        say()
    say(f"{'#':<3}{'判定':<5}{'停止原因':<16}{'模型调用':<9}{'tokens':<8}回答")
    for number, verdict, result in rows:
        answer = " ".join((result.answer or result.message).split())[:60]
        say(f"{number:<3}{verdict:<6}{result.stop_reason.value:<18}{result.model_calls:<12}"
            f"{_tokens(result):<8}{answer}")
    if client.provenance.get("source") == "scripted-reference":
        say("\n注：脚本参考模型是确定性的程序，不是 LLM；它不报告 token 数（显示为 n/a）。")
    stopped = [r for _, _, r in rows if not r.ok]
    if stopped:
        say(f"{len(stopped)} 个任务没有正常回答：{stopped[0].message}")
        return EXIT_STOPPED
    say("四个任务都给出了回答。")
    return EXIT_OK


def cmd_record(args: argparse.Namespace) -> int:
    from . import make_notebooks
    from .scenarios import SCENARIOS

    lessons = {p.stem: p for p in sorted(make_notebooks.SOLUTIONS_DIR.glob("*.ipynb"))}
    names = [*SCENARIOS, *lessons] if args.all else args.scenarios
    unknown = [n for n in names if n not in SCENARIOS and n not in lessons]
    if not names or unknown:
        say(f"请给出场景名、课程笔记本名或 --all。可用：{', '.join([*SCENARIOS, *lessons])}",
            error=True)
        return EXIT_CONFIG
    if args.source:
        os.environ["VIBE_AGENT_RECORD_SOURCE"] = args.source
    failed: list[str] = []
    for name in names:
        try:
            if name in SCENARIOS:
                _record_scenario(name, args)
            else:
                _record_lesson(name, lessons[name], args)
        except CassetteError as exc:  # one failed recording does not stop the others
            say(exc, error=True)
            failed.append(name)
    if any(n in lessons and n not in failed for n in names):
        make_notebooks.build(make_notebooks.SOLUTIONS_DIR, make_notebooks.NOTEBOOKS_DIR)
        say("已重新生成 notebooks/ 里的学员版笔记本。")
    if failed:
        say(f"{len(failed)} 份没有录成：{', '.join(failed)}。", error=True)
        return EXIT_CASSETTE
    return EXIT_OK


def _record_scenario(name: str, args: argparse.Namespace) -> None:
    from .pages import BundledPages
    from .scenarios import SCENARIOS

    scenario = SCENARIOS[name]
    pages = None if args.pages == "network" else BundledPages()
    client = make_client("record", name, source=scenario.source, pages=pages)
    source = os.environ.get("VIBE_AGENT_RECORD_SOURCE") or scenario.source
    client.provenance["recorded_with"] = f"python -m vibe_agent record {name} --source {source}"
    client.provenance["scenario"] = f"{name}: {scenario.about}"
    scenario.run(client, client.model, client.world)
    path = client.cassette.finish()
    chats = sum(1 for i in client.cassette.interactions if i["kind"] == "chat")
    say(f"已录制 {name}（来源 {client.provenance['source']}，{chats} 次模型调用）→ {path}")


def _record_lesson(name: str, notebook: os.PathLike[str], args: argparse.Namespace) -> None:
    """Run a lesson's solution notebook in record mode (its kernel writes NAME.json.partial
    files), replace each cassette whose recording is good, then store fresh outputs."""
    from . import make_notebooks

    command = f"python -m vibe_agent record {name}" + (
        f" --source {args.source}" if args.source else "")
    started = time.time() - 1
    try:
        make_notebooks.execute_notebook(notebook, {"VIBE_AGENT_MODE": "record",
                                                   "VIBE_AGENT_RECORDED_WITH": command})
    except Exception as exc:  # noqa: BLE001 - nbclient's cell errors: reported, not raised
        first = " ".join(str(exc).split())[:300]
        raise RecordingFailed(notebook, f"笔记本运行出错（{first}）",
                              "先在回放模式下把笔记本跑通，再录制") from None
    partials = [p for p in sorted(cassette_dir().glob("*.json.partial"))
                if p.stat().st_mtime >= started]
    problems = []
    for partial in partials:
        try:
            say(f"已录制 {promote_partial(partial)}")
        except CassetteError as exc:
            problems.append(str(exc))
    if problems:
        raise RecordingFailed(notebook, "；".join(problems), "看上面每份录制文件的原因")
    make_notebooks.refresh([name])
    say(f"已录制并刷新笔记本 {name}")


def cmd_info(args: argparse.Namespace) -> int:
    from .client import find_dotenv, live_limits

    client = _client(args)
    say(client.describe())
    if client.provenance.get("pages"):
        say(f"网页：{pages_words(client.provenance['pages'])}")
    env = settings()
    dotenv = find_dotenv()
    say(f".env 文件：{dotenv if dotenv else '没有（只读环境变量）'}")
    if env.get("OPENAI_BASE_URL"):
        say(f"OPENAI_BASE_URL：{env['OPENAI_BASE_URL']}")
    say(f"OPENAI_API_KEY：{'已配置' if env.get('OPENAI_API_KEY') else '没有配置'}")
    timeout, retries = live_limits(env)
    say(f"在线模式的等待：连接 {timeout.connect:g} s，响应 {timeout.read:g} s，重试 {retries} 次"
        "（VIBE_AGENT_CONNECT_TIMEOUT、VIBE_AGENT_TIMEOUT、VIBE_AGENT_MAX_RETRIES）")
    return EXIT_OK


# argparse type for --max-iters: a whole number of at least 1
positive_int = positive_int_type("应该是至少为 1 的整数（最多调用模型几次），收到的是 {text!r}")


MODES_HELP = ("运行模式（默认：配置了 OPENAI_API_KEY 时 live，否则离线模式 offline："
              "没有录制文件时由脚本参考模型回答，并标明）")
MAX_ITERS_HELP = "最多调用模型几次（刹车：到了就停下），默认 6"


def build_parser() -> argparse.ArgumentParser:
    parser = ChineseArgumentParser(prog="python -m vibe_agent",
                                   description="Vibe Agent 练习册的命令行。")
    sub = parser.add_subparsers(dest="command", required=True, metavar="命令",
                                title="命令", help="demo、ask、record、info、bench 或 code")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--mode", choices=["offline", "replay", "live", "local", "reference"],
                       help=MODES_HELP)
        p.add_argument("--cassette", metavar="录制文件",
                       help="回放的录制文件名，例如 demo_reference（offline / replay 模式）")

    demo = sub.add_parser("demo", help="运行四个演示任务并打印 trace 与汇总表")
    common(demo)
    demo.add_argument("--max-iters", type=positive_int, default=6, metavar="N",
                      help=MAX_ITERS_HELP)
    demo.set_defaults(func=cmd_demo)

    ask = sub.add_parser("ask", help="让 Agent 回答一个问题")
    ask.add_argument("question", metavar="问题", help="要问的问题，例如 \"17 × 23 等于多少？\"")
    common(ask)
    ask.add_argument("--max-iters", type=positive_int, default=6, metavar="N",
                     help=MAX_ITERS_HELP)
    ask.set_defaults(func=cmd_ask)

    record = sub.add_parser("record", help="重新录制录制文件（场景或课程笔记本）")
    record.add_argument("scenarios", nargs="*", metavar="名字",
                        help="场景名（如 demo_reference）或课程笔记本名（如 02_protocol）")
    record.add_argument("--all", action="store_true", help="录制全部场景和全部课程")
    record.add_argument("--source", choices=["reference", "local", "live"],
                        help="录制来源（默认：每份录制文件用它原来的来源）")
    record.add_argument("--pages", choices=list(PAGES), default="bundled",
                        help="网页来自课程自带的页面（bundled，默认，离线）还是真实网络（network）")
    record.set_defaults(func=cmd_record)

    info = sub.add_parser("info", help="显示当前运行模式、录制文件的来源和设置")
    common(info)
    info.set_defaults(func=cmd_info)

    from . import bench  # `bench` lives in its own module: bench.add_parser / bench.main
    bench.add_parser(sub)
    from . import code_command  # the terminal agent: code_command.add_parser / .main
    code_command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    global _redact
    try:
        args = build_parser().parse_args(argv)
        _redact = secrets_of(settings())
        return args.func(args)
    except KeyboardInterrupt:
        say("已中断（Ctrl-C）。", error=True)
        return EXIT_INTERRUPTED
    except ConfigError as exc:
        say(f"配置问题：{exc}", error=True)
        return EXIT_CONFIG
    except CassetteError as exc:
        say(exc, error=True)
        return EXIT_CASSETTE
    except ReplayMiss as exc:
        say(f"回放对不上：{exc}", error=True)
        return EXIT_MISS
