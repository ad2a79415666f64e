"""Bounds on what one prompt template may cost: time, memory, output.

Task files come from users and API clients, and Jinja is a language: ``{{ 9 ** 9 ** 9 }}``,
``{{ input * 10**9 }}``, ``center(3e9)``, nested loops or ``lipsum(n=1e8)`` would hang a
render or take gigabytes. The environment here

- never evaluates a template when it is loaded (no constant folding: the optimizer is off
  and ``finalize`` needs the render's context, so even ``{{ 9 ** 9 ** 9 }}`` waits for a
  render, where the bounds below hold);
- checks each operation that can build a large value before it runs it: ``** * + %``, ``~``,
  the string methods and filters whose result grows with a number or a second string
  (``center``, ``indent``, ``replace``, ``join``, ``format``, ...): no value over
  ``MAX_CHARS`` characters, no integer over ``MAX_INT_BITS`` bits;
- charges each render a budget of operations: each loop iteration, macro and ``caller()``
  body costs its size in template nodes, each call, filter and operator its arguments'
  size; the characters it builds and outputs are capped too, and ``MAX_SECONDS`` stops
  whatever the counts miss.

A render over a bound raises :class:`BoundsError` (a Jinja ``SecurityError``), which
:mod:`.templates` reports as one line naming the template and its line.
"""

from __future__ import annotations

import inspect
import math
import re
import time
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sized
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import wraps
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.meta import TrackingCodeGenerator
from jinja2.runtime import Context, LoopContext
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedFormatter
from jinja2.utils import Namespace, _PassArg, generate_lorem_ipsum

MAX_CHARS = 2_000_000  # any one value a template builds (prompts are far shorter)
MAX_OUTPUT = 8_000_000  # characters output by one render, nested outputs counted each time
MAX_BUILT = 32_000_000  # characters built by one render, all values together
MAX_OPS = 250_000  # template nodes run and values measured by one render
MAX_PARTS = 100_000  # values inside one value (its items, theirs, ...)
MAX_INT_BITS = 4096
MAX_COUNT = 100_000  # a count argument: batch and slice sizes, lipsum words (as range())
MAX_SECONDS = 5.0
LOOP_COST = 10  # what one loop iteration or macro call costs besides its body's nodes


class BoundsError(SecurityError):
    """A template went over one of the bounds above."""


@dataclass
class Budget:
    """What one render may still spend."""

    ops: int = MAX_OPS
    built: int = MAX_BUILT
    output: int = MAX_OUTPUT
    deadline: float = field(default_factory=lambda: time.monotonic() + MAX_SECONDS)

    def charge(self, ops: int, what: str = "") -> None:
        self.ops -= ops
        if self.ops < 0:
            if what and ops > MAX_OPS // 4:  # one piece of work did it: name it
                raise BoundsError(f"{what} is more work than a render may do ({ops:,} operations; {MAX_OPS:,} in all)")
            raise BoundsError(f"it runs more than {MAX_OPS:,} operations (loops, calls, filters)")
        if time.monotonic() > self.deadline:
            raise BoundsError(f"it takes more than {MAX_SECONDS:g} s")

    def build(self, chars: int) -> None:
        self.built -= chars
        if self.built < 0:
            raise BoundsError(f"it builds more than {MAX_BUILT:,} characters in all")

    def emit(self, chars: int) -> None:
        self.output -= chars
        if self.output < 0:
            raise BoundsError(f"its output is longer than {MAX_OUTPUT:,} characters")


_BUDGET: ContextVar[Budget | None] = ContextVar("template_budget", default=None)


def budget() -> Budget:
    """The running render's budget (a fresh one outside a render)."""
    return _BUDGET.get() or Budget()


@dataclass
class Rendering:
    """``with Rendering():`` gives the renders inside it one budget."""

    _token: Any = None

    def __enter__(self) -> Budget:
        b = Budget()
        self._token = _BUDGET.set(b)
        return b

    def __exit__(self, *exc: object) -> None:
        _BUDGET.reset(self._token)


# -- sizes ------------------------------------------------------------------------------------


def _too_big(what: str, size: int, limit: int = MAX_CHARS) -> BoundsError:
    return BoundsError(f"{what} would be {size:,} characters (the limit is {limit:,})")


def _leaf_size(value: Any) -> int | None:
    """The printed size of a value that holds no others; None for a container."""
    if isinstance(value, (str, bytes, bytearray)):
        return len(value)
    if isinstance(value, bool) or value is None:
        return 5
    if isinstance(value, int):
        return value.bit_length() // 3 + 2
    if isinstance(value, range):
        return len(value) * (len(str(max(abs(value.start), abs(value.stop)))) + 2)
    if isinstance(value, (list, tuple, set, frozenset, Mapping, Namespace)):
        return None
    return 32 if isinstance(value, (float, complex)) else 64


