"""The exact texts the lab tests require in what a tool says, found with ``ast``.

What counts as a requirement (a positive assertion about text the student's code produces):

- ``LIT in X``, ``X == LIT``, ``LIT == X`` (also inside ``and`` chains and ``all(...)``),
  ``X.startswith(LIT)`` and ``X.endswith(LIT)`` in an ``assert``, where X is tool output;
- ``re.search/match/fullmatch(LIT, X)`` in an ``assert``, and ``pytest.raises(match=LIT)``
  (regular expressions: their literal parts are required).

X is tool output when it derives (through calls, methods, subscripts, local variables,
loops and helper functions that return it) from: an attribute ``text``, ``message``,
``diff``, ``value``, ``out``, ``err``, ``stdout``, ``stderr`` or ``system_prompt``, a
``getvalue()``/``readouterr()`` call, or an exception caught with ``as``. File contents
read back (``read_text``) and objects compared whole (``details == ...``) are not.

LIT is a string constant, an f-string (its fields stand for any value), a list or tuple
of them, or a name that resolves to them: a local constant, a ``parametrize`` value, a
loop over constants, a helper's parameter (its default and the arguments at its call
sites, ``*args`` included). Negative assertions (``not in``, ``!=``) require nothing.

Test data is not a requirement: the parts of LIT that occur in a string the tests
themselves use as input (file content, a command, a path, a scripted model's turn:
any string constant outside assertions, docstrings, ``raise`` and ``parametrize`` ids)
are removed, and so are numbers (``[Showing lines 3-6 of 10 ...]`` is stated as
``[Showing lines a-b of total ...]``). What is left must contain a letter to count.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import product

HOLE = "\x00"  # stands for any value: a number, an f-string field, removed test data
OUTPUT_ATTRIBUTES = {
    "text",
    "message",
    "diff",
    "value",
    "out",
    "err",
    "stdout",
    "stderr",
    "system_prompt",
}
OUTPUT_METHODS = {"getvalue", "readouterr"}
CASE_FOLDS = {"lower", "upper", "casefold"}
REGEX_FUNCTIONS = {"search", "match", "fullmatch"}
_PLACEHOLDER = r"(?:\{[^{}\n]*\}|[\w.+\-]+|…|\.\.\.)"  # `{b+1}`, `N`, `a`, `total`
_SPACE = r"(?:\s|\\n)+"


@dataclass(frozen=True)
class Requirement:
    """One text a test requires, where it is required, and how to find it in prose."""

    literal: str  # as written in the test
    test_file: str
    line: int
    function: str
    ignore_case: bool
    template: str  # the literal with test data and numbers replaced by HOLE

    def pattern(self) -> re.Pattern[str]:
        """Numbers and holes match a number or a placeholder (``N``, ``{b+1}``); any run of
        whitespace matches whitespace or a written ``\\n``."""
        tokens: list[str] = []
        for token in re.split(rf"({HOLE}|\d+|\s+)", self.template):
            if not token:
                continue
            if token == HOLE or token.isdigit():
                kind = _PLACEHOLDER
            elif token.isspace():
                kind = _SPACE
            else:
                kind = re.escape(token)
            if not (tokens and tokens[-1] == kind and kind in (_PLACEHOLDER, _SPACE)):
                tokens.append(kind)
        while tokens and tokens[0] in (_PLACEHOLDER, _SPACE):
            tokens.pop(0)
        while tokens and tokens[-1] in (_PLACEHOLDER, _SPACE):
            tokens.pop()
        return re.compile("".join(tokens), re.IGNORECASE if self.ignore_case else 0)

    @property
    def shown(self) -> str:
        return self.template.replace(HOLE, "…").strip(" …")


@dataclass(frozen=True)
class _Found:
    nodes: tuple[ast.AST, ...]  # the constants it is made of
    template: str

    @property
    def line(self) -> int:
        return min((getattr(n, "lineno", 0) for n in self.nodes), default=0)


Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class _Module:
    name: str
    tree: ast.Module
    functions: dict[str, Function] = field(default_factory=dict)  # top level, by name


def extract(sources: dict[str, str]) -> list[Requirement]:
    """The requirements of every test file in ``sources`` (file name -> Python source)."""
    modules = [_Module(name, ast.parse(text)) for name, text in sources.items()]
    for module in modules:
        for node in module.tree.body:
            if isinstance(node, Function):
                module.functions[node.name] = node
    returning = _functions_returning_output(modules)
    found: dict[tuple[int, ...], tuple[_Module, str, _Found, bool]] = {}
    for module in modules:
        for function in module.functions.values():
            for literal, ignore_case in _Function(module, function, returning).requirements():
                key = tuple(id(n) for n in literal.nodes)
                found.setdefault(key, (module, function.name, literal, ignore_case))
    required = {id(n) for _, _, literal, _ in found.values() for n in literal.nodes}
    data = _test_data(modules, required)
    shared = {m.name for m in modules if not any(f.startswith("test") for f in m.functions)}
    result = []
    for module, name, literal, ignore_case in found.values():
        owner = _owner(module, literal.line)
        template = _without_data(literal.template, module.name, owner, data, shared)
        if template is not None:
            written = literal.template.replace(HOLE, "{…}")
            result.append(
                Requirement(written, module.name, literal.line, name, ignore_case, template)
            )
    return result


def _owner(module: _Module, line: int) -> str | None:
    """The top-level function whose text (decorators included) holds ``line``."""
    for function in module.functions.values():
        first = min([function.lineno, *(d.lineno for d in function.decorator_list)])
        if first <= line <= (function.end_lineno or function.lineno):
            return function.name
    return None


# ------------------------------------------------------------------ what is tool output


def _functions_returning_output(modules: list[_Module]) -> set[str]:
    returning: set[str] = set()
    while True:
        grown = set(returning)
        for module in modules:
            for function in module.functions.values():
                analysis = _Function(module, function, returning)
                returns = [n.value for n in ast.walk(function) if isinstance(n, ast.Return)]
                if any(r is not None and analysis.is_output(r) for r in returns):
                    grown.add(function.name)
        if grown == returning:
            return returning
        returning = grown


class _Function:
    def __init__(self, module: _Module, function: Function, returning: set[str]) -> None:
        self.module, self.function, self.returning = module, function, returning
        self.output_names: set[str] = set()
        self._bind_outputs()

    def _bind_outputs(self) -> None:
        changed = True
        while changed:
            changed = False
            for node in ast.walk(self.function):
                for target in self._output_targets(node):
                    if target not in self.output_names:
                        self.output_names.add(target)
                        changed = True

    def _output_targets(self, node: ast.AST) -> Iterator[str]:
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) and node.value:
            if self.is_output(node.value):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                yield from (n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            if self.is_output(node.iter):
                yield from (n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.ExceptHandler) and node.name:
            yield node.name
        elif (
            isinstance(node, ast.withitem)
            and isinstance(node.optional_vars, ast.Name)
            and (_is_raises(node.context_expr) or self.is_output(node.context_expr))
        ):
            yield node.optional_vars.id

    def is_output(self, node: ast.AST) -> bool:
        match node:
            case ast.Name(id=name):
                return name in self.output_names
            case ast.Attribute(value=value, attr=attr):
                return attr in OUTPUT_ATTRIBUTES or self.is_output(value)
            case ast.Call(func=func, args=args, keywords=keywords):
                if isinstance(func, ast.Name) and func.id in self.returning:
                    return True
                if isinstance(func, ast.Attribute) and (
                    func.attr in OUTPUT_METHODS or self.is_output(func.value)
                ):
                    return True
                return any(self.is_output(a) for a in [*args, *(k.value for k in keywords)])
            case ast.Subscript(value=inner) | ast.Await(value=inner) | ast.Starred(value=inner):
                return self.is_output(inner)
            case ast.BinOp(left=left, right=right):
                return self.is_output(left) or self.is_output(right)
            case ast.JoinedStr(values=values):
                return any(self.is_output(v) for v in values)
            case ast.FormattedValue(value=inner):
                return self.is_output(inner)
            case ast.ListComp(elt=elt) | ast.GeneratorExp(elt=elt) | ast.SetComp(elt=elt):
                return self.is_output(elt) or any(self.is_output(g.iter) for g in node.generators)
            case ast.IfExp(body=body, orelse=orelse):
                return self.is_output(body) or self.is_output(orelse)
        return False

    # -------------------------------------------------------------- what is required

    def requirements(self) -> Iterator[tuple[_Found, bool]]:
        for node in ast.walk(self.function):
            if isinstance(node, ast.Assert):
                yield from self._asserted(node.test)
            elif isinstance(node, ast.Call) and _is_raises(node):
                for keyword in node.keywords:
                    if keyword.arg == "match":
                        for found in self.literals(keyword.value):
                            yield _Found(found.nodes, _regex_template(found.template)), False

    def _asserted(self, test: ast.expr) -> Iterator[tuple[_Found, bool]]:
        match test:
            case ast.BoolOp(op=ast.And(), values=values):
                for value in values:
                    yield from self._asserted(value)
            case ast.Call(func=ast.Name(id="all"), args=[ast.GeneratorExp(elt=elt)]):
                yield from self._asserted(elt)
            case ast.Compare(left=left, ops=[op], comparators=[right]):
                if isinstance(op, ast.In) and self.is_output(right):
                    yield from self._with_case(left, right)
                elif isinstance(op, ast.Eq):
                    if self.is_output(right) and not self.is_output(left):
                        yield from self._with_case(left, right)
                    elif self.is_output(left) and not self.is_output(right):
                        yield from self._with_case(right, left)
            case ast.Call(func=ast.Attribute(value=subject, attr="startswith" | "endswith")):
                if self.is_output(subject) and test.args:
                    yield from self._with_case(test.args[0], subject)
            case ast.Call(
                func=ast.Attribute(value=ast.Name(id="re"), attr=name), args=[pat, s, *_]
            ):
                if name in REGEX_FUNCTIONS and self.is_output(s):
                    for found in self.literals(pat):
                        yield _Found(found.nodes, _regex_template(found.template)), False

    def _with_case(self, literal: ast.expr, observed: ast.expr) -> Iterator[tuple[_Found, bool]]:
        folded = any(
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in CASE_FOLDS
            for n in ast.walk(observed)
        )
        for found in self.literals(literal):
            yield found, folded

    def literals(self, node: ast.expr, depth: int = 0) -> list[_Found]:
        """The string values ``node`` can take, as templates; [] when it is not literal."""
        if depth > 5:
            return []
        match node:
            case ast.Constant(value=str(value)):
                return [_Found((node,), value)]
            case ast.JoinedStr(values=values):
                text = "".join(
                    v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else HOLE
                    for v in values
                )
                return [_Found((node,), text)]
            case ast.List(elts=elts) | ast.Tuple(elts=elts) | ast.Set(elts=elts):
                return [f for e in elts for f in self.literals(e, depth + 1)]
            case ast.BinOp(op=ast.Add(), left=left, right=right):
                lefts = self.literals(left, depth + 1) or [_Found((), HOLE)]
                rights = self.literals(right, depth + 1) or [_Found((), HOLE)]
                joined = [
                    _Found(a.nodes + b.nodes, a.template + b.template)
                    for a, b in product(lefts, rights)
                ]
                return [j for j in joined if j.nodes]
            case ast.Call(func=ast.Attribute(value=inner, attr=attr)) if attr in CASE_FOLDS:
                return self.literals(inner, depth + 1)
            case ast.Name(id=name) if not self._fed_in(name):
                return [f for v in self._values_of(name) for f in self.literals(v, depth + 1)]
        return []

    def _fed_in(self, name: str) -> bool:
        """Whether the test passes ``name`` to a call outside its assertions: then its values
        are input (a path the error must name), not wording."""
        for call in ast.walk(self.function):
            if not isinstance(call, ast.Call):
                continue
            if isinstance(call.func, ast.Attribute) and call.func.attr in PARSING_METHODS:
                continue
            for argument in [*call.args, *(k.value for k in call.keywords)]:
                if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(argument)):
                    return True
        return False

    def _values_of(self, name: str) -> list[ast.expr]:
        values: list[ast.expr] = []
        for node in ast.walk(self.function):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets
            ):
                values.append(node.value)
            elif (
                isinstance(node, ast.For | ast.comprehension)
                and isinstance(node.target, ast.Name)
                and node.target.id == name
            ):
                values.extend(self._elements(node.iter))
        values.extend(self._parameter_values(self.function, name))
        return values

    def _elements(self, iterable: ast.expr) -> list[ast.expr]:
        if isinstance(iterable, ast.List | ast.Tuple | ast.Set):
            return list(iterable.elts)
        if isinstance(iterable, ast.Name):
            args = self.function.args
            if args.vararg is not None and args.vararg.arg == iterable.id:
                return [
                    a
                    for c in self._calls_of(self.function.name)
                    for a in c.args[len(args.posonlyargs) + len(args.args) :]
                ]
            return [e for v in self._values_of(iterable.id) for e in self._elements(v)]
        return []

    def _parameter_values(self, function: Function, name: str) -> list[ast.expr]:
        args = function.args
        positional = [a.arg for a in [*args.posonlyargs, *args.args]]
        if name not in positional and name not in [a.arg for a in args.kwonlyargs]:
            return []
        values: list[ast.expr] = []
        if name in positional:
            index = positional.index(name)
            defaults = args.defaults
            first_default = len(positional) - len(defaults)
            if index >= first_default:
                values.append(defaults[index - first_default])
            for call in self._calls_of(function.name):
                if index < len(call.args):
                    values.append(call.args[index])
        else:
            position = [a.arg for a in args.kwonlyargs].index(name)
            default = args.kw_defaults[position]
            if default is not None:
                values.append(default)
        for call in self._calls_of(function.name):
            values.extend(k.value for k in call.keywords if k.arg == name)
        values.extend(_parametrized(function, name))
        return values

    def _calls_of(self, function_name: str) -> list[ast.Call]:
        return [
            n
            for n in ast.walk(self.module.tree)
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id == function_name
        ]


def _parametrized(function: Function, name: str) -> list[ast.expr]:
    values: list[ast.expr] = []
    for decorator in function.decorator_list:
        if not (
            isinstance(decorator, ast.Call) and _dotted(decorator.func).endswith("parametrize")
        ):
            continue
        if len(decorator.args) < 2 or not isinstance(decorator.args[1], ast.List | ast.Tuple):
            continue
        names_node = decorator.args[0]
        if isinstance(names_node, ast.Constant) and isinstance(names_node.value, str):
            names = [n.strip() for n in names_node.value.split(",")]
        elif isinstance(names_node, ast.List | ast.Tuple):
            names = [
                e.value
                for e in names_node.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            ]
        else:
            continue
        if name not in names:
            continue
        index = names.index(name)
        for case in decorator.args[1].elts:
            if isinstance(case, ast.Call) and _dotted(case.func).endswith("param"):
                items = case.args
            elif len(names) > 1 and isinstance(case, ast.Tuple | ast.List):
                items = case.elts
            else:
                items = [case]
            if index < len(items):
                values.append(items[index])
    return values


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def _is_raises(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and _dotted(node.func) in {"pytest.raises", "raises"}


def _regex_template(pattern: str) -> str:
    """The literal parts of a regular expression; everything else becomes a HOLE."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            following = pattern[i + 1]
            out.append(HOLE if following.isalnum() else following)
            i += 2
            continue
        if char == "[":
            close = pattern.find("]", i + 2)
            out.append(HOLE)
            i = len(pattern) if close == -1 else close + 1
            continue
        out.append(HOLE if char in ".^$*+?{}()|" else char)
        i += 1
    return "".join(out)


