"""Mutation-testing campaign: mutmut over the reference solution, against the lab suite.

    .venv/bin/python tools/mutation_campaign.py --stage 8.2          # one stage
    .venv/bin/python tools/mutation_campaign.py                      # every stage (hours)
    .venv/bin/python tools/mutation_campaign.py --stage 8.1 --own-tests --max-children 2
    .venv/bin/python tools/mutation_campaign.py --stage 8.1 --workdir DIR --report  # again
    .venv/bin/python tools/mutation_campaign.py --stage 8.5 --function _despite_cancellation

It builds a solved practice directory (the scaffold, the lab tests and every stage's
solution, exactly as ``practice.py 08 DIR --solution`` does), tells mutmut to mutate the
modules that ``lab.toml`` lists for the chosen stages, runs ``mutmut run`` there at low
priority, and prints a per-stage report: mutants, killed, timeouts, survivors, score.

A survivor is either a missing test or an equivalent mutant (no correct test can tell it
from the solution). Equivalent ones are listed in ``tools/mutmut_equivalents.toml`` with a
one-line reason and the identity the report prints (``function:diff-hash``, stable when
lines move); the report counts them apart and the score leaves them out:
score = (killed + timeouts) / (mutants - equivalent). Mutants no test reaches count as
survivors. The exit status is 1 while an unexplained survivor remains.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from coursekit import Lab, load_lab
from coursekit.assemble import assemble_practice_dir
from coursekit.lab import Stage

EQUIVALENTS = Path(__file__).with_name("mutmut_equivalents.toml")
DETECTED = {"killed", "timeout"}
# Every process of a run inherits this variable: mutmut kills a mutant's test run at its
# timeout, and whatever that run had started (a lab test's grandchild) is found by it.
RUN_MARKER = "PICOURSE_MUTATION_CAMPAIGN"


@dataclass(frozen=True)
class Mutant:
    name: str  # mutmut's name: dotted.module.x_function__mutmut_N
    module: str  # the practice-directory path lab.toml uses
    status: str  # mutmut's word: killed, survived, timeout, no tests, ...
    diff: str

    @property
    def identity(self) -> str:
        """``function:hash`` of the changed lines: survives renumbering and moved lines."""
        changed = [
            line[0] + line[1:].strip()
            for line in self.diff.splitlines()
            if line[:1] in "+-" and not line.startswith(("+++", "---"))
        ]
        digest = hashlib.sha256("\n".join([self.module, *changed]).encode()).hexdigest()
        return f"{self.function}:{digest[:12]}"

    @property
    def key(self) -> tuple[str, str]:
        return (self.module, self.identity)

    @property
    def function(self) -> str:
        return mutated_function(self.name)


@dataclass
class StageReport:
    stage: Stage
    mutants: list[Mutant] = field(default_factory=list)
    equivalent: list[Mutant] = field(default_factory=list)

    @property
    def counts(self) -> Counter[str]:
        return Counter(m.status for m in self.mutants if m not in self.equivalent)

    @property
    def survivors(self) -> list[Mutant]:
        return [m for m in self.mutants if m.status not in DETECTED and m not in self.equivalent]

    @property
    def score(self) -> float | None:
        judged = len(self.mutants) - len(self.equivalent)
        detected = sum(self.counts[s] for s in DETECTED)
        return None if judged == 0 else detected / judged


def dotted(module: str) -> str:
    """``src/picourse/coding_tools/read.py`` -> ``picourse.coding_tools.read``."""
    return module.removeprefix("src/").removesuffix(".py").replace("/", ".")


def mutated_function(name: str) -> str:
    """mutmut's name of a mutant's function: ``x_run_bash``, ``xǁMutationQueueǁrun``."""
    return name.rsplit(".", 1)[-1].split("__mutmut_")[0]


def function_patterns(names: list[str]) -> list[str]:
    """Patterns of mutmut's names of the mutants of the functions or methods ``names``
    (``….x_run_bash__mutmut_3``, ``….xǁMutationQueueǁrun__mutmut_3``)."""
    return [p for n in names for p in (f"*.x_{n}__mutmut_*", f"*ǁ{n}__mutmut_*")]


def is_one_of(function: str, names: list[str] | None) -> bool:
    """Whether mutmut's ``function`` is one of ``names``; every function when None."""
    return not names or any(function == f"x_{n}" or function.endswith(f"ǁ{n}") for n in names)


