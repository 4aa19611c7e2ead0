"""Only results the grader sealed count: a result.json edited or written by anyone else is
graded again, whatever it says about itself."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from grader._cli import main
from grader._store import ResultStore
from grader.model import StageScore, SubmissionResult


def written(store: ResultStore, result: SubmissionResult) -> Path:
    store.seal(result)
    path = store.result_path(result.student)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(result.to_json(), encoding="utf-8")
    return path


def result(student: str = "ann", score: float = 5) -> SubmissionResult:
    stage = StageScore("8.1", "read", score, 20, optional=False)
    return SubmissionResult(
        student, "graded", "", "bwrap", [stage], input_digest="d", grading_key="k"
    )


def test_a_sealed_result_loads_as_written(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    written(store, result())
    loaded = store.load("ann")
    assert loaded is not None and loaded.score == 5


@pytest.mark.parametrize("field", ["score", "input_digest", "status"])
def test_an_edited_result_is_not_trusted(tmp_path: Path, field: str) -> None:
    store = ResultStore(tmp_path)
    path = written(store, result())
    data = json.loads(path.read_text())
    if field == "score":
        data["stages"][0]["score"] = 20
    else:
        data[field] = {"input_digest": "other", "status": "timeout"}[field]
    path.write_text(json.dumps(data, indent=2))
    assert store.load("ann") is None


def test_a_result_written_without_the_grader_or_copied_between_students_is_not_trusted(
    tmp_path: Path,
) -> None:
    store = ResultStore(tmp_path)
    forged = store.result_path("ben")
    forged.parent.mkdir(parents=True)
    forged.write_text(result("ben", 20).to_json())
    assert store.load("ben") is None
    written(store, result("ann", 20))
    forged.write_bytes(store.result_path("ann").read_bytes())  # a classmate's, renamed
    assert store.load("ben") is None


def test_the_key_is_private_and_outlives_the_store(tmp_path: Path) -> None:
    written(ResultStore(tmp_path), result())
    key = tmp_path / ".grader" / "key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / ".grader").stat().st_mode) == 0o700
    assert ResultStore(tmp_path).load("ann") is not None, "a rerun trusts its own results"
    key.chmod(0o644)
    with pytest.raises(PermissionError, match="0600"):
        ResultStore(tmp_path)


def test_held_credit_must_carry_the_seal(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.hold("ann", result(score=20))
    held = store.held("ann")
    assert held is not None and held.score == 20
    path = tmp_path / ".grader" / "held" / "ann.json"
    path.write_text(path.read_text().replace("20", "19"))
    assert store.held("ann") is None


def test_release_refuses_what_it_cannot_vouch_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ResultStore(tmp_path)
    assert main(["release", "nobody", "--out", str(tmp_path)]) == 2
    message = capsys.readouterr().err
    assert "grade it first" in message
    assert str(tmp_path) in message, "the OUT path is printed whole, in one piece to copy"
    written(store, result("ann"))
    assert main(["release", "ann", "--out", str(tmp_path)]) == 2
    assert "not flagged" in capsys.readouterr().err
    flagged = result("ben")
    flagged.status = "flagged"
    written(store, flagged)
    store.hold("ben", result("ben", 20))
    text = store.result_path("ben").read_text()
    store.result_path("ben").write_text(text.replace('"score": 5', '"score": 20'))
    assert main(["release", "ben", "--out", str(tmp_path)]) == 2
    assert "grade it first" in capsys.readouterr().err, "an edited result is not the grader's"


def test_a_result_of_the_longest_graded_name_is_sealed_and_held(tmp_path: Path) -> None:
    # The grader's own files add a prefix or a suffix to the student's name: with 200 bytes
    # (the longest name intake grades) they stay within the usual 255-byte file name limit.
    store = ResultStore(tmp_path)
    name = "é" * 100
    written(store, result(name))
    store.hold(name, result(name))
    assert store.load(name) is not None and store.held(name) is not None