def _children(value: Any) -> list[Any]:
    if isinstance(value, Namespace):
        value = value._Namespace__attrs  # type: ignore[attr-defined]
    if isinstance(value, Mapping):
        return [*value.keys(), *value.values()]
    return list(value)


def measure(value: Any, limit: int = MAX_CHARS) -> tuple[int, int]:
    """About how many characters ``str(value)`` has, and how deep it nests; the walk stops
    past ``limit`` (lists built from lists share items: the printed size can be exponential
    in the nodes). Each node visited is charged to the render's budget."""
    size, depth, visited, todo = 0, 0, 0, [(value, 1)]
    while todo and size <= limit:
        item, level = todo.pop()
        visited += 1
        if visited > MAX_PARTS:
            raise BoundsError(f"a value holds more than {MAX_PARTS:,} values")
        leaf = _leaf_size(item)
        if leaf is not None:
            size += leaf
            continue
        depth = max(depth, level)
        kids = _children(item)
        size += 2 + 2 * len(kids)
        if size > limit:  # over already: no need to queue a million items to say so
            break
        if visited + len(todo) + len(kids) > MAX_PARTS:
            raise BoundsError(f"a value holds more than {MAX_PARTS:,} values")
        todo.extend((kid, level + 1) for kid in kids)
    budget().charge(visited)
    return size, depth


def checked(value: Any, what: str = "a value") -> Any:
    """``value``, once it is known to be within MAX_CHARS; its characters are charged."""
    size, _ = measure(value)
    if size > MAX_CHARS:
        raise _too_big(what, size)
    if isinstance(value, (str, bytes, bytearray)):
        budget().build(size)
    return value


def _size(value: Any) -> int:
    return measure(value)[0]


def _int_arg(value: Any, name: str, limit: int = MAX_CHARS) -> None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) > limit:
        raise BoundsError(f"{name} {value:g} is over the limit of {limit:,}")


# -- formatting -------------------------------------------------------------------------------

_PRINTF = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")


def check_printf(fmt: str, args: Any) -> None:
    """``fmt % args`` stays within MAX_CHARS (widths and precisions count)."""
    values = list(args.values()) if isinstance(args, Mapping) else list(args) if isinstance(args, tuple) else [args]
    widest = max((_size(v) for v in values), default=0)
    estimate = len(fmt)
    for match in _PRINTF.finditer(fmt):
        for width in match.groups():
            if width == "*":
                for v in values:
                    _int_arg(v, "a '*' width")
            elif width is not None:
                _int_arg(int(width), "a format width")
                estimate += int(width)
        estimate += widest
    if estimate > MAX_CHARS:
        raise _too_big("the formatted string", estimate)


class _BoundedFormatter(SandboxedFormatter):
    """``str.format`` of the sandbox, with no field wider than MAX_CHARS."""

    def format_field(self, value: Any, format_spec: str) -> Any:
        for number in re.findall(r"\d+", format_spec):
            _int_arg(int(number), "a format width")
        return checked(super().format_field(value, format_spec), "a formatted field")


