"""Known mistakes, recognised: each catalogued mutant's signature (the tests it fails) and
the diagnosis of a failure set by its nearest signature.

A signature is computed once per course release (``python -m grader signatures``) and kept
in ``labs/NN-*/mistakes.json`` with a key of the lab tests and ``lab.toml``: what a student
release ships, so students are diagnosed without the solution (or the mutants' patches,
which quote it and live with it). When the key no longer matches, the signatures are stale
and nothing is diagnosed: a diagnosis from other tests would be a guess. A change of the
solution or of a mutant's patch alone can change a signature too, but students and the
Gradescope bundle have no solution to hash: the file also records ``solution_key``, which
only the project's tests compare (a stale one fails them until the signatures are made again).

The measure is Jaccard similarity between the failing tests of a stage and a signature,
|F ∩ S| / |F ∪ S|. A match needs at least ``THRESHOLD`` and, when two mistakes come equally
close, both are named. A stage with any failure that is still the stub's "not implemented
yet" is unfinished, not mistaken, and gets no diagnosis: a catalogued mistake is the whole
stage written with one thing wrong, and a stub's failures can overlap a signature by chance.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from coursekit.assemble import assemble_practice_dir
from coursekit.lab import MUTANT_PATCHES, Lab, Mutant, Stage
from coursekit.layout import solution_root
from coursekit.runner import NOT_IMPLEMENTED, over_a_time_limit, run_lab_tests, run_stage_tests

THRESHOLD = 0.6
SIGNATURES_FILE = "mistakes.json"


@dataclass(frozen=True)
class Diagnosis:
    stage: Stage
    mistakes: tuple[Mutant, ...]  # the nearest catalogued mistakes (more than one on a tie)
    similarity: float

    @property
    def text(self) -> str:
        mistake = self.mistakes[0]
        alike = "; or: ".join(m.description for m in self.mistakes[1:])
        return (
            f"Your failures look like a known mistake: {mistake.description}"
            + (f" (or: {alike})" if alike else "")
            + f" The invariant: {mistake.invariant}"
        )


def test_key(nodeid: str) -> str:
    """'tests/test_lab8_1_read.py::test_x[a]' -> 'test_lab8_1_read.py::test_x[a]': the
    same test whoever ran it (practice.py, the grader, a platform)."""
    path, _, name = nodeid.partition("::")
    return f"{Path(path).name}::{name}"


def signature_key(lab: Lab, tests_dir: Path | None = None) -> str:
    """Changes whenever anything that decides a signature changes. ``tests_dir``: a
    practice directory's copy of the lab tests (the files the lab ships, read there)."""
    hasher = hashlib.sha256((lab.root / "lab.toml").read_bytes())
    for path in _python_files(lab.tests_dir):
        name = path.relative_to(lab.tests_dir)
        copy = (tests_dir or lab.tests_dir) / name
        hasher.update(str(name).encode())
        hasher.update(copy.read_bytes() if copy.is_file() else b"missing")
    return hasher.hexdigest()[:16]


def solution_key(lab: Lab) -> str:
    """Changes whenever the solution or its mutants' patches change: the code the
    signatures were made from (kept in the kit's checkout, never shipped to students)."""
    root = solution_root(lab.root.name)
    hasher = hashlib.sha256()
    for path in sorted([root / MUTANT_PATCHES, *_python_files(root)]):
        hasher.update(str(path.relative_to(root)).encode())
        hasher.update(path.read_bytes())
    return hasher.hexdigest()[:16]


def _python_files(root: Path) -> list[Path]:
    """The Python source under ``root``, sorted, without compiled caches."""
    return sorted(
        path for path in root.rglob("*.py") if path.is_file() and "__pycache__" not in path.parts
    )


def compute_signatures(
    lab: Lab, *, jobs: int = 2, progress: Callable[[Mutant, list[str]], None] | None = None
) -> dict[str, dict[str, list[str]]]:
    """Run every catalogued mutant against its stage's tests; the failing tests, sorted."""
    mutants = [m for stage in lab.stages for m in stage.mutants]
    everything = [s.id for s in lab.stages]

    def failing(mutant: Mutant) -> list[str]:
        with tempfile.TemporaryDirectory(prefix="signature-") as scratch:
            directory = assemble_practice_dir(
                lab, Path(scratch) / "mutant", solved_stages=everything, mutant=mutant
            )
            outcomes = run_stage_tests(directory, [lab.stage(mutant.stage)]).outcomes
            failed = {o.nodeid for o in outcomes if not o.passed}
            # A failure decided by wall-clock time may be the busy machine's doing: it joins
            # the signature only if it fails again in a run of those tests alone.
            timed = sorted(
                o.nodeid for o in outcomes if not o.passed and over_a_time_limit(o.message)
            )
            if timed:
                again = run_lab_tests(directory, extra=tuple(timed)).outcomes
                failed -= {o.nodeid for o in again if o.passed}
        found = sorted(test_key(nodeid) for nodeid in failed)
        if progress is not None:
            progress(mutant, found)
        return found

    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        results = list(pool.map(failing, mutants))
    finally:
        # Stopped (Ctrl-C, SIGTERM): the runs under way end and reap; none starts.
        pool.shutdown(wait=True, cancel_futures=True)
    signatures: dict[str, dict[str, list[str]]] = {s.id: {} for s in lab.stages}
    for mutant, found in zip(mutants, results, strict=True):
        signatures[mutant.stage][mutant.name] = found
    return signatures


def write_signatures(lab: Lab, signatures: dict[str, dict[str, list[str]]]) -> Path:
    path = lab.root / SIGNATURES_FILE
    document = {
        "key": signature_key(lab),
        "solution_key": solution_key(lab),
        "stages": signatures,
    }
    path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def load_signatures(
    lab: Lab, tests_dir: Path | None = None
) -> dict[str, dict[str, frozenset[str]]] | None:
    """The release's signatures, or None when missing or stale, or when ``tests_dir`` (the
    tests that produced the failures) differs from the tests they were made with."""
    try:
        document = json.loads((lab.root / SIGNATURES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("key") != signature_key(lab, tests_dir):
        return None
    return {
        stage: {name: frozenset(tests) for name, tests in mutants.items()}
        for stage, mutants in document.get("stages", {}).items()
    }


def diagnose(
    stage: Stage,
    failures: Iterable[tuple[str, str]],
    signatures: dict[str, dict[str, frozenset[str]]] | None,
) -> Diagnosis | None:
    """``failures``: (nodeid, message) of the stage's failing tests, challenge tests included."""
    failed = {test_key(nodeid): message for nodeid, message in failures}
    if not failed or signatures is None:
        return None
    if any(NOT_IMPLEMENTED in message for message in failed.values()):
        return None  # unfinished, not mistaken
    found = set(failed)
    scored = []
    for mutant in stage.mutants:
        signature = signatures.get(stage.id, {}).get(mutant.name)
        if signature:
            scored.append((len(found & signature) / len(found | signature), mutant))
    if not scored:
        return None
    best = max(score for score, _ in scored)
    if best < THRESHOLD:
        return None
    nearest = tuple(m for score, m in scored if score == best)
    return Diagnosis(stage, nearest, best)
