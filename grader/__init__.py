"""Batch grading of chapter-08 submissions: ``python -m grader grade SUBMISSIONS --out DIR``.

Public surface: :func:`grade_submissions` and :class:`GradeOptions`; the rest is private.
"""

from grader._grade import GradeOptions, grade_submissions

__all__ = ["GradeOptions", "grade_submissions"]