# ------------------------------------------------------------------ what is test data

PARSING_METHODS = {
    "split",
    "rsplit",
    "partition",
    "rpartition",
    "splitlines",
    "strip",
    "lstrip",
    "rstrip",
    "startswith",
    "endswith",
    "count",
    "index",
    "find",
    "removeprefix",
    "removesuffix",
}


@dataclass(frozen=True)
class _Data:
    text: str
    module: str
    function: str | None  # the top-level function (decorators included) it is written in

    @property
    def plain_word(self) -> bool:
        """An ordinary word ("workspace", "alpha") says little outside its own test."""
        return re.fullmatch(r"[^\W\d]\w*", self.text) is not None


def _test_data(modules: list[_Module], required: set[int]) -> list[_Data]:
    """The strings the tests feed in (call arguments, literal assignments) and their lines."""
    pieces: set[_Data] = set()
    for module in modules:
        for node in module.tree.body:
            function = node.name if isinstance(node, Function) else None
            for text in _inputs(node, required, inside_input=False):
                for piece in {text.strip(), *(line.strip() for line in text.splitlines())}:
                    if any(c.isalnum() for c in piece):
                        pieces.add(_Data(piece, module.name, function))
    return sorted(pieces, key=lambda d: len(d.text), reverse=True)


def _inputs(node: ast.AST, required: set[int], inside_input: bool) -> Iterator[str]:
    if id(node) in required or _is_failure(node):
        return
    if isinstance(node, ast.Assert):
        # What an assert compares is required, not fed in; but the arguments of a call made
        # inside it (`assert run(ask(ConfirmRequest(command="make test")))`) are input.
        yield from _inputs(node.test, required, inside_input=False)
        return
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return  # a docstring
    if isinstance(node, ast.Constant | ast.JoinedStr):
        if inside_input:
            yield from _constant_parts(node)
        return
    if isinstance(node, ast.Call):
        name = _dotted(node.func)
        if name.endswith("parametrize"):
            yield from _each_input(node.args[1:], required)  # not the names, not the ids
            return
        if name.startswith("pytest.") and not name.endswith("param"):
            return  # fail/skip reasons, raises(match=), marks
        method = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if method in PARSING_METHODS:
            return  # parsing what a tool said: the separators are format, not data
        if isinstance(node.func, ast.Attribute):  # f"line {n}".ljust(...) feeds its receiver
            yield from _inputs(node.func.value, required, inside_input=True)
        yield from _each_input([*node.args, *(k.value for k in node.keywords)], required)
        return
    value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
    if isinstance(node, ast.For) and _is_pure_literal(node.iter):
        value = node.iter  # `for name in ("a+b.py", ...)`: the names the test creates
        yield from _each_input(node.body, required)
    if value is not None and _is_pure_literal(value):
        yield from _inputs(value, required, inside_input=True)
        return
    for child in ast.iter_child_nodes(node):
        yield from _inputs(child, required, inside_input)


