"""The grading result model. Every report format is rendered from these objects."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["graded", "timeout", "crashed", "invalid", "flagged"]
TestStatus = Literal["passed", "failed", "not run"]


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


def truncate(text: str, limit: int = 4000) -> str:
    """Keep the start of a long text and say, visibly, how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… [truncated {len(text) - limit} characters]"
