"""Which tests the judge cannot decide: those that look inside the student's process.

A test that patches the process it runs in (``monkeypatch``), measures its memory
(``tracemalloc``), touches a student class or value other than by calling it, or hands
the student's code an object of a library (a ``rich`` console, a file) needs the
student's objects in its own process, and so does a test that says it watches the event
loop the tools run on (marked ``watches_the_event_loop``: in the judge the tools run on the
host's loop, which the test's own loop never waits for), or one that calls the student's
code from a thread of its own (``remote.py``). In the judge those uses raise
:class:`NeedsHost`, which is also recorded, so that catching it changes nothing: the test
is run again in the host (see ``hosted.py``) and earns only what an in-host test earns.
The decision depends on what the test does, never on a list of tests, and never on the
student's code.
"""

from __future__ import annotations

import contextvars
import os
import tracemalloc
from collections.abc import Callable
from typing import Any

# The marker of a test whose own event loop must run while a tool call runs (a task on it
# answers the command, say): only in the tools' process does a loop they block stop it.
WATCHES_THE_EVENT_LOOP = "watches_the_event_loop"
raised: list[str] = []
# Set while the judge decodes what the host sent or runs what the host asked it to run (a
# callback). The student's code must never decide where a test runs: a NeedsHost raised
# then is not recorded (the call or the callback fails instead).
for_the_host: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "grader_for_the_host", default=False
)


class NeedsHost(BaseException):
    """Not an ``Exception``: code under test that catches ``Exception`` cannot hide it."""

    def __init__(self, why: str) -> None:
        super().__init__(f"this test needs the student's objects in its own process: {why}")
        if not for_the_host.get():
            raised.append(why)


def _refuse(why: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise NeedsHost(why)

    return refuse


class RefusingMonkeyPatch:
    """The ``monkeypatch`` a test gets in the judge: a patch of this process would not
    reach the student's code, so any use of it means the test must run where that code
    lives."""

    def __getattr__(self, name: str) -> Any:
        raise NeedsHost(f"monkeypatch.{name} changes the process the tools run in")

    def undo(self) -> None:
        """Nothing was patched."""


def install_guards() -> None:
    """Make the judge's own process unobservable as if it were the student's."""
    tracemalloc.start = _refuse("tracemalloc measures the process the tools run in")
    # The file-creation mask is per process: set here, it would not reach the tools.
    os.umask = _refuse("os.umask sets the mask of the process the tools run in")