def _is_failure(node: ast.AST) -> bool:
    """``raise AssertionError(...)``: a message to the student, not input. (A test's own
    ``raise OSError("disk full")`` is input: the tool passes it on.)"""
    return (
        isinstance(node, ast.Raise)
        and isinstance(node.exc, ast.Call)
        and _dotted(node.exc.func) == "AssertionError"
    )


def _each_input(nodes: Iterable[ast.AST], required: set[int]) -> Iterator[str]:
    for node in nodes:
        yield from _inputs(node, required, inside_input=True)


def _constant_parts(node: ast.Constant | ast.JoinedStr) -> Iterator[str]:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            yield node.value
        elif isinstance(node.value, bytes):  # file content written as bytes is data too
            yield node.value.decode("utf-8", "replace")
        return
    for value in node.values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            yield value.value


def _is_pure_literal(node: ast.AST) -> bool:
    """Text built from constants (SOURCE = "..." "...", [f"line {n}" for n in ...]), not an
    expected value computed from what a tool returned."""
    if isinstance(node, ast.comprehension):
        return True  # what a comprehension loops over does not make its text an expectation
    if isinstance(node, ast.Call | ast.Attribute | ast.Subscript):
        return False
    return all(_is_pure_literal(child) for child in ast.iter_child_nodes(node))


def _without_data(
    template: str, module: str, function: str | None, data: list[_Data], shared: set[str]
) -> str | None:
    """The template with test data cut out, or None when nothing stated is left.

    The whole literal is data when it occurs in an input of its own file or of a shared
    file (conftest, helpers). Parts of it are cut when they are inputs of its own file;
    a plain word only when its own test feeds it in."""
    visible = template.replace(HOLE, " ").strip()
    if not visible:
        return None
    for piece in data:
        if piece.module in (module, *shared) and visible in piece.text:
            return None
    if len(set(visible.replace(" ", ""))) == 1:
        return None  # "xxxx", "éé": generated output, not wording
    own = [piece for piece in data if piece.module == module]
    for piece in own:
        if piece.plain_word and piece.function != function:
            continue
        # whole words only: the data "run" is not part of "truncated"
        template = re.sub(rf"(?<![^\W_]){re.escape(piece.text)}(?![^\W_])", HOLE, template)
    words = set(re.findall(r"[^\W\d_]+", template))
    data_words = {w for piece in own for w in re.findall(r"[^\W\d_]+", piece.text)}
    if not words or words <= data_words:
        return None  # "print(" left of "print('hi')": every word comes from the input
    return template