def load_equivalents(path: Path = EQUIVALENTS) -> dict[tuple[str, str], str]:
    """(module, identity) -> reason, from the committed list of equivalent survivors."""
    data = tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    entries = data.get("equivalent", [])
    incomplete = [e for e in entries if not all(e.get(k) for k in ("module", "identity", "reason"))]
    if incomplete:
        raise SystemExit(
            f"{path.name}: every entry needs module, identity and reason: {incomplete}"
        )
    return {(e["module"], e["identity"]): e["reason"] for e in entries}


def mutmut_config(modules: list[str], marker: str | None, with_challenge: bool) -> str:
    """The [tool.mutmut] table for the practice directory's pyproject.toml."""
    selection = ["tests"]
    expression = " and ".join(
        part for part in (marker, None if with_challenge else "not challenge") if part
    )
    if expression:
        selection += ["-m", expression]
    return "\n".join(
        [
            "",
            "[tool.mutmut]",
            'source_paths = ["src"]',
            f"only_mutate = {json.dumps(modules)}",
            f"pytest_add_cli_args_test_selection = {json.dumps(selection)}",
            # the bash tests kill process groups on purpose; a stray title does no harm
            "use_setproctitle = false",
            "",
        ]
    )


def prepare(lab: Lab, directory: Path, modules: list[str], args: argparse.Namespace) -> None:
    assemble_practice_dir(lab, directory, solved_stages=[s.id for s in lab.stages])
    marker = None
    if args.own_tests:
        markers = {s.marker for s in lab.stages for m in modules if m in s.modules}
        marker = " or ".join(sorted(markers))
        marker = f"({marker})" if len(markers) > 1 else marker
    with open(directory / "pyproject.toml", "a", encoding="utf-8") as file:
        file.write(mutmut_config(modules, marker, args.with_challenge))
    with open(directory / "tests" / "conftest.py", "a", encoding="utf-8") as file:
        file.write(_NO_SUBREAPER_AFTER_SESSION)


# mutmut runs some test sessions inside its own process, which then forks a worker per
# mutant and takes whatever os.wait() returns for a worker. The bash tool makes the process
# running it a child subreaper, so orphans of the workers' commands would come back to
# mutmut's process and be taken for workers (KeyError). After each session it is undone.
_NO_SUBREAPER_AFTER_SESSION = """

def pytest_unconfigure(config):
    import ctypes, sys
    from picourse.coding_tools import command_scope
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(36, 0, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        command_scope._subreaper_pid = None
"""


def mutmut_command() -> str:
    """mutmut beside this interpreter, else on PATH; it is an extra of its own."""
    beside = Path(sys.executable).with_name("mutmut")
    found = str(beside) if beside.exists() else shutil.which("mutmut")
    if found is None:
        raise SystemExit(
            "mutmut is not installed: .venv/bin/pip install -e '.[mutation]' (it is not part "
            "of the dev tools, which the test suite needs)"
        )
    return found


