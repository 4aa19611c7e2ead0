"""The lab's own reaper (``tests/reaping.py`` of a lab), for commands that run lab tests
outside pytest's fixtures: one copy of the logic, shipped with the tests it serves."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from coursekit.lab import Lab


def lab_reaping(lab: Lab) -> ModuleType:
    """The lab's reaping module: ``snapshot()`` before, ``reap(before, directory)`` after."""
    source = lab.tests_dir / "reaping.py"
    spec = importlib.util.spec_from_file_location(f"_reaping_{lab.root.name}", source)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {source}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
