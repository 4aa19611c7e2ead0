"""The student's modules as the judge sees them: the pristine stubs' names, run elsewhere.

The judge imports ``picourse`` from a pristine copy, given modules included. A module that
students write is never executed here: it is built from the stub's syntax tree. Each
function of the stub becomes a call into the host (async where the stub's is), each class
a constructor in the host whose objects stay there, each literal constant keeps the stub's
value, and any other value (a module-level queue) is fetched from the host on first use.
Only the given modules construct a student class or use such a value; a test that does
(``MutationQueue()``, ``MutationQueue.run``) raises :class:`NeedsHost`.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from . import host_process, remote
from .needs_host import NeedsHost


class _RemoteClass(type):
    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls.__dict__.get("_grader_target") is None:
            raise NeedsHost(f"a test subclasses the student's {cls.__name__}")
        _from_given_code(sys._getframe(1), cls.__name__)
        return remote.call_sync(cls._grader_target, args, kwargs)

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("_"):  # pytest and inspect probe for dunders while collecting
            raise AttributeError(name)
        raise NeedsHost(f"the test looks inside the student's class {cls.__name__} ({name})")

    def __instancecheck__(cls, instance: Any) -> bool:
        raise NeedsHost(f"the test checks for an instance of the student's {cls.__name__}")

    def __subclasscheck__(cls, subclass: Any) -> bool:
        raise NeedsHost(f"the test checks for a subclass of the student's {cls.__name__}")


class _LazyValue:
    """A module-level object of the student's module, fetched when first used."""

    def __init__(self, target: dict[str, Any]) -> None:
        self._target = target
        self._value: Any = None

    def _resolve(self) -> Any:
        if self._value is None:
            self._value = remote.call_sync({**self._target, "get": True}, (), {})
        return self._value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        _from_given_code(sys._getframe(1), self._target["name"])
        return getattr(self._resolve(), name)


def _from_given_code(frame: Any, name: str) -> None:
    """The given modules may hold the student's objects (a ledger in the options); a test
    that works with one directly relies on how it is scheduled in its own process."""
    if not str(frame.f_globals.get("__name__", "")).startswith("picourse"):
        raise NeedsHost(f"the test works with the student's {name} directly")


def _build(module: ModuleType, tree: ast.Module) -> None:
    name = module.__name__
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            target = {"module": name, "name": node.name}
            function = remote.remote_function(
                target, isinstance(node, ast.AsyncFunctionDef), node.name
            )
            function.__module__ = name
            function.__doc__ = ast.get_docstring(node)
            setattr(module, node.name, function)
        elif isinstance(node, ast.ClassDef):
            namespace = {
                "__module__": name,
                "__doc__": ast.get_docstring(node),
                "_grader_target": {"module": name, "name": node.name},
            }
            setattr(module, node.name, _RemoteClass(node.name, (), namespace))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target_node in targets:
                if isinstance(target_node, ast.Name):
                    setattr(module, target_node.id, _value(name, target_node.id, node.value))


def _value(module: str, name: str, node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _LazyValue({"module": module, "name": name})


class _Loader(importlib.abc.Loader):
    def __init__(self, origin: str) -> None:
        self.origin = origin

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        with open(self.origin, encoding="utf-8") as source:
            _build(module, ast.parse(source.read(), self.origin))


class StudentModules(importlib.abc.MetaPathFinder):
    """Installed first on ``sys.meta_path`` in the judge."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in host_process.settings.student:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.origin is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, spec.origin, loader=_Loader(spec.origin)
        )


def install() -> None:
    sys.meta_path.insert(0, StudentModules())
