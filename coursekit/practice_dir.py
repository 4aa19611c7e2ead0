"""A student's practice directory as the CLI sees it: its lab, its stages' state, its files."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from coursekit.lab import Lab, Stage, load_lab
from coursekit.layout import SCAFFOLD
from coursekit.runner import TestOutcome, TestRun, run_stage_tests

ANSWERS_FILE = ".copier-answers.yml"
STATE_DIR = ".practice"
StageState = Literal["passed", "failing", "not started"]


class PracticeDirError(Exception):
    """Not a practice directory, an unknown stage, missing tests: the message says what to do."""


@dataclass(frozen=True)
class StageResult:
    stage: Stage
    state: StageState
    outcomes: tuple[TestOutcome, ...]

    @property
    def required(self) -> list[TestOutcome]:
        """The tests that decide the stage; challenge tests are optional."""
        return [o for o in self.outcomes if not o.challenge]

    @property
    def first_failure(self) -> TestOutcome | None:
        return next((o for o in self.required if not o.passed), None)


class PracticeDir:
    def __init__(self, root: Path, lab: Lab) -> None:
        self.root = root
        self.lab = lab

    @classmethod
    def find(cls, start: Path | None = None) -> PracticeDir:
        """The practice directory containing ``start`` (default: the current directory)."""
        here = (start or Path.cwd()).resolve()
        for candidate in (here, *here.parents):
            answers = candidate / ANSWERS_FILE
            if answers.is_file():
                lab = load_lab(_answer(answers, "chapter"))
                directory = cls(candidate, lab)
                if not (candidate / "tests").is_dir():
                    raise PracticeDirError(
                        f"{candidate / 'tests'} is missing. Create a fresh practice directory "
                        "and copy your modules into it."
                    )
                return directory
        raise PracticeDirError(
            f"{here} is not inside a practice directory (no {ANSWERS_FILE} found). Run this in "
            "one, pass --dir, or create one with: python practice.py 08 DIR"
        )

    def stage(self, stage_id: str) -> Stage:
        try:
            return self.lab.stage(stage_id)
        except KeyError:
            known = ", ".join(s.id for s in self.lab.stages)
            raise PracticeDirError(f"Unknown stage {stage_id!r}. Stages: {known}.") from None

    def is_pristine(self, stage: Stage) -> bool:
        """True while every module of the stage is still the stub it started as."""
        return all(
            (self.root / m).is_file()
            and (self.root / m).read_bytes() == (SCAFFOLD / "template" / m).read_bytes()
            for m in stage.modules
        )

    def run(self, stages: list[Stage] | None = None, *, extra: tuple[str, ...] = ()) -> TestRun:
        return run_stage_tests(self.root, stages or list(self.lab.stages), extra=extra)

    def results(self, run: TestRun, stages: list[Stage] | None = None) -> list[StageResult]:
        results = []
        for stage in stages or list(self.lab.stages):
            outcomes = tuple(run.in_file(stage.tests))
            required = [o for o in outcomes if not o.challenge]
            if required and all(o.passed for o in required):
                state: StageState = "passed"
            elif self.is_pristine(stage):
                state = "not started"
            else:
                state = "failing"
            results.append(StageResult(stage, state, outcomes))
        return results

    def backup(self, stage: Stage) -> Path:
        """Copy the stage's modules into .practice/backups/<stage>-<time>/ and return it."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = self.root / STATE_DIR / "backups" / f"{stage.id}-{stamp}"
        suffix = 1
        while target.exists():
            suffix += 1
            target = target.with_name(f"{stage.id}-{stamp}-{suffix}")
        for module in stage.modules:
            source = self.root / module
            if source.exists():
                (target / module).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / module)
        return target

    def backups(self, stage: Stage) -> list[Path]:
        """The stage's backups, oldest first (see ``backup`` for their names)."""
        folder = self.root / STATE_DIR / "backups"
        found = folder.glob(f"{stage.id}-*") if folder.is_dir() else []

        def order(path: Path) -> tuple[str, int]:
            stamp = path.name[len(stage.id) + 1 :]
            date, _, rest = stamp.partition("-")
            clock, _, suffix = rest.partition("-")
            return (f"{date}-{clock}", int(suffix) if suffix.isdigit() else 1)

        return sorted((p for p in found if p.is_dir()), key=order)

    def holds(self, stage: Stage, backup: Path) -> bool:
        """Whether the stage's modules are exactly what ``backup`` keeps."""
        for module in stage.modules:
            saved, current = backup / module, self.root / module
            if saved.is_file() != current.is_file():
                return False
            if saved.is_file() and saved.read_bytes() != current.read_bytes():
                return False
        return True

    def restore_backup(self, stage: Stage, backup: Path) -> None:
        for module in stage.modules:
            saved = backup / module
            if saved.is_file():
                shutil.copyfile(saved, self.root / module)

    def restore_stub(self, stage: Stage) -> None:
        for module in stage.modules:
            shutil.copyfile(SCAFFOLD / "template" / module, self.root / module)

    # A small plain-text state file, as rustlings keeps one.
    def hints_seen(self, stage: Stage) -> int:
        return self._state().get(f"hints {stage.id}", 0)

    def set_hints_seen(self, stage: Stage, count: int) -> None:
        state = self._state()
        state[f"hints {stage.id}"] = count
        path = self.root / STATE_DIR / "state.txt"
        path.parent.mkdir(exist_ok=True)
        lines = [STATE_HEADER] + [f"{key} {value}" for key, value in sorted(state.items())]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def _state(self) -> dict[str, int]:
        path = self.root / STATE_DIR / "state.txt"
        state: dict[str, int] = {}
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                key, _, value = line.rpartition(" ")
                if key and not line.startswith("#") and value.isdigit():
                    state[key] = int(value)
        return state


STATE_HEADER = "# DON'T EDIT THIS FILE: practice.py keeps which hints you have seen here."


def _answer(path: Path, key: str) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        name, _, value = line.partition(":")
        if name.strip() == key:
            return value.strip().strip("'\"")
    raise PracticeDirError(
        f"{path} does not say which {key} it belongs to; recreate the directory."
    )