def _check_format_call(fmt: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    widest = max((_size(v) for v in (*args, *kwargs.values())), default=0)
    estimate = len(fmt) + fmt.count("{") * widest
    if estimate > MAX_CHARS:
        raise _too_big("the formatted string", estimate)


# -- what grows with a number or a second string ----------------------------------------------


def _replace_size(s: Any, old: Any, new: Any, count: Any = None) -> int:
    if not all(isinstance(x, (str, bytes)) for x in (s, old, new)):
        return 0
    hits = s.count(old) if old else len(s) + 1
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    return len(s) + hits * max(0, len(new) - len(old))


def _join_size(sep: Any, items: list[Any]) -> int:
    return _size(items) + len(sep) * max(0, len(items) - 1) if isinstance(sep, (str, bytes)) else 0


def _method_size(name: str, s: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> int:
    """The size of ``s.name(*args)`` for a str or bytes method whose result can outgrow ``s``."""
    a = [*args, *kwargs.values()]
    if name in ("center", "ljust", "rjust", "zfill") and a and isinstance(a[0], int):
        return max(len(s), a[0])
    if name == "expandtabs":
        tab = a[0] if a and isinstance(a[0], int) else 8
        return len(s) + s.count("\t" if isinstance(s, str) else b"\t") * max(tab, 0)
    if name == "replace" and len(a) >= 2:
        return _replace_size(s, *a[:3])
    if name == "join" and a and isinstance(a[0], list):
        return _join_size(s, a[0])
    if name == "translate" and a and isinstance(a[0], Mapping):
        return len(s) * max((_size(v) for v in a[0].values()), default=1)
    return 0


def _check_method(obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Refuse a builtin method call that would build too much; ``join``'s items as a list."""
    owner, name = getattr(obj, "__self__", None), getattr(obj, "__name__", "")
    for value in (*args, *kwargs.values()):
        _int_arg(value, f"the argument of {name}()")
    if isinstance(owner, int) and name == "to_bytes":
        return args
    if not isinstance(owner, (str, bytes)):
        return args
    if name == "join" and args and not isinstance(args[0], (str, bytes)):
        args = (_listed(args[0]), *args[1:])
    estimate = _method_size(name, owner, args, kwargs)
    if estimate > MAX_CHARS:
        raise _too_big(f"the result of {name}()", estimate)
    return args


def _listed(items: Any) -> list[Any]:
    """An iterable's items as a list, counted as they come (a generator cannot be sized)."""
    out = []
    for item in items:
        out.append(item)
        if len(out) > MAX_COUNT * 10:
            raise BoundsError(f"a sequence has more than {MAX_COUNT * 10:,} items")
    budget().charge(len(out))
    return out


# -- filters ----------------------------------------------------------------------------------


def _filter_center(a: dict[str, Any]) -> int:
    _int_arg(a.get("width", 0), "a width")
    return max(_size(a.get("value")), a.get("width", 0) if isinstance(a.get("width"), int) else 0)


def _filter_indent(a: dict[str, Any]) -> int:
    width, s = a.get("width", 4), a.get("s")
    _int_arg(width, "an indent")
    wide = width if isinstance(width, int) else _size(width)
    return _size(s) + (str(s).count("\n") + 1) * wide if isinstance(s, str) else 0


def _filter_wordwrap(a: dict[str, Any]) -> int:
    width, s = a.get("width", 79), a.get("s")
    _int_arg(width, "a width")
    if isinstance(s, str) and isinstance(width, int):
        # textwrap's work: its chunks, and a long word cut line by line copies what is left
        # of it each time (quadratic: ('a' * 999999)|wordwrap(1) took 18-45 s)
        wide, longest = max(width, 1), max(map(len, s.split()), default=0)
        work = len(s) // 2 + len(s) // wide + longest * len(s) // (wide * COPIES_PER_OP)
        budget().charge(work, f"wordwrap of {len(s):,} characters at width {width}")
    wrap = a.get("wrapstring")
    return _size(a.get("s")) * (1 + (_size(wrap) if wrap is not None else 1))


def _filter_replace(a: dict[str, Any]) -> int:
    return _replace_size(a.get("s"), a.get("old"), a.get("new"), a.get("count"))


def _filter_join(a: dict[str, Any]) -> int:
    a["value"] = _listed(a.get("value", ()))
    return _join_size(a.get("d", ""), a["value"])


def _filter_counted(a: dict[str, Any]) -> int:
    for name in ("linecount", "slices"):
        _int_arg(a.get(name, 0), f"{name}", MAX_COUNT)
    return 0


def _filter_format(a: dict[str, Any]) -> int:
    if isinstance(a.get("value"), str):
        check_printf(a["value"], a.get("kwargs") or a.get("args", ()))
    return 0


def _filter_nested(a: dict[str, Any]) -> int:
    """tojson and pprint indent each level: the size times the depth."""
    indent = a.get("indent") or 1
    _int_arg(indent, "an indent", 16)
    size, depth = measure(a.get("value"))
    wide = indent if isinstance(indent, int) else _size(indent)
    return size * (1 + wide * depth)


def _filter_sum(a: dict[str, Any]) -> int:
    start = a.get("start", 0)
    if isinstance(start, (int, float)):
        return 0
    items = a["iterable"] = _listed(a.get("iterable", ()))
    return len(items) * _size(items)  # each partial sum is copied again


FILTER_SIZES: dict[str, Callable[[dict[str, Any]], int]] = {
    "center": _filter_center,
    "indent": _filter_indent,
    "wordwrap": _filter_wordwrap,
    "replace": _filter_replace,
    "join": _filter_join,
    "batch": _filter_counted,
    "slice": _filter_counted,
    "format": _filter_format,
    "tojson": _filter_nested,
    "pprint": _filter_nested,
    "sum": _filter_sum,
}


# Filters that loop over their value's characters or items in Python: their work, charged
# before they run (one operation is about 3 µs, as a loop iteration), so that one filter
# call cannot run far past the render's bounds, and the deadline between operations holds
TEXT_WORK = {"urlize": 2.0, "title": 1 / 6, "wordcount": 1 / 10, "urlencode": 1 / 5}  # operations per character
ITERATING = frozenset(  # not first, last, random, reverse: they take one item, or reverse in C
    "map select reject selectattr rejectattr unique list sort groupby dictsort batch slice min max items xmlattr "
    "urlencode".split()
)
ITEMS_PER_OP = 2
COPIES_PER_OP = 7_000  # characters copied (memmove) in the time of one operation
_CONTEXTS = (jinja2.Environment, Context, jinja2.nodes.EvalContext)


def charge_work(name: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Charge what filter ``name`` will do with its value (the first argument after the
    environment or context); an iterator it would read is counted as it is read."""
    at = next((i for i, value in enumerate(args) if not isinstance(value, _CONTEXTS)), None)
    if at is None:
        return args
    value = args[at]
    if isinstance(value, str) and name in TEXT_WORK:
        budget().charge(math.ceil(len(value) * TEXT_WORK[name]), f"{name} of {len(value):,} characters")
    elif name in ITERATING and isinstance(value, Sized):
        budget().charge(len(value) // ITEMS_PER_OP, f"{name} of {len(value):,} items")
    elif name in ITERATING and isinstance(value, Iterable):
        return (*args[:at], _counted(value), *args[at + 1 :])
    return args


def _counted(items: Iterable[Any]) -> Iterator[Any]:
    b = budget()
    for n, item in enumerate(items, 1):
        if n % ITEMS_PER_OP == 0:
            b.charge(1)
        yield item


def bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` (a filter or test) that charges its arguments, refuses a result over the
    bounds before building it, and checks the one it built."""
    size_of = FILTER_SIZES.get(name)
    signature = inspect.signature(func) if size_of is not None else None
    # an async_variant filter takes an eval context its signature does not show
    hidden = int(
        signature is not None
        and _PassArg.from_obj(func) is not None
        and next(iter(signature.parameters), "") not in ("eval_ctx", "environment", "env", "context")
    )

    @wraps(func)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        b = budget()
        b.charge(LOOP_COST)
        for value in (*args, *kwargs.values()):
            if not isinstance(value, _CONTEXTS):
                checked(value, f"the input of {name}")
        args = charge_work(name, args)
        if size_of is not None and signature is not None:
            bound = signature.bind(*args[hidden:], **kwargs)
            estimate = size_of(bound.arguments)
            if estimate > MAX_CHARS:
                raise _too_big(f"the result of {name}", estimate)
            args, kwargs = (*args[:hidden], *bound.args), bound.kwargs
        return checked(func(*args, **kwargs), f"the result of {name}")

    return bounded


def bounded_lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:  # noqa: A002
    """``lipsum`` with at most MAX_COUNT words in all."""
    for value, what in ((n, "n"), (min, "min"), (max, "max")):
        _int_arg(value, f"lipsum's {what}", MAX_COUNT)
    if n * max > MAX_COUNT:
        raise BoundsError(f"lipsum(n={n}, max={max}) would write up to {n * max:,} words (the limit is {MAX_COUNT:,})")
    budget().charge(n * max // ITEMS_PER_OP, "lipsum")  # a word at a time, in Python
    return generate_lorem_ipsum(n, html, min, max)


# -- operators --------------------------------------------------------------------------------


def _check_binop(operator: str, left: Any, right: Any) -> None:
    ints = isinstance(left, int) and isinstance(right, int)
    if operator == "**" and ints and right > 0 and abs(left) > 1:
        bits = left.bit_length() * right
        if bits > MAX_INT_BITS:
            raise BoundsError(f"{left} ** {right} has about {bits:,} bits (the limit is {MAX_INT_BITS:,})")
    elif operator == "*" and ints:
        if left.bit_length() + right.bit_length() > MAX_INT_BITS:
            raise BoundsError(f"a product of more than {MAX_INT_BITS:,} bits")
    elif operator == "*":
        seq, times = (left, right) if isinstance(right, int) else (right, left)
        if isinstance(times, int) and not isinstance(seq, (int, float)):
            _int_arg(times, "a repeat count")
            estimate = _size(seq) * max(times, 0)
            if estimate > MAX_CHARS:
                raise _too_big("the repeated value", estimate)
    elif operator == "+" and not ints:
        estimate = _size(left) + _size(right)
        if estimate > MAX_CHARS:
            raise _too_big("the sum", estimate)
    elif operator == "%" and isinstance(left, str):
        check_printf(left, right)


class _BoundedCodeGenerator(CodeGenerator):
    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.bounded_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The immutable sandbox with the bounds of this module."""

    intercepted_binops = frozenset({"+", "-", "*", "/", "//", "%", "**"})
    code_generator_class = _BoundedCodeGenerator

    def __init__(self, **options: Any) -> None:
        super().__init__(optimized=False, finalize=_finalize, **options)
        self.globals["lipsum"] = bounded_lipsum
        self.filters = {name: bounded_filter(name, f) for name, f in self.filters.items()}
        self.tests = {name: bounded_filter(name, f) for name, f in self.tests.items()}

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        budget().charge(LOOP_COST)
        _check_binop(operator, left, right)
        return checked(super().call_binop(context, operator, left, right), "the result of an operator")

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        budget().charge(LOOP_COST)
        for value in (*args, *kwargs.values()):
            checked(value, "an argument")
        if isinstance(__obj, (types.BuiltinMethodType, types.MethodWrapperType)):
            args = _check_method(__obj, args, kwargs)
        elif isinstance(__obj, LoopContext):
            budget().charge(LOOP_COST)
        return checked(super().call(__context, __obj, *args, **kwargs), "the result of a call")

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """``str.format`` through a formatter that bounds widths and the result."""
        if not isinstance(value, (types.MethodType, types.BuiltinMethodType)) or value.__name__ not in (
            "format",
            "format_map",
        ):
            return None
        f_self = value.__self__
        if not isinstance(f_self, str):
            return None
        formatter = _BoundedFormatter(self)
        is_map = value.__name__ == "format_map"

        def wrapper(*args: Any, **kwargs: Any) -> str:
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                args, kwargs = (), args[0]
            _check_format_call(f_self, args, kwargs)
            return checked(str(formatter.vformat(f_self, args, kwargs)), "the formatted string")

        return wrapper

    def charge_body(self, cost: int) -> None:
        """Called at the start of each loop iteration, macro and caller body."""
        budget().charge(cost)

    def bounded_concat(self, parts: tuple[Any, ...]) -> str:
        """``a ~ b``, within MAX_CHARS."""
        estimate = sum(_size(p) for p in parts)
        if estimate > MAX_CHARS:
            raise _too_big("the joined string", estimate)
        return checked("".join(map(str, parts)))


@jinja2.pass_context
def _finalize(context: Context, value: Any) -> Any:
    """Each ``{{ }}`` output, measured before it is turned into text. Needing the context
    also keeps Jinja from evaluating constant output when a template is compiled."""
    size, _ = measure(value)
    if size > MAX_CHARS:
        raise _too_big("an output", size)
    budget().emit(size)
    return value


# -- the template tree ------------------------------------------------------------------------

REFUSED_NODES = (nodes.Extends, nodes.Include, nodes.Import, nodes.FromImport)


def _body_cost(body: list[nodes.Node]) -> int:
    count, text = 0, 0
    for stmt in body:
        for node in (stmt, *stmt.find_all(nodes.Node)):
            count += 1
            if isinstance(node, nodes.TemplateData):
                text += len(node.data)
    return LOOP_COST + count + text // 16


def charge_bodies(ast: nodes.Template) -> nodes.Template:
    """Start each loop, macro and ``{% call %}`` body with a charge of its size, so that
    repeating a body costs the render what it runs."""
    for node in list(ast.find_all((nodes.For, nodes.Macro, nodes.CallBlock))):
        cost = _body_cost(node.body)
        charge = nodes.Call(nodes.EnvironmentAttribute("charge_body"), [nodes.Const(cost)], [], None, None)
        stmt = nodes.ExprStmt(charge)
        stmt.set_lineno(node.lineno)
        node.body.insert(0, stmt)
    return ast


def refused_node(ast: nodes.Template) -> nodes.Node | None:
    """The first ``extends``/``include``/``import``: a template stands alone."""
    return next(iter(ast.find_all(REFUSED_NODES)), None)


class _Tracking(TrackingCodeGenerator):
    def __init__(self, environment: jinja2.Environment) -> None:
        CodeGenerator.__init__(self, environment, "<introspection>", "<introspection>", optimized=False)
        self.undeclared_identifiers: set[str] = set()


def undeclared_variables(ast: nodes.Template) -> frozenset[str]:
    """``jinja2.meta.find_undeclared_variables`` without its optimizer, which evaluates
    constant expressions (``{{ 9 ** 9 ** 9 }}``, filters of constants) while it looks."""
    codegen = _Tracking(ast.environment)  # type: ignore[attr-defined]
    codegen.visit(ast)
    return frozenset(codegen.undeclared_identifiers)
