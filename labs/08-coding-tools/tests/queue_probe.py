"""Watch MutationQueue.run to prove which queue a tool uses, and when its operation starts.
Keep this file as it is: grading uses its own copy."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from picourse.coding_tools import MutationQueue


@dataclass
class QueueProbe:
    calls: list[tuple[MutationQueue, str]] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    entered: asyncio.Event | None = None

    def install(self, monkeypatch: pytest.MonkeyPatch) -> QueueProbe:
        real_run = MutationQueue.run
        probe = self

        async def run(
            queue: MutationQueue, key: str, operation: Callable[[], Awaitable[Any]]
        ) -> Any:
            probe.calls.append((queue, key))
            if probe.entered is not None:
                probe.entered.set()

            async def observed() -> Any:
                probe.started.append(key)
                return await operation()

            return await real_run(queue, key, observed)

        monkeypatch.setattr(MutationQueue, "run", run)
        return self

    def arm(self) -> asyncio.Event:
        """Forget the operations seen so far; the event is set when the next run() begins."""
        self.started.clear()
        self.entered = asyncio.Event()
        return self.entered


async def hold_lane(
    queue: MutationQueue, key: str, holder: Callable[[], Awaitable[Any]]
) -> asyncio.Task[Any]:
    """Queue ``holder`` under ``key`` and return once it holds the lane (it has started)."""
    started = asyncio.Event()

    async def holding() -> Any:
        started.set()
        return await holder()

    task = asyncio.create_task(queue.run(key, holding))
    waiting = asyncio.create_task(started.wait())
    await asyncio.wait({task, waiting}, timeout=5, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    if task.done() and not task.cancelled() and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]  # an unfinished stage shows as itself
    assert started.is_set(), "MutationQueue.run never started an operation on a free key"
    return task