def mutmut(directory: Path, *arguments: str, log: Path | None = None) -> str:
    command = [mutmut_command(), *arguments]
    if log is None:
        done = subprocess.run(command, cwd=directory, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")
        return done.stdout
    with open(log, "w", encoding="utf-8") as output:
        status = subprocess.run(command, cwd=directory, stdout=output, stderr=subprocess.STDOUT)
    if status.returncode != 0:
        raise SystemExit(f"mutmut run failed (exit {status.returncode}); see {log}")
    return ""


def reap(token: str) -> int:
    """Kill what a run left behind (found by the variable it inherited); how many."""
    left = []
    for process in psutil.process_iter():
        try:
            if process.pid != os.getpid() and process.environ().get(RUN_MARKER) == token:
                process.kill()
                left.append(process)
        except psutil.Error:
            continue
    psutil.wait_procs(left, timeout=5)
    return len(left)


def collect(directory: Path, modules: list[str], functions: list[str] | None) -> list[Mutant]:
    by_prefix = {dotted(m) + ".": m for m in modules}
    mutants = []
    for line in mutmut(directory, "results", "--all", "true").splitlines():
        name, _, status = line.strip().rpartition(": ")
        module = next((m for p, m in by_prefix.items() if name.startswith(p)), None)
        if not name or module is None:
            continue
        if not is_one_of(mutated_function(name), functions):
            continue
        diff = mutmut(directory, "show", name) if status not in DETECTED else ""
        mutants.append(Mutant(name, module, status, diff))
    return mutants


def report(
    stages: list[Stage],
    mutants: list[Mutant],
    known: dict[tuple[str, str], str],
    functions: list[str] | None = None,
) -> int:
    reports = [StageReport(s, [m for m in mutants if m.module in s.modules]) for s in stages]
    unexplained = 0
    print(
        f"\n{'stage':<6} {'mutants':>7} {'killed':>6} {'timeout':>7} {'survived':>8} "
        f"{'equiv':>5} {'score':>6}"
    )
    for r in reports:
        r.equivalent = [m for m in r.mutants if m.status not in DETECTED and m.key in known]
        c, score = r.counts, r.score
        shown = "-" if score is None else f"{score:.1%}"
        print(
            f"{r.stage.id:<6} {len(r.mutants):>7} {c['killed']:>6} {c['timeout']:>7} "
            f"{len(r.survivors):>8} {len(r.equivalent):>5} {shown:>6}"
        )
    for r in reports:
        for m in r.equivalent:
            print(f"\n[{r.stage.id}] equivalent {m.identity} ({m.name}): {known[m.key]}")
        for m in r.survivors:
            unexplained += 1
            changed = [ln for ln in m.diff.splitlines()[3:] if ln[:1] in "+-"]
            print(f"\n[{r.stage.id}] {m.status.upper()} {m.identity}  ({m.name})")
            print("    " + "\n    ".join(changed))
    run_modules = {m.module for m in mutants}
    run_keys = {m.key for m in mutants}
    stale = sorted(
        k
        for k in known
        if k[0] in run_modules and k not in run_keys and is_one_of(k[1].split(":")[0], functions)
    )
    if stale:
        print(f"\n{EQUIVALENTS.name}: entries that match no mutant of this run (stale?): {stale}")
    if unexplained:
        print(
            f"\n{unexplained} survivor(s): add a test that kills each, or list it in "
            f"tools/{EQUIVALENTS.name} with its identity and a one-line reason."
        )
    return 1 if unexplained else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", action="append", help="a stage id (repeat); default: all")
    parser.add_argument("--module", action="append", help="only this module path (repeat)")
    parser.add_argument("--max-children", type=int, default=2, help="parallel mutants (2)")
    parser.add_argument(
        "--own-tests",
        action="store_true",
        help="run only the tests of the modules' stages (faster, weaker)",
    )
    parser.add_argument(
        "--with-challenge",
        action="store_true",
        help="also run the challenge tests (slow: one writes 768 MiB sparse)",
    )
    parser.add_argument(
        "--function",
        action="append",
        help="only the mutants of this function or method (repeat): one that changed",
    )
    parser.add_argument("--workdir", type=Path, help="keep the run here (default: temporary)")
    parser.add_argument("--nice", type=int, default=10, help="niceness increment (10)")
    parser.add_argument(
        "--report", action="store_true", help="only report again on the run kept in --workdir"
    )
    args = parser.parse_args(argv)

    lab = load_lab("08")
    stages = [lab.stage(s) for s in args.stage] if args.stage else list(lab.stages)
    modules = [m for s in stages for m in s.modules if not args.module or m in args.module]
    if not modules:
        parser.error(f"no module selected; stage modules: {[m for s in stages for m in s.modules]}")
    if args.report:
        if args.workdir is None or not (args.workdir / "mutants").is_dir():
            parser.error("--report needs the --workdir of an earlier run")
        mutants = collect(args.workdir, modules, args.function)
        return report(stages, mutants, load_equivalents(), args.function)
    mutmut_command()  # before any work: say how to install it
    os.nice(args.nice)
    os.environ[RUN_MARKER] = token = uuid.uuid4().hex
    if args.workdir is not None and args.workdir.exists():
        parser.error(f"{args.workdir} exists; give a new directory or remove it")
    scratch = None if args.workdir else Path(tempfile.mkdtemp(prefix="mutation-campaign-"))
    directory = args.workdir if scratch is None else scratch / "solved"
    try:
        prepare(lab, directory, modules, args)
        log = directory / "mutmut-run.log"
        print(f"mutating {len(modules)} module(s) in {directory} (log: {log}) ...", flush=True)
        try:
            names = function_patterns(args.function or [])
            mutmut(directory, "run", "--max-children", str(args.max_children), *names, log=log)
        finally:
            if left := reap(token):
                print(f"killed {left} process(es) that the test runs left behind")
        mutants = collect(directory, modules, args.function)
        return report(stages, mutants, load_equivalents(), args.function)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
