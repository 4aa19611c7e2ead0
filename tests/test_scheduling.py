"""The project's own scheduling: the tests of one grader module run on one xdist worker,
whatever pytest-xdist's ``loadgroup`` does with the pytest at hand (tests/conftest.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict

from coursekit.layout import COURSE_ROOT
from tests.conftest import GRADER_TESTS, scope_of

# Fast tests of two grader modules, beside fast tests of another folder.
GRADER = [f"{GRADER_TESTS}test_results_store.py", f"{GRADER_TESTS}test_reports.py"]
OTHER = ["tests/runtime/test_tool.py"]


def test_each_grader_module_stays_on_one_worker_and_the_rest_spread() -> None:
    options = ("-v", "-p", "no:cacheprovider", "-n", "2")
    # The plugins the project's tests use, not every one installed (hypothesis alone costs
    # each of the three processes most of a second).
    plugins = ("-p", "xdist.plugin", "-p", "pytest_timeout")
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", *plugins, *options, *GRADER, *OTHER],
        cwd=COURSE_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert completed.returncode == 0, completed.stdout[-3000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, nodeid in re.findall(r"\[(gw\d+)\] \[\s*\d+%\] PASSED (\S+)", completed.stdout):
        workers[nodeid.split("::")[0]].add(worker)
    for module in GRADER:
        assert len(workers[module]) == 1, (
            f"the tests of {module} ran on {sorted(workers[module])}: its module fixtures "
            "(a graded class) would be made on each (see _ModuleFixturesMadeOnce in "
            "tests/conftest.py)"
        )
    assert workers[OTHER[0]], completed.stdout[-3000:]


def test_each_tools_module_is_kept_together_and_the_lab_suite_spreads() -> None:
    module = "tests/tools/test_read_faults.py"
    assert scope_of(f"{module}::test_fault_scenario[a]") == module
    lab_suite = "tests/chapter08/test_lab_suite.py::test_the_solution_passes_every_lab_test"
    assert scope_of(lab_suite) == lab_suite, "a long module of cheap fixtures spreads"
