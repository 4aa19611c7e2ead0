"""The project's own scheduling: the tests of one grader module run on one xdist worker,
whatever pytest-xdist's ``loadgroup`` does with the pytest at hand (tests/conftest.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from types import SimpleNamespace

from coursekit.layout import COURSE_ROOT
from tests.conftest import GRADER_TESTS, LONGEST_FIRST, _ModuleFixturesMadeOnce, scope_of

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


def test_every_test_named_in_the_start_order_exists() -> None:
    # A renamed test would silently fall back to its collection order and start late.
    for prefix in LONGEST_FIRST:
        path, _, name = prefix.partition("::")
        source = COURSE_ROOT / path
        assert source.exists(), f"LONGEST_FIRST names {path}, which is gone: update it"
        if name:
            function = name.split("[", 1)[0]
            assert f"def {function}" in source.read_text(), (
                f"LONGEST_FIRST names {prefix}, but {path} has no test starting so: update it"
            )


class _Worker:
    """What the scheduler sees of an xdist worker: the tests it is sent, in order."""

    def __init__(self, number: int) -> None:
        self.gateway = SimpleNamespace(id=f"gw{number}")
        self.sent: list[list[int]] = []
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.append(list(indices))

    def shutdown(self) -> None:
        self.shutting_down = True


def test_a_long_test_waits_behind_a_short_one_never_behind_another_long_one() -> None:
    # Collected in LONGEST_FIRST's order: a grader module of three, three long single
    # tests, then short ones.
    collection = [
        *(f"{GRADER_TESTS}test_grading.py::test_{n}" for n in "abc"),
        "tests/cli/test_a.py::test_long_1",
        "tests/cli/test_a.py::test_long_2",
        "tests/cli/test_a.py::test_long_3",
        *(f"tests/runtime/test_b.py::test_short_{n}" for n in range(4)),
    ]
    config = SimpleNamespace(
        getvalue=lambda name: ["3*popen"] if name == "tx" else None,
        option=SimpleNamespace(loadscopereorder=False),
    )
    scheduler = _ModuleFixturesMadeOnce(config)
    workers = [_Worker(n) for n in range(3)]
    for worker in workers:
        scheduler.add_node(worker)
    for worker in workers:
        scheduler.add_node_collection(worker, collection)
    scheduler.schedule()
    names = [[[collection[i].split("::")[1] for i in batch] for batch in w.sent] for w in workers]
    assert names[0] == [["test_a", "test_b", "test_c"]], names
    assert names[1] == [["test_long_1"], ["test_short_3"]], (
        "a worker given one long test at the start must get a short one to wait behind it "
        f"(the queue's last), not the next long test: {names}"
    )
    assert names[2] == [["test_long_2"], ["test_short_2"]], names
    # Later, a worker that is running low takes the next in order: the long one.
    scheduler.mark_test_complete(workers[1], collection.index("tests/cli/test_a.py::test_long_1"))
    assert [collection[i] for i in workers[1].sent[-1]] == ["tests/cli/test_a.py::test_long_3"]
