"""The grading result model. Every report format is rendered from these objects."""

from __future__ import annotations

import json
import unicodedata
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

# "error" is the grader's own failure (never the student's): it scores nothing, says why, and
# a rerun grades the submission again.
Status = Literal["graded", "timeout", "crashed", "invalid", "flagged", "error"]
TestStatus = Literal["passed", "failed", "not run"]

REASON_LIMIT = 2000
MESSAGE_LIMIT = 4000


@dataclass(frozen=True)
class TestResult:
    __test__ = False  # not a pytest test class, despite the name

    nodeid: str
    stage: str
    challenge: bool
    status: TestStatus
    message: str  # why it failed ('' when passed), already truncated
    points: float
    max_points: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", truncate(self.message, MESSAGE_LIMIT))

    @property
    def name(self) -> str:
        return self.nodeid.split("::", 1)[-1]


@dataclass(frozen=True)
class StageScore:
    stage: str
    title: str
    score: float
    max_score: float
    optional: bool


@dataclass(frozen=True)
class Diagnosed:
    """The catalogued mistake a stage's failures look like (see coursekit.mistakes)."""

    stage: str
    mistakes: list[str]  # mutant names in lab.toml; more than one on a tie
    text: str  # what the student is told: the mistake and the invariant
    similarity: float


@dataclass
class SubmissionResult:
    student: str
    status: Status
    reason: str  # for every status but graded: what happened, in a sentence
    isolation: str  # "bwrap" or "rlimits"
    stages: list[StageScore] = field(default_factory=list)
    tests: list[TestResult] = field(default_factory=list)
    bonus: float = 0.0  # challenge tests (1 point each) and optional stages
    max_bonus: float = 0.0
    input_digest: str = ""
    grading_key: str = ""
    seconds: float = 0.0
    diagnoses: list[Diagnosed] = field(default_factory=list)

    def __setattr__(self, name: str, value: Any) -> None:
        # A reason is built from exception messages and student output: whatever it holds, it
        # stays short and encodable, so no report can fail on it.
        if name == "reason" and isinstance(value, str):
            value = truncate(value, REASON_LIMIT)
        super().__setattr__(name, value)

    # score and max_score count the core stages; optional (extension) stages and challenge
    # tests are in bonus and max_bonus.
    @property
    def score(self) -> float:
        return round(sum(s.score for s in self.stages if not s.optional), 2)

    @property
    def max_score(self) -> float:
        return round(sum(s.max_score for s in self.stages if not s.optional), 2)

    def to_json(self) -> str:
        data = asdict(self)
        data.update(score=self.score, max_score=self.max_score)
        return json.dumps(data, indent=2, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> SubmissionResult:
        data: dict[str, Any] = json.loads(text)
        data.pop("score", None)
        data.pop("max_score", None)
        data["stages"] = [StageScore(**s) for s in data["stages"]]
        data["tests"] = [TestResult(**t) for t in data["tests"]]
        data["diagnoses"] = [Diagnosed(**d) for d in data.get("diagnoses", [])]
        return cls(**data)


@dataclass(frozen=True)
class Skipped:
    """An entry of the submissions folder that is no submission, and why."""

    entry: str
    reason: str


def truncate(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """Keep the start of a long text and say, visibly, how much was cut. Lone surrogates
    (undecodable bytes in an exception message or a file name) become visible escapes, so the
    text always encodes as UTF-8."""
    if len(text) > limit:
        text = f"{text[:limit]}\n… [truncated {len(text) - limit} characters]"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def printable(text: str) -> str:
    """``text`` safe to print on a terminal: control and format characters (an escape
    sequence that moves the cursor or writes the clipboard) and undecodable bytes shown as
    escapes."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return "".join(
        c.encode("unicode_escape").decode("ascii") if unicodedata.category(c)[0] == "C" else c
        for c in text
    )
