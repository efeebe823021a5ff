"""The demo tools the agent can call: a clock, a calculator, a web fetcher and two fakes.

Each public method of `DemoTools` is one tool. The registry turns a bound method into
a tool definition: the name is the method name, the description is the first
docstring paragraph and the JSON Schema comes from the type hints and the `Args:`
section, so those are written for the model to read.

Rules every tool here follows:

- The outside world (clock, network) is reached only through `self.world`, so a
  lesson can replay the tools from a cassette.
- Bad input from the model never raises: the tool returns text starting with
  "Error:" that says what to do next. Only real bugs raise.
- Nothing hangs and nothing is silently cut: the calculator bounds the size of its
  numbers, the fetcher has one deadline and a byte cap, and truncation is announced.
- The fetcher reads only public web pages: an address on this computer or a private
  network is refused, after every redirect too. `fetch_url` and `page_length` call
  `read_page` in `vibe_agent/web.py`, which explains how.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from vibe_agent.registry import ToolRegistry
from vibe_agent.web import FETCH_DEADLINE_S, MAX_BYTES, FetchError, read_page
from vibe_agent.world import World, real_world

MAX_EXPRESSION_CHARS = 500  # longer calculator input is refused before parsing
MAX_INT_BITS = 10_000  # about 3,000 decimal digits: the biggest integer the calculator builds

TIMEZONE_EXAMPLES = "Asia/Shanghai, Europe/London, America/New_York or UTC"


# --- calculator -------------------------------------------------------------------

# The allow-list: these operators and nothing else.
BINARY_OPERATORS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
UNARY_OPERATORS: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}

# What people (and models) type instead of ASCII: 17 × 23, 10 ÷ 4, （1＋2）, １２.
NORMALISE = str.maketrans(
    {"×": "*", "÷": "/", "−": "-", "（": "(", "）": ")", "＋": "+", "－": "-", "＊": "*", "／": "/"}
    | {chr(ord("０") + digit): str(digit) for digit in range(10)}
)

ALLOWED = "Use only numbers, + - * / // % ** and parentheses."
TOO_LARGE = "the result is too large. Try smaller numbers."


class CalculatorError(ValueError):
    """The expression cannot be computed; the message is shown to the model."""


# Words for the syntax the calculator refuses, so the error says what went wrong.
REFUSED_SYNTAX: dict[type[ast.AST], str] = {
    ast.Call: "a function call",
    ast.Attribute: "attribute access",
    ast.Subscript: "indexing",
    ast.Compare: "a comparison",
    ast.BoolOp: "and/or",
    ast.Lambda: "a lambda",
    ast.BitXor: "the operator ^ (for powers write **)",
    ast.BitOr: "the operator |",
    ast.BitAnd: "the operator &",
    ast.LShift: "the operator <<",
    ast.RShift: "the operator >>",
    ast.MatMult: "the operator @",
    ast.Invert: "the operator ~",
    ast.Not: "the operator not",
}


def _describe(node: ast.AST) -> str:
    """Name a disallowed piece of syntax in words the model understands."""
    if isinstance(node, ast.Name):
        return f"the name '{node.id}'"
    if isinstance(node, ast.Constant):
        return f"the value {node.value!r}"
    return REFUSED_SYNTAX.get(type(node), f"'{type(node).__name__}'")


def _check_size(value: int | float) -> int | float:
    """Refuse results too big to be useful (huge integers, infinite floats)."""
    if isinstance(value, complex):
        raise CalculatorError("the result is not a real number. Check the expression.")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise CalculatorError(TOO_LARGE)
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError(TOO_LARGE)
    return value


def _power_is_too_big(left: int | float, right: int | float) -> bool:
    """Guess, before computing, whether an integer power would exceed MAX_INT_BITS.

    Only int ** non-negative int can grow without limit (9**9**9 would run for
    hours). Float powers overflow at once with OverflowError, which we catch.
    """
    if not (isinstance(left, int) and isinstance(right, int) and right >= 0):
        return False
    return abs(left) > 1 and left.bit_length() * right > MAX_INT_BITS


def _evaluate(node: ast.AST) -> int | float:
    """Walk the syntax tree, allowing only numbers and the arithmetic operators."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(
            node.value, bool):
        return _check_size(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY_OPERATORS:
        return UNARY_OPERATORS[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY_OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and _power_is_too_big(left, right):
            raise CalculatorError(TOO_LARGE)
        return _check_size(BINARY_OPERATORS[type(node.op)](left, right))
    if isinstance(node, ast.BinOp | ast.UnaryOp):
        node = node.op  # the shape is fine, the operator is not
    raise CalculatorError(f"{_describe(node)} is not allowed. {ALLOWED}")


def format_number(value: int | float) -> str:
    """Integers exactly; floats with up to 12 significant digits (0.1 + 0.2 -> 0.3)."""
    if isinstance(value, int):
        return str(value)
    return f"{value:.12g}"


# --- fake data for the two "tools the model cannot really run" --------------------

FAKE_WEATHER = {
    "Beijing": "sunny, 12°C, light north wind",
    "Shanghai": "light rain, 16°C, humidity 85%",
    "Guangzhou": "cloudy, 24°C, humidity 70%",
    "Shenzhen": "showers, 25°C, humidity 80%",
}
CITY_ALIASES = {"北京": "Beijing", "上海": "Shanghai", "广州": "Guangzhou", "深圳": "Shenzhen"}

FAKE_STOCKS = {
    "600519": "Kweichow Moutai: 1,520.00 CNY, +0.8% today",
    "000001": "Ping An Bank: 11.35 CNY, -0.4% today",
    "AAPL": "Apple Inc.: 228.50 USD, +1.2% today",
    "TSLA": "Tesla Inc.: 251.10 USD, -2.3% today",
}

DEMO_NOTE = "(demo data, not real)"


# --- the tools ------------------------------------------------------------------


class DemoTools:
    """The tools of the course's demo agent, sharing one `World`.

    Args:
        world: the clock and HTTP client the tools use; None means the real ones.
        fetch_timeout: seconds `fetch_url` and `page_length` may take for a whole fetch.
        allow_private: let `fetch_url` and `page_length` read this computer and private
            networks. Off by default (the model's URL is untrusted); on only for a
            course-local server, e.g. in tests.
    """

    def __init__(self, world: World | None = None, fetch_timeout: float = FETCH_DEADLINE_S,
                 allow_private: bool = False) -> None:
        self.world = world if world is not None else real_world()
        self.fetch_timeout = fetch_timeout
        self.allow_private = allow_private

    def current_time(self, timezone: str = "Asia/Shanghai") -> str:
        """Get the current date and time in a timezone.

        Args:
            timezone: an IANA timezone name such as Asia/Shanghai, Europe/London or UTC.
        """
        try:
            zone = ZoneInfo(timezone.strip())
        except (ZoneInfoNotFoundError, ValueError):
            return f"Error: unknown timezone '{timezone}'. Use a name such as {TIMEZONE_EXAMPLES}."
        local = self.world.now().astimezone(zone)
        offset = local.utcoffset()  # never None for an aware time in a ZoneInfo zone
        minutes = int(offset.total_seconds()) // 60 if offset is not None else 0
        sign = "+" if minutes >= 0 else "-"
        hours, minutes = divmod(abs(minutes), 60)
        return f"{local:%Y-%m-%d %H:%M:%S} {zone.key} (UTC{sign}{hours:02d}:{minutes:02d})"

    def calculator(self, expression: str) -> str:
        """Evaluate an arithmetic expression, e.g. "17 * 23" or "(2 + 3) ** 2 / 7".

        Args:
            expression: numbers with + - * / // % ** and parentheses; × and ÷ also work.
        """
        text = expression.translate(NORMALISE).strip()
        if not text:
            return f"Error: the expression is empty. {ALLOWED}"
        if len(text) > MAX_EXPRESSION_CHARS:
            return f"Error: the expression is longer than {MAX_EXPRESSION_CHARS} characters."
        try:
            value = _evaluate(ast.parse(text, mode="eval"))
        except SyntaxError:
            return f"Error: '{text}' is not a valid arithmetic expression. {ALLOWED}"
        except CalculatorError as exc:
            return f"Error: {exc}"
        except ZeroDivisionError:
            return "Error: division by zero. Check the expression and try again."
        except OverflowError:
            return f"Error: {TOO_LARGE}"
        return f"{text} = {format_number(value)}"

    def fetch_url(self, url: str, max_chars: int = 2000) -> str:
        """Download a web page and return its text (raw HTML for HTML pages).

        Args:
            url: the full http:// or https:// address of the page.
            max_chars: return at most this many characters of the page.
        """
        if max_chars < 1:
            return "Error: max_chars must be at least 1."
        try:
            page = read_page(self.world.http, url, timeout=self.fetch_timeout,
                             allow_private=self.allow_private)
        except FetchError as exc:
            return f"Error: {exc}"
        notes = []
        if len(page.text) > max_chars:
            notes.append(f"[truncated: showing {max_chars} of {len(page.text)} characters]")
        if page.capped:
            notes.append(f"[truncated at the {MAX_BYTES}-byte cap]")
        return "\n\n".join([page.text[:max_chars] or "(the page is empty)", *notes])

    def page_length(self, url: str) -> str:
        """Download a web page and count the characters of its text.

        Args:
            url: the full http:// or https:// address of the page.
        """
        try:
            page = read_page(self.world.http, url, timeout=self.fetch_timeout,
                             allow_private=self.allow_private)
        except FetchError as exc:
            return f"Error: {exc}"
        if page.capped:
            return (
                f"The page {url} has at least {len(page.text)} characters "
                f"(reading stopped at the {MAX_BYTES}-byte cap)."
            )
        return f"The page {url} has {len(page.text)} characters."

    def get_weather(self, city: str) -> str:
        """Get today's weather for a city (demo data, not real).

        Args:
            city: the city name in English or Chinese, e.g. Beijing or 北京.
        """
        name = CITY_ALIASES.get(city.strip(), city.strip().title())
        if name not in FAKE_WEATHER:
            return f"Error: no weather for '{city}'. Known cities: {', '.join(FAKE_WEATHER)}."
        return f"{name}: {FAKE_WEATHER[name]} {DEMO_NOTE}"

    def get_stock(self, code: str) -> str:
        """Get the latest price of a stock (demo data, not real).

        Args:
            code: the stock code or ticker, e.g. 600519 or AAPL.
        """
        key = code.strip().upper()
        if key not in FAKE_STOCKS:
            return f"Error: no price for '{code}'. Known codes: {', '.join(FAKE_STOCKS)}."
        return f"{key} {FAKE_STOCKS[key]} {DEMO_NOTE}"


# The demo agent's tools, in the order the model sees them.
DEMO_TOOL_NAMES = ("current_time", "calculator", "fetch_url", "page_length", "get_weather",
                   "get_stock")


def demo_registry(world: World | None = None, names: tuple[str, ...] = DEMO_TOOL_NAMES
                  ) -> ToolRegistry:
    """A registry holding the demo tools, all sharing one world.

    Args:
        world: the clock and HTTP client (e.g. `world_of(client)` to replay them from
            the same cassette as the model); None means the real ones.
        names: which tools to register, in order.
    """
    tools = DemoTools(world)
    registry = ToolRegistry()
    for name in names:
        registry.register(getattr(tools, name))
    return registry
